//! Layering check of `app/src` and `interop/src`.
//!
//! `ARCHITECTURE.md` ("## Who may import whom") holds one table per crate: each layer (a top-level
//! file or folder of `src/`) with the layers it may import. This test reads both tables and checks
//! that each is acyclic, that every layer present in `src/` is in its table (a listed layer that does
//! not exist yet is fine), and that every `crate::…` path in every `.rs` file (`use crate::{a, b::c}`,
//! inline `crate::x::f()`, and `super::…` that climbs to the crate root) names the file's own layer
//! or one it may import. Names that `lib.rs` re-exports (`crate::Api`) count as the module they come
//! from. Comments and string/char literals are skipped. `lib.rs` and `main.rs` are the crate root
//! and may import anything. Inside and across folders, no two files may import each other, even
//! through others (`crate::`, `self::` and `super::` paths resolved to the file of their module;
//! a file may use its own folder's `mod.rs`). All problems of a crate are reported at once. No
//! source file is over 600 lines, no test file over 800, and no function of `app/src`, `interop/src`,
//! `kernels/src` or `sim/src` over 80 (from `fn` to its closing brace): a longer one does more than one job.
//!
//! Run: `cargo test -p nbody-interop --test architecture`. Without cargo:
//! `rustc --edition 2021 --test tests/architecture.rs -o /tmp/arch_test && (cd app && /tmp/arch_test)`
//! (the workspace root is then `$ARCH_ROOT` or the current directory, or its parent).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A dependency table: each layer with the layers it may import, in table order.
type Table = Vec<(String, Vec<String>)>;

/// Names that lib.rs brings into the crate root with `use`, each with the module it comes from
/// (`None`: from outside the crate, e.g. `use std::sync::Arc;`).
type RootUses = BTreeMap<String, Option<String>>;

fn is_ident(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_') && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// The cells of a Markdown table row, trimmed (empty when `line` is not a row).
fn cells(line: &str) -> Vec<&str> {
    let inner = line.trim().strip_prefix('|').and_then(|l| l.strip_suffix('|'));
    inner.map_or(Vec::new(), |inner| inner.split('|').map(str::trim).collect())
}

/// The names of a cell: `` `a`, `b` `` or `—` (none); `None` when it is neither.
fn names(cell: &str) -> Option<Vec<String>> {
    if cell == "—" {
        return Some(Vec::new());
    }
    cell.split(',').map(|n| n.trim().strip_prefix('`')?.strip_suffix('`').filter(|n| is_ident(n)).map(str::to_string)).collect()
}

/// The table whose header is `| layer (`label`) | may import |`.
fn parse_table(md: &str, label: &str) -> Result<Table, String> {
    let header = format!("layer (`{label}`)");
    let lines: Vec<&str> = md.lines().collect();
    let start = lines
        .iter()
        .position(|l| cells(l).first() == Some(&header.as_str()))
        .ok_or_else(|| format!("ARCHITECTURE.md has no table with the header `| {header} | may import |`"))?;
    let separator = lines.get(start + 1).map_or(Vec::new(), |l| cells(l));
    if separator.len() != 2 || !separator.iter().all(|c| !c.is_empty() && c.chars().all(|ch| ch == '-' || ch == ':')) {
        return Err(format!("ARCHITECTURE.md:{}: expected `| --- | --- |` under the {label} header", start + 2));
    }
    let mut table = Table::new();
    for (n, line) in lines.iter().enumerate().skip(start + 2).take_while(|(_, l)| l.trim_start().starts_with('|')) {
        let at = format!("ARCHITECTURE.md:{}", n + 1);
        let row = cells(line);
        let [layer, allowed] = row.as_slice() else {
            return Err(format!("{at}: expected 2 cells, found {}", row.len()));
        };
        let layer = match names(layer).as_deref() {
            Some([one]) => one.clone(),
            _ => return Err(format!("{at}: the layer cell `{layer}` must be one backticked name")),
        };
        let allowed = names(allowed).ok_or_else(|| format!("{at}: cannot read `{allowed}`: expected `a`, `b`, … or —"))?;
        if table.iter().any(|(l, _)| *l == layer) {
            return Err(format!("{at}: layer `{layer}` is listed twice"));
        }
        table.push((layer, allowed));
    }
    if table.is_empty() {
        return Err(format!("ARCHITECTURE.md:{}: the {label} table has no rows", start + 1));
    }
    for (layer, allowed) in &table {
        if let Some(a) = allowed.iter().find(|a| !table.iter().any(|(l, _)| l == *a)) {
            return Err(format!("ARCHITECTURE.md: in the {label} table `{layer}` may import `{a}`, which is not a layer of it"));
        }
    }
    Ok(table)
}

/// A cycle of the table's "may import" edges (`[a, b, a]`), if there is one.
fn find_cycle(table: &Table) -> Option<Vec<String>> {
    fn visit<'a>(n: &'a str, table: &'a Table, seen: &mut BTreeSet<&'a str>, path: &mut Vec<&'a str>) -> Option<Vec<String>> {
        if let Some(p) = path.iter().position(|&x| x == n) {
            return Some(path[p..].iter().chain([&n]).map(|s| s.to_string()).collect());
        }
        if !seen.insert(n) {
            return None;
        }
        path.push(n);
        let allowed = table.iter().find(|(l, _)| l == n).map_or(&[][..], |(_, a)| a.as_slice());
        let cycle = allowed.iter().find_map(|m| visit(m, table, seen, path));
        path.pop();
        cycle
    }
    let mut seen = BTreeSet::new();
    table.iter().find_map(|(l, _)| visit(l, table, &mut seen, &mut Vec::new()))
}

