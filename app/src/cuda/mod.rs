//! The app's CUDA layer: the session (driver, context on the GL context's device, stream), the
//! settings users pick, the N-body kernels with the leapfrog stepper that launches them, and the
//! split step over several GPUs (`split`: slices, NCCL or peer-copy gather).
//! No GL drawing and no backend logic here: [`crate::backend`] builds on it.

pub mod clock;
pub mod kernels;
pub mod session;
pub mod settings;
pub mod split;
