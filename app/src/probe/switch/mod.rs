//! `nbody-interop switch`: the cost of handing the GPU from the CUDA context to the GL context and
//! back, measured with work too small to matter.
//!
//! # Why
//! A `bench` frame of the interop modes costs more than the kernel plus the GL frame alone
//! (`interop_us` in [`crate::bench::report`]), and `external`, which never maps, can pay nearly as much
//! as `map`. The CUDA context and the GL context are two GPU contexts; the GPU runs one at a
//! time and switches between them (time-slicing). This probe times that switch on its own.
//!
//! # Variants
//! One iteration of each, timed on the host (`total_us`); the CUDA and GL parts are also timed
//! on their own (`cuda_host_us`, `gl_host_us`), the GPU side by CUDA events (`kernel_us`,
//! `map_us`, `unmap_us`: stream time from the event before the call to the one after it) and a
//! `GL_TIME_ELAPSED` query (`gl_us`); `map_call_us`, `unmap_call_us` are the host time of the
//! `cuGraphicsMapResources` and `cuGraphicsUnmapResources` calls themselves:
//! - `cuda`: a one-thread kernel that stores one `u32` (`cuLaunchKernel`), events around it,
//!   `cuEventSynchronize`. No GL work.
//! - `gl`: `glClear` of a 1×1 scissor of the FBO inside a timer query, `glFinish`. No CUDA work.
//! - `cuda+gl`: `cuda`, then `gl`: every iteration hands the GPU from GL to CUDA and back.
//! - `cuda+gl-async`: the same work, but the host queues both before waiting (kernel, `glClear`,
//!   `glFlush`, `glFinish`, then `cuEventSynchronize`): no host round trip between the two.
//! - `map`: `cuGraphicsMapResources` of one registered 4 KiB GL buffer, the kernel storing into
//!   the mapped pointer, `cuGraphicsUnmapResources`, sync. No GL work.
//! - `map+gl`: `map`, then `gl`.
//! - `cuda+fence`: `cuda`, then a GL fence (`glFenceSync`) on the otherwise idle GL context,
//!   waited on with `glClientWaitSync` — the wait the external-memory backend makes before a
//!   launch when no draw preceded it.
//! - `gl+map`: the GL part queued and flushed (`glFlush`, no `glFinish` yet), then `map` right
//!   behind it, then `glFinish`: the map is asked for while GL's work is submitted and may still
//!   run — the order of a frame that maps the next frame's buffers right after its draw.
//!
//! Derived (medians of `total_us`): `switch_pair_us` = `cuda+gl` − `cuda` − `gl` (two context
//! switches); `async_pair_us` = `cuda+gl-async` − `cuda` − `gl`; `map_extra_us` = `map` − `cuda`
//! (what mapping adds with GL idle); `map_gl_extra_us` = `map+gl` − `cuda+gl`;
//! `gl_map_extra_us` = `gl+map` − `cuda+gl`; `fence_extra_us` = `cuda+fence` − `cuda`.
//!
//! # Order and output
//! `--rounds` interleaved rounds; in each, every variant runs `--warmup` untimed iterations and
//! its share of `--iters`. An earlier `switch.json` in `--out` is removed at the start; the file
//! is rewritten after every round (temporary file + rename), so an interrupted or failed run
//! keeps the rounds it finished (`status`: `complete`, `running`, `interrupted` or
//! `error: …`); a table (median, p99, spread of the round medians, per-part medians) goes to
//! stdout at the end.

mod rig;

use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;

use crate::bench::stats::{median, Summary};
use crate::cli::SwitchArgs;

use self::rig::Rig;

/// The one-thread kernel: `*p = v`. PTX ISA 7.0 for sm_50 and later; every driver that this
/// program accepts (CUDA ≥ 11.3 for `cuGetProcAddress`) JIT-compiles it.
/// Bytes of the registered GL buffer of the map variants.
const VBO_BYTES: usize = 4096;

