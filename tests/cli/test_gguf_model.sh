#!/usr/bin/env bash
# test_gguf_model.sh -- GGUF files as models: written by `ffn export
# --format gguf` and `ffn quantize`, loaded by run, inspect and params (on
#   every family: params' total = the file's tensor elements; on gemma2/3
#   inspect's FFN output is what the post-FFN norm adds to the residual).
#   round trips: llama2.c -> GGUF -> llama2.c is bitwise (q/k rows permuted
#   to llama.cpp's order and back); GGUF -> GGUF is byte for byte; an ffn
#   run directory -> GGUF runs with bitwise the same logits and exports
#   back to bitwise the same tensors; a Hugging Face qwen2 directory (q/k/v
#   biases, untied head) and a qwen2moe one -> GGUF -> HF give bitwise the
#   same tensors;
#   quantize: matrices whose rows are not a multiple of the block take
#   llama.cpp's fallback type (f16 for q8_0 on rows of 172) and are counted; outputs are replaced only with --force, never MODEL;
#   every bad file of the loader, each with its message naming the file and
#   the key or tensor: unknown architecture, missing key, shape against the
#   metadata, unknown tensor type, a type ffn cannot decode, a missing
#   tensor, heads not dividing the width, partial RoPE, a truncated file.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$PWD}"
SHARED="${FFN_SHARED:-../shared}"
PY=/usr/bin/python3
M="$SHARED/models/stories260K.bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

# expect_fail CODE PATTERN CMD...: exit CODE, stderr matching the ERE PATTERN
expect_fail() {
    local code="$1" pat="$2"; shift 2
    local rc=0
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [[ $rc -eq $code ]] && grep -Eq -- "$pat" "$tmp/err"; then
        ok "exit $rc, '$(head -c 200 "$tmp/err" | tr '\n' ' ')'"
    else
        bad "expected exit $code and /$pat/ from: $*; got exit $rc: $(cat "$tmp/err")"
    fi
}

# ---- help ----
"$FFN" quantize --help >"$tmp/h" && grep -q "q4_K" "$tmp/h" && grep -q -- "--force" "$tmp/h" &&
    ok "quantize --help" || bad "quantize --help"
"$FFN" export --help >"$tmp/h" && grep -q "gguf" "$tmp/h" && ok "export --help names gguf" ||
    bad "export --help"
expect_fail 2 "--dtype T is required" "$FFN" quantize "$M" --out "$tmp/x.gguf"
expect_fail 2 "--dtype: expected f16, bf16, q8_0, q4_0, q4_K, q6_K, .*q5_1.*iq4_nl.*got .iq2_xxs." "$FFN" quantize "$M" --dtype iq2_xxs --out "$tmp/x.gguf"

# ---- llama2.c -> GGUF: the same model ----
"$FFN" export "$M" --format gguf --out "$tmp/s.gguf" 2>"$tmp/err" || bad "export gguf: $(cat "$tmp/err")"
grep -q "byte tokens" "$tmp/err" && ok "export gguf without a vocabulary writes byte tokens" || bad "export message: $(cat "$tmp/err")"
ids="1 403 407 300 22 17 99 4 250 300"
"$FFN" run "$M" --ids "$ids" --steps 0 --dump-logits "$tmp/a.safetensors" >/dev/null
"$FFN" run "$tmp/s.gguf" --ids "$ids" --steps 0 --dump-logits "$tmp/b.safetensors" --info >/dev/null 2>"$tmp/info"
grep -q "(gguf, model_type llama).*tensors F32 47.*RoPE rotate_half" "$tmp/info" && ok "run --info on a GGUF" ||
    bad "run --info: $(cat "$tmp/info")"
