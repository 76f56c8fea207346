//! GPU tests of the driver binding. Run for real on a machine with an NVIDIA GPU; reported as
//! ignored (skipped) elsewhere; `NBODY_REQUIRE_GPU=1` makes a missing GPU a failure.

#[path = "common/gpu_gate.rs"]
mod gpu_gate;

// The gate (shared with the app's GPU tests) names the crate as the app does.
extern crate cuda_gl_interop as interop;

use std::ffi::c_void;
use std::sync::Arc;

use cuda_gl_interop::driver::entry::PtVariant;
use cuda_gl_interop::driver::ENTRY_POINTS;
use cuda_gl_interop::sys::{event_flags, stream_flags};
use cuda_gl_interop::*;
use gpu_gate::ensure;
use libtest_mimic::Failed;

/// A tiny kernel: `out[i] = 2 * i + 1` for i < n; and a spin kernel that waits `cycles` clocks.
const TINY_PTX: &str = r#"
.version 7.8
.target sm_75
.address_size 64
.visible .entry write_index(.param .u64 out, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    shl.b32 %r6, %r5, 1;
    add.s32 %r7, %r6, 1;
    st.global.u32 [%rd4], %r7;
DONE:
    ret;
}
.visible .entry spin(.param .u64 cycles)
{
    .reg .pred %p<2>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [cycles];
    mov.u64 %rd2, %clock64;
LOOP:
    mov.u64 %rd3, %clock64;
    sub.s64 %rd4, %rd3, %rd2;
    setp.lt.s64 %p1, %rd4, %rd1;
    @%p1 bra LOOP;
    ret;
}
"#;

fn setup(semantics: StreamSemantics) -> Result<(Arc<Api>, Arc<Context>), Failed> {
    let api = init(semantics)?;
    let dev = Device::get(&api, 0)?;
    let ctx = Context::primary(&dev, SchedFlag::Auto)?;
    Ok((api, ctx))
}

fn every_entry_resolves_and_device_attributes_read() -> Result<(), Failed> {
    for sem in [StreamSemantics::Legacy, StreamSemantics::PerThread] {
        let api = init(sem)?;
        let missing: Vec<_> = api.report().iter().filter(|r| r.address == 0).map(|r| r.name).collect();
        ensure(missing.is_empty(), format!("{sem}: unresolved entries {missing:?}"))?;
        let info = Device::get(&api, 0)?.info()?;
        ensure(!info.name.is_empty() && info.multiprocessors > 0 && info.warp_size == 32, format!("{info:?}"))?;
        ensure(info.total_memory_bytes > 1 << 30, "less than 1 GiB of device memory?")?;
    }
    Ok(())
}

fn per_thread_semantics_resolve_to_ptsz_and_ptds_exports() -> Result<(), Failed> {
    for sem in [StreamSemantics::Legacy, StreamSemantics::PerThread] {
        let api = init(sem)?;
        let mut checked = 0;
        for decl in ENTRY_POINTS.iter().filter(|d| d.pt != PtVariant::None) {
            let row = api.report().iter().find(|r| r.name == decl.name).ok_or("row missing")?;
            let want = decl.export_for(sem);
            let export = api.driver().export_address(&want);
            ensure(export != 0, format!("{want}: no such export"))?;
            ensure(row.address == export, format!("{sem}: {} resolved to {:#x}, export {want} is {export:#x}", decl.name, row.address))?;
            checked += 1;
        }
        ensure(checked >= 10, format!("only {checked} stream-ordered entries checked"))?;
    }
    Ok(())
}

