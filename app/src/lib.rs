//! `nbody-interop` application library: CLI, simulation backends, renderer, overlay and bench.
//!
//! The binary (`src/main.rs`) is a thin `main` over [`run`].

pub mod backend;
pub mod cli;
pub mod sim;
