//! Probes that measure one mechanism of interop on its own: [`switch`] times the CUDA↔GL
//! context switch with work too small to matter; [`scale`] times the step split over GPUs
//! (the slices, their gather and the scaling against one GPU); [`accuracy`] measures the tree
//! solvers' force error against the float64 direct sum, on the CPU or ([`accuracy_gpu`]) the GPU.

pub mod accuracy;
pub mod accuracy_gpu;
pub mod scale;
pub mod switch;
