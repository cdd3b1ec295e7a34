#!/usr/bin/env python3
"""Load test for an OpenAI-compatible server: N concurrent streaming clients for D seconds.

  tools/loadtest.py --base http://127.0.0.1:8080 --clients 32 --seconds 120 [--max-tokens 32]
                    [--pids 123,456] [--json]

Each client loops: POST /v1/completions with stream=true, counts streamed tokens (one SSE
chunk with text = one token, as both tpnode and llama-server stream token by token), records
time to first token. Prints aggregate generated tokens/s, requests, errors, TTFT p50/p99 and,
with --pids, the RSS of those processes before and after (stable memory check).
Standard library only.
"""
import argparse, http.client, json, statistics, sys, threading, time, urllib.parse


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None


def client(base, max_tokens, deadline, out, idx):
    u = urllib.parse.urlparse(base)
    prompts = ["Once upon a time", "The weather today", "In a distant galaxy", "My favourite food"]
    n = 0
    while time.time() < deadline:
        body = json.dumps({"prompt": prompts[(idx + n) % len(prompts)] + f" ({idx}.{n})",
                           "max_tokens": max_tokens, "temperature": 0.8, "stream": True,
                           "ignore_eos": True})
        n += 1
        t0 = time.time()
        ttft, tokens = None, 0
        try:
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
            c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                out["errors"].append(f"HTTP {r.status}: {r.read()[:200]!r}")
                c.close()
                continue
            done = False
            for raw in r:
                line = raw.decode(errors="replace").strip()
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    break
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    out["errors"].append(str(chunk["error"])[:200])
                    break
                for ch in chunk.get("choices", []):
                    if ch.get("text"):
                        tokens += 1
                        if ttft is None:
                            ttft = time.time() - t0
            c.close()
            if not done:
                out["errors"].append("stream ended without [DONE]")
                continue
        except Exception as e:  # noqa: BLE001 - every failure is a reported error
            out["errors"].append(repr(e)[:200])
            continue
        with out["lock"]:
            out["tokens"] += tokens
            out["requests"] += 1
            if ttft is not None:
                out["ttft"].append(ttft)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--pids", default="")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    pids = [int(p) for p in a.pids.split(",") if p]
    rss_before = {p: rss_kib(p) for p in pids}
    out = {"tokens": 0, "requests": 0, "ttft": [], "errors": [], "lock": threading.Lock()}
    deadline = time.time() + a.seconds
    t0 = time.time()
    threads = [threading.Thread(target=client, args=(a.base, a.max_tokens, deadline, out, i))
               for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    ttft = sorted(out["ttft"])
    q = lambda p: ttft[min(len(ttft) - 1, int(p * len(ttft)))] if ttft else float("nan")
    res = {"clients": a.clients, "seconds": round(wall, 1), "requests": out["requests"],
           "errors": len(out["errors"]), "tokens": out["tokens"],
           "tokens_per_s": round(out["tokens"] / wall, 2),
           "ttft_p50_ms": round(1e3 * q(0.50), 1), "ttft_p99_ms": round(1e3 * q(0.99), 1),
           "rss_kib_before": rss_before, "rss_kib_after": {p: rss_kib(p) for p in pids},
           "first_errors": out["errors"][:3]}
    print(json.dumps(res) if a.json else "\n".join(f"{k}: {v}" for k, v in res.items()))
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
