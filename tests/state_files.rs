//! State files and outputs under hostile conditions. Reading: a device, a named pipe, junk and
//! files far larger than memory are refused by their type, their first line or their header,
//! before the rest is read; too many bodies and an interrupt end a read at once. Writing: every
//! output appears whole or not at all — a write cut off midway (the process killed at its
//! file-size limit) or failed (a full device, an encoder error) leaves what was at the requested
//! path before, and a failed write leaves no temporary.
//!
//! The runs that could take all memory with a reader that loads a whole file run under
//! `ulimit -v` (8 GiB of address space); files larger than memory are sparse (no disk used).
//! Everything runs on the CPU backend (headless on Mesa's EGL device where a frame is drawn)
//! with small N: no GPU.

use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use sim::file_io::{never, temporary_path, ReadLimits, SourceError};
use sim::init::{initial_bodies_with, InitialCondition};
use sim::state_csv::{read_state_with, write_state, StateFileError};
use sim::tipsy::{read_tipsy_with, write_tipsy, TipsyError};

#[path = "common/cli.rs"]
mod cli;

use cli::{report, scratch, BIN};

/// A guard against a run that hangs (a reader blocked on a pipe): far beyond any normal run.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Refusals by type, header or first line take milliseconds; this bound only catches a reader
/// that loads the file first (seconds to minutes for these files), on a loaded 2-core machine.
const AT_ONCE: Duration = Duration::from_secs(20);

/// SIGXFSZ: the signal a process gets when it writes past its file-size limit.
const SIGXFSZ: i32 = 25;

