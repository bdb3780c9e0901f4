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
# The same floors are then checked at link level, on the built objects
# (build/obj/src/**.o, build/obj/tools/*.o, read with nm; readelf for the
# visibility nm does not print): an object must not reference a symbol
# that only a higher floor's objects define (an include can be dodged by
# declaring a function by hand, the reference cannot), and an object of a
# floor whose reach is "own" (tools/) reaches the library only through
# its exported API: no reference to a hidden-visibility symbol of src/.
# FFN_ROOT selects the tree, FFN_OBJ the objects (default build/obj: make
# all first).  After the real tree passes, the test runs its checks on a
# copy with one upward include added (kernels -> nn), and on a copy of
# the objects with two made-up ones added (a kernels object calling into
# nn, a tools object calling a hidden function of format), and must see
# each fail on exactly that line.
set -euo pipefail
ROOT="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
OBJ="${FFN_OBJ:-$ROOT/build/obj}"

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

link_check() { # root objdir
/usr/bin/python3 - "$1" "$2" <<'EOF'
import collections, os, re, subprocess, sys

root, objdir = sys.argv[1], sys.argv[2]

# References that break the rule, each (floor, symbol), with the reason
# beside it.  An entry no longer needed is itself a failure.
ALLOWED = set()

doc = os.path.join(root, "docs/ARCHITECTURE.md")
m = re.search(r"<!-- include-floors:begin -->(.*?)<!-- include-floors:end -->",
              open(doc, encoding="utf-8").read(), re.S)
floors = []  # (name, directory, reach), lowest first
for line in m.group(1).splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != 3 or cells[0] in ("floor", "") or set(cells[0]) <= set("-: "):
        continue
    floors.append((cells[0], cells[1].strip("/"), cells[2]))
rank = {name: i for i, (name, _, _) in enumerate(floors)}
dir_of = {name: d for name, d, _ in floors}

def floor_of(rel):
    best = None
    for f in floors:
        if rel == f[1] or rel.startswith(f[1] + "/"):
            if best is None or len(f[1]) > len(best[1]):
                best = f
    return best

if not os.path.isdir(objdir):
    sys.exit(f"FAIL {objdir}: no objects (make all first)")
failures = []
for top in ("src", "tools"):
    for dirpath, _, names in os.walk(os.path.join(root, top)):
        if os.path.relpath(dirpath, root).startswith("tools/report"):
            continue  # tools/report/embed.c is a build tool, not part of ffn
        for n in sorted(names):
            if n.endswith(".c"):
                rel = os.path.relpath(os.path.join(dirpath, n), root)
                if not os.path.isfile(os.path.join(objdir, rel[:-2] + ".o")):
                    failures.append(f"{rel}: no object {rel[:-2]}.o under {objdir} (make all)")

# nm -P prints "name type [value size]": U undefined, upper case a global
# definition (C common, V/W weak); readelf -s has the visibility.
defined = collections.defaultdict(dict)  # symbol -> {floor: hidden?}
refs = []                                # (object, floor, symbol)
objects = []
for dirpath, _, names in os.walk(objdir):
    objects += [os.path.join(dirpath, n) for n in names if n.endswith(".o")]
objects.sort()
# one nm and one readelf for all objects (nm -A names the object on each
# line, readelf heads each object's table with "File: ...")
vis, cur = {}, None  # (object, symbol) -> visibility of a definition
for line in subprocess.run(["readelf", "-sW"] + objects, capture_output=True, text=True,
                           check=True).stdout.splitlines():
    if line.startswith("File: "):
        cur = line[6:].strip()
        continue
    p = line.split()
    if len(p) >= 8 and p[0].endswith(":") and p[6] != "UND":
        vis[(cur, p[7])] = p[5]
for line in subprocess.run(["nm", "-A", "-P"] + objects, capture_output=True, text=True,
                           check=True).stdout.splitlines():
    head, _, rest = line.partition(": ")
    p = rest.split()
    if len(p) < 2:
        continue
    rel = os.path.relpath(head, objdir)[:-2] + ".c"
    own = floor_of(rel)
    if own is None:
        continue
    if p[1] == "U":
        refs.append((rel[:-2] + ".o", own, p[0]))
    elif p[1].isupper():
        defined[p[0]][own[0]] = vis.get((head, p[0]), "DEFAULT") != "DEFAULT"

used, checked = set(), 0
for obj, own, name in refs:
    where = defined.get(name)
    if not where or own[0] in where:
        continue  # a system library's symbol, or the floor's own
    checked += 1
    if own[2] == "own":
        hidden = sorted((f for f, h in where.items() if h), key=rank.get)
        if hidden:
            failures.append(f"{obj}: references {name}, a hidden symbol of floor {hidden[0]} "
                            f"({dir_of[hidden[0]]}/): floor {own[0]} may use only the "
                            f"library's exported API")
        continue
    if any(rank[f] < rank[own[0]] for f in where):
        continue
    if (own[0], name) in ALLOWED:
        used.add((own[0], name))
        continue
    up = min(where, key=rank.get)
    failures.append(f"{obj}: references {name}, defined in floor {up} ({dir_of[up]}/), "
                    f"which is above floor {own[0]} ({own[1]}/)")
for fl, name in sorted(used):
    print(f"note floor {fl} references {name}, defined above it: allowed for now "
          f"(ALLOWED in link_check, tests/cli/test_includes.sh)")
for fl, name in sorted(ALLOWED - used):
    failures.append(f"floor {fl}: the allowance for {name} is no longer needed; delete it "
                    f"from ALLOWED in link_check, tests/cli/test_includes.sh")
print(f"{len(objects)} objects, {checked} references from one floor to another")
for f in failures:
    print("FAIL " + f)
if failures:
    print(f"test_includes (link level): {len(failures)} failure(s)")
    sys.exit(1)
print("test_includes (link level): all passed")
EOF
}

