#!/usr/bin/env bash
# test_escapes.sh -- text a hostile file chose (an architecture name, a
# regex, a path, a tokenizer's names) reaches an error message with its
# control characters written as \xNN: no escape sequence, bell or newline
# of the file's gets to the terminal.  The library stores every message
# escaped (ffn_escape_controls); the CLI's own messages go through it too.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
SHARED="${FFN_SHARED:-../shared}"
PY=/usr/bin/python3
M="$SHARED/models/stories260K.bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

# escaped NAME FIXED CMD...: exit non-zero, stderr holds the fixed string
# FIXED and not one control character but the final newline
escaped() {
    local name="$1" want="$2"; shift 2
    local rc=0
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if ((rc == 0)); then bad "$name: exit 0"; return; fi
    if LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$tmp/err" ||
        LC_ALL=C grep -q $'\xc2[\x80-\x9f]' "$tmp/err" || (($(wc -l <"$tmp/err") != 1)); then
        bad "$name: raw control characters on stderr: $(od -c "$tmp/err" | head -5)"
    elif ! grep -qF -- "$want" "$tmp/err"; then
        bad "$name: stderr lacks '$want': $(cat "$tmp/err")"
    else
        ok "$name: $(head -c 200 "$tmp/err")"
    fi
}

"$FFN" export "$M" --format gguf --out "$tmp/s.gguf" 2>/dev/null || bad "export gguf"
# general.architecture "llama" -> ESC [ 2 J BEL (the same length)
"$PY" tests/cli/gguf_edit.py "$tmp/s.gguf" "$tmp/arch.gguf" arch $'\e[2J\a'
escaped "a GGUF architecture name" "general.architecture '\\x1b[2J\\x07' is not supported" \
    "$FFN" run "$tmp/arch.gguf" --ids "1" --steps 1
escaped "... through inspect" "'\\x1b[2J\\x07'" "$FFN" inspect "$tmp/arch.gguf" --ids "1 2" --top 1

# a path with an OSC title sequence and a newline in its name
p="$tmp/"$'\e]0;pwned\a\nx'.gguf
cp "$tmp/arch.gguf" "$p"
escaped "a file name" '\x1b]0;pwned\x07\x0ax.gguf' "$FFN" run "$p" --ids "1" --steps 1

# a tokenizer.json whose regex does not compile quotes the pattern: escaped
"$PY" - "$tmp/tok.json" <<'PY'
import json, sys
vocab = {chr(c): i for i, c in enumerate(range(33, 127))}
json.dump({"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": "(\u001b[31m\u009b"}, "behavior": "Isolated", "invert": False},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
           "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": vocab, "merges": []}},
          open(sys.argv[1], "w"))
PY
escaped "a tokenizer's regex" '(\x1b[31m\xc2\x9b' "$FFN" tokenize --tokenizer "$tmp/tok.json" --text hi

# the CLI's own messages: a flag value with an escape in it
escaped "a CLI message" "\\x1b[31m" "$FFN" run "$M" --ids $'1 \e[31m' --steps 1

if ((fail)); then echo "$fail failed"; exit 1; fi
echo "all passed"