/// The first index from `i` on where `pred` holds, or `len`.
fn find(len: usize, mut i: usize, pred: impl Fn(usize) -> bool) -> usize {
    while i < len && !pred(i) {
        i += 1;
    }
    i
}

/// `src` with comments and the contents of string and char literals blanked (newlines kept).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let (at, n) = (|i: usize| c.get(i).copied().unwrap_or('\0'), c.len());
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let (mut out, mut i) = (String::with_capacity(src.len()), 0);
    while i < n {
        let mut start = i;
        if c[i] == '/' && at(i + 1) == '/' {
            i = find(n, i, |j| c[j] == '\n');
        } else if c[i] == '/' && at(i + 1) == '*' {
            let mut depth = 0; // block comments nest
            while i < n {
                let step = match (c[i], at(i + 1)) {
                    ('/', '*') => 1,
                    ('*', '/') => -1,
                    _ => 0,
                };
                (depth, i) = (depth + step, i + if step == 0 { 1 } else { 2 });
                if depth == 0 {
                    break;
                }
            }
        } else if c[i] == '"' {
            i += 1;
            while i < n && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c[i] == '\'' && at(i + 1) == '\\' {
            i = find(n, i + 3, |j| c[j] == '\'') + 1; // '\n', '\'', '\u{..}'
        } else if c[i] == '\'' && at(i + 2) == '\'' && at(i + 1) != '\n' {
            i += 3;
        } else if ident(c[i]) {
            i = find(n, i, |j| !ident(c[j]));
            out.extend(&c[start..i]);
            let hashes = c[i..].iter().take_while(|&&ch| ch == '#').count();
            let word: String = c[start..i].iter().collect();
            if !(matches!(word.as_str(), "r" | "br" | "cr") && at(i + hashes) == '"') {
                continue;
            }
            start = i; // a raw string: ends at `"` and as many `#`
            i = find(n, i + hashes + 1, |j| c[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#')) + 1 + hashes;
        } else {
            out.push(c[i]); // also the ' of a lifetime or label
            i += 1;
            continue;
        }
        i = i.min(n);
        out.extend(c[start..i].iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }));
    }
    out
}

/// A token of stripped source and its line.
#[derive(Debug, Clone, PartialEq)]
struct Tok {
    text: String,
    line: usize,
}

/// Identifiers (and numbers), `::`, and single punctuation characters.
fn tokens(stripped: &str) -> Vec<Tok> {
    let c: Vec<char> = stripped.chars().collect();
    let (mut out, mut line, mut i) = (Vec::new(), 1, 0);
    while i < c.len() {
        let start = i;
        if c[i] == '\n' {
            line += 1;
        } else if c[i].is_alphanumeric() || c[i] == '_' {
            i = find(c.len(), i, |j| !(c[j].is_alphanumeric() || c[j] == '_')) - 1;
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            i += 1;
        }
        if !c[start].is_whitespace() {
            out.push(Tok { text: c[start..=i].iter().collect(), line });
        }
        i += 1;
    }
    out
}

fn text(t: &[Tok], i: usize) -> &str {
    t.get(i).map_or("", |x| x.text.as_str())
}

