#!/usr/bin/env python3
"""test_serve.py -- `ffn serve`'s POST /api/predict against PyTorch (float64).

For small models trained here with `ffn train` (odd sizes: gated SiLU with a
tied head, dense GELU with an untied head, MoE with 3 experts of width 21),
the server is started on a free port of 127.0.0.1 and asked for the next-token
distribution of a prompt with edits: neurons switched off (scale 0), scaled
(by -30 to 40, so that the prediction moves), edits at a single position, and, for the MoE model, neurons of
two experts (column e*Fe + i of the tap).  The reference is a forward written
here from model.safetensors (the Llama block of tests/parity/test_model.py,
whose functions it reuses) in which each edit multiplies m_i, the input of
down_proj, at its layer (and position).  Checked per case, over the top-k the
server lists before and after the edits:
  p_before, p_after:   |err| <= 2e-6 (float32 against float64)
  KL(before || after): |err| <= 1e-4 * KL + 1e-9
  the top-k ids are the reference's top-k (up to near-ties of 1e-6)
Exit code 0 when everything passes."""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import urllib.request

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ffn_testlib import FFN_BIN, Checker, read_safetensors, run_ffn  # noqa: E402
from test_model import act_fn, ffn, moe, rmsnorm, rope  # noqa: E402

torch.set_default_dtype(torch.float64)
TOL_P = 2e-6
TIE = 1e-6


