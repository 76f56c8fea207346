//! Cases that need a CUDA context but no GL: module loading and events.

use std::ffi::c_void;
use std::sync::Arc;

use interop::sys::{event_flags, stream_flags};
use interop::{Context, Event, Module, Stream};

use super::{got_from, Case, Got, SetupFailed};

/// PTX whose `.version` no driver knows.
pub const PTX_TOO_NEW: &str = ".version 99.0\n.target sm_52\n.address_size 64\n\n.visible .entry lab_empty()\n{\n\tret;\n}\n";

/// A kernel that spins for `ns` nanoseconds of `%globaltimer` (one thread is enough).
pub const PTX_SPIN: &str = r".version 6.0
.target sm_52
.address_size 64

.visible .entry lab_spin(
	.param .u64 lab_spin_ns
)
{
	.reg .pred 	%p<2>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [lab_spin_ns];
	mov.u64 	%rd2, %globaltimer;
$L_spin:
	mov.u64 	%rd3, %globaltimer;
	sub.s64 	%rd4, %rd3, %rd2;
	setp.lt.u64 	%p1, %rd4, %rd1;
	@%p1 bra 	$L_spin;
	ret;
}
";

/// How long the spin kernel of `elapsed-time-not-ready` runs, ns.
pub const SPIN_NS: u64 = 100_000_000;

/// Runs a case that needs a CUDA context (made current here).
pub(super) fn run(case: &Case, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    ctx.make_current()?;
    let api = ctx.api();
    match case.name {
        "ptx-version-too-new" => match Module::from_ptx(ctx, PTX_TOO_NEW.as_bytes()) {
            Ok(_) => Ok(Got { code: 0, name: "CUDA_SUCCESS".into(), text: "the driver loaded the PTX".into(), detail: None }),
            Err(e) => got_from(Err(e)),
        },
        "elapsed-time-not-ready" => {
            let stream = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
            let start = Event::new(ctx, event_flags::DEFAULT)?;
            let end = Event::new(ctx, event_flags::DEFAULT)?;
            // The module first: its load (a JIT compile of the PTX on the host) between the two
            // records would count, as the GPU idles, in the elapsed time (on the H200 a load there
            // made the 100 ms spin read 116.8 ms).
            let module = Module::from_ptx(ctx, PTX_SPIN.as_bytes())?;
            start.record(&stream)?;
            launch_spin(&module, &stream, SPIN_NS)?;
            end.record(&stream)?;
            let mut ms = 0f32;
            // SAFETY: writes one float; both events are live and recorded. Asking before `end`
            // completed is the mistake; the driver checks and answers without writing.
            let r = unsafe { api.cuEventElapsedTime(&mut ms, start.raw(), end.raw()) };
            let mut g = got_from(r)?;
            end.synchronize()?;
            let after = Event::elapsed_ms(&start, &end)?;
            g.detail = Some(format!(
                "after cuEventSynchronize(end) the elapsed time is {}",
                after.map_or_else(|| "still not ready".to_string(), |t| format!("{t:.1} ms"))
            ));
            Ok(g)
        }
        other => Err(SetupFailed(format!("no context case {other}"))),
    }
}

/// Launches [`PTX_SPIN`] on `stream` for `ns` nanoseconds (one thread). Returns its module, which
/// the caller keeps until the stream has passed the kernel.
pub(super) fn spin(ctx: &Arc<Context>, stream: &Stream, ns: u64) -> Result<Module, SetupFailed> {
    let module = Module::from_ptx(ctx, PTX_SPIN.as_bytes())?;
    launch_spin(&module, stream, ns)?;
    Ok(module)
}

/// Launches the spin kernel of `module` (loaded from [`PTX_SPIN`]) on `stream` for `ns`
/// nanoseconds; the caller keeps the module until the stream has passed the kernel.
fn launch_spin(module: &Module, stream: &Stream, ns: u64) -> Result<(), SetupFailed> {
    let spin = module.function("lab_spin")?;
    let mut ns = ns;
    let mut params: [*mut c_void; 1] = [(&mut ns as *mut u64).cast()];
    // SAFETY: lab_spin takes one .u64 parameter and `params` points to a live u64 (the driver
    // copies it at the launch); the kernel touches no memory.
    unsafe { spin.launch((1, 1, 1), (1, 1, 1), 0, stream, &mut params) }?;
    Ok(())
}
