"""Print the results of make student (student.sh's OUT) as Markdown: the
training run, each compressor's success, exact match and tokens on the
same tasks, the paired differences against the teacher and against the
untrained base (95% bootstrap intervals, exact McNemar p), the share of
tasks where the student's outcome agrees with the teacher's, and which
link of optimize serve's chain answered."""

import ast
import json
import os
import re
import sys
from pathlib import Path

from evaltables import load, paired




def agreement(evaldir: Path, a: str, b: str) -> str:
    by: dict[str, dict[str, float]] = {}
    for line in (evaldir / "outcomes.jsonl").read_text().splitlines():
        o = json.loads(line)
        by.setdefault(o["candidate"], {})[f"{o['task']}/{o.get('sample', 0)}"] = o["success"]
    keys = sorted(set(by.get(a, {})) & set(by.get(b, {})))
    if not keys:
        return "–"
    same = sum(by[a][k] == by[b][k] for k in keys)
    return f"{same}/{len(keys)} tasks ({same / len(keys):.0%})"


def main() -> None:
    out, seconds = Path(sys.argv[1]), int(sys.argv[2])
    print(f"## make student ({seconds // 60} min {seconds % 60} s wall, {os.cpu_count()} cores)\n")
    steps = [line.split("\t") for line in (out / "steps.tsv").read_text().splitlines()]
    print("steps (seconds, 1-minute load average at the end): " + ", ".join(f"{n} {s} ({l})" for n, s, l in steps) + "\n")
    log = (out / "train.log").read_text()
    m = re.findall(r"\{'train_runtime'.*?\}", log)
    final = ast.literal_eval(m[-1]) if m else {}
    losses = [ast.literal_eval(x)["loss"] for x in re.findall(r"\{'loss'.*?\}", log)]
    rd = load(out / "readers.json")
    sizes = ", ".join(f"{k} {v['rows']} rows" for k, v in rd["parquet"].items())
    print(f"dataset: {sizes}")
    print(f"training: {final.get('train_runtime', '?')} s, train loss {final.get('train_loss', '?')}, logged losses {losses}\n")

    ev, vb = out / "eval", out / "eval-vs-base"
    s = load(ev / "summary.json")
    print(f"### compressors on the same {len(s['tasks'])} test tasks (embedded agent, selected guideline)\n")
    print("| compressor | success | EM | peak tokens | compressor tokens | Δ success vs teacher [95%] | Δ success vs base [95%] | Δ EM vs teacher [95%] |")
    print("|---|---|---|---|---|---|---|---|")
    rates = {}
    for arm in s["candidates"]:
        n, mt = arm["name"], arm["metrics"]
        rates[n] = mt["success"]["point"]
        print(f"| {n} | {mt['success']['point']:.2f} | {mt['em']['point']:.3f} | {mt['peak_tokens']['point']:,.0f} | "
              f"{mt['compressor_tokens']['point']:,.0f} | {paired(ev, n, 'success')} | {paired(vb, n, 'success')} | {paired(ev, n, 'em')} |")
    print(f"\nagreement with the teacher (same task outcome): student {agreement(ev, 'student', 'teacher')}, "
          f"untrained base {agreement(ev, 'base', 'teacher')}")
    if rates.get("teacher"):
        print(f"student keeps {rates['student'] / rates['teacher']:.0%} of the teacher's success (ACON reports over 95% for its students)")
    print("\n### optimize serve, chain student -> teacher -> truncation\n")
    for f in ("chain-up.json", "chain-down.json"):
        c = load(out / f)
        print(f"- {c['label']}: summary made by **{c['link']}**; headers {c['headers']}")


if __name__ == "__main__":
    main()
