//! A binary semaphore made by Vulkan to be shared: neither CUDA nor GL creates one that the other
//! can import, Vulkan does (`VkExportSemaphoreCreateInfo`, `VK_KHR_external_semaphore_fd`). Each
//! `vkGetSemaphoreFdKHR` gives a new fd of the same payload, one per importer.

use std::os::fd::{FromRawFd as _, OwnedFd};

use ash::vk;

use super::Res;

/// One exportable binary semaphore on the Vulkan device of a given UUID, with that device and
/// its instance; all three are destroyed on drop (no Vulkan queue ever uses them).
pub struct ExportableSemaphore {
    semaphore: vk::Semaphore,
    fd_fns: ash::khr::external_semaphore_fd::Device,
    device: ash::Device,
    instance: ash::Instance,
    /// The Vulkan loader, kept loaded while the instance lives (dropped after `Drop::drop`).
    _entry: ash::Entry,
}

impl ExportableSemaphore {
    /// A semaphore on the Vulkan device whose `deviceUUID` is `uuid` (CUDA's `cuDeviceGetUuid`).
    /// On an error, what was made is left to the process's exit.
    pub fn new(uuid: [u8; 16]) -> Res<Self> {
        // SAFETY: loads the system's Vulkan loader; `_entry` keeps it loaded while the objects live.
        let entry = unsafe { ash::Entry::load() }?;
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_1);
        // SAFETY: a complete create-info whose pointers live for the call.
        let instance = unsafe { entry.create_instance(&vk::InstanceCreateInfo::default().application_info(&app), None) }?;
        // SAFETY: `instance` is live; the devices it lists belong to it; each query writes its own chain.
        let found = unsafe { instance.enumerate_physical_devices() }?.into_iter().find(|&pd| {
            let mut id = vk::PhysicalDeviceIDProperties::default();
            // SAFETY: as above (a Vulkan 1.1 core query).
            unsafe { instance.get_physical_device_properties2(pd, &mut vk::PhysicalDeviceProperties2::default().push_next(&mut id)) };
            id.device_uuid == uuid
        });
        let pd = found.ok_or("no Vulkan device has the CUDA device's UUID")?;
        let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(0).queue_priorities(&[1.0])];
        let extensions = [ash::khr::external_semaphore_fd::NAME.as_ptr()];
        let create = vk::DeviceCreateInfo::default().queue_create_infos(&queues).enabled_extension_names(&extensions);
        // SAFETY: `pd` belongs to `instance`; the create-info and its arrays live for the call.
        let device = unsafe { instance.create_device(pd, &create, None) }?;
        let mut export = vk::ExportSemaphoreCreateInfo::default().handle_types(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        // SAFETY: the device is live; the create-info chain lives for the call.
        let semaphore = unsafe { device.create_semaphore(&vk::SemaphoreCreateInfo::default().push_next(&mut export), None) }?;
        let fd_fns = ash::khr::external_semaphore_fd::Device::new(&instance, &device);
        Ok(ExportableSemaphore { semaphore, fd_fns, device, instance, _entry: entry })
    }

    /// A new fd of the semaphore's payload (`vkGetSemaphoreFdKHR`, `OPAQUE_FD`), for one importer.
    pub fn export_fd(&self) -> Res<OwnedFd> {
        let info = vk::SemaphoreGetFdInfoKHR::default().semaphore(self.semaphore).handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD);
        // SAFETY: the semaphore was made exportable as OPAQUE_FD on this device; the fd returned
        // on success is new and the caller's.
        Ok(unsafe { OwnedFd::from_raw_fd(self.fd_fns.get_semaphore_fd(&info)?) })
    }
}

impl Drop for ExportableSemaphore {
    fn drop(&mut self) {
        // SAFETY: made by `new`, destroyed once, children before parents; no queue uses them.
        unsafe {
            self.device.destroy_semaphore(self.semaphore, None);
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
    }
}