fn tiny_ptx_launch_and_copy_round_trip() -> Result<(), Failed> {
    for sem in [StreamSemantics::Legacy, StreamSemantics::PerThread] {
        let (_api, ctx) = setup(sem)?;
        let module = Module::from_ptx(&ctx, TINY_PTX.as_bytes())?;
        let f = module.function("write_index")?;
        let attrs = f.attributes()?;
        ensure(attrs.registers > 0 && attrs.max_threads_per_block >= 256, format!("{attrs:?}"))?;
        let n: u32 = 1000; // not a multiple of the block size
        let mut buf = DeviceBuffer::<u32>::from_slice(&ctx, &vec![0xdead_beef; n as usize])?;
        let stream = Stream::create(&ctx, stream_flags::NON_BLOCKING, 0)?;
        let mut ptr = buf.ptr();
        let mut nn = n;
        let mut params = [(&mut ptr as *mut u64).cast::<c_void>(), (&mut nn as *mut u32).cast::<c_void>()];
        // SAFETY: two parameters (u64 device pointer to n u32, u32 n) as the kernel declares; the
        // buffer lives until the stream is synchronised below.
        unsafe { f.launch((n.div_ceil(256), 1, 1), (256, 1, 1), 0, &stream, &mut params) }?;
        stream.synchronize()?;
        let out = buf.to_vec()?;
        let bad = out.iter().enumerate().position(|(i, &v)| v != 2 * i as u32 + 1);
        ensure(bad.is_none(), format!("{sem}: wrong value at {bad:?}"))?;
        // Round trip of a pattern through the device.
        let pattern: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        buf.copy_from_host(&pattern)?;
        ensure(buf.to_vec()? == pattern, "copy round trip differs")?;
        let mut pinned = PinnedBuffer::<u32>::alloc(&ctx, n as usize, 0)?;
        // SAFETY: `pinned` is read only after the stream is synchronised on the next line.
        unsafe { buf.copy_to_pinned_async(&mut pinned, &stream) }?;
        stream.synchronize()?;
        ensure(pinned.as_slice() == pattern.as_slice(), "async copy to pinned memory differs")?;
    }
    Ok(())
}

fn event_timing_and_not_ready() -> Result<(), Failed> {
    let (_api, ctx) = setup(StreamSemantics::Legacy)?;
    let module = Module::from_ptx(&ctx, TINY_PTX.as_bytes())?;
    let spin = module.function("spin")?;
    let stream = Stream::create(&ctx, stream_flags::NON_BLOCKING, 0)?;
    let (start, end) = (Event::new(&ctx, event_flags::DEFAULT)?, Event::new(&ctx, event_flags::DEFAULT)?);
    start.record(&stream)?;
    let mut cycles: u64 = 200_000_000; // about 0.1 s at 2 GHz
    let mut params = [(&mut cycles as *mut u64).cast::<c_void>()];
    // SAFETY: one u64 parameter, as the kernel declares; no memory is touched.
    unsafe { spin.launch((1, 1, 1), (1, 1, 1), 0, &stream, &mut params) }?;
    end.record(&stream)?;
    ensure(!end.query()?, "the event completed before the spin kernel could have")?;
    ensure(Event::elapsed_ms(&start, &end)?.is_none(), "elapsed time of an incomplete event should read as not ready")?;
    end.synchronize()?;
    ensure(end.query()?, "event not complete after synchronize")?;
    let ms = Event::elapsed_ms(&start, &end)?.ok_or("elapsed time not ready after synchronize")?;
    ensure((20.0..2000.0).contains(&ms), format!("spin of 2e8 cycles took {ms} ms"))?;
    Ok(())
}

fn jit_error_returns_its_log_and_interior_nul_is_rejected() -> Result<(), Failed> {
    let (_api, ctx) = setup(StreamSemantics::Legacy)?;
    let bad = ".version 7.8\n.target sm_75\n.address_size 64\n.visible .entry k() { bogus.instruction %r1; ret; }\n";
    match Module::from_ptx(&ctx, bad.as_bytes()) {
        Err(Error::Jit { log, .. }) => ensure(log.contains("bogus") || log.to_lowercase().contains("error"), format!("log: {log}"))?,
        other => return Err(format!("expected a JIT error, got {other:?}").into()),
    }
    let mut with_nul = TINY_PTX.as_bytes().to_vec();
    with_nul[10] = 0;
    match Module::from_ptx(&ctx, &with_nul) {
        Err(Error::InteriorNul { offset: 10 }) => {}
        other => return Err(format!("expected InteriorNul at 10, got {other:?}").into()),
    }
    let newer = TINY_PTX.replace(".version 7.8", ".version 99.9");
    match Module::from_ptx(&ctx, newer.as_bytes()) {
        Err(e) => ensure(e.code().is_some(), format!("{e}"))?,
        Ok(_) => return Err("PTX .version 99.9 loaded".into()),
    }
    Ok(())
}

