//! The CUDA side: the driver library, `cuInit` and the devices, and whether the embedded PTX
//! JIT-compiles for the GPU.

use super::super::facts::{CudaFact, DriverFact, JitFact, PtxHeader};
use super::Check;

/// The first CUDA release that loads each PTX ISA version, as `cuDriverGetVersion` writes it
/// (1000 × major + 10 × minor): the PTX ISA's release history ("PTX ISA Version" against "CUDA
/// Release" in the PTX ISA's release notes), from ISA 6.0 on.
pub const PTX_ISA_CUDA: [((u32, u32), i32); 26] = [
    ((6, 0), 9000),
    ((6, 1), 9010),
    ((6, 2), 9020),
    ((6, 3), 10000),
    ((6, 4), 10010),
    ((6, 5), 10020),
    ((7, 0), 11000),
    ((7, 1), 11010),
    ((7, 2), 11020),
    ((7, 3), 11030),
    ((7, 4), 11040),
    ((7, 5), 11050),
    ((7, 6), 11060),
    ((7, 7), 11070),
    ((7, 8), 11080),
    ((8, 0), 12000),
    ((8, 1), 12010),
    ((8, 2), 12020),
    ((8, 3), 12030),
    ((8, 4), 12040),
    ((8, 5), 12050),
    ((8, 6), 12070),
    ((8, 7), 12080),
    ((8, 8), 12090),
    ((9, 0), 13000),
    ((9, 1), 13010),
];

/// The oldest driver (as `cuDriverGetVersion`) that loads PTX of ISA `isa`; `None` for an ISA
/// outside [`PTX_ISA_CUDA`].
pub fn min_driver_for_ptx(isa: (u32, u32)) -> Option<i32> {
    PTX_ISA_CUDA.iter().find(|(i, _)| *i == isa).map(|(_, v)| *v)
}

/// `13000` → `13.0`.
pub fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// `driver`: the driver library (the interop crate's loader: `NBODY_CUDA_LIBRARY`, else
/// `libcuda.so.1`, `libcuda.so`) and its version.
pub fn driver(d: &DriverFact) -> Check {
    match d {
        DriverFact::Loaded { path, version } => {
            Check::ok("driver", format!("{path}: cuDriverGetVersion {version} = CUDA {}", cuda_version(*version)))
        }
        DriverFact::Missing(e) => Check::problem(
            "driver",
            e.clone(),
            "install the NVIDIA driver (it provides libcuda.so.1; no CUDA toolkit is needed), or point NBODY_CUDA_LIBRARY at \
             its libcuda.so.1; without it the demo runs the CPU backend",
        ),
    }
}

/// `devices`: `cuInit` and the CUDA devices, each with its compute capability and UUID.
pub fn devices(d: &DriverFact, c: &CudaFact) -> Check {
    if matches!(d, DriverFact::Missing(_)) {
        return Check::not_applicable("devices", "no driver library to ask");
    }
    match c {
        CudaFact::NotTried => Check::not_applicable("devices", "not asked"),
        CudaFact::InitFailed(e) => Check::problem(
            "devices",
            e.clone(),
            "CUDA_ERROR_NO_DEVICE: the driver sees no GPU (nvidia-smi should list it; a container must be started with the \
             GPUs, e.g. docker run --gpus all); a missing entry point: the driver is older than this program needs \
             (nbody-interop info lists every function with its status)",
        ),
        CudaFact::Devices(list) if list.is_empty() => {
            Check::problem("devices", "cuInit succeeded but cuDeviceGetCount is 0", "check that nvidia-smi lists the GPU")
        }
        CudaFact::Devices(list) => Check::ok(
            "devices",
            list.iter()
                .map(|d| format!("{}, {}", d.label(), d.uuid_string().unwrap_or_else(|| "no UUID (cuDeviceGetUuid missing)".into())))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    }
}

/// `ptx`: whether the embedded PTX (`header`: its `.version` and `.target`) loads on the first
/// device: the driver new enough for its ISA, the device's compute capability at least its
/// target, and the JIT's own answer (with its error log on failure).
pub fn ptx(header: Option<PtxHeader>, d: &DriverFact, c: &CudaFact, jit: &JitFact) -> Check {
    let Some(h) = header else {
        return Check::problem("ptx", "the embedded PTX has no .version and .target header", "rebuild: kernels/gen_ptx.py writes kernels/nbody.ptx");
    };
    let what = format!("embedded PTX ISA {}.{}, .target sm_{}", h.isa.0, h.isa.1, h.target_sm);
    let DriverFact::Loaded { version, .. } = d else {
        return Check::not_applicable("ptx", format!("{what}; no driver to compile it"));
    };
    let needs = min_driver_for_ptx(h.isa);
    let too_old = needs.filter(|n| version < n);
    let old_text = |n: i32| {
        format!(
            "{what}, which needs a driver of CUDA {} or newer (PTX ISA release history); this driver supports CUDA {}",
            cuda_version(n),
            cuda_version(*version)
        )
    };
    let update = |n: i32| format!("update the NVIDIA driver to one that supports CUDA {} or newer (nvidia-smi shows the version)", cuda_version(n));
    if let JitFact::Failed(e) = jit {
        let evidence = match too_old {
            Some(n) => format!("{}; the JIT failed: {e}", old_text(n)),
            None => format!("{what}; the JIT failed: {e}"),
        };
        let remedy = match too_old {
            Some(n) => update(n),
            None => "the JIT error log above says why; an unsupported PTX version needs a newer driver, an unsupported \
                     target a newer GPU"
                .into(),
        };
        return Check::problem("ptx", evidence, remedy);
    }
    if let Some(n) = too_old {
        return Check::problem("ptx", old_text(n), update(n));
    }
    let first = c.devices().first();
    if let Some(dev) = first {
        let (major, minor) = dev.compute_capability;
        if u32::try_from(major * 10 + minor).is_ok_and(|cc| cc < h.target_sm) {
            return Check::problem(
                "ptx",
                format!("{what}; {} is below sm_{}", dev.label(), h.target_sm),
                format!("the kernels need a GPU of compute capability {}.{} or newer", h.target_sm / 10, h.target_sm % 10),
            );
        }
    }
    match jit {
        JitFact::Compiled { device, ms } => Check::ok("ptx", format!("{what}: JIT-compiled for {device} in {ms:.0} ms")),
        _ => Check::not_applicable("ptx", format!("{what}; no CUDA device to compile it for")),
    }
}
