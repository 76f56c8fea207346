//! `--steps-per-frame auto`: as many leapfrog steps per shown frame as fit the frame interval, so
//! the interop hand-over (map/unmap, or the upload) and the draw are paid once per shown frame
//! rather than once per step — but no more than the scene's simulated-time rate asks for, so a
//! small scene (the figure-eight's three bodies) moves at a pace one can follow instead of
//! running thousands of orbits a second.
//!
//! The rule ([`auto_steps`]): steps = min(what the frame budget allows, what the rate asks), at
//! least 1. The rate is simulated time units per wall-clock second ([`scene_rate`] gives each
//! scene's own; the windowed demo's keys `[` and `]` halve and double it); it asks for
//! rate × frame time / dt steps a frame ([`rate_steps`]), the frame time being the mean of the
//! last [`WINDOW`] frames' start-to-start times (the mean, not the median: the simulated time per
//! wall second is a mean over frames that jitter), and the fraction left over is carried to the
//! next frame so that the simulated time keeps to the rate on average.
//!
//! The controller measures the work of each frame (simulate + UI + draw + paint, not the wait for
//! vsync) and scales the step count by `budget / work`, where the budget is
//! [`BUDGET_SHARE`] of the frame interval (the display's refresh interval with vsync, else
//! `1 / --target-fps`). With work = a + b·steps (a: the per-frame cost, b: one step) the fixed
//! point is a + b·steps = budget. Each update changes the count by at most a factor of
//! [`MAX_CHANGE`], and the time per step it works from is the median of the last [`WINDOW`]
//! frames, so one slow frame (a diagnostics sample, a resize) does not change the rate. The count
//! stays in `1 ..= `[`MAX_STEPS`].

/// Share of the frame interval the work may fill (the rest absorbs jitter).
pub const BUDGET_SHARE: f64 = 0.9;
/// Largest factor by which one update may change the step count.
pub const MAX_CHANGE: f64 = 2.0;
/// Upper bound of the step count.
pub const MAX_STEPS: u32 = 1 << 20;
/// Frames whose median time per step sets the next count.
pub const WINDOW: usize = 5;

/// Simulated time per wall second of `figure-eight` (N-body time units, G = 1): one period
/// ([`sim::init::FIGURE_EIGHT_PERIOD`] ≈ 6.33) in about 3 s.
pub const FIGURE_EIGHT_RATE: f64 = 2.0;
/// Simulated time per wall second of `galaxies`: the disks meet within a few time units and
/// merge over some 30, so the encounter plays in about a minute.
pub const GALAXIES_RATE: f64 = 0.5;
/// Simulated time per wall second of `plummer`: one crossing time (2√2 ≈ 2.8 in Hénon units) in
/// about 6 s.
pub const PLUMMER_RATE: f64 = 0.5;
/// Simulated time per wall second of `ball`: its cold collapse (free-fall time π/(2√2) ≈ 1.1)
/// in about 4 s.
pub const BALL_RATE: f64 = 0.25;
/// Simulated time per wall second of a state file (CSV or tipsy), read as N-body units.
pub const FILE_RATE: f64 = 0.5;
/// Smallest and largest rate the keys reach (simulated time per wall second).
pub const RATE_RANGE: (f64, f64) = (1.0 / 1024.0, 1024.0);

/// The simulated-time rate natural to the scene `init` (a name as `--init` takes it, else a
/// state file): simulated time units per wall-clock second.
pub fn scene_rate(init: &str) -> f64 {
    match init {
        "figure-eight" => FIGURE_EIGHT_RATE,
        "galaxies" => GALAXIES_RATE,
        "plummer" => PLUMMER_RATE,
        "ball" => BALL_RATE,
        _ => FILE_RATE,
    }
}

/// `rate` scaled by `factor` (the keys: ½ or 2), kept within [`RATE_RANGE`].
pub fn scaled_rate(rate: f64, factor: f64) -> f64 {
    (rate * factor).clamp(RATE_RANGE.0, RATE_RANGE.1)
}

