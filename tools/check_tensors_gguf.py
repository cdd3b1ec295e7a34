#!/usr/bin/env python3
"""Checks GET /v1/tensors/{name} of a running tpnode against gguf-py reading the same file.

For every tensor (or every --every-th): ?format=raw must equal gguf-py's bytes of the tensor,
and ?format=npy must equal gguf-py's dequantisation (numpy shape [ne1, ne0]) exactly; for a
quant type whose numpy dequantiser rounds differently from ggml the largest difference is
printed and must stay within --tolerance (0 by default: bit-exact).

  tools/check_tensors_gguf.py --base http://127.0.0.1:8080 --model m.gguf
Exit 77 when gguf or numpy is missing (tools/install-deps.sh installs them).
"""
import argparse
import io
import json
import sys
import urllib.parse
import urllib.request

try:
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)


def get(base, path):
    with urllib.request.urlopen(base + path, timeout=120) as r:
        return r.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--tolerance", type=float, default=0.0)
    a = ap.parse_args()
    reader = GGUFReader(a.model)
    listing = {t["name"]: t for t in json.loads(get(a.base, "/v1/tensors"))["data"]}
    bad = 0
    for i, t in enumerate(reader.tensors):
        if i % a.every:
            continue
        name = urllib.parse.quote(t.name)
        raw = get(a.base, f"/v1/tensors/{name}?format=raw")
        want_raw = np.asarray(t.data).tobytes()
        arr = np.load(io.BytesIO(get(a.base, f"/v1/tensors/{name}?format=npy")))
        want = dequantize(t.data, t.tensor_type).astype(np.float32)
        want = want.reshape(tuple(int(x) for x in reversed(t.shape)))
        diff = float(np.max(np.abs(arr - want))) if arr.shape == want.shape else float("inf")
        ok = raw == want_raw and arr.shape == want.shape and diff <= a.tolerance
        if list(arr.shape) != listing[t.name]["shape"]:
            ok = False
        print(f"{'ok  ' if ok else 'FAIL'} {t.name:32s} {t.tensor_type.name:5s} "
              f"shape {list(arr.shape)} raw {'==' if raw == want_raw else '!='} "
              f"npy max|d| {diff:.3g}")
        bad += not ok
    print(f"{bad} tensor(s) differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
