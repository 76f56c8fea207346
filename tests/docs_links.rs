//! The docs' links ([`DOCS`]) name files that exist; docs/workflow.md also links to source lines
//! (`[`map_resources`](../app/src/backend/cuda/storage/map.rs#L190)`). Each such link must land exactly on its call: the inline-code identifier of the link text (its
//! last `::`/`.` segment) must appear on the linked line itself — no slack — as a call
//! (`name(`, `.name(`, `name::<…>(`) or a definition (`fn`, `struct`, `enum`, `const`, `static`,
//! `type`, `trait`, `mod`, `union` before the name, or the entry table's `name @ version`), and
//! not in a comment. So a link to the wrong branch or to a neighbouring line fails, and the
//! message tells where the identifier is called or defined now. Links to files must name files
//! that exist.

use std::path::{Path, PathBuf};

/// The markdown files whose links are checked: every link to a file must name one that exists,
/// and a `#Lnn` link must land on its call.
const DOCS: &[&str] = &[
    "README.md",
    "ARCHITECTURE.md",
    "kernels/README.md",
    "docs/workflow.md",
    "docs/worksheet.md",
    "docs/guide.md",
    "docs/bench.md",
    "docs/lab.md",
    "docs/multi-gpu.md",
    "docs/troubleshooting.md",
    "docs/environment.md",
    "docs/results.md",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One markdown link: its text, its target, and the doc line it is on.
#[derive(Debug)]
struct Link {
    text: String,
    target: String,
    line: usize,
}

/// Inline links `[text](target)` of a markdown text (code blocks skipped).
fn links(md: &str) -> Vec<Link> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (i, line) in md.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(open) = rest.find('[') {
            let after = &rest[open + 1..];
            let Some(close) = after.find("](") else { break };
            let text = &after[..close];
            let tail = &after[close + 2..];
            let Some(end) = tail.find([')', ' ']) else { break };
            // `[text](path "title")`: a figure's link names its record in the title (.ci/claims.py),
            // which may hold `)`; the link ends at the title's closing `")`.
            let after_link = match tail[end..].strip_prefix(" \"") {
                Some(title) => match title.find("\")") {
                    Some(t) => end + 2 + t + 2,
                    None => break,
                },
                None if tail[end..].starts_with(')') => end + 1,
                None => break,
            };
            out.push(Link { text: text.to_string(), target: tail[..end].to_string(), line: i + 1 });
            rest = &tail[after_link..];
        }
    }
    out
}

