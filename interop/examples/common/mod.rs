//! What the GL examples share (not an example itself): the exit with a message, and a headless
//! GL 3.3 core context on an EGL device (`EGL_EXT_platform_device`, no display or window needed).
#![allow(dead_code)] // each example uses a part

pub mod draw;
pub mod vulkan;

use std::ffi::{c_void, CStr};
use std::process::ExitCode;

use glow::HasContext as _;
use glutin::api::egl::{context::PossiblyCurrentContext, device::Device, display::Display};
use glutin::config::{Api, ConfigSurfaceTypes, ConfigTemplateBuilder};
use glutin::context::{ContextApi, ContextAttributesBuilder, GlProfile, Version};
use glutin::display::GlDisplay as _;

/// Any error of an example: no CUDA driver, no GL, a driver or GL failure.
pub type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// The process status: success, or the error printed on stderr and status 1.
pub fn exit(r: Res) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A GL context, current on this thread with no surface. Field order is drop order: the GL
/// function table, the context, its display. Drop CUDA's registrations of its objects first.
pub struct HeadlessGl {
    /// The context's GL functions.
    pub gl: glow::Context,
    _context: PossiblyCurrentContext,
    display: Display,
}

impl HeadlessGl {
    /// A context on the first EGL device that gives one, NVIDIA's devices (`EGL_NV_device_cuda`)
    /// first: CUDA can only share a context that an NVIDIA GPU runs.
    pub fn new() -> Res<Self> {
        let mut devices: Vec<Device> = Device::query_devices()?.collect();
        devices.sort_by_key(|d| !d.extensions().contains("EGL_NV_device_cuda"));
        let mut tried = Vec::new();
        for device in &devices {
            match Self::on(device) {
                Ok(gl) => return Ok(gl),
                Err(e) => tried.push(format!("{}: {e}", device.name().unwrap_or("unnamed EGL device"))),
            }
        }
        Err(format!("no EGL device gave a surfaceless GL 3.3 core context ({})", tried.join("; ")).into())
    }

    fn on(device: &Device) -> Res<Self> {
        // SAFETY: no native display handle is passed; `device` comes from eglQueryDevicesEXT.
        let display = unsafe { Display::with_device(device, None) }?;
        let template = ConfigTemplateBuilder::new().with_api(Api::OPENGL).with_surface_type(ConfigSurfaceTypes::empty()).build();
        // SAFETY: the template is complete and the display initialised; the call only reads them.
        let config = unsafe { display.find_configs(template) }?.next().ok_or("no EGL config")?;
        let api = ContextApi::OpenGl(Some(Version::new(3, 3)));
        let attrs = ContextAttributesBuilder::new().with_context_api(api).with_profile(GlProfile::Core).build(None);
        // SAFETY: the attributes name no window (headless) and `config` belongs to `display`.
        let context = unsafe { display.create_context(&config, &attrs) }?.make_current_surfaceless()?;
        // SAFETY: the context is current on this thread; the loader is its display's eglGetProcAddress.
        let gl = unsafe { glow::Context::from_loader_function_cstr(|s| display.get_proc_address(s)) };
        Ok(HeadlessGl { gl, _context: context, display })
    }

    /// An error naming the extensions of `names` that this GL lacks, if any.
    pub fn require(&self, names: &[&str]) -> Res {
        let missing: Vec<_> = names.iter().filter(|e| !self.gl.supported_extensions().contains(**e)).collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("this GL lacks {missing:?}").into())
        }
    }

    /// The GL function `name` as `F`, or an error naming it when this GL lacks it.
    ///
    /// # Safety
    /// `F` must be an `unsafe extern "system" fn` type of `name`'s prototype (Khronos `glext.h`).
    pub unsafe fn function<F: Copy>(&self, name: &CStr) -> Res<F> {
        let p = self.display.get_proc_address(name);
        if p.is_null() {
            return Err(format!("{name:?} is missing from this GL").into());
        }
        // SAFETY: `p` is the non-null address of `name` in this context's library, and `F` is a
        // function pointer (the size of `p`) of its prototype: the caller's promise.
        Ok(unsafe { std::mem::transmute_copy::<*const c_void, F>(&p) })
    }
}
