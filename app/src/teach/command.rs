//! The `lab` subcommand: list the mistake lab's cases, run them (isolated ones in a child
//! process each), quiz on them, or replay recorded results without a GPU.

use anyhow::bail;

use super::lab::{self, Case};
use super::replay;

/// Options of `nbody-interop lab` (the command line's `LabArgs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabOptions {
    /// Case to run, or `all`; `None` lists the cases (with `replay`: replays every recorded one).
    pub name: Option<String>,
    /// One JSON object per case (with `replay`: the file's own lines).
    pub json: bool,
    /// Hide the expected codes, the explanation and the fix until the case ran (the list: the
    /// calls only); on a terminal each case first asks for a prediction.
    pub quiz: bool,
    /// Replay the results recorded in this file (JSON lines of `lab NAME --json`) instead of
    /// calling the driver.
    pub replay: Option<std::path::PathBuf>,
    /// Internal (the hidden `--child` flag): run the one case `name` in this process, even an
    /// isolated one, and print its JSON line. The parent `lab` (or the overlay) re-executes the
    /// binary this way for isolated cases.
    pub child: bool,
}

/// `nbody-interop lab [NAME|all] [--json] [--quiz] [--replay FILE.jsonl]`: without `name` the
/// cases are listed; otherwise they run headless (isolated ones in a child process each) or,
/// with `replay`, the recorded results are shown ([`replay::replay`]); they are printed
/// as text, JSON lines, or quiz answers. With `child` (`lab NAME --child`, internal) the one case
/// runs in this process and its JSON line is printed.
///
/// # Errors
/// An unknown case name; a case that could not run (the reason is in the message) or did not
/// produce an expected code; stdout cannot be written or stdin (a quiz's predictions) read; with
/// `replay`, a file that cannot be read or parsed or lacks the case.
pub fn run(opts: &LabOptions) -> anyhow::Result<()> {
    use std::io::{IsTerminal as _, Write as _};
    let mut out = std::io::stdout().lock();
    let stdin = std::io::stdin();
    let ask = opts.quiz && !opts.json && stdin.is_terminal();
    if opts.quiz && opts.json && (opts.name.is_some() || opts.replay.is_some()) && !opts.child {
        bail!(
            "--quiz hides each answer until its case ran, and --json prints the answers: use --quiz for the quiz, \
             --json for the results (`lab --quiz --json` without a name lists the calls only)"
        );
    }
    let say_no_asking = || {
        if opts.quiz && !ask && !opts.json {
            eprintln!("notice: stdin is not a terminal, so no predictions are asked: each call is followed by its answer");
        }
    };
    let mut lock = stdin.lock();
    let input = ask.then_some(&mut lock as &mut dyn std::io::BufRead);
    if let Some(file) = &opts.replay {
        say_no_asking();
        return replay::replay(&mut out, file, opts.name.as_deref(), opts.json, opts.quiz, input);
    }
    if opts.child {
        let Some(name) = opts.name.as_deref() else {
            bail!("lab --child needs the name of one case");
        };
        let outcomes = lab::run_in_process(&[lab::find(name)?]);
        replay::show(&mut out, &outcomes, true, None, false)?;
        return replay::verdict(&outcomes, None, false);
    }
    let Some(name) = opts.name.as_deref() else {
        return replay::list(&mut out, opts.json, opts.quiz);
    };
    let cases: Vec<&Case> = if name == "all" { lab::CASES.iter().collect() } else { vec![lab::find(name)?] };
    if opts.quiz {
        // No predictions for cases that cannot run: say so before asking.
        if let Err(e) = crate::libraries::open_driver() {
            bail!(
                "the quiz runs the cases on this machine's CUDA driver, and none loads here ({e}); without a GPU, \
                 quiz on the answers recorded on one: `nbody-interop lab --quiz --replay {} {name}` (from the \
                 repository's root)",
                super::recording::RECORDED
            );
        }
    }
    say_no_asking();
    let predictions = if opts.quiz && !opts.json {
        let calls: Vec<(&str, &str)> = cases.iter().map(|c| (c.name, c.call)).collect();
        Some(super::quiz::ask(&mut out, &calls, input)?)
    } else {
        None
    };
    if opts.json {
        // The recording's first line: where these answers came from.
        writeln!(out, "{}", crate::provenance::Provenance::now(crate::provenance::device0()).jsonl_line()?)?;
    }
    let outcomes = lab::run_headless(&cases);
    replay::show(&mut out, &outcomes, opts.json, predictions.as_deref(), false)?;
    replay::verdict(&outcomes, None, opts.quiz)
}
