#!/usr/bin/env python3
"""Every claim checkable: the docs' measured tables are made from raw files, their figures and
quotes are checked against those files and the CUDA headers.

    python3 .ci/claims.py tables        # rewrite every generated table in the docs
    python3 .ci/claims.py check         # fail when a table, a figure, a quote or a provenance is off

Three kinds of claim, each with one written form (docs/results.md, "How a figure is checked"):

* A generated table: an HTML comment `<!-- table ... -->` holding its spec, then the table this
  script writes, then `<!-- /table -->`. The spec's lines:
    from PATH [key=value ...]          rows of a raw file (repeat to concatenate), filtered
    join NAME PATH on KEY[,KEY] [key=value ...]   the one row of PATH with equal keys, as NAME.field
    where EXPR                         keep rows where the Python expression is true
    group KEY[,KEY]                    one row per distinct key: a field equal in the whole group is
                                       its value, else the list of values, for median(), min(),
                                       max(), len()
    sort EXPR                          order rows by the expression (default: file order)
    col HEADER | EXPR | FORMAT         a column: its header, value and format
  EXPR is a Python expression over the row's fields (names made of letters, digits and `_`).
  FORMAT is a Python format string (`{:.3f}`, `{:.1f}×`, `{}`), `eN` (1.2e-3 with N decimals),
  `gN` (N significant digits) or `int`. An empty or missing value gives an empty cell.
* A figure in prose: a link to its raw file whose title selects the value,
  `[1.387 ms](results/DIR/bench.json "mode=map n=16384 frame_ms_median")`: `key=value` tokens
  pick exactly one record, the rest is the field (or an expression over the record). The first
  number of the link text must equal the value within its printed digits; a text value must
  appear in the link text. In a text file (`.txt`, `.log`) the title is `/REGEX/`, whose first
  group is the value.
* A quote of the reference: `“verbatim text” [cuda.h: cuFunctionName]`: the text must appear in
  the documentation comment of that function in the named header of the pinned CUDA wheel
  (`NBODY_CUDA_INCLUDE`), after the comment's `*`, Doxygen commands and `::` are taken out and
  white space is collapsed. `…` in the quote leaves words out; the parts must appear in order.

Every raw file a table or a figure uses must carry its provenance: embedded (a JSON object's
`provenance` key, or a `{"provenance": …}` first line in JSON lines), in a sidecar
`FILE.provenance.json`, or as the entry of FILE in its folder's `provenance.json`.
"""

import csv
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
DOCS = ["README.md", "ARCHITECTURE.md", "kernels/README.md", "interop/README.md"] + sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
SOURCES_WITH_QUOTES = ["app/src", "interop/src", "kernels", "sim/src"]
HEADERS = ["cuda.h", "cudaGL.h", "cudaEGL.h", "cudaTypedefs.h", "cudaGLTypedefs.h", "cuda_runtime_api.h",
           "cuda_gl_interop.h", "driver_types.h"]
PROVENANCE_KEYS = ["schema", "date_utc", "host", "gpu"]


class ClaimError(Exception):
    pass


# ---------------------------------------------------------------- raw files and their provenance

def parse_value(s):
    """A CSV cell as a number where it is one; empty → None."""
    if s is None:
        return None
    if not isinstance(s, str):
        return s
    t = s.strip()
    if t == "":
        return None
    if t in ("true", "false"):
        return t == "true"
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


def flatten(obj, prefix=""):
    """Nested JSON objects as one level of `a_b` keys (the nested keys stay reachable too)."""
    out = {}
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out[key] = v
            out.update(flatten(v, key + "_"))
        else:
            out[key] = v
    return out


_cache = {}


def bench_v2_provenance(doc):
    """The provenance a `bench.json` of schema 2 holds in its own header (`git_commit`,
    `command_line`, `machine`), in the block's field names; None for other files."""
    if doc.get("schema_version") != 2 or not doc.get("git_commit") or not doc.get("command_line"):
        return None
    machine = doc.get("machine") or {}
    gpu = machine.get("gpu")
    rows = doc.get("rows") or [{}]
    return {"schema": "bench.json 2", "commit": doc["git_commit"], "command_line": doc["command_line"],
            "date_utc": rows[0].get("date", ""), "host": machine.get("host"),
            "cpu": {"threads": machine.get("cpu_threads")},
            "gpu": gpu and {"name": gpu.get("name"), "driver": gpu.get("nvidia_driver"), "cuda": gpu.get("cuda_driver"),
                            "sm_clock_mhz": gpu.get("sm_clock_mhz")}}


