//! How the mistake lab's results are shown, and the replay of recorded ones: the case list
//! (`lab`; `lab --quiz` without the expected codes), the text of one outcome, the quiz (predict
//! each call's answer, run, then see the expected code, the explanation and the fix) and
//! `lab --replay FILE.jsonl`, which shows results recorded on a GPU machine — the JSON lines that
//! `lab NAME --json` prints, e.g. [`RECORDED`] — without calling the
//! driver, so a class can do the lab on machines without a GPU.
//!
//! A replay judges each recorded answer against this build's table ([`CASES`]): the code, name,
//! text and detail shown are the file's; the call, expected codes, explanation and fix are this
//! build's (a case this build does not have keeps the file's). `--json` prints the file's own
//! lines. A replay of every case (`all`, or no name) also names the cases of this build that the
//! file does not hold — "not recorded" (cases added after the recording) — without failing.
//!
//! The silent cases ([`super::lab::Expect::Silent`]) are replayed like the others: their answer
//! is a name such as `SUCCESS_BUT_STALE_DATA` (code 0: every call succeeded), and their detail
//! holds the data that was read back.
//!
//! The file may also hold driver information, shown with the replay: a line that is a JSON object
//! without `"case"` but with any of [`DRIVER_KEYS`] (e.g. `{"gpu":"NVIDIA H200","driver":"580.159.04"}`),
//! or a `"driver"` field in a result.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use serde::Deserialize;
use serde_json::{Map, Value};

use interop::sys::CuResult;

use super::lab::{Outcome, CASES};

/// Keys of a line that describes the machine the results were recorded on, in the order shown.
pub const DRIVER_KEYS: [&str; 8] = ["gpu", "device", "devices", "driver", "driver_version", "cuda_version", "library", "date"];

/// How to make a file to replay, for error messages.
const RECORD_HINT: &str = "record one on a machine with the GPU with `nbody-interop lab all --json > FILE.jsonl` \
                           (one is committed: docs/results/2026-12-03-h200/lab.jsonl)";

fn mark(o: &Outcome) -> &'static str {
    if o.ok {
        "ok"
    } else if o.is_unavailable() {
        "UNAVAILABLE"
    } else {
        "UNEXPECTED"
    }
}

/// `lab` without a name: every case with what it needs and its call, one JSON object per case
/// with `json`. With `quiz` the expected codes are left out (a predict-then-run exercise).
///
/// # Errors
/// `out` cannot be written.
pub fn list(out: &mut impl Write, json: bool, quiz: bool) -> anyhow::Result<()> {
    for c in CASES {
        let expected: Vec<String> = c.expected.iter().map(|e| e.name()).collect();
        if json {
            let mut row = serde_json::json!({ "case": c.name, "call": c.call, "needs": c.needs, "isolated": c.isolated, "expected": expected });
            if quiz {
                if let Some(m) = row.as_object_mut() {
                    m.remove("expected");
                }
            }
            writeln!(out, "{row}")?;
        } else {
            let mut needs = serde_json::to_value(c.needs)?.as_str().unwrap_or_default().to_string();
            if c.isolated {
                needs.push_str(", child process");
            }
            if quiz {
                writeln!(out, "{:<26} {}", c.name, needs)?;
            } else {
                writeln!(out, "{:<26} {:<25} expects {}", c.name, needs, expected.join(" or "))?;
            }
            writeln!(out, "{:<26} {}", "", c.call)?;
        }
    }
    if json {
        return Ok(());
    }
    if quiz {
        writeln!(
            out,
            "\npredict what the driver returns for each call, then run one with `nbody-interop lab --quiz NAME`, all with \
             `nbody-interop lab --quiz all` (no GPU here: add `--replay {RECORDED}`)"
        )?;
    } else {
        writeln!(out, "\nrun one with `nbody-interop lab NAME`, all with `nbody-interop lab all` (--json: one object per case)")?;
        writeln!(
            out,
            "a SUCCESS_… answer is a silent mistake: every call returned CUDA_SUCCESS and the data read back decides \
             (STALE: the old contents, GARBLED: neither, CURRENT: the new); cases marked \"child process\" run in one"
        )?;
    }
    Ok(())
}

/// The mistake lab's answers recorded on the H200 (driver 580.159.04, every case, with a driver
/// line; 2026-12-03), relative to the
/// repository's root: what `lab --replay` is pointed at without a GPU.
pub const RECORDED: &str = "docs/results/2026-12-03-h200/lab.jsonl";

/// One outcome as `lab NAME` prints it; `replayed` marks it as read from a file.
///
/// # Errors
/// `out` cannot be written.
pub fn print_text(out: &mut impl Write, o: &Outcome, replayed: bool) -> std::io::Result<()> {
    writeln!(out, "{} — {}{}", o.case, mark(o), if replayed { " (replayed)" } else { "" })?;
    writeln!(out, "  call:      {}", o.call)?;
    writeln!(out, "  expected:  {}", o.expected.join(" or "))?;
    got_lines(out, o)?;
    writeln!(out, "  why:       {}", o.explanation)?;
    writeln!(out, "  fix:       {}", o.fix)?;
    writeln!(out)
}

