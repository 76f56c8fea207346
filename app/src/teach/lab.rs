//! The mistake lab: `nbody-interop lab NAME` and the overlay's lab buttons. Each case makes one
//! classic mistake of the resource-mapping workflow (or of entry-point lookup) and shows the
//! driver's real answer (code, name and text) with a plain explanation and the fix.
//!
//! Several mistakes cannot be written with `interop`'s safe types (a [`interop::Mapping`]
//! borrows its resources, so a second map or a pointer after the unmap does not compile); those
//! cases call the raw [`interop::Api`] methods, which is the point of the lesson. Every case
//! works on its own scratch resources (a GL buffer of 256 bytes, a module, streams, events, a
//! second context), never on the demo's, and releases them before it returns, so the demo goes on
//! normally.
//!
//! Two kinds of answer are expected ([`Expect`]): a code (a `CUresult`, or the `symbolStatus` of
//! `cuGetProcAddress`), or, for the *silent* mistakes, [`Expect::Silent`]: every call returns
//! `CUDA_SUCCESS` and the data read back (GL's view of the buffer, or the mapped size) is what
//! the case judges ([`Data`]).
//!
//! A case that could crash the process, or leave its CUDA context unusable for the cases after it,
//! is `isolated`: it runs in a child process, the binary itself re-executed as
//! `nbody-interop lab NAME --json --child` (`lab::child`), from `lab` and from the overlay alike. A
//! child that crashes is reported with its signal; the parent goes on.
//!
//! The cases are grouped by what they need: [`cases`] (the one table, [`CASES`], with the image
//! workflow's part in `image_cases`), `entry`
//! (entry-point lookups: the driver only), `context` (modules and events), `gl` (registration
//! and mapping errors), `image` (the image workflow's: textures, arrays, surfaces, map flags, a
//! deleted texture, calls with no GL context current), `silent` (success codes with wrong data)
//! and `cost` (what registering every frame costs, measured). [`super::replay`] prints the
//! results (the list, the `--quiz`, and the `--replay FILE.jsonl` of recorded results without a
//! GPU).

use std::sync::Arc;

use anyhow::bail;
use interop::sys::{CUdriverProcAddressQueryResult, CuResult};
use interop::{Context, Device, Driver, Error, SchedFlag};
use serde::Serialize;

use crate::gfx::context::HeadlessContext;
use crate::gfx::gl::Gl;

pub mod cases;
mod child;
mod context;
mod cost;
mod entry;
mod gl;
mod image;
mod image_cases;
mod scratch;
mod silent;

pub use cases::CASES;
pub use context::{PTX_SPIN, PTX_TOO_NEW, SPIN_NS};

/// What a case needs to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Needs {
    /// Only the driver library (entry-point queries; no GPU needed).
    Driver,
    /// A CUDA context.
    Context,
    /// A GL context and a CUDA context that shares it.
    GlInterop,
}

/// What GL (or the mapping) showed in a silent case, where every driver call returned
/// `CUDA_SUCCESS`: the data read back is compared with the old contents and the new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Data {
    /// The old contents: CUDA's write (or the change) did not show — the silent failure.
    Stale,
    /// Neither the old contents nor the new (part of a write, or something else).
    Garbled,
    /// The new contents: what CUDA wrote (or the new size) showed.
    Current,
}

impl Data {
    /// Every value: the old contents, neither, the new.
    pub const ALL: [Data; 3] = [Data::Stale, Data::Garbled, Data::Current];

    /// The name the lab reports (in `got_name` and `expected`).
    pub fn name(self) -> &'static str {
        match self {
            Data::Stale => "SUCCESS_BUT_STALE_DATA",
            Data::Garbled => "SUCCESS_BUT_GARBLED_DATA",
            Data::Current => "SUCCESS_WITH_CURRENT_DATA",
        }
    }

    /// The value named `name` (as [`Data::name`] spells it).
    pub fn from_name(name: &str) -> Option<Data> {
        Data::ALL.into_iter().find(|d| d.name() == name)
    }

    /// `Current` when every word of `got` is `new`, `Stale` when every word is `old`, else
    /// `Garbled` (`old` and `new` differ).
    pub fn classify(got: &[u32], old: u32, new: u32) -> Data {
        if !got.is_empty() && got.iter().all(|&w| w == new) {
            Data::Current
        } else if !got.is_empty() && got.iter().all(|&w| w == old) {
            Data::Stale
        } else {
            Data::Garbled
        }
    }
}

