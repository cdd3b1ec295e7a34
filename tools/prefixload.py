#!/usr/bin/env python3
"""Prefix-cache load test for an OpenAI-compatible server (tpnode, llama-server).

  tools/prefixload.py make-prompt --base URL [--tokens 1000] [--out FILE]
      A deterministic English-like system prompt of about --tokens tokens, sized with the
      server's POST /tokenize (both tpnode and llama-server have it); written as JSON
      {"system", "tokens", "tokens_per_word"} (the prompt file of the commands below).
  tools/prefixload.py shared --base URL --prompt-file F [--clients 32] [--seconds 60]
                             [--requests 0] [--max-tokens 16]
      Shared-prefix workload: each client loops (until --seconds have passed, or --requests
      requests each when > 0) sending the shared system prompt + a short question of its own.
  tools/prefixload.py chat --base URL --prompt-file F [--clients 32] [--turns 4]
                           [--open-tokens 200] [--max-tokens 16] [--seconds 0]
      Multi-turn chat: each client holds its own conversation, opened by a text of about
      --open-tokens tokens of its own; every turn sends the whole conversation so far (its
      earlier turns are the prefix a cache can reuse) plus a new question.
  tools/prefixload.py probe --base URL --prompt-file F --tag T [--prefixes 3]
                            [--requests-per-prefix 2]
      No load: for each of --prefixes system prompts made unique by --tag (the prompt file's text
      behind "[probe T i]"), --requests-per-prefix requests one after the other with different
      questions. Step 1 finds the prefix uncached (unless another server of the same cache tier
      saw the same tag), later steps find it cached.
  tools/prefixload.py report --dir D
      The markdown tables of a tools/bench-prefix.sh result folder (see there).

Every request is POST /v1/chat/completions, streaming, temperature 0, ignore_eos true,
stream_options.include_usage. Per request: TTFT (the first chunk with non-empty content),
completion tokens (usage.completion_tokens, else the content chunks), prompt tokens and cached
prompt tokens (usage.prompt_tokens_details.cached_tokens, which tpnode and llama-server report;
else llama-server's timings.cache_n). A request is "cached" when its cached tokens are at least
--cached-fraction (0.5) of its prompt, "uncached" when fewer; a server that reports neither is
"unclassified". The workload commands print one JSON object (stdout) and exit 1 when a
request failed. Standard library only.
"""
import argparse
import http.client
import json
import math
import os
import random
import sys
import threading
import time
import urllib.parse

WORDS = ("account adapter answer archive balance battery billing branch cable calendar capacity "
         "carrier channel checkout client cluster contract courier credit customer delivery "
         "deposit device discount document driver email engine estimate exchange export feature "
         "firmware folder gateway guarantee hardware invoice keyboard license limit manual "
         "meeting member message monitor network notice office order package partner password "
         "payment period policy printer product profile project purchase quota receipt record "
         "refund region release renewal report request reseller router schedule screen server "
         "service session setting shipment signal software storage subscription supplier "
         "support system ticket transfer upgrade usage user voucher warehouse warranty window "
         "always carefully clearly politely quickly never only first later today within before "
         "after during check confirm explain describe verify update cancel replace restore "
         "escalate resolve remind offer include mention avoid keep send open close").split()


def sentence(rng, lo=8, hi=15):
    words = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    return words[0].capitalize() + " " + " ".join(words[1:]) + "."


def text_of(seed, n_sentences):
    rng = random.Random(seed)
    return " ".join(sentence(rng) for _ in range(n_sentences))


def question(client, n):
    rng = random.Random(f"q{client}.{n}")
    return f"Question {client}.{n}: " + sentence(rng, 5, 9)[:-1] + "?"


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100) of a list; None for an empty list."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s)) - 1))]


def cached_tokens_of(final):
    """Cached prompt tokens from a final chunk's usage (OpenAI) or timings (llama-server)."""
    usage = final.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    if isinstance(details.get("cached_tokens"), int):
        return details["cached_tokens"]
    timings = final.get("timings") or {}
    if isinstance(timings.get("cache_n"), int):
        return timings["cache_n"]
    return None


