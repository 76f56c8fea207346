//! `nbody-interop` application library: CLI, simulation backends, renderer, overlay and bench.
//!
//! The binary (`src/main.rs`) is a thin `main` over [`run`].

pub mod backend;
pub mod backend_cpu;
pub mod bench;
pub mod cli;
pub mod cuda_backend;
pub mod demo;
pub mod external;
pub mod gfx;
pub mod info;
pub mod lab;
pub mod overlay;
pub mod select;
pub mod sim;
pub mod trace;
pub mod workflow;
