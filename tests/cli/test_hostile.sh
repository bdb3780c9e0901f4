#!/usr/bin/env bash
# test_hostile.sh -- files that would hang, exhaust or mislead a careless
# reader: configs that claim more than their weight files hold, FIFOs and
# devices where a file is expected, huge synthetic headers, foreign formats,
# text the vocabulary does not cover.  Every case runs under `timeout`, so a
# regression fails instead of hanging, and checks the exit status and the
# message.
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

# expect_fail NAME FRAGMENT SECONDS -- CMD...: CMD must exit non-zero (not
# by timeout) within SECONDS, with FRAGMENT (fixed string) on stderr.
expect_fail() {
    local name="$1" frag="$2" secs="$3"; shift 4
    local rc=0
    timeout "$secs" "$@" >"$T/out" 2>"$T/err" || rc=$?
    if ((rc == 124)); then bad "$name: timed out after ${secs}s"; return; fi
    if ((rc == 0)); then bad "$name: exit 0, expected failure"; return; fi
    if ! grep -qF -- "$frag" "$T/err"; then
        bad "$name: stderr lacks '$frag':"; sed 's/^/     /' "$T/err"; return
    fi
    ok "$name ($(head -c 200 "$T/err" | tr '\n' ' '))"
}

# ---- a tiny llama2.c model and the layer files the cases share ----
$PY - "$T" <<'EOF'
import sys, json, struct, numpy as np, ffn_testlib as T
d = sys.argv[1]
rng = np.random.default_rng(7)
# llama2.c: dim 8, hidden 16, 1 layer, 2 heads, 2 kv heads, vocab 32, seq 16
D, F, L, H, G, V, S = 8, 16, 1, 2, 2, 32, 16
Dh = D // H
n = V*D + L*D + L*D*D + 2*L*D*G*Dh + L*D*D + L*D + 3*L*F*D + D + S*Dh
with open(d + "/tiny.bin", "wb") as f:
    f.write(struct.pack("<7i", D, F, L, H, G, V, S))
    f.write((rng.standard_normal(n) * 0.1).astype("<f4").tobytes())
T.write_config(d + "/layer.json", hidden_size=6, intermediate_size=10, hidden_act="gelu")
T.write_safetensors(d + "/w.safetensors", {"up_proj.weight": np.ones((10, 6), np.float32),
                                           "down_proj.weight": np.ones((6, 10), np.float32)})
T.write_safetensors(d + "/in.safetensors", {"x": np.ones((2, 6), np.float32)})
open(d + "/text.txt", "w").write("the cat sat on the mat\n" * 50)
EOF

# ---- a config.json whose claims the weight files cannot back ----
# 65,536 experts over a 1 MiB weights file: refused before anything is
# allocated, quickly and in little memory, naming the field and the bytes.
mkdir -p "$T/moe65k"
$PY - "$T/moe65k" <<'EOF'
import sys, json
d = sys.argv[1]
json.dump({"model_type": "mixtral", "vocab_size": 256, "hidden_size": 64,
           "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
           "num_key_value_heads": 4, "num_local_experts": 65536, "num_experts_per_tok": 2,
           "max_position_embeddings": 64}, open(d + "/config.json", "w"))
open(d + "/model.safetensors", "wb").write(bytes(1 << 20))
EOF
rc=0
/usr/bin/time -v -o "$T/time" timeout 10 "$FFN" run "$T/moe65k" --ids "1 2" >"$T/out" 2>"$T/err" || rc=$?
rss_kb=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$T/time")
wall=$(awk '/Elapsed \(wall clock\)/ {print $NF}' "$T/time")
if ((rc == 0 || rc == 124)); then bad "65,536 experts over 1 MiB: exit $rc"
elif ! grep -qF "num_local_experts 65536" "$T/err" || ! grep -qF "but the weight files hold 1048576 bytes" "$T/err"; then
    bad "65,536 experts: message lacks the field or the file bytes:"; cat "$T/err"
elif ((rss_kb > 200000)); then bad "65,536 experts: max RSS ${rss_kb} kB (bound 200 MB)"
elif ! awk -v w="$wall" 'BEGIN { n = split(w, p, ":"); s = p[n] + (n > 1 ? 60 * p[n-1] : 0); exit !(s < 1.0) }'; then
    bad "65,536 experts: took $wall (bound: under a second)"
else ok "65,536 experts over 1 MiB refused in $wall, max RSS ${rss_kb} kB: $(cat "$T/err")"; fi

