//! The app's CUDA layer: the session (driver, context on the GL context's device, stream), the
//! settings users pick, the N-body kernels loaded into one module (`kernel_set`, the `kernels`
//! crate's typed launches; its `launch_rule` picks their launch), the leapfrog steppers that launch them (`gpu_stepper` fp32,
//! `gpu_stepper_f64`, and `integrator`, the trait a backend runs them by), and the step over slices on one or
//! more GPUs (`slices`: NCCL or peer-copy gather).
//! No GL drawing and no backend logic here: [`crate::backend`] builds on it.

pub mod clock;
pub mod density;
pub mod gpu_stepper;
pub mod gpu_stepper_f64;
pub mod integrator;
pub mod kernel_set;
pub mod session;
pub mod settings;
pub mod slices;
pub mod slices_facts;
pub mod tree;