/// Every path of `src` through the crate root, as the token of its first segment after the root:
/// `crate::x`, `crate::{a, b::c}`, `$crate::x`, and `super::…` that climbs to the root. `depth` is
/// the file's module depth under src/ (1 for `cli.rs` or `gfx/mod.rs`, 2 for `backend/cpu.rs`);
/// inline `mod m { … }` blocks add to it.
fn root_refs(src: &str, depth: usize) -> Vec<Tok> {
    let t = tokens(&strip(src));
    let mut blocks = Vec::new(); // per open brace: is it an inline `mod name {`?
    let mut leaves = Vec::new();
    for i in 0..t.len() {
        let path_start = i == 0 || text(&t, i - 1) != "::";
        match text(&t, i) {
            "{" => blocks.push(i >= 2 && text(&t, i - 2) == "mod" && is_ident(text(&t, i - 1))),
            "}" => _ = blocks.pop(),
            "crate" if path_start && text(&t, i + 1) == "::" => _ = use_tree(&t, i + 2, Vec::new(), &mut leaves),
            "super" if path_start && text(&t, i + 1) == "::" => {
                let (mut j, mut ups) = (i + 2, 1);
                while text(&t, j) == "super" && text(&t, j + 1) == "::" {
                    (j, ups) = (j + 2, ups + 1);
                }
                if ups == depth + blocks.iter().filter(|&&m| m).count() {
                    use_tree(&t, j, Vec::new(), &mut leaves);
                }
            }
            _ => {}
        }
    }
    let mut out: Vec<Tok> = leaves.iter().filter_map(|(path, _)| path.first().map(|&tok| tok.clone())).collect();
    out.dedup(); // `crate::{sim::{A, B}}`: one reference
    out
}

/// A use-tree leaf: the tokens of its path and the name it binds.
type Leaf<'a> = (Vec<&'a Tok>, String);

/// The leaves of the use tree (or plain path) at `t[i]` below `prefix`; returns the index after it.
fn use_tree<'a>(t: &'a [Tok], mut i: usize, mut prefix: Vec<&'a Tok>, out: &mut Vec<Leaf<'a>>) -> usize {
    if text(t, i) == "::" {
        i += 1;
    }
    match text(t, i) {
        "{" => {
            i += 1;
            while !matches!(text(t, i), "}" | ";" | "") {
                i = use_tree(t, i, prefix.clone(), out);
                if text(t, i) == "," {
                    i += 1;
                }
            }
            i + 1
        }
        seg if is_ident(seg) || seg == "*" => {
            let group_self = seg == "self" && !prefix.is_empty(); // `a::{self}` binds `a`
            if !group_self {
                prefix.push(&t[i]);
                if seg != "*" && text(t, i + 1) == "::" {
                    return use_tree(t, i + 2, prefix, out);
                }
            }
            let own = prefix.last().map_or(String::new(), |p| p.text.clone());
            let (name, end) = if text(t, i + 1) == "as" { (text(t, i + 2).to_string(), i + 3) } else { (own, i + 1) };
            out.push((prefix, name));
            end
        }
        _ if !prefix.is_empty() => {
            out.push((prefix, String::new())); // `crate::f::<T>()`
            i + 1
        }
        _ => i + 1,
    }
}

/// The names lib.rs `use`s at its top level (`pub use context::{Context, Kind as K};`).
fn root_uses(lib: &str, modules: &BTreeMap<String, String>) -> RootUses {
    let t = tokens(&strip(lib));
    let (mut depth, mut out) = (0usize, RootUses::new());
    for i in 0..t.len() {
        match text(&t, i) {
            "{" => depth += 1,
            "}" => depth = depth.saturating_sub(1),
            "use" if depth == 0 => {
                let mut leaves = Vec::new();
                use_tree(&t, i + 1, Vec::new(), &mut leaves);
                for (path, name) in leaves.into_iter().filter(|(_, n)| n != "*" && n != "_") {
                    let first = path.iter().map(|s| &s.text).find(|s| *s != "crate" && *s != "self");
                    out.insert(name, first.filter(|f| modules.contains_key(*f)).cloned());
                }
            }
            _ => {}
        }
    }
    out
}