/// Leapfrog steps (fractional) that a frame of `frame_ms` needs to advance `rate` simulated time
/// units per wall second with steps of `dt` time units.
pub fn rate_steps(rate: f64, frame_ms: f64, dt: f64) -> f64 {
    if dt > 0.0 && rate.is_finite() && frame_ms.is_finite() {
        (rate * frame_ms * 1e-3 / dt).max(0.0)
    } else {
        f64::INFINITY
    }
}

/// Which limit set the step count of `--steps-per-frame auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Limit {
    /// The frame budget (the steps that fit the frame interval).
    #[default]
    Budget,
    /// The scene's simulated-time rate.
    Rate,
}

/// The auto rule: the smaller of `budget` (steps that fit the frame) and `rate` (steps the
/// simulated-time rate asks for, whole ones), at least 1; and which of the two set it.
pub fn auto_steps(budget: u32, rate: f64) -> (u32, Limit) {
    let by_rate = rate.floor().clamp(0.0, f64::from(MAX_STEPS)) as u32;
    if by_rate < budget {
        (by_rate.max(1), Limit::Rate)
    } else {
        (budget.max(1), Limit::Budget)
    }
}

/// The step-count controller of `--steps-per-frame auto`. The count itself lives with the caller
/// (the overlay shows and may fix it); the controller keeps the recent per-step times.
#[derive(Debug, Clone, PartialEq)]
pub struct Pace {
    /// Frame interval to fill, ms.
    interval_ms: f64,
    /// Work time per step of the last [`WINDOW`] frames, ms, oldest first.
    per_step_ms: std::collections::VecDeque<f64>,
    /// Start-to-start times of the last [`WINDOW`] frames, ms, oldest first.
    frame_ms: std::collections::VecDeque<f64>,
    /// Steps the rate asked for but the last frames did not take (a fraction of one).
    carry: f64,
    /// What set the last count.
    limit: Limit,
    /// Parts per windowed frame of a long step in parts over frames ([`PartBudget`]).
    pub parts: PartBudget,
}

impl Pace {
    /// A controller for frames of `interval_ms` (e.g. 16.67 for 60 Hz), starting at 1 step.
    pub fn new(interval_ms: f64) -> Self {
        Pace {
            interval_ms: interval_ms.max(1e-3),
            per_step_ms: std::collections::VecDeque::with_capacity(WINDOW),
            frame_ms: std::collections::VecDeque::with_capacity(WINDOW),
            carry: 0.0,
            limit: Limit::Budget,
            parts: PartBudget::default(),
        }
    }

    /// Fill frames of `interval_ms` from now on (the display's refresh interval, found once the
    /// window exists).
    pub fn set_interval_ms(&mut self, interval_ms: f64) {
        self.interval_ms = interval_ms.max(1e-3);
    }

    /// The frame interval the controller fills, ms.
    pub fn interval_ms(&self) -> f64 {
        self.interval_ms
    }

    /// Take the measured work time (ms) of a frame that ran `ran` steps and return the count for
    /// the next frame, from the `current` one. A frame with no steps (paused) or a non-finite
    /// time leaves `current` as it is.
    pub fn next(&mut self, current: u32, ran: u32, work_ms: f64) -> u32 {
        let current = current.max(1);
        if ran == 0 || !work_ms.is_finite() || work_ms <= 0.0 {
            return current;
        }
        if self.per_step_ms.len() == WINDOW {
            self.per_step_ms.pop_front();
        }
        self.per_step_ms.push_back(work_ms / f64::from(ran));
        let mut sorted: Vec<f64> = self.per_step_ms.iter().copied().collect();
        sorted.sort_by(f64::total_cmp);
        let per_step = sorted[sorted.len() / 2];
        let budget = BUDGET_SHARE * self.interval_ms;
        let factor = (budget / (per_step * f64::from(current))).clamp(1.0 / MAX_CHANGE, MAX_CHANGE);
        (f64::from(current) * factor).floor().clamp(1.0, f64::from(MAX_STEPS)) as u32
    }

