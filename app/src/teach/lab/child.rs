//! Isolated cases in a child process. A case marked `isolated` may crash the process (a driver
//! that frees a mapped resource, GL reading a buffer CUDA holds) or leave its CUDA context
//! unusable (a write that faults makes every later call of that context fail), so `lab` and the
//! overlay never run it in their own process: they re-execute the binary as
//! `nbody-interop lab NAME --json --child`, which runs the one case with its own headless GL and
//! CUDA contexts ([`super::run_in_process`]) and prints its JSON line. The parent reads that line
//! and judges it against this build's table; a child that dies first (a signal, or an exit without
//! a result) or runs longer than [`CHILD_TIMEOUT`] is reported as such, with the end of its stderr.

use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Case, Outcome};

/// How long a child may run before it is killed (its case reported as timed out).
pub const CHILD_TIMEOUT: Duration = Duration::from_secs(90);

/// What a child printed, as far as the parent needs it.
#[derive(Debug, serde::Deserialize)]
struct Printed {
    case: String,
    got_code: Option<i32>,
    got_name: String,
    #[serde(default)]
    got_text: String,
    detail: Option<String>,
}

/// Runs `case` in a child process (`lab NAME --json --child`) and returns its outcome. Never
/// panics: a child that cannot start, crashes or hangs gives an outcome that says so.
pub fn run(case: &Case) -> Outcome {
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            return Outcome::new(case, None, "setup failed".into(), format!("cannot find this program to run the case in a child process: {e}"), None)
        }
    };
    let spawned =
        Command::new(&exe).args(["lab", case.name, "--json", "--child"]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            return Outcome::new(case, None, "setup failed".into(), format!("cannot start {} lab {} --child: {e}", exe.display(), case.name), None)
        }
    };
    // Both pipes are read on their own threads, so a chatty child never blocks on a full pipe.
    let drain = |p: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = p {
                drop(p.read_to_string(&mut s));
            }
            s
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn std::io::Read + Send>));
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) if start.elapsed() > CHILD_TIMEOUT => {
                // Our own child, by its handle (its pid): nothing else is signalled.
                drop(child.kill());
                drop(child.wait());
                break Err(format!("ran longer than {} s and was killed", CHILD_TIMEOUT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => break Err(format!("could not be waited for: {e}")),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let printed = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Printed>(l).ok())
        .find(|p| p.case == case.name);
    if let Some(p) = printed {
        return Outcome::new(case, p.got_code, p.got_name, p.got_text, p.detail);
    }
    let signal = match &status {
        #[cfg(unix)]
        Ok(s) => std::os::unix::process::ExitStatusExt::signal(s),
        _ => None,
    };
    let how = match status {
        Ok(s) => describe_exit(s),
        Err(why) => why,
    };
    let tail = tail_lines(&stderr, 6);
    Outcome::new(
        case,
        signal.map(|s| -s),
        super::CHILD_CRASHED.into(),
        format!(
            "the child process (`{} lab {} --json --child`) {how} before it printed a result{}",
            exe.file_name().map_or_else(|| exe.display().to_string(), |n| n.to_string_lossy().into_owned()),
            case.name,
            if tail.is_empty() { String::new() } else { format!("; its stderr ended: {tail}") }
        ),
        None,
    )
}

/// How a child ended, in words ("was killed by signal 11 (SIGSEGV)", "exited with status 1").
fn describe_exit(s: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        if let Some(sig) = s.signal() {
            let name = match sig {
                4 => " (SIGILL)",
                6 => " (SIGABRT)",
                7 => " (SIGBUS)",
                8 => " (SIGFPE)",
                9 => " (SIGKILL)",
                11 => " (SIGSEGV)",
                15 => " (SIGTERM)",
                _ => "",
            };
            return format!("was killed by signal {sig}{name}");
        }
    }
    match s.code() {
        Some(c) => format!("exited with status {c}"),
        None => "ended".to_string(),
    }
}

/// The last `n` non-empty lines of `text`, joined with " | ".
fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_and_exits_in_words() {
        assert_eq!(tail_lines("a\n\nb\nc\n", 2), "b | c");
        assert_eq!(tail_lines("", 3), "");
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt as _;
            assert_eq!(describe_exit(std::process::ExitStatus::from_raw(11)), "was killed by signal 11 (SIGSEGV)");
            assert_eq!(describe_exit(std::process::ExitStatus::from_raw(1 << 8)), "exited with status 1");
        }
    }
}