# 65,536 experts of dim 2 fit a 2 MiB file, but the model would build
# 65,536 expert layers (about 5 kB each) from a file of one tensor: the
# tensor count is checked too.
mkdir -p "$T/moe_tiny"
$PY - "$T/moe_tiny" <<'EOF'
import sys, json, numpy as np, ffn_testlib as T
d = sys.argv[1]
json.dump({"model_type": "mixtral", "vocab_size": 2, "hidden_size": 2, "intermediate_size": 1,
           "num_hidden_layers": 1, "num_attention_heads": 1, "num_key_value_heads": 1,
           "num_local_experts": 65536, "num_experts_per_tok": 2, "max_position_embeddings": 64},
          open(d + "/config.json", "w"))
T.write_safetensors(d + "/model.safetensors", {"model.embed_tokens.weight": np.zeros((2, 1 << 19), np.float32)})
EOF
rc=0
/usr/bin/time -v -o "$T/time" timeout 10 "$FFN" run "$T/moe_tiny" --ids "1" >"$T/out" 2>"$T/err" || rc=$?
rss_kb=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$T/time")
if ((rc == 0 || rc == 124)); then bad "65,536 tiny experts over one tensor: exit $rc"
elif ! grep -qF "tensors (num_local_experts 65536 accounts for 196609 of them), but the weight files hold 1" "$T/err"; then
    bad "65,536 tiny experts: message lacks the tensor counts:"; cat "$T/err"
elif ((rss_kb > 100000)); then bad "65,536 tiny experts: max RSS ${rss_kb} kB (bound 100 MB)"
else ok "65,536 tiny experts over one tensor refused, max RSS ${rss_kb} kB: $(cat "$T/err")"; fi

# ---- FIFOs and devices where a file is expected ----
mkfifo "$T/fifo"
expect_fail "params on a FIFO" "is a FIFO, not a regular file" 10 -- "$FFN" params "$T/fifo"
expect_fail "layer --config FIFO" "is a FIFO, not a regular file" 10 -- \
    "$FFN" layer --config "$T/fifo" --weights "$T/w.safetensors" --input "$T/in.safetensors" --output "$T/o.safetensors"
expect_fail "layer --weights FIFO" "is a FIFO, not a regular file" 10 -- \
    "$FFN" layer --config "$T/layer.json" --weights "$T/fifo" --input "$T/in.safetensors" --output "$T/o.safetensors"
expect_fail "layer --input FIFO" "is a FIFO, not a regular file" 10 -- \
    "$FFN" layer --config "$T/layer.json" --weights "$T/w.safetensors" --input "$T/fifo" --output "$T/o.safetensors"
expect_fail "run --tokenizer FIFO" "is a FIFO, not a regular file" 10 -- \
    "$FFN" run "$T/tiny.bin" --tokenizer "$T/fifo" --prompt "hi" --steps 1
expect_fail "run MODEL FIFO" "not a regular file" 10 -- "$FFN" run "$T/fifo" --ids "1 2" --steps 1
expect_fail "train --data FIFO" "is a FIFO, not a regular file" 10 -- \
    "$FFN" train --data "$T/fifo" --steps 1 --out "$T/run_fifo"
expect_fail "train --data /dev/zero" "/dev/zero is a character device, not a regular file" 10 -- \
    "$FFN" train --data /dev/zero --steps 1 --out "$T/run_zero"
expect_fail "compare --data FIFO" "is a FIFO, not a regular file" 20 -- \
    "$FFN" compare --data "$T/fifo" --steps 1 --out "$T/cmp_fifo"
# a sparse file larger than the text cap is refused without being read
truncate -s 2G "$T/huge.txt"
expect_fail "train --data 2 GiB" "more than the 1073741824 bytes (1024 MiB)" 10 -- \
    "$FFN" train --data "$T/huge.txt" --steps 1 --out "$T/run_huge"
[[ ! -e "$T/run_fifo" && ! -e "$T/run_zero" && ! -e "$T/run_huge" ]] && ok "no run directory left behind" \
    || bad "a refused --data left a run directory"
grep -qF "1 GiB" <("$FFN" train --help) && ok "train --help states the text cap" || bad "train --help lacks the 1 GiB cap"

