//! One row of `bench`'s results in column groups, in the order of its columns (the parent
//! module's docs give each column and its unit), and the row as CSV cells.

use anyhow::Context as _;
use serde::Serialize;

use crate::bench::stats::Summary;

/// One line of `bench.csv` / element of `rows` in `bench.json`: the mode, N and precision, then
/// each group's columns in order (the module docs give every column and its unit).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The mode's CLI name (`map-separate`, …).
    pub mode: String,
    /// Bodies N.
    pub n: usize,
    /// `f32` or `f64`.
    pub precision: String,
    /// The GPU setup (CUDA modes).
    #[serde(flatten)]
    pub setup: SetupColumns,
    /// The step and its kernel launch.
    #[serde(flatten)]
    pub launch: LaunchColumns,
    /// How much was measured, and the framebuffer.
    #[serde(flatten)]
    pub sampling: SamplingColumns,
    /// The timed parts of a frame.
    #[serde(flatten)]
    pub times: TimeColumns,
    /// The GPU tree's opening angle, phases and terms (tree mode).
    #[serde(flatten)]
    pub tree: TreeColumns,
    /// Interactions per second and GFLOP/s.
    #[serde(flatten)]
    pub rates: RateColumns,
    /// The CPU modes' rate per core against the core's FMA peak.
    #[serde(flatten)]
    pub cpu: CpuColumns,
    /// Against other rows and rounds: scaling, overhead, spread, divergence.
    #[serde(flatten)]
    pub comparison: ComparisonColumns,
    /// Where and how the row was measured.
    #[serde(flatten)]
    pub provenance: ProvenanceColumns,
}

/// `gpus`, `slices`, `render_gpu_computes`, `gather`, `devices`: a CUDA row's GPU setup
/// (all `None` for draw and cpu).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[allow(missing_docs)] // the columns are documented in the module docs
pub struct SetupColumns {
    pub gpus: Option<u32>,
    pub slices: Option<u32>,
    pub render_gpu_computes: Option<bool>,
    pub gather: Option<String>,
    pub devices: Option<String>,
}

/// `steps_per_frame` and the step kernel's launch (CUDA modes): block size, P, S, its loop and
/// stream-K CTAs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[allow(missing_docs)] // the columns are documented in the module docs
pub struct LaunchColumns {
    pub steps_per_frame: u32,
    pub block_size: Option<u32>,
    pub bodies_per_thread: Option<u32>,
    pub threads_per_body: Option<u32>,
    pub mass_scaled: Option<bool>,
    pub equal_mass: Option<bool>,
    pub stream_k_ctas: Option<u32>,
}

impl LaunchColumns {
    /// The columns of `steps_per_frame` steps run by `launch` (`None` for the modes without a
    /// step kernel: draw and cpu).
    pub fn of(steps_per_frame: u32, launch: Option<kernels::launch_rule::LaunchConfig>) -> LaunchColumns {
        use kernels::launch_rule::StepLoop;
        LaunchColumns {
            steps_per_frame,
            block_size: launch.map(|l| l.block),
            bodies_per_thread: launch.map(|l| l.p),
            threads_per_body: launch.map(|l| l.threads_per_body),
            mass_scaled: launch.map(|l| l.step_loop == StepLoop::MassScaled),
            equal_mass: launch.map(|l| l.step_loop == StepLoop::EqualMass),
            stream_k_ctas: launch.and_then(|l| l.stream_k),
        }
    }
}

/// `frames`, `rounds`, `warmup`, and the framebuffer `width`, `height`, `max_sprite_px` (GL modes).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[allow(missing_docs)] // the columns are documented in the module docs
pub struct SamplingColumns {
    pub frames: usize,
    pub rounds: u32,
    pub warmup: u32,
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub max_sprite_px: Option<f32>,
}

/// The timed parts of a frame (ms): each part's median, p95, p99 and max as the columns
/// `{part}_ms_{median,p95,p99,max}` for frame, map, kernel, unmap, upload, draw, readback and density, then
/// `gather_ms_{median,p99}`; empty where the mode has no such part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeColumns {
    /// Host time of the whole frame.
    pub frame: Summary,
    /// `cuGraphicsMapResources` (CUDA events; external: the wait on the GL fence).
    pub map: Option<Summary>,
    /// The kernel launches (CUDA events; cpu: the CPU step).
    pub kernel: Option<Summary>,
    /// `cuGraphicsUnmapResources` (CUDA events; external: the wait on the CUDA event).
    pub unmap: Option<Summary>,
    /// The upload of copy and cpu.
    pub upload: Option<Summary>,
    /// The GL draw (timer query).
    pub draw: Option<Summary>,
    /// The copy route's readback of the frame before (`--readback`; host time).
    pub readback: Option<Summary>,
    /// The density view's CUDA pass (density modes; CUDA events: map, splat, store, tone map).
    pub density: Option<Summary>,
    /// The slowest slice's gather (split setups; median and p99 only).
    pub gather: Option<Summary>,
}

