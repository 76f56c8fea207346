//! (in progress)
fn main() {}
