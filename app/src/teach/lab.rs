//! The mistake lab: `nbody-interop lab NAME` and the overlay's lab buttons. Each case makes one
//! classic mistake of the resource-mapping workflow (or of entry-point lookup) that the driver
//! reports safely, and shows the driver's real answer (code, name and text) with a plain
//! explanation and the fix.
//!
//! Several mistakes cannot be written with `interop`'s safe types (a [`interop::Mapping`]
//! borrows its resources, so a second map or a pointer after the unmap does not compile); those
//! cases call the raw [`interop::Api`] methods, which is the point of the lesson. Every case
//! works on its own scratch resources (a GL buffer of 256 bytes, a module, a stream, events),
//! never on the demo's, and releases them before it returns, so the demo goes on normally.
//!
//! The expected codes are kept in one table, [`CASES`]; [`super::replay`] prints the results (the
//! list, the `--quiz`, and the `--replay FILE.jsonl` of recorded results without a GPU).

use std::ffi::c_void;
use std::sync::Arc;

use anyhow::bail;
use interop::sys::{
    event_flags, register_flags, stream_flags, CUdeviceptr, CUdriverProcAddressQueryResult, CuResult,
    CU_GET_PROC_ADDRESS_LEGACY_STREAM,
};
use interop::{map_resources, Context, Device, Driver, Error, Event, GraphicsResource, Module, SchedFlag, Stream, SymbolStatus};
use serde::Serialize;

use crate::gfx::gl::Gl;

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

/// One acceptable answer of the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A `CUresult`.
    Cu(CuResult),
    /// A `symbolStatus` of `cuGetProcAddress_v2` (`CUdriverProcAddressQueryResult`).
    Status(CUdriverProcAddressQueryResult),
}