/// One acceptable answer of the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A `CUresult`.
    Cu(CuResult),
    /// A `symbolStatus` of `cuGetProcAddress_v2` (`CUdriverProcAddressQueryResult`).
    Status(CUdriverProcAddressQueryResult),
    /// Every call returns `CUDA_SUCCESS`; the data read back is this (a silent mistake).
    Silent(Data),
    /// The process dies of a signal (an isolated case's child: no code comes back at all).
    Crash,
}

/// `got_name` of an isolated case whose child process died before it printed a result; its
/// `got_code` is minus the signal number when a signal killed it.
pub const CHILD_CRASHED: &str = "child crashed";

/// Which kind of answer a reported name is (so that codes of different kinds never match).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cu,
    Status,
    Silent,
}

fn kind_of(name: &str) -> Kind {
    if Data::from_name(name).is_some() {
        Kind::Silent
    } else if name.starts_with("CU_GET_PROC_ADDRESS_") || name.starts_with("CUdriverProcAddressQueryResult") {
        Kind::Status
    } else {
        Kind::Cu
    }
}

impl Expect {
    /// Its value (`CUDA_SUCCESS`, 0, for a silent answer: every call succeeded).
    pub fn code(self) -> i32 {
        match self {
            Expect::Cu(c) => c.0,
            Expect::Status(s) => s.0,
            Expect::Silent(_) => CuResult::CUDA_SUCCESS.0,
            Expect::Crash => -11,
        }
    }
    /// Its `cuda.h` name (for a silent answer, [`Data::name`]).
    pub fn name(self) -> String {
        match self {
            Expect::Cu(c) => crate::trace::result_name(c),
            Expect::Status(s) => status_name(s.0),
            Expect::Silent(d) => d.name().to_string(),
            Expect::Crash => "PROCESS_KILLED_BY_A_SIGNAL".to_string(),
        }
    }
    /// Whether a reported answer (`code`, `name`) is this one: a code of the same kind (a
    /// `CUresult`, a `symbolStatus`), or the same silent outcome.
    pub fn matches(self, code: i32, name: &str) -> bool {
        match self {
            Expect::Cu(c) => code == c.0 && kind_of(name) == Kind::Cu,
            Expect::Status(s) => code == s.0 && kind_of(name) == Kind::Status,
            Expect::Silent(d) => name == d.name(),
            Expect::Crash => name == CHILD_CRASHED && code < 0,
        }
    }
}

fn status_name(s: i32) -> String {
    match s {
        0 => "CU_GET_PROC_ADDRESS_SUCCESS".into(),
        1 => "CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND".into(),
        2 => "CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT".into(),
        n => format!("CUdriverProcAddressQueryResult({n})"),
    }
}

/// One mistake.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// Name as `lab NAME` takes it.
    pub name: &'static str,
    /// The call that makes the mistake.
    pub call: &'static str,
    /// What it needs.
    pub needs: Needs,
    /// Runs in a child process (`lab NAME --json --child`): it may crash the process or spoil
    /// its CUDA context for the cases after it.
    pub isolated: bool,
    /// Acceptable answers (more than one where the reference allows several or drivers differ;
    /// the GPU run says which comes).
    pub expected: &'static [Expect],
    /// What happened and why: the reference first (`Reference (<function>): …`), then what the
    /// H200 showed (`H200: …`).
    pub explanation: &'static str,
    /// What to do instead.
    pub fix: &'static str,
}

