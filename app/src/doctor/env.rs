//! What the checks read of the machine besides the driver and GL: the environment variables
//! ([`Env`]) and files under a root folder (`/` on a real run, a scratch folder in tests):
//! `/proc/version`, `/.dockerenv`, glvnd's vendor files and the NVIDIA GL libraries
//! ([`GlvndFiles`]). Nothing here writes, and nothing here calls the driver.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Environment variables, by name (a snapshot of the process's, or made up in tests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// The process's environment (names and values that are not UTF-8 are read lossily).
    pub fn from_process() -> Self {
        Self::from_pairs(std::env::vars_os().map(|(k, v)| (k.to_string_lossy().into_owned(), v.to_string_lossy().into_owned())))
    }

    /// An environment of exactly these `(name, value)` pairs.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(pairs: impl IntoIterator<Item = (K, V)>) -> Self {
        Self { vars: pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect() }
    }

    /// The value of `name`, when it is set and not empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str).filter(|v| !v.trim().is_empty())
    }

    /// True when `name` is set to a value that is not empty.
    pub fn is_set(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// `name=value` for each of `names` that is set (for evidence), joined by `, `; `none of
    /// NAMES set` when none is.
    pub fn show(&self, names: &[&str]) -> String {
        let set: Vec<String> = names.iter().filter_map(|n| self.get(n).map(|v| format!("{n}={v}"))).collect();
        if set.is_empty() {
            format!("none of {} set", names.join(", "))
        } else {
            set.join(", ")
        }
    }

    /// The names of the set variables that start with `prefix`.
    pub fn names_with_prefix(&self, prefix: &str) -> Vec<&str> {
        self.vars.keys().filter(|k| k.starts_with(prefix) && self.is_set(k)).map(String::as_str).collect()
    }
}

/// `abs` (an absolute path such as `/proc/version`) under `root`.
pub fn under(root: &Path, abs: &str) -> PathBuf {
    root.join(abs.trim_start_matches('/'))
}

/// The text of `abs` under `root`, if it can be read.
pub fn read(root: &Path, abs: &str) -> Option<String> {
    std::fs::read_to_string(under(root, abs)).ok()
}

/// True when `abs` exists under `root` (a file, a folder or a device node).
pub fn exists(root: &Path, abs: &str) -> bool {
    under(root, abs).symlink_metadata().is_ok()
}

/// glvnd's default EGL vendor folders (`${sysconfdir}/glvnd/egl_vendor.d`, then
/// `${datadir}/glvnd/egl_vendor.d`, as glvnd's EGL ICD enumeration describes them with the usual
/// `/etc` and `/usr/share`).
pub const EGL_VENDOR_DIRS: [&str; 2] = ["/etc/glvnd/egl_vendor.d", "/usr/share/glvnd/egl_vendor.d"];

/// Library folders searched for the NVIDIA GL libraries after `LD_LIBRARY_PATH` and the folders
/// of `/etc/ld.so.conf.d/*.conf`.
pub const LIB_DIRS: [&str; 9] = [
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/lib64",
    "/lib",
    "/usr/lib/wsl/lib",
];

/// NVIDIA's GL and EGL vendor libraries and glvnd's EGL vendor file for them, as found on disk.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GlvndFiles {
    /// An EGL vendor JSON file that names `libEGL_nvidia` (e.g.
    /// `/usr/share/glvnd/egl_vendor.d/10_nvidia.json`), if one is where glvnd looks.
    pub egl_vendor_json: Option<String>,
    /// Where glvnd looks for EGL vendor files: the files of `__EGL_VENDOR_LIBRARY_FILENAMES`, the
    /// folders of `__EGL_VENDOR_LIBRARY_DIRS`, or [`EGL_VENDOR_DIRS`].
    pub egl_vendor_places: Vec<String>,
    /// Where `libEGL_nvidia.so.0` was found.
    pub libegl_nvidia: Option<String>,
    /// Where `libGLX_nvidia.so.0` was found.
    pub libglx_nvidia: Option<String>,
}

