//! A stand-in CUDA driver library for tests of the loader's error paths.

use std::path::PathBuf;

/// Build (with the system C compiler) a stand-in driver library whose `cuGetProcAddress_v2`
/// finds every function except `missing`; no function it hands out is ever called here.
pub fn build(tag: &str, missing: &[&str]) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fake-driver-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let names: String = missing.iter().map(|m| format!("\"{m}\", ")).collect();
    let src = format!(
        r#"#include <string.h>
static const char *missing[] = {{ {names} 0 }};
static int never_called(void) {{ return 999; }}
int cuDriverGetVersion(int *v) {{ *v = 12080; return 0; }}
int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, unsigned long long flags, int *status) {{
    (void)version; (void)flags;
    for (const char **m = missing; *m; ++m)
        if (strcmp(*m, symbol) == 0) {{ *pfn = 0; if (status) *status = 1; return 500; }}
    *pfn = (void *)never_called; if (status) *status = 0; return 0;
}}
"#
    );
    let c = dir.join("fake.c");
    let so = dir.join("libfakecuda.so");
    std::fs::write(&c, src).expect("write fake.c");
    let out = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&c)
        .output()
        .expect("the C compiler `cc` is needed to build the stand-in driver");
    assert!(out.status.success(), "cc failed: {}", String::from_utf8_lossy(&out.stderr));
    so
}