fn got_lines(out: &mut impl Write, o: &Outcome) -> std::io::Result<()> {
    writeln!(out, "  got:       {}", o.got_summary())?;
    if o.got_code.is_some() && !o.got_text.is_empty() {
        writeln!(out, "  driver:    {}", o.got_text)?;
    }
    if let Some(d) = &o.detail {
        writeln!(out, "  detail:    {d}")?;
    }
    Ok(())
}

/// The quiz's first half: each case's name and call, numbered, with nothing of its answer. With
/// `input` (stdin on a terminal) it asks for a prediction per case, one line each (empty: none;
/// end of input: no more questions). Returns the predictions in the order of `calls`
/// (`(name, call)` pairs).
///
/// # Errors
/// `out` cannot be written, or `input` cannot be read.
pub fn ask(out: &mut impl Write, calls: &[(&str, &str)], mut input: Option<&mut dyn BufRead>) -> anyhow::Result<Vec<Option<String>>> {
    writeln!(out, "quiz: predict what the driver returns for each call (a CUresult or symbolStatus name, or its number;")?;
    writeln!(out, "where every call may succeed: STALE, GARBLED or CURRENT — what the data read back shows);")?;
    writeln!(out, "the answers, the expected codes and the explanations follow once the case(s) ran.")?;
    writeln!(out)?;
    let mut predictions = Vec::with_capacity(calls.len());
    for (i, (name, call)) in calls.iter().enumerate() {
        writeln!(out, "{}. {name}", i + 1)?;
        writeln!(out, "   call:      {call}")?;
        let mut prediction = None;
        if let Some(r) = input.as_mut() {
            write!(out, "   predict:   ")?;
            out.flush()?;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).context("reading a prediction from stdin")? == 0 {
                    input = None;
                    writeln!(out)?;
                    break;
                }
                let t = line.trim();
                if t.is_empty() || is_known_answer(t) {
                    prediction = (!t.is_empty()).then(|| t.to_string());
                    break;
                }
                write!(out, "   `{t}` is not a CUresult or symbolStatus name this lab knows; again (empty: none): ")?;
                out.flush()?;
            }
        }
        predictions.push(prediction);
    }
    writeln!(out)?;
    Ok(predictions)
}

/// Strips a `cuda.h` prefix (`CUDA_ERROR_`, `CU_GET_PROC_ADDRESS_`, `CUDA_`) from an upper-case name.
fn core(name: &str) -> &str {
    ["CUDA_ERROR_", "CU_GET_PROC_ADDRESS_", "CUDA_"].iter().find_map(|p| name.strip_prefix(p)).unwrap_or(name)
}

/// How a quiz prediction compares with what came back ([`judge_prediction`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It names what came back.
    Right,
    /// It names another answer; the string adds a hint for a common near miss (or is empty).
    Wrong(String),
    /// The case did not run: nothing to compare with.
    NotRun,
    /// It cannot be judged as typed (a number where numbers are ambiguous, a name this lab does
    /// not know); the string says why.
    Unclear(String),
}

/// A prediction in upper case, its words joined by underscores (`stale  data` → `STALE_DATA`,
/// `not-ready` → `NOT_READY`); a number as typed (`-11`).
fn normalized(p: &str) -> String {
    let t = p.trim();
    if t.parse::<i32>().is_ok() {
        return t.to_string();
    }
    t.to_ascii_uppercase().replace('-', " ").split_whitespace().collect::<Vec<_>>().join("_")
}

/// The data words of the silent answers (`SUCCESS_BUT_STALE_DATA`, …).
const DATA_WORDS: [&str; 3] = ["STALE", "GARBLED", "CURRENT"];

/// What a prediction of a crash may say (the case's name for it, its got name, short words).
const CRASH_WORDS: [&str; 5] = ["PROCESS_KILLED_BY_A_SIGNAL", "CHILD_CRASHED", "CRASH", "CRASHED", "SIGSEGV"];

/// The `symbolStatus` names of `cuGetProcAddress` (`CUdriverProcAddressQueryResult`).
const STATUS_NAMES: [&str; 3] =
    ["CU_GET_PROC_ADDRESS_SUCCESS", "CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND", "CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT"];

/// The answer's kind a name's prefix gives: a `CUresult` (`CUDA_…`), a `symbolStatus`
/// (`CU_GET_PROC_ADDRESS_…`), or none (a bare name such as `NOT_MAPPED`, which may be either).
fn kind(name: &str) -> Option<&'static str> {
    if name.starts_with("CU_GET_PROC_ADDRESS_") {
        Some("symbolStatus")
    } else if name.starts_with("CUDA_") {
        Some("CUresult")
    } else {
        None
    }
}

