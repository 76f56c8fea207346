//! The overlay (egui only): the controls, timings, plots and panels of the demo, and the Workflow
//! panel. A UI pass reads what it shows from values gathered before it and returns
//! [`action::Action`]s; it never touches GL or CUDA.

pub mod action;
pub mod fonts;
pub mod overlay;
pub mod rows;
pub mod timeline;
mod widgets;
pub mod workflow;

/// `s` with arrows written as `->`: egui's bundled proportional font has no U+2192.
pub fn bundled_glyphs(s: &str) -> String {
    s.replace('→', "->")
}