def load(path):
    """(records, embedded provenance or None) of a raw file."""
    if path in _cache:
        return _cache[path]
    if not path.exists():
        raise ClaimError(f"{rel(path)}: no such raw file")
    text = path.read_text(encoding="utf-8", errors="replace")
    prov = None
    suffix = path.suffix.lower()
    if suffix == ".csv":
        lines = [l for l in text.splitlines() if not l.startswith("#")]
        records = [{k: parse_value(v) for k, v in r.items()} for r in csv.DictReader(lines)]
    elif suffix == ".json":
        doc = json.loads(text)
        if isinstance(doc, dict):
            prov = doc.get("provenance") or bench_v2_provenance(doc)
            if isinstance(doc.get("rows"), list):
                records = [flatten(r) for r in doc["rows"]]
            elif isinstance(doc.get("runs"), list):
                records = [dict(flatten(r), run=i) for i, run in enumerate(doc["runs"]) for r in run.get("rows", [])]
            else:
                records = [flatten(doc)]
        else:
            records = [flatten(r) for r in doc]
    elif suffix == ".jsonl":
        records = []
        for line in text.splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            if set(r) == {"provenance"}:
                prov = r["provenance"]
                continue
            records.append(flatten(r))
    else:
        records = [{"_text": text}]
    _cache[path] = (records, prov)
    return records, prov


def provenance(path):
    """The provenance block of a raw file, or ClaimError saying where it was looked for."""
    _, prov = load(path)
    if prov is None:
        side = path.with_name(path.name + ".provenance.json")
        if side.exists():
            prov = json.loads(side.read_text())
    if prov is None:
        folder = path.parent / "provenance.json"
        if folder.exists():
            prov = json.loads(folder.read_text()).get("files", {}).get(path.name)
    if prov is None:
        raise ClaimError(f"{rel(path)}: no provenance (embedded, {path.name}.provenance.json, or an entry in "
                         f"{rel(path.parent)}/provenance.json): record how it was made, or stop citing it")
    missing = [k for k in PROVENANCE_KEYS if k not in prov]
    if "commit" not in prov and "committed_in" not in prov:
        missing.append("commit")
    if not (prov.get("command_line") or prov.get("command")):
        missing.append("command_line")
    if missing:
        raise ClaimError(f"{rel(path)}: its provenance lacks {', '.join(missing)}")
    return prov


def rel(p):
    try:
        return str(Path(p).resolve().relative_to(ROOT))
    except ValueError:
        return str(p)


def ident(k):
    k = re.sub(r"\W", "_", str(k))
    return "_" + k if k[:1].isdigit() else k


def namespace(record):
    return {ident(k): v for k, v in record.items()}


def matches(record, filters):
    for k, v in filters:
        got = record.get(k)
        if got is None:
            return False
        if str(got) != v and parse_value(v) != got:
            return False
    return True


def split_filters(tokens):
    filters, rest = [], []
    for t in tokens:
        m = re.fullmatch(r"([\w.-]+)=([^=].*)", t)
        if m and not rest:
            filters.append((m.group(1), m.group(2)))
        else:
            rest.append(t)
    return filters, " ".join(rest)


def median(values):
    v = sorted(x for x in (values if isinstance(values, list) else [values]) if x is not None)
    if not v:
        return None
    h = len(v) // 2
    return v[h] if len(v) % 2 else 0.5 * (v[h - 1] + v[h])


def evaluate(expr, env):
    fns = {"abs": abs, "min": min, "max": max, "round": round, "len": len, "median": median}
    try:
        return eval(expr, {"__builtins__": {}, **fns}, env)  # noqa: S307
    except (TypeError, ZeroDivisionError, KeyError, AttributeError):
        return None
    except NameError as e:
        raise ClaimError(f"`{expr}`: {e} (fields: {', '.join(sorted(k for k in env if not k.startswith('__')))})")


# ---------------------------------------------------------------- formats

def fmt_e(v, n):
    if v == 0:
        return "0"
    e = int(math.floor(math.log10(abs(v))))
    m = v / 10 ** e
    if round(abs(m), n) >= 10:
        e += 1
        m = v / 10 ** e
    return f"{m:.{n}f}e{e}"