/// Whether `prediction` has the form of an answer this lab can give: a number (a negative one
/// for a signal), any `CUDA_…` or `CU_GET_PROC_ADDRESS_…` name or the short form of one this
/// build knows (`NOT_MAPPED`), a silent case's data word (`STALE`, `GARBLED`, `CURRENT`, alone or
/// in a longer name), or a crash (`PROCESS_KILLED_BY_A_SIGNAL`, `CHILD_CRASHED`, `CRASH`). The
/// quiz asks again for anything else (a typo of a short name, a word of another language).
pub fn is_known_answer(prediction: &str) -> bool {
    let p = normalized(prediction);
    if p.is_empty() {
        return false;
    }
    let named = |n: &str| p == n || p == core(n);
    p.parse::<i32>().is_ok()
        || kind(&p).is_some() && p.len() > "CUDA_".len()
        || DATA_WORDS.iter().any(|w| p.contains(w))
        || CRASH_WORDS.contains(&p.as_str())
        || STATUS_NAMES.iter().any(|n| named(n))
        || (0..1000).filter_map(|c| CuResult(c).known_name()).any(named)
}

/// Judges a quiz prediction against what came back: by its name, in any case, with or without
/// its `cuda.h` prefix (`ALREADY_MAPPED` for `CUDA_ERROR_ALREADY_MAPPED`; a prefix names the
/// kind, so `CUDA_SUCCESS` is not `CU_GET_PROC_ADDRESS_SUCCESS`), or its number. A silent answer
/// (`SUCCESS_BUT_STALE_DATA`) by the one data word the prediction holds (`stale`, `stale data`,
/// `success but stale`), never by a number or `CUDA_SUCCESS` (every call returned 0). A crash by
/// a crash word or the negative signal number. For the `cuGetProcAddress` cases a number is not
/// judged: symbolStatus 1 and CUresult 1 are different answers.
pub fn judge_prediction(prediction: &str, o: &Outcome) -> Verdict {
    let Some(got) = o.got_code else {
        return Verdict::NotRun;
    };
    let p = normalized(prediction);
    if !is_known_answer(&p) {
        return Verdict::Unclear(format!("`{}` is not a CUresult or symbolStatus name this lab knows (a typo?)", prediction.trim()));
    }
    let number = p.parse::<i32>().ok();
    let wrong = || Verdict::Wrong(String::new());
    if o.is_silent() {
        let words: Vec<&str> = DATA_WORDS.iter().copied().filter(|w| p.contains(w)).collect();
        let name = o.got_name.to_ascii_uppercase();
        return match words.as_slice() {
            [w] => if name.contains(w) { Verdict::Right } else { wrong() },
            [] if number.is_some() || core(&p) == "SUCCESS" => Verdict::Unclear(
                "every call of this case returns 0 (CUDA_SUCCESS): its answer is what the data read back shows, STALE, \
                 GARBLED or CURRENT"
                    .into(),
            ),
            [] => wrong(),
            _ => Verdict::Unclear("name one of STALE, GARBLED and CURRENT".into()),
        };
    }
    if o.got_name == super::lab::CHILD_CRASHED {
        let crash = CRASH_WORDS.contains(&p.as_str());
        return if crash || number == Some(got) { Verdict::Right } else { wrong() };
    }
    let proc_address = o.call.contains("cuGetProcAddress");
    if let Some(n) = number {
        if proc_address {
            return Verdict::Unclear(
                "a number is ambiguous for cuGetProcAddress (symbolStatus 1 is SYMBOL_NOT_FOUND, CUresult 1 \
                 CUDA_ERROR_INVALID_VALUE): type the name"
                    .into(),
            );
        }
        return if n == got { Verdict::Right } else { wrong() };
    }
    let name = o.got_name.to_ascii_uppercase();
    let same_kind = kind(&p).is_none() || kind(&p) == kind(&name);
    if same_kind && (p == name || core(&p) == core(&name)) {
        return Verdict::Right;
    }
    let status_word = STATUS_NAMES.iter().any(|n| core(n) == core(&p));
    let hint = if proc_address && kind(&name) == Some("symbolStatus") && core(&p) == "SUCCESS" && kind(&p) != Some("symbolStatus") {
        "the call itself returned CUDA_SUCCESS; the lab's code for such a call is its symbolStatus"
    } else if proc_address && kind(&name) == Some("CUresult") && status_word && kind(&p) != Some("CUresult") {
        "the call itself was refused: the lab's code is then its CUresult"
    } else {
        ""
    };
    Verdict::Wrong(hint.into())
}

