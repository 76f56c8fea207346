//! The overlay panel's width across window resizes. egui keeps a panel's last width, so a window
//! shrunk narrower than the panel squeezes it, and the squeezed width stayed when the window grew
//! again, its values cut off. [`PanelWidth`] keeps the width the user had (the default, or the
//! one they dragged the panel's edge to) and gives it back once the window has room for it.

/// The overlay panel's default width (outer, points).
pub const DEFAULT_WIDTH: f32 = 360.0;

/// Widths closer than this (points) are the same: egui rounds a panel's edge to the pixel grid.
const SLACK: f32 = 1.0;

/// The width the overlay panel should have, and whether the window squeezed it (see the module
/// docs). The overlay asks [`PanelWidth::restore`] before each pass and tells
/// [`PanelWidth::shown`] after it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PanelWidth {
    /// The width the user had: [`DEFAULT_WIDTH`], or the last one they dragged it to (points).
    wanted: f32,
    /// The width of the last pass (points).
    last: f32,
    /// The last pass showed the panel narrower than `wanted` because the window was.
    squeezed: bool,
}

impl Default for PanelWidth {
    fn default() -> Self {
        Self { wanted: DEFAULT_WIDTH, last: DEFAULT_WIDTH, squeezed: false }
    }
}

impl PanelWidth {
    /// Before a pass whose screen is `screen` points wide: the width to give the panel now — the
    /// wanted one, or the whole screen where that is narrower — when the window squeezed it and
    /// has grown since; `None`: the panel keeps the width egui has for it.
    pub fn restore(&self, screen: f32) -> Option<f32> {
        (self.squeezed && screen > self.last + SLACK).then(|| self.wanted.min(screen))
    }

    /// After a pass that showed the panel `width` points wide on a screen `screen` points wide:
    /// squeezed by the screen, or else the width the user wants (a drag of its edge).
    pub fn shown(&mut self, width: f32, screen: f32) {
        self.last = width;
        if width + SLACK < self.wanted && width + SLACK >= screen {
            self.squeezed = true;
        } else {
            self.squeezed = false;
            if (width - self.wanted).abs() > SLACK {
                self.wanted = width;
            }
        }
    }

    /// The width the user wants (points).
    pub fn wanted(&self) -> f32 {
        self.wanted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// egui's rule for a panel of the width it keeps: never wider than the screen.
    fn egui_pass(kept: &mut f32, asked: Option<f32>, screen: f32) -> f32 {
        *kept = asked.unwrap_or(*kept).min(screen);
        *kept
    }

    /// Shrunk to 200 points and enlarged again: the panel has its 360 points back (egui alone
    /// kept 200); on the way up it takes what the window gives.
    #[test]
    fn a_squeezed_panel_gets_its_width_back() {
        let (mut w, mut kept) = (PanelWidth::default(), DEFAULT_WIDTH);
        for screen in [1280.0, 640.0, 300.0, 200.0, 200.0, 250.0, 330.0, 800.0, 1280.0] {
            let shown = egui_pass(&mut kept, w.restore(screen), screen);
            w.shown(shown, screen);
            assert_eq!(shown, DEFAULT_WIDTH.min(screen), "screen {screen}");
        }
        assert_eq!(kept, DEFAULT_WIDTH);
        // Without it: egui keeps the squeezed width.
        let mut kept = DEFAULT_WIDTH;
        for screen in [200.0, 1280.0] {
            egui_pass(&mut kept, None, screen);
        }
        assert_eq!(kept, 200.0, "egui alone keeps the narrow panel");
    }

    /// A width the user dragged to is the one kept and given back after a squeeze; while the
    /// window stays small the panel is left alone.
    #[test]
    fn a_dragged_width_is_the_one_restored() {
        let mut w = PanelWidth::default();
        w.shown(500.0, 1280.0);
        assert_eq!(w.wanted(), 500.0);
        w.shown(400.0, 400.0);
        assert_eq!(w.restore(400.0), None, "no room yet");
        assert_eq!(w.restore(450.0), Some(450.0));
        w.shown(450.0, 450.0);
        assert_eq!(w.restore(1000.0), Some(500.0));
        w.shown(500.0, 1000.0);
        assert_eq!(w.restore(1000.0), None);
        w.shown(300.0, 1000.0);
        assert_eq!(w.wanted(), 300.0, "dragged narrower on a wide screen");
    }
}
