//! The mistake lab and the API trace without a GPU: `lab` lists its cases, every case against a
//! missing driver is reported "unavailable" with the load error (never a crash), and `--trace`
//! writes JSON lines; `lab --quiz` hides the expected codes until a case ran, and `lab --replay`
//! shows the results recorded on the H200 (`docs/results/2026-12-04-h200/lab.jsonl`) as the table
//! of docs/lab.md gives them. The cases themselves run on the GPU machine (`.ci/gpu-check run`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nbody_app::teach::lab::CASES;

#[path = "common/cli.rs"]
mod cli;

use cli::{assert_no_panic, out_err, BIN};

/// The binary with `args`, and `NBODY_CUDA_LIBRARY` set to `library` if given.
fn run(args: &[&str], library: Option<&str>) -> Output {
    cli::run_with(args, library.map(|l| ("NBODY_CUDA_LIBRARY", l)).as_slice())
}

/// A shared library that is certainly present and certainly not the CUDA driver.
fn not_the_driver() -> PathBuf {
    for c in ["/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6"] {
        if Path::new(c).exists() {
            return PathBuf::from(c);
        }
    }
    PathBuf::from("libm.so.6")
}

#[test]
fn lab_without_a_name_lists_every_case_and_needs_no_driver() {
    let o = run(&["lab"], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "listing must succeed without a driver: {err}");
    for c in CASES {
        assert!(out.contains(c.name), "{} missing from:\n{out}", c.name);
    }
    assert!(out.contains("CUDA_ERROR_ALREADY_MAPPED") && out.contains("CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT"), "{out}");
}

#[test]
fn lab_list_json_has_one_object_per_case() {
    let o = run(&["lab", "--json"], Some("/nonexistent/libcuda.so.1"));
    assert!(o.status.success());
    let (out, _) = out_err(&o);
    let rows: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    assert_eq!(rows.len(), CASES.len());
    assert_eq!(rows[0]["case"], CASES[0].name);
    assert!(rows.iter().all(|r| r["expected"].as_array().is_some_and(|a| !a.is_empty())));
}

