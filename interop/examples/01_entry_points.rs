//! Loads the CUDA driver and prints its entry-point report: for every function of the table, the
//! ABI version asked for (that of its `PFN_<name>_v<version>` typedef), the `symbolStatus` that
//! `cuGetProcAddress` gave, and the address. Needs no GPU context and no GL.
//!
//! ```text
//! cargo run -p cuda-gl-interop --example 01_entry_points [-- --per-thread]
//! ```
//!
//! Without a driver it prints every library name it tried and exits with status 1.

use std::process::ExitCode;

use cuda_gl_interop::{Api, Driver, StreamSemantics};

fn main() -> ExitCode {
    // The library: `NBODY_CUDA_LIBRARY` if set, else the system's `libcuda.so.1`, `libcuda.so`.
    let driver = match Driver::open() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Per-thread semantics resolve the stream-ordered functions to their `_ptsz`/`_ptds` forms.
    let semantics = if std::env::args().any(|a| a == "--per-thread") { StreamSemantics::PerThread } else { StreamSemantics::Legacy };
    println!("library   {}", driver.path());
    let v = driver.version(); // CUDA major·1000 + minor·10
    println!("driver    CUDA {}.{} ({v})", v / 1000, v % 1000 / 10);
    println!("bootstrap {:?}", driver.bootstrap());
    println!("semantics {semantics}\n");
    println!("{:<44} {:>7} {:<9} {:<24} address", "function", "version", "required", "status");

    // The report resolves every row and fails on none; `Api::load` refuses a missing required one.
    let report = Api::resolve_report(&driver, semantics);
    for row in &report {
        let required = if row.required { "yes" } else { "no" };
        println!("{:<44} {:>7} {:<9} {:<24} {:#x}", row.name, row.version, required, row.status.to_string(), row.address);
        if let Some(remedy) = &row.remedy {
            println!("    {remedy}");
        }
    }
    let found = report.iter().filter(|r| r.address != 0).count();
    println!("\n{found} of {} functions resolved", report.len());

    match Api::load(driver, semantics) {
        Ok(api) => {
            let optional_missing: Vec<_> = api.report().iter().filter(|r| r.address == 0).map(|r| r.name).collect();
            println!("table loaded; optional functions missing: {optional_missing:?}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
