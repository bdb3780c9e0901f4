#!/usr/bin/env bash
# test_bad_inputs.sh -- bad safetensors files, bad configs and bad outputs
# through `ffn layer`, one case each: every case must exit non-zero with its
# own specific message and leave no output file behind.
set -euo pipefail
ROOT="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
FFN="${FFN_BIN:-$ROOT/build/ffn}"
PY=/usr/bin/python3
export PYTHONPATH="$ROOT/tests/parity${PYTHONPATH:+:$PYTHONPATH}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

# ---- the good files every case starts from (D = 6, F = 10, N = 3) ----
$PY - "$T" <<'EOF'
import sys, json, numpy as np, ffn_testlib as T
d = sys.argv[1]
rng = np.random.default_rng(1)
D, F, N = 6, 10, 3
f32 = lambda *s: rng.standard_normal(s).astype(np.float32)
good_w = {"up_proj.weight": f32(F, D), "down_proj.weight": f32(D, F)}
T.write_safetensors(d + "/w.safetensors", good_w)
T.write_safetensors(d + "/in.safetensors", {"x": f32(N, D), "dy": f32(N, D)})
T.write_config(d + "/layer.json", hidden_size=D, intermediate_size=F, hidden_act="gelu")

# -- bad safetensors (used as the weights file) --
hdr = lambda h: json.dumps(h).encode()
up = {"dtype": "F32", "shape": [F, D], "data_offsets": [0, 4 * F * D]}
down = {"dtype": "F32", "shape": [D, F], "data_offsets": [4 * F * D, 8 * F * D]}
data = bytes(8 * F * D)
# header length larger than the file
T.write_raw_safetensors(d + "/st_hdrlen.safetensors", hdr({"up_proj.weight": up}), b"",
                        header_len=4096)
# the header is not valid JSON
T.write_raw_safetensors(d + "/st_json.safetensors", b'{"up_proj.weight": {"dtype": "F32",', data)
# an unknown dtype
T.write_raw_safetensors(d + "/st_dtype.safetensors",
                        hdr({"up_proj.weight": dict(up, dtype="F7"), "down_proj.weight": down}), data)
# shape x dtype size != byte span (60 floats declared, 59 floats of span)
T.write_raw_safetensors(d + "/st_span.safetensors",
                        hdr({"up_proj.weight": dict(up, data_offsets=[0, 4 * F * D - 4]),
                             "down_proj.weight": dict(down, data_offsets=[4 * F * D - 4, 8 * F * D])}),
                        data[:-4] + bytes(4))
# overlapping offsets: down_proj starts inside up_proj
T.write_raw_safetensors(d + "/st_overlap.safetensors",
                        hdr({"up_proj.weight": up,
                             "down_proj.weight": dict(down, data_offsets=[4 * F * D - 8, 8 * F * D - 8])}),
                        data)
# a required tensor is missing (no down_proj.weight)
T.write_safetensors(d + "/w_missing.safetensors", {"up_proj.weight": f32(F, D)})
# a tensor's shape disagrees with the config: up_proj.weight is (D, F)
T.write_safetensors(d + "/w_shape.safetensors", {"up_proj.weight": f32(D, F), "down_proj.weight": f32(D, F)})
# -- bad inputs --
T.write_safetensors(d + "/in_wrong_d.safetensors", {"x": f32(N, D + 1), "dy": f32(N, D + 1)})
T.write_safetensors(d + "/in_no_dy.safetensors", {"x": f32(N, D)})
# -- bad configs --
T.write_config(d + "/cfg_act.json", hidden_size=D, intermediate_size=F, hidden_act="gelu_fast")
T.write_config(d + "/cfg_zero.json", hidden_size=0, intermediate_size=F)
T.write_config(d + "/cfg_neg.json", hidden_size=-6, intermediate_size=F)
T.write_config(d + "/cfg_overflow.json", hidden_size=10**9, intermediate_size=10**15)
T.write_config(d + "/cfg_type.json", hidden_size=D, intermediate_size=F, hidden_act="gelu",
               mlp_type="gated")
T.write_config(d + "/cfg_str.json", hidden_size="6", intermediate_size=F)
T.write_config(d + "/cfg_frac.json", hidden_size=D, intermediate_size=10.5)
T.write_config(d + "/cfg_acttype.json", hidden_size=D, intermediate_size=F, hidden_act=3)
T.write_config(d + "/cfg_mlptype.json", hidden_size=D, intermediate_size=F, mlp_type="sparse")
T.write_config(d + "/cfg_bias.json", hidden_size=D, intermediate_size=F, mlp_bias="yes")
T.write_config(d + "/cfg_dense.json", hidden_size=D, intermediate_size=F, mlp_type="dense")
T.write_safetensors(d + "/w_gated.safetensors", dict(good_w, **{"gate_proj.weight": f32(F, D)}))
T.write_safetensors(d + "/w_int.safetensors", {"up_proj.weight": np.ones((F, D), np.int32),
                                               "down_proj.weight": f32(D, F)})
T.write_safetensors(d + "/in_rank1.safetensors", {"x": f32(D)})
with open(d + "/cfg_notjson.json", "w") as f:
    f.write("hidden_size: 6\nintermediate_size: 10\n")
EOF