    /// The count for the next frame under the auto rule: [`Pace::next`] (the frame budget) capped
    /// by the steps that `rate` simulated time units per wall second ask for with steps of `dt`
    /// ([`auto_steps`]). `frame_ms` is the frame's start-to-start time (0 or less: not known yet;
    /// the frame interval stands in). Frames that ran no steps (`ran` 0) carry nothing over.
    pub fn next_paced(&mut self, current: u32, ran: u32, work_ms: f64, frame_ms: f64, rate: f64, dt: f32) -> u32 {
        let budget = self.next(current, ran, work_ms);
        if frame_ms.is_finite() && frame_ms > 0.0 {
            if self.frame_ms.len() == WINDOW {
                self.frame_ms.pop_front();
            }
            self.frame_ms.push_back(frame_ms);
        }
        let frame = if self.frame_ms.is_empty() { self.interval_ms } else { self.frame_ms.iter().sum::<f64>() / self.frame_ms.len() as f64 };
        let wanted = rate_steps(rate, frame, f64::from(dt)) + if ran > 0 { self.carry } else { 0.0 };
        let (steps, limit) = auto_steps(budget, wanted);
        // Only the fraction the rate asked for beyond the whole steps taken carries over: not
        // what the budget cut off, nor the step that "at least 1" added.
        self.carry = if limit == Limit::Rate { (wanted - f64::from(steps)).clamp(0.0, 1.0) } else { 0.0 };
        self.limit = limit;
        steps
    }

    /// What set the last count of [`Pace::next_paced`].
    pub fn limit(&self) -> Limit {
        self.limit
    }
}

/// Share of a window's wall time that showing its frames (UI pass, draw, paint, present) may
/// take while a long step runs in parts over frames ([`PartBudget`]); the rest goes to the step,
/// which so takes at most 4/3 of its own time (plus the first frames, which find the budget).
pub const SHOW_SHARE: f64 = 0.25;
/// Most compute time (ms) a frame of a step in parts over frames spends on its parts before it is
/// shown: the window answers its events (a close, a key) within about this and one showing.
/// Enough to keep the share for a million bodies on a software renderer (about 0.7 s to show).
pub const MAX_PARTS_MS: f64 = 2000.0;

/// Parts of a step in parts that one frame runs before it is shown, when a part takes
/// `part_ms` and showing the frame `show_ms`: the fewest that keep showing within
/// [`SHOW_SHARE`] of the frame (`show / (show + parts × part) ≤ SHOW_SHARE`), at least 1, and no
/// more than fit [`MAX_PARTS_MS`] (at least 1).
pub fn parts_for_share(part_ms: f64, show_ms: f64) -> usize {
    if !(part_ms.is_finite() && part_ms > 0.0 && show_ms.is_finite() && show_ms > 0.0) {
        return 1;
    }
    let wanted = show_ms * (1.0 - SHOW_SHARE) / SHOW_SHARE / part_ms;
    let most = (MAX_PARTS_MS / part_ms).floor().max(1.0);
    (wanted - 1e-9).ceil().clamp(1.0, most) as usize
}

/// How many parts of a long step (in parts over frames, see [`sim::partial`]) a windowed frame
/// runs: one part per frame would pay a whole frame's showing (on a software renderer, the draw
/// of every body) per part, so a step of many short parts took many times its own time. The
/// budget follows the frames' own times: the median time per part and the median time to show a
/// frame (its start-to-start time less its parts) of the last [`WINDOW`] frames that ran parts,
/// through [`parts_for_share`].
///
/// It also sums the parts' compute time into the time of the whole step, which the overlay shows
/// in place of one part's ([`PartBudget::step_ms`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartBudget {
    /// Compute time per part of the last [`WINDOW`] frames that ran parts, ms, oldest first.
    part_ms: std::collections::VecDeque<f64>,
    /// Time to show each of those frames, ms, oldest first.
    show_ms: std::collections::VecDeque<f64>,
    /// The budget in force (0 before the first frame: 1).
    parts: usize,
    /// The last frame: its start, the parts it ran and their compute time (ms).
    last: Option<(std::time::Instant, usize, f64)>,
    /// Compute time of the parts of the step in progress so far, ms.
    step_so_far_ms: f64,
    /// Compute time of the last step completed in parts (all its parts), ms.
    step_ms: Option<f64>,
}

