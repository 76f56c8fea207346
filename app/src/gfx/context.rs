//! GL contexts: a headless context on an EGL device, and a windowed context (glutin-winit).
//!
//! Both ask for desktop GL 3.3 core first and fall back to OpenGL ES 3.0; the shaders are written
//! for both (the `#version` line is chosen at load time, see `gfx::shaders`).
//!
//! # Headless: which EGL device
//! On a GPU machine the EGL device list holds NVIDIA's devices (extension `EGL_NV_device_cuda`)
//! and, next to them, Mesa's software device. This program makes its CUDA context on the GPU that
//! runs its GL context (so that a map needs no copy between GPUs: its choice, not a rule of the
//! API), so [`HeadlessContext::new`] explicitly uses the EGL *device*
//! platform (`EGL_EXT_platform_device`) and tries first the device whose `EGL_CUDA_DEVICE_NV`
//! equals the wanted CUDA ordinal, then every other device in enumeration order (on a machine
//! without a GPU that is Mesa's software device, `EGL_MESA_device_software`).
//!
//! Mesa's surfaceless *platform* (`EGL_PLATFORM=surfaceless`) is not a fallback here: glutin 0.32
//! only opens device, X11, Wayland, GBM and Android displays, and Mesa versions that have the
//! surfaceless platform (≥ 21) also expose the software EGL device used above.

use std::ffi::{c_void, CStr};
use std::num::NonZeroU32;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _};
use glutin::api::egl;
use glutin::config::{Api, ConfigSurfaceTypes, ConfigTemplateBuilder};
use glutin::context::{ContextApi, ContextAttributesBuilder, GlProfile, Version};
use glutin::display::{GetDisplayExtensions as _, GlDisplay as _};
use glutin::prelude::{NotCurrentGlContext as _, PossiblyCurrentGlContext as _};
use glutin::surface::{PbufferSurface, SurfaceAttributesBuilder};

use super::gl::{CurrentContext, Gl};
use super::GlInfo;

/// CUDA device ordinal whose EGL device a headless run prefers (see [`HeadlessContext::new`]).
pub const HEADLESS_CUDA_DEVICE: i32 = 0;

/// `EGL_CUDA_DEVICE_NV` (extension `EGL_NV_device_cuda`): the CUDA ordinal of an EGL device.
pub const EGL_CUDA_DEVICE_NV: i32 = 0x323A;

/// True when the loader resolves the query-object entry points that glow calls for timer
/// queries: glow calls the core `glGetQueryObject*` when `glGetQueryBufferObjectiv` resolved, else
/// the `…EXT` names. Calling one that did not resolve would panic inside glow.
pub fn query_fns_loaded(mut loader: impl FnMut(&CStr) -> *const c_void) -> bool {
    if !loader(c"glGetQueryBufferObjectiv").is_null() {
        return !loader(c"glGetQueryObjectuiv").is_null() && !loader(c"glGetQueryObjectui64v").is_null();
    }
    !loader(c"glGetQueryObjectuivEXT").is_null() && !loader(c"glGetQueryObjectui64vEXT").is_null()
}

/// True when the environment variable `NBODY_GL_API=gles` asks to skip desktop GL and use the
/// OpenGL ES 3.0 fallback directly (to test the GLES path on a machine that has desktop GL).
pub fn force_gles() -> bool {
    std::env::var("NBODY_GL_API").is_ok_and(|v| v.eq_ignore_ascii_case("gles"))
}

/// The context attribute sets tried in order: GL 3.3 core, then GLES 3.0 (only GLES 3.0 with
/// [`force_gles`]).
fn context_attempts() -> Vec<(Api, glutin::context::ContextAttributes, &'static str)> {
    let all = vec![
        (
            Api::OPENGL,
            ContextAttributesBuilder::new().with_context_api(ContextApi::OpenGl(Some(Version::new(3, 3)))).with_profile(GlProfile::Core).build(None),
            "OpenGL 3.3 core",
        ),
        (Api::GLES3, ContextAttributesBuilder::new().with_context_api(ContextApi::Gles(Some(Version::new(3, 0)))).build(None), "OpenGL ES 3.0"),
    ];
    all.into_iter().skip(usize::from(force_gles())).collect()
}

