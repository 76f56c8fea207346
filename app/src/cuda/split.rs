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
//! block centre (the mass-scaled kernels' c), and the positions are **the same bits** as with
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
//!
//! Steps here are whole steps (no long-step split, no spreading over frames: a step of all N on
//! several GPUs is the point of this path).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context as _};
use interop::nccl::{Clique, Nccl};
use interop::sys::event_flags;
use interop::{Api, Context, Device, DeviceBuffer, Event, Stream};

use super::kernels::{check_fits, masses_suit_scaled, validate_block_size, Kernels, Launch};
use super::settings::GatherChoice;
use crate::sim::{Bodies, Leapfrog, PhysParams};

/// How the positions are shared after each step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatherPath {
    /// One slice: nothing to gather.
    None,
    /// `ncclAllGather` in one group over a communicator clique (`ncclCommInitAll`), NCCL `version`.
    Nccl {
        /// NCCL's version, `major.minor.patch`.
        version: String,
    },
    /// `cuMemcpyPeerAsync` from each slice to every other; `direct`: peer access is enabled
    /// between every pair of distinct devices (else some copies are staged through host memory).
    /// Slices on the same device copy with `cuMemcpyDtoDAsync`.
    PeerCopies {
        /// Every pair of distinct devices has peer access.
        direct: bool,
        /// All slices are on one device (every copy is a `cuMemcpyDtoDAsync` within it).
        one_device: bool,
        /// Why NCCL is not used (`--gather peer`, NCCL missing, a device holding two slices).
        why: String,
    },
}

impl GatherPath {
    /// Short name for reports: `none`, `nccl`, `peer`.
    pub fn name(&self) -> &'static str {
        match self {
            GatherPath::None => "none",
            GatherPath::Nccl { .. } => "nccl",
            GatherPath::PeerCopies { .. } => "peer",
        }
    }

    /// One line for the overlay and the log.
    pub fn describe(&self) -> String {
        match self {
            GatherPath::None => "one slice: no gather".into(),
            GatherPath::Nccl { version } => format!("NCCL {version} ncclAllGather"),
            GatherPath::PeerCopies { one_device: true, why, .. } => {
                format!("copies between the slices of one GPU (cuMemcpyDtoDAsync) — {why}")
            }
            GatherPath::PeerCopies { direct: true, why, .. } => format!("peer copies (cuMemcpyPeerAsync, direct) — {why}"),
            GatherPath::PeerCopies { direct: false, why, .. } => {
                format!("peer copies (cuMemcpyPeerAsync, staged through host memory where no peer access) — {why}")
            }
        }
    }
}

/// How N bodies are cut into slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceLayout {
    /// N.
    pub n: usize,
    /// Number of slices.
    pub slices: usize,
    /// Bodies per slice (the last ones may reach past N): a multiple of `align`.
    pub len: usize,
}

impl SliceLayout {
    /// `slices` slices of `ceil(N / slices)` bodies rounded up to a multiple of `align` (the
    /// step kernel's bodies per block).
    ///
    /// # Errors
    /// N, `slices` or `align` is 0.
    pub fn new(n: usize, slices: usize, align: usize) -> anyhow::Result<SliceLayout> {
        if n == 0 || slices == 0 || align == 0 {
            bail!("a split needs N ≥ 1, at least one slice and a block alignment ≥ 1 (got N = {n}, {slices} slices, {align})");
        }
        let len = n.div_ceil(slices).div_ceil(align) * align;
        Ok(SliceLayout { n, slices, len })
    }

    /// Slots per buffer: `slices · len` (≥ N).
    pub fn padded(&self) -> usize {
        self.slices * self.len
    }

    /// The bodies slice `r` integrates: its share of `0..N` (empty for slices wholly past N).
    pub fn bodies(&self, r: usize) -> std::ops::Range<usize> {
        let lo = (r * self.len).min(self.n);
        lo..((r + 1) * self.len).min(self.n)
    }
}

/// One slice: a device's context, its own stream, kernels and full-size buffers.
struct Slice {
    /// Position buffers `[padded][4]` that ping-pong (every slice holds all positions).
    pos: [DeviceBuffer<[f32; 4]>; 2],
    /// Velocities `[padded][4]`; only this slice's bodies are current.
    vel: DeviceBuffer<[f32; 4]>,
    /// Recorded after this slice's part of the gather (peer copies).
    done: Event,
    /// Per step of a frame: events before the kernel, after it, after the gather.
    marks: Vec<[Event; 3]>,
    kernels: Kernels,
    stream: Stream,
    ctx: Arc<Context>,
    /// CUDA device ordinal.
    device: i32,
}

/// Timings of one [`SplitStepper::frame`].
#[derive(Debug, Clone, Default)]
pub struct SplitFrame {
    /// Host time from the first enqueue to every stream finished, ms.
    pub wall_ms: f64,
    /// Per step: the slowest slice's kernel time (CUDA events), ms.
    pub kernel_ms: Vec<f64>,
    /// Per step: the slowest slice's gather time (from its kernel's end to its gather's end), ms.
    pub gather_ms: Vec<f64>,
}

