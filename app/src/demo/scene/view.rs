//! The frame's view (`--view`, key `v`): points or the density view, and the density pass's time.

use super::Scene;
use crate::cuda::settings::View;

impl Scene {
    /// Switch between the points and the density view (key `v`; the overlay has the same box).
    pub fn toggle_view(&mut self) {
        let c = &mut self.overlay.controls;
        c.view = if c.view == View::Points { View::Density } else { View::Points };
    }

    /// GPU time of the last density pass (ms), while the density view is on.
    pub(super) fn density_ms(&mut self) -> Option<f64> {
        let on = self.overlay.controls.view == View::Density;
        self.backend.as_deref_mut().and_then(|b| b.cuda_mut()).filter(|_| on).and_then(|c| c.density_ms())
    }
}