#[test]
fn a_named_case_against_a_missing_driver_is_unavailable_with_the_load_error() {
    let o = run(&["lab", "proc-address-old-version"], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    let (out, err) = out_err(&o);
    assert!(!o.status.success(), "a case that cannot run is a failure");
    assert!(out.contains("unavailable: no CUDA driver library could be loaded"), "{out}");
    assert!(out.contains("/nonexistent/libcuda.so.1"), "the load error names the path tried:\n{out}");
    assert!(err.contains("could not run") && err.contains("proc-address-old-version"), "the reason is on stderr:\n{err}");
}

#[test]
fn every_case_against_a_missing_driver_is_reported_in_json() {
    let o = run(&["lab", "all", "--json"], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    assert!(!o.status.success());
    let (out, _) = out_err(&o);
    let mut rows: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    // The first line says where the answers came from: commit, command line, machine (no GPU here).
    let first = rows.remove(0);
    let p = &first["provenance"];
    assert!(
        p["commit"].is_string() && p["gpu"].is_null() && p["command_line"].as_array().is_some_and(|a| a.iter().any(|x| x == "--json")),
        "{first}"
    );
    assert_eq!(rows.len(), CASES.len());
    for (r, c) in rows.iter().zip(CASES) {
        assert_eq!(r["case"], c.name);
        for key in ["call", "expected", "got_code", "got_name", "got_text", "ok", "explanation", "fix"] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
        assert_eq!(r["ok"], false);
        assert_eq!(r["got_code"], serde_json::Value::Null);
        assert_eq!(r["got_name"], "unavailable");
        assert!(r["got_text"].as_str().is_some_and(|t| t.starts_with("unavailable: ")), "{r}");
    }
}

#[test]
fn isolated_cases_run_in_a_child_that_reports_back() {
    let isolated: Vec<&str> = CASES.iter().filter(|c| c.isolated).map(|c| c.name).collect();
    assert!(!isolated.is_empty());
    for name in &isolated {
        // What the parent runs: one JSON line for the one case, from this process.
        let o = run(&["lab", name, "--json", "--child"], Some("/nonexistent/libcuda.so.1"));
        assert_no_panic(&o);
        let (out, err) = out_err(&o);
        let rows: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
        assert_eq!(rows.len(), 1, "{out}\n{err}");
        assert_eq!(rows[0]["case"], *name);
        assert_eq!(rows[0]["got_name"], "unavailable");
    }
    // Through the parent: the child's answer comes back as the case's outcome, with the reason.
    let o = run(&["lab", isolated[0], "--json"], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    let (out, err) = out_err(&o);
    assert!(!o.status.success());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "the provenance line and the case's: {out}");
    assert!(lines[0].starts_with("{\"provenance\":"), "{out}");
    let row: serde_json::Value = serde_json::from_str(lines[1]).expect("one JSON object");
    assert_eq!(row["case"], isolated[0]);
    assert!(row["got_text"].as_str().is_some_and(|t| t.contains("/nonexistent/libcuda.so.1")), "{row}");
    assert!(err.contains("could not run"), "{err}");
    // The flag is internal: not in the help.
    let (help, _) = out_err(&run(&["lab", "--help"], None));
    assert!(help.contains("--replay") && !help.contains("--child"), "{help}");
    let o = run(&["lab", "--child"], None);
    assert!(!o.status.success());
    assert!(out_err(&o).1.contains("--child needs the name of one case"));
}

#[test]
fn a_library_that_is_not_the_driver_is_reported_not_loaded() {
    let lib = not_the_driver();
    let o = run(&["lab", "proc-address-misspelt"], lib.to_str());
    assert_no_panic(&o);
    assert!(!o.status.success());
    let (out, _) = out_err(&o);
    assert!(out.contains("unavailable:") && out.contains("cuDriverGetVersion"), "{out}");
}

#[test]
fn an_unknown_case_names_the_cases() {
    let o = run(&["lab", "map-twice-please"], None);
    assert_no_panic(&o);
    assert!(!o.status.success());
    let (_, err) = out_err(&o);
    assert!(err.contains("unknown lab case") && err.contains("unmap-twice"), "{err}");
}

#[test]
fn trace_file_gets_the_gl_draw_of_every_frame_on_the_cpu_backend() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("lab-trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join("trace.jsonl");
    let p = path.to_str().expect("utf-8 path");
    // `auto` without a driver (with --backend cpu, --step-mode is refused up front).
    let o = run(
        &["--headless", "--backend", "auto", "--bodies", "256", "--frames", "4", "--width", "96", "--height", "64", "--trace", p, "--step-mode"],
        Some("/nonexistent/libcuda.so.1"),
    );
    assert_no_panic(&o);
    let (_, err) = out_err(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("step mode needs CUDA"), "step mode on the CPU backend says why it cannot run:\n{err}");
    assert!(err.contains("the trace holds only the GL draws"), "{err}");
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&path).expect("trace written").lines().map(|l| serde_json::from_str(l).expect("JSON line")).collect();
    // The CPU backend makes no driver calls: one GL draw per frame.
    assert_eq!(lines.len(), 4, "{lines:?}");
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["frame"], i);
        assert_eq!(l["step"], "draw");
        assert_eq!(l["api"], "gl");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn trace_to_an_unwritable_path_is_a_clear_error() {
    let o = run(&["--headless", "--backend", "cpu", "--bodies", "64", "--frames", "1", "--trace", "/nonexistent/dir/t.jsonl"], None);
    assert_no_panic(&o);
    assert!(!o.status.success());
    let (_, err) = out_err(&o);
    assert!(err.contains("--trace") && err.contains("/nonexistent/dir/t.jsonl"), "{err}");
}

// --- For a class: `lab --quiz` and `lab --replay` ---------------------------

/// The workspace root (tests run in `app/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The lab results recorded on the H200 and committed.
fn committed_lab_jsonl() -> PathBuf {
    root().join(nbody_app::teach::recording::RECORDED)
}

/// This build's cases that `file` holds results for, in the file's order.
fn recorded_cases(file: &Path) -> Vec<&'static nbody_app::teach::lab::Case> {
    let text = std::fs::read_to_string(file).expect("lab.jsonl");
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| CASES.iter().find(|c| v["case"] == c.name))
        .collect()
}

