//! A recorded lab run (`lab all --json` lines, with the machine's first line): read, checked
//! line by line, and turned back into outcomes judged against this build's cases.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::lab::{Outcome, CASES};

/// Keys of a line that describes the machine the results were recorded on, in the order shown.
pub const DRIVER_KEYS: [&str; 8] = ["gpu", "device", "devices", "driver", "driver_version", "cuda_version", "library", "date"];

/// How to make a file to replay, for error messages.
pub(super) const RECORD_HINT: &str = "record one on a machine with the GPU with `nbody-interop lab all --json > FILE.jsonl` \
                           (one is committed: docs/results/2026-12-04-h200/lab.jsonl)";

/// The mistake lab's answers recorded on the H200 (driver 580.159.04, every case, with a driver
/// line; 2026-12-03), relative to the
/// repository's root: what `lab --replay` is pointed at without a GPU.
pub const RECORDED: &str = "docs/results/2026-12-04-h200/lab.jsonl";

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
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read the recorded lab results {}; {RECORD_HINT}", path.display()))?;
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
            if let Some(Value::Object(p)) = m.get("provenance") {
                // The first line of `lab --json`: the GPU and driver it ran on.
                if let Some(Value::Object(g)) = p.get("gpu") {
                    let field = |k: &str| g.get(k).map(short).unwrap_or_default();
                    drivers.push(format!("gpu {}, driver {} (CUDA {})", field("name"), field("driver"), field("cuda")));
                }
                continue;
            }
            if !m.contains_key("case") {
                match driver_line(m) {
                    Some(d) => drivers.push(d),
                    None => {
                        bail!("{file} line {line} is neither a lab result (no \"case\") nor driver information (none of {})", DRIVER_KEYS.join(", "))
                    }
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
            bail!("lab case `{n}` is not recorded in {} ({known}); it holds: {} (or `all`){newest}", self.path.display(), held.join(", "));
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
