//! Where a bench run's files go: the output folder made and checked (earlier results kept until
//! replaced), a failed write reported over the run's own outcome, and the `--timeline` files, one
//! per (mode, N).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::report::mode_name;
use crate::cli::BenchMode;
use crate::trace::Recorder;

/// The run's outcome, with a failed output write taking precedence: the write error is reported
/// even when the run also failed or was interrupted (whose reason it then carries). Shared with
/// the switch probe.
///
/// # Errors
/// The write error (with the run's error as context), else the run's error.
pub(crate) fn with_write_error(outcome: anyhow::Result<()>, write_err: Option<anyhow::Error>) -> anyhow::Result<()> {
    match (write_err, outcome) {
        (Some(e), Err(o)) => Err(e.context(format!("the run also ended with: {o:#}"))),
        (Some(e), Ok(())) => Err(e),
        (None, outcome) => outcome,
    }
}

/// Make `dir` (and its parents) for a run's `outputs`, checked up front: `dir` is a directory
/// (not a file), none of `outputs` is a directory, and a file can be made in `dir`. Outputs of
/// an earlier run are left where they are: each is replaced whole (written beside it and renamed,
/// [`crate::provenance::write_atomic`]) once this run has its own, so a run that measures nothing
/// keeps the earlier results. Shared with the probes (`scale`, `switch`).
///
/// # Errors
/// `dir` is a file (or another non-directory, such as `/dev/full`), cannot be made or written
/// in, or an output's path is a directory; each message names the option and the remedy.
pub(crate) fn prepare_out(dir: &Path, outputs: &[PathBuf]) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!("--out {} is a file, not a directory: give a directory (the results are written into it)", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("--out {}: cannot create the output directory", dir.display()))?;
    if let Some(p) = outputs.iter().find(|p| p.is_dir()) {
        bail!("--out {}: {} is a directory, where a result file goes: move it away or give another --out", dir.display(), p.display());
    }
    // Writable: a file made and removed (the outputs' temporaries are made in the same place).
    let check = dir.join(format!(".nbody-interop-write-check-{}", std::process::id()));
    std::fs::File::create(&check).with_context(|| format!("--out {}: cannot write in this directory; give one you can write", dir.display()))?;
    let _ = std::fs::remove_file(&check);
    Ok(())
}

/// `--timeline` file of one (mode, N): `PATH-<mode>-<N>.json` beside `base`.
pub fn timeline_path(base: &Path, mode: BenchMode, n: usize) -> PathBuf {
    let stem = base.file_stem().map_or_else(|| "timeline".into(), |s| s.to_string_lossy().into_owned());
    base.with_file_name(format!("{stem}-{}-{n}.json", mode_name(mode)))
}

/// Checks before the first frame that a timeline file can be made there (made, then removed).
pub(super) fn check_timeline_path(path: &Path) -> anyhow::Result<()> {
    std::fs::File::create(path)
        .with_context(|| format!("--timeline: cannot create {} (the directory must exist and be writable)", path.display()))?;
    let _ = std::fs::remove_file(path);
    Ok(())
}

/// The recorders of `--timeline`, one per (mode, N), each written when its last round is done.
#[derive(Default)]
pub(super) struct Timelines {
    pub(super) open: HashMap<(BenchMode, usize), Recorder>,
    pub(super) first_error: Option<anyhow::Error>,
    /// CUPTI, loaded at the first CUDA visit (its records go to each visit's timeline).
    pub(super) cupti: Option<crate::trace::cupti::CuptiTrack>,
    pub(super) cupti_tried: bool,
}

impl Timelines {
    /// The recorder of (mode, N), made on first use.
    pub(super) fn get(&mut self, base: &Path, mode: BenchMode, n: usize) -> Recorder {
        self.open.entry((mode, n)).or_insert_with(|| Recorder::new().with_timeline(&timeline_path(base, mode, n))).clone()
    }

    /// Writes the timeline of (mode, N).
    pub(super) fn finish(&mut self, base: &Path, mode: BenchMode, n: usize) {
        if let Some(r) = self.open.remove(&(mode, n)) {
            match r.finish() {
                Ok(()) => eprintln!("wrote {}", timeline_path(base, mode, n).display()),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    self.first_error.get_or_insert(e);
                }
            }
        }
    }

    /// Writes every timeline still open; the first write error.
    pub(super) fn finish_all(&mut self) -> Option<anyhow::Error> {
        for r in std::mem::take(&mut self.open).into_values() {
            if let Err(e) = r.finish() {
                eprintln!("error: {e:#}");
                self.first_error.get_or_insert(e);
            }
        }
        self.first_error.take()
    }
}

/// The progress bar of the measuring loop: on stderr where it is a terminal, hidden elsewhere.
pub(super) fn progress_bar(total: u64) -> ProgressBar {
    use std::io::IsTerminal as _;
    let target = if std::io::stderr().is_terminal() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
    let pb = ProgressBar::with_draw_target(Some(total), target);
    if let Ok(style) = ProgressStyle::with_template("{elapsed_precise} [{wide_bar}] {pos}/{len} frames · {msg}") {
        pb.set_style(style);
    }
    pb
}