/// The variants, in the order they run within a round (see the module docs).
pub const VARIANTS: [Variant; 8] =
    [Variant::Cuda, Variant::Gl, Variant::CudaGl, Variant::CudaGlAsync, Variant::CudaFence, Variant::Map, Variant::MapGl, Variant::GlMap];

/// One probe loop (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Tiny kernel + sync.
    Cuda,
    /// 1×1 `glClear` + `glFinish`.
    Gl,
    /// `Cuda` then `Gl`, each waited for.
    CudaGl,
    /// The same work queued before any wait.
    CudaGlAsync,
    /// `Cuda`, then a GL fence on the idle GL context, waited on.
    CudaFence,
    /// Map, tiny kernel on the mapped pointer, unmap, sync.
    Map,
    /// `Map` then `Gl`.
    MapGl,
    /// `Gl` queued, `Map` behind it, then `glFinish`.
    GlMap,
}

impl Variant {
    /// The name in the table and `switch.json`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Cuda => "cuda",
            Variant::Gl => "gl",
            Variant::CudaGl => "cuda+gl",
            Variant::CudaGlAsync => "cuda+gl-async",
            Variant::CudaFence => "cuda+fence",
            Variant::Map => "map",
            Variant::MapGl => "map+gl",
            Variant::GlMap => "gl+map",
        }
    }
}

/// Times of one iteration, in µs.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    total: f64,
    cuda_host: Option<f64>,
    gl_host: Option<f64>,
    kernel: Option<f64>,
    map: Option<f64>,
    unmap: Option<f64>,
    map_call: Option<f64>,
    unmap_call: Option<f64>,
    gl: Option<f64>,
}

/// Per-iteration samples of one variant, all rounds.
#[derive(Debug, Default)]
struct Acc {
    total: Vec<f64>,
    cuda_host: Vec<f64>,
    gl_host: Vec<f64>,
    kernel: Vec<f64>,
    map: Vec<f64>,
    unmap: Vec<f64>,
    map_call: Vec<f64>,
    unmap_call: Vec<f64>,
    gl: Vec<f64>,
    round_medians: Vec<f64>,
}

impl Acc {
    fn push(&mut self, s: Sample) {
        self.total.push(s.total);
        self.cuda_host.extend(s.cuda_host);
        self.gl_host.extend(s.gl_host);
        self.kernel.extend(s.kernel);
        self.map.extend(s.map);
        self.unmap.extend(s.unmap);
        self.map_call.extend(s.map_call);
        self.unmap_call.extend(s.unmap_call);
        self.gl.extend(s.gl);
    }
}

/// The statistics of one variant in `switch.json` (µs).
#[derive(Debug, Clone, Serialize)]
pub struct VariantRow {
    /// Variant name.
    pub variant: &'static str,
    /// Measured iterations.
    pub iters: usize,
    /// Host time of the iteration.
    pub total_us: Summary,
    /// Host time of the CUDA part (launch to sync return).
    pub cuda_host_us: Option<Summary>,
    /// Host time of the GL part (clear to `glFinish` return).
    pub gl_host_us: Option<Summary>,
    /// CUDA-event time around the kernel.
    pub kernel_us: Option<Summary>,
    /// CUDA-event time around `cuGraphicsMapResources`.
    pub map_us: Option<Summary>,
    /// CUDA-event time around `cuGraphicsUnmapResources`.
    pub unmap_us: Option<Summary>,
    /// Host time of the `cuGraphicsMapResources` call.
    pub map_call_us: Option<Summary>,
    /// Host time of the `cuGraphicsUnmapResources` call.
    pub unmap_call_us: Option<Summary>,
    /// `GL_TIME_ELAPSED` of the clear.
    pub gl_us: Option<Summary>,
    /// Median of `total_us` in each round.
    pub round_medians_us: Vec<f64>,
    /// max − min of `round_medians_us`, in % of the overall median.
    pub spread_pct: f64,
}

