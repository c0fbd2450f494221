"""Read a dataset written by `optimize distill` with the tools users train
with: pyarrow (both Parquet files, their rows against the JSONL files' rows,
value for value, the prompt column as a list of message structs) and Hugging Face datasets
(every config of the card, with its splits and the JSONL's row counts). Prints
one JSON line; exits 1
on the first mismatch."""

import json
import sys
import tempfile
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import yaml


def card_configs(root: Path) -> list[dict]:
    text = (root / "README.md").read_text()
    if not text.startswith("---\n"):
        raise SystemExit(f"{root}/README.md: no YAML front matter")
    front = yaml.safe_load(text.split("---\n", 2)[1])
    return front["configs"]


def check_parquet(root: Path) -> dict:
    out = {}
    for split in ("train", "validation"):
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


def check_datasets(root: Path, rows: dict) -> dict:
    out = {}
    # A fresh cache: offline, datasets otherwise answers from an earlier
    # dataset cached under the same directory name (it did, with old rows).
    with tempfile.TemporaryDirectory() as cache:
        for cfg in card_configs(root):
            name = cfg["config_name"]
            ds = datasets.load_dataset(str(root), name, cache_dir=cache)
            want = {f["split"] for f in cfg["data_files"]}
            if set(ds.keys()) != want:
                raise SystemExit(f"config {name}: splits {sorted(ds.keys())}, the card names {sorted(want)}")
            out[name] = {split: ds[split].num_rows for split in sorted(ds.keys())}
            for split, n in out[name].items():
                if n != rows[split]["rows"]:
                    raise SystemExit(f"config {name} split {split}: load_dataset read {n} rows, {split}.jsonl has {rows[split]['rows']}")
    return out


def main() -> None:
    root = Path(sys.argv[1])
    parquet = check_parquet(root)
    result = {
        "pyarrow": pa.__version__,
        "datasets": datasets.__version__,
        "parquet": parquet,
        "load_dataset": check_datasets(root, parquet),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