/// The layering problems of one crate; `files`: (path under src/ with `/`, source), lib.rs included.
fn check(label: &str, table: &Table, files: &[(String, String)]) -> Vec<String> {
    let mut modules = BTreeMap::new(); // layer → its entry in src/ (`cli.rs`, `bench/`)
    for (rel, _) in files.iter().filter(|(rel, _)| rel != "lib.rs" && rel != "main.rs") {
        let (first, rest) = rel.split_once('/').map_or((rel.as_str(), ""), |(f, _)| (f, "/"));
        modules.entry(first.strip_suffix(".rs").unwrap_or(first).to_string()).or_insert(format!("{first}{rest}"));
    }
    let lib = files.iter().find(|(rel, _)| rel == "lib.rs").map_or("", |(_, src)| src.as_str());
    let uses = root_uses(lib, &modules);
    let mut problems = Vec::new();
    if let Some(cycle) = find_cycle(table) {
        problems.push(format!("ARCHITECTURE.md: the {label} table has a cycle: {}", cycle.join(" -> ")));
    }
    for (layer, entry) in &modules {
        if !table.iter().any(|(l, _)| l == layer) {
            problems.push(format!("{label}/{entry}: layer {layer} is not in the {label} table of ARCHITECTURE.md"));
        }
    }
    for (rel, src) in files {
        let parts: Vec<&str> = rel.split('/').collect();
        if parts.len() == 1 && (rel == "lib.rs" || rel == "main.rs") {
            continue;
        }
        let layer = parts[0].strip_suffix(".rs").unwrap_or(parts[0]);
        let Some((_, allowed)) = table.iter().find(|(l, _)| l == layer) else { continue };
        let depth = parts.len() - usize::from(parts.last() == Some(&"mod.rs"));
        for r in root_refs(src, depth) {
            let at = format!("{label}/{rel}:{}", r.line);
            let (target, via) = match (modules.contains_key(&r.text), uses.get(&r.text)) {
                (true, _) => (r.text.as_str(), String::new()),
                (false, Some(Some(m))) => (m.as_str(), format!(" via crate::{}", r.text)),
                (false, Some(None)) => continue, // `use std::…` in lib.rs
                _ if r.text == "*" => {
                    problems.push(format!("{at}: a glob import of the crate root cannot be checked; name the items"));
                    continue;
                }
                _ if r.text == "self" => continue,
                _ => {
                    problems.push(format!("{at}: crate::{} is neither a module of {label} nor a `use` of its lib.rs", r.text));
                    continue;
                }
            };
            if target == layer || allowed.iter().any(|a| a == target) {
                continue;
            }
            let list = if allowed.is_empty() { "—".to_string() } else { allowed.join(", ") };
            problems.push(format!("{at}: {layer} imports {target}{via} (allowed: {list})"));
        }
    }
    let mut seen = HashSet::new(); // one report per line and problem
    problems.retain(|p| seen.insert(p.clone()));
    problems
}

/// The module path of a file under src/ (`backend/cuda.rs` → `backend::cuda`, `gfx/mod.rs` →
/// `gfx`, `lib.rs` → the root, ``).
fn module_of(rel: &str) -> String {
    let rel = rel.strip_suffix(".rs").unwrap_or(rel);
    let rel = rel.strip_suffix("/mod").unwrap_or(rel);
    if rel == "lib" || rel == "main" {
        String::new()
    } else {
        rel.replace('/', "::")
    }
}

/// Every module path `src` names through `crate::`, `self::` or `super::`, made absolute (`a::b::C`
/// segments, the root first), with its line. `module` is the file's own module path; inline
/// `mod m { … }` blocks (tests) are modules below it.
fn module_refs(src: &str, module: &str) -> Vec<(Vec<String>, usize)> {
    let t = tokens(&strip(src));
    let base: Vec<String> = module.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
    let mut blocks: Vec<Option<String>> = Vec::new(); // per open brace: the inline module it opens
                                                      // Child modules declared by this file (`mod name;`): `name::…` paths are relative to it.
    let children: BTreeSet<&str> = (1..t.len().saturating_sub(1))
        .filter(|&i| text(&t, i - 1) == "mod" && is_ident(text(&t, i)) && text(&t, i + 1) == ";")
        .map(|i| text(&t, i))
        .collect();
    let mut out = Vec::new();
    for i in 0..t.len() {
        let path_start = i == 0 || text(&t, i - 1) != "::";
        let here = || base.iter().cloned().chain(blocks.iter().flatten().cloned()).collect::<Vec<_>>();
        let (mut start, mut j) = (None, i);
        match text(&t, i) {
            child if path_start && blocks.iter().all(Option::is_none) && children.contains(child) && text(&t, i + 1) == "::" => {
                (start, j) = (Some(base.clone()), i);
            }
            "{" => blocks.push((i >= 2 && text(&t, i - 2) == "mod" && is_ident(text(&t, i - 1))).then(|| text(&t, i - 1).to_string())),
            "}" => _ = blocks.pop(),
            "crate" if path_start && text(&t, i + 1) == "::" => (start, j) = (Some(Vec::new()), i + 2),
            "self" if path_start && text(&t, i + 1) == "::" => (start, j) = (Some(here()), i + 2),
            "super" if path_start && text(&t, i + 1) == "::" => {
                let mut m = here();
                j = i;
                while text(&t, j) == "super" && text(&t, j + 1) == "::" {
                    m.pop();
                    j += 2;
                }
                start = Some(m);
            }
            _ => {}
        }
        if let Some(prefix) = start {
            let mut leaves = Vec::new();
            use_tree(&t, j, Vec::new(), &mut leaves);
            for (path, _) in leaves {
                let mut full = prefix.clone();
                full.extend(path.iter().map(|p| p.text.clone()).filter(|s| s != "self" && s != "*"));
                out.push((full, t[i].line));
            }
        }
    }
    out
}