impl Serialize for TimeColumns {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(None)?;
        let parts = [
            ("frame", Some(self.frame)),
            ("map", self.map),
            ("kernel", self.kernel),
            ("unmap", self.unmap),
            ("upload", self.upload),
            ("draw", self.draw),
            ("readback", self.readback),
            ("density", self.density),
        ];
        for (part, s) in parts {
            for (stat, get) in STATS {
                map.serialize_entry(&format!("{part}_ms_{stat}"), &s.map(get))?;
            }
        }
        map.serialize_entry("gather_ms_median", &self.gather.map(|g| g.median))?;
        map.serialize_entry("gather_ms_p99", &self.gather.map(|g| g.p99))?;
        map.end()
    }
}

/// One statistic of a timed part: its column suffix and how to read it.
type Stat = (&'static str, fn(Summary) -> f64);

/// The statistics of a timed part, as its columns name them.
const STATS: [Stat; 4] = [("median", |s| s.median), ("p95", |s| s.p95), ("p99", |s| s.p99), ("max", |s| s.max)];

/// `theta`, `tree_{build,moments,walk}_ms_{median,p99}`, `tree_interactions_per_body`,
/// `tree_interactions_per_s` (tree mode; empty for the others).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[allow(missing_docs)] // the columns are documented in the module docs
pub struct TreeColumns {
    pub theta: Option<f32>,
    pub tree_build_ms_median: Option<f64>,
    pub tree_build_ms_p99: Option<f64>,
    pub tree_moments_ms_median: Option<f64>,
    pub tree_moments_ms_p99: Option<f64>,
    pub tree_walk_ms_median: Option<f64>,
    pub tree_walk_ms_p99: Option<f64>,
    pub tree_interactions_per_body: Option<f64>,
    pub tree_interactions_per_s: Option<f64>,
}

impl TreeColumns {
    /// The columns of a tree row of N bodies and `steps` steps a frame whose kernel median is
    /// `kernel_ms` (empty without `facts`: the other modes).
    pub fn of(facts: Option<super::TreeFacts>, n: usize, steps: u32, kernel_ms: Option<f64>) -> TreeColumns {
        let Some(t) = facts else { return TreeColumns::default() };
        TreeColumns {
            theta: Some(t.theta),
            tree_build_ms_median: Some(t.build.median),
            tree_build_ms_p99: Some(t.build.p99),
            tree_moments_ms_median: Some(t.moments.median),
            tree_moments_ms_p99: Some(t.moments.p99),
            tree_walk_ms_median: Some(t.walk.median),
            tree_walk_ms_p99: Some(t.walk.p99),
            tree_interactions_per_body: Some(t.per_body),
            tree_interactions_per_s: kernel_ms.filter(|k| *k > 0.0).map(|k| t.per_body * n as f64 * f64::from(steps) / (k * 1e-3)),
        }
    }
}

/// `interactions_per_s`, `effective_interactions_per_s`, `gflops`, `rate_basis`,
/// `interactions_per_s_frame`, `effective_interactions_per_s_frame`, `gflops_frame`: a row has
/// either the hardware rate (the direct sum: interactions evaluated) or the effective one (the
/// tree: N² over its time), never both, so the two never share a column.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[allow(missing_docs)] // the columns are documented in the module docs
pub struct RateColumns {
    pub interactions_per_s: Option<f64>,
    pub effective_interactions_per_s: Option<f64>,
    pub gflops: f64,
    pub rate_basis: String,
    pub interactions_per_s_frame: Option<f64>,
    pub effective_interactions_per_s_frame: Option<f64>,
    pub gflops_frame: f64,
}

/// `cpu_isa`, `cpu_mhz`, `cpu_threads`, `fma_peak_gflops_per_core`, `interactions_per_s_per_core`,
/// `fma_peak_fraction`, `fma_peak_fraction_cpuinfo_clock`: the CPU modes (empty for the others;
/// the last three for the direct sum only).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[allow(missing_docs)] // the columns are documented in the module docs
pub struct CpuColumns {
    pub cpu_isa: Option<String>,
    pub cpu_mhz: Option<f64>,
    pub cpu_threads: Option<usize>,
    pub fma_peak_gflops_per_core: Option<f64>,
    pub interactions_per_s_per_core: Option<f64>,
    pub fma_peak_fraction: Option<f64>,
    pub fma_peak_fraction_cpuinfo_clock: Option<f64>,
}

impl CpuColumns {
    /// The columns of a CPU row run on `threads` threads against `peak`, whose direct sum (`rate`:
    /// interactions/s of the whole run; `None` for a tree row) counts 20 flops an interaction.
    /// The nominal peak at the `/proc/cpuinfo` clock takes two FMA pipes of 8 f32 lanes (256-bit
    /// datapaths: 32 flops a cycle; an AVX-512 instruction takes a pipe for two cycles where
    /// its datapath is 256 bits wide, as on AMD's Zen 4).
    pub fn of(peak: &sim::cpu::peak::FmaPeak, threads: usize, rate: Option<f64>) -> CpuColumns {
        let per_core = rate.map(|r| r / threads.max(1) as f64);
        let flops = |r: f64| r * sim::FLOPS_PER_INTERACTION * 1e-9;
        CpuColumns {
            cpu_isa: Some(peak.isa.to_string()),
            cpu_mhz: peak.mhz,
            cpu_threads: Some(threads),
            fma_peak_gflops_per_core: Some(peak.gflops),
            interactions_per_s_per_core: per_core,
            fma_peak_fraction: per_core.map(|r| flops(r) / peak.gflops),
            fma_peak_fraction_cpuinfo_clock: per_core.zip(peak.mhz).map(|(r, mhz)| flops(r) / (NOMINAL_FLOPS_PER_CYCLE * mhz * 1e-3)),
        }
    }
}

/// f32 flops per cycle of one core's FMA pipes as [`CpuColumns::of`] counts them for the
/// nominal peak: 2 pipes × 8 lanes × 2 flops.
pub const NOMINAL_FLOPS_PER_CYCLE: f64 = 32.0;

/// `speedup`, `scaling_efficiency`, `overhead_us`, `overhead_pct`, `interop_us`, `spread_us`,
/// `spread_pct`, `diverged`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[allow(missing_docs)] // the columns are documented in the module docs
pub struct ComparisonColumns {
    pub speedup: Option<f64>,
    pub scaling_efficiency: Option<f64>,
    pub overhead_us: Option<f64>,
    pub overhead_pct: Option<f64>,
    pub interop_us: Option<f64>,
    pub spread_us: f64,
    pub spread_pct: f64,
    pub diverged: bool,
}

/// The row's device and option facts and the run's: `gpu_name` … `ctx_sched`, `build_profile`,
/// `date`, `host`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[allow(missing_docs)] // the columns are documented in the module docs
pub struct ProvenanceColumns {
    pub gpu_name: Option<String>,
    pub driver_version: Option<String>,
    pub gl_vendor: Option<String>,
    pub gl_renderer: Option<String>,
    pub gl_version: Option<String>,
    pub egl_device: Option<String>,
    pub stream: Option<String>,
    pub register_flags: Option<String>,
    pub map_flags: Option<String>,
    pub ctx_sched: Option<String>,
    pub build_profile: String,
    pub date: String,
    pub host: String,
}

/// A row's columns in order as (name, CSV text): its JSON object's keys and values, `null` as an
/// empty cell and strings unquoted (the csv writer quotes where needed). The grouped row is a
/// map to serde, which the csv crate does not write, so the cells come from the JSON text.
pub(super) fn csv_cells(r: &Row) -> anyhow::Result<Vec<(String, String)>> {
    /// A JSON object's entries in the text's order.
    struct Ordered(Vec<(String, serde_json::Value)>);
    impl<'de> serde::Deserialize<'de> for Ordered {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Ordered;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a bench row object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Ordered, A::Error> {
                    let mut v = Vec::new();
                    while let Some(e) = a.next_entry()? {
                        v.push(e);
                    }
                    Ok(Ordered(v))
                }
            }
            d.deserialize_map(V)
        }
    }
    let text = serde_json::to_string(r).context("serialising a bench.csv row")?;
    let Ordered(entries) = serde_json::from_str(&text).context("reading back a bench.csv row")?;
    Ok(entries
        .into_iter()
        .map(|(k, v)| {
            let cell = match v {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            (k, cell)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::cpu::peak::FmaPeak;

    /// The per-core rate is the run's over its threads, 20 flops an interaction over the measured
    /// peak and over 32 flops a cycle at the cpuinfo clock; a tree row (no rate) gets the facts
    /// only.
    #[test]
    fn cpu_columns_put_the_rate_against_the_peak() {
        let peak = FmaPeak { isa: "avx2", lanes: 8, mhz: Some(2000.0), gflops: 128.0 };
        let c = CpuColumns::of(&peak, 2, Some(6.4e9));
        assert_eq!(c.interactions_per_s_per_core, Some(3.2e9));
        // 3.2e9 × 20 = 64 GFLOP/s: half of 128, and the nominal peak is 32 × 2 GHz = 64.
        assert!((c.fma_peak_fraction.unwrap() - 0.5).abs() < 1e-12);
        assert!((c.fma_peak_fraction_cpuinfo_clock.unwrap() - 1.0).abs() < 1e-12);
        let t = CpuColumns::of(&FmaPeak { mhz: None, ..peak }, 2, None);
        assert_eq!(
            (t.cpu_isa.as_deref(), t.cpu_threads, t.interactions_per_s_per_core, t.fma_peak_fraction_cpuinfo_clock),
            (Some("avx2"), Some(2), None, None)
        );
    }
}
