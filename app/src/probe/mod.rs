//! Probes that measure one mechanism of interop on its own: [`switch`] times the CUDA↔GL
//! context switch with work too small to matter; [`scale`] times the step split over GPUs
//! (the slices, their gather and the scaling against one GPU); [`accuracy`] measures the CPU
//! tree solver's force error against the float64 direct sum.

pub mod accuracy;
pub mod scale;
pub mod switch;