/// Differences of medians of `total_us` (µs; see the module docs).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Derived {
    /// `cuda+gl` − `cuda` − `gl`: two context switches.
    pub switch_pair_us: Option<f64>,
    /// `cuda+gl-async` − `cuda` − `gl`.
    pub async_pair_us: Option<f64>,
    /// `map` − `cuda`.
    pub map_extra_us: Option<f64>,
    /// `map+gl` − `cuda+gl`.
    pub map_gl_extra_us: Option<f64>,
    /// `gl+map` − `cuda+gl`.
    pub gl_map_extra_us: Option<f64>,
    /// `cuda+fence` − `cuda`.
    pub fence_extra_us: Option<f64>,
}

/// `switch.json`.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchDoc {
    /// `nbody-interop switch`.
    pub tool: &'static str,
    /// Program version.
    pub version: &'static str,
    /// Commit, command line, date, host, CPU and GPU of the run ([`crate::provenance`]).
    pub provenance: crate::provenance::Provenance,
    /// `complete`, `running`, `interrupted` or `error: …`.
    pub status: String,
    /// Rounds finished.
    pub rounds_done: u32,
    /// Start of the run, UTC, RFC 3339.
    pub date: String,
    /// CUDA device name.
    pub gpu_name: String,
    /// CUDA version of the driver.
    pub driver_version: String,
    /// `GL_RENDERER`.
    pub gl_renderer: String,
    /// The EGL device of the headless context.
    pub egl_device: Option<String>,
    /// Stream kind.
    pub stream: String,
    /// Context scheduling flag.
    pub ctx_sched: String,
    /// `debug` or `release`.
    pub build_profile: &'static str,
    /// One entry per variant.
    pub variants: Vec<VariantRow>,
    /// Differences of medians.
    pub derived: Derived,
}

/// A run stopped by Ctrl-C, after writing the rounds it finished.
#[derive(Debug, thiserror::Error)]
#[error("switch interrupted after {rounds} finished round(s){}", if *.rounds > 0 { format!("; they are in {}", .path.display()) } else { String::new() })]
pub struct SwitchInterrupted {
    /// Rounds finished (and written).
    pub rounds: u32,
    /// `switch.json`.
    pub path: PathBuf,
}

fn rows(accs: &[(Variant, Acc)]) -> Vec<VariantRow> {
    accs.iter()
        .filter_map(|(v, a)| {
            let total = Summary::of(&a.total)?;
            Some(VariantRow {
                variant: v.name(),
                iters: a.total.len(),
                total_us: total,
                cuda_host_us: Summary::of(&a.cuda_host),
                gl_host_us: Summary::of(&a.gl_host),
                kernel_us: Summary::of(&a.kernel),
                map_us: Summary::of(&a.map),
                unmap_us: Summary::of(&a.unmap),
                map_call_us: Summary::of(&a.map_call),
                unmap_call_us: Summary::of(&a.unmap_call),
                gl_us: Summary::of(&a.gl),
                round_medians_us: a.round_medians.clone(),
                spread_pct: 100.0 * crate::bench::stats::spread(&a.round_medians) / total.median,
            })
        })
        .collect()
}

/// The differences of medians (see the module docs); `None` where a variant has no rows.
pub fn derive(rows: &[VariantRow]) -> Derived {
    let m = |v: Variant| rows.iter().find(|r| r.variant == v.name()).map(|r| r.total_us.median);
    let sub = |a: Option<f64>, b: &[Option<f64>]| -> Option<f64> {
        let mut x = a?;
        for y in b {
            x -= (*y)?;
        }
        Some(x)
    };
    let (cuda, gl) = (m(Variant::Cuda), m(Variant::Gl));
    Derived {
        switch_pair_us: sub(m(Variant::CudaGl), &[cuda, gl]),
        async_pair_us: sub(m(Variant::CudaGlAsync), &[cuda, gl]),
        map_extra_us: sub(m(Variant::Map), &[cuda]),
        map_gl_extra_us: sub(m(Variant::MapGl), &[m(Variant::CudaGl)]),
        gl_map_extra_us: sub(m(Variant::GlMap), &[m(Variant::CudaGl)]),
        fence_extra_us: sub(m(Variant::CudaFence), &[cuda]),
    }
}

