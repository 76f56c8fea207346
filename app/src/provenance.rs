//! Where a raw result came from: the provenance block that every file of measured figures
//! carries (`bench.json`, `bench.csv`, `accuracy --csv`, `switch`, `scale`, `lab --json`, the
//! demo's `--summary`), and the atomic write they all share.
//!
//! The block names the program and the commit it was built from (with a flag for uncommitted
//! changes), the full command line, the UTC time, the host, its CPU, and the GPU where one ran.
//! A JSON output holds it under the key `provenance`; a CSV has it in a sidecar
//! `FILE.csv.provenance.json`; a JSON-lines file has it as its first line
//! `{"provenance": {...}}`. The docs' tables are made from such files by `.ci/claims.py`, which
//! refuses a file without one.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::Serialize;

/// The version of the provenance block's layout.
pub const SCHEMA: u32 = 1;

/// The commit the program was built from: `git rev-parse --short=12 HEAD` at build time
/// (`app/build.rs`), `unknown` outside a git checkout.
pub const GIT_COMMIT: &str = match option_env!("NBODY_GIT_COMMIT") {
    Some(c) => c,
    None => "unknown",
};

/// True when the build's checkout had uncommitted changes to tracked files (`app/build.rs`,
/// `git status --porcelain --untracked-files=no`).
pub const GIT_DIRTY: bool = match option_env!("NBODY_GIT_DIRTY") {
    Some(v) => !v.is_empty() && v.as_bytes()[0] == b'1',
    None => false,
};

/// Where one raw result came from. Serialised as the `provenance` object.
#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    /// [`SCHEMA`].
    pub schema: u32,
    /// `nbody-interop`.
    pub program: &'static str,
    /// The program's version (`Cargo.toml`).
    pub version: &'static str,
    /// [`GIT_COMMIT`].
    pub commit: &'static str,
    /// [`GIT_DIRTY`].
    pub dirty: bool,
    /// The command line, program name first.
    pub command_line: Vec<String>,
    /// When the run started, UTC, RFC 3339.
    pub date_utc: String,
    /// Host name (empty when unknown).
    pub host: String,
    /// `debug` or `release`.
    pub build_profile: &'static str,
    /// The CPU the run used.
    pub cpu: CpuFacts,
    /// The CUDA device the run measured on; `None` where no GPU ran.
    pub gpu: Option<GpuFacts>,
}

impl Provenance {
    /// The block of a run starting now, with this process's command line, on `gpu`.
    pub fn now(gpu: Option<GpuFacts>) -> Provenance {
        Provenance {
            schema: SCHEMA,
            program: "nbody-interop",
            version: env!("CARGO_PKG_VERSION"),
            commit: GIT_COMMIT,
            dirty: GIT_DIRTY,
            command_line: std::env::args().collect(),
            date_utc: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            host: hostname(),
            build_profile: if cfg!(debug_assertions) { "debug" } else { "release" },
            cpu: CpuFacts::of_this_machine(),
            gpu,
        }
    }

    /// Writes the block to `data`'s sidecar ([`sidecar_path`]), atomically.
    ///
    /// # Errors
    /// The sidecar cannot be written.
    pub fn write_sidecar(&self, data: &Path) -> anyhow::Result<()> {
        let mut text = serde_json::to_string_pretty(self).context("serialising the provenance block")?;
        text.push('\n');
        write_atomic(&sidecar_path(data), text.as_bytes())
    }

    /// The block as the first line of a JSON-lines file: `{"provenance": {...}}`.
    ///
    /// # Errors
    /// Serialisation fails.
    pub fn jsonl_line(&self) -> anyhow::Result<String> {
        #[derive(Serialize)]
        struct Line<'a> {
            provenance: &'a Provenance,
        }
        serde_json::to_string(&Line { provenance: self }).context("serialising the provenance block")
    }
}

/// `FILE.provenance.json` beside `data` (`accuracy.csv` → `accuracy.csv.provenance.json`).
pub fn sidecar_path(data: &Path) -> PathBuf {
    let mut p = data.as_os_str().to_owned();
    p.push(".provenance.json");
    PathBuf::from(p)
}

/// The CPU of this machine.
#[derive(Debug, Clone, Serialize)]
pub struct CpuFacts {
    /// `model name` of `/proc/cpuinfo` (empty when unknown).
    pub model: String,
    /// Logical CPUs this process may run on (`std::thread::available_parallelism`).
    pub cores: usize,
    /// Threads of the CPU backend's pool (rayon).
    pub threads: usize,
}

impl CpuFacts {
    /// The facts of the machine the process runs on.
    pub fn of_this_machine() -> CpuFacts {
        let model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| t.lines().find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string())))
            .unwrap_or_default();
        CpuFacts { model, cores: std::thread::available_parallelism().map_or(1, usize::from), threads: rayon::current_num_threads() }
    }
}

