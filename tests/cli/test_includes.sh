#!/usr/bin/env bash
# test_includes.sh -- every #include in src/ and tools/ stays within its
# floor's reach.  The floors and their reach come from the table between
# <!-- include-floors:begin --> and <!-- include-floors:end --> in
# docs/ARCHITECTURE.md.  An include is resolved the way the compiler does
# for "..." (the including file's directory, then -Iinclude, then -Isrc);
# the test fails on
#   - an include out of reach (upward, or from tools/ into src/), naming
#     the file, the line and both floors;
#   - an include in src/ written relative to the file's own directory
#     instead of as a path from src/;
#   - an include that resolves to nothing, or a source file in no floor.
# FFN_ROOT selects the tree.  After the real tree passes, the test runs
# its check on a copy with one upward include added (kernels -> nn) and
# must see it fail on exactly that line.
set -euo pipefail
ROOT="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"

check() { # root
/usr/bin/python3 - "$1" <<'EOF'
import os, re, sys

root = sys.argv[1]

# Includes that break the rule, each (file, included header), with the
# reason beside it.  None today; an entry no longer needed is itself a
# failure, so the list cannot go stale.
ALLOWED = set()

doc = os.path.join(root, "docs/ARCHITECTURE.md")
text = open(doc, encoding="utf-8").read()
m = re.search(r"<!-- include-floors:begin -->(.*?)<!-- include-floors:end -->", text, re.S)
if not m:
    sys.exit(f"FAIL {doc}: no include-floors table (markers <!-- include-floors:begin/end -->)")
floors = []  # (name, directory, reach), lowest first
for line in m.group(1).splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != 3 or cells[0] in ("floor", "") or set(cells[0]) <= set("-: "):
        continue
    name, directory, reach = cells
    if reach not in ("lower", "own"):
        sys.exit(f"FAIL {doc}: floor {name}: reach '{reach}', expected 'lower' or 'own'")
    floors.append((name, directory.strip("/"), reach))
if len(floors) < 2:
    sys.exit(f"FAIL {doc}: the include-floors table has {len(floors)} rows")
rank = {name: i for i, (name, _, _) in enumerate(floors)}

def floor_of(rel):
    """The floor (name, dir, reach) holding path rel (from the root), or None."""
    best = None
    for f in floors:
        if rel == f[1] or rel.startswith(f[1] + "/"):
            if best is None or len(f[1]) > len(best[1]):
                best = f
    return best

def strip_comments(src):
    """Blank out comments and string contents, keeping line breaks."""
    def blank(mt):
        return re.sub(r"[^\n]", " ", mt.group(0))
    pattern = r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
    def repl(mt):
        s = mt.group(0)
        return blank(mt) if s.startswith("/") else s
    return re.sub(pattern, repl, src, flags=re.S)

failures, checked, used_allowances = [], 0, set()
sources = []
for top in ("src", "tools"):
    for dirpath, _, names in os.walk(os.path.join(root, top)):
        for n in sorted(names):
            if n.endswith((".c", ".h", ".def")):
                sources.append(os.path.relpath(os.path.join(dirpath, n), root))

for rel in sorted(sources):
    own = floor_of(rel)
    if own is None:
        failures.append(f"{rel}: in no floor of the include-floors table in docs/ARCHITECTURE.md")
        continue
    raw = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read()
    lines = strip_comments(raw).split("\n")
    raw_lines = raw.split("\n")
    for lineno, line in enumerate(lines, 1):
        if not re.match(r"\s*#\s*include\b", line):
            continue
        mt = re.match(r'\s*#\s*include\s*"([^"]+)"', raw_lines[lineno - 1])
        if not mt:
            continue  # <system> headers
        inc = mt.group(1)
        checked += 1
        where = f"{rel}:{lineno}: #include \"{inc}\""
        local = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
        target = None
        for cand in (local, os.path.normpath(os.path.join("include", inc)),
                     os.path.normpath(os.path.join("src", inc))):
            if os.path.isfile(os.path.join(root, cand)):
                target = cand
                break
        if target is None:
            failures.append(f"{where}: found neither beside the file nor under include/ or src/")
            continue
        if target.startswith("include/"):
            continue  # the public headers are in every floor's reach
        if rel.startswith("src/") and target == local and not \
                os.path.isfile(os.path.join(root, "src", inc)):
            failures.append(f"{where}: written relative to {os.path.dirname(rel)}/; "
                            f"write it as a path from src/ (\"{os.path.relpath(target, 'src')}\")")
        tf = floor_of(target)
        if tf is None:
            failures.append(f"{where}: {target} is in no floor of the table")
            continue
        if tf[0] == own[0]:
            continue
        if own[2] == "lower" and rank[tf[0]] < rank[own[0]]:
            continue
        if (rel, inc) in ALLOWED:
            used_allowances.add((rel, inc))
            print(f"note {where}: floor {own[0]} ({own[1]}/) includes floor {tf[0]} "
                  f"({tf[1]}/): allowed for now (ALLOWED in tests/cli/test_includes.sh)")
            continue
        if own[2] == "own":
            why = "but may include only its own headers and include/"
        else:
            why = "which is above it"
        failures.append(f"{where}: floor {own[0]} ({own[1]}/) includes floor {tf[0]} "
                        f"({tf[1]}/), {why}")

for rel, inc in sorted(ALLOWED - used_allowances):
    failures.append(f"{rel}: the allowance for #include \"{inc}\" is no longer needed; "
                    f"delete it from ALLOWED in tests/cli/test_includes.sh")

print(f"{len(sources)} files, {checked} quoted includes; floors, lowest first: "
      + ", ".join(f"{f[0]} ({f[2]})" for f in floors))
for f in failures:
    print("FAIL " + f)
if failures:
    print(f"test_includes: {len(failures)} failure(s)")
    sys.exit(1)
print("test_includes: all passed")
EOF
}

check "$ROOT"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs"
cp -r "$ROOT/src" "$ROOT/tools" "$tmp/"
cp "$ROOT/docs/ARCHITECTURE.md" "$tmp/docs/"
victim=src/kernels/gemv.c
line=$(grep -n '^#include "' "$tmp/$victim" | tail -n 1 | cut -d: -f1)
sed -i "${line}a #include \"nn/model_internal.h\"" "$tmp/$victim"
want="$victim:$((line + 1)): #include \"nn/model_internal.h\": floor kernels (src/kernels/) includes floor nn (src/nn/), which is above it"
if check "$tmp" >"$tmp/out" 2>&1; then
    echo "FAIL self-test: an upward include in a copy of the tree was not caught"; cat "$tmp/out"; exit 1
fi
if ! grep -qF -- "FAIL $want" "$tmp/out"; then
    echo "FAIL self-test: expected the line 'FAIL $want'"; cat "$tmp/out"; exit 1
fi
echo "ok   self-test: a copy with $victim including nn/model_internal.h fails as it should"
