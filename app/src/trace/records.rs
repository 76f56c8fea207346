//! What the recorder keeps: one driver or GL call ([`Call`]) with its workflow step, the
//! timeline tracks and spans, and calls grouped as the Workflow panel shows them.

use interop::driver::TraceRecord;
use serde::Serialize;

/// Calls kept in memory for the frame in progress; older ones of a frame that never ends are
/// dropped from the panel (the `--trace` file still gets every call).
pub const MAX_CALLS_PER_FRAME: usize = 4096;

/// The step of the resource-mapping workflow a driver call belongs to (buffers and images: the
/// image workflow's arrays and objects have steps of their own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// `cuGraphicsGLRegisterBuffer` (once, before the first frame or after a reset) and
    /// `cuGraphicsGLRegisterImage` (the density view's textures: once, and after a resize).
    Register,
    /// `cuGraphicsResourceSetMapFlags` and `cuGraphicsMapResources`.
    Map,
    /// `cuGraphicsResourceGetMappedPointer`.
    GetPointer,
    /// `cuGraphicsSubResourceGetMappedArray` (an image's CUDA array) and `cuArrayGetDescriptor`.
    GetArray,
    /// `cuSurfObjectCreate`, `cuTexObjectCreate`: the objects kernels reach an array through.
    MakeObjects,
    /// `cuSurfObjectDestroy`, `cuTexObjectDestroy` (before the unmap).
    DestroyObjects,
    /// `cuLaunchKernel`.
    Launch,
    /// `cuGraphicsUnmapResources`.
    Unmap,
    /// The GL draw of the bodies (not a driver call; timed by a GL timer query).
    Draw,
    /// `cuGraphicsUnregisterResource`.
    Unregister,
    /// CUDA events around the steps (`cuEventRecord`, `cuEventSynchronize`, `cuEventElapsedTime`).
    Timing,
    /// Anything else (context, module, memory, stream calls).
    Other,
}

impl Step {
    /// The step of the driver function `name`.
    pub fn of(name: &str) -> Step {
        match name {
            "cuGraphicsGLRegisterBuffer" | "cuGraphicsGLRegisterImage" => Step::Register,
            "cuGraphicsResourceSetMapFlags" | "cuGraphicsMapResources" => Step::Map,
            "cuGraphicsResourceGetMappedPointer" => Step::GetPointer,
            "cuGraphicsSubResourceGetMappedArray" | "cuArrayGetDescriptor" => Step::GetArray,
            "cuSurfObjectCreate" | "cuTexObjectCreate" => Step::MakeObjects,
            "cuSurfObjectDestroy" | "cuTexObjectDestroy" => Step::DestroyObjects,
            "cuLaunchKernel" => Step::Launch,
            "cuGraphicsUnmapResources" => Step::Unmap,
            "cuGraphicsUnregisterResource" => Step::Unregister,
            n if n.starts_with("cuEvent") => Step::Timing,
            _ => Step::Other,
        }
    }

    /// Short label for the panel.
    pub fn label(self) -> &'static str {
        match self {
            Step::Register => "register",
            Step::Map => "map",
            Step::GetPointer => "get pointer",
            Step::GetArray => "get array",
            Step::MakeObjects => "make objects",
            Step::DestroyObjects => "destroy objects",
            Step::Launch => "launch",
            Step::Unmap => "unmap",
            Step::Draw => "draw (GL)",
            Step::Unregister => "unregister",
            Step::Timing => "events",
            Step::Other => "other",
        }
    }
}