/// Runs the binary through bash with `limits` (e.g. `ulimit -v 8388608`) set first, in `dir`;
/// kills it after [`HANG_GUARD`]. Returns its output and how long it ran.
fn run_limited(dir: &Path, limits: &str, args: &[&str]) -> (Output, Duration) {
    let script = format!("{limits}; exec \"$0\" \"$@\"");
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg(BIN)
        .args(args)
        .current_dir(dir)
        .env("RUST_LOG", "warn")
        // No shader cache: the only files a run writes are the ones it is asked for.
        .env("MESA_SHADER_CACHE_DISABLE", "true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn bash");
    let started = Instant::now();
    while child.try_wait().expect("poll").is_none() {
        if started.elapsed() > HANG_GUARD {
            let _ = child.kill();
            let o = child.wait_with_output().expect("wait");
            panic!("{args:?} hung for {HANG_GUARD:?} and was killed:\n{}", report(&o));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let elapsed = started.elapsed();
    (child.wait_with_output().expect("collect output"), elapsed)
}

/// At most 8 GiB of address space: a reader that loads a 64 GiB file fails instead of taking
/// the machine's memory.
const NO_HUGE_READS: &str = "ulimit -v 8388608";

/// A headless CPU demo of one frame with `extra` arguments.
fn demo<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--headless", "--backend", "cpu", "--frames", "1", "--no-overlay", "--width", "32", "--height", "32"];
    v.extend_from_slice(extra);
    v
}

/// Asserts a refusal: exit 1, no panic, every word in the output, within [`AT_ONCE`].
fn assert_refused(what: &str, (o, took): &(Output, Duration), words: &[&str]) {
    let all = report(o);
    assert_eq!(o.status.code(), Some(1), "{what}:\n{all}");
    assert!(!all.contains("panicked"), "{what}:\n{all}");
    for w in words {
        assert!(all.contains(w), "{what}: no {w:?} in:\n{all}");
    }
    assert!(*took < AT_ONCE, "{what}: refused only after {took:?}:\n{all}");
}

/// A sparse file of `len` bytes that starts with `head` (zeros after it; no disk used).
fn sparse(path: &Path, head: &[u8], len: u64) {
    std::fs::write(path, head).expect("write head");
    std::fs::OpenOptions::new().write(true).open(path).expect("open").set_len(len).expect("make sparse");
}

/// A little-endian tipsy header counting `ndark` dark particles (padded to 32 bytes).
fn tipsy_header(ndark: i32) -> Vec<u8> {
    let mut b = 0f64.to_le_bytes().to_vec();
    for f in [ndark, 3, 0, ndark, 0, 0] {
        b.extend_from_slice(&f.to_le_bytes());
    }
    b
}

/// `--init` of a device, directly or through a link named as a state file, is refused by its
/// type before it is opened: at once, naming the cause and the remedy.
#[test]
fn devices_as_init_are_refused_at_once_by_their_type() {
    let dir = scratch("state", "devices");
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.csv")).expect("link");
    std::os::unix::fs::symlink("/dev/urandom", dir.join("random.tipsy")).expect("link");
    for init in ["/dev/zero", "/dev/urandom", "zero.csv", "random.tipsy"] {
        let r = run_limited(&dir, NO_HUGE_READS, &demo(&["--init", init]));
        assert_refused(init, &r, &[init, "not a regular file but a character device", "never ends", "give its path"]);
    }
}

/// A named pipe is refused by its type: the run neither waits for a writer nor reads.
#[test]
fn a_named_pipe_as_init_is_refused_without_waiting_for_a_writer() {
    let dir = scratch("state", "fifo");
    for name in ["pipe.csv", "pipe.tipsy", "pipe"] {
        let made = Command::new("mkfifo").arg(dir.join(name)).status().expect("mkfifo");
        assert!(made.success(), "mkfifo {name}");
        let r = run_limited(&dir, "true", &demo(&["--init", name]));
        assert_refused(name, &r, &[name, "not a regular file but a named pipe (FIFO)", "waits for a writer"]);
    }
}

/// Junk is refused at its first line, without reading the rest: a 64 GiB (sparse) file of one
/// endless line, and a few MB of random bytes.
#[test]
fn junk_is_refused_at_its_first_line_without_reading_the_rest() {
    let dir = scratch("state", "junk");
    sparse(&dir.join("endless.csv"), b"x,y,z,vx,vy,vz,mass and then no line end", 64 << 30);
    let r = run_limited(&dir, NO_HUGE_READS, &demo(&["--init", "endless.csv"]));
    assert_refused("endless.csv", &r, &["endless.csv, line 1: longer than 4096 bytes", "not a CSV state file"]);

    // xorshift64 bytes from a fixed seed: not UTF-8 long before the end.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let junk: Vec<u8> = (0..4 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    std::fs::write(dir.join("junk.dat"), &junk).expect("junk");
    let r = run_limited(&dir, NO_HUGE_READS, &demo(&["--init", "junk.dat"]));
    assert_refused("junk.dat", &r, &["junk.dat, line 1"]);
    let all = report(&r.0);
    assert!(all.contains("not UTF-8") || all.contains("longer than 4096 bytes"), "{all}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A tipsy header is checked against the file's size and the limits before any record is read:
/// a header counting 2^31 − 1 particles in a (sparse) file of exactly that size is more than any
/// machine here holds, and a header counting 2 in a 64 GiB file disagrees with the size.
#[test]
fn a_tipsy_header_is_checked_against_the_size_before_the_records() {
    let dir = scratch("state", "tipsy-size");
    let huge = i32::MAX;
    sparse(&dir.join("huge.tipsy"), &tipsy_header(huge), 32 + 36 * huge as u64);
    let r = run_limited(&dir, NO_HUGE_READS, &demo(&["--init", "huge.tipsy"]));
    assert_refused("huge.tipsy", &r, &["huge.tipsy: the header counts 2147483647 particles, more than the", "bodies this machine can hold"]);

    sparse(&dir.join("long.tipsy"), &tipsy_header(2), 64 << 30);
    let r = run_limited(&dir, NO_HUGE_READS, &demo(&["--init", "long.tipsy"]));
    assert_refused("long.tipsy", &r, &["long.tipsy", "after the last of the 2 particles the header counts"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// 150 rows with a limit of 100 bodies: refused at the first row past the limit, naming it. A
/// file larger than 100 rows of the longest lines can be is refused by its size, unread.
#[test]
fn a_csv_with_more_rows_than_the_limit_is_refused_at_the_first_row_past_it() {
    let dir = scratch("state", "rows");
    let path = dir.join("rows.csv");
    let mut text = String::from("# 150 bodies\nx,y,z,vx,vy,vz,mass\n");
    for i in 0..150 {
        text.push_str(&format!("{i},0,0,0,0,0,1\n"));
    }
    std::fs::write(&path, &text).expect("rows");
    let limits = ReadLimits::bodies(100, "a test's limit", &never);
    let e = read_state_with(&path, &limits).expect_err("over the limit");
    let msg = e.to_string();
    assert!(matches!(e, StateFileError::Source(SourceError::TooManyBodies { max: 100, .. })), "{msg}");
    assert!(msg.contains("body 101 is on line 103, more than the 100 bodies this machine can hold (a test's limit)"), "{msg}");
    assert_eq!(read_state_with(&path, &ReadLimits::bodies(150, "exactly", &never)).expect("150 fit").len(), 150);

    let big = dir.join("big.csv");
    sparse(&big, b"x,y,z,vx,vy,vz,mass\n", 101 * 4098 + 1);
    let e = read_state_with(&big, &limits).expect_err("too large");
    assert!(matches!(e, StateFileError::Source(SourceError::TooLarge { len: 413_899, max: 413_898, .. })), "{e}");
    assert!(e.to_string().contains("413899 bytes, more than a state file within this machine's limits has"), "{e}");
}

/// An interrupt (the "stop requested" callback) ends a long read at the next check, every 4096
/// rows or records, whatever is left: CSV, tipsy, and through `initial_bodies_with`.
#[test]
fn an_interrupt_ends_a_long_read_at_once() {
    let dir = scratch("state", "interrupt");
    let bodies = InitialCondition::UniformBall.generate(60_000, 3, 1.0).expect("ball");
    let (csv, tipsy) = (dir.join("long.csv"), dir.join("long.tipsy"));
    write_state(&csv, &bodies).expect("csv");
    write_tipsy(&tipsy, &bodies, 0.0, 0.01).expect("tipsy");

    let asked = std::cell::Cell::new(0);
    let stop = || {
        asked.set(asked.get() + 1);
        true
    };
    let limits = ReadLimits::this_machine(&stop);
    let e = read_state_with(&csv, &limits).expect_err("stopped");
    assert!(matches!(e, StateFileError::Source(SourceError::Interrupted { .. })), "{e}");
    assert!(e.to_string().contains("long.csv: reading stopped by the interrupt at line 4097"), "{e}");
    let e = read_tipsy_with(&tipsy, &limits).expect_err("stopped");
    assert!(matches!(e, TipsyError::Source(SourceError::Interrupted { .. })), "{e}");
    assert!(e.to_string().contains("at particle 4096"), "{e}");
    assert_eq!(asked.get(), 2, "one look each, at the first check");

    let e = initial_bodies_with(csv.to_str().expect("utf-8"), 1, 1, 1.0, &stop).expect_err("stopped");
    assert!(e.is_interrupted(), "{e}");
    // Never asked to stop, the same files load whole.
    assert_eq!(read_state_with(&csv, &ReadLimits::this_machine(&never)).expect("csv").pos, bodies.pos);
    assert_eq!(read_tipsy_with(&tipsy, &ReadLimits::this_machine(&never)).expect("tipsy").pos, bodies.pos);
}

/// The state write of a run killed midway (by its file-size limit, as a second Ctrl-C would end
/// it) leaves the file that was at the requested path, untouched, and at most its temporary;
/// the same write failing (the limit's signal ignored: `EFBIG`) reports the cause and leaves no
/// temporary. CSV and tipsy; 4000 bodies are 100–350 kB, the limit is 64 KiB.
#[test]
fn a_write_cut_off_midway_leaves_what_was_at_the_path() {
    for name in ["state.csv", "state.tipsy"] {
        let dir = scratch("state", &format!("cut-{name}"));
        let target = dir.join(name);
        std::fs::write(&target, "old\n").expect("old state");
        let args = demo(&["--bodies", "4000", "--save-state", name]);

        let (o, _) = run_limited(&dir, "ulimit -f 64", &args);
        let all = report(&o);
        assert_eq!(o.status.signal(), Some(SIGXFSZ), "{name}: the run was not cut off by its file-size limit:\n{all}");
        let kept = std::fs::read(&target).expect("target");
        assert!(kept == b"old\n", "{name}: a partial file of {} bytes at the requested path:\n{all}", kept.len());
        let left: Vec<_> = std::fs::read_dir(&dir).expect("list").filter_map(Result::ok).map(|e| e.path()).filter(|p| *p != target).collect();
        assert_eq!(left.len(), 1, "{name}: {left:?}");
        let cut = std::fs::metadata(&left[0]).expect("temporary").len();
        assert!(cut > 0 && cut <= 64 << 10, "{name}: the temporary {} has {cut} bytes", left[0].display());
        std::fs::remove_file(&left[0]).expect("remove the temporary");

        let (o, _) = run_limited(&dir, "ulimit -f 64; trap '' XFSZ", &args);
        let all = report(&o);
        assert_eq!(o.status.code(), Some(1), "{name}:\n{all}");
        assert!(all.contains("file too large") && all.contains("choose another path or raise the limit"), "{name}: the cause:\n{all}");
        let kept = std::fs::read(&target).expect("target");
        assert!(kept == b"old\n", "{name}: a file of {} bytes at the requested path:\n{all}", kept.len());
        let left: Vec<_> = std::fs::read_dir(&dir).expect("list").filter_map(Result::ok).map(|e| e.file_name()).collect();
        assert_eq!(left.len(), 1, "{name}: the temporary stayed: {left:?}");
    }
}

/// `--save-state /dev/full`: the real cause (no space) and the remedy, and the device is still a
/// device (written in place, never renamed over).
#[test]
fn a_full_device_is_reported_with_its_cause() {
    if !Path::new("/dev/full").exists() {
        eprintln!("skipped: no /dev/full");
        return;
    }
    let dir = scratch("state", "full");
    let (o, _) = run_limited(&dir, "true", &demo(&["--save-state", "/dev/full"]));
    let all = report(&o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    assert!(all.contains("cannot write the state file /dev/full: no space left on device"), "{all}");
    assert!(all.contains("choose another path"), "{all}");
    assert!(!all.contains("check that the directory exists"), "{all}");
    use std::os::unix::fs::FileTypeExt as _;
    assert!(std::fs::metadata("/dev/full").expect("stat").file_type().is_char_device(), "/dev/full was replaced");
}

/// A screenshot whose encoding fails leaves the file that was there (the old writer truncated it
/// first) and no temporary.
#[test]
fn a_failed_screenshot_leaves_what_was_at_the_path() {
    let dir = scratch("state", "png");
    let path = dir.join("shot.png");
    std::fs::write(&path, "old").expect("old");
    let e = nbody_app::gfx::screenshot::write_png(&path, 4, 4, &[0; 10]).expect_err("10 bytes are not 4 × 4 RGBA");
    assert!(e.to_string().contains("cannot write screenshot"), "{e:#}");
    assert_eq!(std::fs::read(&path).expect("old"), b"old");
    assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 1, "a temporary stayed");
    nbody_app::gfx::screenshot::write_png(&path, 1, 1, &[1, 2, 3, 255]).expect("a 1 × 1 image");
    assert!(std::fs::read(&path).expect("png").starts_with(b"\x89PNG"));
    assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 1);
}

/// `--trace` goes to a temporary until the recorder finishes (a file already at the path stays
/// as it was until then), `--timeline` is written whole; both through the temporary name every
/// output uses.
#[test]
fn the_trace_files_appear_only_when_complete() {
    use nbody_app::trace::Recorder;
    let dir = scratch("state", "trace");
    let (trace, timeline) = (dir.join("t.jsonl"), dir.join("t.json"));
    std::fs::write(&trace, "old\n").expect("old trace");
    let r = Recorder::to_file(&trace).expect("trace").with_timeline(&timeline);
    r.begin_frame(1);
    r.gl_draw(None, 1.0, 3);
    r.end_frame();
    let tmp = temporary_path(&trace);
    assert!(tmp.is_file(), "no temporary {}", tmp.display());
    assert_eq!(std::fs::read(&trace).expect("trace"), b"old\n", "the trace replaced the old file before it was complete");
    assert!(!timeline.exists());
    r.finish().expect("finish");
    let lines = std::fs::read_to_string(&trace).expect("trace");
    assert!(lines.lines().count() >= 1 && lines.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()), "{lines}");
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&timeline).expect("timeline")).expect("JSON");
    assert!(doc["traceEvents"].is_array());
    r.finish().expect("a second finish");
    let mut left: Vec<_> = std::fs::read_dir(&dir).expect("list").filter_map(Result::ok).map(|e| e.file_name()).collect();
    left.sort();
    assert_eq!(left, ["t.json", "t.jsonl"]);

    // A timeline into a directory that went away: an error, and nothing left behind.
    let gone = dir.join("gone");
    std::fs::create_dir_all(&gone).expect("dir");
    let r = Recorder::new().with_timeline(&gone.join("t.json"));
    std::fs::remove_dir_all(&gone).expect("remove");
    assert!(r.finish().is_err());
    assert!(!gone.exists());
}