/// The quiz's second half for one outcome: what came back first, then the expected codes, the
/// prediction judged, the explanation and the fix.
///
/// # Errors
/// `out` cannot be written.
pub fn reveal(out: &mut impl Write, o: &Outcome, prediction: Option<&str>, replayed: bool) -> std::io::Result<()> {
    writeln!(out, "{} — {}{}", o.case, mark(o), if replayed { " (replayed)" } else { "" })?;
    writeln!(out, "  call:      {}", o.call)?;
    got_lines(out, o)?;
    writeln!(out, "  expected:  {}", o.expected.join(" or "))?;
    if let Some(p) = prediction {
        let verdict = match judge_prediction(p, o) {
            Verdict::Right => "right".to_string(),
            Verdict::Wrong(hint) if hint.is_empty() => format!("not what came back ({})", o.got_summary()),
            Verdict::Wrong(hint) => format!("not what came back ({}): {hint}", o.got_summary()),
            Verdict::NotRun => "cannot tell: the case did not run".to_string(),
            Verdict::Unclear(why) => format!("cannot judge it: {why}"),
        };
        writeln!(out, "  predicted: {p} — {verdict}")?;
    }
    writeln!(out, "  why:       {}", o.explanation)?;
    writeln!(out, "  fix:       {}", o.fix)?;
    writeln!(out)
}

/// Prints `outcomes`: JSON lines, the quiz's answers (with `predictions`, by index) or the text
/// of `lab NAME`; `replayed` marks them as read from a file.
///
/// # Errors
/// `out` cannot be written.
pub fn show(out: &mut impl Write, outcomes: &[Outcome], json: bool, quiz: Option<&[Option<String>]>, replayed: bool) -> anyhow::Result<()> {
    let mut last_reason: Option<&str> = None;
    for (i, o) in outcomes.iter().enumerate() {
        if json {
            writeln!(out, "{}", serde_json::to_string(o)?)?;
            continue;
        }
        // A reason a case could not run (a missing driver, often) is printed once, at its
        // first case; the cases after it that could not run for the same reason refer to it.
        let repeat = o.is_unavailable() && last_reason == Some(o.got_text.as_str());
        let short;
        let o = if repeat {
            short = Outcome { got_text: "unavailable: the same reason as above".into(), ..o.clone() };
            &short
        } else {
            last_reason = o.is_unavailable().then_some(o.got_text.as_str());
            o
        };
        if let Some(p) = quiz {
            reveal(out, o, p.get(i).and_then(|p| p.as_deref()), replayed)?;
        } else {
            print_text(out, o, replayed)?;
        }
    }
    if let Some(p) = quiz {
        let verdicts: Vec<Verdict> = outcomes.iter().zip(p).filter_map(|(o, p)| p.as_deref().map(|p| judge_prediction(p, o))).collect();
        if !verdicts.is_empty() {
            let right = verdicts.iter().filter(|v| **v == Verdict::Right).count();
            let open = verdicts.iter().filter(|v| matches!(v, Verdict::NotRun | Verdict::Unclear(_))).count();
            let judged = verdicts.len() - open;
            let open = if open > 0 { format!(" ({open} more could not be judged)") } else { String::new() };
            writeln!(out, "score: {right} of {judged} judged prediction(s) right{open}")?;
        }
    }
    out.flush()?;
    Ok(())
}

/// `Ok` when every outcome got an expected code; otherwise an error that says which did not,
/// and why (`replayed`: the file they were read from). A case that could not run here (not a
/// replay) gets the remedy of a class without a GPU: `--replay` [`RECORDED`] (with `--quiz` when
/// `quiz`).
///
/// # Errors
/// As said: a case that could not run (or was recorded so) or did not produce an expected code.
pub fn verdict(outcomes: &[Outcome], replayed: Option<&Path>, quiz: bool) -> anyhow::Result<()> {
    let unavailable: Vec<&Outcome> = outcomes.iter().filter(|o| o.is_unavailable()).collect();
    let unexpected: Vec<String> =
        outcomes.iter().filter(|o| !o.ok && !o.is_unavailable()).map(|o| format!("{} (got {})", o.case, o.got_summary())).collect();
    let ran = if replayed.is_some() { "was recorded as not run" } else { "could not run" };
    let mut why = Vec::new();
    if !unexpected.is_empty() {
        why.push(format!("{} did not produce the expected code: {}", unexpected.len(), unexpected.join("; ")));
    }
    if let Some(first) = unavailable.first() {
        let names: Vec<&str> = unavailable.iter().map(|o| o.case.as_str()).collect();
        if unavailable.iter().all(|o| o.got_text == first.got_text) {
            why.push(format!("{} {ran} ({}): {}", unavailable.len(), names.join(", "), first.got_text));
        } else {
            let each: Vec<String> = unavailable.iter().map(|o| format!("{}: {}", o.case, o.got_text)).collect();
            why.push(format!("{} {ran}: {}", unavailable.len(), each.join("; ")));
        }
        if replayed.is_none() {
            let quiz = if quiz { " --quiz" } else { "" };
            why.push(format!(
                "without a GPU, replay the answers recorded on one: `nbody-interop lab{quiz} --replay {RECORDED} [NAME]` (run it \
                 from the repository's root)"
            ));
        }
    }
    if why.is_empty() {
        return Ok(());
    }
    let failed = unexpected.len() + unavailable.len();
    match replayed {
        None => bail!("{failed} of {} lab case(s) failed; {}", outcomes.len(), why.join("; ")),
        Some(f) => bail!("{failed} of {} replayed lab case(s) from {} failed; {}", outcomes.len(), f.display(), why.join("; ")),
    }
}

