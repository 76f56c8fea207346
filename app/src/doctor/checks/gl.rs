//! The GL side: the headless EGL device of the CUDA GPU, the display server, the window's GL
//! (named by what runs it), `cuGLGetDevices` on it, and what PRIME render offload would change.

use super::super::env::{Env, GlvndFiles};
use super::super::facts::{ContextFact, CudaFact, GlSeen, SharesFact};
use super::{Check, Verdict};

/// What runs a GL context, read from `GL_VENDOR` and `GL_RENDERER`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlKind {
    /// The NVIDIA driver (`GL_VENDOR` "NVIDIA Corporation").
    Nvidia,
    /// Mesa's software rasterizers (llvmpipe, softpipe): no GPU at all.
    MesaSoftware,
    /// Mesa's D3D12 driver (WSL2's WSLg: `GL_RENDERER` "D3D12 (…)", `GL_VENDOR` "Microsoft
    /// Corporation"), even over an NVIDIA GPU.
    WslD3d12,
    /// Mesa's nouveau driver on an NVIDIA GPU (not NVIDIA's driver).
    Nouveau,
    /// An Intel GPU (Mesa's iris, crocus, i915).
    Intel,
    /// An AMD GPU (Mesa's radeonsi, or AMD's driver).
    Amd,
    /// Anything else.
    Other,
}

impl GlKind {
    /// How the kind is named in evidence.
    pub fn describe(self) -> &'static str {
        match self {
            GlKind::Nvidia => "NVIDIA",
            GlKind::MesaSoftware => "Mesa's software rasterizer (no GPU)",
            GlKind::WslD3d12 => "Mesa's D3D12 driver of WSL2",
            GlKind::Nouveau => "Mesa's nouveau driver (not NVIDIA's)",
            GlKind::Intel => "an Intel GPU",
            GlKind::Amd => "an AMD GPU",
            GlKind::Other => "another GL driver",
        }
    }
}

/// The kind of GL `vendor` and `renderer` (`GL_VENDOR`, `GL_RENDERER`) name.
pub fn classify(vendor: &str, renderer: &str) -> GlKind {
    let (v, r) = (vendor.to_ascii_lowercase(), renderer.to_ascii_lowercase());
    let any = |words: &[&str]| words.iter().any(|w| v.contains(w) || r.contains(w));
    if v.starts_with("nvidia") {
        GlKind::Nvidia
    } else if r.starts_with("d3d12") || v.contains("microsoft") {
        GlKind::WslD3d12
    } else if any(&["llvmpipe", "softpipe", "swrast", "lavapipe"]) {
        GlKind::MesaSoftware
    } else if any(&["nouveau"]) {
        GlKind::Nouveau
    } else if any(&["intel"]) {
        GlKind::Intel
    } else if any(&["amd", "radeon", "ati technologies"]) {
        GlKind::Amd
    } else {
        GlKind::Other
    }
}

/// `GL_VENDOR=…, GL_RENDERER=… (kind)`.
pub fn gl_line(gl: &GlSeen) -> String {
    format!("GL_VENDOR={}, GL_RENDERER={} ({})", gl.vendor, gl.renderer, classify(&gl.vendor, &gl.renderer).describe())
}

