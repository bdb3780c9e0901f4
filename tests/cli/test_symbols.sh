#!/usr/bin/env bash
# test_symbols.sh -- what libffn.so and libffn.a export, and that a
# program built against the installed library links and runs.
#   1. every dynamic symbol build/libffn.so defines starts with ffn_
#      (the offenders are listed);
#   2. the exports are exactly the functions the public headers declare:
#      none missing (a source file that stopped including its public header
#      would silently hide its definitions), none extra (an internal ffn_*
#      helper leaking out);
#   3. the static archives build/libffn.a and build/libffn_dist.a define
#      (nm -g --defined-only) exactly the global names their shared
#      libraries export: all ffn_*, no internal function (the Makefile
#      links each archive's objects into one and makes the hidden ones
#      local);
#   4. `make install` into a temporary prefix, then a small C program built
#      with `pkg-config --cflags --libs ffn` links against the installed
#      libffn.so and runs; the same program is also built directly against
#      build/libffn.so, and statically against the installed libffn.a
#      (pkg-config --static) with names of the library's internals
#      (json_parse, bpe_encode) defined by the program itself; the headers
#      compile as C++.
# Needs a built tree (make all); runs nm, pkg-config, cc, c++, make.
set -euo pipefail
ROOT="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
SO="${FFN_SO:-$ROOT/build/libffn.so}"   # FFN_SO: check another build of the library
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

if [[ ! -f "$SO" ]]; then echo "FAIL $SO is missing (run make all first)"; exit 1; fi

# ---- 1. only ffn_* in the dynamic symbol table ------------------------------
nm -D --defined-only "$SO" | awk '{print $NF}' | sort -u >"$tmp/exported"
grep -v '^ffn_' "$tmp/exported" >"$tmp/offenders" || true
if [[ -s "$tmp/offenders" ]]; then
    bad "libffn.so exports $(wc -l <"$tmp/offenders") symbol(s) without the ffn_ prefix:"
    sed 's/^/       /' "$tmp/offenders"
else
    ok "all $(wc -l <"$tmp/exported") exported symbols start with ffn_"
fi

