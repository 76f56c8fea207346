//! Loading the driver without a GPU: library discovery and bootstrap errors.
//! These run everywhere (no driver needed); they never set environment variables in-process.

#[path = "common/fake_driver.rs"]
mod fake_driver;

use std::path::PathBuf;

use cuda_gl_interop::{Driver, Error};

#[test]
fn missing_file_lists_the_path_tried() {
    let p = PathBuf::from("/nonexistent/dir/libcuda.so.1");
    let err = Driver::open_candidates(&[p]).expect_err("a missing file cannot load");
    match &err {
        Error::LibraryNotFound { tried } => {
            assert_eq!(tried.len(), 1);
            assert_eq!(tried[0].name, "/nonexistent/dir/libcuda.so.1");
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("/nonexistent/dir/libcuda.so.1") && msg.contains("NVIDIA driver"), "{msg}");
}

/// A shared library that is certainly present and certainly not the CUDA driver.
fn not_the_driver() -> PathBuf {
    for c in ["/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6", "/lib64/libm.so.6", "/lib/aarch64-linux-gnu/libm.so.6"] {
        if std::path::Path::new(c).exists() {
            return PathBuf::from(c);
        }
    }
    PathBuf::from("libm.so.6")
}

#[test]
fn a_library_that_is_not_the_driver_gives_the_missing_bootstrap_error() {
    let err = Driver::open_candidates(&[not_the_driver()]).expect_err("libm is not the driver");
    match &err {
        Error::MissingBootstrap { symbol, .. } => assert_eq!(*symbol, "cuDriverGetVersion"),
        other => panic!("expected MissingBootstrap, got {other:?}"),
    }
    assert!(err.to_string().contains("libcuda.so.1 instead"), "{err}");
    assert!(!err.to_string().contains("NBODY"), "the crate's errors name no application: {err}");
}

#[test]
fn first_loadable_candidate_wins_and_all_failures_are_listed() {
    let err = Driver::open_candidates(&[PathBuf::from("/nonexistent/a.so"), PathBuf::from("/nonexistent/b.so")]).expect_err("neither exists");
    let Error::LibraryNotFound { tried } = err else { panic!("expected LibraryNotFound") };
    assert_eq!(tried.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["/nonexistent/a.so", "/nonexistent/b.so"]);
}

#[test]
fn remedies_name_the_cuda_version_or_the_table_bug() {
    use cuda_gl_interop::driver::entry::{EntryReport, SymbolStatus};
    let r = EntryReport::remedy_for(SymbolStatus::SymbolNotFound, 12050, 11080).expect("a remedy");
    assert!(r.contains("CUDA 12.5") && r.contains("CUDA 11.8"), "{r}");
    let r = EntryReport::remedy_for(SymbolStatus::VersionNotSufficient, 11010, 13000).expect("a remedy");
    assert!(r.contains("older than the function"), "{r}");
    assert!(EntryReport::remedy_for(SymbolStatus::Found, 2000, 13000).is_none());
}

#[test]
fn missing_required_functions_are_all_reported() {
    let so = fake_driver::build("loader", &["cuCtxCreate", "cuLaunchKernel"]);
    let driver = Driver::open_candidates(&[so]).expect("the stand-in loads");
    let report = cuda_gl_interop::Api::resolve_report(&driver, cuda_gl_interop::StreamSemantics::Legacy);
    assert_eq!(report.len(), cuda_gl_interop::driver::ENTRY_POINTS.len());
    let missing: Vec<&str> = report.iter().filter(|r| r.address == 0).map(|r| r.name).collect();
    assert_eq!(missing, ["cuCtxCreate", "cuLaunchKernel"], "table order, both listed");
    assert!(report.iter().filter(|r| r.address == 0).all(|r| r.remedy.is_some()), "each missing one has a remedy");
    match cuda_gl_interop::Api::load(driver, cuda_gl_interop::StreamSemantics::Legacy) {
        Err(e @ Error::MissingEntryPoint { name: "cuCtxCreate", more_missing: 1, .. }) => {
            assert!(e.to_string().contains("1 more required function(s) missing"), "{e}");
        }
        Err(other) => panic!("expected MissingEntryPoint for cuCtxCreate with 1 more, got {other:?}"),
        Ok(_) => panic!("a driver without cuCtxCreate loaded"),
    }
}

// CUPTI (cuda_gl_interop::cupti): discovery errors without CUPTI installed. `Cupti::open_with` takes the
// file that replaces the search.

#[cfg(feature = "cupti")]
#[test]
fn cupti_from_a_named_file_names_the_path_and_the_remedy() {
    use cuda_gl_interop::cupti::{Cupti, CuptiError};
    let bogus = std::ffi::OsStr::new("/nonexistent/cupti/libcupti.so");
    let err = Cupti::open_with(Some(bogus), &[PathBuf::from("/usr/local/cuda")]).expect_err("a missing file cannot load");
    match &err {
        CuptiError::LibraryNotFound { tried, named } => {
            assert!(*named);
            assert_eq!(tried.len(), 1, "only the named file is tried: {tried:?}");
            assert_eq!(tried[0].name, "/nonexistent/cupti/libcupti.so");
            assert!(!tried[0].error.is_empty(), "the loader's message is kept");
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("/nonexistent/cupti/libcupti.so") && msg.contains("only the file named"), "{msg}");
}

#[cfg(feature = "cupti")]
#[test]
fn cupti_lists_every_candidate_tried() {
    use cuda_gl_interop::cupti::{Cupti, CuptiError};
    let roots = [PathBuf::from("/nonexistent/toolkit")];
    let err = Cupti::open_with(None, &roots);
    // A machine with CUPTI on the loader path may find it; then there is nothing to check here.
    let Err(err) = err else { return };
    // Another error means a CUPTI was found and then failed (e.g. no GPU): nothing to check here.
    if let CuptiError::LibraryNotFound { tried, named } = &err {
        assert!(!*named);
        let names: Vec<&str> = tried.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(&names[..3], ["libcupti.so", "libcupti.so.13", "libcupti.so.12"]);
        assert!(names.contains(&"/nonexistent/toolkit/extras/CUPTI/lib64/libcupti.so"), "{names:?}");
        assert!(names.contains(&"/nonexistent/toolkit/lib64/libcupti.so.13"), "{names:?}");
        assert!(err.to_string().contains("Cupti::open_with"), "{err}");
    }
}

#[cfg(feature = "cupti")]
#[test]
fn a_library_that_is_not_cupti_names_the_missing_function() {
    use cuda_gl_interop::cupti::{Cupti, CuptiError};
    let err = Cupti::open_candidates(&[not_the_driver()]).expect_err("libm is not CUPTI");
    match &err {
        CuptiError::MissingSymbol { symbol, .. } => assert_eq!(*symbol, "cuptiGetVersion"),
        other => panic!("expected MissingSymbol, got {other:?}"),
    }
    assert!(err.to_string().contains("libcupti.so instead"), "{err}");
}