# case NAME FRAGMENT [--backward] -- WEIGHTS INPUT CONFIG OUTPUT-PATH
# Runs `ffn layer` and expects exit 1, FRAGMENT (fixed string) in stderr,
# and no file at OUTPUT-PATH nor any temporary left in its directory
# (the listing of the directory is the same before and after).
case_() {
    local name="$1" frag="$2" bw="$3" w="$4" in="$5" cfg="$6" out="${7:-$T/out/$1.safetensors}"
    mkdir -p "$T/out"
    local dir; dir=$(dirname "$out")
    local before; before=$(ls -A "$dir" 2>/dev/null || true)
    local rc=0 args=(layer --config "$cfg" --weights "$w" --input "$in" --output "$out")
    [[ "$bw" == backward ]] && args+=(--backward)
    "$FFN" "${args[@]}" >"$T/stdout" 2>"$T/stderr" || rc=$?
    local err; err=$(head -c 600 "$T/stderr")
    if [[ $rc -ne 1 ]]; then bad "$name: exit $rc, expected 1; stderr: $err"; return; fi
    if ! grep -qF -- "$frag" "$T/stderr"; then bad "$name: stderr lacks '$frag': $err"; return; fi
    if [[ -e "$out" && ! -d "$out" ]]; then bad "$name: left $out behind"; return; fi
    local after; after=$(ls -A "$dir" 2>/dev/null || true)
    if [[ "$before" != "$after" ]]; then bad "$name: the output directory changed: '$before' -> '$after'"; return; fi
    if [[ -d "$out" && -n "$(ls -A "$out")" ]]; then bad "$name: wrote into the directory $out"; return; fi
    ok "$name: exit 1: $err"
}
W="$T/w.safetensors" IN="$T/in.safetensors" CFG="$T/layer.json"

# bad safetensors
case_ st_header_len   "header length 4096 exceeds the file"      fwd "$T/st_hdrlen.safetensors"  "$IN" "$CFG"
case_ st_invalid_json "JSON header: byte"       fwd "$T/st_json.safetensors"    "$IN" "$CFG"
case_ st_dtype        "unknown dtype 'F7'"       fwd "$T/st_dtype.safetensors"   "$IN" "$CFG"
case_ st_span         "240 bytes expected"       fwd "$T/st_span.safetensors"    "$IN" "$CFG"
case_ st_overlap      "overlap tensor up_proj.weight"       fwd "$T/st_overlap.safetensors" "$IN" "$CFG"
case_ missing_tensor  "down_proj.weight: missing"     fwd "$T/w_missing.safetensors"  "$IN" "$CFG"
case_ shape_vs_config "up_proj.weight: expected shape [10, 6]"     fwd "$T/w_shape.safetensors"    "$IN" "$CFG"
grep -qF "found [6, 10]" "$T/stderr" && ok "shape_vs_config names what was found" \
    || bad "shape_vs_config: no 'found [6, 10]': $(cat "$T/stderr")"
case_ x_wrong_d       "x: expected shape [N, 6]"      fwd "$W" "$T/in_wrong_d.safetensors" "$CFG"
case_ dy_missing      "dy: missing"       backward "$W" "$T/in_no_dy.safetensors" "$CFG"
# bad configs
case_ act_unknown     "hidden_act: unknown value 'gelu_fast'"         fwd "$W" "$IN" "$T/cfg_act.json"
grep -qF "swiglu" "$T/stderr" && ok "act_unknown lists the accepted names" || bad "act_unknown: no list"
case_ hidden_zero     "hidden_size: must be a positive integer"       fwd "$W" "$IN" "$T/cfg_zero.json"
case_ hidden_negative "hidden_size: must be a positive integer (the model width D), found -6"       fwd "$W" "$IN" "$T/cfg_neg.json"
case_ size_overflow   "intermediate_size: 1000000000000000 with hidden_size 1000000000 overflows"       fwd "$W" "$IN" "$T/cfg_overflow.json"
case_ type_vs_weights "gate_proj.weight: missing, but"     fwd "$W" "$IN" "$T/cfg_type.json"
case_ size_string      "hidden_size: expected a positive integer (the model width D), found the string \"6\"" \
                                             fwd "$W" "$IN" "$T/cfg_str.json"
case_ size_fraction   "intermediate_size: expected a positive integer (the FFN width F), found 10.5" \
                                             fwd "$W" "$IN" "$T/cfg_frac.json"
case_ act_not_string  "hidden_act: expected a string, found 3" fwd "$W" "$IN" "$T/cfg_acttype.json"
case_ mlp_type_bad    "mlp_type: unknown value 'sparse'"      fwd "$W" "$IN" "$T/cfg_mlptype.json"
case_ mlp_bias_bad    "mlp_bias: expected true or false, found the string" fwd "$W" "$IN" "$T/cfg_bias.json"
case_ dense_vs_gate   "mlp_type is \"dense\" but"              fwd "$T/w_gated.safetensors" "$IN" "$T/cfg_dense.json"
case_ int_weights     "up_proj.weight: expected a floating-point dtype" fwd "$T/w_int.safetensors" "$IN" "$CFG"
case_ x_rank1         "x: expected shape [N, 6]"               fwd "$W" "$T/in_rank1.safetensors" "$CFG"
case_ config_not_json "cfg_notjson.json: byte 0: expected a value"     fwd "$W" "$IN" "$T/cfg_notjson.json"
case_ config_missing  "no_such.json: cannot open"       fwd "$W" "$IN" "$T/no_such.json"
# outputs that cannot be written: no partial or temporary file remains
case_ out_no_dir      "out/nodir"            fwd "$W" "$IN" "$CFG" "$T/out/nodir/y.safetensors"
mkdir -p "$T/out/isdir"
case_ out_is_dir      "isdir"                fwd "$W" "$IN" "$CFG" "$T/out/isdir"

if ((fails)); then echo "$fails failed"; exit 1; fi
echo "all passed"