def reference(P, cfg, tokens, edits):
    """Next-token probabilities after tokens (T) with edits [(layer, neuron,
    scale, position)] applied to m at that layer (position -1: all)."""
    D, H, G = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    Dh, L = D // H, cfg["num_hidden_layers"]
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    act, gated = act_fn(cfg["hidden_act"]), cfg["mlp_type"] in ("gated", "moe")
    T = len(tokens)
    x = P["model.embed_tokens.weight"][torch.tensor(tokens)][None]
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(L):
        pre = f"model.layers.{l}"
        h = rmsnorm(x, P[f"{pre}.input_layernorm.weight"], eps)
        q = rope((h @ P[f"{pre}.self_attn.q_proj.weight"].T).view(1, T, H, Dh), theta, "half").transpose(1, 2)
        k = rope((h @ P[f"{pre}.self_attn.k_proj.weight"].T).view(1, T, G, Dh), theta, "half").transpose(1, 2)
        v = (h @ P[f"{pre}.self_attn.v_proj.weight"].T).view(1, T, G, Dh).transpose(1, 2)
        k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
        att = torch.softmax(q @ k.transpose(-1, -2) / Dh ** 0.5 + mask, -1) @ v
        x = x + att.transpose(1, 2).reshape(1, T, D) @ P[f"{pre}.self_attn.o_proj.weight"].T
        h2 = rmsnorm(x, P[f"{pre}.post_attention_layernorm.weight"], eps)
        mine = [e for e in edits if e[0] == l]
        is_moe = cfg["num_experts"] > 0 and (l + 1) % cfg["decoder_sparse_step"] == 0
        if is_moe:
            Fe = cfg["moe_intermediate_size"]

            def ehook(e, sel, m, mine=mine, Fe=Fe):
                m = m.clone()
                rows = sel.nonzero()[:, 0]
                for _, n, s, p in mine:
                    if n // Fe == e:
                        keep = rows == p if p >= 0 else torch.ones_like(rows, dtype=torch.bool)
                        m[keep, n % Fe] *= s
                return m
            y, _, _ = moe(P, f"{pre}.mlp", h2.reshape(T, D), cfg, act, gated, ehook)
            y = y.view(1, T, D)
        else:
            def dhook(m, mine=mine):
                m = m.clone()
                for _, n, s, p in mine:
                    if p >= 0:
                        m[:, p, n] *= s
                    else:
                        m[..., n] *= s
                return m
            y = ffn(P, f"{pre}.mlp", h2, cfg["mlp_type"] == "gated", cfg["mlp_bias"], act, dhook)
        x = x + y
    x = rmsnorm(x, P["model.norm.weight"], eps)
    head = P["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else P["lm_head.weight"]
    return torch.softmax((x @ head.T)[0, -1], -1)


def post(url, token, path, body):
    """A same-origin POST with the launch's token, as the page sends it."""
    req = urllib.request.Request(url + path.lstrip("/"), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Origin": url.rstrip("/"), "X-FFN-Token": token})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def check_model(ck, tmp, name, train_args, prompt, cases):
    d = os.path.join(tmp, name)
    run_ffn(["train", "--quiet", "--threads", "1", "--out", d, "--corpus-sentences", "300",
             "--eval-batches", "1", "--batch-size", "4", "--seq-len", "48"] + train_args)
    cfg = json.load(open(os.path.join(d, "config.json")))
    P = {k: torch.from_numpy(np.asarray(v, dtype=np.float64))
         for k, v in read_safetensors(os.path.join(d, "model.safetensors")).items()}
    srv = subprocess.Popen([FFN_BIN, "serve", d, "--port", "0", "--threads", "1", "--no-labels"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = srv.stdout.readline().strip()
        m = re.match(r"^(http://127\.0\.0\.1:\d+/)\?token=([0-9a-f]+)$", line)
        if not m:
            srv.kill()  # the server may still be running: its stderr ends only then
            ck.fail(name, f"ffn serve did not print its address and token ({line!r}): " +
                    srv.stderr.read())
            return
        url, token = m.group(1), m.group(2)
        print(f"== {name}: D={cfg['hidden_size']} F={cfg['intermediate_size']} "
              f"V={cfg['vocab_size']} L={cfg['num_hidden_layers']} mlp={cfg['mlp_type']}/"
              f"{cfg['hidden_act']} E={cfg['num_experts']} tied={cfg['tie_word_embeddings']}")
        for label, edits in cases:
            body = {"text": prompt, "k": 8,
                    "edits": [{"layer": l, "neuron": n, "scale": s, "position": p}
                              for l, n, s, p in edits]}
            r = post(url, token, "/api/predict", body)
            tokens = [t["id"] for t in r["tokens"]]
            before = reference(P, cfg, tokens, [])
            after = reference(P, cfg, tokens, edits)
            ids_b = [e["id"] for e in r["before"]]
            ids_a = [e["id"] for e in r["after"]]
            ck.close(f"{name} {label}: p_before", [e["p_before"] for e in r["before"]],
                     before[ids_b].numpy(), TOL_P, 1.0)
            ck.close(f"{name} {label}: p_after", [e["p_after"] for e in r["after"]],
                     after[ids_a].numpy(), TOL_P, 1.0)
            kl = float((before * (before.log() - after.log())).sum())
            ck.count += 1
            ok = abs(r["kl"] - kl) <= 1e-4 * kl + 1e-9
            print(f"  {'ok' if ok else 'FAIL'}   {name} {label}: KL {r['kl']:.6e} ref {kl:.6e}")
            if not ok:
                ck.failures.append(f"{name} {label}: KL {r['kl']} vs {kl}")
            for what, got, ref in (("before", ids_b, before), ("after", ids_a, after)):
                kth = float(ref.sort(descending=True).values[len(got) - 1])
                ck.count += 1
                if not all(float(ref[i]) >= kth - TIE for i in got):
                    ck.failures.append(f"{name} {label}: top-k {what} {got} is not the reference's")
    finally:
        srv.send_signal(signal.SIGTERM)
        if srv.wait(timeout=60) != 0:
            ck.failures.append(f"{name}: ffn serve exit {srv.returncode} on SIGTERM")


def main():
    ck = Checker("test_serve")
    with tempfile.TemporaryDirectory() as tmp:
        small = ["--num-hidden-layers", "2", "--num-attention-heads", "4", "--num-key-value-heads", "2"]
        check_model(ck, tmp, "gated-silu-tied",
                    ["--steps", "60", "--hidden-size", "40", "--intermediate-size", "77",
                     "--tokenizer", "char", "--seed", "5"] + small,
                    "Mary gave John the apple because",
                    [("one off", [(1, 5, 0.0, -1)]),
                     ("three edits", [(0, 3, 0.0, -1), (1, 76, 12.5, -1), (1, 11, -8.0, -1)]),
                     ("at one position", [(0, 7, 20.0, 4), (1, 9, 30.0, 31)])])
        check_model(ck, tmp, "dense-gelu-untied",
                    ["--steps", "40", "--hidden-size", "24", "--intermediate-size", "53",
                     "--mlp-type", "dense", "--hidden-act", "gelu", "--tie-word-embeddings", "0",
                     "--tokenizer", "byte", "--seed", "6"] + small,
                    "She handed him a pear",
                    [("two off", [(0, 52, 0.0, -1), (1, 0, 0.0, -1)]),
                     ("scaled", [(1, 17, 40.0, -1), (0, 3, -20.0, -1)])])
        check_model(ck, tmp, "moe-gated-E3",
                    ["--steps", "30", "--hidden-size", "32", "--intermediate-size", "31",
                     "--mlp-type", "moe", "--num-experts", "3", "--num-experts-per-tok", "2",
                     "--moe-intermediate-size", "21", "--tokenizer", "char", "--seed", "7"] + small,
                    "She gave him a pear.",
                    [("experts 0 and 2", [(0, 4, 0.0, -1), (1, 2 * 21 + 20, 30.0, -1), (1, 5, -30.0, -1)])])
    print(f"test_serve: {ck.count} checks, {len(ck.failures)} failed")
    for f in ck.failures:
        print("  FAILED:", f)
    sys.exit(1 if ck.failures else 0)


if __name__ == "__main__":
    main()