/// One traced call (a line of the `--trace` file).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    /// Sequence number over the whole run (0-based).
    pub seq: u64,
    /// Frame index, or `None` outside a frame (setup, teardown).
    pub frame: Option<u64>,
    /// Workflow step.
    pub step: Step,
    /// `"cuda"` for a driver call, `"gl"` for the GL draw.
    pub api: &'static str,
    /// C name (`cuGraphicsMapResources`, `glDrawArrays`).
    pub name: String,
    /// ABI version the function was resolved with (0 for GL).
    pub version: i32,
    /// Library export resolved (`cuLaunchKernel_ptsz` under per-thread semantics).
    pub export: String,
    /// Address called, hex.
    pub address: String,
    /// Arguments in short form.
    pub args: String,
    /// What the call returned through its output parameters (`p_dev_ptr→0x7f…
    /// p_size→1048576`), after a successful call; empty otherwise
    /// ([`interop::driver::TraceRecord::returned`]). The pointer of each map shows here.
    pub returned: String,
    /// A query that changes nothing (attributes, priorities, the current context): per-frame
    /// noise a reader may filter out ([`is_noise`]).
    pub noise: bool,
    /// `CUresult` value (0 for GL).
    pub code: i32,
    /// `cuGetErrorName` of the result (`CUDA_SUCCESS`, …).
    pub result: String,
    /// Host time in the call, µs.
    pub host_us: f64,
    /// When the call began, µs since the recorder was made (the timeline's host clock).
    pub t_us: f64,
    /// GPU time (the GL timer query of the draw), ms; `None` for driver calls.
    pub gpu_ms: Option<f64>,
}

impl Call {
    /// A call from a tracer record; `result` is the name of its status code.
    pub fn from_record(seq: u64, frame: Option<u64>, r: &TraceRecord, result: String, t_us: f64) -> Call {
        Call {
            seq,
            frame,
            step: Step::of(r.name),
            api: "cuda",
            name: r.name.to_string(),
            version: r.version,
            export: r.export.clone(),
            address: format!("{:#x}", r.address),
            args: r.args.trim_end().to_string(),
            returned: r.returned.trim_end().to_string(),
            noise: is_noise(r.name),
            code: r.result.0,
            result,
            host_us: r.host_us,
            t_us,
            gpu_ms: None,
        }
    }
}

/// Whether the driver function `name` only reads state (attribute and property queries): the
/// calls a reader of a per-frame trace may filter out.
pub fn is_noise(name: &str) -> bool {
    matches!(
        name,
        "cuFuncGetAttribute"
            | "cuDeviceGetAttribute"
            | "cuStreamGetPriority"
            | "cuStreamGetFlags"
            | "cuCtxGetCurrent"
            | "cuCtxGetDevice"
            | "cuCtxGetFlags"
            | "cuCtxGetStreamPriorityRange"
            | "cuMemGetInfo"
            | "cuOccupancyMaxActiveBlocksPerMultiprocessor"
            | "cuEventQuery"
    )
}

/// A row of the timeline (the overlay's panel and the `--timeline` file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Track {
    /// The host thread: driver calls and the GL draw call.
    Host,
    /// The CUDA stream: map, kernel, unmap, copies, from CUDA events.
    Cuda,
    /// GL's work: the body draw, from timer queries.
    Gl,
    /// CUPTI's activity records (kernels, memcpys), where CUPTI was loaded.
    Cupti,
}

impl Track {
    /// The row's label.
    pub fn label(self) -> &'static str {
        match self {
            Track::Host => "host",
            Track::Cuda => "CUDA stream",
            Track::Gl => "GL",
            Track::Cupti => "CUPTI (GPU)",
        }
    }
}

/// One span of a frame on one track, on the recorder's clock (µs since it was made).
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// Its row.
    pub track: Track,
    /// What ran (`cuGraphicsMapResources`, `kernel`, `draw`).
    pub name: String,
    /// Start, µs since the recorder was made.
    pub start_us: f64,
    /// Length, µs (≥ 0).
    pub dur_us: f64,
    /// The call's result, the buffer drawn, the record's details.
    pub detail: String,
}

/// A run of consecutive calls of one step (how the panel groups a frame).
#[derive(Debug, Clone, PartialEq)]
pub struct Group<'a> {
    /// The step.
    pub step: Step,
    /// Its calls, in order.
    pub calls: &'a [Call],
}

/// Splits `calls` into runs of consecutive calls of the same step, keeping the order.
pub fn group(calls: &[Call]) -> Vec<Group<'_>> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=calls.len() {
        if i == calls.len() || calls[i].step != calls[start].step {
            if start < i {
                out.push(Group { step: calls[start].step, calls: &calls[start..i] });
            }
            start = i;
        }
    }
    out
}
