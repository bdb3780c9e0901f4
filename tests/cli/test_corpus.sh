#!/usr/bin/env bash
# test_corpus.sh -- `ffn corpus`: --help, text, --labels, --json, zh,
# determinism, and bad usage (exit 2 with a message naming the flag).
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --help explains the language, the classes and the design, exit 0
"$FFN" corpus --help >"$tmp/help"
for w in pronoun "because he was hungry" name object verb function modifier punct "--lang" "--labels" "--json" 因为 surnames; do
    grep -q -- "$w" "$tmp/help" || fail "--help does not mention '$w'"
done
grep -Eq '[0-9]{3} female and [0-9]{3} male names' "$tmp/help" || fail "--help does not give the name counts"
grep -q corpus <<<"$("$FFN" --help)" || fail "ffn --help does not list corpus"

# text: one sentence a line, the default is 20
"$FFN" corpus >"$tmp/default"
[[ $(wc -l <"$tmp/default") -eq 20 ]] || fail "default is not 20 lines"
"$FFN" corpus --lang en --sentences 500 --seed 4 >"$tmp/a"
"$FFN" corpus --lang en --sentences 500 --seed 4 >"$tmp/b"
"$FFN" corpus --lang en --sentences 500 --seed 5 >"$tmp/c"
[[ $(wc -l <"$tmp/a") -eq 500 ]] || fail "500 sentences are not 500 lines"
cmp -s "$tmp/a" "$tmp/b" || fail "the same seed gave different text"
! cmp -s "$tmp/a" "$tmp/c" || fail "different seeds gave the same text"
grep -q because "$tmp/a" || fail "no 'because' in 500 English sentences"
[[ $(sort -u "$tmp/a" | wc -l) -ge 495 ]] || fail "too many repeated sentences"

# zh: valid UTF-8, Chinese punctuation, 因为
"$FFN" corpus --lang zh --sentences 300 --seed 2 >"$tmp/zh"
/usr/bin/python3 - "$tmp/zh" <<'EOF' || fail "zh output"
import sys
t = open(sys.argv[1], 'rb').read().decode('utf-8')   # raises on invalid UTF-8
lines = t.split('\n')
assert lines[-1] == '' and len(lines) == 301, len(lines)
assert all(l.endswith(('。', '？')) for l in lines[:-1]), 'a line without final punctuation'
assert '因为' in t and ('他' in t and '她' in t), 'missing 因为/他/她'
assert not any(c.isascii() and c != '\n' for c in t), 'ASCII in Chinese text'
EOF

# --labels: word<TAB>class, the words rebuild the text
for lang in en zh; do
    "$FFN" corpus --lang $lang --sentences 50 --seed 9 --labels >"$tmp/labels.$lang"
    "$FFN" corpus --lang $lang --sentences 50 --seed 9 >"$tmp/text.$lang"
    /usr/bin/python3 - "$tmp/labels.$lang" "$tmp/text.$lang" $lang <<'EOF' || fail "--labels $lang"
import sys
labels = open(sys.argv[1], encoding='utf-8').read().split('\n')
text = open(sys.argv[2], encoding='utf-8').read().split('\n')[:-1]
classes = {'name', 'pronoun', 'object', 'verb', 'function', 'modifier', 'punct'}
sent, sents = [], []
for l in labels[:-1]:
    if l == '':
        sents.append(sent); sent = []
        continue
    w, c = l.split('\t')
    assert c in classes, c
    assert w and ' ' not in w, repr(w)
    sent.append((w, c))
assert len(sents) == 50, len(sents)
for s, line in zip(sents, text):
    assert ''.join(w for w, _ in s) == line.replace(' ', '') if sys.argv[3] == 'en' else ''.join(w for w, _ in s) == line, (s, line)
EOF
done

# --json: parses, refs point at names of the pronoun's gender
"$FFN" corpus --lang en --sentences 200 --seed 3 --json >"$tmp/j.json"
"$FFN" corpus --lang zh --sentences 200 --seed 3 --json >"$tmp/jz.json"
/usr/bin/python3 - "$tmp/j.json" "$tmp/jz.json" <<'EOF' || fail "--json"
import json, sys
for path in sys.argv[1:]:
    d = json.load(open(path, encoding='utf-8'))
    assert d['n_sentences'] == 200 and len(d['sentences']) == 200
    assert d['classes'][:7] == ['name', 'pronoun', 'object', 'verb', 'function', 'modifier', 'punct']
    refs = 0
    for s in d['sentences']:
        raw = s['text'].encode('utf-8')
        for w in s['words']:
            b = w['word'].encode('utf-8')
            assert raw[w['offset']:w['offset'] + len(b)] == b, (w, s['text'])
            if w['class'] == 'pronoun' and w['gender']:
                r = s['words'][w['ref']]
                assert w['ref'] >= 0 and r['class'] == 'name' and r['gender'] == w['gender'], (w, r)
                refs += 1
    assert refs > 150, refs
EOF

# --stats: class shares sum to the words; pronoun numbers are consistent
"$FFN" corpus --sentences 2000 --stats >"$tmp/stats"
grep -q "majority class" "$tmp/stats" || fail "--stats text"
"$FFN" corpus --lang zh --sentences 2000 --stats --json >"$tmp/stats.json"
/usr/bin/python3 - "$tmp/stats.json" <<'EOF' || fail "--stats --json"
import json, sys
d = json.load(open(sys.argv[1]))
assert sum(d['classes'].values()) == d['n_words'], d
assert d['to_giver'] + d['to_receiver'] + d['to_other'] == d['gendered_pronouns'], d
assert 0.3 < d['resolved_by_gender'] / d['gendered_pronouns'] < 0.95, d
assert d['majority_share'] < 0.5, d
EOF

# bad usage: exit 2 and a message naming the problem
expect_usage() { # expected-substring, args...
    local want="$1"; shift
    set +e
    "$FFN" corpus "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    set -e
    [[ $rc -eq 2 ]] || fail "corpus $*: exit $rc, expected 2"
    grep -q -- "$want" "$tmp/err" || fail "corpus $*: stderr lacks '$want': $(cat "$tmp/err")"
    [[ ! -s "$tmp/out" ]] || fail "corpus $*: wrote to stdout"
}
expect_usage "--lang" --lang fr
expect_usage "--sentences" --sentences 0
expect_usage "--sentences" --sentences abc
expect_usage "--sentences" --sentences 10000001
expect_usage "--seed" --seed -1
expect_usage "unknown option" --bogus
expect_usage "alternative" --labels --json
expect_usage "alternative" --labels --stats
expect_usage "--lang" --lang
echo "test_corpus.sh: ok"