fn contexts_streams_and_priorities() -> Result<(), Failed> {
    let api = init(StreamSemantics::Legacy)?;
    let dev = Device::get(&api, 0)?;
    for sched in [SchedFlag::Spin, SchedFlag::Yield, SchedFlag::BlockingSync, SchedFlag::Auto] {
        let ctx = Context::create(&dev, sched)?;
        ensure(SchedFlag::from_bits(ctx.flags()?) == sched, format!("flags {:#x} for {sched:?}", ctx.flags()?))?;
        let (least, greatest) = ctx.stream_priority_range()?;
        ensure(greatest <= least, format!("priority range ({least}, {greatest})"))?;
        let s = Stream::create(&ctx, stream_flags::NON_BLOCKING, greatest)?;
        ensure(s.priority()? == greatest, "stream priority not kept")?;
        ensure(s.flags()? & stream_flags::NON_BLOCKING != 0, "non-blocking flag lost")?;
        drop(s);
        let mut popped = std::ptr::null_mut();
        // SAFETY: pops the context cuCtxCreate pushed on this thread.
        unsafe { api.cuCtxPopCurrent(&mut popped) }?;
        ensure(popped == ctx.raw(), "popped another context")?;
        {
            let _g = ctx.push()?;
            let mut cur = std::ptr::null_mut();
            // SAFETY: writes one handle.
            unsafe { api.cuCtxGetCurrent(&mut cur) }?;
            ensure(cur == ctx.raw(), "pushed context is not current")?;
        }
    }
    let primary = Context::primary(&dev, SchedFlag::BlockingSync)?;
    let (free, total) = primary.memory_info()?;
    ensure(free > 0 && free <= total, "memory info")?;
    Ok(())
}