def parse_stream(lines, t0, clock):
    """Reads SSE lines (bytes or str) of a streamed completion. Returns a dict: ttft (seconds
    from t0 to the first non-empty content, by clock()), text, chunks (content chunks),
    completion_tokens, prompt_tokens, cached_tokens (None when unknown), done (saw [DONE]),
    error (None or a message)."""
    out = {"ttft": None, "text": "", "chunks": 0, "completion_tokens": None, "prompt_tokens": None,
           "cached_tokens": None, "done": False, "error": None}
    parts = []
    for raw in lines:
        line = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        line = line.strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            out["done"] = True
            break
        try:
            chunk = json.loads(data)
        except ValueError:
            out["error"] = f"bad chunk: {data[:120]}"
            break
        if "error" in chunk:
            out["error"] = str(chunk["error"])[:200]
            break
        for ch in chunk.get("choices") or []:
            piece = (ch.get("delta") or {}).get("content") or ch.get("text") or ""
            if piece:
                if out["ttft"] is None:
                    out["ttft"] = clock() - t0
                out["chunks"] += 1
                parts.append(piece)
        if chunk.get("usage") or chunk.get("timings"):
            usage = chunk.get("usage") or {}
            if isinstance(usage.get("completion_tokens"), int):
                out["completion_tokens"] = usage["completion_tokens"]
            if isinstance(usage.get("prompt_tokens"), int):
                out["prompt_tokens"] = usage["prompt_tokens"]
            timings = chunk.get("timings") or {}
            if out["prompt_tokens"] is None and isinstance(timings.get("prompt_n"), int):
                out["prompt_tokens"] = timings["prompt_n"] + (timings.get("cache_n") or 0)
            c = cached_tokens_of(chunk)
            if c is not None:
                out["cached_tokens"] = c
    out["text"] = "".join(parts)
    if out["completion_tokens"] is None:
        out["completion_tokens"] = out["chunks"]
    if not out["done"] and out["error"] is None:
        out["error"] = "stream ended without [DONE]"
    return out


def chat_request(base, messages, max_tokens, timeout):
    u = urllib.parse.urlparse(base)
    body = json.dumps({"messages": messages, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True},
                       "ignore_eos": True})
    t0 = time.monotonic()
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return {"error": f"HTTP {r.status}: {r.read()[:200]!r}"}
        res = parse_stream(r, t0, time.monotonic)
    finally:
        c.close()
    res["total"] = time.monotonic() - t0
    return res


def classify(rec, fraction):
    """'cached', 'uncached' or 'unclassified' for one request record."""
    c, p = rec.get("cached_tokens"), rec.get("prompt_tokens")
    if c is None or not p:
        return "unclassified"
    return "cached" if c >= fraction * p else "uncached"


def ttft_stats(records):
    ms = [1e3 * r["ttft"] for r in records if r.get("ttft") is not None]
    return {"n": len(ms), "p50": _round(percentile(ms, 50)), "p99": _round(percentile(ms, 99))}


def _round(x):
    return None if x is None else round(x, 1)


def summarize(records, errors, wall, fraction):
    """The JSON summary of one workload run (records: the successful requests)."""
    groups = {"cached": [], "uncached": [], "unclassified": []}
    for r in records:
        groups[classify(r, fraction)].append(r)
    tokens = sum(r["completion_tokens"] for r in records)
    prompt = sum(r.get("prompt_tokens") or 0 for r in records)
    cached = sum(r.get("cached_tokens") or 0 for r in records)
    res = {"requests": len(records), "errors": len(errors), "first_errors": errors[:3],
           "seconds": round(wall, 1), "tokens": tokens,
           "tokens_per_s": round(tokens / wall, 2) if wall > 0 else None,
           "prompt_tokens_mean": round(prompt / len(records), 1) if records else None,
           "cached_share": round(cached / prompt, 3) if prompt else None,
           "cached_fraction": fraction,
           "ttft_ms": {"all": ttft_stats(records)}}
    for k, g in groups.items():
        res["ttft_ms"][k] = ttft_stats(g)
    turns = sorted({r["turn"] for r in records if "turn" in r})
    if turns:
        res["ttft_ms_by_turn"] = {str(t): ttft_stats([r for r in records if r.get("turn") == t])
                                  for t in turns}
    return res


