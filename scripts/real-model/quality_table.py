"""Print the results of make real-quality (quality.sh's OUT) as Markdown:
per setting, each candidate's success, peak tokens and compressor tokens,
and its paired difference in success against none and against prompting
(95% bootstrap interval, exact McNemar p), then the steps' times, and what
the real analyzer and optimizer did in optimize run: each step's feedback,
candidates and choice, and the selected guideline's text."""

import json
import os
import sys
from pathlib import Path

from evaltables import load, paired

SETTINGS = {"mixed": "mixed (embedded agent, real compressor)", "all": "all-real (every role on the real model)"}


def table(out: Path, setting: str) -> dict[str, float]:
    ev = out / f"{setting}-eval"
    s = load(ev / "summary.json")
    print(f"\n### {SETTINGS[setting]}: {len(s['tasks'])} test tasks\n")
    print("| candidate | success | peak tokens | compressor tokens | Δ success vs none [95%] | Δ success vs prompting [95%] |")
    print("|---|---|---|---|---|---|")
    rates = {}
    for arm in s["candidates"]:
        name, m = arm["name"], arm["metrics"]
        rates[name] = m["success"]["point"]
        print(f"| {name} | {m['success']['point']:.2f} | {m['peak_tokens']['point']:,.0f} | {m['compressor_tokens']['point']:,.0f} "
              f"| {paired(ev, name)} | {paired(out / f'{setting}-eval-vs-prompting', name)} |")
    return rates


def verdict(out: Path, setting: str, rates: dict[str, float]) -> None:
    """One line per guideline: its success against prompting's, the paired
    difference with its interval, and the plain answer (a lower point
    estimate whose interval holds 0 is reported as lower, not as a tie)."""
    for cand in ("keep-facts", "selected"):
        c = next((c for c in load(out / f"{setting}-eval-vs-prompting" / "comparisons.json") if c["candidate"] == cand), None)
        if c is None:
            continue
        d = c["metrics"]["success"]["diff"]
        if d["low"] > 0:
            word = "beats prompting (the 95% interval of the difference is above 0)"
        elif d["high"] < 0:
            word = "loses to prompting (the 95% interval of the difference is below 0)"
        else:
            side = "higher" if d["point"] > 0 else "lower" if d["point"] < 0 else "equal"
            word = f"does not beat prompting: its success is {side}, but the interval holds 0 (no difference shown)"
        print(f"- {SETTINGS[setting].split(' (')[0]}: {cand} {rates[cand]:.2f} against prompting {rates.get('prompting', float('nan')):.2f}, "
              f"Δ {paired(out / f'{setting}-eval-vs-prompting', cand)}: {word}.")


def optimization(run: Path, summary: dict) -> None:
    """Each UT/CO step's decision, the real analyzer's feedback it read and
    the guideline the run selected, as optimize run recorded them."""
    print("\n### What the real analyzer and optimizer did (mixed optimize run)\n")
    for rnd in summary.get("rounds") or []:
        for step in ("ut", "co"):
            d = rnd[step]
            cands = "; ".join(
                f"{c.get('id') or 'k' + str(c['k'])} "
                + (f"success {c['score']['success']:.2f}" if c.get("score") else "valid, not scored" if c["valid"] else f"rejected: {c.get('rejected', '')}")
                for c in d.get("candidates") or [])
            print(f"- round {rnd['round']} {step.upper()}: {d['feedback_ok']} feedback records used, {d['feedback_rejected']} rejected "
                  f"(feedback tasks {', '.join(d.get('feedback_tasks') or []) or 'none'}; selection tasks {', '.join(d.get('selection_tasks') or []) or 'none'}); "
                  f"parent {d['parent']} success {d['parent_score']['success']:.2f}; candidates: {cands or 'none'}; chosen {d['chosen']}: {d['reason']}")
    for fb in sorted(run.glob("stages/*/feedback.jsonl")):
        for line in fb.read_text().splitlines():
            f = json.loads(line)
            print(f"\n{fb.parent.name}, task {f['task_id']}, {f['status']}{': ' + f['reason'] if f.get('reason') else ''}")
            for key in ("root_causes", "missing_facts", "recommendations", "rules"):
                for item in f.get(key) or []:
                    print(f"  - {key.replace('_', ' ')}: {item}")
    sel = summary.get("selected_guideline", "")
    tmpl = run / "guidelines" / f"{sel}.tmpl"
    if sel and tmpl.exists():
        same = " (the starting guideline: prompting)" if sel == summary.get("starting_guideline") else ""
        print(f"\nselected guideline {sel}{same}:\n")
        print("\n".join("    " + ln for ln in tmpl.read_text().splitlines()))


def main() -> None:
    out, seconds = Path(sys.argv[1]), int(sys.argv[2])
    run = load(out / "mixed-run" / "summary.json")
    print(f"## Results (make real-quality, {seconds // 60} min {seconds % 60} s wall, {os.cpu_count()} cores)")
    steps = [line.split("\t") for line in (out / "steps.tsv").read_text().splitlines()]
    print("\nsteps (seconds, 1-minute load average at the end): " + ", ".join(f"{n} {s} ({l})" for n, s, l in steps))
    roles = {r: v for r, v in run.get("roles", {}).items() if v.get("calls")}
    spent = run.get("spent", {})
    # spent is the run's ledger over every invocation; roles count the last
    # one only, which made no call when it resumed finished stages.
    print(f"\nmixed optimize run: {spent.get('requests', 0)} requests (the embedded agent's included), {spent.get('tokens', 0):,} tokens over every invocation; "
          "calls per role in the last: " + (", ".join(f"{r} {v['calls']} ({v.get('malformed', 0)} malformed)" for r, v in roles.items()) or "none (every stage resumed)"))
    optimization(out / "mixed-run", run)
    verdicts = {}
    for setting in SETTINGS:
        if (out / f"{setting}-eval" / "summary.json").exists():
            verdicts[setting] = table(out, setting)
    print("\n### Do the keep-facts and the selected guideline beat prompting on this model?\n")
    for setting, rates in verdicts.items():
        verdict(out, setting, rates)


if __name__ == "__main__":
    main()
