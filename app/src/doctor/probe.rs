//! Gathers the [`Facts`] of this machine, each the way the demo itself gets it: the driver
//! through the interop crate's loader (as `info`), the devices after `cuInit`, the embedded PTX
//! through `Kernels::load` on device 0's primary context, a headless context
//! (`HeadlessContext::new`, the EGL device of CUDA device 0 first) and a window's context
//! (`WindowContext::try_routes`) each with `cuGLGetDevices` while it is current, the Vulkan
//! device of the GPU's UUID (`gfx::vulkan`), CUPTI and NCCL. Every failure becomes a fact; nothing
//! here fails.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use interop::{Api, Device, SchedFlag, StreamSemantics};

use super::env::{Env, GlvndFiles};
use super::facts::{ContextFact, CudaFact, DeviceFact, DriverFact, Facts, GlSeen, JitFact, LibFact, PtxHeader, SharesFact, VulkanFact};
use crate::cuda::kernel_set::Kernels;
use crate::gfx::context::{HeadlessContext, HEADLESS_CUDA_DEVICE};

/// Every fact of this machine.
pub(super) fn gather() -> Facts {
    let env = Env::from_process();
    let root = PathBuf::from("/");
    let (driver, cuda) = driver_and_devices();
    let jit = jit(&cuda);
    let headless = match HeadlessContext::new(HEADLESS_CUDA_DEVICE) {
        Ok(ctx) => ContextFact::Made { gl: GlSeen::from(&ctx.info), shares: shares_now() },
        Err(e) => ContextFact::Failed(format!("{e:#}")),
    };
    let window = super::window::probe(&env, shares_now);
    let vulkan = match cuda.devices().first().and_then(|d| d.uuid) {
        Some(uuid) => match crate::gfx::vulkan::device_for(uuid) {
            Ok(name) => VulkanFact::Found(name),
            Err(e) => VulkanFact::Failed(format!("{e:#}")),
        },
        None => VulkanFact::NotTried,
    };
    let cupti = match crate::libraries::open_cupti() {
        Ok(c) => LibFact::Loaded { path: c.path().to_string(), version: c.version().to_string() },
        Err(e) => LibFact::Missing(e.to_string()),
    };
    let nccl = match crate::libraries::open_nccl() {
        Ok(n) => LibFact::Loaded { path: n.path().to_string(), version: n.version_string() },
        Err(e) => LibFact::Missing(e.to_string()),
    };
    let glvnd = GlvndFiles::find(&env, &root);
    Facts {
        env,
        root,
        os: std::env::consts::OS.to_string(),
        driver,
        cuda,
        ptx: PtxHeader::parse(kernels::PTX),
        jit,
        headless,
        window,
        glvnd,
        vulkan,
        cupti,
        nccl,
    }
}

/// The driver library as the loader finds it and, where it loads, `cuInit` and the devices.
pub(super) fn driver_and_devices() -> (DriverFact, CudaFact) {
    match crate::libraries::open_driver() {
        Ok(d) => {
            let fact = DriverFact::Loaded { path: d.path().to_string(), version: d.version() };
            match Api::load(d, StreamSemantics::Legacy) {
                Ok(api) => (fact, devices(&api)),
                Err(e) => (fact, CudaFact::InitFailed(format!("resolving driver entry points: {e}"))),
            }
        }
        Err(e) => (DriverFact::Missing(e.to_string()), CudaFact::NotTried),
    }
}

/// `cuInit` and every device with its name, compute capability and UUID.
fn devices(api: &Arc<Api>) -> CudaFact {
    let listed = interop::cu_init(api).map_err(anyhow::Error::from).and_then(|()| {
        let mut out = Vec::new();
        for i in 0..Device::count(api)? {
            let d = Device::get(api, i)?;
            out.push(DeviceFact { ordinal: i, name: d.name()?, compute_capability: d.compute_capability()?, uuid: d.uuid_bytes().ok() });
        }
        Ok(out)
    });
    match listed {
        Ok(list) => CudaFact::Devices(list),
        Err(e) => CudaFact::InitFailed(format!("{e:#}")),
    }
}

/// The embedded PTX loaded on device 0's primary context, as the CUDA backend loads it.
fn jit(cuda: &CudaFact) -> JitFact {
    let Some(first) = cuda.devices().first() else { return JitFact::NotTried };
    let loaded = (|| -> anyhow::Result<f64> {
        let api = crate::libraries::init(StreamSemantics::Legacy)?;
        let ctx = interop::Context::primary(&Device::get(&api, first.ordinal)?, SchedFlag::Auto)?;
        let t0 = Instant::now();
        let kernels = Kernels::load(&ctx, None)?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        drop(kernels);
        Ok(ms)
    })();
    match loaded {
        Ok(ms) => JitFact::Compiled { device: first.label(), ms },
        Err(e) => JitFact::Failed(format!("{e:#}")),
    }
}

/// What `cuGLGetDevices` says about the GL context current on this thread.
fn shares_now() -> SharesFact {
    let api = match crate::libraries::init(StreamSemantics::Legacy) {
        Ok(a) => a,
        // The driver check says which names were tried.
        Err(interop::Error::LibraryNotFound { .. }) => return SharesFact::NoCuda("no CUDA driver library (see driver)".into()),
        Err(e) => return SharesFact::NoCuda(format!("CUDA unavailable: {e}")),
    };
    match interop::gl_devices(&api) {
        Ok(d) => SharesFact::Lists(d),
        Err(e) => SharesFact::Fails(e.to_string()),
    }
}