def fmt(v, spec):
    if v is None or v == "" or (isinstance(v, float) and math.isnan(v)):
        return ""
    spec = spec.strip() or "{}"
    if re.fullmatch(r"e\d", spec):
        return fmt_e(float(v), int(spec[1:]))
    if re.fullmatch(r"g\d", spec):
        n = int(spec[1:])
        if v == 0:
            return "0"
        d = max(n - 1 - int(math.floor(math.log10(abs(float(v))))), 0)
        return f"{float(v):.{d}f}"
    if spec == "int":
        return str(int(round(float(v))))
    try:
        return spec.format(v)
    except (ValueError, TypeError):
        return str(v)


def is_numeric_column(cells):
    vals = [c for c in cells if c]
    return bool(vals) and all(re.match(r"^[-+−]?[\d.]", c) for c in vals)


# ---------------------------------------------------------------- tables

TABLE_RE = re.compile(r"(<!-- table\n(?P<spec>.*?)-->\n)(?P<body>.*?)(<!-- /table -->)", re.S)


def describe(prov):
    """One caption line's facts of a provenance block."""
    parts = []
    cmd = prov.get("command_line")
    cmd = " ".join(["nbody-interop"] + list(cmd[1:])) if cmd else prov.get("command")
    parts.append(f"`{cmd}`")
    if prov.get("commit"):
        parts.append(f"commit {prov['commit']}{' (with uncommitted changes)' if prov.get('dirty') else ''}")
    else:
        parts.append(f"commit not recorded (the file came in with {prov.get('committed_in', '?')})")
    gpu = prov.get("gpu")
    if gpu:
        parts.append(f"{gpu.get('name')}, driver {gpu.get('driver')} (CUDA {gpu.get('cuda')})")
    cpu = prov.get("cpu")
    if cpu and (not gpu or cpu.get("model")):
        parts.append(f"{cpu.get('model', 'CPU')}, {cpu.get('cores')} cores")
    parts.append(str(prov.get("date_utc", ""))[:10])
    return ", ".join(p for p in parts if p)


def build_table(doc_path, spec):
    base = doc_path.parent
    rows, sources, joins, cols, where, sort, group = [], [], [], [], None, None, None
    for raw in spec.splitlines():
        line = raw.strip()
        if not line:
            continue
        word, _, rest = line.partition(" ")
        if word == "from":
            toks = rest.split()
            path = (base / toks[0]).resolve()
            filters, extra = split_filters(toks[1:])
            if extra:
                raise ClaimError(f"`{line}`: only key=value filters may follow the path")
            recs, _ = load(path)
            sources.append(path)
            for r in recs:
                if matches(r, filters):
                    rows.append(dict(r, _file=path.name))
        elif word == "join":
            m = re.fullmatch(r"(\w+)\s+(\S+)\s+on\s+(\S+)\s*(.*)", rest)
            if not m:
                raise ClaimError(f"`{line}`: write `join NAME PATH on KEY[,KEY] [key=value ...]`")
            path = (base / m.group(2)).resolve()
            filters, _ = split_filters(m.group(4).split())
            recs, _ = load(path)
            sources.append(path)
            joins.append((m.group(1), [r for r in recs if matches(r, filters)], m.group(3).split(",")))
        elif word == "where":
            where = rest
        elif word == "sort":
            sort = rest
        elif word == "group":
            group = rest.split(",")
        elif word == "col":
            parts = [p.strip() for p in rest.split(" | ")]
            if len(parts) < 2:
                raise ClaimError(f"`{line}`: write `col HEADER | EXPR | FORMAT`")
            cols.append((parts[0], parts[1], parts[2] if len(parts) > 2 else "{}"))
        else:
            raise ClaimError(f"`{line}`: unknown word {word!r} (from, join, where, group, sort, col)")
    if not sources or not cols:
        raise ClaimError("a table spec needs at least one `from` and one `col`")
    envs = []
    for r in rows:
        env = namespace(r)
        for name, recs, keys in joins:
            hit = [j for j in recs if all(str(j.get(k)) == str(r.get(k)) for k in keys)]
            env[name] = SimpleNamespace(**namespace(hit[0])) if len(hit) == 1 else SimpleNamespace()
        if where is None or evaluate(where, env):
            envs.append(env)
    if group:
        keys = [ident(k.strip()) for k in group]
        groups = {}
        for e in envs:
            groups.setdefault(tuple(str(e.get(k)) for k in keys), []).append(e)
        envs = []
        for members in groups.values():
            merged = {}
            for k in members[0]:
                vals = [m.get(k) for m in members]
                merged[k] = vals[0] if all(v == vals[0] for v in vals) else vals
            envs.append(merged)
    if sort:
        envs.sort(key=lambda e: evaluate(sort, e))
    if not envs:
        raise ClaimError("the table's spec selects no row")
    cells = [[fmt(evaluate(expr, e), f) for (_, expr, f) in cols] for e in envs]
    numeric = [is_numeric_column([c[i] for c in cells]) for i in range(len(cols))]
    out = []
    seen = []
    for s in sources:
        if s not in seen:
            seen.append(s)
    for s in seen:
        link = os.path.relpath(s, base)
        out.append(f"<sub>from [`{link}`]({link}): {describe(provenance(s))}</sub><br>")
    out[-1] = out[-1].removesuffix("<br>")
    out.append("")
    out.append("| " + " | ".join(h for (h, _, _) in cols) + " |")
    out.append("| " + " | ".join("---:" if n else "---" for n in numeric) + " |")
    for c in cells:
        out.append("| " + " | ".join(c) + " |")
    return "\n".join(out) + "\n"


