#!/usr/bin/env python3
"""Records llama.cpp's outputs on a GGUF model as a small JSON reference for tpnode's tests.

For each prompt: llama.cpp's prompt token ids, 32 greedy tokens (argmax, lowest id wins ties,
EOS does not stop), their text, llama.cpp's top-1/top-2 logit gap at each greedy step, and the
top 40 logits of the last prompt position. Written to
tests/data/gemma3/reference.json by default (kB, not the 262k-wide logit rows).

Route: llama-cpp-python 0.3.36 from PyPI, whose bindings load a prebuilt libllama through
LLAMA_CPP_LIB_PATH instead of compiling one:
    V=$(mktemp -d) && python3 -m venv "$V"
    "$V/bin/pip" install numpy scikit-build-core cmake ninja
    CMAKE_ARGS="-DLLAMA_BUILD=OFF" "$V/bin/pip" install --no-build-isolation \\
        llama-cpp-python==0.3.36
    LLAMA_CPP_LIB_PATH=<bin folder of a llama.cpp build> "$V/bin/python" \\
        tools/record-gemma3-reference.py --model "$(tools/fetch-model.sh)"
The committed tests/data/gemma3/reference.json was recorded on a CPU build (cmake
-DGGML_NATIVE=ON, Release) of the llama.cpp sources vendored in that same package
(llama_cpp_python-0.3.36/vendor/llama.cpp); a plain `pip install llama-cpp-python==0.3.36`
(which compiles the same sources) works too. The bindings of 0.3.36 match those sources' libllama,
not necessarily the newer one of tools/llama-cpp.sh (which records tests/data/reference,
tools/record-reference.sh).

Settings, fixed so reruns are identical: n_ctx 2048, the whole prompt in one batch
(n_batch = n_ubatch = 2048), F32 K/V cache, no flash attention, full-size SWA cache,
2 threads, CPU only.
"""
import argparse
import hashlib
import json
import os
import sys

try:
    import numpy as np
    import llama_cpp
except ImportError as e:  # scripts skip with 77 when a package is missing (tools/venv-python.sh)
    print(f"record-gemma3-reference: {e}; see the header of this script", file=sys.stderr)
    sys.exit(77)

# (name, text, parse_special). chat_france is the gemma template rendered for
# "What is the capital of France?" (tpnode's renderChat(kGemma) gives these exact bytes); the
# gemma-3-270m file has no tokenizer.chat_template and is the pretrained (not instruction-tuned)
# model, so it answers the plain question form (qa_france) with Paris and the chat form with
# noise -- in llama.cpp as in tpnode. `long_window` exceeds gemma3's sliding window
# of 512 positions, so its local layers must drop the oldest positions.
_STORY = ("The old lighthouse keeper climbed the spiral stairs every evening, counting the steps "
          "as his father had taught him. At the top he trimmed the wick, polished the great lens "
          "and watched the ships slide past the reef. ")
PROMPTS = [
    ("capital", "The capital of France is", False),
    ("story", "Once upon a time, in a small village by the sea,", False),
    ("code", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n", False),
    ("multilingual", "Translate to German: The weather is nice today.\nGerman:", False),
    ("facts", "List three facts about the Moon:\n1.", False),
    ("qa_france", "Question: What is the capital of France?\nAnswer:", False),
    ("chat_france",
     "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n",
     True),
    ("long_window", _STORY * 14 + "\nQuestion: what did the keeper count?\nAnswer:", False),
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def last_logits(llm):
    # Llama.eval keeps no scores unless logits_all; read the batch's last output row.
    p = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(p, shape=(llm.n_vocab(),)).astype(np.float32).copy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                  "data", "gemma3", "reference.json"))
    ap.add_argument("--n-gen", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()

    llm = llama_cpp.Llama(model_path=a.model, n_ctx=2048, n_batch=2048, n_ubatch=2048,
                          n_threads=a.threads, n_threads_batch=a.threads, n_gpu_layers=0,
                          type_k=0, type_v=0, flash_attn=False, swa_full=True, logits_all=False,
                          verbose=False)
    cases = []
    for name, text, special in PROMPTS:
        llm.reset()
        ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=special)
        llm.eval(ids)
        last = last_logits(llm)
        top = np.argsort(-last, kind="stable")[: a.top]
        gen, gaps = [], []
        row = last
        for _ in range(a.n_gen):
            tok = int(np.argmax(row))  # first maximum: lowest id wins ties
            gen.append(tok)
            two = np.partition(row, -2)[-2:]
            gaps.append(round(float(abs(two[1] - two[0])), 4))
            llm.eval([tok])
            row = last_logits(llm)
        text_out = llm.detokenize(gen).decode("utf-8", errors="replace")
        srt = np.sort(last)
        cases.append({
            "name": name,
            "prompt": text,
            "parse_special": special,
            "prompt_ids": [int(t) for t in ids],
            "generated_ids": gen,
            "generated_text": text_out,
            "generated_top1_gaps": gaps,
            "last_prompt_top_ids": [int(t) for t in top],
            "last_prompt_top_logits": [round(float(last[t]), 5) for t in top],
            "last_prompt_top1_gap": round(float(srt[-1] - srt[-2]), 5),
        })
        print(f"[record] {name}: {len(ids)} prompt tokens -> {text_out!r}", file=sys.stderr)
    out = {
        "model": os.path.basename(a.model),
        "model_sha256": sha256(a.model),
        "llama_cpp": f"llama-cpp-python {llama_cpp.__version__} (vendored llama.cpp), CPU",
        "settings": {"n_ctx": 2048, "n_batch": 2048, "threads": a.threads, "kv_type": "f32",
                     "flash_attn": False, "swa_full": True, "add_bos": True,
                     "greedy": "argmax, lowest id on ties, EOS does not stop"},
        "n_gen": a.n_gen,
        "cases": cases,
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"[record] wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