/// A headless GL context on an EGL device, current on the creating thread.
///
/// The EGL objects of a headless context. Field order is drop order: the EGL context, then its
/// pbuffer (if any), then the EGL display.
struct EglParts {
    context: egl::context::PossiblyCurrentContext,
    pbuffer: Option<egl::surface::Surface<PbufferSurface>>,
    _display: egl::display::Display,
}

impl EglParts {
    /// eglMakeCurrent of the context again, with its pbuffer or surfaceless.
    fn make_current(&self) -> glutin::error::Result<()> {
        match &self.pbuffer {
            Some(p) => self.context.make_current(p),
            None => self.context.make_current_surfaceless(),
        }
    }
}

/// Makes the context current again when dropped (also when the closure of
/// [`HeadlessContext::without_current`] unwinds); aborts the process when it cannot, since every
/// [`Gl`] of the context would then be a false proof.
struct Recurrent<'a>(&'a EglParts);

impl Drop for Recurrent<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.0.make_current() {
            eprintln!("the headless GL context could not be made current again ({e}); its GL calls would be unsound: aborting");
            std::process::abort();
        }
    }
}

/// The EGL objects are shared by the clones of the proof ([`CurrentContext`]), which keep them
/// alive: the context goes with the last of them. GL objects made in this context must be
/// deleted before then.
pub struct HeadlessContext {
    /// The GL function table of the context, with the proof that it is current on this thread.
    current: CurrentContext,
    /// The EGL objects `current` keeps alive (the same ones), for [`HeadlessContext::without_current`].
    egl: std::rc::Rc<EglParts>,
    /// Vendor, renderer, version and the EGL device.
    pub info: GlInfo,
}

impl std::fmt::Debug for HeadlessContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeadlessContext").field("info", &self.info).finish_non_exhaustive()
    }
}

/// One EGL device with what we learnt about it.
struct Candidate {
    display: egl::display::Display,
    cuda_ordinal: Option<i32>,
    label: String,
}