/// The case named `name`.
///
/// # Errors
/// No such case (the message lists them).
pub fn find(name: &str) -> anyhow::Result<&'static Case> {
    match CASES.iter().find(|c| c.name == name) {
        Some(c) => Ok(c),
        None => {
            // `map_already_mapped`, `Map-Already-Mapped`: the case's name with hyphens.
            let alt = name.to_ascii_lowercase().replace('_', "-");
            if let Some(c) = CASES.iter().find(|c| c.name == alt) {
                bail!("unknown lab case `{name}`; did you mean `{}`?", c.name);
            }
            bail!("unknown lab case `{name}`; cases: {} (or `all`)", CASES.iter().map(|c| c.name).collect::<Vec<_>>().join(", "))
        }
    }
}

/// What one case produced (a line of `lab --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Case name.
    pub case: String,
    /// The mistaken call.
    pub call: String,
    /// Acceptable answers, by name.
    pub expected: Vec<String>,
    /// The code the driver returned (`None` when the case could not run; 0 for a silent case,
    /// whose calls all succeeded).
    pub got_code: Option<i32>,
    /// Its name (`cuGetErrorName`, the symbolStatus name, or a [`Data`] name), or
    /// `"unavailable"` / `"setup failed"` / `"child crashed"`.
    pub got_name: String,
    /// Its text (`cuGetErrorString`), or why the case could not run (`"unavailable: …"`).
    pub got_text: String,
    /// Whether the driver gave one of the expected answers.
    pub ok: bool,
    /// What happened and why.
    pub explanation: String,
    /// What to do instead.
    pub fix: String,
    /// More of the answer (the JIT log, `cuGetProcAddress`'s own return value, the data read
    /// back: first words, expected and old values, …).
    pub detail: Option<String>,
}

impl Outcome {
    /// The outcome of `c` when the driver answered `got_code` named `got_name` (`None`: the case
    /// did not run); `ok` when that is one of the expected answers ([`Expect::matches`]).
    pub fn new(c: &Case, got_code: Option<i32>, got_name: String, got_text: String, detail: Option<String>) -> Outcome {
        let ok = got_code.is_some_and(|g| c.expected.iter().any(|e| e.matches(g, &got_name)))
            && !got_name.starts_with("unavailable")
            && got_name != "setup failed";
        Outcome {
            case: c.name.into(),
            call: c.call.into(),
            expected: c.expected.iter().map(|e| e.name()).collect(),
            got_code,
            got_name,
            got_text,
            ok,
            explanation: c.explanation.into(),
            fix: c.fix.into(),
            detail,
        }
    }

    /// The case could not run here (`reason`: the load error, no GPU, …).
    pub fn unavailable(c: &Case, reason: &str) -> Outcome {
        Outcome::new(c, None, "unavailable".into(), format!("unavailable: {reason}"), None)
    }

    /// Whether the case could not run.
    pub fn is_unavailable(&self) -> bool {
        self.got_name == "unavailable"
    }

    /// Whether the answer is a silent one (all calls succeeded; the data was judged).
    pub fn is_silent(&self) -> bool {
        Data::from_name(&self.got_name).is_some()
    }

    /// `NAME (code)` of what came back.
    pub fn got_summary(&self) -> String {
        match self.got_code {
            Some(c) => format!("{} ({c})", self.got_name),
            None => self.got_text.clone(),
        }
    }
}

/// What the cases run against. Each `Err` says why that kind of case cannot run.
pub struct LabEnv<'a> {
    /// The driver library.
    pub driver: Result<Driver, String>,
    /// A CUDA context (made current by the cases that use it).
    pub cuda: Result<Arc<Context>, String>,
    /// A current GL context and a CUDA context on the device that shares it.
    pub gl: Result<(Gl<'a>, Arc<Context>), String>,
    /// The owner of that GL context when the lab made it headless (`None` in the overlay): the
    /// cases that release the GL context need it (they are isolated, so they always get one).
    pub gl_owner: Option<&'a HeadlessContext>,
}

/// What a case's driver call returned.
struct Got {
    code: i32,
    name: String,
    text: String,
    detail: Option<String>,
}

impl Got {
    /// A silent answer: every call succeeded and the data read back is `data`.
    fn silent(data: Data, text: impl Into<String>, detail: String) -> Got {
        Got { code: CuResult::CUDA_SUCCESS.0, name: data.name().into(), text: text.into(), detail: Some(detail) }
    }
}

