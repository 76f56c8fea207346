//! `nbody-interop` binary: a thin `main` over [`nbody_app`].
fn main() {}
