//! What the end-to-end tests share: a scratch folder per test, and the check that the tools a
//! test drives (Xvfb, xdotool, Weston) are here, skipping the test without them except in CI.

// Each test crate that includes this file uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh scratch folder `<prefix>-<name>-<pid>` under Cargo's temporary folder for tests.
pub fn scratch(prefix: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{prefix}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// True when one of `tools` is missing here: the test is then skipped (on CI, where `.ci/run`
/// installs them, a missing tool is a failure naming the Debian `packages`).
pub fn missing(tools: &[&str], packages: &str) -> bool {
    let have = |tool: &&str| Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().is_ok_and(|o| o.status.success());
    let absent: Vec<_> = tools.iter().filter(|t| !have(t)).collect();
    if absent.is_empty() {
        return false;
    }
    assert!(std::env::var_os("CI").is_none(), "CI needs {absent:?} (apt-get install {packages})");
    println!("skipped: {absent:?} not installed");
    true
}
