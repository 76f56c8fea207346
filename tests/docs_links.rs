//! docs/workflow.md links to source lines (`[`map_resources`](../app/src/cuda_backend.rs#L123)`).
//! Each such link must still point at its call: the inline-code identifier of the link text
//! (its last `::`/`.` segment) must appear on the linked line or within ±2 lines, so the test fails
//! when the code moves and tells where the identifier is now. Links to files must name files that exist.

use std::path::{Path, PathBuf};

/// Lines of slack either side of the linked line.
const SLACK: usize = 2;

const DOCS: &[&str] = &["docs/workflow.md"];

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
            let Some(end) = tail.find(')') else { break };
            out.push(Link { text: text.to_string(), target: tail[..end].to_string(), line: i + 1 });
            rest = &tail[end + 1..];
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

#[test]
fn extracts_links_and_identifiers() {
    let md = "see [`Mapping::unmap`](../interop/src/graphics.rs#L12) and [the README](../README.md).\n```\n[`x`](nope#L1)\n```\n";
    let l = links(md);
    assert_eq!(l.len(), 2);
    assert_eq!(l[0].target, "../interop/src/graphics.rs#L12");
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
            let Ok(source) = std::fs::read_to_string(&path) else {
                problems.push(format!("{doc}:{}: {} links to {file}, which does not exist", link.line, link.text));
                continue;
            };
            let Some(n) = anchor.and_then(|a| a.strip_prefix('L')).and_then(|n| n.parse::<usize>().ok()) else { continue };
            let lines: Vec<&str> = source.lines().collect();
            if n == 0 || n > lines.len() {
                problems.push(format!("{doc}:{}: {file}#L{n} is past the end ({} lines)", link.line, lines.len()));
                continue;
            }
            let Some(id) = identifier(&link.text) else { continue };
            checked += 1;
            let lo = n.saturating_sub(SLACK).max(1);
            let hi = (n + SLACK).min(lines.len());
            if !(lo..=hi).any(|k| lines[k - 1].contains(id.as_str())) {
                let now: Vec<String> =
                    lines.iter().enumerate().filter(|(_, l)| l.contains(id.as_str())).map(|(k, _)| format!("L{}", k + 1)).take(8).collect();
                problems.push(format!(
                    "{doc}:{}: `{id}` is not at {file}#L{n} (±{SLACK}); it appears at {}",
                    link.line,
                    if now.is_empty() { "no line of that file".to_string() } else { now.join(", ") }
                ));
            }
        }
    }
    assert!(problems.is_empty(), "stale links in the docs (fix the line numbers):\n  {}", problems.join("\n  "));
    assert!(checked >= 20, "only {checked} source links checked: did the doc lose its links?");
}