# ---- huge tables: loading must stay (near) linear in the number of tensors ----
# 50,000 llama2.c layers of dim 2 (450,000 tensors): a name search per
# tensor took minutes; the bound leaves room for a loaded machine.
$PY - "$T" <<'EOF'
import sys, os, struct, json
d = sys.argv[1]
D, F, L, H, G, V, S = 2, 1, 50000, 1, 1, 1, 1
n = V*D + L*D + L*D*D + 2*L*D*G*(D//H) + L*D*D + L*D + 3*L*F*D + D + S*(D//H)
with open(d + "/layers50k.bin", "wb") as f:
    f.write(struct.pack("<7i", D, F, L, H, G, V, S)); f.write(bytes(4 * n))
# an index naming a new shard for each of 200,000 tensors
os.mkdir(d + "/shards")
json.dump({"model_type": "llama", "vocab_size": 16, "hidden_size": 8, "intermediate_size": 16,
           "num_hidden_layers": 1, "num_attention_heads": 2}, open(d + "/shards/config.json", "w"))
json.dump({"weight_map": {"t%d" % i: "s%d.safetensors" % i for i in range(200000)}},
          open(d + "/shards/model.safetensors.index.json", "w"))
EOF
t0=$SECONDS
if timeout 40 "$FFN" run "$T/layers50k.bin" --ids "0" --steps 1 >"$T/out" 2>"$T/err"; then
    ok "50,000 llama2.c layers load and run in $((SECONDS - t0)) s (bound 40 s)"
else bad "50,000 llama2.c layers: exit $? (124: timeout): $(cat "$T/err")"; fi
t0=$SECONDS
if timeout 60 "$FFN" export "$T/layers50k.bin" --out "$T/ex50k" >"$T/out" 2>"$T/err"; then
    ok "50,000 layers exported (450,000 tensors) in $((SECONDS - t0)) s (bound 60 s)"
else bad "exporting 50,000 layers: exit $? (124: timeout): $(cat "$T/err")"; fi
rm -rf "$T/ex50k"
expect_fail "index of 200,000 shards" "s0.safetensors named in model.safetensors.index.json is missing" 20 -- \
    "$FFN" run "$T/shards" --ids "1" --steps 1

# ---- foreign formats are named, not misread ----
$PY - "$T" <<'EOF'
import sys, json, struct, zipfile, numpy as np, ffn_testlib as T
d = sys.argv[1]
# GGUF v3: magic, version, tensor count, metadata count
open(d + "/model.gguf", "wb").write(b"GGUF" + struct.pack("<IQQ", 3, 0, 0) + bytes(64))
json.dump({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []}},
          open(d + "/tokenizer.json", "w"))
T.write_safetensors(d + "/lone.safetensors", {"model.embed_tokens.weight": np.ones((4, 2), np.float32)})
with zipfile.ZipFile(d + "/pytorch_model.bin", "w") as z:
    z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
# a llama2.c tokenizer.bin: max_token_length, then (score, length, bytes) per token
with open(d + "/tokenizer.bin", "wb") as f:
    f.write(struct.pack("<i", 8))
    for i in range(32):
        piece = ("<unk>" if i == 0 else "t%d" % i).encode()
        f.write(struct.pack("<fi", -float(i), len(piece)) + piece)
EOF
mkdir -p "$T/gguf_dir" && cp "$T/model.gguf" "$T/gguf_dir/config.json"
expect_fail "GGUF without metadata as a model" "model.gguf: metadata key general.architecture is missing" 10 -- \
    "$FFN" run "$T/model.gguf" --ids "1"
expect_fail "GGUF as --tokenizer" "model.gguf: no tokenizer.ggml.model in the metadata (no tokenizer in this GGUF)" 10 -- \
    "$FFN" run "$T/tiny.bin" --tokenizer "$T/model.gguf" --prompt "hi"
expect_fail "tokenizer.json as --tokenizer" "tokenizer.json: neither a ByteLevel pre_tokenizer nor SentencePiece spaces" 10 -- \
    "$FFN" run "$T/tiny.bin" --tokenizer "$T/tokenizer.json" --prompt "hi"
expect_fail "checkpoint as --tokenizer" "tiny.bin is a llama2.c checkpoint (dim 8, 1 layers), not a tokenizer.bin" 10 -- \
    "$FFN" run "$T/tiny.bin" --tokenizer "$T/tiny.bin" --prompt "hi"
expect_fail "tokenizer.bin as a model" "tokenizer.bin looks like a llama2.c tokenizer.bin (a vocabulary goes to --tokenizer), not a checkpoint" 10 -- \
    "$FFN" run "$T/tokenizer.bin" --ids "1"
expect_fail "safetensors as a model" "lone.safetensors is a safetensors file, not a llama2.c checkpoint; for a model, pass the Hugging Face directory" 10 -- \
    "$FFN" run "$T/lone.safetensors" --ids "1"
expect_fail "PyTorch zip as a model" "pytorch_model.bin is a zip archive (a PyTorch checkpoint?), not a llama2.c checkpoint; ffn reads safetensors" 10 -- \
    "$FFN" run "$T/pytorch_model.bin" --ids "1"
expect_fail "config.json as a model" "config.json is a JSON file, not a llama2.c checkpoint" 10 -- \
    "$FFN" run "$T/moe65k/config.json" --ids "1"
