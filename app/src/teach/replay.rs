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
//! without `"case"` but with any of [`super::recording::DRIVER_KEYS`] (e.g. `{"gpu":"NVIDIA H200","driver":"580.159.04"}`),
//! or a `"driver"` field in a result.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::bail;

use super::lab::{Outcome, CASES};
#[cfg(test)]
use super::quiz::is_known_answer;
use super::quiz::{ask, judge_prediction, Verdict};
use super::recording::{Recording, RECORDED};

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
    // The name column fits the longest name.
    let width = CASES.iter().map(|c| c.name.len()).max().unwrap_or(0);
    for c in CASES {
        let expected: Vec<String> = c.expected.iter().map(|e| e.name()).collect();
        let w = width;
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
                writeln!(out, "{:<w$} {}", c.name, needs)?;
            } else {
                writeln!(out, "{:<w$} {:<25} expects {}", c.name, needs, expected.join(" or "))?;
            }
            writeln!(out, "{:<w$} {}", "", c.call)?;
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
/// and why (`replayed`: the file they were read from). Cases that could not run here (not a
/// replay) did not fail, and the error says so — "could not run here (no CUDA driver)" — with the
/// remedy of a class without a GPU: `--replay` [`RECORDED`] and the case's name (`all` for every
/// case; with `--quiz` when `quiz`).
///
/// # Errors
/// As said: a case that could not run (or was recorded so) or did not produce an expected code.
pub fn verdict(outcomes: &[Outcome], replayed: Option<&Path>, quiz: bool) -> anyhow::Result<()> {
    let unavailable: Vec<&Outcome> = outcomes.iter().filter(|o| o.is_unavailable()).collect();
    let unexpected: Vec<String> =
        outcomes.iter().filter(|o| !o.ok && !o.is_unavailable()).map(|o| format!("{} (got {})", o.case, o.got_summary())).collect();
    if unexpected.is_empty() && unavailable.is_empty() {
        return Ok(());
    }
    let mut why = Vec::new();
    if !unexpected.is_empty() {
        why.push(format!("{} did not produce the expected code: {}", unexpected.len(), unexpected.join("; ")));
    }
    let names: Vec<&str> = unavailable.iter().map(|o| o.case.as_str()).collect();
    if let Some(path) = replayed {
        if let Some(first) = unavailable.first() {
            if unavailable.iter().all(|o| o.got_text == first.got_text) {
                why.push(format!("{} was recorded as not run ({}): {}", unavailable.len(), names.join(", "), first.got_text));
            } else {
                let each: Vec<String> = unavailable.iter().map(|o| format!("{}: {}", o.case, o.got_text)).collect();
                why.push(format!("{} was recorded as not run: {}", unavailable.len(), each.join("; ")));
            }
        }
        let failed = unexpected.len() + unavailable.len();
        bail!("{failed} of {} replayed lab case(s) from {} failed; {}", outcomes.len(), path.display(), why.join("; "));
    }
    if !unavailable.is_empty() {
        // Nothing was judged for these: they did not fail, they could not run here.
        let name = match outcomes {
            [one] => one.case.as_str(),
            _ if outcomes.len() == CASES.len() => "all",
            _ => "NAME",
        };
        let quiz = if quiz { " --quiz" } else { "" };
        let reasons: Vec<String> = unavailable.iter().map(|o| short_reason(&o.got_text)).collect();
        let reason = if reasons.iter().all(|r| *r == reasons[0]) { reasons[0].clone() } else { "see each case above".to_string() };
        let which = if unavailable.len() == outcomes.len() { String::new() } else { format!(" ({})", names.join(", ")) };
        why.push(format!(
            "{} of {} lab case(s){which} could not run here ({reason}): replay the recorded answers with `nbody-interop lab{quiz} \
             --replay {RECORDED} {name}` (from the repository's root)",
            unavailable.len(),
            outcomes.len()
        ));
    }
    if unexpected.is_empty() {
        bail!("{}", why.join("; "));
    }
    bail!("{} of {} lab case(s) failed; {}", unexpected.len(), outcomes.len(), why.join("; "))
}

/// The head of why a case could not run: `no CUDA driver` for a driver that does not load, else
/// the reason's first clause (the whole reason is with the case).
fn short_reason(got_text: &str) -> String {
    let text = got_text.strip_prefix("unavailable: ").unwrap_or(got_text);
    if text.contains("no CUDA driver library could be loaded") {
        return "no CUDA driver".to_string();
    }
    let head = text.split(['.', ';']).next().unwrap_or(text);
    let head = head.split_once(": ").map_or(head, |(h, _)| h).trim();
    if head.chars().count() > 100 {
        format!("{}…", head.chars().take(100).collect::<String>())
    } else {
        head.to_string()
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
        assert!(err.contains("3 of 3 lab case(s) could not run here (no CUDA driver)"), "{err}");
        assert!(err.contains(&format!("lab --replay {RECORDED} NAME")) && !err.contains("failed"), "{err}");
        // One case: its name in the remedy; every case: `all`.
        let err = verdict(&outcomes[..1], None, false).expect_err("a case that could not run fails").to_string();
        assert!(
            err.contains(&format!(
                "could not run here (no CUDA driver): replay the recorded answers with `nbody-interop lab --replay {RECORDED} {}`",
                CASES[0].name
            )),
            "{err}"
        );
        let all: Vec<Outcome> = CASES.iter().map(|c| Outcome::unavailable(c, why)).collect();
        let err = verdict(&all, None, true).expect_err("cases that could not run fail").to_string();
        assert!(err.contains(&format!("lab --quiz --replay {RECORDED} all`")), "{err}");
        // The recorded file is where the remedy says (relative to the repository's root).
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let rec = parse(&std::fs::read_to_string(root.join(RECORDED)).expect("the recorded lab file")).expect("parses");
        assert!(rec.not_recorded().is_empty(), "every case of this build is recorded in {RECORDED}");
    }
}