def tables(write):
    problems, changed = [], []
    for d in DOCS:
        p = ROOT / d
        if not p.exists():
            continue
        text = p.read_text(encoding="utf-8")

        def repl(m):
            try:
                body = build_table(p, m.group("spec"))
            except ClaimError as e:
                problems.append(f"{d}: table at line {text[:m.start()].count(chr(10)) + 1}: {e}")
                return m.group(0)
            return m.group(1) + body + m.group(4)

        new = TABLE_RE.sub(repl, text)
        if new != text:
            changed.append(d)
            if write:
                p.write_text(new, encoding="utf-8")
    return problems, changed


# ---------------------------------------------------------------- figures in prose

LINK_RE = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])+)\]\((\S*results/[^)\s]+)\s+\"([^\"]+)\"\)")
NUM_RE = re.compile(r"[-+−]?\d[\d,\u202f\u2009]*(?:\.\d+)?(?:[eE][-+−]?\d+)?")


def printed_number(text):
    m = NUM_RE.search(text.replace("×10^", "e").replace(" × 10^", "e"))
    if not m:
        return None
    s = m.group(0).replace(",", "").replace("\u202f", "").replace("\u2009", "").replace("−", "-")
    mant, _, exp = s.lower().partition("e")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    value = float(s)
    half = 0.5 * 10 ** (-decimals) * (10 ** int(exp) if exp else 1)
    return value, half


def check_figure(doc_path, text, target, title):
    path = (doc_path.parent / target.split("#")[0]).resolve()
    provenance(path)
    recs, _ = load(path)
    if path.suffix.lower() in (".txt", ".log"):
        m = re.fullmatch(r"/(.*)/", title)
        if not m:
            raise ClaimError(f"{target}: a text file's figure is selected by /REGEX/, not {title!r}")
        hit = re.search(m.group(1), recs[0]["_text"])
        if not hit:
            raise ClaimError(f"{target}: /{m.group(1)}/ finds nothing")
        value = parse_value(hit.group(1) if hit.groups() else hit.group(0))
    else:
        filters, expr = split_filters(title.split())
        sel = [r for r in recs if matches(r, filters)]
        if len(sel) != 1:
            raise ClaimError(f"{target} \"{title}\": the filters pick {len(sel)} records, not one")
        value = evaluate(expr, namespace(sel[0])) if expr else None
        if value is None:
            raise ClaimError(f"{target} \"{title}\": no value for `{expr}`")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        got = printed_number(text)
        if got is None:
            raise ClaimError(f"[{text}]: no number in the link's text for the value {value}")
        printed, half = got
        if abs(printed - value) > half * 1.0001 + 1e-12 and abs(abs(printed) - abs(value)) > half * 1.0001:
            raise ClaimError(f"[{text}]: says {printed}, {rel(path)} holds {value} (\"{title}\")")
    elif str(value) not in text:
        raise ClaimError(f"[{text}]: {rel(path)} holds {value!r} (\"{title}\")")


def figures():
    problems, count = [], 0
    for d in DOCS:
        p = ROOT / d
        if not p.exists():
            continue
        text = p.read_text(encoding="utf-8")
        for m in LINK_RE.finditer(text):
            count += 1
            try:
                check_figure(p, m.group(1), m.group(2), m.group(3))
            except ClaimError as e:
                problems.append(f"{d}:{text[:m.start()].count(chr(10)) + 1}: {e}")
            except (ValueError, json.JSONDecodeError) as e:
                problems.append(f"{d}:{text[:m.start()].count(chr(10)) + 1}: {e}")
    return problems, count


# ---------------------------------------------------------------- quotes of the headers

