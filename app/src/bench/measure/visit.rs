//! One visit of the measuring loop: a (mode, setup) at an N in a round, from building its runner
//! to its row.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::Context as _;
use indicatif::ProgressBar;

use super::{build, row_meta, trace_frame, Acc, Results};
use crate::bench::env::Env;
use crate::bench::modes::{FrameSample, Gfx, Runner};
use crate::bench::outputs::Timelines;
use crate::bench::plan::{frames_in_round, runs_cuda, runs_f64, Plan};
use crate::bench::report::{self, mode_name, Measured};
use crate::bench::stats::{median, Summary};
use crate::cli::{BenchArgs, BenchMode};
use crate::demo::frame::GlTrack;
use crate::stop::stopped;
use crate::trace::Recorder;
use sim::Bodies;

/// What every visit of the measuring loop reads: the options, the plan and what is fixed for the run.
pub(super) struct Visits<'a> {
    pub(super) args: &'a BenchArgs,
    pub(super) plan: &'a Plan,
    /// The slices' devices of each setup ([`super::setup_devices`]).
    pub(super) devices: &'a [Option<Vec<i32>>],
    /// Simulation steps per frame, and the simulated time they span.
    pub(super) steps: u32,
    pub(super) time_span: f32,
    /// One core's FMA peak, measured when a CPU mode runs.
    pub(super) peak: Option<sim::cpu::peak::FmaPeak>,
    pub(super) pb: &'a ProgressBar,
}

/// What a visit changes: the GL and CUDA contexts, the results, the timelines, the runner and the
/// samples of this N.
pub(super) struct VisitState<'a> {
    pub(super) env: &'a mut Env,
    pub(super) res: &'a mut Results,
    pub(super) timelines: &'a mut Timelines,
    pub(super) runner: &'a mut Option<Runner>,
    pub(super) accs: &'a mut HashMap<(BenchMode, usize), Acc>,
}

/// One visit of the loop: `mode` in setup `si` at N = `n`, in round `round` (from 0).
#[derive(Clone, Copy)]
pub(super) struct Visit {
    pub(super) n: usize,
    pub(super) round: u32,
    pub(super) si: usize,
    pub(super) mode: BenchMode,
}

