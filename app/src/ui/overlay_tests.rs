//! Tests of the overlay's pure parts: the simulated-time rate and the step-in-progress banner.

use super::*;
use crate::backend::StepProgress;

/// Simulated time per wall second: over the frames kept, not the last one alone.
#[test]
fn sim_time_per_wall_second_is_over_the_last_frames() {
    let mut r = SimTimeRate::default();
    assert_eq!(r.rate(), None);
    r.push(34, 0.001, 0.0);
    assert_eq!(r.rate(), None, "the first frame has no period");
    // 33 steps of 0.001 in 15 ms, then 34 in 21 ms: 0.067 time units in 36 ms.
    r.push(33, 0.001, 15.0);
    r.push(34, 0.001, 21.0);
    let got = r.rate().expect("a rate");
    assert!((got - 0.067 / 0.036).abs() < 1e-4, "{got}");
    for _ in 0..SIM_TIME_FRAMES {
        r.push(20, 0.001, 10.0);
    }
    assert!((r.rate().expect("a rate") - 2.0).abs() < 1e-4, "only the last {SIM_TIME_FRAMES} frames count");
}

#[test]
fn the_step_in_progress_banner_says_how_far_the_step_is() {
    let mut t = SimTimings::default();
    assert_eq!(step_in_progress_text(&t, true), None);
    t.parts = Some(StepProgress { done: 3, of: 23 });
    let text = step_in_progress_text(&t, true).expect("a banner");
    assert!(text.starts_with("step in progress: 3 of 23 launches"), "{text}");
    assert!(step_in_progress_text(&t, false).is_some_and(|s| s.starts_with("step in progress: 3 of 23 parts")));
    // The frame that ran the last launch shows the new positions: no banner.
    t.parts = Some(StepProgress { done: 23, of: 23 });
    assert_eq!(step_in_progress_text(&t, true), None);
}

/// The device panel's typed facts become the rows the overlay shows: the storage's own rows,
/// the slices where there are some, the kernel's registers where the driver gave them.
#[test]
fn device_rows_say_what_the_facts_say() {
    use crate::backend::{DevicePanel, InteropFacts, SlicesFacts};
    use crate::cuda::settings::{CtxSched, Precision, ResourceFlags, StreamKind};
    let device = interop::safe::DeviceInfo {
        ordinal: 0,
        name: "NVIDIA H200".into(),
        uuid: None,
        pci_bus_id: "0000:00:00.0".into(),
        compute_capability: (9, 0),
        total_memory_bytes: 1 << 30,
        multiprocessors: 132,
        clock_khz: 1_980_000,
        memory_clock_khz: 0,
        memory_bus_width_bits: 0,
        l2_cache_bytes: 60 << 20,
        max_threads_per_block: 1024,
        max_threads_per_multiprocessor: 2048,
        max_blocks_per_multiprocessor: 32,
        shared_memory_per_block_bytes: 48 << 10,
        shared_memory_per_block_optin_bytes: 0,
        shared_memory_per_multiprocessor_bytes: 228 << 10,
        registers_per_block: 65536,
        warp_size: 32,
        unified_addressing: true,
        stream_priorities_supported: true,
        async_engines: 2,
        ecc_enabled: false,
        integrated: false,
        compute_mode: 0,
        virtual_memory_management: true,
        posix_fd_export: true,
    };
    let mut panel = DevicePanel {
        device,
        driver_version: 13000,
        semantics: interop::StreamSemantics::Legacy,
        context: (interop::safe::ContextKind::Primary, CtxSched::Auto),
        stream: (StreamKind::NonBlocking, -1),
        interop: InteropFacts::Flags { register: ResourceFlags::None, map: ResourceFlags::WriteDiscard },
        slices: None,
        precision: Precision::F32,
        kernel: "embedded · P = 1".into(),
        gl: ("NVIDIA Corporation".into(), "NVIDIA H200".into()),
        kernel_attributes: None,
    };
    let rows = super::device_rows(&panel);
    let get = |rows: &[(String, String)], k: &str| rows.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get(&rows, "SMs × clock").as_deref(), Some("132 × 1980 MHz"));
    assert_eq!(get(&rows, "driver").as_deref(), Some("CUDA 13.0"));
    assert_eq!(get(&rows, "register / map flags").as_deref(), Some("none / write-discard"));
    assert!(get(&rows, "GPUs · slices").is_none() && get(&rows, "kernel registers / local").is_none());
    panel.interop = InteropFacts::External { mib_each: 1, dedicated: true, semaphores: None };
    panel.slices =
        Some(SlicesFacts { gpus: vec![0], slices: 2, len: 512, devices: vec![0, 0], render: 0, render_computes: true, gather: "peer copies".into() });
    let rows = super::device_rows(&panel);
    assert!(get(&rows, "interop").is_some_and(|v| v.contains("1 MiB each, dedicated")), "{rows:?}");
    assert!(get(&rows, "sync").is_some_and(|v| v.starts_with("GL fence wait")), "{rows:?}");
    assert!(get(&rows, "GPUs · slices").is_some_and(|v| v.contains("2 slices of 512 bodies") && v.ends_with("computes too")), "{rows:?}");
    assert_eq!(get(&rows, "gather").as_deref(), Some("peer copies"));
}
