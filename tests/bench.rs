//! Tests of `nbody-interop bench` (placeholder while the bench is written).
