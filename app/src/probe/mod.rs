//! Probes that measure one mechanism of interop on its own: [`switch`] times the CUDA↔GL
//! context switch with work too small to matter.

pub mod switch;
