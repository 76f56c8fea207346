//! The CUDA settings a user picks (interop mode, precision, register/map flags, stream, context
//! scheduling): domain types that the backends, the overlay and the command line share. They
//! derive clap's `ValueEnum` so that the command line ([`crate::cli`]) takes them as they are.

use clap::ValueEnum;
use interop::sys::register_flags;

/// How results reach GL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InteropMode {
    /// Registered GL buffers mapped every frame (cuGraphicsMapResources).
    Map,
    /// CUDA device buffer → pinned host memory → glBufferSubData.
    Copy,
    /// CUDA allocates the buffers (cuMemCreate), GL imports them (GL_EXT_memory_object_fd):
    /// no map/unmap per frame, a CUDA event and a GL fence order the two APIs.
    External,
}

/// Floating-point precision of the simulation state and the force sum (`--precision`). A
/// setting of the whole run: a CUDA backend is built for one precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Precision {
    /// fp32: float4 state, the kernel writes the positions GL's float4 vertex buffers hold directly.
    F32,
    /// fp64: double4 state and sums in CUDA buffers (`nbody_step_f64`); each frame
    /// `nbody_to_float4` writes the float4 positions GL draws (CUDA backend and the bench's CUDA
    /// modes; not the CPU backend).
    F64,
}

impl Precision {
    /// The value's name as the command line and the bench rows spell it (`f32`, `f64`).
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }
}

/// Register or map flags (CU_GRAPHICS_REGISTER_FLAGS_* / CU_GRAPHICS_MAP_RESOURCE_FLAGS_*).
///
/// As register flags (`--register-flags`) a value is a promise for the buffer's whole life, which
/// the ping-pong position buffers cannot keep for `read-only` or `write-discard`: the map storage
/// refuses them (`backend::cuda::check_register_flags`). As map flags (`--map-flags`) the value
/// is applied per frame by role (`backend::cuda::role_map_flag`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ResourceFlags {
    /// No hint: CUDA may read and write the buffer.
    None,
    /// "CUDA will not write to this resource" (as map flag: on the buffer the kernel only reads).
    ReadOnly,
    /// "CUDA will not read from this resource and will write over the entire contents" (as map
    /// flag: on the buffer the kernel only writes).
    WriteDiscard,
}

/// Stream kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StreamKind {
    /// The legacy default stream (entry points resolved with CU_GET_PROC_ADDRESS_LEGACY_STREAM).
    Legacy,
    /// The per-thread default stream (entry points resolved with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM).
    PerThread,
    /// A created stream with CU_STREAM_NON_BLOCKING (priority: the demo's `--stream-priority`, else 0).
    NonBlocking,
}

/// Context scheduling flag (CU_CTX_SCHED_*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CtxSched {
    /// CU_CTX_SCHED_AUTO.
    Auto,
    /// CU_CTX_SCHED_SPIN.
    Spin,
    /// CU_CTX_SCHED_YIELD.
    Yield,
    /// CU_CTX_SCHED_BLOCKING_SYNC.
    Blocking,
}

impl ResourceFlags {
    /// The `CU_GRAPHICS_REGISTER_FLAGS_*` bits of `cuGraphicsGLRegisterBuffer` for this value.
    pub fn register_bits(self) -> u32 {
        match self {
            ResourceFlags::None => register_flags::NONE,
            ResourceFlags::ReadOnly => register_flags::READ_ONLY,
            ResourceFlags::WriteDiscard => register_flags::WRITE_DISCARD,
        }
    }

    /// The value's name as the command line spells it (`none`, `read-only`, `write-discard`).
    pub fn name(self) -> &'static str {
        match self {
            ResourceFlags::None => "none",
            ResourceFlags::ReadOnly => "read-only",
            ResourceFlags::WriteDiscard => "write-discard",
        }
    }
}

/// How a split step shares the positions between its slices (`--gather`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GatherChoice {
    /// NCCL when it loads and every slice has a device of its own, else peer copies.
    Auto,
    /// `ncclAllGather` (fails when NCCL does not load or a device holds two slices).
    Nccl,
    /// `cuMemcpyPeerAsync` from each slice to every other.
    Peer,
}
