//! Records the git commit the program is built from (`NBODY_GIT_COMMIT`) and whether the tracked
//! files it is built from (app, interop, kernels, shaders, the manifests) differed from it
//! (`NBODY_GIT_DIRTY`), for the provenance block of every raw result (`src/provenance.rs`); no
//! commit outside a git checkout.

use std::process::Command;

fn main() {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    if let Some(commit) = git(&["rev-parse", "--short=12", "HEAD"]) {
        println!("cargo:rustc-env=NBODY_GIT_COMMIT={commit}");
        let dirty = git(&[
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            "../interop",
            "../kernels",
            "../shaders",
            "../Cargo.toml",
            "../Cargo.lock",
        ])
        .is_some_and(|s| !s.is_empty());
        println!("cargo:rustc-env=NBODY_GIT_DIRTY={}", u8::from(dirty));
    }
    // A new commit moves HEAD's branch (or HEAD itself when detached).
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{head}");
        }
        // A change staged or committed, or an edit to the sources, can change the dirty flag.
        println!("cargo:rerun-if-changed={dir}/index");
        for src in ["src", "../interop", "../kernels", "../shaders", "../Cargo.toml", "../Cargo.lock"] {
            println!("cargo:rerun-if-changed={src}");
        }
        let packed = format!("{dir}/packed-refs");
        if std::path::Path::new(&packed).exists() {
            println!("cargo:rerun-if-changed={packed}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