"$PY" - "$tmp/a.safetensors" "$tmp/b.safetensors" <<'PY' && ok "GGUF logits = llama2.c logits (rounding of the RoPE order only)" || bad "GGUF logits differ"
import sys; sys.path.insert(0, "tests/parity")
import numpy as np, ffn_testlib as tl
a = tl.read_safetensors(sys.argv[1])["logits"]; b = tl.read_safetensors(sys.argv[2])["logits"]
d = float(np.abs(a - b).max()); s = float(np.abs(a).max())
print("max |dlogit| %.2e of max |logit| %.2f (tolerance 1e-5 relative)" % (d, s))
sys.exit(0 if d <= 1e-5 * s and (a.argmax(1) == b.argmax(1)).all() else 1)
PY
"$FFN" export "$M" --format llama2c --out "$tmp/a.bin" 2>/dev/null
"$FFN" export "$tmp/s.gguf" --format llama2c --out "$tmp/b.bin" 2>/dev/null
cmp -s "$tmp/a.bin" "$tmp/b.bin" && ok "llama2.c -> GGUF -> llama2.c bitwise" || bad "llama2.c round trip differs"
"$FFN" export "$tmp/s.gguf" --format gguf --out "$tmp/s2.gguf" 2>/dev/null
cmp -s "$tmp/s.gguf" "$tmp/s2.gguf" && ok "GGUF -> GGUF byte for byte" || bad "GGUF -> GGUF differs"
"$FFN" params "$tmp/s.gguf" --json >"$tmp/p1.json"
"$FFN" export "$M" --out "$tmp/hf" 2>/dev/null
"$FFN" params "$tmp/hf/config.json" --json >"$tmp/p2.json"
"$PY" -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(0 if a["total_params"]==b["total_params"]==260032 and a["active_params"]==b["active_params"] else 1)' \
    "$tmp/p1.json" "$tmp/p2.json" && ok "params on a GGUF = params on its config.json (260032)" || bad "params differ"
"$FFN" inspect "$tmp/s.gguf" --ids "1 403 407" --top 2 >"$tmp/ins" 2>&1 && grep -q "== layer 4 ==" "$tmp/ins" &&
    ok "inspect on a GGUF" || bad "inspect on a GGUF: $(head -5 "$tmp/ins")"

# ---- quantize ----
"$FFN" quantize "$M" --dtype q8_0 --out "$tmp/q8.gguf" 2>"$tmp/err" || bad "quantize q8_0: $(cat "$tmp/err")"
grep -q "47 tensors, 11 kept f32 (norms, biases, routers), 5 f16, 31 q8_0 (5 by llama.cpp's fallback for rows not a multiple of q8_0's block of 32)" "$tmp/err" &&
    ok "quantize q8_0 reports the f16 fallback of ffn_down (F = 172)" || bad "quantize message: $(cat "$tmp/err")"
"$FFN" run "$tmp/q8.gguf" --ids "1 403 407" --steps 0 --info >/dev/null 2>"$tmp/info"
grep -q "tensors F32 11, F16 5, BF16 0" "$tmp/info" && ok "the q8_0 file holds 11 f32, 5 f16, 31 q8_0" || bad "q8_0 file: $(cat "$tmp/info")"
for t in bf16 f16 q4_0 q4_K q6_K; do
    "$FFN" quantize "$tmp/s.gguf" --dtype $t --out "$tmp/$t.gguf" 2>/dev/null &&
        "$FFN" run "$tmp/$t.gguf" --ids "1 403 407" --steps 3 --temperature 0 >/dev/null ||
        bad "quantize $t from a GGUF"
done
ok "quantize from a GGUF to bf16 f16 q4_0 q4_K q6_K, each runs"
expect_fail 1 "q8.gguf already exists: replace it with --force" "$FFN" quantize "$M" --dtype q4_0 --out "$tmp/q8.gguf"
cmp -s <("$FFN" run "$tmp/q8.gguf" --ids "1 2" --steps 2 --temperature 0) <("$FFN" run "$tmp/q8.gguf" --ids "1 2" --steps 2 --temperature 0) &&
    "$FFN" quantize "$M" --dtype q4_0 --out "$tmp/q8.gguf" --force 2>/dev/null &&
    "$FFN" run "$tmp/q8.gguf" --ids "1" --steps 0 --info 2>&1 >/dev/null | grep -q "tensors F32 11, F16 5" && ok "--force replaces" || bad "--force"
