//! Where the program runs, when that puts GL out of CUDA's reach: WSL2, a container without
//! NVIDIA's GL files, a remote display (SSH X forwarding, VNC, VirtualGL, a virtual X server),
//! and TCC (Windows only).

use std::path::Path;

use super::super::env::{exists, read, Env, GlvndFiles};
use super::super::facts::ContextFact;
use super::gl::{classify, display_kind, DisplayKind, GlKind};
use super::Check;

/// The copy route, as the remedy for a window whose GL CUDA cannot share.
const COPY_ROUTE: &str = "--present copy (which --present auto takes when CUDA cannot share the window's GL) makes the frames on \
    this machine's GPU, through its EGL device, and shows them in the window; --headless needs no window";

/// The signs of WSL2 under `root` and in `env`: `/proc/version` naming Microsoft's kernel,
/// `WSL_DISTRO_NAME`, `/dev/dxg` (the GPU paravirtualization device).
pub fn wsl_signs(env: &Env, root: &Path) -> Vec<String> {
    let mut signs = Vec::new();
    if let Some(v) = read(root, "/proc/version").filter(|v| v.to_ascii_lowercase().contains("microsoft")) {
        signs.push(format!("/proc/version: {}", v.trim().chars().take(80).collect::<String>()));
    }
    if let Some(d) = env.get("WSL_DISTRO_NAME") {
        signs.push(format!("WSL_DISTRO_NAME={d}"));
    }
    if exists(root, "/dev/dxg") {
        signs.push("/dev/dxg exists".into());
    }
    signs
}

/// `wsl`: WSL2, where NVIDIA's CUDA on WSL User Guide lists OpenGL–CUDA interop among the
/// features not yet supported.
pub fn wsl(env: &Env, root: &Path) -> Check {
    let signs = wsl_signs(env, root);
    if signs.is_empty() {
        return Check::ok("wsl", "not WSL2 (/proc/version does not name Microsoft's kernel, no WSL_DISTRO_NAME, no /dev/dxg)");
    }
    Check::problem(
        "wsl",
        format!("WSL2 ({}): NVIDIA's CUDA on WSL User Guide lists OpenGL-CUDA interop under 'Features Not Yet Supported'", signs.join("; ")),
        "run the demo on Linux or Windows itself for CUDA interop; under WSL2 it runs the CPU backend",
    )
}

/// The signs of a container under `root` and in `env`: `/.dockerenv` (Docker),
/// `/run/.containerenv` (Podman), the variable `container` (Podman, systemd-nspawn), a
/// `/proc/1/cgroup` naming docker, kubepods, containerd, libpod or lxc.
pub fn container_signs(env: &Env, root: &Path) -> Vec<String> {
    let mut signs = Vec::new();
    for f in ["/.dockerenv", "/run/.containerenv"] {
        if exists(root, f) {
            signs.push(format!("{f} exists"));
        }
    }
    if let Some(c) = env.get("container") {
        signs.push(format!("container={c}"));
    }
    let cgroup = read(root, "/proc/1/cgroup").unwrap_or_default();
    if let Some(w) = ["docker", "kubepods", "containerd", "libpod", "lxc"].into_iter().find(|w| cgroup.contains(w)) {
        signs.push(format!("/proc/1/cgroup names {w}"));
    }
    signs
}

/// `container`: in a container, whether NVIDIA's GL and EGL vendor libraries and glvnd's vendor
/// file are there (the NVIDIA Container Toolkit mounts the driver's graphics libraries for the
/// `graphics` driver capability, which its documentation lists as required for OpenGL and
/// Vulkan applications). A `headless` context on an EGL device of a CUDA GPU shows NVIDIA's EGL
/// at work wherever its files are.
pub fn container(env: &Env, root: &Path, glvnd: &GlvndFiles, headless: &ContextFact) -> Check {
    let signs = container_signs(env, root);
    if signs.is_empty() {
        return Check::not_applicable("container", "no sign of a container (/.dockerenv, /run/.containerenv, container=, /proc/1/cgroup)");
    }
    let caps = env.show(&["NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_VISIBLE_DEVICES"]);
    let seen = format!("a container ({}); {caps}; {}", signs.join(", "), glvnd.summary());
    if let ContextFact::Made { gl, .. } = headless {
        if let (Some(device), Some(_)) = (&gl.egl_device, gl.egl_cuda_device) {
            return Check::ok("container", format!("{seen}; NVIDIA's EGL is at work: the headless context is on EGL device {device}"));
        }
    }
    if glvnd.has_nvidia_egl() {
        if glvnd.libglx_nvidia.is_none() {
            return Check::ok("container", format!("{seen}: the headless and copy routes have NVIDIA's EGL; a window's GLX route does not"));
        }
        return Check::ok("container", seen);
    }
    Check::problem(
        "container",
        format!("{seen}: NVIDIA's GL and EGL user-space files are missing, so GL falls to Mesa and CUDA cannot share it"),
        "start the container with the NVIDIA Container Toolkit and NVIDIA_DRIVER_CAPABILITIES including graphics (or all): its \
         documentation lists graphics as required for OpenGL and Vulkan applications ('Specialized Configurations with \
         Docker', driver capabilities); where the image lacks glvnd's vendor file, add /usr/share/glvnd/egl_vendor.d/10_nvidia.json \
         naming libEGL_nvidia.so.0",
    )
}

