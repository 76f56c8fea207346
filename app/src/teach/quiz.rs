//! The lab's quiz: each case's call asked first, the prediction read, then judged against what
//! came back by name (a `CUresult`, a `symbolStatus`, a silent answer's data word, a crash).

use std::io::{BufRead, Write};

use anyhow::Context as _;

use interop::sys::CuResult;

use super::lab::Outcome;

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
const STATUS_NAMES: [&str; 3] = ["CU_GET_PROC_ADDRESS_SUCCESS", "CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND", "CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT"];

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
            [w] => {
                if name.contains(w) {
                    Verdict::Right
                } else {
                    wrong()
                }
            }
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
