"""Serve a GGUF model on loopback with llama.cpp (xllamacpp).

Two llama.cpp servers in this one process: chat completions (with tool
calls, parsed by llama.cpp from the chat template the GGUF carries) on
--port, and embeddings (mean pooling) on --port + 1 (unless --no-embed).
They are separate because a context in embedding mode computes the logits
of every prompt token over the whole vocabulary (Qwen2.5: 152k), which
makes chat several times slower.

Runs until SIGTERM or SIGINT. Prints one JSON line with the URLs and
versions once both listen.
"""

import argparse
import json
import os
import signal
import sys
import threading

import xllamacpp


def params(model: str, port: int, threads: int, ctx: int, parallel: int, embed: bool) -> "xllamacpp.CommonParams":
    p = xllamacpp.CommonParams()
    p.model.path = model
    p.hostnames = ["127.0.0.1"]
    p.port = port
    p.n_ctx = ctx
    p.n_parallel = 1 if embed else parallel
    # One KV buffer of n_ctx shared by the slots: any one request may use it
    # all. Requests in flight together are decoded in one batch, which on a
    # CPU costs little more than one (each token reads every weight once).
    # A slot keeps its prompt, and llama.cpp routes a request to the slot
    # whose prompt it extends, so an agent's next turn reuses its prefix.
    p.kv_unified = True
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.warmup = False
    if embed:
        p.embedding = True
        p.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
        p.n_batch = p.n_ubatch = 2048
    else:
        # The model's own chat template (Qwen2.5's renders tools and tool
        # calls), from which llama.cpp derives its tool-call parser.
        p.use_jinja = True
    return p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, default=18080)
    ap.add_argument("--threads", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    ap.add_argument("--ctx", type=int, default=8192)
    ap.add_argument("--parallel", type=int, default=2, help="chat requests decoded together (the jobs send at most 2)")
    ap.add_argument("--no-embed", action="store_true", help="chat only: no embeddings server on --port + 1")
    a = ap.parse_args()

    chat = xllamacpp.Server(params(a.model, a.port, a.threads, a.ctx, a.parallel, False))
    embed = None if a.no_embed else xllamacpp.Server(params(a.model, a.port + 1, a.threads, a.ctx, 1, True))
    print(json.dumps({
        "model": os.path.basename(a.model),
        "chat": chat.listening_address + "/v1",
        "embeddings": embed.listening_address + "/v1" if embed else None,
        "xllamacpp": xllamacpp.__version__,
        "llama_cpp_build": xllamacpp.BUILD_INFO,
    }), flush=True)

    stop = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.set())
    stop.wait()
    del chat, embed
    return 0


if __name__ == "__main__":
    sys.exit(main())