# ---- 2. exports == functions declared in include/ffn/*.h --------------------
# A declaration is an identifier ffn_* followed by '(' once comments are
# stripped.  `static inline` functions of the public headers (ffn/rng.h)
# are compiled into the caller, not exported: they are listed apart and
# must not be exported; a function-like ffn_* macro is refused (teach the
# test about it first).
# include/ffn/dist.h is libffn_dist's header: its functions are checked
# against build/libffn_dist.so below, the same way.
/usr/bin/python3 - "$ROOT/include/ffn" "$tmp/inline" "$tmp/declared_dist" >"$tmp/declared" <<'EOF'
import glob, os, re, sys
names, inline, dist = set(), set(), set()
for h in sorted(glob.glob(os.path.join(sys.argv[1], "*.h"))):
    if os.path.basename(h) == "dist.h":
        text = re.sub(r"/\*.*?\*/", " ", open(h, encoding="utf-8").read(), flags=re.S)
        dist |= set(re.findall(r"\b(ffn_\w+)\s*\((?!\s*\*)", text))
        continue
    text = re.sub(r"/\*.*?\*/", " ", open(h, encoding="utf-8").read(), flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    if re.search(r"#\s*define\s+ffn_\w+\(", text):
        sys.exit(f"{h}: a function-like macro; teach test_symbols.sh about it")
    inline |= set(re.findall(r"\bstatic\s+inline\s+[\w\s\*]*?\b(ffn_\w+)\s*\(", text))
    if re.search(r"\b(static|inline)\b", re.sub(r"\bstatic\s+inline\b", " ", text)):
        sys.exit(f"{h}: a static or inline that is not 'static inline'; teach test_symbols.sh about it")
    names |= set(re.findall(r"\b(ffn_\w+)\s*\((?!\s*\*)", text))
print("\n".join(sorted(names - inline)))
open(sys.argv[2], "w").write("".join(n + "\n" for n in sorted(inline)))
open(sys.argv[3], "w").write("".join(n + "\n" for n in sorted(dist)))
EOF
grep '^ffn_' "$tmp/exported" >"$tmp/exported_ffn" || true
comm -23 "$tmp/declared" "$tmp/exported_ffn" >"$tmp/missing"
comm -13 "$tmp/declared" "$tmp/exported_ffn" >"$tmp/extra"
if [[ -s "$tmp/missing" ]]; then
    bad "declared in include/ffn/*.h but not exported by libffn.so (does the defining file include its public header?):"
    sed 's/^/       /' "$tmp/missing"
else
    ok "all $(wc -l <"$tmp/declared") functions declared in the public headers are exported"
fi
if [[ -s "$tmp/extra" ]]; then
    bad "exported by libffn.so but declared in no public header (internal; should be hidden):"
    sed 's/^/       /' "$tmp/extra"
else
    ok "no internal ffn_* symbol is exported"
fi

DSO="$(dirname "$SO")/libffn_dist.so"
if [[ -f "$DSO" ]]; then
    nm -D --defined-only "$DSO" | awk '{print $NF}' | grep -v '^_' | sort -u >"$tmp/dexported"
    if cmp -s "$tmp/declared_dist" "$tmp/dexported"; then
        ok "libffn_dist.so exports exactly the $(wc -l <"$tmp/dexported") functions of include/ffn/dist.h"
    else
        bad "libffn_dist.so exports differ from include/ffn/dist.h:"; diff "$tmp/declared_dist" "$tmp/dexported" | sed 's/^/       /'
    fi
else bad "$DSO is missing (make all)"; fi

# ---- 3. the static archives: the same names as the shared libraries ------------
archive_check() { # archive, file of the names it must define, what they are
    local a="$1" want="$2" what="$3" n
    if [[ ! -f "$a" ]]; then bad "$a is missing (make all)"; return; fi
    nm -g --defined-only "$a" | awk 'NF == 3 {print $3}' | sort -u >"$tmp/adefined"
    grep -v '^ffn_' "$tmp/adefined" >"$tmp/aoffenders" || true
    if [[ -s "$tmp/aoffenders" ]]; then
        n=$(wc -l <"$tmp/aoffenders")
        bad "$(basename "$a") defines $n global name(s) without the ffn_ prefix (nm -g --defined-only):"
        sed 's/^/       /' "$tmp/aoffenders"
    elif cmp -s "$want" "$tmp/adefined"; then
        ok "$(basename "$a") defines exactly the $(wc -l <"$want") global names of $what, all ffn_*"
    else
        bad "$(basename "$a") defines other global names than $what (< $what only, > the archive only):"
        diff "$want" "$tmp/adefined" | grep '^[<>]' | sed 's/^/       /'
    fi
}
archive_check "$(dirname "$SO")/libffn.a" "$tmp/exported" "libffn.so's exports"
if [[ -f "$DSO" ]]; then
    archive_check "$(dirname "$SO")/libffn_dist.a" "$tmp/dexported" "libffn_dist.so's exports"
fi

# ---- 4. a program against the installed library ------------------------------
cat >"$tmp/prog.c" <<'EOF'
/* One gated layer (D=3, F=5, N=2) on known weights, against a direct
 * computation; an invalid call must fail with a message. */
#include <ffn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    enum { D = 3, F = 5, N = 2 };
    float wg[F * D], wu[F * D], wd[D * F], x[N * D], y[N * D];
    for (int i = 0; i < F * D; i++) {
        wg[i] = 0.1f * (float)(i % 7) - 0.3f;
        wu[i] = 0.05f * (float)(i % 5) - 0.1f;
    }
    for (int i = 0; i < D * F; i++) wd[i] = 0.2f * (float)(i % 3) - 0.2f;
    for (int i = 0; i < N * D; i++) x[i] = 0.5f * (float)i - 1.0f;
    ffn_ctx *ctx = NULL;
    ffn_layer *layer = NULL;
    if (ffn_ctx_create(1, &ctx) != FFN_OK) { fprintf(stderr, "ctx: %s\n", ffn_last_error()); return 1; }
    ffn_layer_config cfg = { .hidden_size = D, .intermediate_size = F,
                             .type = FFN_MLP_GATED, .act = FFN_ACT_SILU };
    ffn_layer_params w = { .gate_w = wg, .up_w = wu, .down_w = wd };
    if (ffn_layer_create(ctx, &cfg, &layer) != FFN_OK || ffn_layer_set_weights(layer, &w) != FFN_OK) {
        fprintf(stderr, "layer: %s\n", ffn_last_error()); return 1;
    }
    size_t ws_bytes = ffn_layer_workspace_size(layer, N);
    void *ws = malloc(ws_bytes ? ws_bytes : 1);
    if (ffn_layer_forward(layer, y, x, N, NULL, ws, ws_bytes) != FFN_OK) {
        fprintf(stderr, "forward: %s\n", ffn_last_error()); return 1;
    }
    double maxdiff = 0;
    for (int n = 0; n < N; n++) {
        double h[F];
        for (int f = 0; f < F; f++) {
            double g = 0, u = 0;
            for (int d = 0; d < D; d++) { g += wg[f * D + d] * x[n * D + d]; u += wu[f * D + d] * x[n * D + d]; }
            h[f] = g / (1 + exp(-g)) * u;
        }
        for (int d = 0; d < D; d++) {
            double r = 0;
            for (int f = 0; f < F; f++) r += wd[d * F + f] * h[f];
            double diff = fabs(r - y[n * D + d]);
            if (diff > maxdiff) maxdiff = diff;
        }
    }
    ffn_layer_config bad_cfg = cfg;
    bad_cfg.hidden_size = 0;
    ffn_layer *none = NULL;
    ffn_status st = ffn_layer_create(ctx, &bad_cfg, &none);
    int ok = maxdiff < 1e-5 && st != FFN_OK && strlen(ffn_last_error()) > 0;
    printf("ffn %s simd=%s maxdiff=%.3g bad_config=%s (%s)\n", ffn_version(), ffn_simd_level(),
           maxdiff, ffn_status_str(st), ffn_last_error());
    free(ws);
    ffn_layer_free(layer);
    ffn_ctx_free(ctx);
    return ok ? 0 : 1;
}
EOF