/// The median of `s`, one decimal, or `—`.
fn med(s: Option<Summary>) -> String {
    crate::bench::report::opt(s.map(|s| s.median), 1)
}

/// The stdout table: medians (and the p99 of the total) in µs.
pub fn table(doc: &SwitchDoc) -> String {
    let mut t = format!(
        "{:<14} {:>8} {:>8} {:>7} {:>9} {:>8} {:>7} {:>7} {:>7} {:>8} {:>8} {:>7}\n",
        "variant", "total µs", "p99", "spread%", "cuda host", "gl host", "kernel", "map", "unmap", "map call", "unmap cl", "gl gpu"
    );
    for r in &doc.variants {
        t += &format!(
            "{:<14} {:>8.1} {:>8.1} {:>7.1} {:>9} {:>8} {:>7} {:>7} {:>7} {:>8} {:>8} {:>7}\n",
            r.variant,
            r.total_us.median,
            r.total_us.p99,
            r.spread_pct,
            med(r.cuda_host_us),
            med(r.gl_host_us),
            med(r.kernel_us),
            med(r.map_us),
            med(r.unmap_us),
            med(r.map_call_us),
            med(r.unmap_call_us),
            med(r.gl_us)
        );
    }
    let d = &doc.derived;
    let f = |x: Option<f64>| crate::bench::report::opt(x, 1) + " µs";
    t += &format!(
        "two context switches (cuda+gl − cuda − gl): {}; queued without host waits: {}\n\
         map+unmap adds {} with GL idle, {} between GL frames, {} when asked right behind GL's work\n\
         a GL fence waited on with GL idle adds {}",
        f(d.switch_pair_us),
        f(d.async_pair_us),
        f(d.map_extra_us),
        f(d.map_gl_extra_us),
        f(d.gl_map_extra_us),
        f(d.fence_extra_us)
    );
    t
}

