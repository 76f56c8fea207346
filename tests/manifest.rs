//! The workspace manifest tells the truth: its `rust-version` is the oldest Rust that every
//! dependency resolved for Linux (from `Cargo.lock`, through `cargo metadata`) declares it needs —
//! not older (the build would fail there) and not newer (it would turn away toolchains that work).

use std::process::Command;

/// `1.95` → (1, 95); a third part is ignored.
fn version(v: &str) -> (u32, u32) {
    let mut it = v.split('.').map(|x| x.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

#[test]
fn rust_version_is_the_newest_that_a_dependency_asks_for() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline", "--filter-platform", "x86_64-unknown-linux-gnu"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo metadata");
    assert!(out.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let resolved: Vec<&str> = meta["resolve"]["nodes"].as_array().expect("resolve.nodes").iter().filter_map(|n| n["id"].as_str()).collect();
    let ours = ["nbody-interop", "cuda-gl-interop", "nbody-kernels", "nbody-sim"];
    let mut newest: Option<((u32, u32), String)> = None;
    for p in meta["packages"].as_array().expect("packages") {
        let (Some(id), Some(name)) = (p["id"].as_str(), p["name"].as_str()) else { continue };
        if !resolved.contains(&id) || ours.contains(&name) {
            continue;
        }
        if let Some(rv) = p["rust_version"].as_str() {
            let v = version(rv);
            if newest.as_ref().is_none_or(|(n, _)| v > *n) {
                newest = Some((v, format!("{name} {}", p["version"].as_str().unwrap_or("?"))));
            }
        }
    }
    let (needed, by) = newest.expect("some dependency declares a rust-version");
    let declared = version(env!("CARGO_PKG_RUST_VERSION"));
    assert_eq!(
        declared,
        needed,
        "the workspace says rust-version {}, the dependencies need {}.{} ({by}): set rust-version in Cargo.toml (and README's requirements) to that",
        env!("CARGO_PKG_RUST_VERSION"),
        needed.0,
        needed.1
    );
}