/// A result as `lab NAME --json` wrote it (only `case` and `got_name` are required).
#[derive(Debug, Deserialize)]
struct Recorded {
    case: String,
    #[serde(default)]
    call: String,
    #[serde(default)]
    expected: Vec<String>,
    got_code: Option<i32>,
    got_name: String,
    #[serde(default)]
    got_text: String,
    #[serde(default)]
    explanation: String,
    #[serde(default)]
    fix: String,
    detail: Option<String>,
    driver: Option<Value>,
}

/// One recorded result.
#[derive(Debug, Clone)]
pub struct Replayed {
    /// Its line in the file (1-based).
    pub line: usize,
    /// The line as written (what `--replay --json` prints).
    pub raw: String,
    /// The outcome it shows, judged against this build's table.
    pub outcome: Outcome,
}

/// A file of recorded results.
#[derive(Debug, Clone)]
pub struct Recording {
    /// Where it was read from.
    pub path: PathBuf,
    /// The machine it was recorded on, as the file says (its driver lines and `driver` fields).
    pub driver: Option<String>,
    /// The results, in file order.
    pub results: Vec<Replayed>,
}

/// A driver-info value in short form: a string as is, an array item by item, an object by its
/// `name` (a device of `info --json`) or as `key value` pairs.
fn short(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(short).collect::<Vec<_>>().join("; "),
        Value::Object(o) => match o.get("name") {
            Some(n) => short(n),
            None => o.iter().map(|(k, v)| format!("{k} {}", short(v))).collect::<Vec<_>>().join(", "),
        },
        other => other.to_string(),
    }
}

fn driver_line(m: &Map<String, Value>) -> Option<String> {
    let parts: Vec<String> = DRIVER_KEYS.iter().filter_map(|k| m.get(*k).map(|v| format!("{k} {}", short(v)))).collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

impl Recording {
    /// Reads `path`.
    ///
    /// # Errors
    /// The file cannot be read (the message says how to record one), or [`Recording::parse`] fails.
    pub fn read(path: &Path) -> anyhow::Result<Recording> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the recorded lab results {}; {RECORD_HINT}", path.display()))?;
        Recording::parse(path, &text)
    }

    /// Parses `text` (the contents of `path`): one JSON object per line, blank lines skipped.
    /// Each recorded case is judged against this build's table ([`CASES`]); one this build does
    /// not have against the codes the file expected.
    ///
    /// # Errors
    /// A line that is not a JSON object, a result with a missing or mistyped field, an object
    /// that is neither a result nor driver information, or no result at all — each naming the
    /// line number.
    pub fn parse(path: &Path, text: &str) -> anyhow::Result<Recording> {
        let file = path.display();
        let mut drivers: Vec<String> = Vec::new();
        let mut results = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let (line, raw) = (i + 1, raw.trim());
            if raw.is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(raw)
                .with_context(|| format!("{file} line {line} is not JSON; each line must be one object that `lab NAME --json` printed"))?;
            let Some(m) = v.as_object() else {
                bail!("{file} line {line} is not a JSON object (it is {raw:.40}); each line must be one object that `lab NAME --json` printed");
            };
            if !m.contains_key("case") {
                match driver_line(m) {
                    Some(d) => drivers.push(d),
                    None => bail!(
                        "{file} line {line} is neither a lab result (no \"case\") nor driver information (none of {})",
                        DRIVER_KEYS.join(", ")
                    ),
                }
                continue;
            }
            let r: Recorded = serde_json::from_value(v.clone())
                .with_context(|| format!("{file} line {line} is not a lab result as `lab NAME --json` prints it"))?;
            if let Some(d) = &r.driver {
                drivers.push(short(d));
            }
            results.push(Replayed { line, raw: raw.to_string(), outcome: judge(r) });
        }
        if results.is_empty() {
            bail!("{file} holds no lab results (no line with \"case\"); {RECORD_HINT}");
        }
        drivers.dedup();
        let driver = (!drivers.is_empty()).then(|| drivers.join("; "));
        Ok(Recording { path: path.to_path_buf(), driver, results })
    }

    /// The cases of this build's table that the file holds no result for (in table order).
    pub fn not_recorded(&self) -> Vec<&'static str> {
        CASES.iter().map(|c| c.name).filter(|n| self.results.iter().all(|r| r.outcome.case != *n)).collect()
    }

    /// The results for `name` (`None` or `all`: every one, in file order; a case recorded twice
    /// is replayed twice).
    ///
    /// # Errors
    /// `name` is not recorded in the file (the message lists what is).
    pub fn select(&self, name: Option<&str>) -> anyhow::Result<Vec<&Replayed>> {
        let all = matches!(name, None | Some("all"));
        let chosen: Vec<&Replayed> = self.results.iter().filter(|r| all || Some(r.outcome.case.as_str()) == name).collect();
        if chosen.is_empty() {
            let mut held: Vec<&str> = self.results.iter().map(|r| r.outcome.case.as_str()).collect();
            held.dedup();
            let n = name.unwrap_or_default();
            let ours = CASES.iter().any(|c| c.name == n);
            let known = if ours { "a case of this build" } else { "not a case of this build either" };
            let newest = if ours && !self.path.ends_with(RECORDED) { format!("; {RECORDED} holds every case") } else { String::new() };
            bail!(
                "lab case `{n}` is not recorded in {} ({known}); it holds: {} (or `all`){newest}",
                self.path.display(),
                held.join(", ")
            );
        }
        Ok(chosen)
    }
}