/// Run `switch` with `args` (see the module docs).
///
/// # Errors
/// Bad arguments; no headless GL context; no CUDA device that shares it (Mesa, no driver); a
/// CUDA or GL failure while measuring; Ctrl-C ([`SwitchInterrupted`]). `switch.json` keeps every
/// finished round.
pub fn run(args: &SwitchArgs) -> anyhow::Result<()> {
    crate::bench::check_rounds("--iters", "iterations", args.iters, args.rounds)?;
    let path: PathBuf = args.out.join("switch.json");
    let mut rig = Rig::open(args)?;
    // After the rig: a run that cannot start leaves no output directory behind.
    crate::bench::prepare_out(&args.out, std::slice::from_ref(&path))?;
    let mut doc = SwitchDoc {
        tool: "nbody-interop switch",
        version: env!("CARGO_PKG_VERSION"),
        provenance: crate::provenance::Provenance::now(Some(crate::provenance::GpuFacts::of(
            &rig.info,
            interop::driver::entry::cuda_version_string(rig.ctx.api().driver_version()),
        ))),
        status: "running".into(),
        rounds_done: 0,
        date: chrono::Utc::now().to_rfc3339(),
        gpu_name: rig.info.name.clone(),
        driver_version: interop::driver::entry::cuda_version_string(rig.ctx.api().driver_version()),
        gl_renderer: rig.gl.info.renderer.clone(),
        egl_device: rig.gl.info.egl_device.clone(),
        stream: crate::bench::flag_name(args.stream),
        ctx_sched: crate::bench::flag_name(args.ctx_sched),
        build_profile: if cfg!(debug_assertions) { "debug" } else { "release" },
        variants: Vec::new(),
        derived: Derived::default(),
    };
    crate::stop::install();
    let mut accs: Vec<(Variant, Acc)> = VARIANTS.iter().map(|v| (*v, Acc::default())).collect();
    let write = |doc: &SwitchDoc| -> anyhow::Result<()> {
        let mut json = serde_json::to_vec_pretty(doc).context("serialising switch.json")?;
        json.push(b'\n');
        crate::bench::report::write_atomic(&path, &json)
    };
    let mut outcome = Ok(());
    let mut write_err = None;
    'rounds: for round in 0..args.rounds {
        let count = crate::bench::frames_in_round(args.iters, args.rounds, round);
        for (v, acc) in &mut accs {
            let mut samples = Vec::with_capacity(count as usize);
            for i in 0..args.warmup + count {
                if crate::stop::stopped() {
                    outcome = Err(SwitchInterrupted { rounds: round, path: path.clone() }.into());
                    break 'rounds;
                }
                match rig.iteration(*v, i) {
                    Ok(s) if i >= args.warmup => samples.push(s),
                    Ok(_) => {}
                    Err(e) => {
                        outcome = Err(e.context(format!("variant {}, round {}", v.name(), round + 1)));
                        break 'rounds;
                    }
                }
            }
            acc.round_medians.push(median(&samples.iter().map(|s| s.total).collect::<Vec<_>>()).unwrap_or(f64::NAN));
            samples.into_iter().for_each(|s| acc.push(s));
        }
        doc.rounds_done = round + 1;
        doc.variants = rows(&accs);
        doc.derived = derive(&doc.variants);
        if let Err(e) = write(&doc) {
            write_err = Some(e);
            break;
        }
    }
    drop(rig);
    doc.status = match &outcome {
        Ok(()) => "complete".into(),
        Err(e) if e.is::<SwitchInterrupted>() => "interrupted".into(),
        Err(e) => format!("error: {e:#}"),
    };
    if doc.rounds_done > 0 && write_err.is_none() {
        write_err = write(&doc).err();
        println!("{}", table(&doc));
        println!("wrote {}", path.display());
    }
    crate::bench::with_write_error(outcome, write_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: Variant, median: f64) -> VariantRow {
        let s = Summary { median, p95: median, p99: median, max: median };
        VariantRow {
            variant: v.name(),
            iters: 1,
            total_us: s,
            cuda_host_us: None,
            gl_host_us: None,
            kernel_us: None,
            map_us: None,
            unmap_us: None,
            map_call_us: None,
            unmap_call_us: None,
            gl_us: None,
            round_medians_us: vec![median],
            spread_pct: 0.0,
        }
    }

    #[test]
    fn derived_differences_of_medians() {
        let rows = vec![
            row(Variant::Cuda, 10.0),
            row(Variant::Gl, 20.0),
            row(Variant::CudaGl, 100.0),
            row(Variant::CudaGlAsync, 60.0),
            row(Variant::Map, 15.0),
            row(Variant::MapGl, 130.0),
            row(Variant::GlMap, 101.0),
            row(Variant::CudaFence, 12.5),
        ];
        let d = derive(&rows);
        assert_eq!(d.switch_pair_us, Some(70.0));
        assert_eq!(d.async_pair_us, Some(30.0));
        assert_eq!(d.map_extra_us, Some(5.0));
        assert_eq!(d.map_gl_extra_us, Some(30.0));
        assert_eq!(d.gl_map_extra_us, Some(1.0));
        assert_eq!(d.fence_extra_us, Some(2.5));
        let partial = derive(&rows[..2]);
        assert_eq!(partial.switch_pair_us, None);
        assert!(table(&SwitchDoc {
            tool: "t",
            version: "0",
            provenance: crate::provenance::Provenance::now(None),
            status: "complete".into(),
            rounds_done: 1,
            date: String::new(),
            gpu_name: String::new(),
            driver_version: String::new(),
            gl_renderer: String::new(),
            egl_device: None,
            stream: "legacy".into(),
            ctx_sched: "auto".into(),
            build_profile: "debug",
            variants: rows,
            derived: d,
        })
        .contains("two context switches"));
    }
}
