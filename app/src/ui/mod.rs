//! The overlay (egui only): the controls, timings, plots and panels of the demo, and the Workflow
//! panel. A UI pass reads what it shows from values gathered before it and returns
//! [`overlay::Action`]s; it never touches GL or CUDA.

pub mod overlay;
pub mod timeline;
pub mod workflow;