/// The identifier a link names: the inline code of its text, last `::` or `.` segment, no `()`.
fn identifier(text: &str) -> Option<String> {
    let start = text.find('`')?;
    let end = text[start + 1..].find('`')? + start + 1;
    let code = text[start + 1..end].trim_end_matches("()");
    let last = code.rsplit("::").next()?.rsplit('.').next()?;
    (!last.is_empty()).then(|| last.to_string())
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Keywords that, right before a name, make the line the name's definition.
const DEFINERS: &[&str] = &["fn", "struct", "enum", "const", "static", "type", "trait", "mod", "union"];

/// Whether `line` calls or defines `id`: the whole word `id`, outside a comment line, followed by
/// `(` or a turbofish `::<` (a call, or a `fn` with no generics), or preceded by a defining
/// keyword, or declared in the entry table (`id @ version`).
fn lands(line: &str, id: &str) -> bool {
    let code = line.trim_start();
    if code.starts_with("//") || code.starts_with("/*") || code.starts_with('*') {
        return false;
    }
    if code.strip_prefix(id).is_some_and(|rest| rest.trim_start().starts_with('@')) {
        return true;
    }
    let mut from = 0;
    while let Some(k) = line[from..].find(id) {
        let start = from + k;
        let end = start + id.len();
        from = end;
        let before_ok = !line[..start].chars().next_back().is_some_and(is_ident_char);
        let after_ok = !line[end..].chars().next().is_some_and(is_ident_char);
        if !(before_ok && after_ok) {
            continue;
        }
        let after = line[end..].trim_start();
        if after.starts_with('(') || after.starts_with("::<") {
            return true;
        }
        let prev_word = line[..start].trim_end().rsplit(|c: char| !is_ident_char(c)).next().unwrap_or("");
        if DEFINERS.contains(&prev_word) {
            return true;
        }
    }
    false
}

/// Whether the link to line `n` (1-based) of `source` lands on a call or definition of `id`; the
/// error says where `id` is called or defined instead.
fn check_link(source: &str, n: usize, id: &str) -> Result<(), String> {
    let lines: Vec<&str> = source.lines().collect();
    if n == 0 || n > lines.len() {
        return Err(format!("L{n} is past the end ({} lines)", lines.len()));
    }
    if lands(lines[n - 1], id) {
        return Ok(());
    }
    let now: Vec<String> = lines.iter().enumerate().filter(|(_, l)| lands(l, id)).map(|(k, _)| format!("L{}", k + 1)).take(8).collect();
    Err(format!(
        "`{id}` is not called or defined on L{n} ({:?}); it is at {}",
        lines[n - 1].trim(),
        if now.is_empty() { "no line of that file".to_string() } else { now.join(", ") }
    ))
}

#[test]
fn a_link_lands_only_on_its_call_or_definition() {
    let src = "/// Calls `step` once.\nfn outer() {\n    let step = 1;\n    stepper(step);\n    step(1);\n    self.gpu.step (2);\n}\npub struct Step {\n    cuCtxCreate @ 3020, \"cuCtxCreate_v2\";\n    pub const CASES: &[u8] = &[];\n    let m = map::<u8>(x);\n// step(3) in a comment\n";
    // The line of the call passes; the lines around it do not (no slack).
    assert_eq!(check_link(src, 5, "step"), Ok(()));
    assert_eq!(check_link(src, 6, "step"), Ok(()), "a method call with a space before the parenthesis");
    for (n, why) in
        [(1, "a doc comment"), (3, "a variable, not a call"), (4, "another identifier and an argument"), (7, "a brace"), (12, "a comment")]
    {
        let e = check_link(src, n, "step").expect_err(why);
        assert!(e.contains("L5, L6"), "{why}: {e}");
    }
    assert_eq!(check_link(src, 2, "outer"), Ok(()));
    assert_eq!(check_link(src, 8, "Step"), Ok(()));
    assert_eq!(check_link(src, 9, "cuCtxCreate"), Ok(()), "an entry-table declaration");
    assert_eq!(check_link(src, 10, "CASES"), Ok(()));
    assert_eq!(check_link(src, 11, "map"), Ok(()), "a turbofish call");
    assert!(check_link(src, 99, "step").expect_err("past the end").contains("past the end"));
    assert!(check_link(src, 3, "nosuch").expect_err("absent").contains("no line of that file"));
}

#[test]
fn extracts_links_and_identifiers() {
    let md = "see [`Mapping::unmap`](../interop/src/safe/graphics.rs#L12) and [the README](../README.md).\n```\n[`x`](nope#L1)\n```\n";
    let l = links(md);
    assert_eq!(l.len(), 2);
    assert_eq!(l[0].target, "../interop/src/safe/graphics.rs#L12");
    assert_eq!(identifier(&l[0].text).as_deref(), Some("unmap"));
    assert_eq!(identifier(&l[1].text), None);
    assert_eq!(identifier("[`map_resources()`]").as_deref(), Some("map_resources"));
}

#[test]
fn every_source_link_points_at_its_call() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in DOCS {
        let doc_path = root().join(doc);
        let md = std::fs::read_to_string(&doc_path).unwrap_or_else(|e| panic!("cannot read {doc}: {e}"));
        let base = doc_path.parent().expect("doc dir").to_path_buf();
        for link in links(&md) {
            if link.target.starts_with("http://") || link.target.starts_with("https://") || link.target.starts_with('#') {
                continue;
            }
            let (file, anchor) = match link.target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (link.target.as_str(), None),
            };
            let path = base.join(file);
            if path.is_dir() || (anchor.is_none() && path.is_file()) {
                // A file link without a line (an image, a results file): it exists, that is all.
                continue;
            }
            let Ok(source) = std::fs::read_to_string(&path) else {
                problems.push(format!("{doc}:{}: {} links to {file}, which does not exist", link.line, link.text));
                continue;
            };
            let Some(n) = anchor.and_then(|a| a.strip_prefix('L')).and_then(|n| n.parse::<usize>().ok()) else { continue };
            let Some(id) = identifier(&link.text) else {
                if n == 0 || n > source.lines().count() {
                    problems.push(format!("{doc}:{}: {file}#L{n} is past the end", link.line));
                }
                continue;
            };
            checked += 1;
            if let Err(e) = check_link(&source, n, &id) {
                problems.push(format!("{doc}:{}: {file}#L{n}: {e}", link.line));
            }
        }
    }
    assert!(problems.is_empty(), "stale links in the docs (fix the line numbers):\n  {}", problems.join("\n  "));
    assert!(checked >= 20, "only {checked} source links checked: did the doc lose its links?");
}