impl Visits<'_> {
    /// One visit: the runner is built and warmed up, the round's frames are measured (on the
    /// timeline with --timeline), the state is checked, and after the last round the row is made.
    pub(super) fn visit(&self, st: VisitState<'_>, bodies: &Bodies, v: Visit) -> anyhow::Result<()> {
        let Visit { n, round, si, mode } = v;
        let name = mode_name(mode);
        let what = match (&self.devices[si], runs_cuda(mode)) {
            (Some(d), true) => format!("{} [{} slice(s) on devices {d:?}]", mode_name(mode), d.len()),
            _ => mode_name(mode),
        };
        let ctx = || format!("mode {what}, N = {n}, round {}/{}", round + 1, self.args.rounds);
        self.pb.set_message(format!("{what} N={n} round {}/{}", round + 1, self.args.rounds));
        let r = self.start_runner(st.env, st.runner, bodies, v, &ctx)?;
        let acc = st.accs.entry((mode, si)).or_default();
        acc.launch = r.launch_config();
        acc.setup = r.setup(self.plan.setups[si].render_gpu_computes);
        self.warm_up(r, st.env, &ctx)?;
        let count = frames_in_round(self.args.frames, self.args.rounds, round);
        let mut round_frames = Vec::with_capacity(count as usize);
        // --timeline: the measured frames only (the tracer goes on after the warmup).
        let rec = self.args.timeline.as_deref().map(|base| st.timelines.get(base, mode, n));
        let api = r.api();
        let gl_track = start_timeline(st.timelines, st.env, rec.as_ref(), api.as_ref(), mode);
        // The measured frames; a failure ends them, and the timeline's tracer, CUPTI
        // records and GL track are still finished below before it is reported.
        let frames = (|| -> anyhow::Result<()> {
            for _ in 0..count {
                if stopped() {
                    break;
                }
                let index = acc.frame.len() as u64;
                let s = self.measured_frame(r, st.env, rec.as_ref(), gl_track.as_ref(), (index, v), &name, &ctx)?;
                acc.push(&s);
                round_frames.push(s.frame_ms);
                self.pb.inc(1);
            }
            Ok(())
        })();
        finish_timeline(st.timelines, st.env, rec.as_ref(), api.as_ref(), gl_track);
        frames?;
        if stopped() {
            // The visit was cut short: its frames belong to no finished row.
            return Ok(());
        }
        self.check_state(r, st.env, acc, mode, &ctx)?;
        acc.round_medians.push(median(&round_frames).unwrap_or(f64::NAN));
        if round + 1 == self.args.rounds {
            self.finish_row(st, v, &what, &ctx)?;
        }
        Ok(())
    }

    /// Builds the visit's runner in `runner` (the old one dropped first) and makes it current.
    fn start_runner<'r>(
        &self,
        env: &mut Env,
        runner: &'r mut Option<Runner>,
        bodies: &Bodies,
        v: Visit,
        ctx: &dyn Fn() -> String,
    ) -> anyhow::Result<&'r mut Runner> {
        // The old backend goes before the VBOs it may have registered are remade.
        *runner = None;
        let vbos = match v.mode {
            BenchMode::Compute | BenchMode::Tree => None,
            _ => Some(env.gfx.as_mut().context("GL mode without a GL context")?.load(bodies).with_context(ctx)?),
        };
        let setup = &self.plan.setups[v.si];
        let r = runner.insert(build(self.args, self.plan, v.mode, env, vbos, bodies, setup, self.devices[v.si].as_deref()).with_context(ctx)?);
        r.make_current().with_context(ctx)?;
        if let Some(g) = env.gfx.as_mut() {
            g.set_density(v.mode.density());
        }
        Ok(r)
    }

    /// The warmup frames (up to --warmup, fewer when stopped).
    fn warm_up(&self, r: &mut Runner, env: &mut Env, ctx: &dyn Fn() -> String) -> anyhow::Result<()> {
        for _ in 0..self.args.warmup {
            r.frame(env.gfx.as_mut(), self.steps, self.time_span).with_context(ctx)?;
            self.pb.inc(1);
            if stopped() {
                break;
            }
        }
        Ok(())
    }

    /// One measured frame (`index` counts the frames of this (mode, setup) so far), on the
    /// timeline `rec` with its GL track when there is one.
    #[allow(clippy::too_many_arguments)]
    fn measured_frame(
        &self,
        r: &mut Runner,
        env: &mut Env,
        rec: Option<&Recorder>,
        gl_track: Option<&GlTrack>,
        (index, v): (u64, Visit),
        name: &str,
        ctx: &dyn Fn() -> String,
    ) -> anyhow::Result<FrameSample> {
        if let Some(rec) = rec {
            rec.begin_frame(index);
        }
        let s = r.frame(env.gfx.as_mut(), self.steps, self.time_span).with_context(ctx);
        if let Some(rec) = rec {
            if let Ok(s) = &s {
                trace_frame(rec, v.mode, s, v.n, self.steps);
                if let (Some(t), Some(g)) = (gl_track, env.gfx.as_mut()) {
                    g.record_gl(t, rec, name);
                }
            }
            rec.end_frame();
        }
        s
    }

    /// Warns (once per row) when the state diverged, and on a GL error of a GL mode.
    fn check_state(&self, r: &mut Runner, env: &mut Env, acc: &mut Acc, mode: BenchMode, ctx: &dyn Fn() -> String) -> anyhow::Result<()> {
        if !r.finite(env.gfx.as_mut()).with_context(ctx)? && !acc.diverged {
            acc.diverged = true;
            self.say(format!(
                "warning: {}: the state diverged (NaN or ∞ in positions or velocities): the row is marked \
                 `diverged`; use a smaller --dt or a larger --softening",
                ctx()
            ));
        }
        if let Some(g) = env.gfx.as_ref().filter(|_| !mode.is_compute()) {
            if let Some(e) = g.error() {
                self.say(format!("warning: GL error 0x{e:04X} after {}", ctx()));
            }
        }
        Ok(())
    }

    /// After the last round: the (mode, setup)'s row, written to the tables at once (its timeline
    /// too) and said; with the test hook `stop_after_rows`, the stop once there are as many rows.
    fn finish_row(&self, st: VisitState<'_>, v: Visit, what: &str, ctx: &dyn Fn() -> String) -> anyhow::Result<()> {
        let Visit { n, mode, si, .. } = v;
        let acc = st.accs.remove(&(mode, si)).unwrap_or_default();
        let frame = Summary::of(&acc.frame).with_context(|| format!("no frames measured ({})", ctx()))?;
        let row = self.row(st.env, acc, frame, v);
        st.res.measured.push(row);
        st.res.write_tables("running", false).context("writing the results")?;
        if let Some(base) = &self.args.timeline {
            self.pb.suspend(|| st.timelines.finish(base, mode, n));
        }
        let last = st.res.measured.last().map(|m| (m.times.frame.median, m.times.frame.p99));
        if let Some((med, p99)) = last {
            self.say(format!("{what} N={n}: frame median {med:.3} ms, p99 {p99:.3} ms"));
        }
        if self.plan.stop_after_rows.is_some_and(|k| st.res.measured.len() >= k) {
            // Test hook: behave exactly as if Ctrl-C arrived now.
            crate::stop::request();
        }
        Ok(())
    }

    /// The row of `v`'s (mode, N) from its samples `acc`, whose frame times summarize to `frame`.
    fn row(&self, env: &Env, acc: Acc, frame: Summary, v: Visit) -> Measured {
        let (args, mode) = (self.args, v.mode);
        let gl_mode = !mode.is_compute();
        let size = if gl_mode { env.gfx.as_ref().and_then(Gfx::size) } else { None };
        Measured {
            mode,
            n: v.n,
            launch: report::LaunchColumns::of(self.steps, acc.launch),
            sampling: report::SamplingColumns {
                frames: acc.frame.len(),
                rounds: args.rounds,
                warmup: args.warmup,
                width: size.map(|s| s.0),
                height: size.map(|s| s.1),
                max_sprite_px: gl_mode.then_some(args.max_sprite_px),
            },
            times: report::TimeColumns {
                frame,
                map: Summary::of(&acc.map),
                kernel: Summary::of(&acc.kernel),
                unmap: Summary::of(&acc.unmap),
                upload: Summary::of(&acc.upload),
                draw: Summary::of(&acc.draw),
                readback: Summary::of(&acc.readback),
                density: Summary::of(&acc.density),
                gather: Summary::of(&acc.gather),
            },
            tree: acc.tree(args.theta),
            round_medians: acc.round_medians,
            diverged: acc.diverged,
            precision: if runs_f64(mode) { args.precision.name() } else { "f32" },
            meta: {
                let mut m = row_meta(args, mode, env);
                m.cpu = self.peak.filter(|_| mode.is_cpu()).map(|p| (p, rayon::current_num_threads()));
                m
            },
            setup: acc.setup,
        }
    }

    /// Says `s` on stderr without breaking the progress bar.
    fn say(&self, s: String) {
        self.pb.suspend(|| eprintln!("{s}"));
    }
}