/// The import circles between files: each file imports the files whose modules its paths name
/// (the longest prefix that is a file), except its ancestors (`mod.rs`, `lib.rs`: a file may use
/// its own folder's interface). Each circle once, as `a.rs:L → b.rs:L → a.rs`.
fn file_cycles(label: &str, files: &[(String, String)]) -> Vec<String> {
    let by_module: BTreeMap<String, &str> = files.iter().map(|(rel, _)| (module_of(rel), rel.as_str())).collect();
    // What each file's top-level `use` brings in, by the name it binds: a path through a file
    // that re-exports a name (`pub use child::X` in a mod.rs, lib.rs) lands on the file it
    // comes from.
    let mut imports: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for (rel, src) in files {
        let own = module_of(rel);
        let t = tokens(&strip(src));
        let mut depth = 0usize;
        let mut leaves = Vec::new();
        for i in 0..t.len() {
            match text(&t, i) {
                "{" => depth += 1,
                "}" => depth = depth.saturating_sub(1),
                "use" if depth == 0 => _ = use_tree(&t, i + 1, Vec::new(), &mut leaves),
                _ => {}
            }
        }
        let mut map = BTreeMap::new();
        for (path, name) in leaves {
            let refs = module_refs(&format!("use {};", path.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join("::")), &own);
            // A path relative to a child module the file declares resolves like `self::`.
            let abs = match refs.into_iter().next() {
                Some((abs, _)) => abs,
                None if path
                    .first()
                    .is_some_and(|f| by_module.contains_key(&format!("{own}{}{}", if own.is_empty() { "" } else { "::" }, f.text))) =>
                {
                    own.split("::").filter(|x| !x.is_empty()).map(str::to_string).chain(path.iter().map(|p| p.text.clone())).collect()
                }
                None => continue,
            };
            map.insert(name, abs);
        }
        imports.insert(own, map);
    }
    let resolve = |path: &[String]| -> Option<&str> {
        let mut path = path.to_vec();
        for _ in 0..4 {
            let (k, target) = (0..=path.len()).rev().find_map(|k| by_module.get(&path[..k].join("::")).map(|t| (k, *t)))?;
            let via = path.get(k).and_then(|name| imports.get(&module_of(target))?.get(name));
            match via {
                Some(src) if src[..] != path[..k + 1] => path = src.iter().cloned().chain(path[k + 1..].iter().cloned()).collect(),
                _ => return Some(target),
            }
        }
        None
    };
    let mut edges: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for (rel, src) in files {
        let own = module_of(rel);
        for (path, line) in module_refs(src, &own) {
            let Some(target) = resolve(&path) else { continue };
            let t = module_of(target);
            let ancestor = t.is_empty() || own == t || own.starts_with(&format!("{t}::"));
            if !ancestor {
                edges.entry(rel.as_str()).or_default().entry(target).or_insert(line);
            }
        }
    }
    // Tarjan's strongly connected components; a component of two or more files holds a circle.
    struct State<'a> {
        edges: &'a BTreeMap<&'a str, BTreeMap<&'a str, usize>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        components: Vec<Vec<&'a str>>,
    }
    fn connect<'a>(v: &'a str, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let next: Vec<&str> = s.edges.get(v).map(|m| m.keys().copied().collect()).unwrap_or_default();
        for w in next {
            if !s.index.contains_key(w) {
                connect(w, s);
                let lw = s.low[w];
                s.low.entry(v).and_modify(|l| *l = (*l).min(lw));
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                s.low.entry(v).and_modify(|l| *l = (*l).min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut c = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                c.push(w);
                if w == v {
                    break;
                }
            }
            s.components.push(c);
        }
    }
    let mut s =
        State { edges: &edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on_stack: BTreeSet::new(), components: Vec::new() };
    for (rel, _) in files {
        if !s.index.contains_key(rel.as_str()) {
            connect(rel, &mut s);
        }
    }
    let mut out = Vec::new();
    for comp in s.components.iter().filter(|c| c.len() > 1) {
        // One circle through the component, from its first file, by the first edge that stays in it.
        let set: BTreeSet<&str> = comp.iter().copied().collect();
        let first = *set.iter().next().expect("non-empty");
        let (mut path, mut at) = (vec![first.to_string()], first);
        let mut visited = BTreeSet::from([first]);
        loop {
            let (next, line) = edges[at].iter().find(|(t, _)| set.contains(**t)).map(|(t, l)| (*t, *l)).expect("an edge inside");
            let last = path.last_mut().expect("non-empty");
            *last = format!("{last}:{line}");
            path.push(next.to_string());
            if !visited.insert(next) {
                break;
            }
            at = next;
        }
        let mut all: Vec<&str> = comp.clone();
        all.sort_unstable();
        let others = if all.len() > 2 { format!(" (one circle of those between {})", all.join(", ")) } else { String::new() };
        out.push(format!("{label}: import circle between files: {}{others}", path.join(" → ")));
    }
    out
}