impl Expect {
    /// Its value.
    pub fn code(self) -> i32 {
        match self {
            Expect::Cu(c) => c.0,
            Expect::Status(s) => s.0,
        }
    }
    /// Its `cuda.h` name.
    pub fn name(self) -> String {
        match self {
            Expect::Cu(c) => crate::trace::result_name(c),
            Expect::Status(s) => status_name(s.0),
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
    /// Acceptable answers (more than one where drivers differ; the GPU run says which comes).
    pub expected: &'static [Expect],
    /// What happened and why.
    pub explanation: &'static str,
    /// What to do instead.
    pub fix: &'static str,
}

const NOT_MAPPED: &[Expect] = &[Expect::Cu(CuResult::CUDA_ERROR_NOT_MAPPED)];
/// Codes seen on driver 580 (H200, 2026-11-30): buffer name 0 gives CUDA_ERROR_INVALID_VALUE, a
/// deleted buffer CUDA_ERROR_INVALID_HANDLE.
const BUFFER_ZERO: &[Expect] = &[Expect::Cu(CuResult::CUDA_ERROR_INVALID_VALUE)];
const DELETED_BUFFER: &[Expect] = &[Expect::Cu(CuResult::CUDA_ERROR_INVALID_HANDLE)];

/// Every case, with its expected codes (the one table). Each explanation says what happens and
/// why, then, apart, what the driver API reference says (quoted from `cuda.h`/`cudaGL.h`, with
/// the function named) and what the H200 showed (driver 580.159, 2026-11-30, `lab.jsonl`).
pub const CASES: &[Case] = &[
    Case {
        name: "map-already-mapped",
        call: "cuGraphicsMapResources on a resource that is already mapped",
        needs: Needs::GlInterop,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_ALREADY_MAPPED)],
        explanation: "A registered buffer belongs to GL or to CUDA, never both: the map hands it to CUDA until the \
                      unmap, and a second map before that is refused. interop::map_resources makes this mistake a \
                      compile error (the Mapping borrows the resources mutably), so the lab calls the raw \
                      Api::cuGraphicsMapResources to show the driver's answer. Reference (cuGraphicsMapResources): \
                      \"If any of resources are presently mapped for access by CUDA then CUDA_ERROR_ALREADY_MAPPED \
                      is returned.\" H200: 208 CUDA_ERROR_ALREADY_MAPPED.",
        fix: "Map once per frame, unmap (drop the Mapping) before the next map, and map all the frame's resources \
              in one call.",
    },
    Case {
        name: "pointer-of-unmapped",
        call: "cuGraphicsResourceGetMappedPointer on a registered resource that is not mapped",
        needs: Needs::GlInterop,
        expected: NOT_MAPPED,
        explanation: "A GL buffer has a CUDA device address only between map and unmap. interop hands out a \
                      MappedPtr only from a live Mapping, borrowing it, so this cannot be written with the safe \
                      types; the lab calls the raw Api method. Reference (cuGraphicsResourceGetMappedPointer): \"If \
                      resource is not mapped then CUDA_ERROR_NOT_MAPPED is returned\", and \"The value set in \
                      pPointer may change every time that resource is mapped.\" H200: 211 CUDA_ERROR_NOT_MAPPED.",
        fix: "Map first, then ask for the pointer after every map; never keep a mapped pointer across frames.",
    },
    Case {
        name: "unmap-twice",
        call: "cuGraphicsUnmapResources on a resource that was already unmapped",
        needs: Needs::GlInterop,
        expected: NOT_MAPPED,
        explanation: "Unmapping gives the buffer back to GL; a second unmap finds nothing mapped. Mapping::unmap \
                      consumes the guard and its Drop unmaps only if that did not happen, so the safe types unmap \
                      exactly once; the lab calls the raw Api method a second time. Reference \
                      (cuGraphicsUnmapResources): \"If any of resources are not presently mapped for access by CUDA \
                      then CUDA_ERROR_NOT_MAPPED is returned.\" H200: 211 CUDA_ERROR_NOT_MAPPED.",
        fix: "Unmap exactly once per map: let the guard do it (Mapping::unmap to see the error, or drop).",
    },
    Case {
        name: "register-buffer-zero",
        call: "cuGraphicsGLRegisterBuffer(buffer = 0)",
        needs: Needs::GlInterop,
        expected: BUFFER_ZERO,
        explanation: "GL name 0 means \"no buffer\", and the driver refuses it. The safe \
                      GraphicsResource::register_gl_buffer takes any GLuint, so this mistake is possible with it; it \
                      returns the driver's error. Reference (cuGraphicsGLRegisterBuffer): the returns listed are \
                      CUDA_SUCCESS, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_ALREADY_MAPPED, CUDA_ERROR_INVALID_CONTEXT \
                      and CUDA_ERROR_OPERATING_SYSTEM; it does not say what a name that is no buffer gets. H200: 1 \
                      CUDA_ERROR_INVALID_VALUE, a code that list does not name (another driver may answer \
                      differently).",
        fix: "Register a name from glGenBuffers whose storage exists (glBufferData) in the GL context that is \
              current, on a CUDA device that shares it (cuGLGetDevices).",
    },
    Case {
        name: "register-deleted-buffer",
        call: "cuGraphicsGLRegisterBuffer of a buffer deleted with glDeleteBuffers",
        needs: Needs::GlInterop,
        expected: DELETED_BUFFER,
        explanation: "After glDeleteBuffers the name is free again and names no buffer object, and the driver \
                      refuses it. The mirror-image mistake — deleting a buffer that is still registered — is why \
                      teardown unregisters before GL deletes its buffers. Reference (cuGraphicsGLRegisterBuffer): \
                      CUDA_ERROR_INVALID_HANDLE is among the listed returns, but the reference does not say which \
                      code a deleted name gets. H200: 400 CUDA_ERROR_INVALID_HANDLE (name 0 got \
                      CUDA_ERROR_INVALID_VALUE instead).",
        fix: "Register after glGenBuffers + glBufferData; unregister (drop the GraphicsResource) before \
              glDeleteBuffers, and register again after re-creating the buffer.",
    },
    Case {
        name: "proc-address-old-version",
        call: "cuGetProcAddress(\"cuMemAllocAsync\", 11010, CU_GET_PROC_ADDRESS_LEGACY_STREAM)",
        needs: Needs::Driver,
        expected: &[Expect::Status(CUdriverProcAddressQueryResult::VERSION_NOT_SUFFICIENT)],
        explanation: "cuMemAllocAsync first appeared in CUDA 11.2 (its typedef is PFN_cuMemAllocAsync_v11020). \
                      cuGetProcAddress returns the newest variant whose version is ≤ the one asked; asking below \
                      the function's first version finds none. The call itself succeeds: the answer is in the null \
                      pointer and symbolStatus. Reference (cuGetProcAddress): \"The API will return CUDA_SUCCESS and \
                      set the returned pfn to NULL if [...] no ABI compatible driver function exists for the \
                      specified cudaVersion\", with symbolStatus CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, \"The \
                      requested symbol was found but is not supported by cudaVersion specified\". H200: CUDA_SUCCESS, \
                      a null pointer and symbolStatus 2 (VERSION_NOT_SUFFICIENT); asked at 11020 it is found. This \
                      table once asked cuLaunchKernel at 4000 with per-thread flags and got the same answer: the \
                      _ptsz variants start at 7000 (interop::entry::PER_THREAD_VERSION).",
        fix: "Ask with the version of the PFN_<name>_v<version> typedef your signature copies (cudaTypedefs.h) — \
              never older than the function, never above the driver's version (the reference: \
              CUDA_ERROR_INVALID_VALUE; the bug of passing a newer header's CUDA_VERSION), and never the driver's \
              version itself (which silently returns a newer signature: cuCtxCreate has 3020, 11040 and 12050).",
    },
    Case {
        name: "proc-address-misspelt",
        call: "cuGetProcAddress(\"cuLaunchKernal\", 4000, CU_GET_PROC_ADDRESS_LEGACY_STREAM)",
        needs: Needs::Driver,
        expected: &[Expect::Status(CUdriverProcAddressQueryResult::SYMBOL_NOT_FOUND)],
        explanation: "The driver has no function of that name. As for a too-old version, the call succeeds and the \
                      answer is a null pointer with a symbolStatus; calling that pointer would crash, so interop \
                      stores each entry as an Option and refuses to call a missing one. Reference \
                      (cuGetProcAddress): CUDA_SUCCESS and pfn set to NULL \"if the driver symbol is invalid\", with \
                      symbolStatus CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, \"The requested symbol was not found\". \
                      H200: CUDA_SUCCESS, a null pointer and symbolStatus 1 (SYMBOL_NOT_FOUND).",
        fix: "Take names from one table checked against the headers (tests/interop_headers.rs), and turn a null \
              pointer into an error that names the function, its version and the status.",
    },
    Case {
        name: "ptx-version-too-new",
        call: "cuModuleLoadDataEx of PTX with `.version 99.0`",
        needs: Needs::Context,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION)],
        explanation: "PTX is compiled by the driver's JIT at load time, and the JIT refuses a PTX ISA version newer \
                      than it knows; the JIT error log says why. It is the classic symptom of PTX built with a newer \
                      toolkit than the driver. Reference (cuModuleLoadDataEx): CUDA_ERROR_UNSUPPORTED_PTX_VERSION is \
                      among its returns, and that code \"indicates that the provided PTX was compiled with an \
                      unsupported toolchain\". H200: 222 CUDA_ERROR_UNSUPPORTED_PTX_VERSION, JIT log \"Unsupported \
                      .version 99.0; current version is '9.0'\" (driver 580, CUDA 13.0, knows PTX ISA 9.0).",
        fix: "Generate PTX with a toolkit no newer than the oldest driver you support (kernels/nbody.ptx is ISA 7.8), \
              or ship a cubin/fatbin for the target GPUs; always print the JIT error log.",
    },
    Case {
        name: "elapsed-time-not-ready",
        call: "cuEventElapsedTime(start, end) before `end` has completed (a 100 ms spin kernel between them)",
        needs: Needs::Context,
        expected: &[Expect::Cu(CuResult::CUDA_ERROR_NOT_READY)],
        explanation: "An event gets its GPU timestamp when the stream reaches it; until then there is no time to \
                      subtract — not a failure of the work. interop's Event::elapsed_ms turns this code into \
                      Ok(None), so the lab calls the raw Api method to show the real code. Reference \
                      (cuEventElapsedTime): \"If cuEventRecord() has been called on both events but one or both of \
                      them has not yet been completed [...], CUDA_ERROR_NOT_READY is returned.\" H200: 600 \
                      CUDA_ERROR_NOT_READY; after cuEventSynchronize(end) the elapsed time was 100.0 ms.",
        fix: "Wait for the end event (cuEventSynchronize, or poll cuEventQuery) before cuEventElapsedTime; in a frame \
              loop read the events of an earlier frame instead of stalling.",
    },
];

