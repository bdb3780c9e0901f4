#!/usr/bin/env python3
"""bench/torch_smallbatch.py -- the PyTorch peer of bench/smallbatch.c: the
same layer (bias-free nn.Linear projections, the activations of
bench/torch_layer.py), forward only under no_grad, every token count in one
process on one set of weights; per N the minimum over repeats (about 0.6 s
worth, 5..40).  Run with /usr/bin/python3 (Debian's python3-torch).

usage: torch_smallbatch.py TYPE D F THREADS N...
Prints one JSON object per N.
"""
import json
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from torch_layer import ACTS, GATED  # noqa: E402


def main():
    if len(sys.argv) < 6:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    typ, D, F, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    ns = [int(v) for v in sys.argv[5:]]
    gated = typ in GATED
    act = ACTS[GATED[typ] if gated else typ]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    gate = torch.nn.Linear(D, F, bias=False) if gated else None
    up = torch.nn.Linear(D, F, bias=False)
    down = torch.nn.Linear(F, D, bias=False)
    for N in ns:
        x = torch.randn(N, D)
        with torch.no_grad():
            def fwd():
                return down(act(gate(x)) * up(x)) if gated else down(act(up(x)))
            t0 = time.perf_counter()
            fwd()
            first = time.perf_counter() - t0
            R = max(5, min(40, int(0.6 / max(first, 1e-9))))
            best = first
            for _ in range(R):
                t0 = time.perf_counter()
                fwd()
                best = min(best, time.perf_counter() - t0)
        print(json.dumps({"bench": "smallbatch", "peer": "pytorch", "torch": torch.__version__,
                          "type": typ, "hidden": D, "intermediate": F, "tokens": N,
                          "threads": torch.get_num_threads(), "repeats": R,
                          "ms": best * 1e3}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