expect_fail 1 "is MODEL .* itself" "$FFN" quantize "$tmp/s.gguf" --dtype q8_0 --out "$tmp/s.gguf" --force
expect_fail 1 "is MODEL .* itself" "$FFN" export "$tmp/s.gguf" --format gguf --out "$tmp/s.gguf" --force
ls "$tmp"/*.tmp-* >/dev/null 2>&1 && bad "temporary files left behind" || ok "no temporary files left"

# ---- an ffn run directory: bitwise both ways ----
head -c 20000 "$SHARED/data/tinyshakespeare.txt" >"$tmp/data.txt"
"$FFN" train --data "$tmp/data.txt" --steps 3 --hidden-size 64 --intermediate-size 96 --num-hidden-layers 2 \
    --num-attention-heads 4 --seq-len 32 --batch-size 2 --out "$tmp/run" --quiet >/dev/null 2>&1 || bad "train"
"$FFN" export "$tmp/run" --format gguf --out "$tmp/run.gguf" 2>"$tmp/err" || bad "export run: $(cat "$tmp/err")"
grep -q "vocabulary: .*tokenizer.txt" "$tmp/err" && ok "the run's vocabulary goes into the GGUF" || bad "vocab: $(cat "$tmp/err")"
"$FFN" run "$tmp/run" --ids "5 6 7 8 9 10" --steps 0 --dump-logits "$tmp/r1.safetensors" >/dev/null
"$FFN" run "$tmp/run.gguf" --ids "5 6 7 8 9 10" --steps 0 --dump-logits "$tmp/r2.safetensors" >/dev/null
"$PY" - "$tmp/r1.safetensors" "$tmp/r2.safetensors" <<'PY' && ok "run dir -> GGUF: bitwise the same logits" || bad "run dir logits differ"
import sys; sys.path.insert(0, "tests/parity")
import numpy as np, ffn_testlib as tl
a = tl.read_safetensors(sys.argv[1])["logits"]; b = tl.read_safetensors(sys.argv[2])["logits"]
sys.exit(0 if np.array_equal(a, b) else 1)
PY
"$FFN" export "$tmp/run.gguf" --out "$tmp/run-hf" 2>/dev/null
# ---- Hugging Face qwen2 / qwen2moe directories -> GGUF -> HF: bitwise ----
"$PY" - "$tmp" <<'PY' || bad "HF round trips"
import os, subprocess, sys
sys.path.insert(0, "tests/parity"); sys.path.insert(0, "tests/llamacpp")
import numpy as np, ffn_testlib as tl, interop
t = sys.argv[1]
pairs = [(os.path.join(t, "run"), os.path.join(t, "run-hf"), "ffn run dir")]
for arch in ("qwen2", "qwen2moe", "mixtral"):
    src = os.path.join(t, arch)
    interop.make_model(src, arch, 5)
    tl.run_ffn(["export", src, "--format", "gguf", "--out", src + ".gguf"])
    tl.run_ffn(["export", src + ".gguf", "--out", src + "-back"])
    pairs.append((src, src + "-back", arch))
bad = 0
for a, b, what in pairs:
    x = tl.read_safetensors(os.path.join(a, "model.safetensors"))
    y = tl.read_safetensors(os.path.join(b, "model.safetensors"))
    diff = [k for k in x if k not in y or not np.array_equal(x[k], y[k])]
    extra = [k for k in y if k not in x]
    print("%s: %d tensors, %d differ, %d extra" % (what, len(x), len(diff), len(extra)))
    bad += bool(diff or extra)
sys.exit(bad)
PY
ok "run dir, qwen2, qwen2moe, mixtral -> GGUF -> HF: bitwise the same tensors"

# ---- bad files: each named, with what was expected and what was found ----
E() { "$PY" tests/cli/gguf_edit.py "$tmp/s.gguf" "$tmp/bad.gguf" "$@"; }
E arch bloom
expect_fail 1 "bad.gguf: general.architecture 'bloom' is not supported \(expected llama, qwen2, qwen2moe, qwen3, qwen3moe, olmoe, gemma, gemma2, gemma3, phi3, gpt2 or starcoder2\)" "$FFN" run "$tmp/bad.gguf" --ids 1
expect_fail 1 "bad.gguf: general.architecture 'bloom' is not supported" "$FFN" params "$tmp/bad.gguf"
E rename-key general.architecture general.architecturX
expect_fail 1 "bad.gguf: metadata key general.architecture is missing" "$FFN" run "$tmp/bad.gguf" --ids 1
E rename-key llama.block_count llama.block_counx
expect_fail 1 "bad.gguf: metadata key llama.block_count is missing \(required for architecture llama\)" "$FFN" run "$tmp/bad.gguf" --ids 1
E rename-key llama.attention.layer_norm_rms_epsilon llama.attention.layer_norm_rms_epsilom
expect_fail 1 "bad.gguf: metadata key llama.attention.layer_norm_rms_epsilon is missing" "$FFN" inspect "$tmp/bad.gguf" --ids 1
E set-u32 llama.feed_forward_length 173
expect_fail 1 "bad.gguf: tensor blk.0.ffn_gate.weight has ne \{64, 172\}, expected \{64, 173\} from the metadata" "$FFN" run "$tmp/bad.gguf" --ids 1
E set-u32 llama.attention.head_count_kv 2
expect_fail 1 "bad.gguf: tensor blk.0.attn_k.weight has ne \{64, 32\}, expected \{64, 16\}" "$FFN" export "$tmp/bad.gguf" --out "$tmp/never"
[[ ! -e "$tmp/never" ]] && ok "a failed export writes nothing" || bad "a failed export left $tmp/never"
E set-u32 llama.attention.head_count 7
expect_fail 1 "bad.gguf: llama.attention.head_count_kv 4 does not divide llama.attention.head_count 7" "$FFN" run "$tmp/bad.gguf" --ids 1
E set-u32 llama.attention.head_count 16
expect_fail 1 "bad.gguf: tensor blk.0.attn_q.weight has ne \{64, 64\}, expected \{64, 128\} from the metadata" "$FFN" run "$tmp/bad.gguf" --ids 1
E rename-key llama.attention.key_length llama.attention.key_lengtX
"$PY" tests/cli/gguf_edit.py "$tmp/bad.gguf" "$tmp/bad2.gguf" set-u32 llama.attention.head_count 12
expect_fail 1 "bad2.gguf: llama.attention.head_count 12 must divide llama.embedding_length 64 into heads of even size" "$FFN" run "$tmp/bad2.gguf" --ids 1
E set-u32 llama.attention.value_length 16
expect_fail 1 "bad.gguf: llama.attention.value_length 16 differs from key_length 8" "$FFN" run "$tmp/bad.gguf" --ids 1
E set-u32 llama.rope.dimension_count 4
expect_fail 1 "bad.gguf: llama.rope.dimension_count 4 differs from the head size 8" "$FFN" run "$tmp/bad.gguf" --ids 1
E tensor-type blk.0.attn_norm.weight 99
expect_fail 1 "bad.gguf: blk.0.attn_norm.weight: type 99: expected a known ggml type" "$FFN" run "$tmp/bad.gguf" --ids 1
E tensor-type token_embd.weight 26
expect_fail 1 "bad.gguf: tensor token_embd.weight has type i32, which ffn cannot read" "$FFN" run "$tmp/bad.gguf" --ids 1
E rename-tensor output_norm.weight output_norX.weight
expect_fail 1 "bad.gguf: tensor output_norm.weight is missing \(the metadata describes a llama model of 5 layers" "$FFN" run "$tmp/bad.gguf" --ids 1
E rename-tensor blk.4.ffn_up.weight blk.4.ffn_uX.weight
expect_fail 1 "bad.gguf: tensor blk.4.ffn_up.weight is missing" "$FFN" quantize "$tmp/bad.gguf" --dtype q8_0 --out "$tmp/never.gguf"
# the other architectures: tiny models of each family (tests/llamacpp/families.py)
"$PY" - "$tmp" <<'PY' || bad "family seeds"
import os, sys
sys.path.insert(0, "tests/parity"); sys.path.insert(0, "tests/llamacpp")
import families as f, ffn_testlib as tl
f.V, f.D, f.H, f.G, f.L, f.T_CTX, f.F = 40, 32, 2, 1, 1, 16, 32
for i, fam in enumerate(["llama3", "qwen3", "olmoe", "gemma", "phi3", "gpt2", "gemma2", "gemma3",
                         "phi3long", "starcoder2"]):
    src = os.path.join(sys.argv[1], "fam-" + fam)
    f.make_model(src, fam, 900 + i)
    tl.run_ffn(["export", src, "--format", "gguf", "--out", src + ".gguf"])
PY
# ffn params on each family's GGUF and on its config.json: the total equals the
# element count of the file's tensors and of the safetensors ffn read (gemma2/3's
# post-norms, gemma3's q/k norms, gpt2's biases and positions, starcoder2's
# LayerNorm and linear biases; the RoPE factor
# tensors rope_freqs / rope_factors_* are constants, not parameters)
"$PY" - "$FFN" "$tmp" <<'PY' || bad "ffn params against the tensors' element counts (above)"
import json, math, os, subprocess, sys
sys.path.insert(0, "tests/llamacpp"); sys.path.insert(0, "tests/parity")
import ftypes, ffn_testlib as tl
ffn, tmp = sys.argv[1], sys.argv[2]
bad = 0
for fam in ["llama3", "qwen3", "olmoe", "gemma", "phi3", "gpt2", "gemma2", "gemma3", "phi3long",
            "starcoder2"]:
    d = os.path.join(tmp, "fam-" + fam)
    _, tensors, _ = ftypes.read_gguf(d + ".gguf")
    n = sum(math.prod(ne) for name, (_, ne, _) in tensors.items() if not name.startswith("rope_"))
    st = sum(v.size for f in os.listdir(d) if f.endswith(".safetensors")
             for v in tl.read_safetensors(os.path.join(d, f)).values())
    got = []
    for path in (d + ".gguf", os.path.join(d, "config.json")):
        r = subprocess.run([ffn, "params", path, "--json"], capture_output=True, text=True)
        got.append(json.loads(r.stdout)["total_params"] if r.returncode == 0 else r.stderr.strip())
    ok = got[0] == got[1] == n == st
    print(("ok   " if ok else "FAIL ") + "params %s: %d GGUF tensor elements, %d safetensors; ffn "
          "params on the GGUF %s, on config.json %s" % (fam, n, st, got[0], got[1]))
    bad |= not ok
sys.exit(bad)
PY
# ffn inspect on gemma2 / gemma3 (HF directory and GGUF) against a float64
# forward (families.gemma_reference): y, what the FFN adds to the residual, is
# its down projection's output z through post_feedforward_layernorm; inspect's
# out_norm is |y|, its top-K partial sum is sum_S m_i (g * v_i) with the norm's
# gain g = (1 + w) / rms(z), over all F neurons the partial sum is y itself, and
# each neuron's promoted tokens are its lens through both norms' weights
"$PY" - "$FFN" "$tmp" <<'PY' || bad "inspect on gemma2 / gemma3 (above)"
import json, math, os, subprocess, sys
import torch
sys.path.insert(0, "tests/llamacpp"); sys.path.insert(0, "tests/parity")
import families as f, ffn_testlib as tl
f.V, f.D, f.H, f.G, f.L, f.T_CTX, f.F = 40, 32, 2, 1, 1, 16, 32
ffn, tmp = sys.argv[1], sys.argv[2]
ids = [1, 5, 7, 9, 11, 3]
bad = 0
for fam in ["gemma2", "gemma3"]:
    d = os.path.join(tmp, "fam-" + fam)
    cfg = json.load(open(os.path.join(d, "config.json")))
    w = {}
    for fn in os.listdir(d):
        if fn.endswith(".safetensors"):
            w.update(tl.read_safetensors(os.path.join(d, fn)))
    taps = []
    f.gemma_reference(w, cfg, ids, taps)
    act, z, y = taps[0]["m"], taps[0]["z"], taps[0]["y"]
    V = torch.tensor(w["model.layers.0.mlp.down_proj.weight"], dtype=torch.float64)   # (D, F)
    gw = 1.0 + torch.tensor(w["model.layers.0.post_feedforward_layernorm.weight"], dtype=torch.float64)
    g = gw / torch.sqrt((z * z).mean(-1, keepdim=True) + cfg["rms_norm_eps"])       # (n, D)
    for model in (d, d + ".gguf"):
        for k in (4, f.F):
            r = subprocess.run([ffn, "inspect", model, "--ids", " ".join(map(str, ids)),
                                "--top", str(k), "--json"], capture_output=True, text=True)
            if r.returncode:
                print("FAIL inspect %s: %s" % (model, r.stderr.strip())); bad = 1; continue
            worst = 0.0
            for t, tk in enumerate(json.loads(r.stdout)["layers"][0]["tokens"]):
                top = torch.argsort(-act[t].abs())[:k]
                part = (act[t, top][None, :] * V[:, top]).sum(-1) * g[t]
                on, pn = y[t].norm().item(), part.norm().item()
                ref = {"out_norm": on, "partial_norm": pn, "explained": pn / on,
                       "cosine": float(part @ y[t]) / (on * pn), "residual": (y[t] - part).norm().item() / on}
                for key, v in ref.items():
                    worst = max(worst, abs(tk[key] - v) / (1.0 + abs(v)))
                if k == f.F and tk["residual"] > 1e-5:
                    worst = max(worst, tk["residual"])
                # the logit lens of each listed neuron: U . ((1 + g_final) * (1 + w_post) * v_i)
                for nu in tk["neurons"]:
                    U = torch.tensor(w["model.embed_tokens.weight"], dtype=torch.float64)
                    gf = 1.0 + torch.tensor(w["model.norm.weight"], dtype=torch.float64)
                    lens = U @ (gf * gw * V[:, nu["index"]])
                    want = sorted(range(len(lens)), key=lambda i: (-float(lens[i]), i))[:len(nu["promoted"])]
                    if [p["id"] for p in nu["promoted"]] != want:
                        worst = max(worst, 1.0)
            ok = worst <= 1e-4
            bad |= not ok
            print(("ok   " if ok else "FAIL ") + "inspect %s --top %d: out_norm = |post-FFN norm(z)|, "
                  "partial sums through its gain (largest error %.2g)%s"
                  % (os.path.basename(model), k, worst, ", all F: residual 0" if k == f.F else ""))
sys.exit(bad)
PY
F() { "$PY" tests/cli/gguf_edit.py "$tmp/fam-$1.gguf" "$tmp/bad.gguf" "${@:2}"; }
F qwen3 rename-tensor blk.0.attn_q_norm.weight blk.0.attn_q_norX.weight
expect_fail 1 "bad.gguf: tensor blk.0.attn_q_norm.weight is missing \(the metadata describes a qwen3 model of 1 layers" "$FFN" run "$tmp/bad.gguf" --ids 1
F qwen3 set-u32 qwen3.attention.key_length 24
expect_fail 1 "bad.gguf: qwen3.attention.value_length 48 differs from key_length 24" "$FFN" run "$tmp/bad.gguf" --ids 1
F llama3 set-u16 rope_freqs.weight 2 4000
expect_fail 1 "bad.gguf: tensor rope_freqs.weight: the factors \(largest 8, .*are not llama3 RoPE scaling" "$FFN" run "$tmp/bad.gguf" --ids 1
# RoPE factor tensors whose length contradicts the rotary dim (Dh 16: 8 pairs)
F llama3 set-ne rope_freqs.weight 0 7
expect_fail 1 "bad.gguf: tensor rope_freqs.weight has ne \{7\}, expected \{8\}: one llama3 factor per rotary pair \(half the rotary dim 16\)" "$FFN" run "$tmp/bad.gguf" --ids 1
F llama3 set-ne rope_freqs.weight 0 4
expect_fail 1 "bad.gguf: tensor rope_freqs.weight has ne \{4\}, expected \{8\}" "$FFN" export "$tmp/bad.gguf" --format hf --out "$tmp/never_rf"
[[ ! -e "$tmp/never_rf" ]] && ok "a refused rope_freqs.weight: export writes nothing" || bad "export left $tmp/never_rf"
F gpt2 set-u32 gpt2.context_length 8
expect_fail 1 "bad.gguf: tensor position_embd.weight has ne \{32, 16\}, expected \{32, 8\}" "$FFN" run "$tmp/bad.gguf" --ids 1
F phi3 set-u32 phi3.feed_forward_length 16
expect_fail 1 "bad.gguf: tensor blk.0.ffn_up.weight has ne \{32, 64\}, expected \{32, 32\}" "$FFN" run "$tmp/bad.gguf" --ids 1
F phi3 set-u32 phi3.rope.dimension_count 8
expect_fail 1 "bad.gguf: phi3.rope.dimension_count 8 differs from the head size 16" "$FFN" run "$tmp/bad.gguf" --ids 1
F olmoe set-u32 olmoe.expert_count 3
expect_fail 1 "bad.gguf: tensor blk.0.ffn_gate_inp.weight has ne \{32, 4\}, expected \{32, 3\}" "$FFN" run "$tmp/bad.gguf" --ids 1
F gemma rename-tensor blk.0.ffn_gate.weight blk.0.ffn_gatX.weight
expect_fail 1 "bad.gguf: tensor blk.0.ffn_gate.weight is missing \(the metadata describes a gemma model" "$FFN" run "$tmp/bad.gguf" --ids 1
# gemma2 / gemma3 / phi3 LongRoPE
F gemma2 rename-tensor blk.0.post_ffw_norm.weight blk.0.post_ffw_norX.weight
expect_fail 1 "bad.gguf: tensor blk.0.post_ffw_norm.weight is missing \(the metadata describes a gemma2 model" "$FFN" run "$tmp/bad.gguf" --ids 1
F gemma2 set-u32 gemma2.attention.sliding_window 32
expect_fail 1 "bad.gguf: metadata key gemma2.attention.sliding_window is 32, larger than the context \(gemma2.context_length 16\)" "$FFN" run "$tmp/bad.gguf" --ids 1
F gemma2 set-f32 gemma2.attn_logit_softcapping 0
expect_fail 1 "bad.gguf: metadata key gemma2.attn_logit_softcapping is 0, expected a positive number" "$FFN" run "$tmp/bad.gguf" --ids 1
F gemma2 set-f32 gemma2.final_logit_softcapping -3
expect_fail 1 "bad.gguf: metadata key gemma2.final_logit_softcapping is -3, expected a positive number" "$FFN" inspect "$tmp/bad.gguf" --ids 1
F gemma3 rename-tensor blk.0.attn_k_norm.weight blk.0.attn_k_norX.weight
expect_fail 1 "bad.gguf: tensor blk.0.attn_k_norm.weight is missing \(the metadata describes a gemma3 model" "$FFN" run "$tmp/bad.gguf" --ids 1
F phi3long rename-tensor rope_factors_short.weight rope_factors_shorX.weight
expect_fail 1 "bad.gguf: tensor rope_factors_short.weight is missing \(LongRoPE needs both the long and the short factors\)" "$FFN" run "$tmp/bad.gguf" --ids 1
F phi3long set-ne rope_factors_long.weight 0 6
expect_fail 1 "bad.gguf: tensor rope_factors_long.weight has ne \{6\}, expected \{8\}: one LongRoPE factor per rotary pair \(half the rotary dim 16\)" "$FFN" run "$tmp/bad.gguf" --ids 1
F phi3long set-ne rope_factors_short.weight 0 1
expect_fail 1 "bad.gguf: tensor rope_factors_short.weight has ne \{1\}, expected \{8\}" "$FFN" params "$tmp/bad.gguf"
F phi3long set-u32 phi3.rope.scaling.original_context_length 0
expect_fail 1 "bad.gguf: metadata key phi3.rope.scaling.original_context_length is 0, expected >= 1" "$FFN" run "$tmp/bad.gguf" --ids 1
# the factor lists of a config.json: one length, half the rotary dim
"$PY" - "$tmp/fam-phi3long" "$tmp/badrope" <<'PY' || bad "bad rope dir"
import json, os, shutil, sys
shutil.copytree(sys.argv[1], sys.argv[2], dirs_exist_ok=True)
p = os.path.join(sys.argv[2], "config.json")
c = json.load(open(p))
c["rope_scaling"]["short_factor"] = c["rope_scaling"]["short_factor"][:3]
c["rope_scaling"]["long_factor"] = c["rope_scaling"]["long_factor"][:3]
json.dump(c, open(p, "w"))
PY
expect_fail 1 "rope_scaling.long_factor: 3 factors in each of long_factor and short_factor, expected 8 \(half the rotary dim 16\)" "$FFN" run "$tmp/badrope" --ids 1
head -c 5000 "$tmp/s.gguf" >"$tmp/bad.gguf"
expect_fail 1 "bad.gguf: tokenizer.ggml.tokens: .*(bytes left in the file|truncated file)" "$FFN" run "$tmp/bad.gguf" --ids 1

# a GGUF's own vocabulary encodes --prompt (no --tokenizer): the byte
# vocabulary ffn writes (<0x00>..<0xFF> at ids 0..255, tokenizer.ggml.model
# llama) spells SentencePiece's "▁Hi" in bytes: E2 96 81, 'H', 'i'
"$FFN" export "$M" --format gguf --out "$tmp/v.gguf" >/dev/null 2>&1
if "$FFN" run "$tmp/v.gguf" --prompt "Hi" --steps 0 --info >/dev/null 2>"$tmp/vi" &&
   grep -q "prompt ids (5): 226 150 129 72 105" "$tmp/vi"; then ok "run GGUF --prompt uses the file's vocabulary"
else bad "run GGUF --prompt: $(grep 'prompt ids' "$tmp/vi")"; fi

echo "test_gguf_model: $fail failure(s)"
((fail == 0))
