//! `nbody-interop doctor`: each check's logic on made-up machines (WSL2, a container without
//! NVIDIA's vendor files, SSH X forwarding, VirtualGL, a Mesa renderer, PRIME offload, no driver,
//! a driver too old for the PTX), the routes `--present auto` and `--backend auto` take, the
//! diagnosis of the CPU fallback, and the binary end to end on this machine (no GPU: exit 3,
//! every line with a verdict, the CPU backend, JSON that parses); under Xvfb in `windowed.rs`.

use std::path::PathBuf;
use std::process::Command;

use nbody_app::doctor::checks::gl::{classify, GlKind};
use nbody_app::doctor::checks::{self, cuda, gl, place, Verdict, NAMES};
use nbody_app::doctor::env::{Env, GlvndFiles};
use nbody_app::doctor::facts::{ContextFact, CudaFact, DeviceFact, DriverFact, Facts, GlSeen, JitFact, LibFact, PtxHeader, SharesFact, VulkanFact};
use nbody_app::doctor::{fallback, routes, Report, EXIT_INTEROP, EXIT_NO_INTEROP};

#[path = "common/cli.rs"]
mod cli;
#[path = "common/fake_driver.rs"]
mod fake_driver;

use cli::BIN;

/// A fresh folder standing for `/`, holding `files` (`(absolute path, contents)`).
fn root(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = cli::scratch("doctor", name);
    for (path, text) in files {
        let p = dir.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("folders");
        std::fs::write(p, text).expect("write a file");
    }
    dir
}

fn env(pairs: &[(&str, &str)]) -> Env {
    Env::from_pairs(pairs.iter().copied())
}

