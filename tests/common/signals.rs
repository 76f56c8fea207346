//! Signalling a run at a point it announces, never after a guessed delay. The run is started in
//! a process group of its own with `NBODY_TEST_READY` naming a file; it creates that file when it
//! is where the test wants the signal (after its first frame, or inside a step held with
//! `NBODY_TEST_HOLD=step`). The test waits for the file, then signals.

// Each test crate that includes this file uses part of it.
#![allow(dead_code)]

use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub use nix::sys::signal::Signal;
use nix::sys::signal::{kill, killpg};
use nix::unistd::Pid;

/// How long a run may go without announcing itself or ending before the test gives up: a guard
/// against a hang, far beyond any normal start, not a time limit on the run.
const HANG_GUARD: Duration = Duration::from_secs(600);

/// What a signalled run left: its exit status and its output.
pub struct Ended {
    /// The process's exit status (`code()` is `None` when a signal killed it).
    pub status: ExitStatus,
    /// Standard output and standard error.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Ended {
    /// Status, stdout and stderr, for assertion messages.
    pub fn text(&self) -> String {
        format!("exit {:?} (signal {:?})\nstdout:\n{}\nstderr:\n{}", self.status.code(), self.status.signal(), self.stdout, self.stderr)
    }
}

/// A run started by [`start`], waiting to be signalled.
pub struct Run {
    child: Child,
    dir: std::path::PathBuf,
}

impl Run {
    /// The run's process id (and its process group's).
    pub fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits i32"))
    }

    /// Sends `signal` to the run alone.
    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).expect("kill");
    }

    /// Sends `signal` the way `timeout` (and make, CI runners) do: to the run, then at once to
    /// its process group, which holds the run — two deliveries microseconds apart.
    pub fn signal_like_timeout(&self, signal: Signal) {
        kill(self.pid(), signal).expect("kill");
        killpg(self.pid(), signal).expect("killpg");
    }

    /// Waits until `<ready file>.held` exists (`NBODY_TEST_HOLD=outputs`: the run handled its
    /// first signal and holds before its outputs), or the run ended.
    ///
    /// # Panics
    /// Neither within [`HANG_GUARD`] (the run is killed first).
    pub fn wait_until_held(&mut self) {
        let held = self.dir.join("ready.held");
        poll_until(&mut self.child, &format!("held ({})", held.display()), || held.exists());
    }

    /// Waits for the run to end and collects its output.
    ///
    /// # Panics
    /// The run has not ended within [`HANG_GUARD`] (its process group is killed first).
    pub fn wait(mut self) -> Ended {
        poll_until(&mut self.child, "stopped after its signal", || false);
        let status = self.child.wait().expect("wait for the run");
        let read = |name: &str| std::fs::read_to_string(self.dir.join(name)).unwrap_or_default();
        Ended { status, stdout: read("stdout.txt"), stderr: read("stderr.txt") }
    }
}

/// Starts `cmd` in a process group of its own (stdout and stderr into files of `dir`) with
/// `NBODY_TEST_READY` set, and returns once the run announced itself — or ended, which the
/// caller's assertions then show.
///
/// # Panics
/// The run neither announced itself nor ended within [`HANG_GUARD`] (it is killed first).
pub fn start(mut cmd: Command, dir: &Path) -> Run {
    let ready = dir.join("ready");
    let _ = std::fs::remove_file(&ready);
    let _ = std::fs::remove_file(dir.join("ready.held"));
    let file = |name: &str| std::fs::File::create(dir.join(name)).expect("create output file");
    cmd.env("NBODY_TEST_READY", &ready).stdin(Stdio::null()).stdout(file("stdout.txt")).stderr(file("stderr.txt")).process_group(0);
    let mut child = cmd.spawn().expect("spawn the run");
    poll_until(&mut child, &format!("announced itself ({})", ready.display()), || ready.exists());
    Run { child, dir: dir.to_path_buf() }
}

/// Polls until `done()` holds or the run has ended.
///
/// # Panics
/// Neither within [`HANG_GUARD`] (a guard against a hang, not a time limit): the run's process
/// group is killed first. `what` names what the run did not do.
fn poll_until(child: &mut Child, what: &str, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() && child.try_wait().expect("poll the run").is_none() {
        if started.elapsed() > HANG_GUARD {
            let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid fits i32"));
            let _ = killpg(pid, Signal::SIGKILL);
            let _ = child.wait();
            panic!("the run neither {what} nor ended in {HANG_GUARD:?}; it was killed");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
