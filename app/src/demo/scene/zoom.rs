//! The overlay's zoom: `--ui-scale`, else a zoom that grows with the target's height.

use crate::cli::DemoArgs;

/// The overlay's zoom for a target `height_px` physical pixels high at `pixels_per_point` (the
/// window system's scale factor): 1 up to 1080 logical pixels, then growing with the height (in
/// steps of 1/4) up to 2 at 2160 and above, so a 4K window's overlay is as readable as a 1080p
/// one's. The window system's own HiDPI scale comes on top (egui multiplies the two).
pub fn auto_ui_zoom(height_px: u32, pixels_per_point: f32) -> f32 {
    let logical = height_px as f32 / pixels_per_point.max(0.1);
    ((logical / 1080.0).clamp(1.0, 2.0) * 4.0).floor() / 4.0
}

/// The overlay's zoom that `args` give a target `height_px` high at `pixels_per_point`:
/// `--ui-scale`, else [`auto_ui_zoom`] ([`super::Scene::ui_zoom_for`]; `Scene::new` before the scene).
pub(super) fn ui_zoom(args: &DemoArgs, height_px: u32, pixels_per_point: f32) -> f32 {
    args.ui_scale.unwrap_or_else(|| auto_ui_zoom(height_px, pixels_per_point))
}