/// NVIDIA's GL files where a driver installs them: glvnd's vendor file and both vendor libraries.
const NVIDIA_GL_FILES: [(&str, &str); 3] = [
    ("/usr/share/glvnd/egl_vendor.d/10_nvidia.json", r#"{"file_format_version":"1.0.0","ICD":{"library_path":"libEGL_nvidia.so.0"}}"#),
    ("/usr/lib/x86_64-linux-gnu/libEGL_nvidia.so.0", ""),
    ("/usr/lib/x86_64-linux-gnu/libGLX_nvidia.so.0", ""),
];
const MESA_VENDOR_FILE: (&str, &str) = ("/usr/share/glvnd/egl_vendor.d/50_mesa.json", r#"{"ICD":{"library_path":"libEGL_mesa.so.0"}}"#);

fn gl(vendor: &str, renderer: &str) -> GlSeen {
    GlSeen { vendor: vendor.into(), renderer: renderer.into(), version: "4.5".into(), egl_device: None, egl_cuda_device: None }
}
fn llvmpipe() -> GlSeen {
    gl("Mesa", "llvmpipe (LLVM 19.1.7, 256 bits)")
}
fn nvidia() -> GlSeen {
    gl("NVIDIA Corporation", "NVIDIA H200/PCIe/SSE2")
}
fn made(gl: GlSeen, shares: SharesFact) -> ContextFact {
    ContextFact::Made { gl, shares }
}
fn h200(ordinal: i32) -> DeviceFact {
    DeviceFact { ordinal, name: "NVIDIA H200".into(), compute_capability: (9, 0), uuid: Some([7; 16]) }
}

/// A machine with no driver, Mesa's software EGL device headless, no display.
fn no_gpu(env: Env, root: PathBuf) -> Facts {
    let glvnd = GlvndFiles::find(&env, &root);
    let mut headless = llvmpipe();
    headless.egl_device = Some("#0 Mesa software device".into());
    Facts {
        env,
        root,
        os: "linux".into(),
        driver: DriverFact::Missing("no CUDA driver library could be loaded; tried: libcuda.so.1 (not found)".into()),
        cuda: CudaFact::NotTried,
        ptx: Some(PtxHeader { isa: (7, 8), target_sm: 75 }),
        jit: JitFact::NotTried,
        headless: made(headless, SharesFact::NoCuda("no driver".into())),
        window: ContextFact::NotTried("no display server".into()),
        glvnd,
        vulkan: VulkanFact::NotTried,
        cupti: LibFact::Missing("no CUPTI library could be loaded".into()),
        nccl: LibFact::Missing("no NCCL library could be loaded".into()),
    }
}

/// A GPU machine where CUDA works and the headless context is on GPU 0's EGL device.
fn gpu(env: Env, root: PathBuf) -> Facts {
    let mut f = no_gpu(env, root);
    f.driver = DriverFact::Loaded { path: "libcuda.so.1".into(), version: 13000 };
    f.cuda = CudaFact::Devices(vec![h200(0)]);
    f.jit = JitFact::Compiled { device: h200(0).label(), ms: 120.0 };
    let mut headless = nvidia();
    headless.egl_device = Some("#0 NVIDIA (NVIDIA), CUDA device 0".into());
    headless.egl_cuda_device = Some(0);
    f.headless = made(headless, SharesFact::Lists(vec![0]));
    f.vulkan = VulkanFact::Found("NVIDIA H200".into());
    f
}

#[test]
fn wsl2_is_found_by_proc_version_by_its_variable_or_by_dev_dxg() {
    let wsl = root("wsl", &[("/proc/version", "Linux version 5.15.146.1-microsoft-standard-WSL2 (root@65c757a075e2)")]);
    let c = place::wsl(&Env::default(), &wsl);
    assert_eq!(c.verdict, Verdict::Problem, "{c:?}");
    assert!(c.evidence.contains("Features Not Yet Supported") && c.evidence.contains("CUDA on WSL User Guide"), "{c:?}");
    assert!(!c.remedy.is_empty());
    let plain = root("plain", &[("/proc/version", "Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)")]);
    assert_eq!(place::wsl(&Env::default(), &plain).verdict, Verdict::Ok);
    assert_eq!(place::wsl(&env(&[("WSL_DISTRO_NAME", "Ubuntu")]), &plain).verdict, Verdict::Problem);
    let dxg = root("dxg", &[("/dev/dxg", "")]);
    assert!(place::wsl(&Env::default(), &dxg).evidence.contains("/dev/dxg"));
}

#[test]
fn a_container_without_nvidias_vendor_files_is_a_problem_and_with_them_ok() {
    let bare = root("container-bare", &[("/.dockerenv", ""), MESA_VENDOR_FILE]);
    let e = env(&[("NVIDIA_VISIBLE_DEVICES", "all")]);
    let mesa_headless = no_gpu(Env::default(), bare.clone()).headless;
    let c = place::container(&e, &bare, &GlvndFiles::find(&e, &bare), &mesa_headless);
    assert_eq!(c.verdict, Verdict::Problem, "{c:?}");
    for word in ["/.dockerenv", "no libEGL_nvidia.so.0", "NVIDIA_VISIBLE_DEVICES=all"] {
        assert!(c.evidence.contains(word), "{word} missing: {c:?}");
    }
    assert!(c.remedy.contains("NVIDIA_DRIVER_CAPABILITIES") && c.remedy.contains("graphics") && c.remedy.contains("10_nvidia.json"), "{c:?}");

    let mut files = NVIDIA_GL_FILES.to_vec();
    files.push(("/run/.containerenv", ""));
    let full = root("container-full", &files);
    let glvnd = GlvndFiles::find(&Env::default(), &full);
    assert!(glvnd.has_nvidia_egl(), "{glvnd:?}");
    assert_eq!(glvnd.egl_vendor_json.as_deref(), Some("/usr/share/glvnd/egl_vendor.d/10_nvidia.json"));
    assert_eq!(place::container(&Env::default(), &full, &glvnd, &mesa_headless).verdict, Verdict::Ok);
    // Files where the search does not look, but NVIDIA's EGL at work: the headless context says so.
    let on_gpu = gpu(Env::default(), bare.clone()).headless;
    let c = place::container(&Env::default(), &bare, &GlvndFiles::find(&Env::default(), &bare), &on_gpu);
    assert_eq!(c.verdict, Verdict::Ok, "{c:?}");
    assert!(c.evidence.contains("NVIDIA's EGL is at work"), "{c:?}");

    // glvnd reads only the files __EGL_VENDOR_LIBRARY_FILENAMES names, when it is set.
    let e = env(&[("__EGL_VENDOR_LIBRARY_FILENAMES", "/usr/share/glvnd/egl_vendor.d/50_mesa.json")]);
    assert!(!GlvndFiles::find(&e, &full).has_nvidia_egl());
    // The libraries are found through LD_LIBRARY_PATH and ld.so.conf.d too.
    let opt = root("container-opt", &[("/opt/nv/libEGL_nvidia.so.0", ""), ("/etc/ld.so.conf.d/nv.conf", "/opt/nv\n")]);
    assert_eq!(GlvndFiles::find(&Env::default(), &opt).libegl_nvidia.as_deref(), Some("/opt/nv/libEGL_nvidia.so.0"));

    let host = root("not-a-container", &[("/proc/1/cgroup", "0::/init.scope\n")]);
    assert_eq!(place::container(&Env::default(), &host, &GlvndFiles::default(), &mesa_headless).verdict, Verdict::NotApplicable);
    let k8s = root("kubepods", &[("/proc/1/cgroup", "0::/kubepods/burstable/pod1234\n")]);
    assert!(place::container(&Env::default(), &k8s, &GlvndFiles::default(), &mesa_headless).evidence.contains("kubepods"));
}

#[test]
fn ssh_x_forwarding_is_a_remote_display_even_with_an_nvidia_renderer() {
    let e = env(&[("DISPLAY", "localhost:10.0"), ("SSH_CONNECTION", "10.0.0.2 52311 10.0.0.9 22")]);
    for g in [llvmpipe(), nvidia()] {
        let c = place::remote_display(&e, &made(g, SharesFact::Lists(vec![])));
        assert_eq!(c.verdict, Verdict::Problem, "{c:?}");
        assert!(c.evidence.contains("SSH X forwarding") && c.evidence.contains("localhost:10.0"), "{c:?}");
        assert!(c.remedy.contains("--present copy"), "{c:?}");
    }
    let local = env(&[("DISPLAY", ":0"), ("SSH_CONNECTION", "10.0.0.2 52311 10.0.0.9 22")]);
    assert_eq!(place::remote_display(&local, &made(nvidia(), SharesFact::Lists(vec![0]))).verdict, Verdict::Ok);
    assert_eq!(place::remote_display(&Env::default(), &ContextFact::NotTried("no display".into())).verdict, Verdict::NotApplicable);
    let vnc = env(&[("DISPLAY", ":1"), ("VNCDESKTOP", "gpu01:1 (alice)")]);
    assert!(place::remote_display(&vnc, &made(llvmpipe(), SharesFact::Lists(vec![]))).evidence.contains("VNC"));
    // An X server with only software GL (Xvfb, Xvnc) is named from the renderer alone.
    let xvfb = place::remote_display(&env(&[("DISPLAY", ":99")]), &made(llvmpipe(), SharesFact::Lists(vec![])));
    assert_eq!(xvfb.verdict, Verdict::Problem);
    assert!(xvfb.evidence.contains("only software GL") && xvfb.evidence.contains("llvmpipe"), "{xvfb:?}");
}

#[test]
fn virtualgl_is_named_with_its_back_end() {
    let egl = env(&[("DISPLAY", ":1"), ("LD_PRELOAD", "libdlfaker.so:libvglfaker.so"), ("VGL_DISPLAY", "egl")]);
    assert_eq!(place::virtualgl(&egl), Some(true));
    let c = place::remote_display(&egl, &made(nvidia(), SharesFact::Lists(vec![])));
    assert_eq!(c.verdict, Verdict::Problem);
    assert!(c.evidence.contains("EGL back end") && c.remedy.contains("999"), "{c:?}");
    let dri = env(&[("DISPLAY", ":1"), ("VGL_ISACTIVE", "1"), ("VGL_DISPLAY", "/dev/dri/card1")]);
    assert_eq!(place::virtualgl(&dri), Some(true));
    let glx = env(&[("DISPLAY", ":1"), ("LD_PRELOAD", "/usr/lib/libvglfaker.so"), ("VGL_DISPLAY", ":0")]);
    assert_eq!(place::virtualgl(&glx), Some(false));
    assert_eq!(place::remote_display(&glx, &made(nvidia(), SharesFact::Lists(vec![0]))).verdict, Verdict::Ok);
    assert_eq!(place::virtualgl(&env(&[("DISPLAY", ":0")])), None);
}

#[test]
fn renderers_are_named_as_what_runs_them() {
    let cases = [
        ("NVIDIA Corporation", "NVIDIA H200/PCIe/SSE2", GlKind::Nvidia),
        ("Mesa", "llvmpipe (LLVM 19.1.7, 256 bits)", GlKind::MesaSoftware),
        ("VMware, Inc.", "llvmpipe (LLVM 10.0.0, 256 bits)", GlKind::MesaSoftware),
        ("Mesa/X.org", "softpipe", GlKind::MesaSoftware),
        ("Intel", "Mesa Intel(R) UHD Graphics 620 (KBL GT2)", GlKind::Intel),
        ("AMD", "AMD Radeon RX 6800 (radeonsi, navi21, LLVM 15.0.7, DRM 3.49)", GlKind::Amd),
        ("Microsoft Corporation", "D3D12 (NVIDIA GeForce RTX 3080)", GlKind::WslD3d12),
        ("nouveau", "NV194", GlKind::Nouveau),
    ];
    for (v, r, kind) in cases {
        assert_eq!(classify(v, r), kind, "{v} / {r}");
    }
    let c = gl::window_gl(&made(llvmpipe(), SharesFact::Lists(vec![])));
    assert_eq!(c.verdict, Verdict::Problem);
    assert!(c.evidence.contains("llvmpipe") && c.evidence.contains("Mesa's software rasterizer"), "{c:?}");
    assert!(c.remedy.contains("--present copy"), "{c:?}");
    let intel = gl::window_gl(&made(gl("Intel", "Mesa Intel(R) UHD Graphics 620"), SharesFact::Lists(vec![])));
    assert!(intel.evidence.contains("an Intel GPU") && intel.remedy.contains("PRIME"), "{intel:?}");
    assert_eq!(gl::window_gl(&made(nvidia(), SharesFact::Lists(vec![0]))).verdict, Verdict::Ok);
    assert_eq!(gl::window_gl(&ContextFact::NotTried("no display".into())).verdict, Verdict::NotApplicable);
}

#[test]
fn prime_offload_is_proposed_where_nvidias_gl_is_installed_but_not_in_use() {
    let laptop = root("laptop", &NVIDIA_GL_FILES);
    let glvnd = GlvndFiles::find(&Env::default(), &laptop);
    let intel = made(gl("Intel", "Mesa Intel(R) Iris(R) Xe Graphics (TGL GT2)"), SharesFact::Lists(vec![]));
    let c = gl::prime(&Env::default(), &glvnd, &intel);
    assert_eq!(c.verdict, Verdict::Problem, "{c:?}");
    assert!(c.remedy.contains("__NV_PRIME_RENDER_OFFLOAD=1") && c.remedy.contains("__GLX_VENDOR_LIBRARY_NAME=nvidia"), "{c:?}");
    assert!(c.evidence.contains("libGLX_nvidia.so.0"), "{c:?}");
    // Asked for, yet the GL is still Intel's: the X server has no NVIDIA GPU screen.
    let asked = env(&[("__NV_PRIME_RENDER_OFFLOAD", "1"), ("__GLX_VENDOR_LIBRARY_NAME", "nvidia")]);
    assert!(gl::prime(&asked, &glvnd, &intel).remedy.contains("NVIDIA-G0"));
    // Nothing to offload to without NVIDIA's libraries; nothing to change on NVIDIA's GL.
    assert_eq!(gl::prime(&Env::default(), &GlvndFiles::default(), &intel).verdict, Verdict::NotApplicable);
    assert_eq!(gl::prime(&Env::default(), &glvnd, &made(nvidia(), SharesFact::Lists(vec![0]))).verdict, Verdict::Ok);
}

#[test]
fn no_driver_is_named_and_the_routes_say_cpu() {
    let f = no_gpu(Env::default(), root("no-driver", &[MESA_VENDOR_FILE]));
    let r = Report::of(&f);
    let by_name = |n: &str| r.checks.iter().find(|c| c.name == n).unwrap_or_else(|| panic!("no check {n}"));
    assert_eq!(by_name("driver").verdict, Verdict::Problem);
    assert!(by_name("driver").remedy.contains("install the NVIDIA driver"));
    for n in ["devices", "ptx", "egl-device", "gl-devices", "vulkan", "tcc"] {
        assert_eq!(by_name(n).verdict, Verdict::NotApplicable, "{n}: {:?}", by_name(n));
    }
    assert_eq!(r.routes.window.route, "none");
    assert_eq!((r.routes.backend.route.as_str(), r.routes.headless.route.as_str()), ("cpu", "cpu"), "{:?}", r.routes);
    assert_eq!(r.routes.storage.route, "none");
    assert_eq!(r.exit, EXIT_NO_INTEROP);
}

#[test]
fn a_driver_too_old_for_the_ptx_is_a_problem_with_the_version_it_needs() {
    let embedded = PtxHeader::parse(kernels::PTX).expect("the embedded PTX's header");
    let needs = cuda::min_driver_for_ptx(embedded.isa).expect("the embedded PTX's ISA is in the table");
    let old = DriverFact::Loaded { path: "libcuda.so.1".into(), version: needs - 10 };
    let devices = CudaFact::Devices(vec![h200(0)]);
    let log = "cuModuleLoadDataEx failed: CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222): the provided PTX was compiled with an \
               unsupported toolchain.\nJIT error log:\nptxas application ptx input, line 15; fatal   : Unsupported .version";
    for jit in [JitFact::Failed(log.into()), JitFact::NotTried] {
        let c = cuda::ptx(Some(embedded), &old, &devices, &jit);
        assert_eq!(c.verdict, Verdict::Problem, "{c:?}");
        assert!(c.evidence.contains(&format!("CUDA {} or newer", cuda::cuda_version(needs))), "{c:?}");
        assert!(c.remedy.contains("update the NVIDIA driver"), "{c:?}");
    }
    assert!(cuda::ptx(Some(embedded), &old, &devices, &JitFact::Failed(log.into())).evidence.contains("Unsupported .version"));
    // The table: ISA 7.8 came with CUDA 11.8, 8.6 with 12.7, 9.0 with 13.0.
    assert_eq!(cuda::min_driver_for_ptx((7, 8)), Some(11080));
    assert_eq!(cuda::min_driver_for_ptx((8, 6)), Some(12070));
    assert_eq!(cuda::min_driver_for_ptx((9, 0)), Some(13000));
    // A GPU below the PTX's target, and a JIT that works.
    let new = DriverFact::Loaded { path: "libcuda.so.1".into(), version: 13000 };
    let pascal = CudaFact::Devices(vec![DeviceFact { compute_capability: (6, 1), ..h200(0) }]);
    assert!(cuda::ptx(Some(embedded), &new, &pascal, &JitFact::NotTried).remedy.contains("compute capability 7.5"));
    let ok = cuda::ptx(Some(embedded), &new, &devices, &JitFact::Compiled { device: "device 0".into(), ms: 80.0 });
    assert_eq!(ok.verdict, Verdict::Ok, "{ok:?}");
}

#[test]
fn the_routes_follow_present_auto() {
    // The window's GL is the GPU's: native, CUDA, map.
    let mut f = gpu(env(&[("DISPLAY", ":0")]), root("routes-native", &NVIDIA_GL_FILES));
    f.window = made(nvidia(), SharesFact::Lists(vec![0]));
    let r = routes::routes(&f);
    assert_eq!((r.window.route.as_str(), r.backend.route.as_str(), r.storage.route.as_str()), ("native", "cuda", "map"), "{r:?}");
    assert!(r.interop);
    // Xvfb on a GPU server: CUDA cannot share the window's GL, the copy route makes the frames on the EGL device.
    f.window = made(llvmpipe(), SharesFact::Lists(vec![]));
    let r = routes::routes(&f);
    assert_eq!((r.window.route.as_str(), r.backend.route.as_str()), ("copy", "cuda"), "{r:?}");
    assert!(r.window.why.contains("llvmpipe"), "{r:?}");
    assert_eq!(Report::of(&f).exit, EXIT_INTEROP);
    // No display: the headless run decides.
    f.env = Env::default();
    f.window = ContextFact::NotTried("no display server".into());
    let r = routes::routes(&f);
    assert_eq!((r.window.route.as_str(), r.backend.route.as_str(), r.headless.route.as_str()), ("none", "cuda", "cuda"), "{r:?}");
    // The PTX does not load: the CPU backend everywhere.
    f.jit = JitFact::Failed("cuModuleLoadDataEx failed".into());
    assert_eq!(routes::routes(&f).backend.route, "cpu");
    // No CUDA at all in a window: native (the copy route would gain nothing), CPU.
    let mut f = no_gpu(env(&[("DISPLAY", ":99")]), root("routes-cpu", &[]));
    f.window = made(llvmpipe(), SharesFact::NoCuda("no driver".into()));
    let r = routes::routes(&f);
    assert_eq!((r.window.route.as_str(), r.backend.route.as_str()), ("native", "cpu"), "{r:?}");
    assert_eq!(Report::of(&f).exit, EXIT_NO_INTEROP);
}

#[test]
fn the_checks_come_in_order_and_name_the_gl_device_cuda_uses() {
    let mut f = gpu(env(&[("DISPLAY", ":0")]), root("order", &NVIDIA_GL_FILES));
    f.cuda = CudaFact::Devices(vec![h200(0), h200(1)]);
    f.window = made(nvidia(), SharesFact::Lists(vec![1]));
    let all = checks::all(&f);
    assert_eq!(all.iter().map(|c| c.name).collect::<Vec<_>>(), NAMES.to_vec());
    let gl_devices = all.iter().find(|c| c.name == "gl-devices").expect("gl-devices");
    assert_eq!(gl_devices.verdict, Verdict::Ok);
    assert!(gl_devices.evidence.contains("not CUDA device 0"), "{gl_devices:?}");
    let failing = gl::gl_devices(&f.cuda, &made(nvidia(), SharesFact::Fails("CUDA_ERROR_OPERATING_SYSTEM (304)".into())));
    assert_eq!(failing.verdict, Verdict::Problem);
    assert!(failing.remedy.contains("304"), "{failing:?}");
    assert!(place::tcc("linux").evidence.contains("not applicable on linux"));
    assert_eq!(all.iter().find(|c| c.name == "egl-device").map(|c| c.verdict), Some(Verdict::Ok));
    assert_eq!(all.iter().find(|c| c.name == "vulkan").map(|c| c.verdict), Some(Verdict::Ok));
    // The headless context on Mesa's device while CUDA has a GPU: NVIDIA's EGL is missing.
    let mut bare = gpu(Env::default(), root("egl-missing", &[MESA_VENDOR_FILE]));
    bare.headless = no_gpu(Env::default(), bare.root.clone()).headless;
    let c = gl::egl_device(&bare.cuda, &bare.headless, &bare.glvnd);
    assert_eq!(c.verdict, Verdict::Problem);
    assert!(c.evidence.contains("no EGL device reports a CUDA device") && c.remedy.contains("10_nvidia.json"), "{c:?}");
}

#[test]
fn the_fallback_names_the_cause_the_checks_find() {
    let driver = DriverFact::Loaded { path: "libcuda.so.1".into(), version: 13000 };
    let cuda_ok = CudaFact::Devices(vec![h200(0)]);
    let ptx = Some(PtxHeader { isa: (7, 8), target_sm: 75 });
    let err = "CUDA cannot share this GL context: GL_VENDOR=Mesa, GL_RENDERER=llvmpipe (cuGLGetDevices lists no CUDA device for it)";
    let window = llvmpipe();
    let wsl = root("fallback-wsl", &[("/proc/version", "Linux version 5.15.153.1-microsoft-standard-WSL2")]);
    let f = fallback::explain(&Env::default(), &wsl, &driver, &cuda_ok, ptx, &window, err).expect("a cause");
    assert_eq!(f.check, "wsl");
    assert!(f.sentence().contains("remedy:"), "{f:?}");
    let docker = root("fallback-docker", &[("/.dockerenv", ""), MESA_VENDOR_FILE]);
    let mut headless = llvmpipe();
    headless.egl_device = Some("#0 Mesa software device".into());
    assert_eq!(fallback::explain(&Env::default(), &docker, &driver, &cuda_ok, ptx, &headless, err).map(|f| f.check), Some("container"));
    let ssh = env(&[("DISPLAY", "localhost:10.0"), ("SSH_CLIENT", "10.0.0.2 52311 22")]);
    let host = root("fallback-host", &[]);
    assert_eq!(fallback::explain(&ssh, &host, &driver, &cuda_ok, ptx, &window, err).map(|f| f.check), Some("remote-display"));
    assert_eq!(
        fallback::explain(&env(&[("DISPLAY", ":0")]), &host, &driver, &cuda_ok, ptx, &gl("Intel", "Mesa Intel(R) UHD 620"), err).map(|f| f.check),
        Some("window-gl")
    );
    assert_eq!(fallback::explain(&Env::default(), &host, &driver, &cuda_ok, ptx, &headless, err).map(|f| f.check), Some("egl-device"));
    let missing = DriverFact::Missing("no CUDA driver library could be loaded".into());
    assert_eq!(fallback::explain(&Env::default(), &wsl, &missing, &CudaFact::NotTried, ptx, &window, err).map(|f| f.check), Some("driver"));
    let old = DriverFact::Loaded { path: "libcuda.so.1".into(), version: 11040 };
    assert_eq!(fallback::explain(&Env::default(), &host, &old, &cuda_ok, ptx, &window, "cuModuleLoadDataEx failed").map(|f| f.check), Some("ptx"));
    assert_eq!(fallback::explain(&Env::default(), &host, &driver, &cuda_ok, ptx, &nvidia(), err), None);
    // cuInit failed: the devices, before any GL cause (the container here).
    let init = CudaFact::InitFailed("cuInit failed: CUDA_ERROR_UNKNOWN (999): unknown error".into());
    assert_eq!(fallback::explain(&Env::default(), &docker, &driver, &init, ptx, &headless, err).map(|f| f.check), Some("devices"));
}

/// The binary's output, exit status and stderr.
fn doctor(args: &[&str], vars: &[(&str, &str)]) -> (String, Option<i32>, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("doctor").args(args).env_remove("DISPLAY").env_remove("WAYLAND_DISPLAY").env_remove("WAYLAND_SOCKET");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("spawn nbody-interop doctor");
    (String::from_utf8_lossy(&o.stdout).into_owned(), o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn json_of(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{out}"))
}

#[test]
fn doctor_without_a_driver_prints_every_check_with_a_verdict_and_exits_4() {
    let no_driver = [("NBODY_CUDA_LIBRARY", "/nonexistent/libcuda.so.1")];
    let (out, code, err) = doctor(&[], &no_driver);
    assert_eq!(code, Some(i32::from(EXIT_NO_INTEROP)), "stdout:\n{out}\nstderr:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    for name in NAMES {
        let line = out.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or_else(|| panic!("no line for {name}:\n{out}"));
        let rest = line[name.len()..].trim_start();
        assert!(["ok ", "problem ", "not applicable "].iter().any(|v| rest.starts_with(v)), "no verdict on: {line}");
    }
    assert!(out.lines().any(|l| l.trim_start().starts_with("backend") && l.contains("cpu")), "the routes do not say CPU:\n{out}");
    assert!(out.contains("/nonexistent/libcuda.so.1"), "{out}");

    let (out, code, _) = doctor(&["--json"], &no_driver);
    assert_eq!(code, Some(i32::from(EXIT_NO_INTEROP)));
    let v = json_of(&out);
    let list = v["checks"].as_array().expect("checks");
    assert_eq!(list.iter().map(|c| c["name"].as_str().unwrap_or_default()).collect::<Vec<_>>(), NAMES.to_vec());
    for c in list {
        assert!(["ok", "problem", "not applicable"].contains(&c["verdict"].as_str().unwrap_or_default()), "{c}");
        assert!(c["evidence"].is_string() && c["remedy"].is_string(), "{c}");
    }
    assert_eq!(v["checks"][0]["verdict"], "problem");
    assert_eq!(v["routes"]["backend"]["route"], "cpu", "{v}");
    assert_eq!(v["routes"]["window"]["route"], "none", "{v}");
    assert_eq!(v["exit"], i64::from(EXIT_NO_INTEROP));
}

/// A copy of the stand-in driver whose `cuDriverGetVersion` says `version`.
fn fake_driver_of_version(tag: &str, version: i32) -> PathBuf {
    let so = fake_driver::build(tag, &[]);
    let dir = so.parent().expect("its folder");
    let c = std::fs::read_to_string(dir.join("fake.c")).expect("fake.c").replace("*v = 12080", &format!("*v = {version}"));
    std::fs::write(dir.join("old.c"), c).expect("old.c");
    let old = dir.join("libfakecuda-old.so");
    let st = Command::new("cc").args(["-shared", "-fPIC", "-o"]).arg(&old).arg(dir.join("old.c")).status().expect("cc");
    assert!(st.success(), "cc failed");
    old
}

/// A driver library that loads but whose every call answers CUDA_ERROR_UNKNOWN (999): the driver
/// is found, `cuInit` fails, and a version below the PTX's ISA is named.
#[test]
fn doctor_with_a_stand_in_driver_names_cuinit_and_a_version_too_old_for_the_ptx() {
    let so = fake_driver::build("doctor", &[]);
    let (out, code, err) = doctor(&["--json"], &[("NBODY_CUDA_LIBRARY", so.to_str().expect("utf-8"))]);
    assert_eq!(code, Some(i32::from(EXIT_NO_INTEROP)), "{out}\n{err}");
    let v = json_of(&out);
    let check = |n: &str| v["checks"].as_array().and_then(|l| l.iter().find(|c| c["name"] == n)).cloned().unwrap_or_default();
    assert_eq!(check("driver")["verdict"], "ok", "{v}");
    assert!(check("driver")["evidence"].as_str().is_some_and(|e| e.contains("CUDA 12.8")), "{v}");
    assert_eq!(check("devices")["verdict"], "problem", "{v}");
    assert_eq!(check("ptx")["verdict"], "not applicable", "{v}");

    let old = fake_driver_of_version("doctor-old", 11040);
    let (out, code, err) = doctor(&["--json"], &[("NBODY_CUDA_LIBRARY", old.to_str().expect("utf-8"))]);
    assert_eq!(code, Some(i32::from(EXIT_NO_INTEROP)), "{out}\n{err}");
    let v = json_of(&out);
    let ptx = v["checks"].as_array().and_then(|l| l.iter().find(|c| c["name"] == "ptx")).cloned().unwrap_or_default();
    assert_eq!(ptx["verdict"], "problem", "{v}");
    assert!(ptx["evidence"].as_str().is_some_and(|e| e.contains("CUDA 11.8 or newer") && e.contains("CUDA 11.4")), "{ptx}");
}