/// The workspace root: CARGO_MANIFEST_DIR's parent under cargo; with plain rustc `$ARCH_ROOT` or the
/// current directory, or its parent, whichever holds ARCHITECTURE.md.
fn workspace_root() -> PathBuf {
    let dir = option_env!("CARGO_MANIFEST_DIR").map(PathBuf::from).or_else(|| std::env::var_os("ARCH_ROOT").map(PathBuf::from));
    let dir = dir.unwrap_or_else(|| std::env::current_dir().expect("current dir"));
    [dir.clone(), dir.join("..")].into_iter().find(|d| d.join("ARCHITECTURE.md").is_file()).unwrap_or(dir)
}

/// Every `.rs` file under `dir` as (path relative to `base` with `/`, source), sorted.
fn rust_files(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
    let mut paths: Vec<PathBuf> =
        fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display())).map(|e| e.expect("directory entry").path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            rust_files(&p, base, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel: Vec<String> = p.strip_prefix(base).expect("under base").iter().map(|s| s.to_string_lossy().into_owned()).collect();
            out.push((rel.join("/"), fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))));
        }
    }
}

/// Checks `<krate>/src` against its table; panics with every problem found.
fn assert_layering(krate: &str) {
    let root = workspace_root();
    let label = format!("{krate}/src");
    let md = fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap_or_else(|e| panic!("cannot read ARCHITECTURE.md in {}: {e}", root.display()));
    let table = parse_table(&md, &label).unwrap_or_else(|e| panic!("{e}"));
    let (src, mut files) = (root.join(&label), Vec::new());
    rust_files(&src, &src, &mut files);
    let mut problems = check(&label, &table, &files);
    problems.extend(file_cycles(&label, &files));
    assert!(
        problems.is_empty(),
        "{} layering problem(s) in {label} (tables: ARCHITECTURE.md, \"## Who may import whom\"):\n{}\n",
        problems.len(),
        problems.join("\n")
    );
}

/// The most lines a source file of `app/src` or `interop/src` may have: past it a file is doing
/// more than one job (split it by responsibility, each file named for its job).
const MAX_SOURCE_LINES: usize = 600;
/// The most lines a test file under `tests/` may have (split it by topic).
const MAX_TEST_LINES: usize = 800;

/// The files of `files` (path, source) longer than `max` lines, as messages.
fn too_long(label: &str, files: &[(String, String)], max: usize) -> Vec<String> {
    files
        .iter()
        .filter(|(_, src)| src.lines().count() > max)
        .map(|(rel, src)| format!("{label}/{rel}: {} lines, over {max}: split it by responsibility", src.lines().count()))
        .collect()
}

