"""Read a dataset written by `optimize distill` with the tools users train
with: pyarrow (both Parquet files, their rows against the JSONL files' rows,
value for value, the prompt column as a list of message structs) and Hugging
Face datasets: every config of the card, with its splits and the JSONL's row
counts; the `messages` config's column as a list of one struct type
{role, content, weight}, not a Json column; and the card's own
`load_dataset` snippet, taken from README.md and run as written. An empty
split (validation with --validation-fraction 0) has its files, which the
card's configs and snippet must leave out (datasets refuses a file without
rows). --empty SPLIT asserts that SPLIT has no rows (make real's export).
Prints one JSON line; exits 1 on the first mismatch."""

import argparse
import json
import os
import re
import tempfile
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

SPLITS = ("train", "validation")
MESSAGE_FIELDS = {"role", "content", "weight"}


def card(root: Path) -> tuple[dict, str]:
    text = (root / "README.md").read_text()
    if not text.startswith("---\n"):
        raise SystemExit(f"{root}/README.md: no YAML front matter")
    _, front, body = text.split("---\n", 2)
    return yaml.safe_load(front), body


def check_parquet(root: Path) -> dict:
    out = {}
    for split in SPLITS:
        table = pq.read_table(root / "data" / f"{split}.parquet")
        with open(root / f"{split}.jsonl") as f:
            jsonl_rows = [json.loads(line) for line in f if line.strip()]
        if table.num_rows != len(jsonl_rows):
            raise SystemExit(f"{split}: parquet has {table.num_rows} rows, {split}.jsonl {len(jsonl_rows)}")
        for i, (got, want) in enumerate(zip(table.to_pylist(), jsonl_rows)):
            if got != want:
                raise SystemExit(f"{split}: parquet row {i + 1} differs from {split}.jsonl's: {str(got)[:300]}")
        prompt = table.schema.field("prompt").type
        if not (pa.types.is_list(prompt) or pa.types.is_large_list(prompt)) or not pa.types.is_struct(prompt.value_type):
            raise SystemExit(f"{split}: prompt column is {prompt}, want a list of structs")
        names = {prompt.value_type.field(i).name for i in range(prompt.value_type.num_fields)}
        if not {"role", "content"} <= names:
            raise SystemExit(f"{split}: prompt structs have fields {sorted(names)}, want role and content")
        out[split] = {"rows": table.num_rows, "prompt": str(prompt)}
    return out


def check_split_rows(what: str, ds: datasets.DatasetDict, rows: dict) -> dict:
    """The splits ds holds are the non-empty ones, each with its JSONL's rows."""
    want = {split for split in SPLITS if rows[split]["rows"] > 0}
    if set(ds.keys()) != want:
        raise SystemExit(f"{what}: splits {sorted(ds.keys())}, want the non-empty ones {sorted(want)}")
    got = {split: ds[split].num_rows for split in sorted(ds.keys())}
    for split, n in got.items():
        if n != rows[split]["rows"]:
            raise SystemExit(f"{what} split {split}: read {n} rows, {split}.jsonl has {rows[split]['rows']}")
    return got


def messages_type(ds: datasets.DatasetDict) -> str:
    """The messages column of every split: a list of one struct type with
    the fields {role, content, weight} (weight null where not trained on);
    datasets makes it a Json column when the messages' fields differ."""
    types = set()
    for split, d in ds.items():
        feature = d.features["messages"]
        inner = getattr(feature, "feature", None)
        if not isinstance(feature, datasets.List) or not isinstance(inner, dict) or set(inner) != MESSAGE_FIELDS:
            raise SystemExit(f"config messages split {split}: messages is {feature}, want a list of structs {sorted(MESSAGE_FIELDS)}")
        for name, value in inner.items():
            if not isinstance(value, datasets.Value):
                raise SystemExit(f"config messages split {split}: messages field {name} is {value}, want a plain value")
        arrow = d.data.schema.field("messages").type
        if not pa.types.is_list(arrow) or not pa.types.is_struct(arrow.value_type):
            raise SystemExit(f"config messages split {split}: arrow type {arrow}, want list<struct>")
        types.add(str(arrow))
    if len(types) != 1:
        raise SystemExit(f"config messages: the splits' messages types differ: {sorted(types)}")
    return types.pop()


def check_configs(root: Path, front: dict, rows: dict) -> tuple[dict, str]:
    """Loads every config of the card: its splits' rows, and the messages
    config's column type."""
    out, messages = {}, None
    for cfg in front["configs"]:
        name = cfg["config_name"]
        ds = datasets.load_dataset(str(root), name)
        named = {f["split"] for f in cfg["data_files"]}
        if set(ds.keys()) != named:
            raise SystemExit(f"config {name}: splits {sorted(ds.keys())}, the card names {sorted(named)}")
        out[name] = check_split_rows(f"config {name}", ds, rows)
        if name == "messages":
            messages = messages_type(ds)
    if messages is None:
        raise SystemExit(f"{root}/README.md: no messages config")
    return out, messages


def check_snippet(root: Path, body: str, rows: dict) -> dict:
    """Runs the card's Python block that calls load_dataset, as written,
    from the dataset's directory (its paths are relative to it)."""
    blocks = [b for b in re.findall(r"```python\n(.*?)```", body, re.S) if "load_dataset(" in b]
    if len(blocks) != 1:
        raise SystemExit(f"{root}/README.md: {len(blocks)} python blocks call load_dataset, want 1")
    scope: dict = {}
    here = os.getcwd()
    os.chdir(root)
    try:
        exec(compile(blocks[0], f"{root}/README.md snippet", "exec"), scope)
    except Exception as e:
        raise SystemExit(f"{root}/README.md: the card's load_dataset snippet failed: {type(e).__name__}: {e}") from e
    finally:
        os.chdir(here)
    loaded = [v for v in scope.values() if isinstance(v, datasets.DatasetDict)]
    if len(loaded) != 1:
        raise SystemExit(f"{root}/README.md: the snippet made {len(loaded)} DatasetDicts, want 1")
    return {"code": blocks[0].strip(), "rows": check_split_rows("the card's snippet", loaded[0], rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset", type=Path, help="directory written by optimize distill")
    parser.add_argument("--empty", action="append", default=[], choices=SPLITS, help="a split that must have no rows")
    args = parser.parse_args()
    root = args.dataset.resolve()
    front, body = card(root)
    parquet = check_parquet(root)
    for split in args.empty:
        if parquet[split]["rows"]:
            raise SystemExit(f"{split}: {parquet[split]['rows']} rows, want none")
    # A fresh cache: offline, datasets otherwise answers from an earlier
    # dataset cached under the same directory name (it did, with old rows).
    # Set here rather than passed, so the card's snippet runs as written.
    with tempfile.TemporaryDirectory() as cache:
        datasets.config.HF_DATASETS_CACHE = Path(cache)
        configs, messages = check_configs(root, front, parquet)
        result = {
            "pyarrow": pa.__version__,
            "datasets": datasets.__version__,
            "parquet": parquet,
            "load_dataset": configs,
            "messages_column": messages,
            "snippet": check_snippet(root, body, parquet),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