/// The `NBODY_*` names in `text`.
fn nbody_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("NBODY_") {
        let tail = &rest[i..];
        let end = tail.find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')).unwrap_or(tail.len());
        let name = tail[..end].trim_end_matches('_');
        if name.len() > "NBODY_".len() {
            out.push(name.to_string());
        }
        rest = &tail[end.max(1)..];
    }
    out
}

/// Every file under `dir` whose name ends in one of `exts` (or is one of `names`), recursively.
fn files_under(dir: &Path, exts: &[&str], names: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if p.is_dir() {
            if !name.starts_with('.') || name == ".ci" {
                files_under(&p, exts, names, out);
            }
        } else if exts.iter().any(|x| name.ends_with(x)) || names.contains(&name.as_str()) {
            out.push(p);
        }
    }
}

/// docs/environment.md lists every `NBODY_*` environment variable the program, its tests and
/// its build tools read (the kernel source's `NBODY_*` macros are not variables).
#[test]
fn every_environment_variable_is_in_the_table() {
    let root = root();
    let table = std::fs::read_to_string(root.join("docs/environment.md")).expect("docs/environment.md");
    let mut files = Vec::new();
    for dir in ["app/src", "interop/src", "sim/src", "tests", "kernels", ".ci"] {
        files_under(&root.join(dir), &[".rs", ".py", ".sh"], &["gpu-check", "gpu-window", "run"], &mut files);
    }
    let mut missing = std::collections::BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for name in nbody_names(&text) {
            if !table.contains(&format!("`{name}")) {
                missing.insert(format!("{name} ({})", f.strip_prefix(&root).unwrap_or(f).display()));
            }
        }
    }
    assert!(missing.is_empty(), "docs/environment.md lacks: {}", missing.into_iter().collect::<Vec<_>>().join(", "));
}

/// Words that tell how the project was made rather than what the product is: a session or
/// issue number, a story of what was tried and removed. Matched case-insensitively; `#` stands
/// for one digit.
const HISTORY: &[&str] = &[
    "session #",
    "session#",
    "sessions #",
    "issue #",
    "issue ##",
    "issues #",
    "the kernel issue",
    "the bench issue",
    "and was removed",
    "and were removed",
];

/// Where `pattern` ([`HISTORY`]'s form) first matches in the lower-cased `text`.
fn find_pattern(text: &str, pattern: &str) -> Option<usize> {
    let (t, p) = (text.as_bytes(), pattern.as_bytes());
    (0..t.len().saturating_sub(p.len() - 1)).find(|&i| {
        p.iter().zip(&t[i..]).all(|(&pc, &tc)| if pc == b'#' { tc.is_ascii_digit() } else { pc == tc })
            // A word of its own: no letter right before it.
            && (i == 0 || !t[i - 1].is_ascii_alphabetic())
    })
}

#[test]
fn history_patterns_match_what_they_should() {
    assert!(find_pattern("see session 9/compute.json", "session #").is_some());
    assert!(find_pattern("the cuda session (driver, context)", "session #").is_none());
    assert!(find_pattern("(issue 17, item 5)", "issue ##").is_some());
    assert!(find_pattern("tissue 12", "issue ##").is_none());
    assert!(find_pattern("an option that was tried and was removed", "and was removed").is_some());
    assert!(find_pattern("sand was removed", "and was removed").is_none());
}

/// The project's files speak of the product: no tracked text file (but this one, which lists
/// the words) holds a [`HISTORY`] pattern. Raw result files are included: they are named by
/// date, machine and what they measured.
#[test]
fn the_text_speaks_of_the_product_only() {
    let out = std::process::Command::new("git").args(["ls-files"]).current_dir(root()).output();
    let Some(files) = out.ok().filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).into_owned()) else {
        eprintln!("skipped: not a git checkout (git ls-files failed)");
        return;
    };
    let mut found = Vec::new();
    for f in files.lines() {
        if f == "tests/docs_links.rs" || f.ends_with(".ptx") || f.ends_with(".png") || f == "Cargo.lock" {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root().join(f)) else { continue };
        for (n, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            if let Some(p) = HISTORY.iter().find(|p| find_pattern(&lower, p).is_some()) {
                found.push(format!("{f}:{}: \"{p}\" in: {}", n + 1, line.trim().chars().take(120).collect::<String>()));
            }
        }
    }
    assert!(found.is_empty(), "text about how the project was made, not the product ({} lines):\n{}", found.len(), found.join("\n"));
}

/// ARCHITECTURE.md stays a page a reader takes in at once: the frame once, then the crates and
/// folders with their jobs, and the layer tables.
#[test]
fn the_architecture_page_is_short() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let lines = text.lines().count();
    assert!(lines <= 150, "ARCHITECTURE.md has {lines} lines; keep it to 150 (details belong in docs/)");
}