/// The case named `name`.
///
/// # Errors
/// No such case (the message lists them).
pub fn find(name: &str) -> anyhow::Result<&'static Case> {
    match CASES.iter().find(|c| c.name == name) {
        Some(c) => Ok(c),
        None => bail!("unknown lab case `{name}`; cases: {} (or `all`)", CASES.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")),
    }
}

/// What one case produced (a line of `lab --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Case name.
    pub case: String,
    /// The mistaken call.
    pub call: String,
    /// Acceptable codes, by name.
    pub expected: Vec<String>,
    /// The code the driver returned (`None` when the case could not run).
    pub got_code: Option<i32>,
    /// Its name (`cuGetErrorName`, or the symbolStatus name), or `"unavailable"` / `"setup failed"`.
    pub got_name: String,
    /// Its text (`cuGetErrorString`), or why the case could not run (`"unavailable: …"`).
    pub got_text: String,
    /// Whether the driver gave one of the expected codes.
    pub ok: bool,
    /// What happened and why.
    pub explanation: String,
    /// What to do instead.
    pub fix: String,
    /// More of the driver's answer (the JIT log, `cuGetProcAddress`'s own return value, …).
    pub detail: Option<String>,
}

impl Outcome {
    /// The outcome of `c` when the driver answered `got_code` (`None`: the case did not run);
    /// `ok` when that is one of the expected codes.
    pub fn new(c: &Case, got_code: Option<i32>, got_name: String, got_text: String, detail: Option<String>) -> Outcome {
        let ok = got_code.is_some_and(|g| c.expected.iter().any(|e| e.code() == g))
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
}

/// What a case's driver call returned.
struct Got {
    code: i32,
    name: String,
    text: String,
    detail: Option<String>,
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
        Ok(()) => Ok(Got {
            code: 0,
            name: "CUDA_SUCCESS".into(),
            text: "the driver accepted the call".into(),
            detail: None,
        }),
        Err(Error::Driver { code, name, text, .. }) => Ok(Got { code: code.0, name, text, detail: None }),
        Err(Error::Jit { code, name, text, log }) => Ok(Got { code: code.0, name, text, detail: Some(format!("JIT error log: {log}")) }),
        Err(e) => Err(SetupFailed(e.to_string())),
    }
}

