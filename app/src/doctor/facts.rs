//! What the doctor saw: plain data, gathered by `probe` on a real run or made up in tests, from
//! which every check and the routes are computed ([`super::checks`], [`super::routes`]).

use std::path::PathBuf;

use super::env::{Env, GlvndFiles};

/// The driver library: loaded (path and `cuDriverGetVersion`) or not (the loader's error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverFact {
    /// `interop::Driver::open` succeeded.
    Loaded {
        /// The library opened.
        path: String,
        /// `cuDriverGetVersion` (e.g. 13000 for CUDA 13.0).
        version: i32,
    },
    /// It failed: the error, listing every name tried.
    Missing(String),
}

/// One CUDA device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFact {
    /// Ordinal.
    pub ordinal: i32,
    /// `cuDeviceGetName`.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// `cuDeviceGetUuid` (16 bytes), when the driver has it.
    pub uuid: Option<[u8; 16]>,
}

impl DeviceFact {
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as `nvidia-smi -L` writes it.
    pub fn uuid_string(&self) -> Option<String> {
        self.uuid.map(|u| {
            let h: Vec<String> = u.iter().map(|b| format!("{b:02x}")).collect();
            format!("GPU-{}-{}-{}-{}-{}", h[..4].concat(), h[4..6].concat(), h[6..8].concat(), h[8..10].concat(), h[10..].concat())
        })
    }

    /// `device N (name, compute capability X.Y)`.
    pub fn label(&self) -> String {
        format!("device {} ({}, compute capability {}.{})", self.ordinal, self.name, self.compute_capability.0, self.compute_capability.1)
    }
}

/// `cuInit` and the devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaFact {
    /// Not asked: no driver library.
    NotTried,
    /// The entry points could not be resolved or `cuInit` failed (e.g. `CUDA_ERROR_NO_DEVICE`).
    InitFailed(String),
    /// `cuInit` succeeded; the devices (maybe none).
    Devices(Vec<DeviceFact>),
}

impl CudaFact {
    /// The devices, empty unless `cuInit` succeeded.
    pub fn devices(&self) -> &[DeviceFact] {
        match self {
            CudaFact::Devices(d) => d,
            _ => &[],
        }
    }
}

/// The embedded PTX loaded on the first device (`cuModuleLoadDataEx`, the app's `Kernels::load`).
#[derive(Debug, Clone, PartialEq)]
pub enum JitFact {
    /// Not tried: no device.
    NotTried,
    /// The module loaded and every kernel the app launches was found.
    Compiled {
        /// The device it was compiled for.
        device: String,
        /// Wall time of the load, ms.
        ms: f64,
    },
    /// The load failed: the error with the JIT error log.
    Failed(String),
}

/// The header of a PTX text: `.version` (the PTX ISA) and `.target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtxHeader {
    /// PTX ISA version (major, minor).
    pub isa: (u32, u32),
    /// The `sm_NN` of `.target`, as NN (75 for `sm_75`).
    pub target_sm: u32,
}

impl PtxHeader {
    /// Reads `.version X.Y` and `.target sm_NN` from the start of a PTX text.
    pub fn parse(ptx: &str) -> Option<Self> {
        let mut isa = None;
        let mut sm = None;
        for line in ptx.lines().map(str::trim).take(200) {
            if let Some(v) = line.strip_prefix(".version") {
                let (a, b) = v.trim().split_once('.')?;
                isa = Some((a.trim().parse().ok()?, b.trim().parse().ok()?));
            } else if let Some(t) = line.strip_prefix(".target") {
                let first = t.split(',').next()?.trim();
                sm = first.strip_prefix("sm_").and_then(|n| n.trim_end_matches(|c: char| c.is_alphabetic()).parse().ok());
            }
            if let (Some(isa), Some(target_sm)) = (isa, sm) {
                return Some(Self { isa, target_sm });
            }
        }
        None
    }
}

/// A GL context's strings and, headless, its EGL device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlSeen {
    /// `GL_VENDOR`.
    pub vendor: String,
    /// `GL_RENDERER`.
    pub renderer: String,
    /// `GL_VERSION`.
    pub version: String,
    /// The EGL device of a headless context (its label), `None` for a window's.
    pub egl_device: Option<String>,
    /// `EGL_CUDA_DEVICE_NV` of that EGL device.
    pub egl_cuda_device: Option<i32>,
}

impl From<&crate::gfx::GlInfo> for GlSeen {
    fn from(info: &crate::gfx::GlInfo) -> Self {
        Self {
            vendor: info.vendor.clone(),
            renderer: info.renderer.clone(),
            version: info.version.clone(),
            egl_device: info.egl_device.clone(),
            egl_cuda_device: info.egl_cuda_device,
        }
    }
}

/// What `cuGLGetDevices` (`CU_GL_DEVICE_LIST_ALL`) said with a context current.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SharesFact {
    /// CUDA could not be asked (no driver, `cuInit` failed): why.
    NoCuda(String),
    /// The CUDA devices it listed (empty: none can share the context).
    Lists(Vec<i32>),
    /// The call failed otherwise (e.g. `CUDA_ERROR_OPERATING_SYSTEM`).
    Fails(String),
}

impl SharesFact {
    /// True when it listed at least one device.
    pub fn shares(&self) -> bool {
        matches!(self, SharesFact::Lists(d) if !d.is_empty())
    }
}

/// A GL context the doctor tried to make as the demo would (headless, or a window's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextFact {
    /// Not tried, and why (no display server for a window).
    NotTried(String),
    /// No context: every route's error.
    Failed(String),
    /// Made: its strings and what `cuGLGetDevices` said while it was current.
    Made {
        /// The context's strings.
        gl: GlSeen,
        /// `cuGLGetDevices` on it.
        shares: SharesFact,
    },
}

/// The Vulkan device whose UUID is the CUDA device's (`--external-sync semaphore`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VulkanFact {
    /// Not tried (no CUDA device with a UUID).
    NotTried,
    /// Found: its name.
    Found(String),
    /// Not found, or it cannot export semaphores: why.
    Failed(String),
}

/// A library loaded on its own at run time (CUPTI, NCCL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LibFact {
    /// Loaded: where from, and its version.
    Loaded {
        /// The path or name opened.
        path: String,
        /// Its version.
        version: String,
    },
    /// Not loaded: the loader's error.
    Missing(String),
}

/// Everything the checks and the routes are computed from.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The environment variables.
    pub env: Env,
    /// The root folder the files are read under (`/`).
    pub root: PathBuf,
    /// The operating system (`std::env::consts::OS`: `linux`, `windows`).
    pub os: String,
    /// The driver library.
    pub driver: DriverFact,
    /// `cuInit` and the devices.
    pub cuda: CudaFact,
    /// The embedded PTX's header.
    pub ptx: Option<PtxHeader>,
    /// The PTX's JIT on the first device.
    pub jit: JitFact,
    /// The headless context (EGL device of CUDA device 0 first), as `--headless` makes it.
    pub headless: ContextFact,
    /// The window's context, as `--present native` makes it.
    pub window: ContextFact,
    /// NVIDIA's GL and EGL vendor files.
    pub glvnd: GlvndFiles,
    /// The Vulkan device of the CUDA device's UUID.
    pub vulkan: VulkanFact,
    /// CUPTI.
    pub cupti: LibFact,
    /// NCCL.
    pub nccl: LibFact,
}