/// A setup step of a case failed (not the mistake itself).
struct SetupFailed(String);

impl<E: std::fmt::Display> From<E> for SetupFailed {
    fn from(e: E) -> Self {
        SetupFailed(e.to_string())
    }
}

fn got_from(r: Result<(), Error>) -> Result<Got, SetupFailed> {
    match r {
        Ok(()) => Ok(Got { code: 0, name: "CUDA_SUCCESS".into(), text: "the driver accepted the call".into(), detail: None }),
        Err(Error::Driver { code, name, text, .. }) => Ok(Got { code: code.0, name, text, detail: None }),
        Err(Error::Jit { code, name, text, log }) => Ok(Got { code: code.0, name, text, detail: Some(format!("JIT error log: {log}")) }),
        Err(e) => Err(SetupFailed(e.to_string())),
    }
}

/// `Ok` or the code name of a driver call's result, for details.
fn result_words(r: &Result<(), Error>) -> String {
    match r {
        Ok(()) => "CUDA_SUCCESS".into(),
        Err(Error::Driver { name, .. }) => name.clone(),
        Err(e) => e.to_string(),
    }
}

/// Runs `case` against `env`, in this process (also an isolated one: the child process itself
/// calls this). Never panics; a case that cannot run is reported, not raised.
pub fn run_case(case: &Case, env: &LabEnv<'_>) -> Outcome {
    let r = match case.needs {
        Needs::Driver => match &env.driver {
            Ok(d) => entry::run(case, d),
            Err(e) => return Outcome::unavailable(case, e),
        },
        Needs::Context => match &env.cuda {
            Ok(ctx) => context::run(case, ctx),
            Err(e) => return Outcome::unavailable(case, e),
        },
        Needs::GlInterop => match &env.gl {
            Ok((gl, ctx)) => gl::run(case, *gl, ctx, env.gl_owner),
            Err(e) => return Outcome::unavailable(case, e),
        },
    };
    match r {
        Ok(g) => Outcome::new(case, Some(g.code), g.name, g.text, g.detail),
        Err(SetupFailed(e)) => Outcome::new(case, None, "setup failed".into(), e, None),
    }
}

/// Runs a case from the overlay against the live contexts (`cuda`: the CUDA backend's context,
/// which shares `gl`; `None` with the CPU backend). Uses scratch resources only; an isolated
/// case runs in a child process with its own headless contexts, so the demo survives it.
pub fn run_live(name: &str, gl: Gl<'_>, cuda: Option<&Arc<Context>>) -> Outcome {
    let Ok(case) = find(name) else {
        return Outcome {
            case: name.into(),
            call: String::new(),
            expected: Vec::new(),
            got_code: None,
            got_name: "unavailable".into(),
            got_text: format!("unavailable: no lab case {name}"),
            ok: false,
            explanation: String::new(),
            fix: String::new(),
            detail: None,
        };
    };
    if case.isolated {
        return child::run(case);
    }
    let no_cuda = "needs the CUDA backend (this run uses the CPU backend)".to_string();
    let env = LabEnv {
        driver: match cuda {
            Some(c) => Ok(c.api().driver().clone()),
            None => crate::libraries::open_driver().map_err(|e| e.to_string()),
        },
        cuda: cuda.cloned().ok_or_else(|| no_cuda.clone()),
        gl: cuda.map(|c| (gl, c.clone())).ok_or(no_cuda),
        gl_owner: None,
    };
    run_case(case, &env)
}

/// Runs `cases` headless, in the order given: isolated ones each in a child process
/// (`child::run`), the others in this process ([`run_in_process`]).
pub fn run_headless(cases: &[&Case]) -> Vec<Outcome> {
    let here: Vec<&Case> = cases.iter().copied().filter(|c| !c.isolated).collect();
    let mut here_out = run_in_process(&here).into_iter();
    cases.iter().map(|c| if c.isolated { child::run(c) } else { here_out.next().unwrap_or_else(|| Outcome::unavailable(c, "not run")) }).collect()
}

