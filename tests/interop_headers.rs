//! Checks every row of the entry-point table (name, ABI version, parameter count, per-thread
//! variant) against `cudaTypedefs.h` and `cudaGLTypedefs.h` of the pinned wheel
//! `nvidia-cuda-runtime-cu12` (`.ci/run` installs it and sets `NBODY_CUDA_INCLUDE`).

use std::path::PathBuf;
use std::process::Command;

use interop::entry::PtVariant;
use interop::ENTRY_POINTS;

/// The include folder: `$NBODY_CUDA_INCLUDE`, else the installed `nvidia.cuda_runtime` package's.
fn include_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("NBODY_CUDA_INCLUDE") {
        return PathBuf::from(p);
    }
    let out = Command::new("python3")
        .args(["-c", "import nvidia.cuda_runtime as m, os; print(os.path.join(list(m.__path__)[0], 'include'))"])
        .output();
    match out {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
        _ => panic!(
            "CUDA headers not found: set NBODY_CUDA_INCLUDE to the include folder of the pinned wheel \
             nvidia-cuda-runtime-cu12==12.9.79, or run `bash .ci/run`, which installs it"
        ),
    }
}

fn headers() -> String {
    let dir = include_dir();
    let mut all = String::new();
    for f in ["cudaTypedefs.h", "cudaGLTypedefs.h"] {
        let p = dir.join(f);
        all += &std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
    }
    all
}

/// Parameter count of `typedef CUresult (CUDAAPI *PFN_<name>)(...)`, if the typedef exists.
fn typedef_params(headers: &str, pfn: &str) -> Option<usize> {
    let needle = format!("*{pfn})(");
    let start = headers.find(&needle)? + needle.len();
    let end = start + headers[start..].find(')')?;
    let params = headers[start..end].trim();
    Some(if params.is_empty() || params == "void" { 0 } else { params.split(',').count() })
}

#[test]
fn every_entry_matches_its_typedef() {
    let h = headers();
    let mut problems = Vec::new();
    for e in ENTRY_POINTS {
        let pfn = format!("PFN_{}_v{}", e.name, e.version);
        match typedef_params(&h, &pfn) {
            None => problems.push(format!("{pfn}: no such typedef in the headers")),
            Some(n) if n != e.params.len() => {
                problems.push(format!("{pfn}: header has {n} parameters, table has {}", e.params.len()))
            }
            Some(_) => {}
        }
        // Under per-thread semantics the table asks for the _ptsz/_ptds typedef's version.
        if e.pt != PtVariant::None {
            let v = e.version_for(interop::StreamSemantics::PerThread);
            let pt = format!("PFN_{}_v{v}{}", e.name, e.pt.suffix());
            match typedef_params(&h, &pt) {
                Some(n) if n == e.params.len() => {}
                other => problems.push(format!("{pt}: per-thread typedef {other:?} parameters, table has {}", e.params.len())),
            }
        }
        // A per-thread variant exists exactly when the header declares PFN_<name>_v<version>_ptsz/_ptds.
        for (suffix, kind) in [("_ptsz", PtVariant::Ptsz), ("_ptds", PtVariant::Ptds)] {
            let has = h.contains(&format!("*PFN_{}_v", e.name)) && {
                let pat = format!("PFN_{}_v", e.name);
                h.match_indices(&pat).any(|(i, _)| {
                    let rest = &h[i + pat.len()..];
                    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    rest[digits.len()..].starts_with(&format!("{suffix})"))
                })
            };
            if has != (e.pt == kind) {
                problems.push(format!("{}: header {} a {suffix} variant, table says {:?}", e.name, if has { "has" } else { "has no" }, e.pt));
            }
        }
    }
    assert!(problems.is_empty(), "entry-point table disagrees with the headers:\n{}", problems.join("\n"));
}

#[test]
fn names_are_unique_and_cuctxcreate_asks_for_the_three_parameter_form() {
    let mut names: Vec<_> = ENTRY_POINTS.iter().map(|e| e.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "duplicate entry names");
    let c = ENTRY_POINTS.iter().find(|e| e.name == "cuCtxCreate").expect("cuCtxCreate declared");
    assert_eq!((c.version, c.params.len()), (3020, 3));
}

#[test]
fn header_knows_newer_variants_we_deliberately_do_not_ask_for() {
    // The lesson of versioned entry points: cuCtxCreate has three signatures.
    let h = headers();
    assert_eq!(typedef_params(&h, "PFN_cuCtxCreate_v3020"), Some(3));
    assert_eq!(typedef_params(&h, "PFN_cuCtxCreate_v11040"), Some(5));
    assert_eq!(typedef_params(&h, "PFN_cuCtxCreate_v12050"), Some(4));
}
