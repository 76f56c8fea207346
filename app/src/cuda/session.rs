//! The app's CUDA session: the driver opened with the semantics a stream kind needs, the
//! context on the CUDA device that shares the current GL context, the frame's stream, and the
//! small helpers every CUDA user of the app shares (event times, the entry-point report rows).

use std::sync::Arc;

use anyhow::{bail, Context as _};
use interop::sys::stream_flags;
use interop::{safe::DeviceInfo, Context, Device, Event, SchedFlag, Stream, StreamSemantics};

use super::settings::{CtxSched, StreamKind};
use crate::gfx::GlInfo;

/// `CU_CTX_SCHED_*` of the CLI value.
pub fn sched_flag(s: CtxSched) -> SchedFlag {
    match s {
        CtxSched::Auto => SchedFlag::Auto,
        CtxSched::Spin => SchedFlag::Spin,
        CtxSched::Yield => SchedFlag::Yield,
        CtxSched::Blocking => SchedFlag::BlockingSync,
    }
}

/// Opens CUDA with the semantics `stream` needs, makes the context on the CUDA device that
/// shares the current GL context (`cuGLGetDevices`), and the frame's stream.
///
/// # Errors
/// No driver, or no CUDA device can share the GL context (the message names GL_VENDOR and
/// GL_RENDERER and the remedy).
pub fn open_for_gl(gl_info: &GlInfo, stream: StreamKind, priority: i32, sched: CtxSched) -> anyhow::Result<(Arc<Context>, Stream, DeviceInfo)> {
    let semantics = if stream == StreamKind::PerThread { StreamSemantics::PerThread } else { StreamSemantics::Legacy };
    let no_share = |why: String| {
        anyhow::anyhow!(
            "CUDA cannot share this GL context: GL_VENDOR={}, GL_RENDERER={} ({why}). CUDA–GL interop needs the GL \
             context on an NVIDIA GPU driven by the NVIDIA driver (headless: its EGL device; windowed: the display \
             it drives; not Mesa, another vendor's GPU or WSL2). Remedy: run there, or use --backend cpu",
            gl_info.vendor,
            gl_info.renderer
        )
    };
    let api = crate::libraries::init(semantics).map_err(|e| {
        anyhow::anyhow!(
            "CUDA is not available: {e}. CUDA–GL interop needs the NVIDIA driver and the GL context on its GPU; \
             this GL context is GL_VENDOR={}, GL_RENDERER={}",
            gl_info.vendor,
            gl_info.renderer
        )
    })?;
    // The demo's API trace, when on, sees this table's calls from here on (registration included).
    crate::trace::attach_active(&api);
    let devices = interop::gl_devices(&api).map_err(|e| no_share(e.to_string()))?;
    if devices.is_empty() {
        return Err(no_share("cuGLGetDevices lists no CUDA device for it".into()));
    }
    let raw = gl_info.egl_cuda_device.filter(|d| devices.contains(d)).unwrap_or(devices[0]);
    let device = Device::from_raw(&api, raw);
    let ctx = Context::primary(&device, sched_flag(sched)).context("cuDevicePrimaryCtxRetain")?;
    let info = device.info()?;
    let stream = make_stream(&ctx, stream, priority)?;
    Ok((ctx, stream, info))
}

/// Whether CUDA can share the GL context current on this thread: `Ok(Ok(()))` when
/// `cuGLGetDevices` (CU_GL_DEVICE_LIST_ALL) lists a CUDA device for it, `Ok(Err(why))` when it
/// lists none or fails (CUDA is there, this context is not on it). Makes no CUDA context.
///
/// # Errors
/// CUDA is not there to ask: no driver library, or `cuInit` failed (no device); the message
/// says which.
pub fn cuda_shares_current_gl() -> anyhow::Result<Result<(), String>> {
    let api = crate::libraries::init(StreamSemantics::Legacy).map_err(|e| anyhow::anyhow!("CUDA is not available: {e}"))?;
    Ok(match interop::gl_devices(&api) {
        Ok(devices) if devices.is_empty() => Err("cuGLGetDevices lists no CUDA device for it".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("cuGLGetDevices: {e}")),
    })
}

/// The frame's stream for a stream kind.
///
/// # Errors
/// `cuStreamCreateWithPriority` fails.
pub fn make_stream(ctx: &Arc<Context>, kind: StreamKind, priority: i32) -> anyhow::Result<Stream> {
    Ok(match kind {
        // With legacy semantics the null stream is the legacy default stream; with per-thread
        // semantics (the table resolved to _ptsz exports) it is the per-thread default stream.
        StreamKind::Legacy | StreamKind::PerThread => Stream::special(ctx, interop::safe::StreamKind::Null),
        StreamKind::NonBlocking => {
            let (least, greatest) = ctx.stream_priority_range()?;
            if !(greatest..=least).contains(&priority) {
                bail!("stream priority {priority} is outside this device's range {greatest}..={least} (lower is higher priority)");
            }
            Stream::create(ctx, stream_flags::NON_BLOCKING, priority).context("cuStreamCreateWithPriority")?
        }
    })
}

/// `cuEventElapsedTime(a, b)` in ms as f64; `None` while `b` has not completed.
pub fn ms(a: &Event, b: &Event) -> anyhow::Result<Option<f64>> {
    Ok(Event::elapsed_ms(a, b)?.map(f64::from))
}
