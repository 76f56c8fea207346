//! Checks every row of the entry-point table (name, ABI version, parameter count, per-thread
//! variant) against `cudaTypedefs.h` and `cudaGLTypedefs.h` of the pinned wheel
//! `nvidia-cuda-runtime-cu12` (`.ci/run` installs it and sets `NBODY_CUDA_INCLUDE`).

use std::path::PathBuf;
use std::process::Command;

use cuda_gl_interop::driver::entry::PtVariant;
use cuda_gl_interop::driver::ENTRY_POINTS;

/// The include folder: `$NBODY_CUDA_INCLUDE`, else the installed `nvidia.cuda_runtime` package's.
fn include_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("NBODY_CUDA_INCLUDE") {
        return PathBuf::from(p);
    }
    let out =
        Command::new("python3").args(["-c", "import nvidia.cuda_runtime as m, os; print(os.path.join(list(m.__path__)[0], 'include'))"]).output();
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
            Some(n) if n != e.params.len() => problems.push(format!("{pfn}: header has {n} parameters, table has {}", e.params.len())),
            Some(_) => {}
        }
        // Under per-thread semantics the table asks for the _ptsz/_ptds typedef's version.
        if e.pt != PtVariant::None {
            let v = e.version_for(cuda_gl_interop::StreamSemantics::PerThread);
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

/// The image workflow's structs have the C layout of `cuda.h`: each struct's size and every
/// field's offset, printed by a C program compiled against the pinned headers (gcc), equal the
/// Rust ones. A wrong offset would make the driver read a wrong array, pitch or filter mode.
#[test]
fn struct_layouts_match_cuda_h() {
    use cuda_gl_interop::sys::{
        CUDA_ARRAY_DESCRIPTOR, CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS, CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS,
        CUDA_MEMCPY2D, CUDA_RESOURCE_DESC, CUDA_TEXTURE_DESC,
    };
    use std::mem::{offset_of, size_of};
    let c = r#"#include <stdio.h>
#include <stddef.h>
#include <cuda.h>
#define F(s, f) printf(#s "." #f " %zu\n", offsetof(s, f));
int main(void) {
  printf("CUDA_RESOURCE_DESC %zu\n", sizeof(CUDA_RESOURCE_DESC)); F(CUDA_RESOURCE_DESC, res) F(CUDA_RESOURCE_DESC, flags)
  printf("CUDA_TEXTURE_DESC %zu\n", sizeof(CUDA_TEXTURE_DESC)); F(CUDA_TEXTURE_DESC, filterMode) F(CUDA_TEXTURE_DESC, flags)
  F(CUDA_TEXTURE_DESC, maxAnisotropy) F(CUDA_TEXTURE_DESC, borderColor) F(CUDA_TEXTURE_DESC, reserved)
  printf("CUDA_MEMCPY2D %zu\n", sizeof(CUDA_MEMCPY2D)); F(CUDA_MEMCPY2D, srcMemoryType) F(CUDA_MEMCPY2D, srcHost)
  F(CUDA_MEMCPY2D, srcArray) F(CUDA_MEMCPY2D, dstMemoryType) F(CUDA_MEMCPY2D, dstArray) F(CUDA_MEMCPY2D, dstPitch)
  F(CUDA_MEMCPY2D, WidthInBytes) F(CUDA_MEMCPY2D, Height)
  printf("CUDA_ARRAY_DESCRIPTOR %zu\n", sizeof(CUDA_ARRAY_DESCRIPTOR)); F(CUDA_ARRAY_DESCRIPTOR, Format) F(CUDA_ARRAY_DESCRIPTOR, NumChannels)
  printf("CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC %zu\n", sizeof(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC));
  F(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, handle) F(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, flags) F(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, reserved)
  printf("CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS %zu\n", sizeof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS));
  F(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS, params.keyedMutex) F(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS, flags)
  printf("CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS %zu\n", sizeof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS));
  F(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, params.keyedMutex.timeoutMs) F(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, flags)
  return 0;
}
"#;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("layouts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    std::fs::write(dir.join("layouts.c"), c).expect("write layouts.c");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .arg("-I")
        .arg(include_dir())
        .args(["-o", "layouts", "layouts.c"])
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("{cc}: {e} (a C compiler is needed to read cuda.h's layouts)"));
    assert!(built.status.success(), "compiling layouts.c:\n{}", String::from_utf8_lossy(&built.stderr));
    let run = Command::new(dir.join("layouts")).output().expect("run layouts");
    let c_says = String::from_utf8_lossy(&run.stdout).to_string();
    let rust_says = [
        ("CUDA_RESOURCE_DESC", size_of::<CUDA_RESOURCE_DESC>()),
        ("CUDA_RESOURCE_DESC.res", offset_of!(CUDA_RESOURCE_DESC, res)),
        ("CUDA_RESOURCE_DESC.flags", offset_of!(CUDA_RESOURCE_DESC, flags)),
        ("CUDA_TEXTURE_DESC", size_of::<CUDA_TEXTURE_DESC>()),
        ("CUDA_TEXTURE_DESC.filterMode", offset_of!(CUDA_TEXTURE_DESC, filter_mode)),
        ("CUDA_TEXTURE_DESC.flags", offset_of!(CUDA_TEXTURE_DESC, flags)),
        ("CUDA_TEXTURE_DESC.maxAnisotropy", offset_of!(CUDA_TEXTURE_DESC, max_anisotropy)),
        ("CUDA_TEXTURE_DESC.borderColor", offset_of!(CUDA_TEXTURE_DESC, border_color)),
        ("CUDA_TEXTURE_DESC.reserved", offset_of!(CUDA_TEXTURE_DESC, reserved)),
        ("CUDA_MEMCPY2D", size_of::<CUDA_MEMCPY2D>()),
        ("CUDA_MEMCPY2D.srcMemoryType", offset_of!(CUDA_MEMCPY2D, src_memory_type)),
        ("CUDA_MEMCPY2D.srcHost", offset_of!(CUDA_MEMCPY2D, src_host)),
        ("CUDA_MEMCPY2D.srcArray", offset_of!(CUDA_MEMCPY2D, src_array)),
        ("CUDA_MEMCPY2D.dstMemoryType", offset_of!(CUDA_MEMCPY2D, dst_memory_type)),
        ("CUDA_MEMCPY2D.dstArray", offset_of!(CUDA_MEMCPY2D, dst_array)),
        ("CUDA_MEMCPY2D.dstPitch", offset_of!(CUDA_MEMCPY2D, dst_pitch)),
        ("CUDA_MEMCPY2D.WidthInBytes", offset_of!(CUDA_MEMCPY2D, width_in_bytes)),
        ("CUDA_MEMCPY2D.Height", offset_of!(CUDA_MEMCPY2D, height)),
        ("CUDA_ARRAY_DESCRIPTOR", size_of::<CUDA_ARRAY_DESCRIPTOR>()),
        ("CUDA_ARRAY_DESCRIPTOR.Format", offset_of!(CUDA_ARRAY_DESCRIPTOR, format)),
        ("CUDA_ARRAY_DESCRIPTOR.NumChannels", offset_of!(CUDA_ARRAY_DESCRIPTOR, num_channels)),
        ("CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC", size_of::<CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC>()),
        ("CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC.handle", offset_of!(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, handle)),
        ("CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC.flags", offset_of!(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, flags)),
        ("CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC.reserved", offset_of!(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, reserved)),
        ("CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS", size_of::<CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS>()),
        ("CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS.params.keyedMutex", offset_of!(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS, keyed_mutex_key)),
        ("CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS.flags", offset_of!(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS, flags)),
        ("CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS", size_of::<CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS>()),
        ("CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS.params.keyedMutex.timeoutMs", offset_of!(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, keyed_mutex_timeout_ms)),
        ("CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS.flags", offset_of!(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, flags)),
    ];
    let mut wrong = Vec::new();
    for (name, rust) in rust_says {
        let c = c_says.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' '))).and_then(|v| v.trim().parse::<usize>().ok());
        if c != Some(rust) {
            wrong.push(format!("{name}: cuda.h {c:?}, Rust {rust}"));
        }
    }
    assert!(wrong.is_empty(), "layouts differ from cuda.h:\n  {}", wrong.join("\n  "));
}