check "$ROOT"
link_check "$ROOT" "$OBJ"

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

# ---- the link check on a copy of the objects with two made-up references ----
mkdir -p "$tmp/obj"
cp -r "$OBJ/src" "$OBJ/tools" "$tmp/obj/"
printf 'long ffn_model_num_params(const void *);\nlong ffn_selftest_up(const void *m) { return ffn_model_num_params(m); }\n' >"$tmp/up.c"
printf 'int json_parse(const char *, unsigned long, const char *, void **);\nint ffn_selftest_hidden(void **d) { return json_parse("", 0, "x", d); }\n' >"$tmp/hidden.c"
cc -c -fvisibility=hidden -o "$tmp/obj/src/kernels/zz_selftest.o" "$tmp/up.c"
cc -c -fvisibility=hidden -o "$tmp/obj/tools/zz_selftest.o" "$tmp/hidden.c"
: >"$tmp/src/kernels/zz_selftest.c"
: >"$tmp/tools/zz_selftest.c"
if link_check "$tmp" "$tmp/obj" >"$tmp/lout" 2>&1; then
    echo "FAIL self-test: the made-up references in a copy of the objects were not caught"; cat "$tmp/lout"; exit 1
fi
for want in "src/kernels/zz_selftest.o: references ffn_model_num_params, defined in floor nn (src/nn/), which is above floor kernels (src/kernels/)" \
            "tools/zz_selftest.o: references json_parse, a hidden symbol of floor format (src/format/): floor tools may use only the library's exported API"; do
    if ! grep -qF -- "FAIL $want" "$tmp/lout"; then
        echo "FAIL self-test: expected the line 'FAIL $want'"; cat "$tmp/lout"; exit 1
    fi
done
if [[ $(grep -c '^FAIL' "$tmp/lout") != 2 ]]; then
    echo "FAIL self-test: the copy of the objects fails on more than its two made-up references"; cat "$tmp/lout"; exit 1
fi
echo "ok   self-test: a kernels object calling into nn and a tools object calling a hidden function fail as they should"