/// VirtualGL in `env`: `LD_PRELOAD` holding its faker (`libvglfaker`, older `librrfaker`) or
/// `VGL_ISACTIVE=1` (both set by `vglrun`); `Some(true)` for its EGL back end (`VGL_DISPLAY`
/// `egl` or a DRI device path).
pub fn virtualgl(env: &Env) -> Option<bool> {
    let preload = env.get("LD_PRELOAD").unwrap_or_default();
    let active = preload.contains("libvglfaker") || preload.contains("librrfaker") || env.get("VGL_ISACTIVE") == Some("1");
    let vgl_display = env.get("VGL_DISPLAY").unwrap_or_default().trim();
    active.then(|| vgl_display.eq_ignore_ascii_case("egl") || vgl_display.starts_with("/dev/dri"))
}

/// SSH X forwarding in `env`: an SSH session (`SSH_CONNECTION` or `SSH_CLIENT`) whose `DISPLAY`
/// names a host (`localhost:10.0`), as sshd's X forwarding sets it.
pub fn ssh_forwarding(env: &Env) -> bool {
    let display = env.get("DISPLAY").unwrap_or_default();
    let host = display.split(':').next().unwrap_or_default();
    (env.is_set("SSH_CONNECTION") || env.is_set("SSH_CLIENT")) && display.contains(':') && !host.is_empty() && host != "unix"
}

/// `remote-display`: a display that is not this machine's GPU: SSH X forwarding, a VNC session
/// (`VNCDESKTOP`, set by the vncserver scripts), VirtualGL (whose EGL back end the register call
/// fails under), or an X server that offers only software GL (Xvfb, Xvnc).
pub fn remote_display(env: &Env, w: &ContextFact) -> Check {
    if display_kind(env) == DisplayKind::None {
        return Check::not_applicable("remote-display", "no display");
    }
    let vars = env.show(&["DISPLAY", "WAYLAND_DISPLAY", "SSH_CONNECTION", "VNCDESKTOP", "VGL_DISPLAY", "LD_PRELOAD"]);
    let gl = match w {
        ContextFact::Made { gl, .. } => Some(gl),
        _ => None,
    };
    let kind = gl.map(|g| classify(&g.vendor, &g.renderer));
    let renderer = gl.map_or_else(|| "no window GL".to_string(), |g| format!("GL_RENDERER={}", g.renderer));
    match virtualgl(env) {
        Some(true) => {
            return Check::problem(
                "remote-display",
                format!("VirtualGL with its EGL back end ({vars}; {renderer})"),
                format!(
                    "CUDA's GL register call fails under VirtualGL's EGL back end with error 999 (unknown error), as reported to \
                     VirtualGL (https://github.com/VirtualGL/virtualgl/issues/209): run without vglrun ({COPY_ROUTE}), or use \
                     VirtualGL's GLX back end (VGL_DISPLAY naming an X server that the NVIDIA driver drives)"
                ),
            )
        }
        Some(false) if kind == Some(GlKind::Nvidia) => {
            return Check::ok("remote-display", format!("VirtualGL with its GLX back end ({vars}): the window's GL is NVIDIA's ({renderer})"))
        }
        Some(false) => return Check::problem("remote-display", format!("VirtualGL with its GLX back end ({vars}; {renderer})"), COPY_ROUTE),
        None => {}
    }
    if ssh_forwarding(env) {
        return Check::problem(
            "remote-display",
            format!("SSH X forwarding ({vars}): the window's GL is the remote X server's, not this machine's GPU ({renderer})"),
            COPY_ROUTE,
        );
    }
    if let Some(v) = env.get("VNCDESKTOP").filter(|_| kind != Some(GlKind::Nvidia)) {
        return Check::problem("remote-display", format!("a VNC session (VNCDESKTOP={v}; {renderer})"), COPY_ROUTE);
    }
    if kind == Some(GlKind::MesaSoftware) {
        return Check::problem(
            "remote-display",
            format!("the X server offers only software GL ({renderer}; {vars}): a virtual or remote X server (Xvfb, Xvnc), or no GPU driver behind the display"),
            COPY_ROUTE,
        );
    }
    Check::ok("remote-display", format!("no sign of a remote display ({vars}; {renderer})"))
}

/// `tcc`: the TCC driver model (Windows): with every GPU in TCC, `cuGLGetDevices` finds no
/// device for a GL context. Not applicable on Linux, which has no driver models.
pub fn tcc(os: &str) -> Check {
    if os == "windows" {
        Check::not_applicable(
            "tcc",
            "not read by this build: nvidia-smi shows each GPU's driver model (TCC or WDDM); a GPU in TCC serves no GL context",
        )
    } else {
        Check::not_applicable("tcc", format!("TCC and WDDM are Windows driver models: not applicable on {os}"))
    }
}
