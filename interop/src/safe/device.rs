//! Devices and their attributes.

use std::ffi::{c_char, c_int, CStr};
use std::sync::Arc;

use crate::driver::error::Result;
use crate::sys::{attr, CUdevice, CUuuid};
use crate::Api;

/// A CUDA device (`CUdevice`), with the table it was found through.
#[derive(Debug, Clone)]
pub struct Device {
    api: Arc<Api>,
    ordinal: c_int,
    raw: CUdevice,
}

/// Attributes of a device, as `info` and the overlay show them (units in the field names).
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceInfo {
    /// Ordinal.
    pub ordinal: i32,
    /// `cuDeviceGetName`.
    pub name: String,
    /// `cuDeviceGetUuid`, as `GPU-xxxxxxxx-xxxx-…` (None when the driver lacks the function).
    pub uuid: Option<String>,
    /// `cuDeviceGetPCIBusId` (`domain:bus:device.function`).
    pub pci_bus_id: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Total memory, bytes.
    pub total_memory_bytes: usize,
    /// Multiprocessors.
    pub multiprocessors: i32,
    /// SM clock, kHz.
    pub clock_khz: i32,
    /// Memory clock, kHz.
    pub memory_clock_khz: i32,
    /// Memory bus width, bits.
    pub memory_bus_width_bits: i32,
    /// L2 cache, bytes.
    pub l2_cache_bytes: i32,
    /// Max threads per block.
    pub max_threads_per_block: i32,
    /// Max threads per multiprocessor.
    pub max_threads_per_multiprocessor: i32,
    /// Max blocks per multiprocessor.
    pub max_blocks_per_multiprocessor: i32,
    /// Shared memory per block (default limit), bytes.
    pub shared_memory_per_block_bytes: i32,
    /// Shared memory per block with opt-in, bytes.
    pub shared_memory_per_block_optin_bytes: i32,
    /// Shared memory per multiprocessor, bytes.
    pub shared_memory_per_multiprocessor_bytes: i32,
    /// 32-bit registers per block.
    pub registers_per_block: i32,
    /// Warp size, threads.
    pub warp_size: i32,
    /// Unified addressing with the host.
    pub unified_addressing: bool,
    /// Stream priorities supported.
    pub stream_priorities_supported: bool,
    /// Copy engines.
    pub async_engines: i32,
    /// ECC enabled.
    pub ecc_enabled: bool,
    /// Integrated (shares memory with the host).
    pub integrated: bool,
    /// Compute mode (0 default, 2 prohibited, 3 exclusive process).
    pub compute_mode: i32,
    /// Virtual memory management (`cuMemCreate`, `cuMemMap`) supported.
    pub virtual_memory_management: bool,
    /// Export to POSIX file descriptors supported.
    pub posix_fd_export: bool,
}

impl Device {
    /// Number of devices (`cuDeviceGetCount`).
    ///
    /// # Errors
    /// The driver's error (`CUDA_ERROR_NOT_INITIALIZED` before `cuInit`).
    #[doc(alias = "cuDeviceGetCount")]
    pub fn count(api: &Arc<Api>) -> Result<i32> {
        let mut n = 0;
        // SAFETY: writes one int.
        unsafe { api.cuDeviceGetCount(&mut n) }?;
        Ok(n)
    }

    /// The device of an ordinal (`cuDeviceGet`).
    ///
    /// # Errors
    /// `CUDA_ERROR_INVALID_DEVICE` for an ordinal ≥ [`Device::count`].
    #[doc(alias = "cuDeviceGet")]
    pub fn get(api: &Arc<Api>, ordinal: i32) -> Result<Device> {
        let mut raw = 0;
        // SAFETY: writes one CUdevice.
        unsafe { api.cuDeviceGet(&mut raw, ordinal) }?;
        Ok(Device { api: api.clone(), ordinal, raw })
    }

    /// Wraps a raw `CUdevice` (for example one from `cuGLGetDevices`) with its ordinal.
    pub fn from_raw(api: &Arc<Api>, raw: CUdevice) -> Device {
        Device { api: api.clone(), ordinal: raw, raw }
    }

    /// The table this device was found through.
    pub fn api(&self) -> &Arc<Api> {
        &self.api
    }

    /// The raw handle.
    pub fn raw(&self) -> CUdevice {
        self.raw
    }

    /// The ordinal.
    pub fn ordinal(&self) -> i32 {
        self.ordinal
    }