/// The outcome a recorded result shows: against this build's case when it has one (recomputing
/// `ok` from the recorded code), else against the codes the file expected.
fn judge(r: Recorded) -> Outcome {
    if let Some(c) = CASES.iter().find(|c| c.name == r.case) {
        return Outcome::new(c, r.got_code, r.got_name, r.got_text, r.detail);
    }
    let ok = r.got_code.is_some() && r.expected.contains(&r.got_name);
    Outcome {
        case: r.case,
        call: r.call,
        expected: r.expected,
        got_code: r.got_code,
        got_name: r.got_name,
        got_text: r.got_text,
        ok,
        explanation: r.explanation,
        fix: r.fix,
        detail: r.detail,
    }
}

/// `lab --replay FILE [NAME|all]`: shows the recorded results for `name` (`None`: all) as `lab`
/// would, marked as replayed from `file` with its driver information; `json` prints the file's
/// lines instead; `quiz` asks first (`input`: see [`ask`]). Replaying all of them also names the
/// cases of this build the file does not hold ("not recorded", on stderr with `json`), which is
/// not a failure. Makes no driver call.
///
/// # Errors
/// The file cannot be read or parsed, `name` is not recorded in it, `out` cannot be written, or
/// a replayed case did not get an expected code (see [`verdict`]).
pub fn replay(out: &mut impl Write, file: &Path, name: Option<&str>, json: bool, quiz: bool, input: Option<&mut dyn BufRead>) -> anyhow::Result<()> {
    let rec = Recording::read(file)?;
    let chosen = rec.select(name)?;
    let outcomes: Vec<Outcome> = chosen.iter().map(|r| r.outcome.clone()).collect();
    let missing = if matches!(name, None | Some("all")) { rec.not_recorded() } else { Vec::new() };
    let not_recorded = (!missing.is_empty()).then(|| {
        format!(
            "not recorded in {}: {} ({} case(s) of this build the file holds no result for; run them on a GPU machine)",
            file.display(),
            missing.join(", "),
            missing.len()
        )
    });
    if json {
        for r in &chosen {
            writeln!(out, "{}", r.raw)?;
        }
        out.flush()?;
        if let Some(n) = &not_recorded {
            eprintln!("{n}");
        }
        return verdict(&outcomes, Some(file), quiz);
    }
    let driver = rec.driver.as_deref().map_or_else(|| "the file records no driver information".to_string(), |d| format!("recorded with {d}"));
    writeln!(out, "replayed from {} ({driver}): {} recorded result(s); no driver call is made here.", file.display(), outcomes.len())?;
    writeln!(out, "The code, name, text and detail are the file's; the call, expected codes, explanation and fix are this build's.")?;
    writeln!(out)?;
    let predictions = if quiz {
        let calls: Vec<(&str, &str)> = outcomes.iter().map(|o| (o.case.as_str(), o.call.as_str())).collect();
        Some(ask(out, &calls, input)?)
    } else {
        None
    };
    show(out, &outcomes, false, predictions.as_deref(), true)?;
    if let Some(n) = &not_recorded {
        writeln!(out, "{n}")?;
        out.flush()?;
    }
    verdict(&outcomes, Some(file), quiz)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"case":"unmap-twice","call":"old call","expected":["CUDA_ERROR_NOT_MAPPED"],"got_code":211,"got_name":"CUDA_ERROR_NOT_MAPPED","got_text":"resource not mapped","ok":true,"explanation":"old","fix":"old","detail":null}"#;

    fn parse(text: &str) -> anyhow::Result<Recording> {
        Recording::parse(Path::new("rec.jsonl"), text)
    }

    #[test]
    fn a_known_case_is_judged_against_this_build_and_shows_its_text() {
        let rec = parse(&format!("\n{LINE}\n\n")).expect("parses");
        assert_eq!(rec.driver, None);
        let r = &rec.results[0];
        assert_eq!(r.line, 2);
        assert_eq!(r.raw, LINE);
        assert!(r.outcome.ok);
        let case = CASES.iter().find(|c| c.name == "unmap-twice").expect("case");
        assert_eq!(r.outcome.call, case.call);
        assert_eq!(r.outcome.explanation, case.explanation);
        // The recorded `ok` is not trusted: another code is UNEXPECTED.
        let wrong = LINE.replace("\"got_code\":211", "\"got_code\":999");
        assert!(!parse(&wrong).expect("parses").results[0].outcome.ok);
    }

    #[test]
    fn an_unknown_case_is_judged_against_the_file() {
        let line = r#"{"case":"from-the-future","call":"cuX()","expected":["CUDA_ERROR_X"],"got_code":7,"got_name":"CUDA_ERROR_X"}"#;
        let o = &parse(line).expect("parses").results[0].outcome;
        assert!(o.ok && o.call == "cuX()" && o.got_text.is_empty());
    }

    #[test]
    fn driver_lines_and_fields_are_summarised() {
        let header = r#"{"gpu":"NVIDIA H200","driver":"580.159.04","devices":[{"name":"NVIDIA H200","ordinal":0}]}"#;
        let rec = parse(&format!("{header}\n{LINE}")).expect("parses");
        assert_eq!(rec.driver.as_deref(), Some("gpu NVIDIA H200, devices NVIDIA H200, driver 580.159.04"));
        let with_field = LINE.replace("\"detail\":null", r#""detail":null,"driver":{"version":"580","cuda":"13.0"}"#);
        let d = parse(&with_field).expect("parses").driver.expect("driver info");
        assert!(d.contains("cuda 13.0") && d.contains("version 580"), "{d}");
    }

    #[test]
    fn bad_lines_name_their_number() {
        let e = format!("{:#}", parse(&format!("{LINE}\nnot json")).unwrap_err());
        assert!(e.contains("rec.jsonl line 2 is not JSON"), "{e}");
        let e = format!("{:#}", parse(&format!("{LINE}\n\n[1, 2]")).unwrap_err());
        assert!(e.contains("line 3 is not a JSON object"), "{e}");
        let e = format!("{:#}", parse(r#"{"case":"unmap-twice"}"#).unwrap_err());
        assert!(e.contains("line 1 is not a lab result") && e.contains("got_name"), "{e}");
        let e = format!("{:#}", parse(r#"{"colour":"blue"}"#).unwrap_err());
        assert!(e.contains("line 1 is neither a lab result"), "{e}");
        let e = format!("{:#}", parse("\n\n").unwrap_err());
        assert!(e.contains("holds no lab results") && e.contains("lab all --json"), "{e}");
    }

    #[test]
    fn select_names_what_the_file_holds() {
        let rec = parse(LINE).expect("parses");
        assert_eq!(rec.select(None).expect("all").len(), 1);
        assert_eq!(rec.select(Some("unmap-twice")).expect("named").len(), 1);
        let e = rec.select(Some("map-already-mapped")).unwrap_err().to_string();
        assert!(e.contains("not recorded in rec.jsonl (a case of this build)") && e.contains("holds: unmap-twice"), "{e}");
        let e = rec.select(Some("nosuch")).unwrap_err().to_string();
        assert!(e.contains("not a case of this build either"), "{e}");
    }

    #[test]
    fn predictions_match_by_number_name_or_short_name() {
        let o = parse(LINE).expect("parses").results[0].outcome.clone();
        for p in ["211", "CUDA_ERROR_NOT_MAPPED", "not_mapped", " NOT_MAPPED ", "not mapped"] {
            assert_eq!(judge_prediction(p, &o), Verdict::Right, "{p}");
        }
        for p in ["208", "ALREADY_MAPPED", "CUDA_SUCCESS"] {
            assert_eq!(judge_prediction(p, &o), Verdict::Wrong(String::new()), "{p}");
        }
        // A typo of a short name is not judged wrong: it is not an answer at all. A CUDA_ name
        // this build does not list may still be real: it is judged (wrong here).
        for p in ["NOT_MAPED", "banana", "MAPPED", ""] {
            assert!(matches!(judge_prediction(p, &o), Verdict::Unclear(_)), "{p}");
            assert!(!is_known_answer(p), "{p}");
        }
        for p in ["CUDA_ERROR_ALREADY_ACQUIRED", "CUDA_ERROR_NOT_MAPED", "-11", "crash", "not-ready", "not  ready"] {
            assert!(is_known_answer(p), "{p}");
        }
        let gone = Outcome::unavailable(&CASES[0], "no driver");
        assert_eq!(judge_prediction("208", &gone), Verdict::NotRun);
    }

    #[test]
    fn get_proc_address_predictions_are_judged_by_name_with_a_hint() {
        let case = |name: &str| CASES.iter().find(|c| c.name == name).expect("a case");
        let old = Outcome::new(case("proc-address-old-version"), Some(2), "CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT".into(), String::new(), None);
        assert_eq!(judge_prediction("version_not_sufficient", &old), Verdict::Right);
        assert!(matches!(judge_prediction("2", &old), Verdict::Unclear(w) if w.contains("ambiguous")));
        assert!(matches!(judge_prediction("CUDA_SUCCESS", &old), Verdict::Wrong(h) if h.contains("symbolStatus")));
        assert_eq!(judge_prediction("CU_GET_PROC_ADDRESS_SUCCESS", &old), Verdict::Wrong(String::new()));
        // A prefix names the kind: CUDA_SUCCESS is not the symbolStatus SUCCESS.
        let found = Outcome::new(case("ctx-create-versions"), Some(0), "CU_GET_PROC_ADDRESS_SUCCESS".into(), String::new(), None);
        assert!(matches!(judge_prediction("CUDA_SUCCESS", &found), Verdict::Wrong(h) if h.contains("symbolStatus")));
        assert_eq!(judge_prediction("success", &found), Verdict::Right);
        let above = Outcome::new(case("proc-address-above-driver"), Some(1), "CUDA_ERROR_INVALID_VALUE".into(), String::new(), None);
        assert!(matches!(judge_prediction("SYMBOL_NOT_FOUND", &above), Verdict::Wrong(h) if h.contains("refused")));
        assert!(matches!(judge_prediction("1", &above), Verdict::Unclear(_)));
        assert_eq!(judge_prediction("invalid value", &above), Verdict::Right);
    }

    #[test]
    fn silent_answers_are_replayed_judged_and_predicted_by_their_data() {
        let line = r#"{"case":"write-read-only-registered","got_code":0,"got_name":"SUCCESS_BUT_STALE_DATA","got_text":"x","detail":"first words 0x00000000"}"#;
        let rec = parse(line).expect("parses");
        let o = &rec.results[0].outcome;
        assert!(o.ok && o.is_silent(), "{o:?}");
        assert_eq!(o.detail.as_deref(), Some("first words 0x00000000"));
        for p in ["stale", "STALE_DATA", "stale data", "SUCCESS_BUT_STALE_DATA", "success but stale"] {
            assert_eq!(judge_prediction(p, o), Verdict::Right, "{p}");
        }
        for p in ["current", "garbled", "SUCCESS_WITH_CURRENT_DATA"] {
            assert_eq!(judge_prediction(p, o), Verdict::Wrong(String::new()), "{p}");
        }
        // A number or CUDA_SUCCESS cannot tell the data: not judged, and the reason says what to type.
        for p in ["0", "CUDA_SUCCESS", "success"] {
            assert!(matches!(judge_prediction(p, o), Verdict::Unclear(w) if w.contains("STALE, GARBLED or CURRENT")), "{p}");
        }
        // GARBLED is not among this case's answers: a replay of it is UNEXPECTED.
        let garbled = line.replace("STALE", "GARBLED");
        assert!(!parse(&garbled).expect("parses").results[0].outcome.ok);
        // Every case of this build but the one recorded is "not recorded".
        let missing = rec.not_recorded();
        assert_eq!(missing.len(), CASES.len() - 1);
        assert!(!missing.contains(&"write-read-only-registered") && missing.contains(&"map-already-mapped"));
    }

    #[test]
    fn the_quiz_asks_before_it_tells() {
        let mut out = Vec::new();
        let mut input: &[u8] = b"not_mapped\n\n";
        let p = ask(&mut out, &[("unmap-twice", "call one"), ("b", "call two"), ("c", "call three")], Some(&mut input)).expect("asks");
        assert_eq!(p, [Some("not_mapped".to_string()), None, None]);
        let asked = String::from_utf8(out).expect("utf-8");
        assert!(asked.contains("1. unmap-twice") && asked.contains("call three") && !asked.contains("NOT_MAPPED"), "{asked}");
        let o = parse(LINE).expect("parses").results[0].outcome.clone();
        let mut out = Vec::new();
        reveal(&mut out, &o, Some("not_mapped"), true).expect("reveals");
        let told = String::from_utf8(out).expect("utf-8");
        assert!(told.starts_with("unmap-twice — ok (replayed)"), "{told}");
        assert!(told.find("got:").expect("got") < told.find("expected:").expect("expected"), "{told}");
        assert!(told.contains("predicted: not_mapped — right"), "{told}");
    }

    #[test]
    fn a_reason_shared_by_cases_is_printed_once_with_the_replay_remedy() {
        let why = "no CUDA driver library could be loaded; tried: libcuda.so.1";
        let outcomes: Vec<Outcome> = CASES.iter().take(3).map(|c| Outcome::unavailable(c, why)).collect();
        let mut out = Vec::new();
        show(&mut out, &outcomes, false, None, false).expect("shows");
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(text.matches(why).count(), 1, "{text}");
        assert_eq!(text.matches("the same reason as above").count(), 2, "{text}");
        let err = verdict(&outcomes, None, false).expect_err("cases that could not run fail").to_string();
        assert!(err.contains(why) && err.contains(&format!("lab --replay {RECORDED}")), "{err}");
        // The recorded file is where the remedy says (relative to the repository's root).
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let rec = parse(&std::fs::read_to_string(root.join(RECORDED)).expect("the recorded lab file")).expect("parses");
        assert!(rec.not_recorded().is_empty(), "every case of this build is recorded in {RECORDED}");
    }
}