impl GlvndFiles {
    /// Looks for the files under `root`, honouring `__EGL_VENDOR_LIBRARY_FILENAMES`,
    /// `__EGL_VENDOR_LIBRARY_DIRS` and `LD_LIBRARY_PATH` in `env`.
    pub fn find(env: &Env, root: &Path) -> Self {
        let names_nvidia = |abs: &str| read(root, abs).is_some_and(|t| t.contains("libEGL_nvidia"));
        let (egl_vendor_json, egl_vendor_places) = if let Some(files) = env.get("__EGL_VENDOR_LIBRARY_FILENAMES") {
            let files: Vec<String> = files.split(':').filter(|f| !f.is_empty()).map(str::to_string).collect();
            (files.iter().find(|f| names_nvidia(f)).cloned(), files)
        } else {
            let dirs: Vec<String> = match env.get("__EGL_VENDOR_LIBRARY_DIRS") {
                Some(d) => d.split(':').filter(|d| !d.is_empty()).map(str::to_string).collect(),
                None => EGL_VENDOR_DIRS.iter().map(|d| d.to_string()).collect(),
            };
            let mut found = None;
            for d in &dirs {
                let mut jsons: Vec<String> = std::fs::read_dir(under(root, d))
                    .map(|it| it.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".json")).collect())
                    .unwrap_or_default();
                jsons.sort();
                if let Some(j) = jsons.iter().map(|j| format!("{}/{j}", d.trim_end_matches('/'))).find(|p| names_nvidia(p)) {
                    found = Some(j);
                    break;
                }
            }
            (found, dirs)
        };
        let dirs = lib_dirs(env, root);
        let find_lib = |name: &str| dirs.iter().map(|d| format!("{}/{name}", d.trim_end_matches('/'))).find(|p| exists(root, p));
        Self { egl_vendor_json, egl_vendor_places, libegl_nvidia: find_lib("libEGL_nvidia.so.0"), libglx_nvidia: find_lib("libGLX_nvidia.so.0") }
    }

    /// One line for evidence: each file, found where, or not found.
    pub fn summary(&self) -> String {
        let or_missing = |o: &Option<String>, what: &str| o.clone().unwrap_or_else(|| format!("no {what}"));
        format!(
            "{}; {}; {} (glvnd looks in {})",
            or_missing(&self.libegl_nvidia, "libEGL_nvidia.so.0"),
            or_missing(&self.libglx_nvidia, "libGLX_nvidia.so.0"),
            or_missing(&self.egl_vendor_json, "EGL vendor file naming libEGL_nvidia"),
            self.egl_vendor_places.join(":")
        )
    }

    /// True when NVIDIA's EGL library and the vendor file that lets glvnd find it are both there.
    pub fn has_nvidia_egl(&self) -> bool {
        self.libegl_nvidia.is_some() && self.egl_vendor_json.is_some()
    }
}

/// The library folders searched: `LD_LIBRARY_PATH`, the folders listed in
/// `/etc/ld.so.conf.d/*.conf`, then [`LIB_DIRS`].
fn lib_dirs(env: &Env, root: &Path) -> Vec<String> {
    let mut dirs: Vec<String> =
        env.get("LD_LIBRARY_PATH").map(|p| p.split(':').filter(|d| d.starts_with('/')).map(str::to_string).collect()).unwrap_or_default();
    if let Ok(it) = std::fs::read_dir(under(root, "/etc/ld.so.conf.d")) {
        let mut confs: Vec<PathBuf> = it.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "conf")).collect();
        confs.sort();
        for c in confs {
            let text = std::fs::read_to_string(c).unwrap_or_default();
            dirs.extend(text.lines().map(str::trim).filter(|l| l.starts_with('/')).map(str::to_string));
        }
    }
    dirs.extend(LIB_DIRS.iter().map(|d| d.to_string()));
    let mut seen = std::collections::BTreeSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}