/// The leapfrog integrator over slices on one or more devices (see the module docs).
pub struct SplitStepper {
    /// Field order is drop order: the communicators go before the slices' streams and buffers.
    clique: Option<Clique>,
    slices: Vec<Slice>,
    layout: SliceLayout,
    gather: GatherPath,
    launch: Launch,
    leap: Leapfrog,
    /// Index (0/1) of the buffers holding the newest positions.
    front: usize,
    params: PhysParams,
}

impl SplitStepper {
    /// Uploads `bodies` to one slice per entry of `devices` (CUDA ordinals; a device may hold
    /// several slices), loads the kernels (`ptx`: a PTX file, else the embedded one) on each and
    /// picks the gather path: `choice` = auto takes NCCL when it loads and every slice has a
    /// device of its own, else peer copies. `launch`: the step kernel's launch, else the launch
    /// rule's for one slice's bodies with `block` ([`Kernels::choose_launch`]).
    ///
    /// # Errors
    /// No device, an ordinal past the device count, an invalid block size, N too large for a
    /// device, a PTX load, allocation or stream failure; `choice` = nccl when NCCL does not load
    /// or a device holds two slices.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        api: &Arc<Api>,
        devices: &[i32],
        bodies: &Bodies,
        block: u32,
        launch: Option<Launch>,
        params: PhysParams,
        ptx: Option<&Path>,
        choice: GatherChoice,
    ) -> anyhow::Result<SplitStepper> {
        validate_block_size(block)?;
        if devices.is_empty() {
            bail!("a split step needs at least one slice");
        }
        let count = Device::count(api).context("cuDeviceGetCount")?;
        if let Some(d) = devices.iter().find(|&&d| d < 0 || d >= count) {
            bail!("CUDA device {d} does not exist: this machine has {count} (use --gpus {count} or fewer, or --gpus all)");
        }
        let n = bodies.len();
        // One primary context per distinct device, shared by its slices.
        let mut ctxs: Vec<(i32, Arc<Context>)> = Vec::new();
        for &d in devices {
            if !ctxs.iter().any(|(o, _)| *o == d) {
                let dev = Device::get(api, d).with_context(|| format!("cuDeviceGet({d})"))?;
                let ctx = Context::primary(&dev, interop::SchedFlag::Auto).with_context(|| format!("primary context of device {d}"))?;
                ctxs.push((d, ctx));
            }
        }
        let ctx_of = |d: i32| ctxs.iter().find(|(o, _)| *o == d).map(|(_, c)| Arc::clone(c)).context("context of a device");
        let scaled_ok = masses_suit_scaled(&bodies.pos);

        // The launch and the layout, from the first slice's kernels.
        let first = ctx_of(devices[0])?;
        first.make_current().context("cuCtxSetCurrent")?;
        let probe = Kernels::load(&first, ptx)?;
        let launch = match launch {
            Some(l) => l,
            None => probe.choose_launch(n.div_ceil(devices.len()), block, scaled_ok)?,
        };
        let align = probe
            .step_kernel(launch)
            .with_context(|| format!("the PTX has no step kernel {}", launch.kernel_name()))?
            .bodies_per_block(launch.block) as usize;
        drop(probe);
        let layout = SliceLayout::new(n, devices.len(), align)?;
        let padded = layout.padded();
        for (d, ctx) in &ctxs {
            let here = devices.iter().filter(|&&x| x == *d).count();
            ctx.make_current().context("cuCtxSetCurrent")?;
            check_fits(ctx, padded, 3 * here).with_context(|| format!("device {d} ({here} slice(s) of {} bodies each)", layout.len))?;
        }

        let mut pos0 = bodies.pos.clone();
        pos0.resize(padded, [0.0; 4]);
        let mut vel0 = bodies.vel.clone();
        vel0.resize(padded, [0.0; 4]);
        let mut slices = Vec::with_capacity(devices.len());
        for &d in devices {
            let ctx = ctx_of(d)?;
            ctx.make_current().context("cuCtxSetCurrent")?;
            let stream = Stream::create(&ctx, interop::sys::stream_flags::NON_BLOCKING, 0).context("cuStreamCreate")?;
            let kernels = Kernels::load(&ctx, ptx)?;
            let pos = [
                DeviceBuffer::from_slice(&ctx, &pos0).context("uploading positions")?,
                DeviceBuffer::from_slice(&ctx, &pos0).context("uploading positions (second buffer)")?,
            ];
            let vel = DeviceBuffer::from_slice(&ctx, &vel0).context("uploading velocities")?;
            let done = Event::new(&ctx, event_flags::DISABLE_TIMING).context("cuEventCreate")?;
            slices.push(Slice { pos, vel, done, marks: Vec::new(), kernels, stream, ctx, device: d });
        }

        let distinct = ctxs.len() == devices.len();
        let (clique, gather) = if devices.len() == 1 && choice != GatherChoice::Nccl {
            (None, GatherPath::None)
        } else {
            let nccl = match choice {
                GatherChoice::Peer => Err("--gather peer".to_string()),
                _ if !distinct => Err("a device holds two slices (NCCL takes one rank per device)".to_string()),
                _ => Nccl::open().map_err(|e| format!("{e}")),
            };
            match nccl {
                Ok(lib) => {
                    let clique = Clique::init_all(&lib, devices).context("ncclCommInitAll")?;
                    (Some(clique), GatherPath::Nccl { version: lib.version_string() })
                }
                Err(why) if choice == GatherChoice::Nccl => bail!("--gather nccl: {why}"),
                Err(why) => {
                    let mut direct = true;
                    for (i, (da, ca)) in ctxs.iter().enumerate() {
                        for (db, cb) in &ctxs[i + 1..] {
                            let (a, b) = (ca.device(), cb.device());
                            if a.can_access_peer(b)? && b.can_access_peer(a)? {
                                ca.enable_peer_access(cb).with_context(|| format!("cuCtxEnablePeerAccess ({da} → {db})"))?;
                                cb.enable_peer_access(ca).with_context(|| format!("cuCtxEnablePeerAccess ({db} → {da})"))?;
                            } else {
                                direct = false;
                            }
                        }
                    }
                    (None, GatherPath::PeerCopies { direct, one_device: ctxs.len() == 1, why })
                }
            }
        };
        if gather != GatherPath::None {
            tracing::info!(slices = devices.len(), len = layout.len, "split step: {}", gather.describe());
        }
        Ok(SplitStepper { clique, slices, layout, gather, launch, leap: Leapfrog { synchronized: true }, front: 0, params })
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
    pub fn launch(&self) -> Launch {
        self.launch
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
        for s in &mut self.slices {
            while s.marks.len() < steps as usize {
                let ev = || Event::new(&s.ctx, event_flags::DEFAULT).context("cuEventCreate");
                s.marks.push([ev()?, ev()?, ev()?]);
            }
        }
        let t0 = Instant::now();
        for k in 0..steps as usize {
            self.step(k)?;
        }
        for s in &self.slices {
            s.ctx.make_current().context("cuCtxSetCurrent")?;
            s.stream.synchronize().context("cuStreamSynchronize")?;
        }
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

    /// One step; `k` indexes the frame's timing events.
    fn step(&mut self, k: usize) -> anyhow::Result<()> {
        let (drift, kick) = self.leap.next_step(self.params.dt);
        let cur = self.front;
        let peer = matches!(self.gather, GatherPath::PeerCopies { .. });
        let (launch, params, n) = (self.launch, self.params, self.layout.n);
        for r in 0..self.slices.len() {
            let s = &self.slices[r];
            s.ctx.make_current().context("cuCtxSetCurrent")?;
            if peer {
                for (q, o) in self.slices.iter().enumerate() {
                    if q != r {
                        s.stream.wait_event(&o.done).context("cuStreamWaitEvent (positions of the other slices)")?;
                    }
                }
            }
            s.marks[k][0].record(&s.stream).context("cuEventRecord")?;
            let bodies = self.layout.bodies(r);
            if !bodies.is_empty() {
                let bufs = (s.pos[cur].view(), s.pos[1 - cur].view(), s.vel.view());
                s.kernels
                    .launch_step_range(launch, n, bodies, bufs, drift, kick, params, &s.stream)
                    .with_context(|| format!("slice {r} on device {}", s.device))?;
            }
            s.marks[k][1].record(&s.stream).context("cuEventRecord")?;
        }
        self.gather_into(1 - cur)?;
        for s in &self.slices {
            s.ctx.make_current().context("cuCtxSetCurrent")?;
            s.marks[k][2].record(&s.stream).context("cuEventRecord")?;
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
        let s = &self.slices[0];
        s.ctx.make_current().context("cuCtxSetCurrent")?;
        s.stream.synchronize().context("cuStreamSynchronize")?;
        let mut v = s.pos[self.front].to_vec().context("cuMemcpyDtoH (positions)")?;
        v.truncate(self.layout.n);
        Ok(v)
    }

    /// The velocities of the first N bodies (each slice's own bodies from its device), `[N][4]`,
    /// as the kernels keep them (half a step behind while the leapfrog is not synchronised).
    ///
    /// # Errors
    /// A device-to-host copy fails.
    pub fn velocities(&self) -> anyhow::Result<Vec<[f32; 4]>> {
        let mut out = Vec::with_capacity(self.layout.n);
        for (r, s) in self.slices.iter().enumerate() {
            s.ctx.make_current().context("cuCtxSetCurrent")?;
            s.stream.synchronize().context("cuStreamSynchronize")?;
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
            s.ctx.make_current().context("cuCtxSetCurrent")?;
            s.stream.synchronize().context("cuStreamSynchronize")?;
            let mut v = s.pos[self.front].to_vec().context("cuMemcpyDtoH (positions)")?;
            v.truncate(self.layout.n);
            if v.iter().flatten().map(|x| x.to_bits()).ne(first.iter().flatten().map(|x| x.to_bits())) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Drop for SplitStepper {
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