/// CUPTI activity records of this process's own work: a `nbody_touch` launch and copies of a
/// distinctive size (1028 bytes, used by no other test here; the other GPU tests run in parallel
/// threads and CUPTI records every context of the process).
#[cfg(feature = "cupti")]
fn cupti_records_kernels_and_copies() -> Result<(), Failed> {
    use cuda_gl_interop::cupti::{ActivityKind, Availability, Cupti, CuptiError, Track};
    let (_api, ctx) = setup(StreamSemantics::Legacy)?;
    let cupti = Cupti::open()?;
    let tracks = cupti.enable(&Track::ALL)?;
    eprintln!("CUPTI {} (API version {}), kernel names read: {}", cupti.path(), cupti.version(), cupti.kernel_names());
    for (t, a) in &tracks {
        eprintln!("  {t:?}: {a:?}");
    }
    for want in [Track::Kernels, Track::Memcpy, Track::Memset] {
        let got = tracks.iter().find(|(t, _)| *t == want).map(|(_, a)| a);
        ensure(got == Some(&Availability::Enabled), format!("{want:?} not enabled: {got:?}"))?;
    }
    ensure(cupti.enable(&[Track::Kernels])? == [(Track::Kernels, Availability::Enabled)], "enable is not idempotent")?;
    match Cupti::open() {
        Err(CuptiError::Busy) => {}
        other => return Err(format!("a second Cupti should be refused as Busy, got {other:?}").into()),
    }

    let before = cupti.timestamp_ns();
    let touch = kernels::TouchKernel::load(&ctx)?;
    let stream = Stream::create(&ctx, stream_flags::NON_BLOCKING, 0)?;
    let n = 257; // 1028 bytes
    let mut buf = DeviceBuffer::<u32>::from_slice(&ctx, &vec![0u32; n])?; // cuMemcpyHtoD
    buf.memset_async(0, &stream)?;
    touch.launch(buf.view(), 7, &stream)?;
    stream.synchronize()?;
    let out = buf.to_vec()?; // cuMemcpyDtoH
    ensure(out[0] == 7, format!("nbody_touch stored {}", out[0]))?;
    let after = cupti.timestamp_ns();
    ensure(after > before, format!("cuptiGetTimestamp did not advance: {before} then {after}"))?;

    let records = cupti.flush()?;
    let (unparsed, failed_allocs) = cupti.unparsed_records();
    eprintln!("  {} records, {unparsed} unparsed, {failed_allocs} buffers not allocated, dropped: {:?}", records.len(), cupti.dropped_records()?);
    ensure(unparsed == 0, format!("{unparsed} records could not be parsed"))?;
    // 1 ms of slack on the window: CUPTI converts GPU timestamps to its CPU clock.
    let inside = |s: u64, e: u64| s < e && s + 1_000_000 >= before && e <= after + 1_000_000;
    let kernels: Vec<_> = records.iter().filter(|r| r.kind == ActivityKind::Kernel).collect();
    let touch_rec = if cupti.kernel_names() {
        kernels.iter().find(|r| r.name.as_deref() == Some("nbody_touch"))
    } else {
        eprintln!("  CUPTI API version {} is not one whose name offset was verified: names not read", cupti.version());
        kernels.iter().find(|r| inside(r.start_ns, r.end_ns))
    };
    let names: Vec<_> = kernels.iter().map(|r| r.name.clone()).collect();
    let k = touch_rec.ok_or(format!("no nbody_touch kernel record among {} kernel records {names:?}", kernels.len()))?;
    ensure(inside(k.start_ns, k.end_ns), format!("kernel {k:?} outside [{before}, {after}] ns"))?;
    ensure(k.device_id == 0 && k.correlation_id != 0, format!("kernel ids {k:?}"))?;
    let copy = |dir: &str| records.iter().find(|r| matches!(&r.kind, ActivityKind::Memcpy { bytes: 1028, copy_kind } if *copy_kind == dir));
    let h2d = copy("HtoD").ok_or(format!("no 1028-byte HtoD memcpy record among {records:?}"))?;
    ensure(h2d.start_ns <= h2d.end_ns && h2d.context_id == k.context_id, format!("HtoD {h2d:?} vs kernel {k:?}"))?;
    ensure(copy("DtoH").is_some(), "no 1028-byte DtoH memcpy record")?;
    let memset = records.iter().find(|r| r.kind == ActivityKind::Memset { bytes: 1028 });
    ensure(memset.is_some_and(|m| m.stream_id == k.stream_id), format!("memset record {memset:?} not on the kernel's stream"))?;
    ensure(cupti.flush()?.iter().all(|r| r.name.as_deref() != Some("nbody_touch")), "a flush returned the same kernel twice")?;

    drop(cupti);
    let again = Cupti::open()?; // the slot is free again and the callbacks re-register
    ensure(again.enable(&[Track::Kernels])?[0].1 == Availability::Enabled, "re-enable after reopen")?;
    Ok(())
}

/// Why the CUPTI test cannot run here (no libcupti to be found), or None.
#[cfg(feature = "cupti")]
fn cupti_missing() -> Option<String> {
    let (paths, _) = cuda_gl_interop::cupti::candidates_from(None, &cuda_gl_interop::cupti::toolkit_roots());
    match cuda_gl_interop::cupti::locate(&paths) {
        Ok(_) => None,
        Err(e) => Some(format!("no CUPTI ({e})")),
    }
}

fn main() {
    gpu_gate::run_with_skips(&gpu_gate::gpu_tests![
        #[cfg(feature = "cupti")]
        cupti_records_kernels_and_copies => cupti_missing(),
        every_entry_resolves_and_device_attributes_read,
        per_thread_semantics_resolve_to_ptsz_and_ptds_exports,
        tiny_ptx_launch_and_copy_round_trip,
        event_timing_and_not_ready,
        jit_error_returns_its_log_and_interior_nul_is_rejected,
        contexts_streams_and_priorities,
    ])
}