    /// `cuDeviceGetName`.
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuDeviceGetName")]
    pub fn name(&self) -> Result<String> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the buffer holds `len` bytes; the driver NUL-terminates within it.
        unsafe { self.api.cuDeviceGetName(buf.as_mut_ptr(), buf.len() as c_int, self.raw) }?;
        Ok(c_buf_to_string(&buf))
    }

    /// `cuDeviceGetUuid`: the device's 16-byte UUID, as Vulkan's `VkPhysicalDeviceIDProperties::deviceUUID`
    /// gives it for the same GPU.
    ///
    /// # Errors
    /// The driver's error, or [`crate::Error::Unavailable`] on drivers older than 11.4.
    #[doc(alias = "cuDeviceGetUuid")]
    pub fn uuid_bytes(&self) -> Result<[u8; 16]> {
        let mut u = CUuuid::default();
        // SAFETY: writes 16 bytes into `u`.
        unsafe { self.api.cuDeviceGetUuid(&mut u, self.raw) }?;
        Ok(u.bytes)
    }

    /// `cuDeviceGetUuid`, formatted as `nvidia-smi` does (`GPU-8-4-4-4-12` hex digits).
    ///
    /// # Errors
    /// The driver's error, or [`crate::Error::Unavailable`] on drivers older than 11.4.
    #[doc(alias = "cuDeviceGetUuid")]
    pub fn uuid(&self) -> Result<String> {
        let h: Vec<String> = self.uuid_bytes()?.iter().map(|b| format!("{b:02x}")).collect();
        Ok(format!("GPU-{}-{}-{}-{}-{}", h[0..4].concat(), h[4..6].concat(), h[6..8].concat(), h[8..10].concat(), h[10..16].concat()))
    }

    /// `cuDeviceGetPCIBusId`.
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuDeviceGetPCIBusId")]
    pub fn pci_bus_id(&self) -> Result<String> {
        let mut buf = [0 as c_char; 64];
        // SAFETY: the buffer holds `len` bytes; the driver NUL-terminates within it.
        unsafe { self.api.cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as c_int, self.raw) }?;
        Ok(c_buf_to_string(&buf))
    }

    /// `cuDeviceGetAttribute` for one `CU_DEVICE_ATTRIBUTE_*` value (see [`crate::sys::attr`]).
    ///
    /// # Errors
    /// `CUDA_ERROR_INVALID_VALUE` for an attribute this driver does not know.
    #[doc(alias = "cuDeviceGetAttribute")]
    pub fn attribute(&self, attribute: c_int) -> Result<i32> {
        let mut v = 0;
        // SAFETY: writes one int.
        unsafe { self.api.cuDeviceGetAttribute(&mut v, attribute, self.raw) }?;
        Ok(v)
    }

    /// Whether this device can read and write `peer`'s memory directly (`cuDeviceCanAccessPeer`):
    /// the condition for [`crate::Context::enable_peer_access`]. A device is never its own peer
    /// (the driver answers 0 for `dev == peer_dev`).
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuDeviceCanAccessPeer")]
    pub fn can_access_peer(&self, peer: &Device) -> Result<bool> {
        let mut v = 0;
        // SAFETY: writes one int; both handles come from cuDeviceGet.
        unsafe { self.api.cuDeviceCanAccessPeer(&mut v, self.raw, peer.raw) }?;
        Ok(v != 0)
    }

    /// Compute capability (major, minor).
    ///
    /// # Errors
    /// The driver's error.
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        Ok((self.attribute(attr::COMPUTE_CAPABILITY_MAJOR)?, self.attribute(attr::COMPUTE_CAPABILITY_MINOR)?))
    }

    /// `cuDeviceTotalMem`, bytes.
    ///
    /// # Errors
    /// The driver's error.
    #[doc(alias = "cuDeviceTotalMem")]
    pub fn total_memory(&self) -> Result<usize> {
        let mut b = 0usize;
        // SAFETY: writes one size_t.
        unsafe { self.api.cuDeviceTotalMem(&mut b, self.raw) }?;
        Ok(b)
    }

    /// All attributes shown by `info` and the overlay. Attributes a driver does not know read as 0.
    ///
    /// # Errors
    /// The driver's error for name, PCI bus id or total memory.
    pub fn info(&self) -> Result<DeviceInfo> {
        let a = |x| self.attribute(x).unwrap_or(0);
        Ok(DeviceInfo {
            ordinal: self.ordinal,
            name: self.name()?,
            uuid: self.uuid().ok(),
            pci_bus_id: self.pci_bus_id()?,
            compute_capability: self.compute_capability()?,
            total_memory_bytes: self.total_memory()?,
            multiprocessors: a(attr::MULTIPROCESSOR_COUNT),
            clock_khz: a(attr::CLOCK_RATE),
            memory_clock_khz: a(attr::MEMORY_CLOCK_RATE),
            memory_bus_width_bits: a(attr::GLOBAL_MEMORY_BUS_WIDTH),
            l2_cache_bytes: a(attr::L2_CACHE_SIZE),
            max_threads_per_block: a(attr::MAX_THREADS_PER_BLOCK),
            max_threads_per_multiprocessor: a(attr::MAX_THREADS_PER_MULTIPROCESSOR),
            max_blocks_per_multiprocessor: a(attr::MAX_BLOCKS_PER_MULTIPROCESSOR),
            shared_memory_per_block_bytes: a(attr::MAX_SHARED_MEMORY_PER_BLOCK),
            shared_memory_per_block_optin_bytes: a(attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            shared_memory_per_multiprocessor_bytes: a(attr::MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
            registers_per_block: a(attr::MAX_REGISTERS_PER_BLOCK),
            warp_size: a(attr::WARP_SIZE),
            unified_addressing: a(attr::UNIFIED_ADDRESSING) != 0,
            stream_priorities_supported: a(attr::STREAM_PRIORITIES_SUPPORTED) != 0,
            async_engines: a(attr::ASYNC_ENGINE_COUNT),
            ecc_enabled: a(attr::ECC_ENABLED) != 0,
            integrated: a(attr::INTEGRATED) != 0,
            compute_mode: a(attr::COMPUTE_MODE),
            virtual_memory_management: a(attr::VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) != 0,
            posix_fd_export: a(attr::HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) != 0,
        })
    }
}

fn c_buf_to_string(buf: &[c_char]) -> String {
    // SAFETY: c_char and u8 have the same size and alignment.
    let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), buf.len()) };
    match CStr::from_bytes_until_nul(bytes) {
        Ok(c) => c.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}
