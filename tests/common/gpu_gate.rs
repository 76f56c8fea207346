//! Shared by the GPU test binaries (libtest-mimic harness): decide once whether a CUDA GPU is
//! usable. Without one every GPU test is reported as *ignored* (libtest's "skipped"), with the
//! reason printed; `NBODY_REQUIRE_GPU=1` turns a missing GPU into a failure of every test.

use libtest_mimic::{Arguments, Failed, Trial};

/// Why GPU tests cannot run here, or None when a GPU is usable.
pub fn gpu_missing_reason() -> Option<String> {
    match interop::init(interop::StreamSemantics::Legacy) {
        Err(e) => Some(e.to_string()),
        Ok(api) => match interop::Device::count(&api) {
            Ok(0) => Some("the CUDA driver reports no device".into()),
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        },
    }
}

/// A GPU test body.
pub type Body = fn() -> Result<(), Failed>;

/// The entries of [`run_with_skips`], an array, each test written once as the path of its
/// function (its name is the path's last segment): `gpu_tests![a, module::b, module::c => reason]`,
/// where `reason` is an `Option<String>` saying why the test cannot run here besides the GPU; a
/// `#[cfg(…)]` before an entry keeps it only under that condition.
macro_rules! gpu_tests {
    ($($(#[$attr:meta])* $test:path $(=> $skip:expr)?),* $(,)?) => {
        [$(
            $(#[$attr])*
            ($crate::gpu_gate::name_of(stringify!($test)), $test as $crate::gpu_gate::Body, None::<String> $(.or($skip))?)
        ),*]
    };
}
pub(crate) use gpu_tests;

/// A test's name: the last segment of the path to its function.
pub fn name_of(path: &'static str) -> &'static str {
    path.rsplit("::").next().map_or(path, str::trim)
}

/// Runs `tests` under libtest-mimic, gated on the GPU.
#[allow(dead_code)]
pub fn run(tests: &[(&'static str, Body)]) -> ! {
    run_with_skips(&tests.iter().map(|&(name, body)| (name, body, None)).collect::<Vec<_>>())
}

/// As [`run`], each test with its own reason to be skipped besides the GPU (an optional library
/// such as CUPTI that is missing): such a test is reported as ignored with the reason printed,
/// also under `NBODY_REQUIRE_GPU=1`, which only concerns the GPU and its driver.
#[allow(dead_code)]
pub fn run_with_skips(tests: &[(&'static str, Body, Option<String>)]) -> ! {
    let args = Arguments::from_args();
    let require = std::env::var("NBODY_REQUIRE_GPU").is_ok_and(|v| v == "1");
    let missing = gpu_missing_reason();
    if let Some(why) = &missing {
        if require {
            eprintln!("NBODY_REQUIRE_GPU=1 but no usable GPU: {why}");
        } else {
            eprintln!("skipped: no usable CUDA GPU ({why}); set NBODY_REQUIRE_GPU=1 to make this a failure");
        }
    }
    let trials = tests
        .iter()
        .map(|(name, body, skip)| {
            let (name, body) = (*name, *body);
            let missing = missing.clone();
            if let (Some(why), None) = (skip, &missing) {
                eprintln!("skipped: {name}: {why}");
            }
            let ignored = (missing.is_some() && !require) || (skip.is_some() && missing.is_none());
            Trial::test(name, move || match &missing {
                Some(why) => Err(format!("no usable GPU: {why}").into()),
                None => body(),
            })
            .with_ignored_flag(ignored)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

/// `Err(Failed)` with a message unless `cond`.
#[allow(dead_code)]
pub fn ensure(cond: bool, msg: impl Into<String>) -> Result<(), Failed> {
    if cond {
        Ok(())
    } else {
        Err(msg.into().into())
    }
}
