//! What the tests that drive outside programs (Xvfb, xdotool, Weston) share: a libtest-mimic
//! harness in which a test whose programs are missing here is reported as *ignored*, the
//! missing programs printed (on CI, where `.ci/run` installs them, it fails naming the Debian
//! packages), and one X server at a time where a test starts its own.

// Each test crate that includes this file uses part of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::process::Command;

use libtest_mimic::{Arguments, Trial};

/// The programs a test drives and the Debian packages that hold them.
#[derive(Clone, Copy)]
pub struct Needs {
    /// Program names, found on `PATH`.
    pub tools: &'static [&'static str],
    /// The packages to install them with (`apt-get install …`).
    pub packages: &'static str,
}

/// One test: its name, its body (which panics on failure) and the programs it needs.
pub struct ToolTest {
    /// The test's name, as libtest prints and filters it.
    pub name: &'static str,
    /// The test itself.
    pub body: fn(),
    /// What it drives.
    pub needs: Needs,
}

/// `tool_tests![test_fn => NEEDS, …]`: the [`ToolTest`]s for [`run`], each named by its function.
macro_rules! tool_tests {
    ($($test:ident => $needs:expr),* $(,)?) => {
        vec![$($crate::tools::ToolTest { name: stringify!($test), body: $test, needs: $needs }),*]
    };
}
pub(crate) use tool_tests;

/// Runs `tests` under libtest-mimic, in the order of their names as libtest runs them: those
/// whose programs are all here run; the others are reported as ignored, or fail when `CI` is set.
pub fn run(mut tests: Vec<ToolTest>) -> ! {
    tests.sort_by_key(|t| t.name);
    let args = Arguments::from_args();
    let on_ci = std::env::var_os("CI").is_some();
    let mut found: HashMap<&str, bool> = HashMap::new();
    let trials = tests
        .into_iter()
        .map(|t| {
            let absent: Vec<&str> = t.needs.tools.iter().copied().filter(|tool| !*found.entry(tool).or_insert_with(|| have(tool))).collect();
            if absent.is_empty() {
                let body = t.body;
                return Trial::test(t.name, move || {
                    body();
                    Ok(())
                });
            }
            let why = format!("{absent:?} not installed (apt-get install {})", t.needs.packages);
            if on_ci {
                return Trial::test(t.name, move || Err(format!("CI needs {why}").into()));
            }
            eprintln!("skipped: {}: {why}", t.name);
            Trial::test(t.name, move || Err(why.into())).with_ignored_flag(true)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

/// Whether `tool` is on `PATH`.
fn have(tool: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {tool}")]).output().is_ok_and(|o| o.status.success())
}

/// One X server at a time: `xvfb-run -a` picks the first display without a lock file, and two
/// tests starting together can pick the same one (then one of them finds no X server).
pub fn x_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
