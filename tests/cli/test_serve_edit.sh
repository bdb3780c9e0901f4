#!/usr/bin/env bash
# test_serve_edit.sh -- editing a fact through `ffn serve` (POST /api/edit,
# /api/edit/reset, /api/edit/save) on a small word-level model trained here
# on the facts corpus:
#   1. /api/info says editing is on (the model's text and its 100 facts
#      found from its train_state), saving only with --save-dir;
#   2. an edit the facts corpus knows (fact 0, ROME at layer 0, then FT at
#      layer 1) answers the numbers `ffn edit --json` prints for the same
#      arguments (before and after: log p(new), log p(old), efficacy,
#      generalisation, specificity, held-out loss; steps, losses, lambda);
#   3. later requests run on the edited model: /api/predict equals `ffn
#      inspect --json` of the directory `ffn edit --out` wrote, and says
#      model_edits; /api/edit/save writes a complete model directory under
#      --save-dir whose weights are byte for byte those of `ffn edit --out`,
#      under a name the server picks (an existing name is skipped, never
#      replaced); /api/edit/reset gives back the original prediction
#      exactly; the model on disk never changes;
#   4. an edit racing 12 predictions: every prediction is either wholly the
#      model before the edit or wholly after it (requests are serialised);
#   5. bad input, each a 4xx naming the field, the server serving on: a
#      layer out of range, an unknown method, a subject not in the prompt,
#      a target the vocabulary lacks, too many steps, a missing field, an
#      unknown field (a path sent to save), saving with nothing to save;
#      without --save-dir saving is a 403; --save-dir that is not a
#      directory and --data that does not exist stop the command.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
server_pid=
cleanup() {
    umount "$tmp/small" 2>/dev/null || true
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { # description, command...
    local what="$1"; shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}
start_server() { # name, args...: ffn serve in the background, its URL in $url
    local name="$1"; shift
    "$FFN" serve "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    server_pid=$!
    for _ in $(seq 1 600); do
        [[ -s "$tmp/$name.out" ]] && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    full_url=$(head -n 1 "$tmp/$name.out")
    [[ "$full_url" == http://* ]] || { cat "$tmp/$name.err"; echo "FAIL server $name did not start"; exit 1; }
    url=${full_url%%\?*} token=${full_url#*\?token=}
}
# every request as the page sends it: the launch's token, same-origin, JSON
# (the refusals without them are test_serve_guard.sh)
curl() { command curl -H "Authorization: token $token" -H "Origin: ${url%/}" -H 'Content-Type: application/json' "$@"; }
stop_server() {
    kill -TERM "$server_pid"
    stop_rc=0
    wait "$server_pid" || stop_rc=$?
    server_pid=
}
post() { curl -s -S --max-time 300 -d "$2" "$url${1#/}"; }
status() { curl -s -o "$tmp/reply.json" -w '%{http_code}' --max-time 300 -d "$2" "$url${1#/}"; }
jcheck() { # file, python expression over d, description
    if "$PY" - "$1" "$2" <<'EOF'; then pass "$3"; else fail "$3"; fi
import json, sys
d = json.load(open(sys.argv[1], encoding='utf-8'))
ok = eval(sys.argv[2])
if not ok: print('   expression false:', sys.argv[2], '\n   on', json.dumps(d)[:600], file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
}
bad() { # code, message pattern, description, endpoint, body
    local code
    code=$(status "$4" "$5")
    if [[ "$code" == "$1" ]] && grep -q -- "$2" "$tmp/reply.json"; then pass "$3 ($code)"
    else fail "$3: got $code $(head -c 300 "$tmp/reply.json")"; fi
}
export FFN_NUM_THREADS=2

m="$tmp/m"
"$FFN" train --corpus facts --tokenizer word --steps 300 --hidden-size 64 --intermediate-size 128 \
    --num-hidden-layers 2 --num-attention-heads 4 --num-key-value-heads 4 --batch-size 8 \
    --seq-len 64 --threads 2 --seed 3 --out "$m" >/dev/null 2>"$tmp/train.err" ||
    { cat "$tmp/train.err"; exit 1; }
"$FFN" corpus --facts --json >"$tmp/facts.jsonl"
"$FFN" corpus --facts --text --sentences 20000 >"$tmp/facts.txt" # the text the model records
sums() { (cd "$1" && sha256sum -- * | sort); }
sums "$m" >"$tmp/m.sums"
mkdir "$tmp/saved"

# ---- 5. flags that stop the command -------------------------------------------------------
rc=0; "$FFN" serve "$m" --save-dir "$tmp/nowhere" --port 0 >/dev/null 2>"$tmp/err" || rc=$?
check "--save-dir that is not a directory: exit 2 naming it" bash -c "[[ $rc == 2 ]] && grep -q 'nowhere' '$tmp/err'"
rc=0; "$FFN" serve "$m" --data "$tmp/nothing.txt" --port 0 --no-labels >/dev/null 2>"$tmp/err" || rc=$?
check "--data that does not exist: exit 1 naming it" bash -c "[[ $rc == 1 ]] && grep -q 'nothing.txt' '$tmp/err'"

start_server main "$m" --port 0 --threads 2 --no-labels --samples 500 --save-dir "$tmp/saved"

# ---- 1. /api/info ---------------------------------------------------------------------------
curl -s -S "${url}api/info" >"$tmp/info.json"
jcheck "$tmp/info.json" "d['edit']['available'] and d['edit']['save'] and d['edit']['facts'] == 100 and d['edit']['samples'] == 500 and not d['edit']['edited'] and 'facts corpus' in d['edit']['text']" \
    "/api/info: editing on, saving on, the facts corpus's 100 facts, --samples"
jcheck "$tmp/info.json" "set(['/api/edit', '/api/edit/reset', '/api/edit/save']) <= set(e['path'] for e in d['endpoints'])" \
    "/api/info lists the edit endpoints"

prompt="Sevelle lives in"
post /api/predict "{\"text\":\"$prompt\",\"k\":8}" >"$tmp/p0.json"
bad 409 "nothing to save" "save before any edit" /api/edit/save '{}'

# ---- 5. bad edits --------------------------------------------------------------------------------
e0='"prompt":"Sevelle lives in","subject":"Sevelle","target":"Keshdun"'
bad 400 'layer\\": 2 out of range (the model has 2 layers: 0..1)' "layer out of range" /api/edit "{$e0,\"layer\":2}"
bad 400 'unknown method \\"dpo\\"' "unknown method" /api/edit "{$e0,\"layer\":0,\"method\":\"dpo\"}"
bad 400 "'Mira' is not in the prompt" "subject not in the prompt" /api/edit '{"prompt":"Sevelle lives in","subject":"Mira","target":"Keshdun","layer":0}'
bad 400 "not in the model's vocabulary" "a target the vocabulary lacks" /api/edit '{"prompt":"Sevelle lives in","subject":"Sevelle","target":"Atlantis","layer":0}'
bad 400 'steps\\": expected an integer in \[0, 500\]' "too many steps" /api/edit "{$e0,\"layer\":0,\"steps\":100000}"
bad 400 'missing \\"target\\"' "a missing target" /api/edit '{"prompt":"Sevelle lives in","subject":"Sevelle","layer":0}'
bad 400 'missing \\"layer\\"' "a missing layer" /api/edit "{$e0}"
bad 400 'unknown field \\"dir\\"' "a path sent to save is refused" /api/edit/save '{"dir":"/tmp/evil"}'
bad 400 'unknown field \\"out\\"' "an output path sent to edit is refused" /api/edit "{$e0,\"layer\":0,\"out\":\"/tmp/evil\"}"
post /api/predict "{\"text\":\"$prompt\",\"k\":8}" >"$tmp/p0b.json"
check "after the bad requests the model is untouched (the same prediction)" cmp -s "$tmp/p0.json" "$tmp/p0b.json"

# ---- 2. ROME at layer 0, FT at layer 1: the numbers of ffn edit --json ---------------------------
compare() { # serve reply, ffn edit --json, description
    if "$PY" - "$1" "$2" <<'EOF'; then pass "$3"; else fail "$3"; fi
import json, math, sys
s, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
close = lambda a, b: (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 2e-5 * (1 + abs(b)))
ok = s['method'] == c['method'] and s['layer'] == c['layer'] and s['old'] == c['old'] and s['steps'] == c['steps']
ok &= all(close(s[k], c[k]) for k in ('loss_first', 'loss_last', 'kl_last', 'lambda'))
ok &= s['cov_samples'] == (c['cov_samples'] if c['method'] == 'rome' else 0)
for when in ('before', 'after'):
    a, b = s[when], c[when]
    for k in ('logp_new', 'logp_old', 'efficacy', 'generalisation', 'specificity', 'heldout_loss'):
        if not close(a[k], b[k]): ok = False; print('   %s %s: serve %r, ffn edit %r' % (when, k, a[k], b[k]), file=sys.stderr)
    ok &= a['n_paraphrases'] == b['n_paraphrases'] == 3 and a['n_neighbours'] == b['n_neighbours'] == 2  # Sevanor lives in Keshdun: left out
    ok &= close(a['p_new'], math.exp(b['logp_new'])) and close(a['p_old'], math.exp(b['logp_old']))
print('   %s layer %d: log p(new) %.4f -> %.4f, efficacy %s -> %s' % (s['method'], s['layer'], s['before']['logp_new'],
      s['after']['logp_new'], s['before']['efficacy'], s['after']['efficacy']), file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
}
code=$(status /api/edit "{$e0,\"layer\":0,\"method\":\"rome\"}"); cp "$tmp/reply.json" "$tmp/rome.json"
check "/api/edit rome: 200" test "$code" = 200
"$FFN" edit "$m" --facts "$tmp/facts.jsonl" --fact 0 --target Keshdun --layer 0 --samples 500 \
    --cache "$tmp" --out "$tmp/e_rome" --json >"$tmp/rome_cli.json"
compare "$tmp/rome.json" "$tmp/rome_cli.json" "/api/edit rome layer 0 = ffn edit --json (scores before and after, v* steps and losses)"
jcheck "$tmp/rome.json" "d['fact'] == 0 and d['old'] == 'Thardun' and d['edited'] and d['n_edits'] == 1 and d['cov_samples'] == 500" \
    "/api/edit: the fact of the facts corpus, its old object, the count of edits"
# the second edit starts from the first: ffn edit on the first's output gives the same numbers
code=$(status /api/edit "{$e0,\"layer\":1,\"method\":\"ft\"}"); cp "$tmp/reply.json" "$tmp/ft.json"
check "/api/edit ft: 200" test "$code" = 200
"$FFN" edit "$tmp/e_rome" --facts "$tmp/facts.jsonl" --fact 0 --target Keshdun --layer 1 --method ft \
    --data "$tmp/facts.txt" --cache "$tmp" --out "$tmp/e_ft" --json >"$tmp/ft_cli.json"
compare "$tmp/ft.json" "$tmp/ft_cli.json" "/api/edit ft layer 1 after the ROME edit = ffn edit --method ft on ffn edit's output"
jcheck "$tmp/ft.json" "d['after']['efficacy'] == 1 and d['n_edits'] == 2" "FT makes the new object win; two edits in memory"

# ---- 3. later requests see the edited model --------------------------------------------------
post /api/predict "{\"text\":\"$prompt\",\"k\":8}" >"$tmp/p1.json"
"$FFN" inspect "$tmp/e_ft" --prompt "$prompt" --ablate 0:0 --json >"$tmp/ins.json" 2>/dev/null
"$PY" - "$tmp/p1.json" "$tmp/ins.json" "$tmp/p0.json" <<'EOF' && pass "/api/predict after the edits = ffn inspect of ffn edit's output (top 8, |dp| <= 1e-5); model_edits 2" || fail "/api/predict after the edits"
import json, sys
p, ins, p0 = (json.load(open(a)) for a in sys.argv[1:4])
ref = ins['before']  # the model as it is, before inspect's own ablation
ok = [e['id'] for e in p['before'][:8]] == [e['id'] for e in ref[:8]]
ok &= all(abs(a['p_before'] - b['p']) <= 1e-5 * (1 + b['p']) for a, b in zip(p['before'], ref))
ok &= p['model_edits'] == 2 and p0['model_edits'] == 0
ok &= [e['id'] for e in p['before']] != [e['id'] for e in p0['before']]
print('   top after the edits:', [(e['piece'], round(e['p_before'], 4)) for e in p['before'][:3]], file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
code=$(status /api/edit/save '{}'); cp "$tmp/reply.json" "$tmp/save1.json"
jcheck "$tmp/save1.json" "d['name'] == 'm-edited-1' and d['n_edits'] == 2" "/api/edit/save: 200, named by the server"
for f in config.json model.safetensors tokenizer.txt; do
    check "saved directory has $f" test -s "$tmp/saved/m-edited-1/$f"
done
check "the saved weights are byte for byte those of ffn edit --out" cmp -s "$tmp/saved/m-edited-1/model.safetensors" "$tmp/e_ft/model.safetensors"
mkdir "$tmp/saved/m-edited-2" && echo mine >"$tmp/saved/m-edited-2/notes.txt"
bad 409 "nothing changed since the last save" "a second save with no edit since the first" /api/edit/save '{}'
check "and it wrote nothing" bash -c "[[ \$(ls '$tmp/saved' | wc -l) == 2 ]]"
code=$(status /api/edit "{$e0,\"layer\":1,\"method\":\"ft\",\"ft_steps\":2}")
check "a third edit: 200" test "$code" = 200
code=$(status /api/edit/save '{}'); cp "$tmp/reply.json" "$tmp/save2.json"
jcheck "$tmp/save2.json" "d['name'] == 'm-edited-3' and d['path'] == 'saved/m-edited-3'" "a second save after a new edit skips an existing name; the reply shows no absolute path"
check "an existing directory under --save-dir is left alone" bash -c "[[ \$(ls '$tmp/saved/m-edited-2') == notes.txt ]]"
code=$(status /api/edit/reset '{}'); cp "$tmp/reply.json" "$tmp/reset.json"
jcheck "$tmp/reset.json" "not d['edited'] and d['undone'] == 3" "/api/edit/reset: three edits undone"
post /api/predict "{\"text\":\"$prompt\",\"k\":8}" >"$tmp/p2.json"
check "after the reset the prediction is the original, exactly" cmp -s "$tmp/p0.json" "$tmp/p2.json"
check "the model on disk never changed" bash -c "sums() { (cd \"\$1\" && sha256sum -- * | sort); }; sums '$m' | cmp -s - '$tmp/m.sums'"

# ---- 4. an edit racing predictions ---------------------------------------------------------------
racers=()
for i in $(seq 1 12); do
    (sleep "0.$((i % 6))"; post /api/predict "{\"text\":\"$prompt\",\"k\":8}" >"$tmp/race$i.json") &
    racers+=($!)
done
post /api/edit "{$e0,\"layer\":1,\"method\":\"ft\",\"ft_steps\":300}" >"$tmp/race_edit.json"
wait "${racers[@]}"
post /api/predict "{\"text\":\"$prompt\",\"k\":8}" >"$tmp/p3.json"
"$PY" - "$tmp" <<'EOF' && pass "12 predictions racing an edit: each wholly before or wholly after it" || fail "predictions racing an edit"
import json, sys, glob
t = sys.argv[1]
strip = lambda d: json.dumps({k: d[k] for k in ('before', 'after', 'kl')})
p0, p3 = json.load(open(t + '/p0.json')), json.load(open(t + '/p3.json'))
seen = {'before': 0, 'after': 0}
ok = json.load(open(t + '/race_edit.json'))['n_edits'] == 1 and p3['model_edits'] == 1
for f in sorted(glob.glob(t + '/race*.json')):
    if f.endswith('race_edit.json'): continue
    d = json.load(open(f))
    if strip(d) == strip(p0) and d['model_edits'] == 0: seen['before'] += 1
    elif strip(d) == strip(p3) and d['model_edits'] == 1: seen['after'] += 1
    else: ok = False; print('   neither:', f, json.dumps(d)[:200], file=sys.stderr)
print('   before the edit: %d, after: %d' % (seen['before'], seen['after']), file=sys.stderr)
sys.exit(0 if ok and sum(seen.values()) == 12 else 1)
EOF
stop_server
check "a clean stop (exit 0)" test "$stop_rc" -eq 0

# ---- the limits of saving: --max-saves, --max-save-mb, free space ----------------------------
start_server caps "$m" --port 0 --threads 2 --no-labels --samples 500 --save-dir "$tmp/saved" --max-saves 1
jcheck <(curl -s -S "${url}api/info") "d['edit']['max_saves'] == 1 and d['edit']['saves'] == 0" "/api/info shows the save limits"
ft='"layer":1,"method":"ft","ft_steps":2'
status /api/edit "{$e0,$ft}" >/dev/null
code=$(status /api/edit/save '{}')
check "--max-saves 1: the first save (200)" test "$code" = 200
n_saved=$(ls "$tmp/saved" | wc -l)
status /api/edit "{$e0,$ft}" >/dev/null
bad 429 "most --max-saves allows" "--max-saves 1: the second save is refused" /api/edit/save '{}'
for i in 1 2 3; do status /api/edit/save '{}' >/dev/null; done
check "--max-saves 1: nothing more written after 3 more calls" bash -c "[[ \$(ls '$tmp/saved' | wc -l) == $n_saved ]]"
stop_server
start_server capmb "$m" --port 0 --threads 2 --no-labels --samples 500 --save-dir "$tmp/saved" --max-save-mb 1
status /api/edit "{$e0,$ft}" >/dev/null
bad 429 "max-save-mb allows" "--max-save-mb 1: a save larger than it is refused before writing" /api/edit/save '{}'
check "--max-save-mb 1: nothing written" bash -c "[[ \$(ls '$tmp/saved' | wc -l) == $n_saved ]]"
stop_server
# a file system with less room than a save needs (a 2 MB tmpfs, when this machine lets us mount one)
mkdir "$tmp/small"
if mount -t tmpfs -o size=2m tmpfs "$tmp/small" 2>/dev/null; then
    start_server full "$m" --port 0 --threads 2 --no-labels --samples 500 --save-dir "$tmp/small"
    status /api/edit "{$e0,$ft}" >/dev/null
    bad 507 "free, a save needs" "a --save-dir without the room for a save: 507 before writing" /api/edit/save '{}'
    check "nothing written on the small file system" bash -c "[[ -z \$(ls '$tmp/small') ]]"
    stop_server
    umount "$tmp/small"
else
    echo "skip the free-space case: cannot mount a tmpfs here"
fi

# ---- saving without --save-dir -----------------------------------------------------------------
start_server nosave "$m" --port 0 --threads 2 --no-labels --samples 500
jcheck <(curl -s -S "${url}api/info") "not d['edit']['save']" "without --save-dir /api/info says saving is off"
post /api/edit "{$e0,\"layer\":1,\"method\":\"ft\",\"ft_steps\":3}" >/dev/null
bad 403 "start ffn serve with --save-dir" "saving without --save-dir" /api/edit/save '{}'
stop_server
check "the model on disk never changed" bash -c "sums() { (cd \"\$1\" && sha256sum -- * | sort); }; sums '$m' | cmp -s - '$tmp/m.sums'"

echo "$fails failure(s)"
((fails == 0))