/// Runs `cases` in this process: the driver, then (only if a case needs it) a CUDA context, and
/// a headless GL context with a CUDA context that shares it.
pub fn run_in_process(cases: &[&Case]) -> Vec<Outcome> {
    if cases.is_empty() {
        return Vec::new();
    }
    let driver = match crate::libraries::open_driver() {
        Ok(d) => d,
        Err(e) => {
            let why = e.to_string();
            return cases.iter().map(|c| Outcome::unavailable(c, &why)).collect();
        }
    };
    let need = cases.iter().map(|c| c.needs).max().unwrap_or(Needs::Driver);
    // Declared first, dropped last: the GL context outlives the CUDA contexts and the cases.
    let headless = (need == Needs::GlInterop).then(|| crate::gfx::context::HeadlessContext::new(crate::gfx::context::HEADLESS_CUDA_DEVICE));
    let gl_cuda: Result<Arc<Context>, String> = match &headless {
        None => Err("not needed".into()),
        Some(Err(e)) => Err(format!("no headless GL context: {e:#}")),
        Some(Ok(h)) => {
            crate::cuda::session::open_for_gl(&h.info, crate::cuda::settings::StreamKind::Legacy, 0, crate::cuda::settings::CtxSched::Auto)
                .map(|(ctx, _, _)| ctx)
                .map_err(|e| format!("{e:#}"))
        }
    };
    let cuda: Result<Arc<Context>, String> = if need >= Needs::Context {
        match &gl_cuda {
            Ok(c) => Ok(c.clone()),
            Err(_) => plain_context().map_err(|e| format!("{e:#}")),
        }
    } else {
        Err("not needed".into())
    };
    let gl = match (&headless, &gl_cuda) {
        (Some(Ok(h)), Ok(c)) => Ok((h.gl(), c.clone())),
        (_, Err(e)) => Err(e.clone()),
        _ => Err("no GL context".into()),
    };
    let gl_owner = match &headless {
        Some(Ok(h)) => Some(h),
        _ => None,
    };
    let env = LabEnv { driver: Ok(driver), cuda, gl, gl_owner };
    let out = cases.iter().map(|c| run_case(c, &env)).collect();
    drop(env);
    drop(gl_cuda);
    drop(headless);
    out
}