/// Runs `case` against `env`. Never panics; a case that cannot run is reported, not raised.
pub fn run_case(case: &Case, env: &LabEnv<'_>) -> Outcome {
    let r = match case.needs {
        Needs::Driver => match &env.driver {
            Ok(d) => proc_address_case(case, d),
            Err(e) => return Outcome::unavailable(case, e),
        },
        Needs::Context => match &env.cuda {
            Ok(ctx) => context_case(case, ctx),
            Err(e) => return Outcome::unavailable(case, e),
        },
        Needs::GlInterop => match &env.gl {
            Ok((gl, ctx)) => gl_case(case, *gl, ctx),
            Err(e) => return Outcome::unavailable(case, e),
        },
    };
    match r {
        Ok(g) => Outcome::new(case, Some(g.code), g.name, g.text, g.detail),
        Err(SetupFailed(e)) => Outcome::new(case, None, "setup failed".into(), e, None),
    }
}

fn proc_address_case(case: &Case, d: &Driver) -> Result<Got, SetupFailed> {
    let (symbol, version) = match case.name {
        "proc-address-old-version" => ("cuMemAllocAsync", 11010),
        "proc-address-misspelt" => ("cuLaunchKernal", 4000),
        other => return Err(SetupFailed(format!("no driver-only case {other}"))),
    };
    let q = d.get_proc_address(symbol, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, symbol);
    let mut detail = format!(
        "cuGetProcAddress returned {} and {} (bootstrap {:?}, driver CUDA {})",
        crate::trace::result_name(q.result),
        if q.address == 0 { "a null pointer".to_string() } else { format!("address {:#x}", q.address) },
        d.bootstrap(),
        interop::entry::cuda_version_string(d.version())
    );
    if case.name == "proc-address-old-version" {
        let ok = d.get_proc_address(symbol, 11020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, symbol);
        detail.push_str(&format!("; asked at 11020 (its first version) it is {}", ok.status));
    }
    let (code, name, text) = match q.status {
        SymbolStatus::Found => (0, status_name(0), "found: the driver returned a function pointer".to_string()),
        SymbolStatus::SymbolNotFound => (1, status_name(1), "the driver has no symbol of this name".to_string()),
        SymbolStatus::VersionNotSufficient => {
            (2, status_name(2), "the symbol exists, but only in versions newer than the one asked for".to_string())
        }
        SymbolStatus::NotFoundUnknownReason => (
            q.result.0,
            crate::trace::result_name(q.result),
            "not found; this driver's cuGetProcAddress (before CUDA 12.0) gives no symbolStatus".to_string(),
        ),
        SymbolStatus::Other(s) => (s, status_name(s), "an unknown symbolStatus".to_string()),
    };
    Ok(Got { code, name, text, detail: Some(detail) })
}