fn median(v: &std::collections::VecDeque<f64>) -> f64 {
    let mut sorted: Vec<f64> = v.iter().copied().collect();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(0.0)
}

impl PartBudget {
    /// Parts the next frame may run (at least 1).
    pub fn parts(&self) -> usize {
        self.parts.max(1)
    }

    /// Takes a frame that ran `parts` parts in `parts_ms` of compute and then took `show_ms` to
    /// be shown; returns the budget of the next frames. A frame without parts changes nothing.
    pub fn record(&mut self, parts: usize, parts_ms: f64, show_ms: f64) -> usize {
        if parts > 0 && parts_ms.is_finite() && parts_ms > 0.0 && show_ms.is_finite() && show_ms >= 0.0 {
            if self.part_ms.len() == WINDOW {
                self.part_ms.pop_front();
                self.show_ms.pop_front();
            }
            self.part_ms.push_back(parts_ms / parts as f64);
            self.show_ms.push_back(show_ms);
            self.parts = parts_for_share(median(&self.part_ms), median(&self.show_ms));
        }
        self.parts()
    }

    /// A frame starts at `now`: the last frame's showing time is known now (its start-to-start
    /// time less its parts), and is recorded if it ran parts.
    pub fn frame_started(&mut self, now: std::time::Instant) {
        if let Some((start, parts, parts_ms)) = self.last.take() {
            let period_ms = now.saturating_duration_since(start).as_secs_f64() * 1e3;
            self.record(parts, parts_ms, (period_ms - parts_ms).max(0.0));
        }
    }

    /// The frame that started at `start` ran `parts` parts in `parts_ms` (0 parts: whole steps,
    /// or none).
    pub fn frame_ran(&mut self, start: std::time::Instant, parts: usize, parts_ms: f64) {
        self.last = (parts > 0).then_some((start, parts, parts_ms));
    }

    /// One part of a step ran in `ms`; `completed`: it was the step's last.
    pub fn part_ran(&mut self, ms: f64, completed: bool) {
        self.step_so_far_ms += ms.max(0.0);
        if completed {
            self.step_ms = Some(self.step_so_far_ms);
            self.step_so_far_ms = 0.0;
        }
    }

    /// The step in progress was abandoned (or there is none): its parts so far count for nothing.
    pub fn step_dropped(&mut self) {
        self.step_so_far_ms = 0.0;
    }

