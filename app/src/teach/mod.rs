//! Teaching tools that make driver calls on purpose: the mistake lab. Its deliberate raw calls
//! (through `interop`'s layer-2 `Api`, where the safe types make the mistake impossible) are fenced
//! in [`lab`]; the API trace they are shown with is [`crate::trace`]. How the lab's results are
//! printed — listed, as a quiz ([`quiz`]: predictions asked and judged), or replayed from a recorded
//! file ([`recording`]) without a GPU — is [`replay`];
//! the `lab` subcommand that chooses between them is [`command`].

pub mod command;
pub mod lab;
pub mod quiz;
pub mod recording;
pub mod replay;