/// PTX whose `.version` no driver knows.
pub const PTX_TOO_NEW: &str = ".version 99.0\n.target sm_52\n.address_size 64\n\n.visible .entry lab_empty()\n{\n\tret;\n}\n";

/// A kernel that spins for `ns` nanoseconds of `%globaltimer` (one thread is enough).
pub const PTX_SPIN: &str = r".version 6.0
.target sm_52
.address_size 64

.visible .entry lab_spin(
	.param .u64 lab_spin_ns
)
{
	.reg .pred 	%p<2>;
	.reg .b64 	%rd<5>;

	ld.param.u64 	%rd1, [lab_spin_ns];
	mov.u64 	%rd2, %globaltimer;
$L_spin:
	mov.u64 	%rd3, %globaltimer;
	sub.s64 	%rd4, %rd3, %rd2;
	setp.lt.u64 	%p1, %rd4, %rd1;
	@%p1 bra 	$L_spin;
	ret;
}
";

/// How long the spin kernel of `elapsed-time-not-ready` runs, ns.
pub const SPIN_NS: u64 = 100_000_000;

fn context_case(case: &Case, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    ctx.make_current()?;
    let api = ctx.api();
    match case.name {
        "ptx-version-too-new" => match Module::from_ptx(ctx, PTX_TOO_NEW.as_bytes()) {
            Ok(_) => Ok(Got { code: 0, name: "CUDA_SUCCESS".into(), text: "the driver loaded the PTX".into(), detail: None }),
            Err(e) => got_from(Err(e)),
        },
        "elapsed-time-not-ready" => {
            let module = Module::from_ptx(ctx, PTX_SPIN.as_bytes())?;
            let spin = module.function("lab_spin")?;
            let stream = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
            let start = Event::new(ctx, event_flags::DEFAULT)?;
            let end = Event::new(ctx, event_flags::DEFAULT)?;
            start.record(&stream)?;
            let mut ns = SPIN_NS;
            let mut params: [*mut c_void; 1] = [(&mut ns as *mut u64).cast()];
            // SAFETY: lab_spin takes one .u64 parameter and `params` points to a live u64; the
            // kernel touches no memory.
            unsafe { spin.launch((1, 1, 1), (1, 1, 1), 0, &stream, &mut params) }?;
            end.record(&stream)?;
            let mut ms = 0f32;
            // SAFETY: writes one float; both events are live and recorded. Asking before `end`
            // completed is the mistake; the driver checks and answers without writing.
            let r = unsafe { api.cuEventElapsedTime(&mut ms, start.raw(), end.raw()) };
            let mut g = got_from(r)?;
            end.synchronize()?;
            let after = Event::elapsed_ms(&start, &end)?;
            g.detail = Some(format!(
                "after cuEventSynchronize(end) the elapsed time is {}",
                after.map_or_else(|| "still not ready".to_string(), |t| format!("{t:.1} ms"))
            ));
            Ok(g)
        }
        other => Err(SetupFailed(format!("no context case {other}"))),
    }
}

/// A GL buffer of 256 bytes for one case; deleted on drop (after the case's resources, which
/// are declared after it and so dropped first).
struct Scratch<'a> {
    gl: Gl<'a>,
    buffer: Option<glow::NativeBuffer>,
}

