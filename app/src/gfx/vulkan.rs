//! Exportable binary semaphores made with Vulkan — the one thing this program asks of Vulkan. GL
//! can import a semaphore (`GL_EXT_semaphore_fd`) and so can CUDA (`cuImportExternalSemaphore`),
//! but neither creates one to share, so the external-memory storage's GPU-side ordering
//! (`--external-sync semaphore`) needs a third API that does: a Vulkan device on the same GPU
//! (matched by `VkPhysicalDeviceIDProperties::deviceUUID` against CUDA's `cuDeviceGetUuid`) makes
//! each semaphore with `VkExportSemaphoreCreateInfo` (`OPAQUE_FD`) and exports it with
//! `vkGetSemaphoreFdKHR`, once per importer: every fd refers to the same payload.
//!
//! The Vulkan loader is opened at run time (ash's `Entry::load`); without it, or without a
//! device of that UUID with `VK_KHR_external_semaphore_fd`, [`ExportableSemaphores::new`] says
//! which, and the storage keeps the host waits. The instance and device are made once per GPU and
//! kept for the process (see `VulkanDevice`).

use std::os::fd::{FromRawFd as _, OwnedFd};

use anyhow::{anyhow, bail, Context as _};
use ash::vk;

/// A Vulkan instance and a device on one GPU, with `VK_KHR_external_semaphore_fd`. Made once per
/// GPU and kept for the life of the process: on the H200 (driver 580) destroying them unbound the
/// thread's current GL context, so the next GL call and `cuGLGetDevices` found none.
struct VulkanDevice {
    fd_fns: ash::khr::external_semaphore_fd::Device,
    device: ash::Device,
    /// The loader; it must outlive the instance and device (which are never destroyed).
    _entry: ash::Entry,
    _instance: ash::Instance,
    /// CUDA's UUID of the GPU.
    uuid: [u8; 16],
    /// The Vulkan device's name, for messages.
    name: String,
}

/// The devices made so far, one per GPU (never destroyed: see [`VulkanDevice`]).
static DEVICES: std::sync::Mutex<Vec<std::sync::Arc<VulkanDevice>>> = std::sync::Mutex::new(Vec::new());

impl VulkanDevice {
    /// The process's Vulkan device on the GPU of `uuid`, made on first use.
    fn for_uuid(uuid: [u8; 16]) -> anyhow::Result<std::sync::Arc<VulkanDevice>> {
        let mut devices = DEVICES.lock().map_err(|_| anyhow!("the Vulkan device list was poisoned by a panic"))?;
        if let Some(d) = devices.iter().find(|d| d.uuid == uuid) {
            return Ok(std::sync::Arc::clone(d));
        }
        let d = std::sync::Arc::new(Self::new(uuid)?);
        devices.push(std::sync::Arc::clone(&d));
        Ok(d)
    }

    fn new(uuid: [u8; 16]) -> anyhow::Result<Self> {
        // SAFETY: loads the system's Vulkan loader (libvulkan.so.1); ash keeps it open for the
        // life of `Entry`, which is never dropped once the device is made.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| anyhow!("no Vulkan loader (libvulkan.so.1): {e}"))?;
        let app = vk::ApplicationInfo::default().application_name(c"nbody-interop").api_version(vk::API_VERSION_1_1);
        // SAFETY: a valid create-info (no layers or extensions) whose pointers live for the call.
        let instance = unsafe { entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None) }
            .context("vkCreateInstance (Vulkan 1.1)")?;
        let made = (|| -> anyhow::Result<(ash::Device, String)> {
            // SAFETY: `instance` is live; the result is a list of handles it owns.
            let devices = unsafe { instance.enumerate_physical_devices() }.context("vkEnumeratePhysicalDevices")?;
            let mut names = Vec::new();
            let mut found = None;
            for pd in devices {
                let mut id = vk::PhysicalDeviceIDProperties::default();
                let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
                // SAFETY: `pd` belongs to `instance` (Vulkan 1.1 core query); writes the chain.
                unsafe { instance.get_physical_device_properties2(pd, &mut props) };
                let name = props.properties.device_name_as_c_str().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
                if id.device_uuid == uuid {
                    found = Some((pd, name));
                    break;
                }
                names.push(name);
            }
            let Some((pd, name)) = found else {
                bail!("no Vulkan device has the CUDA device's UUID (devices: {})", if names.is_empty() { "none".into() } else { names.join(", ") });
            };
            let info = vk::PhysicalDeviceExternalSemaphoreInfo::default().handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
            let mut ext = vk::ExternalSemaphoreProperties::default();
            // SAFETY: `pd` belongs to `instance`; writes one struct.
            unsafe { instance.get_physical_device_external_semaphore_properties(pd, &info, &mut ext) };
            let need = vk::ExternalSemaphoreFeatureFlags::EXPORTABLE | vk::ExternalSemaphoreFeatureFlags::IMPORTABLE;
            if !ext.external_semaphore_features.contains(need) {
                bail!(
                    "{name}: binary semaphores cannot be exported and imported as opaque fds (features 0x{:x})",
                    ext.external_semaphore_features.as_raw()
                );
            }
            let priorities = [1.0f32];
            let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(0).queue_priorities(&priorities)];
            let extensions = [ash::khr::external_semaphore_fd::NAME.as_ptr()];
            let create = vk::DeviceCreateInfo::default().queue_create_infos(&queues).enabled_extension_names(&extensions);
            // SAFETY: `pd` belongs to `instance`; the create-info and its arrays live for the call.
            let device = unsafe { instance.create_device(pd, &create, None) }
                .with_context(|| format!("vkCreateDevice on {name} with VK_KHR_external_semaphore_fd"))?;
            Ok((device, name))
        })();
        match made {
            Ok((device, name)) => {
                let fd_fns = ash::khr::external_semaphore_fd::Device::new(&instance, &device);
                Ok(VulkanDevice { fd_fns, device, _entry: entry, _instance: instance, uuid, name })
            }
            Err(e) => {
                // Not destroyed either (no vkDestroyInstance): see [`VulkanDevice`]; the loader
                // stays loaded under it, for the process (once per failed attempt).
                let _ = instance;
                std::mem::forget(entry);
                Err(e)
            }
        }
    }
}

