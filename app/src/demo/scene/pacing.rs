//! The scene's pace and scene keys: the step count of `--steps-per-frame auto` after each frame
//! (the frame budget capped by the scene's simulated-time rate, [`crate::demo::pace`]), the
//! rate keys (`[` slower, `]` faster), and the N a scene key loads.

use std::time::Instant;

use super::Scene;
use crate::backend::SimTimings;
use crate::cli::DEMO_BODIES;
use crate::demo::pace::{scaled_rate, scene_rate, Limit};
use crate::ui::action::Action;

/// N that a scene key (1–4) loads `init` at: the figure-eight's 3 (it fixes N), else `--bodies`
/// where it was given (`given`), else `default_n`, the demo's default N for the backend in use
/// (16384; 4096 on the CPU backend) — never the N of the scene in force, so a key after the
/// three-body figure-eight does not load a galaxy of three bodies.
pub fn scene_key_n(init: &str, given: Option<usize>, default_n: usize) -> usize {
    if init == "figure-eight" {
        3
    } else {
        given.unwrap_or(default_n)
    }
}

impl Scene {
    /// After a frame (`t0`: its start; `host_frame_ms`: its start-to-start time; `steps`: the
    /// count it asked for): the next frame's count with `--steps-per-frame auto` (the overlay's
    /// auto box). The frame's work is the time from `t0` to now, without the wait for vsync that
    /// follows it (the caller presents).
    pub(super) fn pace_frame(&mut self, t0: Instant, host_frame_ms: f64, steps: u32, timings: &SimTimings) {
        self.pace_frame_times(t0.elapsed().as_secs_f64() * 1e3, host_frame_ms, steps, timings);
    }

    /// [`Scene::pace_frame`] with the frame's work time given, ms (the tests give it, so that
    /// the count does not depend on how busy the machine is).
    pub(super) fn pace_frame_times(&mut self, work_ms: f64, host_frame_ms: f64, steps: u32, timings: &SimTimings) {
        let c = &mut self.hud.overlay.controls;
        if !c.auto_steps || self.hud.overlay.workflow.step_mode {
            return;
        }
        // A frame of a step in parts over frames ran a part of a step: it tells the pace nothing
        // about the time per step (and the count is 1 at such N anyway).
        let ran = if timings.parts.is_some() { 0 } else { steps };
        c.steps_per_frame = self.sim.pace.next_paced(c.steps_per_frame, ran, work_ms, host_frame_ms, c.sim_rate, c.params.dt);
        c.rate_limited = self.sim.pace.limit() == Limit::Rate;
    }

    /// Fill frames at the display's refresh rate `hz` with `--steps-per-frame auto`, unless
    /// `--target-fps` was given (the windowed demo calls this once the window exists, with vsync).
    pub fn use_display_rate(&mut self, hz: f64) {
        if self.args.target_fps.is_none() && hz.is_finite() && hz > 0.0 {
            self.sim.pace.set_interval_ms(1e3 / hz);
        }
    }

    /// The frame interval (ms) that `--steps-per-frame auto` fills.
    pub fn pace_interval_ms(&self) -> f64 {
        self.sim.pace.interval_ms()
    }

    /// Scale the simulated-time rate of `--steps-per-frame auto` by `factor` (keys `[`: ½, `]`: 2).
    pub fn scale_rate(&mut self, factor: f64) {
        let c = &mut self.hud.overlay.controls;
        c.sim_rate = scaled_rate(c.sim_rate, factor);
    }

    /// The simulated-time rate asked for, time units per wall second.
    pub fn sim_rate(&self) -> f64 {
        self.hud.overlay.controls.sim_rate
    }

    /// The scene in force (`--init`, or the last reset's).
    pub fn scene_init(&self) -> &str {
        &self.sim.scene_init
    }

    /// A scene key: load `init` at its own N (`scene_key_n`) at the start of the next frame.
    pub fn load_scene(&mut self, init: &str) {
        let default_n = self.args.default_bodies.unwrap_or(DEMO_BODIES);
        let n = scene_key_n(init, self.args.bodies, default_n);
        self.push_action(Action::Reset { init: init.to_owned(), n });
    }

    /// A reset to `init` at `n` succeeded: the overlay's scene box shows it (its N too, where
    /// the scene takes one), and another scene brings its own simulated-time rate.
    pub(super) fn set_scene_in_force(&mut self, init: &str, n: usize) {
        let c = &mut self.hud.overlay.controls;
        c.reset_init = init.to_owned();
        let fixed_n = init == "figure-eight" || std::path::Path::new(init).is_file();
        if !fixed_n {
            c.reset_n = n;
        }
        if self.sim.scene_init != init {
            c.sim_rate = scene_rate(init);
            self.sim.scene_init = init.to_owned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scene_key_n;

    /// Keys 1–4 after the figure-eight: each scene at its own N, or at `--bodies` when given.
    #[test]
    fn a_scene_key_loads_the_scene_at_its_own_n() {
        assert_eq!(scene_key_n("galaxies", None, 4096), 4096, "not the figure-eight's 3");
        assert_eq!(scene_key_n("plummer", None, 16384), 16384);
        assert_eq!(scene_key_n("ball", Some(700), 4096), 700, "--bodies wins");
        assert_eq!(scene_key_n("figure-eight", Some(700), 4096), 3, "the figure-eight fixes N");
        assert_eq!(scene_key_n("figure-eight", None, 4096), 3);
    }
}
