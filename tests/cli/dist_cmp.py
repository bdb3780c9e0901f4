# dist_cmp.py -- what the distributed tests (test_dist_zero.sh, test_dist_zero2.sh,
# test_dist_shard.sh) compare a run with: same(ref, run) over two run
# directories; each test copies it to its temporary folder as cmp.py.
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
    return {k: struct.unpack("<%df" % ((v["data_offsets"][1] - v["data_offsets"][0]) // 4), d[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in h.items() if k != "__metadata__" and v["dtype"] == "F32"}
def same(ref, run):
    """losses 1e-6 relative; every tensor of the model and AdamW's m, v within 1e-4"""
    a = [json.loads(l) for l in open(ref + "/metrics.jsonl")]
    b = [json.loads(l) for l in open(run + "/metrics.jsonl")]
    assert len(a) == len(b) == 8, (ref, run, len(a), len(b))
    wl = 0.0
    for x, y in zip(a, b):
        for k in ("loss", "val_loss"):
            if k in x:
                e = abs(x[k] - y[k]) / abs(x[k]); wl = max(wl, e)
                assert e <= 1e-6, (run, x["step"], k, x[k], y[k])
    wt = 0.0
    for f in ("model.safetensors", "train_state.safetensors"):
        p, q = load(ref + "/" + f), load(run + "/" + f)
        assert p.keys() == q.keys(), (run, f)
        for k in p:
            if k in ("loss_history", "eval_loss"): continue
            d = max((abs(u - v) for u, v in zip(p[k], q[k])), default=0.0)
            assert d <= 1e-4, (run, f, k, d)
            wt = max(wt, d)
    return wl, wt