impl<'a> Scratch<'a> {
    fn new(gl: Gl<'a>) -> Result<Scratch<'a>, SetupFailed> {
        let g = gl;
        let b = g.create_buffer().map_err(|e| SetupFailed(format!("glGenBuffers: {e}")))?;
        g.bind_buffer(glow::ARRAY_BUFFER, Some(b));
        g.buffer_data_u8_slice(glow::ARRAY_BUFFER, &[0u8; 256], glow::DYNAMIC_DRAW);
        g.bind_buffer(glow::ARRAY_BUFFER, None);
        Ok(Scratch { gl, buffer: Some(b) })
    }
    fn name(&self) -> u32 {
        self.buffer.map_or(0, |b| b.0.get())
    }
    /// Deletes the buffer now and returns the (now free) name.
    fn delete(mut self) -> u32 {
        let n = self.name();
        if let Some(b) = self.buffer.take() {
            self.gl.delete_buffer(b);
        }
        n
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.buffer.take() {
            self.gl.delete_buffer(b);
        }
    }
}

fn gl_case(case: &Case, gl: Gl<'_>, ctx: &Arc<Context>) -> Result<Got, SetupFailed> {
    ctx.make_current()?;
    let api = ctx.api();
    let flags = register_flags::NONE;
    match case.name {
        "register-buffer-zero" => match GraphicsResource::register_gl_buffer(ctx, 0, flags) {
            Ok(r) => {
                drop(r);
                got_from(Ok(()))
            }
            Err(e) => got_from(Err(e)),
        },
        "register-deleted-buffer" => {
            let name = Scratch::new(gl)?.delete();
            match GraphicsResource::register_gl_buffer(ctx, name, flags) {
                Ok(r) => {
                    drop(r);
                    got_from(Ok(()))
                }
                Err(e) => got_from(Err(e)),
            }
        }
        "map-already-mapped" | "pointer-of-unmapped" | "unmap-twice" => {
            let buffer = Scratch::new(gl)?;
            let stream = Stream::create(ctx, stream_flags::NON_BLOCKING, 0)?;
            let mut res = vec![GraphicsResource::register_gl_buffer(ctx, buffer.name(), flags)?];
            let mut raw = [res[0].raw()];
            let r = match case.name {
                "map-already-mapped" => {
                    let mapping = map_resources(&mut res, &stream)?;
                    // SAFETY: `raw` holds one registered resource of this context (`res` keeps it
                    // registered) and the stream is live. It is mapped already — the mistake; the
                    // driver checks the state and refuses without changing it.
                    let r = unsafe { api.cuGraphicsMapResources(1, raw.as_mut_ptr(), stream.raw()) };
                    if r.is_ok() {
                        // SAFETY: a driver that accepted the second map gets the matching unmap.
                        drop(unsafe { api.cuGraphicsUnmapResources(1, raw.as_mut_ptr(), stream.raw()) });
                    }
                    mapping.unmap()?;
                    r
                }
                "pointer-of-unmapped" => {
                    let (mut ptr, mut size): (CUdeviceptr, usize) = (0, 0);
                    // SAFETY: writes two values; the resource is registered but not mapped — the
                    // mistake; the driver checks and answers without writing a usable pointer.
                    unsafe { api.cuGraphicsResourceGetMappedPointer(&mut ptr, &mut size, raw[0]) }
                }
                _ => {
                    map_resources(&mut res, &stream)?.unmap()?;
                    // SAFETY: `raw` holds one registered resource and the stream is live; it was
                    // unmapped already — the mistake; the driver checks and refuses.
                    unsafe { api.cuGraphicsUnmapResources(1, raw.as_mut_ptr(), stream.raw()) }
                }
            };
            stream.synchronize()?;
            let g = got_from(r);
            drop(res); // unregister before the scratch buffer is deleted
            drop(buffer);
            g
        }
        other => Err(SetupFailed(format!("no GL case {other}"))),
    }
}

/// Runs a case from the overlay against the live contexts (`cuda`: the CUDA backend's context,
/// which shares `gl`; `None` with the CPU backend). Uses scratch resources only.
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
    let no_cuda = "needs the CUDA backend (this run uses the CPU backend)".to_string();
    let env = LabEnv {
        driver: match cuda {
            Some(c) => Ok(c.api().driver().clone()),
            None => Driver::open().map_err(|e| e.to_string()),
        },
        cuda: cuda.cloned().ok_or_else(|| no_cuda.clone()),
        gl: cuda.map(|c| (gl, c.clone())).ok_or(no_cuda),
    };
    run_case(case, &env)
}

