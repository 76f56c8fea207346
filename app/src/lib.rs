//! `nbody-interop` application library: the layers of the app, bottom to top (each imports only
//! those below it; `ARCHITECTURE.md` holds the table, `tests/architecture.rs` checks it):
//!
//! [`sim`] (physics, no GL or CUDA) and [`trace`] (the driver-call recorder) → [`gfx`] (GL only)
//! → [`cuda`] (session, settings, kernels) → [`backend`] (CPU and CUDA backends, selection, step
//! mode's state machine) → [`teach`] (the mistake lab) → [`ui`] (egui overlay) → [`cli`] (clap
//! types) → [`demo`] (scene, frame, headless and windowed loops) → [`bench`](mod@bench) → [`probe`]
//! (context-switch probe), and [`info`]. [`stop`] (interrupts) and [`provenance`] (where a raw
//! result came from; atomic writes) sit at the bottom, beside `sim`.
//!
//! The binary (`src/main.rs`) is a thin `main` over these.

pub mod backend;
pub mod bench;
pub mod cli;
pub mod cuda;
pub mod demo;
pub mod doctor;
pub mod gfx;
pub mod info;
pub mod libraries;
pub mod probe;
pub mod provenance;
pub mod stop;
pub mod teach;
pub mod trace;
pub mod ui;