prefix="$tmp/prefix"
if make -s -C "$ROOT" install PREFIX="$prefix" >"$tmp/install.log" 2>&1; then
    ok "make install PREFIX=<tmp>"
else
    bad "make install failed:"; sed 's/^/       /' "$tmp/install.log"
fi
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
if flags=$(pkg-config --cflags --libs ffn 2>"$tmp/pc.err"); then
    # shellcheck disable=SC2086
    if cc -std=c11 -Wall -Wextra -Werror -o "$tmp/prog_installed" "$tmp/prog.c" $flags -lm 2>"$tmp/cc.err"; then
        ok "built against the installed headers: cc prog.c $flags"
        if LD_LIBRARY_PATH="$prefix/lib" "$tmp/prog_installed" >"$tmp/run.out" 2>&1; then
            ok "runs: $(cat "$tmp/run.out")"
        else
            bad "the program built against the installed library failed:"; sed 's/^/       /' "$tmp/run.out"
        fi
        lib=$(LD_LIBRARY_PATH="$prefix/lib" ldd "$tmp/prog_installed" | awk '/libffn/ {print $3}')
        if [[ "$lib" == "$prefix/lib/"* ]]; then ok "loads the installed $lib"
        else bad "loads libffn from '$lib', not from $prefix/lib"; fi
    else
        bad "cannot build against the installed library:"; sed 's/^/       /' "$tmp/cc.err"
    fi
else
    bad "pkg-config --cflags --libs ffn failed:"; sed 's/^/       /' "$tmp/pc.err"
fi

# ---- statically against the installed libffn.a --------------------------------
# The program also defines functions named as the library's internals are:
# with those names local to libffn.a there is no clash.
{ cat "$tmp/prog.c"; printf 'int json_parse(void);\nint json_parse(void) { return 0; }\n'
  printf 'int bpe_encode(void);\nint bpe_encode(void) { return json_parse(); }\n'; } >"$tmp/prog_static.c"
if slibs=$(pkg-config --static --libs ffn 2>"$tmp/pcs.err"); then
    slibs=$(sed -E 's/(^| )-lffn( |$)/ /' <<<"$slibs")
    # shellcheck disable=SC2086
    if cc -std=c11 -Wall -Wextra -Werror -I"$prefix/include" -o "$tmp/prog_static" "$tmp/prog_static.c" \
          "$prefix/lib/libffn.a" $slibs -lm 2>"$tmp/ccs.err"; then
        if "$tmp/prog_static" >"$tmp/runs.out" 2>&1; then
            ok "built statically against the installed libffn.a (with its own json_parse and bpe_encode) and runs"
        else
            bad "the program built against libffn.a failed:"; sed 's/^/       /' "$tmp/runs.out"
        fi
        if ldd "$tmp/prog_static" | grep -q libffn; then bad "the static program still loads a libffn.so"; fi
    else
        bad "cannot build statically against the installed libffn.a:"; sed 's/^/       /' "$tmp/ccs.err"
    fi
else
    bad "pkg-config --static --libs ffn failed:"; sed 's/^/       /' "$tmp/pcs.err"
fi

# ---- and directly against build/libffn.so -------------------------------------
# (its soname is libffn.so.0, which build/ does not hold: a link beside it)
mkdir -p "$tmp/lib" && ln -s "$SO" "$tmp/lib/libffn.so.0"
if cc -std=c11 -Wall -Wextra -Werror -I"$ROOT/include" -o "$tmp/prog_build" "$tmp/prog.c" \
      "$SO" -Wl,-rpath,"$tmp/lib" -lm 2>"$tmp/cc2.err"; then
    if "$tmp/prog_build" >"$tmp/run2.out" 2>&1; then ok "built against build/libffn.so and runs"
    else bad "the program built against build/libffn.so failed:"; sed 's/^/       /' "$tmp/run2.out"; fi
else
    bad "cannot build against build/libffn.so:"; sed 's/^/       /' "$tmp/cc2.err"
fi

# ---- the public headers as C++ (extern "C", the visibility pragmas) ---------
printf '#include <ffn.h>\nint main() { return ffn_version() ? 0 : 1; }\n' >"$tmp/prog.cc"
if c++ -Wall -Wextra -Werror -I"$ROOT/include" -o "$tmp/prog_cxx" "$tmp/prog.cc" "$SO" \
       -Wl,-rpath,"$tmp/lib" 2>"$tmp/cxx.err" && "$tmp/prog_cxx"; then
    ok "include/ffn.h compiles, links and runs as C++"
else
    bad "include/ffn.h as C++:"; sed 's/^/       /' "$tmp/cxx.err"
fi

if ((fail)); then echo "test_symbols: FAILED"; exit 1; fi
echo "test_symbols: all passed"