    /// Compute time of the last step completed in parts: all its parts, ms.
    pub fn step_ms(&self) -> Option<f64> {
        self.step_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A figure-eight period in a few seconds, a galaxy encounter (about 30 time units) in about a minute.
    const _: () = {
        let period_s = sim::init::FIGURE_EIGHT_PERIOD / FIGURE_EIGHT_RATE;
        assert!(2.0 <= period_s && period_s < 6.0, "a figure-eight period takes 2 to 6 s");
        let encounter_s = 30.0 / GALAXIES_RATE;
        assert!(40.0 <= encounter_s && encounter_s < 90.0, "a galaxy encounter takes 40 to 90 s");
    };

    /// Work a + b·steps converges to the budget: steps → (0.9·T − a) / b.
    #[test]
    fn converges_to_the_budget() {
        let (a, b, t) = (0.8, 0.15, 1000.0 / 60.0);
        let (mut p, mut s) = (Pace::new(t), 1);
        for _ in 0..60 {
            s = p.next(s, s, a + b * f64::from(s));
        }
        let want = (BUDGET_SHARE * t - a) / b;
        let got = f64::from(s);
        assert!((got - want).abs() <= 0.05 * want + 1.0, "steps {got}, want ≈ {want:.1}");
    }

    /// Slower than the budget at one step: stays at one step.
    #[test]
    fn never_below_one_step() {
        let mut p = Pace::new(16.7);
        for _ in 0..10 {
            assert_eq!(p.next(1, 1, 500.0), 1);
        }
    }

    /// One slow frame (10× the others) leaves the count where it was.
    #[test]
    fn one_slow_frame_does_not_change_the_rate() {
        let (mut p, mut s) = (Pace::new(16.7), 1);
        for _ in 0..50 {
            s = p.next(s, s, 0.1 * f64::from(s));
        }
        let after = p.next(s, s, 10.0 * 0.1 * f64::from(s));
        assert!(after >= s, "{s} → {after}");
    }

    /// The rate's count: rate × frame time / dt.
    #[test]
    fn the_rate_asks_for_rate_times_frame_over_dt() {
        // The figure-eight at 60 frames/s with dt = 0.001: 2 time units/s → 33.3 steps a frame.
        let s = rate_steps(FIGURE_EIGHT_RATE, 1000.0 / 60.0, 0.001);
        assert!((s - 33.33).abs() < 0.01, "{s}");
        assert_eq!(rate_steps(1.0, 10.0, 0.0), f64::INFINITY, "no dt: the rate sets no limit");
    }

    /// auto = min(budget, rate), at least 1, and says which limit set it.
    #[test]
    fn auto_is_the_smaller_of_budget_and_rate_and_at_least_one() {
        assert_eq!(auto_steps(126_908, 33.3), (33, Limit::Rate), "a tiny scene: the rate limits");
        assert_eq!(auto_steps(8, 33.3), (8, Limit::Budget), "a large N: the frame budget limits");
        assert_eq!(auto_steps(5, 0.2), (1, Limit::Rate), "at least one step");
        assert_eq!(auto_steps(1, f64::INFINITY), (1, Limit::Budget));
    }

    /// Every preset has its own rate; files get the N-body default; the keys scale by 2 within
    /// the range.
    #[test]
    fn each_scene_has_a_rate_and_the_keys_scale_it() {
        for name in sim::init::NAMES {
            assert!(scene_rate(name) > 0.0, "{name}");
        }
        assert!(scene_rate("figure-eight") > scene_rate("galaxies"), "the small orbit runs faster");
        assert_eq!(scene_rate("state.csv"), FILE_RATE);
        assert_eq!(scaled_rate(2.0, 2.0), 4.0);
        assert_eq!(scaled_rate(2.0, 0.5), 1.0);
        assert_eq!(scaled_rate(RATE_RANGE.1, 2.0), RATE_RANGE.1);
    }

    /// A fast machine with a three-body scene: the count follows the rate, not the budget, and
    /// the simulated time per wall second comes out at the rate (the fractions carried over).
    #[test]
    fn a_cheap_scene_keeps_to_its_rate() {
        let (dt, frame_ms, rate) = (0.001_f32, 1000.0 / 60.0, FIGURE_EIGHT_RATE);
        let (mut p, mut s, mut sim_time) = (Pace::new(frame_ms), 1, 0.0);
        for _ in 0..600 {
            // 1 µs a step: the budget alone would allow about 15,000 steps.
            let ran = s;
            sim_time += f64::from(ran) * f64::from(dt);
            s = p.next_paced(s, ran, 0.5 + 0.001 * f64::from(ran), frame_ms, rate, dt);
        }
        assert_eq!(p.limit(), Limit::Rate);
        assert!((33..=34).contains(&s), "{s} steps a frame");
        let per_wall_s = sim_time / (600.0 * frame_ms * 1e-3);
        assert!((per_wall_s - rate).abs() < 0.02 * rate, "{per_wall_s} time units per wall second");
    }

    /// A slow scene: the budget limits, as before.
    #[test]
    fn an_expensive_scene_fills_the_budget() {
        let (t, dt) = (1000.0 / 60.0, 0.001_f32);
        let (mut p, mut s) = (Pace::new(t), 1);
        for _ in 0..60 {
            s = p.next_paced(s, s, 0.8 + 3.0 * f64::from(s), t, GALAXIES_RATE, dt);
        }
        assert_eq!(p.limit(), Limit::Budget);
        assert!((3..=5).contains(&s), "{s}");
    }

    /// Paused frames and bad times change nothing.
    #[test]
    fn paused_and_bad_times_are_ignored() {
        let mut p = Pace::new(16.7);
        let s = p.next(1, 1, 1.0);
        assert_eq!(p.next(s, 0, 1.0), s);
        assert_eq!(p.next(s, s, f64::NAN), s);
        assert_eq!(p.next(s, s, 0.0), s);
    }
    /// One part of 5 ms against 215 ms to show a frame (a million bodies on a software
    /// renderer): 129 parts a frame keep the showing at a quarter of the time; the share holds
    /// for other mixes, at least one part, and no frame computes past MAX_PARTS_MS.
    #[test]
    fn the_part_budget_keeps_showing_to_its_share() {
        assert_eq!(parts_for_share(5.0, 215.0), 129);
        for (part, show) in [(5.0, 215.0), (14.0, 60.0), (300.0, 160.0), (200.0, 2.0), (0.5, 30.0)] {
            let k = parts_for_share(part, show) as f64;
            assert!(k >= 1.0);
            let share = show / (show + k * part);
            assert!(share <= SHOW_SHARE + 1e-9 || k * part + part > MAX_PARTS_MS, "part {part} show {show}: {k} parts, share {share}");
            assert!(k == 1.0 || k * part <= MAX_PARTS_MS, "part {part}: {k} parts");
            // One part fewer would show too long (the fewest that fit).
            assert!(k == 1.0 || show / (show + (k - 1.0) * part) > SHOW_SHARE, "part {part} show {show}: {k} parts");
        }
        assert_eq!(parts_for_share(300.0, 160.0), 2, "long parts: two a frame");
        assert_eq!(parts_for_share(200.0, 2.0), 1, "a fast draw: one part a frame");
        assert_eq!(parts_for_share(0.5, 3000.0), (MAX_PARTS_MS / 0.5) as usize, "capped at MAX_PARTS_MS of parts");
        assert_eq!(parts_for_share(f64::NAN, 10.0), 1);
        assert_eq!(parts_for_share(10.0, 0.0), 1);
    }

    /// Given frame times (a model of the window: each part 5 ms, showing 215 ms), the budget
    /// grows from one part to the share's count within a few frames, and the step rate comes
    /// within 1.5× of the parts alone (the headless rate); one slow frame does not move it.
    #[test]
    fn the_budget_follows_the_frames_own_times() {
        let (part, show, parts_per_step) = (5.0, 215.0, 1375usize);
        let mut b = PartBudget::default();
        assert_eq!(b.parts(), 1, "the first frame runs one part");
        let (mut wall, mut done, mut frames) = (0.0, 0usize, 0);
        while done < 3 * parts_per_step {
            let k = b.parts();
            let slow = if frames == 40 { 10.0 } else { 1.0 };
            wall += k as f64 * part + show * slow;
            done += k;
            frames += 1;
            b.record(k, k as f64 * part, show * slow);
        }
        assert_eq!(b.parts(), parts_for_share(part, show));
        let headless = 3.0 * parts_per_step as f64 * part;
        assert!(wall < 1.5 * headless, "three steps in {wall} ms against {headless} ms of parts");
        assert!(frames < 60, "{frames} frames for three steps");
    }

    /// The step time shown is that of all a step's parts, not one part's; an abandoned step's
    /// parts count for nothing.
    #[test]
    fn the_step_time_is_the_whole_steps() {
        let mut b = PartBudget::default();
        assert_eq!(b.step_ms(), None);
        for _ in 0..9 {
            b.part_ran(5.0, false);
        }
        b.part_ran(5.0, true);
        assert_eq!(b.step_ms(), Some(50.0));
        b.part_ran(5.0, false);
        b.step_dropped();
        b.part_ran(7.0, true);
        assert_eq!(b.step_ms(), Some(7.0));
    }
}
