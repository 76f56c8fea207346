//! What the device panel shows of bodies split over slices and GPUs ([`SlicesFacts`]).

/// The bodies over slices and GPUs, for the device panel.
#[derive(Debug, Clone)]
pub struct SlicesFacts {
    /// The distinct GPUs.
    pub gpus: Vec<i32>,
    /// Slices and bodies in each.
    pub slices: usize,
    /// Bodies in a slice.
    pub len: usize,
    /// Each slice's device.
    pub devices: Vec<i32>,
    /// The GPU that draws.
    pub render: i32,
    /// Whether the render GPU computes a slice too.
    pub render_computes: bool,
    /// How the slices share positions.
    pub gather: String,
}