expect_fail "GGUF without metadata as params" "model.gguf: metadata key general.architecture is missing" 10 -- \
    "$FFN" params "$T/model.gguf"
expect_fail "safetensors as params config" "lone.safetensors is a safetensors file, not a JSON file" 10 -- \
    "$FFN" params "$T/lone.safetensors"
expect_fail "llama2.c checkpoint as layer --weights" "tiny.bin is a llama2.c checkpoint, not a safetensors file" 10 -- \
    "$FFN" layer --config "$T/layer.json" --weights "$T/tiny.bin" --input "$T/in.safetensors" --output "$T/o.safetensors"
expect_fail "llama2.c checkpoint as params config" "tiny.bin is a llama2.c checkpoint, not a JSON file" 10 -- \
    "$FFN" params "$T/tiny.bin"
expect_fail "GGUF as layer --weights" "model.gguf is a GGUF file, not a safetensors file; a GGUF model (its vocabulary with it) goes where a MODEL is asked for" 10 -- \
    "$FFN" layer --config "$T/layer.json" --weights "$T/model.gguf" --input "$T/in.safetensors" --output "$T/o.safetensors"
mkdir -p "$T/alone" && cp "$T/tiny.bin" "$T/alone/"   # no tokenizer.bin beside it
"$FFN" export "$T/alone/tiny.bin" --out "$T/hf_tokjson" >/dev/null 2>&1 && cp "$T/tokenizer.json" "$T/hf_tokjson/"
expect_fail "a directory with only tokenizer.json" "hf_tokjson/tokenizer.json: neither a ByteLevel pre_tokenizer nor SentencePiece spaces" 10 -- \
    "$FFN" run "$T/hf_tokjson" --prompt "hi"
expect_fail "GGUF as a directory's config.json" "config.json is a GGUF file, not a JSON file" 10 -- \
    "$FFN" run "$T/gguf_dir" --ids "1"

# ---- text the vocabulary does not cover ----
"$FFN" train --corpus en --tokenizer word --hidden-size 32 --num-hidden-layers 1 --steps 5 \
    --out "$T/words" --threads 1 >/dev/null 2>"$T/err" || { bad "training the word model: $(cat "$T/err")"; }
rc=0
timeout 30 "$FFN" generate --model "$T/words" --prompt "Zorblat quux the" --steps 3 --threads 1 \
    >"$T/out" 2>"$T/err" || rc=$?
if ((rc)); then bad "generate with unknown words: exit $rc: $(cat "$T/err")"
elif ! grep -qF "warning: 2 of the prompt's 3 tokens (67%) are not in the model's vocabulary and read as <unk>" "$T/err"; then
    bad "generate: no warning about the unknown prompt tokens: $(cat "$T/err")"
elif ! grep -qF "the model reads: <unk><unk> the" "$T/err"; then
    bad "generate: the warning does not show the prompt as the model reads it: $(cat "$T/err")"
elif [[ "$(head -c 16 "$T/out")" != "Zorblat quux the" ]]; then
    bad "generate: stdout does not start with the prompt as given: $(head -c 80 "$T/out")"
else ok "generate: unknown prompt words warned about and shown as <unk>: $(cat "$T/err")"; fi
rc=0
timeout 30 "$FFN" run "$T/words" --prompt "Zorblat quux the" --steps 2 --threads 1 >"$T/out" 2>"$T/err" || rc=$?
if ((rc == 0)) && grep -qF "warning: 2 of the prompt's 3 tokens (67%) are not in the vocabulary" "$T/err"; then
    ok "run: unknown prompt words warned about"
else bad "run: exit $rc, no warning about unknown prompt tokens: $(cat "$T/err")"; fi
printf 'Zorblat quux the\n' >"$T/oov.txt"
rc=0
timeout 30 "$FFN" inspect keys "$T/words" --data "$T/oov.txt" --threads 1 >"$T/out" 2>"$T/err" || rc=$?
if ((rc == 0)) && grep -qF "warning: 2 of 4 tokens (50.0%) are not in the model's vocabulary and read as <unk>" "$T/err"; then
    ok "inspect keys: a data file with unknown words warned about"
else bad "inspect keys: exit $rc, no warning about unknown tokens: $(cat "$T/err")"; fi
expect_fail "inspect gates on an uncovered corpus" "only 0% of the zh corpus's words (0 of" 60 -- \
    "$FFN" inspect gates "$T/words" --corpus zh --threads 1
grep -qF "the probe needs a vocabulary that covers at least half of them" "$T/err" && ok "  ... and says what the probe needs" \
    || bad "inspect gates: the coverage message lacks what the probe needs"

if ((fails)); then echo "$fails failed"; exit 1; fi
echo "all passed"
