#!/usr/bin/env python3
"""Logit lens over a running tpnode cluster (docs/logit-lens.md).

Asks node 0's API for the residual stream after every layer at every prompt position (taps),
fetches the final norm and the output head (GET /v1/tensors, gathered from every rank), and
projects each hidden state through them: which token would the model predict if it stopped
after layer L? The last layer's projection must equal the model's own logits (the "logits"
tap): the script checks that and exits 1 when it does not (so it doubles as a test).

  tools/logit_lens.py --base http://127.0.0.1:8080 --prompt "The capital of France is"
  tools/logit_lens.py --prompt-ids 1,450,7483 --eps 1e-5

Needs numpy. Llama-family models (RMSNorm, untied or tied head); gemma's embedding scale and
logit soft-capping are applied when --softcap is given.
"""
import argparse
import base64
import io
import json
import sys
import urllib.error
import urllib.request

import numpy as np


def get(base, path, key):
    req = urllib.request.Request(base + path)
    if key:
        req.add_header("Authorization", "Bearer " + key)
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.read()


def post(base, path, body, key):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    if key:
        req.add_header("Authorization", "Bearer " + key)
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        sys.exit(f"{path}: HTTP {e.code}: {e.read().decode(errors='replace')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="http://127.0.0.1:8080")
    ap.add_argument("--key", default="")
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--prompt-ids", default="", help="comma-separated token ids instead")
    ap.add_argument("--eps", type=float, default=1e-5, help="the model's RMSNorm epsilon")
    ap.add_argument("--softcap", type=float, default=0.0, help="final logit soft-cap (gemma)")
    ap.add_argument("--top", type=int, default=3, help="tokens shown per layer")
    ap.add_argument("--tolerance", type=float, default=1e-3,
                    help="largest |lens(last layer) - logits| accepted")
    a = ap.parse_args()

    listing = json.loads(get(a.base, "/v1/tensors", a.key))
    n_layer = listing["n_layer"]
    names = {t["name"] for t in listing["data"]}
    head_name = "output.weight" if "output.weight" in names else "token_embd.weight"
    norm = np.load(io.BytesIO(get(a.base, "/v1/tensors/output_norm.weight", a.key)))
    head = np.load(io.BytesIO(get(a.base, "/v1/tensors/" + head_name, a.key)))  # [vocab, dim]

    prompt = [int(x) for x in a.prompt_ids.split(",")] if a.prompt_ids else a.prompt
    taps = [{"layer": L, "point": "residual"} for L in range(n_layer)] + [{"point": "logits"}]
    answer = post(a.base, "/v1/completions",
                  {"prompt": prompt, "max_tokens": 1, "temperature": 0, "taps": taps,
                   "tap_encoding": "base64"}, a.key)

    def rows(tap):  # base64 of little-endian f32, row-major [positions, width]
        return np.frombuffer(base64.b64decode(tap["data"]), dtype="<f4").reshape(tap["shape"])

    got = [rows(t) for t in answer["taps"]]
    logits = got[-1]  # [positions, vocab]

    def lens(h):  # RMSNorm with the final norm's weight, then the head (f32, like the model)
        h = np.asarray(h, dtype=np.float32)
        scale = 1.0 / np.sqrt(np.mean(h.astype(np.float64) ** 2, axis=-1, keepdims=True) + a.eps)
        z = (h * scale.astype(np.float32) * norm) @ head.T
        return a.softcap * np.tanh(z / a.softcap) if a.softcap > 0 else z

    positions = logits.shape[0]
    print(f"{n_layer} layers, {positions} prompt positions, head {head_name} {list(head.shape)}")
    print("top tokens at the last prompt position, layer by layer:")
    last = None
    for L in range(n_layer):
        z = lens(got[L])
        top = np.argsort(-z[-1])[: a.top]
        print(f"  layer {L:3d}: " + ", ".join(f"{t} ({z[-1][t]:.2f})" for t in top))
        last = z
    top = np.argsort(-logits[-1])[: a.top]
    print("  model    : " + ", ".join(f"{t} ({logits[-1][t]:.2f})" for t in top))
    diff = float(np.max(np.abs(last - logits)))
    print(f"max |lens(layer {n_layer - 1}) - logits| = {diff:.3g}")
    if diff > a.tolerance:
        print("FAIL: the last layer's lens does not reproduce the model's logits")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
