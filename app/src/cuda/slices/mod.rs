//! Bodies split into slices over several GPUs (or several slices on one GPU): every step each
//! slice integrates its bodies against all N positions on its own device and stream, then the
//! new positions are all-gathered so that every device holds all of them for the next step —
//! with NCCL (`ncclAllGather`, [`interop::nccl`]) or with peer copies (`cuMemcpyPeerAsync`,
//! direct after `cuCtxEnablePeerAccess` where `cuDeviceCanAccessPeer` allows it).
//!
//! The pattern is the one of NVIDIA's `nbody -numdevices` (each GPU computes a slice against all
//! positions), with the exchange on the devices instead of through host memory. Each device works
//! in its primary context (the one NCCL's runtime uses); each slice has its own stream.
//!
//! # Layout
//! N is cut into `slices` equal slices of `len` bodies, `len` a multiple of the step kernel's
//! bodies per block ([`SliceLayout`]), so every block of a slice starts where a block of the
//! one-launch step starts: each body's sum runs over the same j in the same order with the same
//! block centre (the mass-scaled kernels' c; the equal-mass kernels' mass, the block's first
//! body's), and the positions are **the same bits** as with
//! one slice. Every buffer holds `slices · len` bodies (NCCL's all-gather takes equal counts);
//! slots from N on stay the zero (massless) padding, never written by a kernel.
//!
//! # Ordering
//! - NCCL: the all-gather of step k is enqueued on every slice's stream after its kernel; NCCL's
//!   collective completes on a stream only when that rank has everything, and it writes into a
//!   rank's buffer only while that rank's stream is inside the collective.
//! - Peer copies: slice r copies its new positions into every other slice's buffer on its own
//!   stream, after its kernel, then records its `done` event; before its next kernel every slice
//!   waits on all other slices' `done` events (a barrier per step). That covers both hazards:
//!   reading positions not yet copied in, and a copy overwriting positions still being read.
//! - The copy to GL ([`SlicedStepper::show`]) waits on every slice's `done` (the source slice's
//!   buffer is written by the others' copies too) and records `copied` on the GL device's stream;
//!   every slice's next step waits on `copied`, so no step rewrites what the copy still reads.
//!   Host readbacks synchronise every slice's stream first.
//!
//! Steps here are whole steps (no long-step split, no steps in parts over frames: a step of all N on
//! several GPUs is the point of this path).

mod layout;
mod open;
mod render;

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context as _};
use interop::nccl::Clique;
use interop::sys::event_flags;
use interop::{Api, Context, Device, Event, SchedFlag, Stream};

use super::kernel_set::{check_fits, Kernels};
use super::settings::GatherChoice;
use kernels::launch_rule::{validate_block_size, ForcedKernel, LaunchConfig, Masses, StepLoop};
use sim::{Bodies, Leapfrog, PhysParams};

use layout::Slice;
pub use layout::{GatherPath, SliceLayout, SplitFrame};
use open::{gather_path, primary_contexts, upload_slices};
pub use render::SlicedRender;

/// The leapfrog integrator over slices on one or more devices (see the module docs).
pub struct SlicedStepper {
    /// Field order is drop order: the communicators go before the slices' streams and buffers.
    clique: Option<Clique>,
    /// Recorded on the GL device's stream after [`SlicedStepper::show`]'s copy.
    copied: Option<Event>,
    /// Peer access between the source slice and the GL device was looked at ([`SlicedStepper::show`]).
    peer_to_render: bool,
    slices: Vec<Slice>,
    layout: SliceLayout,
    gather: GatherPath,
    launch: LaunchConfig,
    leap: Leapfrog,
    /// Index (0/1) of the buffers holding the newest positions.
    front: usize,
    params: PhysParams,
}

