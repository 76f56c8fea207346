//! Proves with the compiler that the mapping guard's device pointers, arrays and surface objects
//! cannot outlive the mapping, and that a mapped resource cannot be unregistered (dropped) while
//! mapped.

#[test]
fn mapping_guard_lifetimes() {
    let t = trybuild::TestCases::new();
    t.compile_fail("../tests/compile_fail/*.rs");
}