/// Runs `cases` headless: the driver, then (only if a case needs it) a CUDA context, and a
/// headless GL context with a CUDA context that shares it.
pub fn run_headless(cases: &[&Case]) -> Vec<Outcome> {
    let driver = match Driver::open() {
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
        Some(Ok(h)) => crate::cuda::session::open_for_gl(&h.info, crate::cuda::settings::StreamKind::Legacy, 0, crate::cuda::settings::CtxSched::Auto)
            .map(|(ctx, _, _)| ctx)
            .map_err(|e| format!("{e:#}")),
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
    let env = LabEnv { driver: Ok(driver), cuda, gl };
    let out = cases.iter().map(|c| run_case(c, &env)).collect();
    drop(env);
    drop(gl_cuda);
    drop(headless);
    out
}

fn plain_context() -> anyhow::Result<Arc<Context>> {
    let api = interop::init(interop::StreamSemantics::Legacy)?;
    crate::trace::attach_active(&api);
    Ok(Context::primary(&Device::get(&api, 0)?, SchedFlag::Auto)?)
}

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
}

/// `nbody-interop lab [NAME|all] [--json] [--quiz] [--replay FILE.jsonl]`: without `name` the
/// cases are listed; otherwise they run headless (or, with `replay`, the recorded results are
/// shown: [`super::replay::replay`]) and are printed as text, JSON lines, or quiz answers.
///
/// # Errors
/// An unknown case name; a case that could not run (the reason is in the message) or did not
/// produce an expected code; stdout cannot be written or stdin (a quiz's predictions) read; with
/// `replay`, a file that cannot be read or parsed or lacks the case.
pub fn run(opts: &LabOptions) -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    let mut out = std::io::stdout().lock();
    let stdin = std::io::stdin();
    let ask = opts.quiz && !opts.json && stdin.is_terminal();
    let mut lock = stdin.lock();
    let input = ask.then_some(&mut lock as &mut dyn std::io::BufRead);
    if let Some(file) = &opts.replay {
        return super::replay::replay(&mut out, file, opts.name.as_deref(), opts.json, opts.quiz, input);
    }
    let Some(name) = opts.name.as_deref() else {
        return super::replay::list(&mut out, opts.json, opts.quiz);
    };
    let cases: Vec<&Case> = if name == "all" { CASES.iter().collect() } else { vec![find(name)?] };
    let predictions = if opts.quiz && !opts.json {
        let calls: Vec<(&str, &str)> = cases.iter().map(|c| (c.name, c.call)).collect();
        Some(super::replay::ask(&mut out, &calls, input)?)
    } else {
        None
    };
    let outcomes = run_headless(&cases);
    super::replay::show(&mut out, &outcomes, opts.json, predictions.as_deref(), false)?;
    super::replay::verdict(&outcomes, None, opts.quiz)
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
                // A symbolStatus is named as cuda.h spells it (CU_GET_PROC_ADDRESS_…).
                let name = x.name();
                assert!(e.contains(&name), "{}: the explanation does not name {name}", c.name);
            }
            assert!(e.contains("Reference ("), "{}: no reference statement (\"Reference (<function>): …\")", c.name);
            assert!(e.contains("H200:"), "{}: no statement of what the H200 showed (\"H200: …\")", c.name);
            let (reference, h200) = (e.find("Reference (").unwrap_or(0), e.find("H200:").unwrap_or(0));
            assert!(reference < h200, "{}: the reference comes first, then the H200", c.name);
        }
        // The old mistake: cuGetProcAddress succeeds (CUDA_SUCCESS + NULL), it does not return NOT_FOUND.
        let old = find("proc-address-old-version").expect("case");
        assert!(!old.explanation.contains("CUDA_ERROR_NOT_FOUND"), "{}", old.explanation);
        assert!(old.explanation.contains("CUDA_SUCCESS") && old.explanation.contains("NULL"), "{}", old.explanation);
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
}