/// What `cuGLGetDevices` said, in words.
pub fn shares_line(s: &SharesFact) -> String {
    match s {
        SharesFact::NoCuda(why) => format!("cuGLGetDevices not asked: {why}"),
        SharesFact::Lists(d) if d.is_empty() => "cuGLGetDevices lists no CUDA device for it".into(),
        SharesFact::Lists(d) => format!("cuGLGetDevices lists CUDA device {}", d.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")),
        SharesFact::Fails(e) => format!("cuGLGetDevices failed: {e}"),
    }
}

/// The remedy when glvnd has no NVIDIA EGL to offer.
const NVIDIA_EGL: &str = "install NVIDIA's EGL vendor library libEGL_nvidia.so.0 (it comes with the NVIDIA driver's GL \
    libraries) and glvnd's vendor file naming it (/usr/share/glvnd/egl_vendor.d/10_nvidia.json); in a container, start it \
    with NVIDIA_DRIVER_CAPABILITIES including graphics (see the container check)";

/// `egl-device`: the headless context `--headless` (and the copy route) makes, on the EGL device
/// whose `EGL_CUDA_DEVICE_NV` is a CUDA device, and `cuGLGetDevices` on it.
pub fn egl_device(c: &CudaFact, h: &ContextFact, glvnd: &GlvndFiles) -> Check {
    match h {
        ContextFact::NotTried(why) => Check::not_applicable("egl-device", why.clone()),
        ContextFact::Failed(e) => Check::problem(
            "egl-device",
            format!("no headless GL context: {e}; {}", glvnd.summary()),
            format!("{NVIDIA_EGL}; without a GPU, Mesa's EGL (libegl-mesa0) gives its software device"),
        ),
        ContextFact::Made { gl, shares } => {
            if c.devices().is_empty() {
                return Check::not_applicable("egl-device", format!("{}; no CUDA device to match", headless_line(gl, shares)));
            }
            egl_match(gl, shares, glvnd)
        }
    }
}

/// `headless GL on EGL device …: GL_VENDOR=…, GL_RENDERER=… (kind); cuGLGetDevices …`.
fn headless_line(gl: &GlSeen, shares: &SharesFact) -> String {
    let device = gl.egl_device.clone().unwrap_or_else(|| "an unnamed EGL device".into());
    format!("headless GL on EGL device {device}: {}; {}", gl_line(gl), shares_line(shares))
}

/// `egl-device` on a headless context that was made (`gl`, with `shares` from
/// `cuGLGetDevices` on it), where there is a CUDA device to match: ok when its EGL device
/// reports a CUDA device (`EGL_CUDA_DEVICE_NV`) that shares it.
pub fn egl_match(gl: &GlSeen, shares: &SharesFact, glvnd: &GlvndFiles) -> Check {
    let seen = headless_line(gl, shares);
    match gl.egl_cuda_device {
        Some(o) if shares.shares() => {
            let note = if o != 0 { "; CUDA device 0 has no EGL device of its own: the headless route runs on this one" } else { "" };
            Check::ok("egl-device", format!("{seen} (EGL_CUDA_DEVICE_NV = {o}){note}"))
        }
        Some(o) => Check::problem(
            "egl-device",
            format!("{seen} (EGL_CUDA_DEVICE_NV = {o})"),
            "the EGL device belongs to the GPU but CUDA cannot share its context: the driver's EGL and CUDA libraries \
             should come from the same driver installation (nvidia-smi shows its version)",
        ),
        None => {
            let remedy = if glvnd.has_nvidia_egl() {
                "NVIDIA's EGL files are there, yet no EGL device reports a CUDA device: check that \
                 __EGL_VENDOR_LIBRARY_FILENAMES or __EGL_VENDOR_LIBRARY_DIRS (when set) include NVIDIA's vendor file, and \
                 that libEGL_nvidia.so.0 comes from the same driver as libcuda.so.1"
                    .to_string()
            } else {
                NVIDIA_EGL.to_string()
            };
            Check::problem("egl-device", format!("{seen}; no EGL device reports a CUDA device; {}", glvnd.summary()), remedy)
        }
    }
}

/// The display server named by `env`: Wayland, X11, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisplayKind {
    /// `WAYLAND_DISPLAY` (or `WAYLAND_SOCKET`) is set.
    Wayland,
    /// `DISPLAY` is set.
    X11,
    /// Neither.
    None,
}

/// The display server `env` names (Wayland first, as winit tries it).
pub fn display_kind(env: &Env) -> DisplayKind {
    if env.is_set("WAYLAND_DISPLAY") || env.is_set("WAYLAND_SOCKET") {
        DisplayKind::Wayland
    } else if env.is_set("DISPLAY") {
        DisplayKind::X11
    } else {
        DisplayKind::None
    }
}

/// `display`: the display server (`DISPLAY`, `WAYLAND_DISPLAY`, `XDG_SESSION_TYPE`).
pub fn display(env: &Env) -> Check {
    let vars = env.show(&["WAYLAND_DISPLAY", "DISPLAY", "XDG_SESSION_TYPE"]);
    match display_kind(env) {
        DisplayKind::Wayland => Check::ok("display", format!("Wayland ({vars})")),
        DisplayKind::X11 => Check::ok("display", format!("X11 ({vars})")),
        DisplayKind::None => Check::new(
            "display",
            Verdict::NotApplicable,
            format!("no display server ({vars}): the demo's window cannot open"),
            "run with --headless (no display needed), or set DISPLAY or WAYLAND_DISPLAY to a running display server",
        ),
    }
}

/// `window-gl`: the vendor and renderer of the GL context a window gets (the native route: GLX,
/// then EGL on X11; EGL on Wayland), named by what runs it.
pub fn window_gl(w: &ContextFact) -> Check {
    match w {
        ContextFact::NotTried(why) => Check::not_applicable("window-gl", why.clone()),
        ContextFact::Failed(e) => Check::problem(
            "window-gl",
            format!("no GL context for a window: {e}"),
            "install the GL driver of the GPU that drives the display (NVIDIA: libGLX_nvidia.so.0 and libEGL_nvidia.so.0); \
             --present copy needs no GL in the window, --headless no window",
        ),
        ContextFact::Made { gl, .. } => {
            let kind = classify(&gl.vendor, &gl.renderer);
            let line = format!("{}, GL_VERSION={}", gl_line(gl), gl.version);
            let remedy = match kind {
                GlKind::Nvidia => return Check::ok("window-gl", line),
                GlKind::MesaSoftware => {
                    "the display's X server offers no GPU GL (Xvfb, a VNC server, X forwarding), or the NVIDIA GL library is \
                     missing: --present copy (which --present auto takes) makes the frames on the GPU's EGL device"
                }
                GlKind::WslD3d12 => "WSL2: see the wsl check",
                GlKind::Nouveau => "the GPU runs Mesa's nouveau driver: CUDA needs NVIDIA's own driver",
                GlKind::Intel | GlKind::Amd | GlKind::Other => {
                    "the display runs on another GPU than the NVIDIA one: PRIME render offload puts the window's GL on the NVIDIA \
                     GPU (see the prime check), or --present copy makes the frames on the NVIDIA GPU's EGL device"
                }
            };
            Check::problem("window-gl", format!("{line}: CUDA can share only a GL context of the NVIDIA driver"), remedy)
        }
    }
}