impl SlicedStepper {
    /// Uploads `bodies` to one slice per entry of `devices` (CUDA ordinals; a device may hold
    /// several slices; each device's primary context gets the scheduling flag `sched`, as the
    /// render device's session context has it), loads the kernels (`ptx`: a PTX file, else the embedded one) on each and
    /// picks the gather path: `choice` = auto takes NCCL when it loads and every slice has a
    /// device of its own, else peer copies. `launch`: the step kernel's launch, else the launch
    /// rule's for one slice's bodies with `block` ([`Kernels::choose_launch`]); always a plain
    /// launch (a stream-K one is run as [`LaunchConfig::plain`]: see `kernels/README.md`, "stream-K").
    ///
    /// # Errors
    /// No device, an ordinal past the device count, an invalid block size, N too large for a
    /// device, a PTX load, allocation or stream failure; `choice` = nccl when NCCL does not load
    /// or a device holds two slices; `launch` runs the equal-mass loop and the masses of
    /// `bodies` differ.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        api: &Arc<Api>,
        sched: SchedFlag,
        devices: &[i32],
        bodies: &Bodies,
        block: u32,
        launch: Option<LaunchConfig>,
        params: PhysParams,
        ptx: Option<&Path>,
        forced: Option<ForcedKernel>,
        choice: GatherChoice,
    ) -> anyhow::Result<SlicedStepper> {
        validate_block_size(block)?;
        if devices.is_empty() {
            bail!("a split step needs at least one slice");
        }
        let count = Device::count(api).context("cuDeviceGetCount")?;
        if let Some(d) = devices.iter().find(|&&d| d < 0 || d >= count) {
            bail!("CUDA device {d} does not exist: this machine has {count} (use --gpus {count} or fewer, or --gpus all)");
        }
        let n = bodies.len();
        let ctxs = primary_contexts(api, sched, devices)?;
        let ctx_of = |d: i32| ctxs.iter().find(|(o, _)| *o == d).map(|(_, c)| Arc::clone(c)).context("context of a device");
        let masses = Masses::of(&bodies.pos);

        // Each slice's kernels (a module per slice: every slice launches on its own stream);
        // the launch and the layout come from the first slice's.
        let mut loaded = Vec::with_capacity(devices.len());
        for &d in devices {
            let ctx = ctx_of(d)?;
            ctx.make_current().context("cuCtxSetCurrent")?;
            loaded.push((d, Kernels::load(&ctx, ptx)?.with_forced(forced)?, ctx));
        }
        let first = &loaded[0].1;
        loaded[0].2.make_current().context("cuCtxSetCurrent")?;
        // Plain launches: stream-K would group each body's sum by its slice's CTAs, and the
        // slices must give the bits of one slice.
        let launch = match launch {
            // The equal-mass loop takes every body's mass from one body: wrong for these.
            Some(l) if l.step_loop == StepLoop::EqualMass && !masses.equal => {
                bail!("the launch {} is for bodies of one mass, and these masses differ: let the rule choose the launch for them", l.kernel_name())
            }
            Some(l) => l.plain(),
            None => first.choose_launch(n.div_ceil(devices.len()), block, masses, false)?,
        };
        let align =
            first.step_kernel(launch).with_context(|| format!("the PTX has no step kernel {}", launch.kernel_name()))?.bodies_per_block(launch.block)
                as usize;
        let layout = SliceLayout::new(n, devices.len(), align)?;
        let padded = layout.padded();
        for (d, ctx) in &ctxs {
            let here = devices.iter().filter(|&&x| x == *d).count();
            ctx.make_current().context("cuCtxSetCurrent")?;
            check_fits(ctx, padded, 3 * here).with_context(|| format!("device {d} ({here} slice(s) of {} bodies each)", layout.len))?;
        }

        let slices = upload_slices(loaded, bodies, padded)?;

        let (clique, gather) = gather_path(&ctxs, devices, choice)?;
        if gather != GatherPath::None {
            tracing::info!(slices = devices.len(), len = layout.len, "split step: {}", gather.describe());
        }
        Ok(SlicedStepper {
            clique,
            copied: None,
            peer_to_render: false,
            slices,
            layout,
            gather,
            launch,
            leap: Leapfrog { synchronized: true },
            front: 0,
            params,
        })
    }

    /// The slices' layout.
    pub fn layout(&self) -> SliceLayout {
        self.layout
    }

    /// The gather path in use.
    pub fn gather(&self) -> &GatherPath {
        &self.gather
    }

    /// The step kernel's launch (the same on every slice).
    pub fn launch(&self) -> LaunchConfig {
        self.launch
    }

    /// The driver table the slices' contexts were made with.
    pub fn api(&self) -> &Arc<Api> {
        self.slices[0].ctx.api()
    }

    /// The device ordinal of each slice.
    pub fn devices(&self) -> Vec<i32> {
        self.slices.iter().map(|s| s.device).collect()
    }

    /// Runs `steps` whole steps and waits for them: per step every slice launches its bodies,
    /// then the gather. Returns the host time and, per step, the slowest slice's kernel and
    /// gather times.
    ///
    /// # Errors
    /// A launch, copy, NCCL call, event or synchronisation fails.
    pub fn frame(&mut self, steps: u32) -> anyhow::Result<SplitFrame> {
        self.ensure_marks(steps as usize)?;
        let t0 = Instant::now();
        for k in 0..steps as usize {
            self.step(k)?;
        }
        self.synchronize_all()?;
        let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut out = SplitFrame { wall_ms, ..SplitFrame::default() };
        for k in 0..steps as usize {
            let (mut kern, mut gath) = (0.0f64, 0.0f64);
            for s in &self.slices {
                let [a, b, c] = &s.marks[k];
                kern = kern.max(Event::elapsed_ms(a, b).context("cuEventElapsedTime")?.map_or(0.0, f64::from));
                gath = gath.max(Event::elapsed_ms(b, c).context("cuEventElapsedTime")?.map_or(0.0, f64::from));
            }
            out.kernel_ms.push(kern);
            out.gather_ms.push(gath);
        }
        Ok(out)
    }

    /// `steps` whole steps, enqueued on the slices' streams without waiting (the demo's frame;
    /// [`SlicedStepper::show`] then hands the positions to GL).
    ///
    /// # Errors
    /// A launch, copy, NCCL call or event fails.
    pub fn launch_steps(&mut self, steps: u32) -> anyhow::Result<()> {
        self.ensure_marks(usize::from(steps > 0))?;
        for i in 0..steps {
            let (drift, kick) = self.leap.next_step(self.params.dt);
            // Timed ([`SlicedStepper::last_step_times`]): from the first step's kernel to the last
            // one's end, and the last step's gather.
            let last = (i + 1 == steps).then_some(0);
            self.run_step(drift, kick, [(i == 0).then_some(0), last, last])?;
        }
        Ok(())
    }

    /// The slowest slice's compute and gather time (ms) of the last
    /// [`SlicedStepper::launch_steps`]: from its first step's kernel start to its last step's
    /// kernel end (with more than one step this spans the gathers between them), and the last
    /// step's gather (after a [`SlicedStepper::frame`]: its first step's kernel and gather).
    /// Without waiting: `None` until every slice's events have completed.
    pub fn last_step_times(&self) -> Option<(f64, f64)> {
        let (mut kern, mut gath) = (0.0f64, 0.0f64);
        for s in &self.slices {
            let [a, b, c] = s.marks.first()?;
            s.ctx.make_current().ok()?;
            kern = kern.max(f64::from(Event::elapsed_ms(a, b).ok()??));
            gath = gath.max(f64::from(Event::elapsed_ms(b, c).ok()??));
        }
        Some((kern, gath))
    }

    /// The synchronising half kick, if the velocities are half a step ahead (the positions do
    /// not move: drift 0).
    ///
    /// # Errors
    /// As [`SlicedStepper::launch_steps`].
    pub fn sync_in(&mut self) -> anyhow::Result<()> {
        if let Some((drift, kick)) = self.leap.sync_step(self.params.dt) {
            self.run_step(drift, kick, [None; 3])?;
        }
        Ok(())
    }

    /// Physics parameters.
    pub fn params(&self) -> PhysParams {
        self.params
    }

    /// Sets the physics parameters of the next steps.
    pub fn set_params(&mut self, params: PhysParams) {
        self.params = params;
    }

    /// True when the velocities are synchronised with the positions.
    pub fn synchronized(&self) -> bool {
        self.leap.synchronized
    }

    /// Copies the newest positions of the N bodies into `dst` (memory of `dst_ctx`: a mapped or
    /// imported vertex buffer of the GL device) on `stream`, after the slices' last gather: from
    /// the first slice on device `render` (`cuMemcpyDtoDAsync` in the same primary context), else
    /// from the first slice (`cuMemcpyPeerAsync` from its device). The slices' next steps wait for
    /// the copy (an event on `stream`), so it never reads positions being rewritten.
    ///
    /// # Errors
    /// `dst` holds fewer than N bodies; an event or the copy fails.
    pub fn show(&mut self, dst: interop::DevicePtr<'_, [f32; 4]>, dst_ctx: &Arc<Context>, render: i32, stream: &Stream) -> anyhow::Result<()> {
        let n = self.layout.n;
        let src = self.slices.iter().find(|s| s.device == render).unwrap_or(&self.slices[0]);
        if src.ctx.raw() != dst_ctx.raw() && !self.peer_to_render {
            // The GL device only receives (--render-gpu-computes no): a direct copy where the
            // devices allow it, else the driver stages it through the host.
            let (a, b) = (src.ctx.device(), dst_ctx.device());
            if a.can_access_peer(b).context("cuDeviceCanAccessPeer")? && b.can_access_peer(a).context("cuDeviceCanAccessPeer")? {
                src.ctx.enable_peer_access(dst_ctx).context("cuCtxEnablePeerAccess (to the GL device)")?;
                dst_ctx.enable_peer_access(&src.ctx).context("cuCtxEnablePeerAccess (from the GL device)")?;
            }
            self.peer_to_render = true;
        }
        dst_ctx.make_current().context("cuCtxSetCurrent")?;
        // Every slice's last gather: with peer copies the other slices write into `src`'s
        // buffer on their own streams, recorded in their own `done` events.
        for s in &self.slices {
            stream.wait_event(&s.done).context("cuStreamWaitEvent (the slices' last gather)")?;
        }
        let dst = dst.slice(0..n).context("the vertex buffer holds fewer than N bodies")?;
        let from = src.pos[self.front].view().slice(0..n)?;
        interop::safe::copy_view_async(dst, dst_ctx, from, &src.ctx, stream).context("copying the positions to the GL device")?;
        let copied = match self.copied.take() {
            Some(e) => e,
            None => Event::new(dst_ctx, event_flags::DISABLE_TIMING).context("cuEventCreate")?,
        };
        copied.record(stream).context("cuEventRecord")?;
        self.copied = Some(copied);
        Ok(())
    }

    /// Whether the positions reach GL from a slice on the render device (`true`) or by a copy
    /// from another device.
    pub fn renders_from_own_slice(&self, render: i32) -> bool {
        self.slices.iter().any(|s| s.device == render)
    }

    /// At least `count` sets of timing events per slice.
    fn ensure_marks(&mut self, count: usize) -> anyhow::Result<()> {
        for s in &mut self.slices {
            if s.marks.len() >= count {
                continue;
            }
            // Events are made in the current context: the slice's.
            s.ctx.make_current().context("cuCtxSetCurrent")?;
            while s.marks.len() < count {
                let ev = || Event::new(&s.ctx, event_flags::DEFAULT).context("cuEventCreate");
                s.marks.push([ev()?, ev()?, ev()?]);
            }
        }
        Ok(())
    }

    /// One step; `k` indexes the frame's timing events.
    fn step(&mut self, k: usize) -> anyhow::Result<()> {
        let (drift, kick) = self.leap.next_step(self.params.dt);
        self.run_step(drift, kick, [Some(k); 3])
    }

    /// One step with these drift and kick factors; `k`: per mark (before the kernel, after it,
    /// after the gather) the set of timing events to record it in.
    fn run_step(&mut self, drift: f32, kick: f32, k: [Option<usize>; 3]) -> anyhow::Result<()> {
        let cur = self.front;
        let peer = matches!(self.gather, GatherPath::PeerCopies { .. });
        let (launch, params, n) = (self.launch, self.params, self.layout.n);
        for r in 0..self.slices.len() {
            let s = &self.slices[r];
            s.ctx.make_current().context("cuCtxSetCurrent")?;
            if let Some(c) = &self.copied {
                s.stream.wait_event(c).context("cuStreamWaitEvent (the copy to GL)")?;
            }
            if peer {
                for (q, o) in self.slices.iter().enumerate() {
                    if q != r {
                        s.stream.wait_event(&o.done).context("cuStreamWaitEvent (positions of the other slices)")?;
                    }
                }
            }
            if let Some(k) = k[0] {
                s.marks[k][0].record(&s.stream).context("cuEventRecord")?;
            }
            let bodies = self.layout.bodies(r);
            if !bodies.is_empty() {
                let bufs = (s.pos[cur].view(), s.pos[1 - cur].view(), s.vel.view());
                s.kernels
                    .launch_step_range(launch, n, bodies, bufs, drift, kick, params, &s.stream)
                    .with_context(|| format!("slice {r} on device {}", s.device))?;
            }
            if let Some(k) = k[1] {
                s.marks[k][1].record(&s.stream).context("cuEventRecord")?;
            }
        }
        self.gather_into(1 - cur)?;
        for s in &self.slices {
            s.ctx.make_current().context("cuCtxSetCurrent")?;
            if let Some(k) = k[2] {
                s.marks[k][2].record(&s.stream).context("cuEventRecord")?;
            }
            s.done.record(&s.stream).context("cuEventRecord")?;
        }
        self.front = 1 - cur;
        Ok(())
    }

    /// Shares every slice's bodies of buffer `b` with all other slices.
    fn gather_into(&mut self, b: usize) -> anyhow::Result<()> {
        let len = self.layout.len;
        match &self.gather {
            GatherPath::None => Ok(()),
            GatherPath::Nccl { .. } => {
                let clique = self.clique.as_ref().context("NCCL gather without communicators")?;
                let bufs: Vec<_> = self.slices.iter().map(|s| s.pos[b].view()).collect();
                let streams: Vec<&Stream> = self.slices.iter().map(|s| &s.stream).collect();
                clique.all_gather_in_place(&bufs, len, &streams).context("ncclAllGather (positions)")
            }
            GatherPath::PeerCopies { .. } => {
                let g = self.slices.len();
                for r in 0..g {
                    let lo = r * len;
                    for q in (0..g).filter(|&q| q != r) {
                        let (src, dst) = pair_mut(&mut self.slices, r, q);
                        src.ctx.make_current().context("cuCtxSetCurrent")?;
                        let view = src.pos[b].view().slice(lo..lo + len)?;
                        dst.pos[b]
                            .copy_peer_async(lo, view, &src.ctx, &src.stream)
                            .with_context(|| format!("cuMemcpyPeerAsync (slice {r} → {q})"))?;
                    }
                }
                Ok(())
            }
        }
    }

    /// The newest positions of the first N bodies (read from the first slice, which holds all
    /// of them after the gather), `[N][4]`.
    ///
    /// # Errors
    /// A device-to-host copy fails.
    pub fn positions(&self) -> anyhow::Result<Vec<[f32; 4]>> {
        // Every stream: the other slices' copies into slice 0's buffer run on theirs.
        self.synchronize_all()?;
        self.read_front(&self.slices[0])
    }

    /// The velocities of the first N bodies (each slice's own bodies from its device), `[N][4]`,
    /// as the kernels keep them (half a step behind while the leapfrog is not synchronised).
    ///
    /// # Errors
    /// A device-to-host copy fails.
    pub fn velocities(&self) -> anyhow::Result<Vec<[f32; 4]>> {
        self.synchronize_all()?;
        let mut out = Vec::with_capacity(self.layout.n);
        for (r, s) in self.slices.iter().enumerate() {
            s.ctx.make_current().context("cuCtxSetCurrent")?;
            let v = s.vel.to_vec().context("cuMemcpyDtoH (velocities)")?;
            out.extend_from_slice(&v[self.layout.bodies(r)]);
        }
        Ok(out)
    }

    /// True when every slice's copy of the positions is the same bits (after a gather).
    ///
    /// # Errors
    /// A device-to-host copy fails.
    pub fn copies_agree(&self) -> anyhow::Result<bool> {
        let first = self.positions()?;
        for s in &self.slices[1..] {
            let v = self.read_front(s)?;
            if v.iter().flatten().map(|x| x.to_bits()).ne(first.iter().flatten().map(|x| x.to_bits())) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Waits for every slice's stream.
    fn synchronize_all(&self) -> anyhow::Result<()> {
        for s in &self.slices {
            s.ctx.make_current().context("cuCtxSetCurrent")?;
            s.stream.synchronize().context("cuStreamSynchronize")?;
        }
        Ok(())
    }

    /// Slice `s`'s copy of the newest positions of the first N bodies (its streams synchronised
    /// by the caller).
    fn read_front(&self, s: &Slice) -> anyhow::Result<Vec<[f32; 4]>> {
        s.ctx.make_current().context("cuCtxSetCurrent")?;
        let mut v = s.pos[self.front].to_vec().context("cuMemcpyDtoH (positions)")?;
        v.truncate(self.layout.n);
        Ok(v)
    }
}

impl Drop for SlicedStepper {
    fn drop(&mut self) {
        // Finish every stream before the communicators and buffers go.
        for s in &self.slices {
            if s.ctx.make_current().is_ok() {
                drop(s.stream.synchronize());
            }
        }
    }
}

/// `(&v[a], &mut v[b])` for `a != b`.
fn pair_mut<T>(v: &mut [T], a: usize, b: usize) -> (&T, &mut T) {
    if a < b {
        let (x, y) = v.split_at_mut(b);
        (&x[a], &mut y[0])
    } else {
        let (x, y) = v.split_at_mut(a);
        (&y[0], &mut x[b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_n_in_block_multiples() {
        let l = SliceLayout::new(5000, 3, 512).unwrap();
        assert_eq!(l.len, 2048);
        assert_eq!(l.padded(), 6144);
        assert_eq!((l.bodies(0), l.bodies(1), l.bodies(2)), (0..2048, 2048..4096, 4096..5000));
        let l = SliceLayout::new(1000, 2, 4096).unwrap();
        assert_eq!((l.bodies(0), l.bodies(1)), (0..1000, 1000..1000), "a slice wholly past N is empty");
        let l = SliceLayout::new(1 << 20, 8, 4096).unwrap();
        assert_eq!((l.len, l.padded()), (1 << 17, 1 << 20), "powers of two need no padding");
        assert!(SliceLayout::new(0, 2, 32).is_err());
    }

    #[test]
    fn pair_mut_gives_both_orders() {
        let mut v = [1, 2, 3];
        let (a, b) = pair_mut(&mut v, 2, 0);
        *b += *a;
        assert_eq!(v, [4, 2, 3]);
        let (a, b) = pair_mut(&mut v, 0, 1);
        *b += *a;
        assert_eq!(v, [4, 6, 3]);
    }
}