/// The name of the Vulkan device on the GPU of `uuid` that can export binary semaphores as opaque
/// fds (made now if it was not yet, and kept: see `VulkanDevice`).
///
/// # Errors
/// As [`ExportableSemaphores::new`].
pub fn device_for(uuid: [u8; 16]) -> anyhow::Result<String> {
    Ok(VulkanDevice::for_uuid(uuid)?.name.clone())
}

/// `count` binary semaphores made exportable as opaque fds on the process's Vulkan device of one
/// GPU; destroyed on drop (the imported copies in CUDA and GL keep the payload alive on their own
/// and are destroyed by their owners).
pub struct ExportableSemaphores {
    semaphores: Vec<vk::Semaphore>,
    vk: std::sync::Arc<VulkanDevice>,
}

impl std::fmt::Debug for ExportableSemaphores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportableSemaphores").field("count", &self.semaphores.len()).field("device", &self.vk.name).finish_non_exhaustive()
    }
}

impl ExportableSemaphores {
    /// `count` exportable binary semaphores on the Vulkan device whose UUID is `uuid` (CUDA's
    /// `cuDeviceGetUuid` of the device the storage runs on).
    ///
    /// # Errors
    /// No Vulkan loader; no Vulkan 1.1 instance; no device with that UUID; the device cannot
    /// export and import binary semaphores as opaque fds
    /// (`vkGetPhysicalDeviceExternalSemaphoreProperties`); a creation failure. Each names the
    /// step that failed.
    pub fn new(uuid: [u8; 16], count: usize) -> anyhow::Result<Self> {
        let mut s = ExportableSemaphores { semaphores: Vec::new(), vk: VulkanDevice::for_uuid(uuid)? };
        for _ in 0..count {
            let mut export = vk::ExportSemaphoreCreateInfo::default().handle_types(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
            // SAFETY: the device is live (never destroyed); the create-info chain lives for the call.
            let sem = unsafe { s.vk.device.create_semaphore(&vk::SemaphoreCreateInfo::default().push_next(&mut export), None) }
                .context("vkCreateSemaphore (exportable as an opaque fd)")?;
            s.semaphores.push(sem);
        }
        Ok(s)
    }

    /// The Vulkan device's name.
    pub fn device_name(&self) -> &str {
        &self.vk.name
    }

    /// A new fd of semaphore `i`'s payload (`vkGetSemaphoreFdKHR`, `OPAQUE_FD`), for one importer.
    ///
    /// # Errors
    /// No semaphore `i`; the export failed.
    pub fn export_fd(&self, i: usize) -> anyhow::Result<OwnedFd> {
        let sem = *self.semaphores.get(i).ok_or_else(|| anyhow!("no semaphore {i}"))?;
        let info = vk::SemaphoreGetFdInfoKHR::default().semaphore(sem).handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        // SAFETY: `sem` was made exportable as OPAQUE_FD on this device; writes one fd.
        let fd = unsafe { self.vk.fd_fns.get_semaphore_fd(&info) }.context("vkGetSemaphoreFdKHR")?;
        // SAFETY: on success the fd is new and owned by the caller (VK_KHR_external_semaphore_fd).
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

impl Drop for ExportableSemaphores {
    fn drop(&mut self) {
        for s in self.semaphores.drain(..) {
            // SAFETY: made on this device; no Vulkan queue uses it (none is ever submitted to).
            unsafe { self.vk.device.destroy_semaphore(s, None) };
        }
    }
}
