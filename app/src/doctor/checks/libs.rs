//! What only some features need: the Vulkan device of the CUDA GPU (external memory's GPU-side
//! ordering), CUPTI (the timeline's GPU records) and NCCL (the split's gather).

use super::super::facts::{CudaFact, LibFact, VulkanFact};
use super::Check;

/// `vulkan`: the Vulkan device whose `deviceUUID` is CUDA device 0's UUID, which makes the
/// exportable semaphores of `--interop external --external-sync semaphore` (a Vulkan device of
/// another GPU, such as an integrated one, does not count).
pub fn vulkan(c: &CudaFact, v: &VulkanFact) -> Check {
    let first = c.devices().first();
    match (v, first) {
        (_, None) => Check::not_applicable("vulkan", "no CUDA device to match"),
        (VulkanFact::NotTried, Some(d)) => Check::not_applicable("vulkan", format!("{} has no UUID to match (cuDeviceGetUuid missing)", d.label())),
        (VulkanFact::Found(name), Some(d)) => Check::ok(
            "vulkan",
            format!(
                "Vulkan device {name} has the UUID of CUDA {} ({}): --external-sync semaphore can order CUDA and GL on the GPU",
                d.label(),
                d.uuid_string().unwrap_or_default()
            ),
        ),
        (VulkanFact::Failed(e), Some(d)) => Check::problem(
            "vulkan",
            format!("for CUDA {} ({}): {e}", d.label(), d.uuid_string().unwrap_or_default()),
            "only --interop external with --external-sync semaphore needs it (auto then keeps host waits): install NVIDIA's \
             Vulkan driver (its ICD file nvidia_icd.json; in a container NVIDIA_DRIVER_CAPABILITIES including graphics); the \
             device is matched by UUID, so a Vulkan device of another GPU does not help",
        ),
    }
}

/// `cupti`: CUPTI, loaded as the timeline loads it (`NBODY_CUPTI_LIBRARY`, the usual names, the
/// toolkit's `extras/CUPTI/lib64`).
pub fn cupti(l: &LibFact) -> Check {
    match l {
        LibFact::Loaded { path, version } => {
            Check::ok("cupti", format!("{path}, CUPTI API version {version}: --timeline gets the GPU's kernel and copy records"))
        }
        LibFact::Missing(e) => Check::problem(
            "cupti",
            format!("{e} (only --timeline uses it; the timeline is written without the GPU's records)"),
            "install the CUDA toolkit's CUPTI (extras/CUPTI/lib64/libcupti.so) or point NBODY_CUPTI_LIBRARY at it",
        ),
    }
}

/// `nccl`: NCCL, loaded as the split loads it (`NBODY_NCCL_LIBRARY`, `libnccl.so.2`,
/// `libnccl.so`); `devices` is the number of CUDA devices.
pub fn nccl(l: &LibFact, devices: usize) -> Check {
    match l {
        LibFact::Loaded { path, version } => Check::ok("nccl", format!("{path}, NCCL {version}: --gather nccl can gather a split's slices")),
        LibFact::Missing(e) if devices < 2 => {
            Check::not_applicable("nccl", format!("{e} (only a split over several GPUs gathers with NCCL; {devices} CUDA device(s) here)"))
        }
        LibFact::Missing(e) => Check::problem(
            "nccl",
            format!("{e} (--gather auto takes peer copies instead; --gather nccl fails)"),
            "install NCCL (Debian/Ubuntu: libnccl2, or the nvidia-nccl wheel) or point NBODY_NCCL_LIBRARY at libnccl.so.2",
        ),
    }
}
