//! `nbody-interop info`: the driver version, each device with its attributes, and the
//! entry-point report (text or `--json`).

use anyhow::Context as _;
use interop::driver::entry::cuda_version_string;
use interop::{driver::EntryReport, safe::DeviceInfo, Api, Device, StreamSemantics};
use serde::Serialize;

use crate::cli::{InfoArgs, StreamSemantics as CliSemantics};

/// Everything `info` prints.
#[derive(Debug, Serialize)]
pub struct InfoReport {
    /// Library opened.
    pub library: String,
    /// `cuDriverGetVersion` (e.g. 13000).
    pub driver_version: i32,
    /// The same as `major.minor`.
    pub cuda_version: String,
    /// How entry points were looked up.
    pub bootstrap: interop::driver::BootstrapKind,
    /// Default-stream semantics of the table.
    pub semantics: StreamSemantics,
    /// Devices and their attributes.
    pub devices: Vec<DeviceInfo>,
    /// One row per declared function.
    pub entry_points: Vec<EntryReport>,
    /// A missing required entry point, or a `cuInit` or device-query error, if any (the
    /// report is still printed).
    pub error: Option<String>,
}

/// Collects the report. A missing required entry point is not an error here: the report then
/// lists every function with its status, no devices, and the error in [`InfoReport::error`].
///
/// # Errors
/// The driver cannot be loaded.
pub fn collect(semantics: StreamSemantics) -> anyhow::Result<InfoReport> {
    let driver = crate::libraries::open_driver().context("loading the CUDA driver")?;
    let (devices, entry_points, error) = match Api::load(driver.clone(), semantics) {
        // A required function is missing: no devices can be queried, but the report of every
        // function (which are missing, and why) is what the user needs.
        Err(e) => (Vec::new(), Api::resolve_report(&driver, semantics), Some(format!("resolving driver entry points: {e}"))),
        Ok(api) => {
            let mut devices = Vec::new();
            let error = match interop::cu_init(&api).map_err(anyhow::Error::from).and_then(|()| {
                for i in 0..Device::count(&api)? {
                    devices.push(Device::get(&api, i)?.info()?);
                }
                Ok(())
            }) {
                Ok(()) => None,
                Err(e) => Some(format!("{e:#}")),
            };
            (devices, api.report().to_vec(), error)
        }
    };
    Ok(InfoReport {
        library: driver.path().to_string(),
        driver_version: driver.version(),
        cuda_version: cuda_version_string(driver.version()),
        bootstrap: driver.bootstrap(),
        semantics,
        devices,
        entry_points,
        error,
    })
}

/// What `info` says when no CUDA driver loads: what it needs, and what runs without it.
pub const WITHOUT_A_DRIVER: &str = "info reports the NVIDIA driver and its GPUs, and none loads here. Without an NVIDIA GPU, \
     these run on the CPU: the demo (`nbody-interop --backend cpu`), `nbody-interop bench --modes cpu`, `nbody-interop \
     accuracy`, and the mistake lab's answers recorded on a GPU (`nbody-interop lab --replay FILE.jsonl NAME`, see `lab \
     --help`); the cause";

/// Runs `info`.
///
/// # Errors
/// As [`collect`] (with `--json`, after printing `{"error": "..."}`; else with
/// [`WITHOUT_A_DRIVER`] before the cause); also when a required entry point is missing, or
/// `cuInit` or a device query failed (after printing the report).
pub fn run(args: &InfoArgs) -> anyhow::Result<()> {
    let semantics = match args.semantics {
        CliSemantics::Legacy => StreamSemantics::Legacy,
        CliSemantics::PerThread => StreamSemantics::PerThread,
    };
    let r = match collect(semantics) {
        Ok(r) => r,
        Err(e) if args.json => {
            // Scripts that asked for JSON get JSON on stdout also when there is no driver.
            println!("{}", serde_json::json!({ "error": format!("{e:#}") }));
            return Err(e);
        }
        Err(e) => return Err(e.context(WITHOUT_A_DRIVER)),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print_text(&r);
    }
    match &r.error {
        Some(e) => anyhow::bail!("{e}"),
        None => Ok(()),
    }
}

fn print_text(r: &InfoReport) {
    println!("CUDA driver: {} (cuDriverGetVersion {} = CUDA {})", r.library, r.driver_version, r.cuda_version);
    println!("entry points via {:?}, {}", r.bootstrap, r.semantics);
    println!();
    for d in &r.devices {
        println!("device {}: {}", d.ordinal, d.name);
        let rows: [(&str, String); 17] = [
            ("uuid", d.uuid.clone().unwrap_or_else(|| "-".into())),
            ("pci bus id", d.pci_bus_id.clone()),
            ("compute capability", format!("{}.{}", d.compute_capability.0, d.compute_capability.1)),
            ("total memory", format!("{} MiB", d.total_memory_bytes >> 20)),
            ("multiprocessors", d.multiprocessors.to_string()),
            ("clock", format!("{} MHz", d.clock_khz / 1000)),
            ("memory clock / bus", format!("{} MHz / {} bit", d.memory_clock_khz / 1000, d.memory_bus_width_bits)),
            ("L2 cache", format!("{} KiB", d.l2_cache_bytes >> 10)),
            ("max threads / block", d.max_threads_per_block.to_string()),
            ("max threads / SM", d.max_threads_per_multiprocessor.to_string()),
            (
                "shared memory / block",
                format!("{} KiB (opt-in {} KiB)", d.shared_memory_per_block_bytes >> 10, d.shared_memory_per_block_optin_bytes >> 10),
            ),
            ("shared memory / SM", format!("{} KiB", d.shared_memory_per_multiprocessor_bytes >> 10)),
            ("registers / block", d.registers_per_block.to_string()),
            ("warp size", d.warp_size.to_string()),
            ("unified addressing", d.unified_addressing.to_string()),
            ("stream priorities", d.stream_priorities_supported.to_string()),
            ("VMM / POSIX fd export", format!("{} / {}", d.virtual_memory_management, d.posix_fd_export)),
        ];
        for (k, v) in rows {
            println!("  {k:<24} {v}");
        }
        println!();
    }
    println!("{:<44} {:>7} {:>6} {:>8}  {:<24} remedy", "function", "version", "flags", "result", "status");
    for e in &r.entry_points {
        println!(
            "{:<44} {:>7} {:>6} {:>8}  {:<24} {}",
            format!("{}{}", e.name, if e.required { "" } else { " (optional)" }),
            e.version,
            format!("{:#x}", e.flags),
            e.result,
            e.status.to_string(),
            e.remedy.as_deref().unwrap_or("")
        );
    }
    let missing = r.entry_points.iter().filter(|e| e.address == 0).count();
    println!("\n{} of {} entry points resolved", r.entry_points.len() - missing, r.entry_points.len());
}