impl HeadlessContext {
    /// The proof that the context is current, for GL calls.
    pub fn gl(&self) -> Gl<'_> {
        self.current.gl()
    }

    /// The owned proof (for owners such as the demo's scene, dropped before this context).
    pub fn current(&self) -> &CurrentContext {
        &self.current
    }

    /// Runs `f` with no GL context current on this thread (eglMakeCurrent with `EGL_NO_CONTEXT`,
    /// glutin's `make_not_current_in_place`), then makes this context current again — also when
    /// `f` panics. For the mistake lab's calls that break the rule "The OpenGL context whose
    /// resources are being shared has to be current to the host thread making any OpenGL
    /// interoperability API calls" (CUDA C++ Programming Guide).
    ///
    /// The [`Gl`] proof stays sound: `f` is `Send`, and neither a `Gl`, a [`CurrentContext`] nor
    /// a reference to one is `Send`, so `f` can make no GL call through them while the context
    /// is not current (no `CurrentContext` is kept in a thread-local or static, where `f` could
    /// reach it); nothing else runs on this thread meanwhile, and no other thread holds a proof
    /// of this context.
    ///
    /// # Errors
    /// The release failed (`f` did not run; the context is still current).
    ///
    /// # Panics
    /// Aborts the process when the context cannot be made current again.
    pub fn without_current<R>(&self, f: impl FnOnce() -> R + Send) -> anyhow::Result<R> {
        self.egl.context.make_not_current_in_place().context("eglMakeCurrent(EGL_NO_CONTEXT)")?;
        let again = Recurrent(&self.egl);
        let r = f();
        drop(again);
        Ok(r)
    }

    /// Make a headless context, preferring the EGL device of CUDA device `cuda_ordinal`.
    ///
    /// # Errors
    /// No EGL device gave a GL 3.3 core or GLES 3.0 context; the message lists what each
    /// attempt answered.
    pub fn new(cuda_ordinal: i32) -> anyhow::Result<Self> {
        let mut failures = Vec::new();
        match Self::candidates() {
            Ok(mut candidates) => {
                // Stable sort: the wanted CUDA device first, every other device keeps its place.
                candidates.sort_by_key(|c| c.cuda_ordinal != Some(cuda_ordinal));
                for c in candidates {
                    match Self::on_display(c.display, Some(c.label.clone()), c.cuda_ordinal) {
                        Ok(ctx) => {
                            tracing::info!(device = %c.label, "headless GL on EGL device");
                            return Ok(ctx);
                        }
                        Err(e) => {
                            tracing::debug!(device = %c.label, error = %format!("{e:#}"), "EGL device gave no context");
                            failures.push(format!("EGL device {}: {e:#}", c.label));
                        }
                    }
                }
            }
            Err(e) => failures.push(format!("EGL device enumeration: {e:#}")),
        }
        bail!(
            "no headless GL context could be made (headless GL needs EGL_EXT_platform_device: the NVIDIA \
             driver's EGL, or Mesa ≥ 21 with its software device):\n  {}",
            failures.join("\n  ")
        )
    }

    fn candidates() -> anyhow::Result<Vec<Candidate>> {
        let devices: Vec<_> = egl::device::Device::query_devices().context("eglQueryDevicesEXT")?.collect();
        if devices.is_empty() {
            bail!("eglQueryDevicesEXT found no device");
        }
        let mut out = Vec::new();
        for (i, device) in devices.into_iter().enumerate() {
            // SAFETY: `with_device` needs a `Some` handle to be a valid DRM handle; we pass `None`,
            // and `device` came from eglQueryDevicesEXT of the same (static) EGL library.
            let display = match unsafe { egl::display::Display::with_device(&device, None) } {
                Ok(d) => d,
                Err(e) => {
                    tracing::debug!(index = i, error = %e, "eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT) failed");
                    continue;
                }
            };
            let cuda_ordinal = cuda_ordinal_of(&display, &device);
            let mut label = match (device.name(), device.vendor()) {
                (Some(n), Some(v)) => format!("#{i} {n} ({v})"),
                (Some(n), None) => format!("#{i} {n}"),
                _ if device.extensions().contains("EGL_MESA_device_software") => format!("#{i} Mesa software device"),
                _ => match device.drm_render_device_node_path().or_else(|| device.drm_device_node_path()) {
                    Some(p) => format!("#{i} {}", p.display()),
                    None => format!("#{i} unnamed device"),
                },
            };
            if let Some(o) = cuda_ordinal {
                label.push_str(&format!(", CUDA device {o}"));
            }
            out.push(Candidate { display, cuda_ordinal, label });
        }
        if out.is_empty() {
            bail!("no EGL device gave an EGL display");
        }
        Ok(out)
    }

    fn on_display(display: egl::display::Display, label: Option<String>, cuda: Option<i32>) -> anyhow::Result<Self> {
        let surfaceless = display.extensions().contains("EGL_KHR_surfaceless_context");
        let mut errors = Vec::new();
        for (api, attrs, what) in context_attempts() {
            let surface_type = if surfaceless { ConfigSurfaceTypes::empty() } else { ConfigSurfaceTypes::PBUFFER };
            let template = ConfigTemplateBuilder::new().with_api(api).with_surface_type(surface_type).build();
            // SAFETY: the template is fully built and the display is initialised; find_configs
            // only reads both.
            let config = match unsafe { display.find_configs(template) } {
                Ok(mut it) => match it.next() {
                    Some(c) => c,
                    None => {
                        errors.push(format!("{what}: no EGL config"));
                        continue;
                    }
                },
                Err(e) => {
                    errors.push(format!("{what}: eglChooseConfig: {e}"));
                    continue;
                }
            };
            // SAFETY: `attrs` holds no window handle (headless), and `config` belongs to `display`.
            let not_current = match unsafe { display.create_context(&config, &attrs) } {
                Ok(c) => c,
                Err(e) => {
                    errors.push(format!("{what}: eglCreateContext: {e}"));
                    continue;
                }
            };
            let (context, pbuffer) = if surfaceless {
                match not_current.make_current_surfaceless() {
                    Ok(c) => (c, None),
                    Err(e) => {
                        errors.push(format!("{what}: eglMakeCurrent (surfaceless): {e}"));
                        continue;
                    }
                }
            } else {
                let one = NonZeroU32::MIN;
                let sattrs = SurfaceAttributesBuilder::<PbufferSurface>::new().build(one.saturating_add(15), one.saturating_add(15));
                // SAFETY: the config belongs to this display and supports pbuffers (template above).
                let pbuffer = match unsafe { display.create_pbuffer_surface(&config, &sattrs) } {
                    Ok(p) => p,
                    Err(e) => {
                        errors.push(format!("{what}: eglCreatePbufferSurface: {e}"));
                        continue;
                    }
                };
                match not_current.make_current(&pbuffer) {
                    Ok(c) => (c, Some(pbuffer)),
                    Err(e) => {
                        errors.push(format!("{what}: eglMakeCurrent: {e}"));
                        continue;
                    }
                }
            };
            let loader = |s: &CStr| display.get_proc_address(s);
            let fns = query_fns_loaded(loader);
            // SAFETY: the context is current on this thread and the loader returns entry points
            // of that context's EGL library (eglGetProcAddress), as glow requires.
            let gl = unsafe { glow::Context::from_loader_function_cstr(|s| display.get_proc_address(s)) };
            let fns_mo = |s: &CStr| display.get_proc_address(s);
            let info = {
                // SAFETY: the context is current on this thread (made so just above).
                let g = unsafe { Gl::new(&gl) };
                GlInfo::query(g, label, cuda, fns).with_memory_object(g, fns_mo)
            };
            let egl = std::rc::Rc::new(EglParts { context, pbuffer, _display: display });
            let keep: std::rc::Rc<dyn std::any::Any> = egl.clone();
            // SAFETY: the context was made current on this thread just above and `keep` owns it.
            // Only `without_current` releases it, for a `Send` closure (which can hold no proof),
            // and makes it current again before any proof can be used (or aborts).
            let current = unsafe { CurrentContext::assume_current(Arc::new(gl), keep) };
            return Ok(Self { current, egl, info });
        }
        Err(anyhow!("{}", errors.join("; ")))
    }
}

/// `EGL_CUDA_DEVICE_NV` of `device`, when it has `EGL_NV_device_cuda`.
fn cuda_ordinal_of(display: &egl::display::Display, device: &egl::device::Device) -> Option<i32> {
    if !device.extensions().contains("EGL_NV_device_cuda") {
        return None;
    }
    let api = display.egl();
    if !api.QueryDeviceAttribEXT.is_loaded() {
        return None;
    }
    let mut value: isize = -1;
    // SAFETY: eglQueryDeviceAttribEXT is loaded (checked above), the device handle comes from
    // eglQueryDevicesEXT of this EGL library, EGL_CUDA_DEVICE_NV is a valid attribute because the
    // device lists EGL_NV_device_cuda, and `value` is a live EGLAttrib it may write.
    let ok = unsafe { api.QueryDeviceAttribEXT(device.raw_device(), EGL_CUDA_DEVICE_NV, &mut value) };
    if ok == 0 {
        return None;
    }
    i32::try_from(value).ok()
}