/// A CUDA device's identity, driver and clocks (`cuDeviceGetName`, `cuDeviceGetUuid`,
/// `cuDriverGetVersion`, `cuDeviceGetAttribute`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuFacts {
    /// `cuDeviceGetName`.
    pub name: String,
    /// `cuDeviceGetUuid`, as `GPU-xxxxxxxx-…` (`None` where the driver did not answer).
    pub uuid: Option<String>,
    /// Compute capability, e.g. `9.0`.
    pub compute_capability: String,
    /// Multiprocessors.
    pub multiprocessors: i32,
    /// The NVIDIA kernel module's version from `/proc/driver/nvidia/version`, e.g. `580.159.04`
    /// (`None` where that file is missing).
    pub driver: Option<String>,
    /// The CUDA version the driver supports (`cuDriverGetVersion`), e.g. `13.0`.
    pub cuda: String,
    /// Peak SM clock, MHz (`CU_DEVICE_ATTRIBUTE_CLOCK_RATE`).
    pub sm_clock_mhz: f64,
    /// Peak memory clock, MHz (`CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE`).
    pub memory_clock_mhz: f64,
}

impl GpuFacts {
    /// The facts of `info`, with the driver's CUDA version `cuda` (e.g. `13.0`).
    pub fn of(info: &interop::safe::DeviceInfo, cuda: String) -> GpuFacts {
        let driver = std::fs::read_to_string("/proc/driver/nvidia/version").ok().and_then(|t| nvidia_driver_version(&t));
        GpuFacts {
            name: info.name.clone(),
            uuid: info.uuid.clone(),
            compute_capability: format!("{}.{}", info.compute_capability.0, info.compute_capability.1),
            multiprocessors: info.multiprocessors,
            driver,
            cuda,
            sm_clock_mhz: f64::from(info.clock_khz) / 1000.0,
            memory_clock_mhz: f64::from(info.memory_clock_khz) / 1000.0,
        }
    }
}

/// The facts of CUDA device 0 through a driver loaded for the purpose; `None` where no driver
/// loads or the device does not answer (a run that measured no GPU).
pub fn device0() -> Option<GpuFacts> {
    let api = crate::libraries::init(interop::StreamSemantics::Legacy).ok()?;
    let info = interop::Device::get(&api, 0).ok()?.info().ok()?;
    Some(GpuFacts::of(&info, interop::driver::entry::cuda_version_string(api.driver_version())))
}

/// The driver version in the text of `/proc/driver/nvidia/version`: the first word of its first
/// line made of digits and dots with at least one dot ("NVRM version: NVIDIA UNIX Open Kernel
/// Module for x86_64  580.159.04  Release Build …" → `580.159.04`).
pub fn nvidia_driver_version(text: &str) -> Option<String> {
    let is_version =
        |w: &&str| w.contains('.') && w.chars().all(|c| c.is_ascii_digit() || c == '.') && w.chars().next().is_some_and(|c| c.is_ascii_digit());
    text.lines().next()?.split_whitespace().find(is_version).map(str::to_string)
}

/// This machine's host name (empty when unknown).
pub fn hostname() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()))
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default()
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename
/// (`sim::file_io::write_whole`, as every output of the app), so a reader never sees a
/// half-written file and an interrupted write leaves nothing at `path`.
///
/// # Errors
/// The temporary file cannot be written, synced or renamed (it is removed then); the message
/// names `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    sim::file_io::write_whole(path, bytes).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nvidia_driver_version_is_read_from_either_module_line() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  Thu\nGCC version: gcc 12";
        let closed = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024";
        assert_eq!(nvidia_driver_version(open).as_deref(), Some("580.159.04"));
        assert_eq!(nvidia_driver_version(closed).as_deref(), Some("550.54.15"));
        assert_eq!(nvidia_driver_version("no version here"), None);
    }

    #[test]
    fn sidecar_sits_beside_its_file() {
        assert_eq!(sidecar_path(Path::new("out/accuracy.csv")), PathBuf::from("out/accuracy.csv.provenance.json"));
    }

    #[test]
    fn block_names_commit_command_and_machine() {
        let p = Provenance::now(None);
        let v = serde_json::to_value(&p).expect("serialises");
        for key in ["schema", "program", "version", "commit", "dirty", "command_line", "date_utc", "host", "build_profile", "cpu", "gpu"] {
            assert!(v.get(key).is_some(), "{key} missing from {v}");
        }
        assert!(v["cpu"]["cores"].as_u64().is_some_and(|c| c >= 1), "{v}");
        assert!(p.date_utc.ends_with('Z'), "{}", p.date_utc);
    }

    #[test]
    fn atomic_write_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("nbody-provenance-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("x.json");
        write_atomic(&path, b"{}").expect("writes");
        assert_eq!(std::fs::read(&path).expect("reads"), b"{}");
        let left: Vec<_> = std::fs::read_dir(&dir).expect("lists").filter_map(Result::ok).map(|e| e.file_name()).collect();
        assert_eq!(left.len(), 1, "{left:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