/// Every expected code name of this build's table.
fn expected_names() -> Vec<String> {
    CASES.iter().flat_map(|c| c.expected.iter().map(|e| e.name())).collect()
}

/// A scratch file under the test's temporary directory with `text` in it.
fn scratch_file(name: &str, text: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("lab-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("scratch file");
    path
}

/// The lab table of docs/lab.md ("Results on the H200"): (case, "got on the H200" cell) of every row.
fn readme_rows() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(root().join("docs/lab.md")).expect("docs/lab.md");
    let section = readme.split("\n## Results on the H200").nth(1).expect("a \"Results on the H200\" section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let cells = |l: &str| l.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect::<Vec<_>>();
    let mut lines = section.lines().skip_while(|l| !(l.starts_with('|') && l.contains("got on the H200")));
    let header = cells(lines.next().expect("the table's header"));
    let got = header.iter().position(|h| h.starts_with("got on the H200")).expect("a \"got on the H200\" column");
    let rows: Vec<(String, String)> =
        lines.skip(1).take_while(|l| l.starts_with('|')).map(cells).map(|c| (c[0].trim_matches('`').to_string(), c[got].clone())).collect();
    assert!(!rows.is_empty(), "no rows in the lab table of docs/lab.md");
    rows
}

/// What the table of docs/lab.md says for a case the H200 has not run yet (the whole "got" cell).
const NOT_YET_RECORDED: &str = "not yet recorded";

/// The table of docs/lab.md, the recorded rows: (case, code, name) from the "got on the H200" column,
/// e.g. "208 `CUDA_ERROR_ALREADY_MAPPED`" or "result 0, symbolStatus 2 `VERSION_NOT_SUFFICIENT`"
/// (the number right before the name is the code the lab reports). Rows that say
/// "not yet recorded" are left out.
fn readme_table() -> Vec<(String, i32, String)> {
    let mut rows = Vec::new();
    for (case, cell) in readme_rows() {
        if cell == NOT_YET_RECORDED {
            continue;
        }
        let (before, name) = cell.rsplit_once('`').and_then(|(b, _)| b.rsplit_once('`')).expect("a `NAME` in the got column");
        let code = before.rsplit(|ch: char| !ch.is_ascii_digit()).find(|t| !t.is_empty()).expect("a code before the name");
        let code: i32 = code.parse().expect("a number");
        // A signal's code is negative ("-11 `child crashed`").
        let code = if before.trim_end().ends_with(&format!("-{code}")) { -code } else { code };
        rows.push((case, code, name.to_string()));
    }
    rows
}

#[test]
fn readme_table_has_every_case_in_table_order() {
    let rows = readme_rows();
    let names: Vec<&str> = rows.iter().map(|(c, _)| c.as_str()).collect();
    let cases: Vec<&str> = CASES.iter().map(|c| c.name).collect();
    assert_eq!(names, cases, "the lab table of docs/lab.md lists every case of teach::lab::CASES, in its order");
    // A case whose explanation has no H200 result yet says so in the table too, and vice versa.
    for (c, (_, cell)) in CASES.iter().zip(&rows) {
        let pending = c.explanation.contains("H200: not yet recorded.");
        assert_eq!(cell == NOT_YET_RECORDED, pending, "{}: docs/lab.md says {cell:?}, the explanation {:?}", c.name, c.explanation);
    }
}

#[test]
fn replay_of_the_committed_lab_jsonl_reproduces_the_readme_table_without_a_gpu() {
    let file = committed_lab_jsonl();
    let f = file.to_str().expect("utf-8 path");
    let table = readme_table();

    let o = run(&["lab", "--replay", f, "all", "--json"], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "every recorded case has its expected code:\n{err}");
    let rows: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    let replayed: Vec<&str> = rows.iter().map(|r| r["case"].as_str().expect("case")).collect();
    let in_table: Vec<&str> = table.iter().map(|(c, _, _)| c.as_str()).collect();
    assert_eq!(replayed, in_table, "the file and the table of docs/lab.md hold the same cases, in the same order");
    for ((case, code, name), r) in table.iter().zip(&rows) {
        assert_eq!(r["got_code"], *code, "{case}: docs/lab.md says {code} {name}, the file {r}");
        assert!(r["got_name"].as_str().is_some_and(|n| n.ends_with(name.as_str())), "{case}: docs/lab.md says {name}, the file {r}");
    }

    // The text replay: each case as `lab` prints it, marked as replayed from the file.
    let o = run(&["lab", "--replay", f], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.starts_with(&format!("replayed from {f}")) && out.contains("recorded with gpu NVIDIA H200, driver 580.159.04"), "{out}");
    assert!(out.contains("no driver call is made here"), "{out}");
    for ((case, code, _), r) in table.iter().zip(&rows) {
        assert!(out.contains(&format!("{case} — ok (replayed)")), "{case} missing:\n{out}");
        let got = format!("  got:       {} ({code})", r["got_name"].as_str().unwrap_or_default());
        assert!(out.contains(&got), "{got} missing:\n{out}");
    }
    assert!(!out.contains("unavailable") && !out.contains("UNEXPECTED"), "{out}");
    // The cases added after the recording are named, and are no failure (the exit status above).
    let recorded = recorded_cases(&file);
    let missing: Vec<&str> = CASES.iter().filter(|c| recorded.iter().all(|r| r.name != c.name)).map(|c| c.name).collect();
    if !missing.is_empty() {
        let line = out.lines().find(|l| l.starts_with("not recorded in")).expect("a \"not recorded\" line");
        for m in &missing {
            assert!(line.contains(m), "{m} missing from {line}");
        }
    }
}

#[test]
fn replay_json_prints_the_recorded_objects() {
    let file = committed_lab_jsonl();
    let recorded = std::fs::read_to_string(&file).expect("lab.jsonl");
    let o = run(&["lab", "--json", "--replay", file.to_str().expect("utf-8")], Some("/nonexistent/libcuda.so.1"));
    assert!(o.status.success());
    let (out, _) = out_err(&o);
    // The results' lines (the file's first line names the driver: not a result).
    let want: Vec<&str> = recorded.lines().filter(|l| l.contains(r#""case":"#)).collect();
    assert_eq!(out.lines().collect::<Vec<_>>(), want);
    let one = run(&["lab", "--json", "--replay", file.to_str().expect("utf-8"), "unmap-twice"], None);
    assert!(one.status.success());
    let (out, _) = out_err(&one);
    assert_eq!(out.lines().collect::<Vec<_>>(), want.iter().copied().filter(|l| l.contains(r#""case":"unmap-twice""#)).collect::<Vec<_>>());
}

#[test]
fn replay_shows_the_recorded_driver_and_fails_on_a_code_that_is_not_expected() {
    let recorded = std::fs::read_to_string(committed_lab_jsonl()).expect("lab.jsonl");
    let unmap = recorded.lines().find(|l| l.contains(r#""case":"unmap-twice""#)).expect("unmap-twice recorded");
    let wrong = unmap
        .replace(r#""got_code":211"#, r#""got_code":208"#)
        .replace(r#""got_name":"CUDA_ERROR_NOT_MAPPED""#, r#""got_name":"CUDA_ERROR_ALREADY_MAPPED""#);
    let path = scratch_file("wrong.jsonl", &format!("{{\"gpu\":\"NVIDIA H200\",\"driver\":\"580.159.04\"}}\n{wrong}\n"));
    let o = run(&["lab", "--replay", path.to_str().expect("utf-8")], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    let (out, err) = out_err(&o);
    assert!(!o.status.success(), "a replayed case with another code is a failure:\n{out}");
    assert!(out.contains("recorded with gpu NVIDIA H200, driver 580.159.04"), "{out}");
    assert!(out.contains("unmap-twice — UNEXPECTED (replayed)"), "{out}");
    assert!(err.contains("replayed lab case(s) from") && err.contains("unmap-twice (got CUDA_ERROR_ALREADY_MAPPED (208))"), "{err}");

    // A result recorded on a machine that could not run it is not a pass either.
    let gone = run(&["lab", "all", "--json"], Some("/nonexistent/libcuda.so.1"));
    let path = scratch_file("unavailable.jsonl", &String::from_utf8_lossy(&gone.stdout));
    let o = run(&["lab", "--replay", path.to_str().expect("utf-8"), "ptx-version-too-new"], None);
    assert!(!o.status.success());
    let (out, err) = out_err(&o);
    assert!(out.contains("ptx-version-too-new — UNAVAILABLE (replayed)"), "{out}");
    assert!(err.contains("was recorded as not run"), "{err}");
}

#[test]
fn replay_errors_name_the_file_the_line_and_the_cases_it_holds() {
    let o = run(&["lab", "--replay", "/nonexistent/dir/lab.jsonl"], None);
    assert_no_panic(&o);
    assert!(!o.status.success());
    let (_, err) = out_err(&o);
    assert!(err.contains("cannot read the recorded lab results /nonexistent/dir/lab.jsonl"), "{err}");
    assert!(err.contains("lab all --json"), "the remedy says how to record one:\n{err}");

    let recorded = std::fs::read_to_string(committed_lab_jsonl()).expect("lab.jsonl");
    let first = recorded.lines().find(|l| l.contains(r#""case":"#)).expect("a result");
    let bad = scratch_file("bad.jsonl", &format!("{first}\n\n{{\"case\": \"unmap-twice\", oops}}\n"));
    let o = run(&["lab", "--replay", bad.to_str().expect("utf-8")], None);
    assert_no_panic(&o);
    assert!(!o.status.success());
    let (out, err) = out_err(&o);
    assert!(out.is_empty(), "nothing is replayed from a file with a bad line:\n{out}");
    assert!(err.contains(&format!("{} line 3 is not JSON", bad.display())), "{err}");

    let missing_field = scratch_file("field.jsonl", "{\"case\": \"unmap-twice\", \"got_code\": 211}\n");
    let (_, err) = out_err(&run(&["lab", "--replay", missing_field.to_str().expect("utf-8")], None));
    assert!(err.contains("line 1 is not a lab result") && err.contains("got_name"), "{err}");

    let one = scratch_file("one.jsonl", &format!("{first}\n"));
    let o = run(&["lab", "--replay", one.to_str().expect("utf-8"), "unmap-twice"], None);
    assert_no_panic(&o);
    assert!(!o.status.success());
    let (_, err) = out_err(&o);
    assert!(err.contains("lab case `unmap-twice` is not recorded in") && err.contains("it holds: map-already-mapped"), "{err}");

    let empty = scratch_file("empty.jsonl", "\n");
    let (_, err) = out_err(&run(&["lab", "--replay", empty.to_str().expect("utf-8")], None));
    assert!(err.contains("holds no lab results"), "{err}");
}

#[test]
fn lab_quiz_lists_the_calls_without_the_expected_codes() {
    let o = run(&["lab", "--quiz"], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "{err}");
    for c in CASES {
        assert!(out.contains(c.name) && out.contains(c.call), "{} or its call missing from:\n{out}", c.name);
    }
    for name in expected_names() {
        assert!(!out.contains(&name), "the quiz list gives away {name}:\n{out}");
    }
    assert!(!out.contains("expects"), "{out}");

    let o = run(&["lab", "--quiz", "--json"], Some("/nonexistent/libcuda.so.1"));
    assert!(o.status.success());
    let (out, _) = out_err(&o);
    let rows: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    assert_eq!(rows.len(), CASES.len());
    assert!(rows.iter().all(|r| r.get("expected").is_none() && r["call"].is_string()), "{out}");
}

#[test]
fn a_quiz_asks_every_call_before_it_shows_any_answer() {
    let file = committed_lab_jsonl();
    let o = run(&["lab", "--quiz", "--replay", file.to_str().expect("utf-8"), "all"], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    let (out, err) = out_err(&o);
    assert!(o.status.success(), "{err}");
    let mark = out.find(" (replayed)\n").expect("the answers");
    let first_answer = out[..mark].rfind('\n').map_or(0, |i| i + 1);
    let (questions, answers) = out.split_at(first_answer);
    // The questions are the recorded cases, in the file's order; the cases of this build that the
    // file does not hold are named "not recorded" after the answers, not asked.
    let recorded = recorded_cases(&file);
    for (i, c) in recorded.iter().enumerate() {
        assert!(questions.contains(&format!("{}. {}", i + 1, c.name)) && questions.contains(c.call), "{} not asked:\n{questions}", c.name);
        for e in c.expected {
            assert!(!questions.contains(&e.name()), "{} given away before the answers:\n{questions}", e.name());
        }
        assert!(!questions.contains(c.explanation) && !questions.contains(c.fix), "{}: explanation or fix before the run", c.name);
        // Each answer: what came back, then the expected code, then why and the fix.
        let block = answers.split(&format!("{} — ", c.name)).nth(1).expect("answered");
        let (got, expected, why) = (block.find("  got:"), block.find("  expected:"), block.find("  why:"));
        assert!(got < expected && expected < why && got.is_some(), "{}: order of got/expected/why in\n{block}", c.name);
    }

    let unrecorded: Vec<_> = CASES.iter().filter(|c| recorded.iter().all(|r| r.name != c.name)).collect();
    for c in &unrecorded {
        assert!(!questions.contains(&format!(". {}\n", c.name)), "{} is not recorded, so not asked:\n{questions}", c.name);
    }
    assert_eq!(answers.contains("not recorded in"), !unrecorded.is_empty(), "{answers}");

    // A live quiz without a driver asks nothing and says how to do the lab without a GPU.
    let o = run(&["lab", "--quiz", "unmap-twice"], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    assert!(!o.status.success());
    let (out, err) = out_err(&o);
    assert!(!out.contains("1. unmap-twice"), "{out}");
    assert!(err.contains("lab --quiz --replay docs/results/") && err.contains("unmap-twice"), "{err}");
    // The quiz hides the answers that --json prints: the two are refused together for a case.
    let o = run(&["lab", "--quiz", "--json", "--replay", file.to_str().expect("utf-8"), "unmap-twice"], None);
    assert!(!o.status.success());
    assert!(out_err(&o).1.contains("--quiz hides each answer"), "{}", out_err(&o).1);
}

/// `lab NAME` without a driver: nothing failed, the case could not run here; the error says so,
/// with the replay of the recorded answers for that very case, which then runs without a GPU.
#[test]
fn a_case_without_a_driver_could_not_run_here_and_points_to_its_replay() {
    let o = run(&["lab", "unmap-twice"], Some("/nonexistent/libcuda.so.1"));
    assert_no_panic(&o);
    let (_, err) = out_err(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let replay = "nbody-interop lab --replay docs/results/2026-12-04-h200/lab.jsonl unmap-twice";
    assert!(err.contains(&format!("could not run here (no CUDA driver): replay the recorded answers with `{replay}`")), "{err}");
    assert!(!err.contains("failed"), "nothing failed:\n{err}");
    // The remedy works (from the repository's root).
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let o = Command::new(BIN).args(replay.split(' ').skip(1)).current_dir(&root).env("RUST_LOG", "warn").output().expect("spawn");
    assert!(o.status.success(), "{:?}", out_err(&o));
    // Every case: the remedy replays them all.
    let (_, err) = out_err(&run(&["lab", "all"], Some("/nonexistent/libcuda.so.1")));
    assert!(err.contains(&format!("{} of {} lab case(s) could not run here (no CUDA driver)", CASES.len(), CASES.len())), "{err}");
    assert!(err.contains("lab.jsonl all`") && !err.contains("failed"), "{err}");
}
