//! Graphics: GL contexts (headless EGL device and windowed glutin-winit), the body renderer, the
//! orbit camera and screenshots.
//!
//! Everything here runs on the thread whose GL context is current, and every function that makes
//! GL calls takes the proof of it, a [`gl::Gl`]. The frame shape the demo drives is: `simulate`
//! (no GL drawing) → UI pass (no GL) → [`renderer::Renderer::draw`] into a
//! [`target::RenderTarget`] → egui paint → present / finish.

pub mod buffers;
pub mod camera;
pub mod clock;
pub mod context;
pub mod copy_window;
pub mod density;
pub mod display_loss;
pub mod fence;
pub mod gl;
pub mod gl_semaphore;
pub mod gpu_timer;
pub mod memory_object;
pub mod present;
pub mod readback;
pub mod renderer;
pub mod screenshot;
mod shaders;
pub mod target;
mod tonemap;
pub mod vulkan;
pub mod window;

use gl::Gl;

/// Facts about the current GL context, for messages, the overlay and backend selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlInfo {
    /// `GL_VENDOR`, e.g. `"NVIDIA Corporation"` or `"Mesa"`.
    pub vendor: String,
    /// `GL_RENDERER`, e.g. `"NVIDIA H200/PCIe/SSE2"` or `"llvmpipe (LLVM 19.1.7, 256 bits)"`.
    pub renderer: String,
    /// `GL_VERSION` string.
    pub version: String,
    /// True for an OpenGL ES context (the GLES 3.0 fallback), false for desktop GL core.
    pub is_gles: bool,
    /// The EGL device the headless context runs on (name, vendor, and the CUDA ordinal when the
    /// device reports `EGL_CUDA_DEVICE_NV`); `None` for windowed contexts.
    pub egl_device: Option<String>,
    /// CUDA device ordinal of the EGL device (`EGL_CUDA_DEVICE_NV`, from `EGL_NV_device_cuda`);
    /// `None` when windowed or when the device is not a CUDA device.
    pub egl_cuda_device: Option<i32>,
    /// True when GL timer queries (`GL_TIME_ELAPSED`) can be used: desktop GL ≥ 3.3 or
    /// `ARB_timer_query`, or GLES with `EXT_disjoint_timer_query`, and the query-object entry
    /// points resolved.
    pub timer_query: bool,
    /// The `GL_EXT_memory_object(_fd)` entry points of this context (loaded by
    /// [`GlInfo::with_memory_object`]), or why there are none (e.g. `"GL_EXT_memory_object_fd
    /// missing on llvmpipe (…)"`). The CUDA backend's external-memory storage needs them.
    pub memory_object: Result<std::sync::Arc<memory_object::MemoryObjectFns>, String>,
    /// The `GL_EXT_semaphore(_fd)` entry points (loaded with the memory-object table), or why
    /// there are none. External-memory storage orders CUDA and GL with them where it can
    /// (`--external-sync`).
    pub semaphore: Result<std::sync::Arc<gl_semaphore::SemaphoreFns>, String>,
}

impl GlInfo {
    /// Read the strings of the context, which must be current on this thread.
    ///
    /// `query_fns_loaded` says whether the loader resolved the query-object entry points glow uses
    /// (see [`context::query_fns_loaded`]).
    pub fn query(gl: Gl<'_>, egl_device: Option<String>, egl_cuda_device: Option<i32>, query_fns_loaded: bool) -> Self {
        use glow::HasContext as _;
        let (vendor, renderer, version) = gl.strings();
        let v = gl.raw().version();
        let is_gles = v.is_embedded;
        let ext = gl.raw().supported_extensions();
        let timer_ext =
            if is_gles { ext.contains("GL_EXT_disjoint_timer_query") } else { (v.major, v.minor) >= (3, 3) || ext.contains("GL_ARB_timer_query") };
        Self {
            vendor,
            renderer,
            version,
            is_gles,
            egl_device,
            egl_cuda_device,
            timer_query: timer_ext && query_fns_loaded,
            memory_object: Err("the GL_EXT_memory_object entry points were not loaded for this context".into()),
            semaphore: Err("the GL_EXT_semaphore entry points were not loaded for this context".into()),
        }
    }

    /// Load the `GL_EXT_memory_object(_fd)` and `GL_EXT_semaphore(_fd)` tables with the
    /// context's `loader` (its display's `get_proc_address`) into [`GlInfo::memory_object`] and
    /// [`GlInfo::semaphore`]. The context must be current.
    pub fn with_memory_object(mut self, gl: Gl<'_>, mut loader: impl FnMut(&std::ffi::CStr) -> *const std::ffi::c_void) -> Self {
        self.memory_object = memory_object::MemoryObjectFns::load(gl, &mut loader).map(std::sync::Arc::new);
        self.semaphore = gl_semaphore::SemaphoreFns::load(gl, &mut loader).map(std::sync::Arc::new);
        if let Err(why) = &self.memory_object {
            tracing::debug!("no external-memory interop: {why}");
        }
        self
    }

    /// One line: `GL_VENDOR=…, GL_RENDERER=…, GL_VERSION=…`.
    pub fn summary(&self) -> String {
        format!("GL_VENDOR={}, GL_RENDERER={}, GL_VERSION={}", self.vendor, self.renderer, self.version)
    }
}
