"""What the real-model summaries share: reading optimize's JSON outputs and
writing one paired comparison from an eval directory's comparisons.json."""

import json
from pathlib import Path


def load(path: Path):
    return json.loads(path.read_text())


def paired(evaldir: Path, cand: str, metric: str = "success") -> str:
    """cand's paired difference on metric against the eval's reference, with
    its 95% interval; on success also wins/losses and the exact McNemar p."""
    for c in load(evaldir / "comparisons.json"):
        if c["candidate"] == cand:
            d = c["metrics"][metric]["diff"]
            extra = f" (W/L {c['wins']}/{c['losses']}, p {c['mcnemar_success']['p']:.3g})" if metric == "success" else ""
            return f"{d['point']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]{extra}"
    return "–"