QUOTE_RE = re.compile(r"“([^”]+)”\s*\[(" + "|".join(re.escape(h) for h in HEADERS) + r"):\s*(\w+)\]")


def include_dir():
    env = os.environ.get("NBODY_CUDA_INCLUDE")
    if env:
        return Path(env)
    for py in (ROOT / ".ci/.venv/bin/python", Path(sys.executable)):
        try:
            out = subprocess.run([str(py), "-c", "import nvidia.cuda_runtime as m, os; "
                                  "print(os.path.join(list(m.__path__)[0], 'include'))"],
                                 capture_output=True, text=True, check=True)
            return Path(out.stdout.strip())
        except (OSError, subprocess.CalledProcessError):
            continue
    return None


def normalize(s):
    s = s.replace("‘", "'").replace("’", "'").replace("“", '"').replace("”", '"')
    s = re.sub(r"\\(p|e|b|c|a|ref)\s+", "", s)
    s = re.sub(r"\\[A-Za-z_]+", " ", s)
    s = s.replace("::", "")
    s = re.sub(r"</?\w+>", "", s)
    return " ".join(s.split())


_docblocks = {}


def doc_blocks(header_path, func):
    key = (header_path, func)
    if key in _docblocks:
        return _docblocks[key]
    text = header_path.read_text(encoding="utf-8", errors="replace")
    blocks = []
    for m in re.finditer(r"/\*\*((?:(?!\*/).)*?)\*/\s*((?:[^;{/]|/(?!\*))*?)\b" + re.escape(func) + r"\s*\(", text, re.S):
        decl = m.group(2)
        if "\n\n\n" in decl or "*/" in decl:
            continue
        body = re.sub(r"^\s*\*( |$)", "", m.group(1), flags=re.M)
        blocks.append(normalize(body))
    _docblocks[key] = blocks
    return blocks


def quote_in(quote, blocks):
    parts = [normalize(p) for p in quote.split("…") if p.strip()]
    for b in blocks:
        pos = 0
        for part in parts:
            i = b.find(part, pos)
            if i < 0:
                break
            pos = i + len(part)
        else:
            return True
    return False


def source_texts():
    for d in DOCS:
        p = ROOT / d
        if p.exists():
            yield d, re.sub(r"\n\s*>?\s*", " ", p.read_text(encoding="utf-8"))
    for top in SOURCES_WITH_QUOTES:
        for p in sorted((ROOT / top).rglob("*.rs")):
            t = p.read_text(encoding="utf-8")
            t = re.sub(r"\\\n\s*", "", t)
            t = re.sub(r"\n\s*(///?!?|//)\s?", " ", t)
            yield str(p.relative_to(ROOT)), t


def quotes():
    inc = include_dir()
    found = [(name, m) for name, t in source_texts() for m in QUOTE_RE.finditer(t)]
    if inc is None or not (inc / "cuda.h").exists():
        if found:
            return [f"{len(found)} quotes of the CUDA headers cannot be checked: set NBODY_CUDA_INCLUDE to the "
                    "include folder of the pinned wheel nvidia-cuda-runtime-cu12 (bash .ci/run installs it)"], len(found)
        return [], 0
    problems = []
    for name, m in found:
        quote, header, func = m.group(1), m.group(2), m.group(3)
        blocks = doc_blocks(inc / header, func)
        if not blocks:
            problems.append(f"{name}: [{header}: {func}]: no documented declaration of {func} in {header}")
        elif not quote_in(quote, blocks):
            problems.append(f"{name}: “{quote}” is not in the documentation of {func} in {header}")
    return problems, len(found)


# ---------------------------------------------------------------- main

def main(argv):
    cmd = argv[1] if len(argv) > 1 else "check"
    if cmd == "tables":
        problems, changed = tables(write=True)
        for c in changed:
            print(f"rewrote the tables of {c}")
    elif cmd == "check":
        problems, changed = tables(write=False)
        problems += [f"{c}: a generated table differs from what `python3 .ci/claims.py tables` makes from its raw "
                     "files: run it and commit the result" for c in changed]
        fp, nfig = figures()
        qp, nq = quotes()
        problems += fp + qp
        ntab = sum(len(TABLE_RE.findall((ROOT / d).read_text(encoding="utf-8"))) for d in DOCS if (ROOT / d).exists())
        print(f"claims: {ntab} generated tables, {nfig} figures linked to raw files, {nq} quotes of the CUDA headers")
    else:
        print(__doc__)
        return 2
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