#[test]
fn no_file_does_more_than_one_job() {
    let root = workspace_root();
    let mut problems = Vec::new();
    for krate in ["app", "interop"] {
        let label = format!("{krate}/src");
        let (src, mut files) = (root.join(&label), Vec::new());
        rust_files(&src, &src, &mut files);
        problems.extend(too_long(&label, &files, MAX_SOURCE_LINES));
    }
    let (tests, mut files) = (root.join("tests"), Vec::new());
    rust_files(&tests, &tests, &mut files);
    problems.extend(too_long("tests", &files, MAX_TEST_LINES));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The most lines a function may have, from the line of its `fn` to its closing brace: past it a
/// function does more than one job (split it into named steps).
const MAX_FN_LINES: usize = 80;

/// Functions allowed past [`MAX_FN_LINES`] as (`path:name`, reason): declarative or generated tables only.
const LONG_FN_ALLOWED: &[(&str, &str)] = &[];

/// Every `fn` of `src` that has a body (methods and nested fns too) as (line, name, lines from `fn` to its `}`).
fn fn_lengths(src: &str) -> Vec<(usize, String, usize)> {
    let t = tokens(&strip(src));
    let step = |j: usize, open: &str, close: &str| i32::from(text(&t, j) == open) - i32::from(text(&t, j) == close);
    let mut out = Vec::new();
    for i in (0..t.len()).filter(|&i| text(&t, i) == "fn" && is_ident(text(&t, i + 1))) {
        let (mut parens, mut brackets, mut braces) = (0, 0, 0); // `-> [u8; 4]` does not end a signature
        let Some(body) = (i + 2..t.len()).find(|&j| {
            (parens, brackets) = (parens + step(j, "(", ")"), brackets + step(j, "[", "]"));
            parens == 0 && brackets == 0 && matches!(text(&t, j), "{" | ";")
        }) else {
            continue;
        };
        if text(&t, body) == "{" {
            let close = (body..t.len())
                .find(|&j| {
                    braces += step(j, "{", "}");
                    braces == 0
                })
                .unwrap_or(t.len() - 1);
            out.push((t[i].line, t[i + 1].text.clone(), t[close].line - t[i].line + 1));
        }
    }
    out
}

#[test]
fn no_function_does_more_than_one_job() {
    let (root, mut problems, mut allowed_used) = (workspace_root(), Vec::new(), BTreeSet::new());
    for krate in ["app", "interop", "kernels", "sim"] {
        let label = format!("{krate}/src");
        let (src, mut files) = (root.join(&label), Vec::new());
        rust_files(&src, &src, &mut files);
        for (rel, source) in &files {
            for (line, name, n) in fn_lengths(source).into_iter().filter(|(_, _, n)| *n > MAX_FN_LINES) {
                match LONG_FN_ALLOWED.iter().find(|(key, _)| *key == format!("{label}/{rel}:{name}")) {
                    Some((key, _)) => _ = allowed_used.insert(*key),
                    None => problems.push(format!("{label}/{rel}:{line} {name} ({n} lines)")),
                }
            }
        }
    }
    let stale = LONG_FN_ALLOWED.iter().filter(|(key, _)| !allowed_used.contains(key));
    problems.extend(stale.map(|(key, _)| format!("{key}: on LONG_FN_ALLOWED but not over {MAX_FN_LINES} lines: remove it")));
    assert!(problems.is_empty(), "{} function(s) over {MAX_FN_LINES} lines: split each into named steps\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn app_layers() {
    assert_layering("app");
}

#[test]
fn interop_layers() {
    assert_layering("interop");
}

/// Tests of the checker itself, on in-memory sources.
mod checker {
    use super::*;

    const MD: &str = "# x\n\n| layer (`x/src`) | may import |\n| --- | --- |\n| `error` | — |\n| `entry` | `error` |\n\nprose\n";

    fn heads_of(src: &str, depth: usize) -> Vec<String> {
        root_refs(src, depth).into_iter().map(|r| r.text).collect()
    }

    #[test]
    fn comments_are_ignored() {
        let src = "// crate::demo\n/// crate::demo\n//! crate::demo\n/* crate::demo /* nested */ crate::demo */\nuse crate::sim; // crate::demo\n";
        assert_eq!(root_refs(src, 1), [Tok { text: "sim".into(), line: 5 }]);
    }

    #[test]
    fn strings_and_chars_are_ignored() {
        let src = r##"let a = "crate::demo \" crate::demo"; let b = r#"crate::demo " x"#; let c = '"';
            let d = crate::sim::X; fn f<'a>(x: &'a str) -> &'a str { crate::gfx::g(x) }
            let e = b'\''; let f = br"crate::demo"; let g = '\u{22}'; let h = "crate::demo";"##;
        assert_eq!(heads_of(src, 1), ["sim", "gfx"]);
    }

    #[test]
    fn grouped_imports_are_split() {
        let src = "use crate::{sim::{A, B}, gfx,\n    cuda::{self as c, d::E}, trace::*};\nfn f() { $crate::ui::x(); pub(crate) struct S; }";
        assert_eq!(heads_of(src, 1), ["sim", "gfx", "cuda", "trace", "ui"]);
        assert_eq!(root_refs(src, 1)[2].line, 2);
    }

    #[test]
    fn super_climbs_by_depth() {
        let src = "use super::x;\nuse super::super::y;\nmod tests { use super::*; use super::super::z; }";
        assert_eq!(heads_of(src, 1), ["x", "z"]);
        assert_eq!(heads_of(src, 2), ["y"]);
    }

    #[test]
    fn tables_parse_and_cycles_are_found() {
        let table = parse_table(MD, "x/src").unwrap();
        assert_eq!(table, [("error".into(), vec![]), ("entry".into(), vec!["error".to_string()])]);
        assert_eq!(find_cycle(&table), None);
        let cyclic = MD.replace("| `error` | — |", "| `error` | `entry` |");
        assert_eq!(find_cycle(&parse_table(&cyclic, "x/src").unwrap()).unwrap(), ["error", "entry", "error"]);
        assert!(parse_table(MD, "y/src").unwrap_err().contains("no table"));
        assert!(parse_table(&MD.replace("`error` | —", "`error` | error"), "x/src").unwrap_err().contains(":5: cannot read"));
        assert!(parse_table(&MD.replace("`entry` | `error`", "`entry` | `nope`"), "x/src").unwrap_err().contains("`nope`"));
    }

    #[test]
    fn circles_between_files_are_found_and_parents_are_not_circles() {
        let files = [
            ("lib.rs".to_string(), "pub mod ui;".to_string()),
            ("ui/mod.rs".into(), "mod a; mod b; pub use a::A; use crate::ui::b::B;".into()),
            ("ui/a.rs".into(), "use super::b::helper;\nuse super::Shared;".into()),
            ("ui/b.rs".into(), "use crate::ui::Shared;\n\nfn f() { crate::ui::a::A::new(); }\nmod tests { use super::super::a; }".into()),
            ("ui/c.rs".into(), "use super::a::A; use self::inner::X; mod inner {}".into()),
        ];
        assert_eq!(file_cycles("x/src", &files), ["x/src: import circle between files: ui/a.rs:1 → ui/b.rs:3 → ui/a.rs"]);
        let acyclic: Vec<_> = files.iter().filter(|(r, _)| r != "ui/b.rs").cloned().collect();
        assert!(file_cycles("x/src", &acyclic).is_empty());
        assert_eq!(module_refs("mod tests { use super::super::z::Y; }", "a::b"), [(vec!["a".to_string(), "z".into(), "Y".into()], 1)]);
        // A folder's mod.rs naming its child relatively: an edge to the child.
        let parent_uses_child = [
            ("ui/mod.rs".to_string(), "mod a;\npub use a::A;".to_string()),
            ("ui/a.rs".into(), "use crate::ui::b::B;".into()),
            ("ui/b.rs".into(), "use crate::ui::a::A;".into()),
        ];
        assert_eq!(module_refs(&parent_uses_child[0].1, "ui"), [(vec!["ui".to_string(), "a".into(), "A".into()], 2)]);
        assert_eq!(file_cycles("x/src", &parent_uses_child).len(), 1);
        // A name a folder's mod.rs re-exports counts as the file it comes from.
        let through_reexport = [
            ("ui/mod.rs".to_string(), "mod a;\nmod b;\npub use a::A;\npub use self::b::B;".to_string()),
            ("ui/a.rs".into(), "use super::B;".into()),
            ("ui/b.rs".into(), "use crate::ui::A;".into()),
        ];
        assert_eq!(file_cycles("x/src", &through_reexport).len(), 1, "{:?}", file_cycles("x/src", &through_reexport));
    }

    #[test]
    fn function_lengths_run_from_fn_to_its_brace() {
        let src = "trait T { fn decl(&self) -> [u8; 4]; }\nfn outer() {\n    let (s, c) = (\"}\", '}'); // }\n    fn inner<T>(x: T) -> [T; 1] where T: Copy { [x] }\n    let f: fn(u8) = drop;\n}\nmacro_rules! m { ($n:ident) => { fn $n() {} }; }";
        assert_eq!(fn_lengths(src), [(2, "outer".to_string(), 5), (4, "inner".to_string(), 1)]);
    }

    #[test]
    fn reexports_are_resolved() {
        let modules = ["entry", "error", "extra"].map(|n| (n.to_string(), format!("{n}.rs"))).into();
        let lib = "pub mod entry;\npub use entry::{Api, Report as R, sub::{Deep}};\npub use self::error::Result;\nuse std::sync::Arc;\nfn f() { use extra::X; }\n";
        let uses = root_uses(lib, &modules);
        let from = ["Api", "R", "Deep", "Result", "Arc"].map(|n| uses[n].as_deref());
        assert_eq!((from, uses.get("X")), ([Some("entry"), Some("entry"), Some("entry"), Some("error"), None], None));
        let files = [
            ("main.rs".to_string(), "use crate::extra;".to_string()),
            ("error.rs".into(), "use crate::Api;\nfn f() -> crate::Result<crate::Arc<()>> { crate::Nope }\n".into()),
            ("entry.rs".into(), "use crate::{Result, error};".into()),
            ("extra.rs".into(), "use crate::entry;".into()),
            ("error/sub.rs".into(), "mod m {}\nuse super::super::entry::X;".into()),
            ("lib.rs".into(), lib.into()),
        ];
        let problems = check("x/src", &parse_table(MD, "x/src").unwrap(), &files);
        assert_eq!(
            problems,
            [
                "x/src/extra.rs: layer extra is not in the x/src table of ARCHITECTURE.md",
                "x/src/error.rs:1: error imports entry via crate::Api (allowed: —)",
                "x/src/error.rs:2: crate::Nope is neither a module of x/src nor a `use` of its lib.rs",
                "x/src/error/sub.rs:2: error imports entry (allowed: —)",
            ]
        );
    }
}