/// Starts the visit's timeline `rec`, if any: CUPTI for a CUDA mode (loaded once: one user per
/// process; its earlier records discarded), the driver-call tracer, and the GL track of a GL mode.
fn start_timeline(
    timelines: &mut Timelines,
    env: &mut Env,
    rec: Option<&Recorder>,
    api: Option<&Arc<interop::Api>>,
    mode: BenchMode,
) -> Option<GlTrack> {
    let mut gl_track = None;
    if let (Some(rec), Some(_)) = (rec, api) {
        // CUPTI for the CUDA modes' timelines, loaded once (one user per process).
        if timelines.cupti.is_none() && !timelines.cupti_tried {
            timelines.cupti_tried = true;
            timelines.cupti = crate::trace::cupti::CuptiTrack::start(rec);
        }
        if let Some(c) = &timelines.cupti {
            c.discard();
        }
    }
    if let Some(rec) = rec {
        if let Some(a) = api {
            rec.install(a);
        }
        if !mode.is_compute() {
            gl_track = env.gfx.as_mut().and_then(|g| g.start_gl_track(rec));
        }
    }
    gl_track
}

/// Ends the visit's timeline `rec`, if any: the tracer off, CUPTI's records and the GL track into it.
fn finish_timeline(timelines: &mut Timelines, env: &mut Env, rec: Option<&Recorder>, api: Option<&Arc<interop::Api>>, gl_track: Option<GlTrack>) {
    if let Some(rec) = rec {
        if let Some(a) = api {
            a.set_tracer(None);
            if let Some(c) = timelines.cupti.as_mut() {
                c.finish(rec);
            }
        }
        if let (Some(t), Some(g)) = (gl_track, env.gfx.as_mut()) {
            g.finish_gl_track(t, rec);
        }
    }
}
