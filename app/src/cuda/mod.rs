//! The app's CUDA layer: the session (driver, context on the GL context's device, stream), the
//! settings users pick, and the N-body kernels with the leapfrog stepper that launches them.
//! No GL drawing and no backend logic here: [`crate::backend`] builds on it.

pub mod clock;
pub mod kernels;
pub mod session;
pub mod settings;