/// `gl-devices`: `cuGLGetDevices` with the window's GL context current, and which CUDA device
/// it names (with several GPUs, the window's GPU need not be CUDA device 0).
pub fn gl_devices(c: &CudaFact, w: &ContextFact) -> Check {
    let ContextFact::Made { gl, shares } = w else {
        return Check::not_applicable("gl-devices", "no window GL context to ask about");
    };
    match shares {
        SharesFact::NoCuda(why) => Check::not_applicable("gl-devices", format!("CUDA is not there to ask: {why}")),
        SharesFact::Lists(d) if d.is_empty() => Check::problem(
            "gl-devices",
            format!("{} ({})", shares_line(shares), gl_line(gl)),
            "the window's GL must run on the NVIDIA GPU (see window-gl and prime); --present copy works without it",
        ),
        SharesFact::Lists(d) => {
            let mut line = format!("{} ({})", shares_line(shares), gl_line(gl));
            if !d.contains(&0) && c.devices().len() > 1 {
                line.push_str("; not CUDA device 0: the demo makes its CUDA context on the device listed here");
            }
            Check::ok("gl-devices", line)
        }
        SharesFact::Fails(e) => Check::problem(
            "gl-devices",
            format!("cuGLGetDevices failed: {e} ({})", gl_line(gl)),
            "CUDA_ERROR_OPERATING_SYSTEM (304) or CUDA_ERROR_UNKNOWN (999) here mean CUDA cannot use this GL context: the \
             window-gl, prime, wsl and remote-display checks name the usual causes; --present copy avoids the window's GL",
        ),
    }
}

/// `prime`: where NVIDIA's GL vendor library is installed but the window's GL is another
/// GPU's, what PRIME render offload would change (NVIDIA driver README, "PRIME Render Offload":
/// `__NV_PRIME_RENDER_OFFLOAD=1`, and for GLX also `__GLX_VENDOR_LIBRARY_NAME=nvidia`; it needs
/// an X.Org server with the NVIDIA GPU as a GPU screen, provider "NVIDIA-G0").
pub fn prime(env: &Env, glvnd: &GlvndFiles, w: &ContextFact) -> Check {
    let asked = env.show(&["__NV_PRIME_RENDER_OFFLOAD", "__GLX_VENDOR_LIBRARY_NAME", "__EGL_VENDOR_LIBRARY_FILENAMES"]);
    let ContextFact::Made { gl, .. } = w else {
        return Check::not_applicable("prime", format!("no window GL context ({asked})"));
    };
    let kind = classify(&gl.vendor, &gl.renderer);
    let installed: Vec<&str> = [&glvnd.libglx_nvidia, &glvnd.libegl_nvidia].into_iter().flatten().map(String::as_str).collect();
    match kind {
        GlKind::Nvidia => Check::ok("prime", format!("the window's GL is already NVIDIA's ({asked})")),
        _ if installed.is_empty() => {
            Check::not_applicable("prime", format!("no NVIDIA GL vendor library is installed ({}): nothing to offload to", glvnd.summary()))
        }
        GlKind::MesaSoftware | GlKind::WslD3d12 | GlKind::Nouveau => Check::not_applicable(
            "prime",
            format!(
                "NVIDIA's GL is installed ({}) but the window's GL is {}: offload needs an X server that drives the NVIDIA GPU \
                 as a GPU screen, which this one does not look like; see remote-display and wsl",
                installed.join(", "),
                kind.describe()
            ),
        ),
        _ if env.get("__NV_PRIME_RENDER_OFFLOAD") == Some("1") => Check::problem(
            "prime",
            format!("PRIME render offload is asked for ({asked}), yet the window's GL is {} ({})", kind.describe(), gl.renderer),
            "the X server has no NVIDIA GPU screen: `xrandr --listproviders` should list NVIDIA-G0 (NVIDIA driver README, \
             'PRIME Render Offload'); or use --present copy",
        ),
        _ => Check::problem(
            "prime",
            format!(
                "NVIDIA's GL vendor library is installed ({}) but the window's GL is {} ({}); {asked}",
                installed.join(", "),
                kind.describe(),
                gl.renderer
            ),
            "run with __NV_PRIME_RENDER_OFFLOAD=1 __GLX_VENDOR_LIBRARY_NAME=nvidia (GLX; for EGL __NV_PRIME_RENDER_OFFLOAD=1, \
             or __EGL_VENDOR_LIBRARY_FILENAMES naming NVIDIA's 10_nvidia.json), as the NVIDIA driver README's 'PRIME Render \
             Offload' describes: the window's GL then runs on the NVIDIA GPU; or --present copy",
        ),
    }
}