def run_clients(n, target):
    records, errors, lock = [], [], threading.Lock()

    def note(rec=None, err=None):
        with lock:
            if err is not None:
                errors.append(err)
            else:
                records.append(rec)

    t0 = time.monotonic()
    threads = [threading.Thread(target=target, args=(i, note)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records, errors, time.monotonic() - t0


def one(base, messages, a, note, **tags):
    """Sends one request, notes its record or error; returns the record (None on error)."""
    try:
        res = chat_request(base, messages, a.max_tokens, a.timeout)
    except Exception as e:  # noqa: BLE001 - every failure is a reported error
        note(err=repr(e)[:200])
        return None
    if res.get("error"):
        note(err=res["error"])
        return None
    rec = {k: res[k] for k in ("ttft", "total", "completion_tokens", "prompt_tokens",
                               "cached_tokens")}
    rec.update(tags)
    note(rec)
    rec["text"] = res["text"]
    return rec


def load_prompt(path):
    with open(path) as f:
        return json.load(f)


def cmd_make_prompt(a):
    def count(text):
        u = urllib.parse.urlparse(a.base)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        c.request("POST", "/tokenize", json.dumps({"content": text}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        c.close()
        if r.status != 200:
            raise RuntimeError(f"/tokenize: HTTP {r.status}")
        return len(json.loads(body)["tokens"])

    head = "You are the support assistant of Example Corp. Follow these rules in every answer. "
    texts = lambda k: head + text_of("system", k)  # noqa: E731
    try:
        lo, hi = 1, 1
        while count(texts(hi)) < a.tokens:
            lo, hi = hi, hi * 2
        while lo < hi:  # smallest sentence count reaching the target
            mid = (lo + hi) // 2
            if count(texts(mid)) >= a.tokens:
                hi = mid
            else:
                lo = mid + 1
        system = texts(hi)
        n, how = count(system), "tokenize"
    except (OSError, RuntimeError, ValueError, KeyError) as e:
        print(f"[prefixload] /tokenize unavailable ({e!r}); estimating 1.3 tokens per word",
              file=sys.stderr)
        k = 1
        while len(texts(k).split()) * 1.3 < a.tokens:
            k += 1
        system = texts(k)
        n, how = round(len(system.split()) * 1.3), "estimate"
    out = {"system": system, "tokens": n, "tokens_per_word": round(n / len(system.split()), 3),
           "counted_by": how}
    s = json.dumps(out)
    if a.out:
        with open(a.out, "w") as f:
            f.write(s)
    else:
        print(s)


def cmd_shared(a):
    system = load_prompt(a.prompt_file)["system"]
    deadline = time.monotonic() + a.seconds

    def client(i, note):
        n = 0
        while (a.requests <= 0 or n < a.requests) and (a.requests > 0 or
                                                        time.monotonic() < deadline):
            msgs = [{"role": "system", "content": system},
                    {"role": "user", "content": question(i, n)}]
            one(a.base, msgs, a, note, client=i)
            n += 1

    records, errors, wall = run_clients(a.clients, client)
    res = {"workload": "shared", "clients": a.clients, "max_tokens": a.max_tokens}
    res.update(summarize(records, errors, wall, a.cached_fraction))
    return res


def cmd_chat(a):
    tpw = load_prompt(a.prompt_file).get("tokens_per_word", 1.3)
    deadline = time.monotonic() + a.seconds if a.seconds > 0 else None

    def client(i, note):
        rng = random.Random(f"open{i}")
        words, parts = 0, [f"Conversation {i}. Here is my situation."]
        while words * tpw < a.open_tokens:
            parts.append(sentence(rng))
            words += len(parts[-1].split())
        msgs = [{"role": "user", "content": " ".join(parts) + "\n\n" + question(i, 0)}]
        for t in range(1, a.turns + 1):
            if deadline is not None and time.monotonic() >= deadline:
                return
            rec = one(a.base, msgs, a, note, client=i, turn=t)
            if rec is None:
                return  # a conversation does not go on past a failed turn
            msgs = msgs + [{"role": "assistant", "content": rec["text"]},
                           {"role": "user", "content": question(i, t)}]

    records, errors, wall = run_clients(a.clients, client)
    res = {"workload": "chat", "clients": a.clients, "turns": a.turns, "max_tokens": a.max_tokens}
    res.update(summarize(records, errors, wall, a.cached_fraction))
    return res


def cmd_probe(a):
    system = load_prompt(a.prompt_file)["system"]
    steps = [[] for _ in range(a.requests_per_prefix)]
    errors = []

    def note(rec=None, err=None):
        if err is not None:
            errors.append(err)

    for i in range(a.prefixes):
        prefixed = f"[probe {a.tag} {i}] " + system
        for s in range(a.requests_per_prefix):
            msgs = [{"role": "system", "content": prefixed},
                    {"role": "user", "content": question(1000 + i, s)}]
            rec = one(a.base, msgs, a, note)
            if rec is not None:
                steps[s].append(rec)
    out = {"workload": "probe", "tag": a.tag, "prefixes": a.prefixes, "errors": len(errors),
           "first_errors": errors[:3], "steps": []}
    for recs in steps:
        ms = [1e3 * r["ttft"] for r in recs if r["ttft"] is not None]
        out["steps"].append({"n": len(ms), "ttft_ms_p50": _round(percentile(ms, 50)),
                             "ttft_ms": [_round(x) for x in ms],
                             "cached_tokens": [r["cached_tokens"] for r in recs],
                             "prompt_tokens": [r["prompt_tokens"] for r in recs]})
    return out


# ---- report: markdown tables of a bench-prefix.sh result folder ----------------------------
# The folder holds facts.json ({"modes": [[key, label], ...], ...}) and, per mode key,
# <key>.shared.json, <key>.chat.json, <key>.probe.json, <key>.metrics.txt (node 0's /metrics
# lines of the cache; any may be missing: not run or failed).
# Probe steps: modes off/local/llama: step 1 uncached, step 2 cached. Mode redis: its probe ran
# on the second cluster after the first ran step 1 of the same tag, so step 1 is "from Redis".


def _load(d, name):
    try:
        with open(os.path.join(d, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _fmt(x, unit=""):
    return "-" if x is None else f"{x:g}{unit}"


def _ratio(a, b):
    return None if a is None or not b else round(a / b, 3)


def report(d):
    facts = _load(d, "facts.json") or {}
    modes = facts.get("modes") or []
    lines = []
    for wl, title in (("shared", "Shared prefix"), ("chat", "Multi-turn chat")):
        lines += [f"#### {title}", "",
                  "| server / mode | requests | errors | gen tok/s | cached share | TTFT p50 ms | "
                  "TTFT p99 ms | cached: n | cached p50 / p99 ms | uncached: n | "
                  "uncached p50 / p99 ms |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for key, label in modes:
            r = _load(d, f"{key}.{wl}.json")
            if r is None:
                lines.append(f"| {label} | not run | | | | | | | | | |")
                continue
            t = r["ttft_ms"]
            lines.append(
                f"| {label} | {r['requests']} | {r['errors']} | {_fmt(r['tokens_per_s'])} | "
                f"{_fmt(r['cached_share'])} | {_fmt(t['all']['p50'])} | {_fmt(t['all']['p99'])} | "
                f"{t['cached']['n']} | {_fmt(t['cached']['p50'])} / {_fmt(t['cached']['p99'])} | "
                f"{t['uncached']['n']} | {_fmt(t['uncached']['p50'])} / "
                f"{_fmt(t['uncached']['p99'])} |")
        lines.append("")
    lines += ["#### Probe: one request at a time, no load", "",
              "| server / mode | TTFT prefix not cached ms | TTFT prefix cached ms | ratio | "
              "cached tokens (cached step) |", "|---|---|---|---|---|"]
    probe = {}
    for key, label in modes:
        p = _load(d, f"{key}.probe.json")
        if p is None or not p["steps"]:
            lines.append(f"| {label} | not run | | | |")
            continue
        if len(p["steps"]) < 2:  # the Redis tier's first cluster: the uncached step only
            lines.append(f"| {label} | {_fmt(p['steps'][0]['ttft_ms_p50'])} | - | - | - |")
            continue
        if key == "redis":
            cold = (_load(d, "redis-a.probe.json") or {"steps": [{}]})["steps"][0].get(
                "ttft_ms_p50")
            warm = p["steps"][0]["ttft_ms_p50"]
            cached = p["steps"][0]["cached_tokens"]
            label += " (first request on the second cluster)"
        else:
            cold, warm = p["steps"][0]["ttft_ms_p50"], p["steps"][1]["ttft_ms_p50"]
            cached = p["steps"][1]["cached_tokens"]
        probe[key] = (cold, warm)
        lines.append(f"| {label} | {_fmt(cold)} | {_fmt(warm)} | {_fmt(_ratio(warm, cold), 'x')} "
                     f"| {cached} |")
    lines.append("")

    def get(key, wl):
        return _load(d, f"{key}.{wl}.json")

    goal = []
    for key in ("local", "redis"):
        if key in probe:
            c, w = probe[key]
            goal.append(f"- TTFT p50 cached / not cached, no load ({key}): "
                        f"{_fmt(_ratio(w, c), 'x')} (goal <= 0.2x)")
        r, off = get(key, "shared"), get("off", "shared")
        if r and off:
            goal.append(f"- TTFT p50 of cached requests ({key}) / TTFT p50 with caching off, "
                        f"shared prefix under load: "
                        f"{_fmt(_ratio(r['ttft_ms']['cached']['p50'], off['ttft_ms']['all']['p50']), 'x')}"
                        f" (goal <= 0.2x)")
        ll = get("llama", "shared")
        if r and ll:
            goal.append(f"- generated tokens/s, shared prefix, tpnode {key} / llama-server: "
                        f"{_fmt(_ratio(r['tokens_per_s'], ll['tokens_per_s']), 'x')} (goal >= 1.0x)")
    lines += ["#### Ratios", ""] + (goal or ["- (not enough modes ran for the ratios)"]) + [""]
    counters = []
    for key, label in modes:
        try:
            with open(os.path.join(d, f"{key}.metrics.txt")) as f:
                kept = [" ".join(l.split()[:2]) for l in f
                        if ("prefix_cache" in l or "redis" in l) and not l.startswith("#")]
        except OSError:
            continue
        if kept:
            counters.append(f"- {label}: " + ", ".join(f"`{k}`" for k in kept))
    if counters:
        lines += ["#### Cache counters (/metrics of node 0 after the run)", ""] + counters + [""]
    notes = facts.get("notes") or []
    if notes:
        lines += ["#### Notes", ""] + [f"- {n}" for n in notes] + [""]
    fact_keys = ("date", "cpu", "cores", "load_before", "commit", "command", "model", "layout",
                 "llama_cpp", "llama_server_flags")
    lines += ["#### Machine and run", ""]
    lines += [f"- {k}: {facts[k]}" for k in fact_keys if facts.get(k) not in (None, "")]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mp = sub.add_parser("make-prompt")
    mp.add_argument("--base", required=True)
    mp.add_argument("--tokens", type=int, default=1000)
    mp.add_argument("--out")
    for name in ("shared", "chat", "probe"):
        p = sub.add_parser(name)
        p.add_argument("--base", required=True)
        p.add_argument("--prompt-file", required=True)
        p.add_argument("--max-tokens", type=int, default=16)
        p.add_argument("--timeout", type=float, default=900)
        p.add_argument("--cached-fraction", type=float, default=0.5)
        if name != "probe":
            p.add_argument("--clients", type=int, default=32)
        if name == "shared":
            p.add_argument("--seconds", type=float, default=60)
            p.add_argument("--requests", type=int, default=0)
        if name == "chat":
            p.add_argument("--turns", type=int, default=4)
            p.add_argument("--open-tokens", type=int, default=200)
            p.add_argument("--seconds", type=float, default=0)
        if name == "probe":
            p.add_argument("--tag", required=True)
            p.add_argument("--prefixes", type=int, default=3)
            p.add_argument("--requests-per-prefix", type=int, default=2)
    rp = sub.add_parser("report")
    rp.add_argument("--dir", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "make-prompt":
        cmd_make_prompt(a)
        return 0
    if a.cmd == "report":
        print(report(a.dir))
        return 0
    res = {"shared": cmd_shared, "chat": cmd_chat, "probe": cmd_probe}[a.cmd](a)
    res["base"] = a.base
    print(json.dumps(res))
    return 1 if res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
