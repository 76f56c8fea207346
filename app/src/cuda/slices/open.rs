//! The split stepper's devices opened: their primary contexts, the slices' buffers and streams,
//! and the gather path between them.

use std::sync::Arc;

use anyhow::{bail, Context as _};
use interop::nccl::Clique;
use interop::sys::event_flags;
use interop::{Api, Context, Device, DeviceBuffer, Event, SchedFlag, Stream};

use super::layout::{GatherPath, Slice};
use crate::cuda::kernel_set::Kernels;
use crate::cuda::settings::GatherChoice;
use sim::Bodies;

/// One primary context per distinct device of `devices`, shared by its slices, with the
/// scheduling flag `sched`.
pub(super) fn primary_contexts(api: &Arc<Api>, sched: SchedFlag, devices: &[i32]) -> anyhow::Result<Vec<(i32, Arc<Context>)>> {
    let mut ctxs: Vec<(i32, Arc<Context>)> = Vec::new();
    for &d in devices {
        if !ctxs.iter().any(|(o, _)| *o == d) {
            let dev = Device::get(api, d).with_context(|| format!("cuDeviceGet({d})"))?;
            let ctx = Context::primary(&dev, sched).with_context(|| format!("primary context of device {d}"))?;
            ctxs.push((d, ctx));
        }
    }
    Ok(ctxs)
}

/// The slices of `loaded` (device, kernels, context): each with its stream, both position
/// buffers and the velocities of `bodies`, padded to `padded` bodies with zeros.
pub(super) fn upload_slices(loaded: Vec<(i32, Kernels, Arc<Context>)>, bodies: &Bodies, padded: usize) -> anyhow::Result<Vec<Slice>> {
    let mut pos0 = bodies.pos.clone();
    pos0.resize(padded, [0.0; 4]);
    let mut vel0 = bodies.vel.clone();
    vel0.resize(padded, [0.0; 4]);
    let mut slices = Vec::with_capacity(loaded.len());
    for (d, kernels, ctx) in loaded {
        ctx.make_current().context("cuCtxSetCurrent")?;
        let stream = Stream::create(&ctx, interop::sys::stream_flags::NON_BLOCKING, 0).context("cuStreamCreate")?;
        let pos = [
            DeviceBuffer::from_slice(&ctx, &pos0).context("uploading positions")?,
            DeviceBuffer::from_slice(&ctx, &pos0).context("uploading positions (second buffer)")?,
        ];
        let vel = DeviceBuffer::from_slice(&ctx, &vel0).context("uploading velocities")?;
        let done = Event::new(&ctx, event_flags::DISABLE_TIMING).context("cuEventCreate")?;
        slices.push(Slice { pos, vel, done, marks: Vec::new(), kernels, stream, ctx, device: d });
    }
    Ok(slices)
}

/// The gather path of `choice` over the contexts `ctxs` of `devices` (with NCCL's clique): none
/// for one slice, else NCCL when it may and does load, else peer copies (peer access enabled
/// where both directions can).
pub(super) fn gather_path(ctxs: &[(i32, Arc<Context>)], devices: &[i32], choice: GatherChoice) -> anyhow::Result<(Option<Clique>, GatherPath)> {
    let distinct = ctxs.len() == devices.len();
    Ok(if devices.len() == 1 && choice != GatherChoice::Nccl {
        (None, GatherPath::None)
    } else {
        let nccl = match choice {
            GatherChoice::Peer => Err("--gather peer".to_string()),
            _ if !distinct => Err("a device holds two slices (NCCL takes one rank per device)".to_string()),
            _ => crate::libraries::open_nccl().map_err(|e| format!("{e}")),
        };
        let nccl = nccl.and_then(|lib| match Clique::init_all(&lib, devices) {
            Ok(c) => Ok((c, lib.version_string())),
            Err(e) => Err(format!("ncclCommInitAll failed: {e}")),
        });
        match nccl {
            Ok((clique, version)) => (Some(clique), GatherPath::Nccl { version }),
            Err(why) if choice == GatherChoice::Nccl => bail!("--gather nccl: {why}; use --gather peer (or auto) for peer copies"),
            Err(why) => {
                let direct = enable_peer_access(ctxs)?;
                (None, GatherPath::PeerCopies { direct, one_device: ctxs.len() == 1, why })
            }
        }
    })
}

/// Enables peer access both ways between every two of `ctxs` that can; whether all could.
fn enable_peer_access(ctxs: &[(i32, Arc<Context>)]) -> anyhow::Result<bool> {
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
    Ok(direct)
}