fn plain_context() -> anyhow::Result<Arc<Context>> {
    let api = crate::libraries::init(interop::StreamSemantics::Legacy)?;
    crate::trace::attach_active(&api);
    Ok(Context::primary(&Device::get(&api, 0)?, SchedFlag::Auto)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_case_expects_something() {
        for (i, c) in CASES.iter().enumerate() {
            assert!(!c.expected.is_empty(), "{}", c.name);
            assert!(CASES[i + 1..].iter().all(|d| d.name != c.name), "duplicate {}", c.name);
            assert!(find(c.name).is_ok());
        }
        assert!(find("nosuch").unwrap_err().to_string().contains("map-already-mapped"));
    }

    #[test]
    fn unavailable_is_never_ok_and_carries_the_reason() {
        let o = Outcome::unavailable(&CASES[0], "no driver here");
        assert!(!o.ok && o.is_unavailable());
        assert_eq!(o.got_text, "unavailable: no driver here");
        assert_eq!(o.expected, ["CUDA_ERROR_ALREADY_MAPPED"]);
    }

    #[test]
    fn every_explanation_names_its_documented_result() {
        for c in CASES {
            let e = c.explanation;
            for x in c.expected {
                // A symbolStatus is named as cuda.h spells it (CU_GET_PROC_ADDRESS_…), a silent
                // answer by its Data name.
                let name = x.name();
                assert!(e.contains(&name), "{}: the explanation does not name {name}", c.name);
            }
            assert!(e.contains("Reference ("), "{}: no reference statement (\"Reference (<function>): …\")", c.name);
            assert!(e.contains("H200:"), "{}: no statement of what the H200 showed (\"H200: …\")", c.name);
            let (reference, h200) = (e.find("Reference (").unwrap_or(0), e.find("H200:").unwrap_or(0));
            assert!(reference < h200, "{}: the reference comes first, then the H200", c.name);
            // One H200 statement per case, so a GPU run can fill in "not yet recorded" in one place.
            assert_eq!(e.matches("H200:").count(), 1, "{}: one \"H200:\" statement", c.name);
            assert!(!c.fix.is_empty(), "{}: no fix", c.name);
        }
        // The old mistake: cuGetProcAddress succeeds (CUDA_SUCCESS + NULL), it does not return NOT_FOUND.
        let old = find("proc-address-old-version").expect("case");
        assert!(!old.explanation.contains("CUDA_ERROR_NOT_FOUND"), "{}", old.explanation);
        assert!(old.explanation.contains("CUDA_SUCCESS") && old.explanation.contains("NULL"), "{}", old.explanation);
    }

    #[test]
    fn the_source_keeps_each_not_yet_recorded_on_one_line() {
        // The lead fills in GPU results by grepping the source for this phrase: one line per case.
        let src = [include_str!("lab/cases.rs"), include_str!("lab/image_cases.rs")];
        let lines = src.iter().flat_map(|s| s.lines()).filter(|l| l.contains("H200: not yet recorded.")).count();
        let cases = CASES.iter().filter(|c| c.explanation.contains("H200: not yet recorded.")).count();
        assert_eq!(lines, cases, "a \"H200: not yet recorded.\" split over two source lines");
    }

    #[test]
    fn expected_names() {
        let c = find("proc-address-old-version").expect("case");
        assert_eq!(c.expected[0].name(), "CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT");
        assert_eq!(c.expected[0].code(), 2);
        let o = Outcome::new(c, Some(2), status_name(2), String::new(), None);
        assert!(o.ok);
        let o = Outcome::new(c, Some(1), status_name(1), String::new(), None);
        assert!(!o.ok);
    }

    #[test]
    fn codes_of_different_kinds_never_match() {
        // ctx-create-versions accepts symbolStatus SUCCESS (0) and CUresult INVALID_VALUE (1):
        // CUDA_SUCCESS (0) and SYMBOL_NOT_FOUND (1) are other answers.
        let c = find("ctx-create-versions").expect("case");
        assert!(Outcome::new(c, Some(0), status_name(0), String::new(), None).ok);
        assert!(Outcome::new(c, Some(1), "CUDA_ERROR_INVALID_VALUE".into(), String::new(), None).ok);
        assert!(!Outcome::new(c, Some(0), "CUDA_SUCCESS".into(), String::new(), None).ok);
        assert!(!Outcome::new(c, Some(1), status_name(1), String::new(), None).ok);
        // A silent answer is judged by its name, not its code (0, like CUDA_SUCCESS).
        let s = find("write-read-only-registered").expect("case");
        assert!(Outcome::new(s, Some(0), Data::Stale.name().into(), String::new(), None).ok);
        assert!(!Outcome::new(s, Some(0), Data::Garbled.name().into(), String::new(), None).ok);
        assert!(!Outcome::new(s, Some(0), "CUDA_SUCCESS".into(), String::new(), None).ok);
        assert!(Outcome::new(s, Some(0), Data::Current.name().into(), String::new(), None).is_silent());
    }

    #[test]
    fn data_is_classified_word_by_word() {
        assert_eq!(Data::classify(&[7, 7, 7], 0, 7), Data::Current);
        assert_eq!(Data::classify(&[0, 0], 0, 7), Data::Stale);
        assert_eq!(Data::classify(&[0, 7], 0, 7), Data::Garbled);
        assert_eq!(Data::classify(&[3], 0, 7), Data::Garbled);
        assert_eq!(Data::classify(&[], 0, 7), Data::Garbled);
        for d in Data::ALL {
            assert_eq!(Data::from_name(d.name()), Some(d));
            assert_eq!(kind_of(d.name()), Kind::Silent);
        }
    }

    #[test]
    fn silent_cases_expect_only_silent_answers_and_need_gl() {
        for c in CASES.iter().filter(|c| c.expected.iter().any(|e| matches!(e, Expect::Silent(_)))) {
            assert!(c.expected.iter().all(|e| matches!(e, Expect::Silent(_))), "{}", c.name);
            assert_eq!(c.needs, Needs::GlInterop, "{}", c.name);
        }
    }
}
