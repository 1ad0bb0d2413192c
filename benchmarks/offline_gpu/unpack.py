"""On the GPU machine: rebuild what pack.py sent (see README.md beside this file).

    python benchmarks/offline_gpu/unpack.py /tmp/gpu   # -> /tmp/gpu/minilm (fp32), /tmp/gpu/ftus, /tmp/gpu/commit,
                                                       #    /tmp/gpu/mpnet (random weights) when packed

Needs only torch, safetensors and (for MPNet) transformers: it runs before the wheels matter.
"""
from __future__ import annotations

import json
import shutil
import sys
import tarfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

PAYLOAD = Path(".gpu")
PACK_FORMAT = "unifar-gpu-pack/2"
GROUP = 32  # columns per fp16 scale of an int8 matrix


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """fp32 matrix from int8 values ``[r, c]`` and fp16 scales ``[r, c / group]``."""
    rows, cols = q.shape
    group = cols // scale.shape[1]
    return (q.float().reshape(rows, -1, group) * scale.float()[..., None]).reshape(rows, cols)


def extract_payload(target: Path, payload: Path = PAYLOAD) -> Path:
    """Unpack ``payload/payload.tar.xz`` (the packed MiniLM, the FTUs, ``packed.json``, the commit,
    MPNet's tokenizer when packed) into ``target``; returns ``target``."""
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(payload / "payload.tar.xz") as tf:
        tf.extractall(target, filter="data")
    return target


def rebuild_minilm(target: Path, payload: Path) -> Path:
    """fp32 MiniLM folder from the packed one (``payload/minilm``, as :func:`extract_payload`
    leaves it): int8 matrices de-quantised, fp16 vectors up-cast, the word-embedding rows no text
    used left at zero; ``packed.json`` (which texts the rows cover) is copied beside the weights."""
    target.mkdir(parents=True, exist_ok=True)
    p = load_file(payload / "minilm" / "packed.safetensors")
    key = bytes(p.pop("__key__").tolist()).decode()
    shape = p.pop("__shape__").tolist()
    rows = p.pop("__rows__").long()
    weights: dict[str, torch.Tensor] = {}
    for k in [k for k in p if k.endswith("::q")]:
        weights[k[:-3]] = dequantize(p.pop(k), p.pop(k[:-3] + "::scale"))
    weights.update({k: (t.float() if t.is_floating_point() else t) for k, t in p.items()})
    emb = torch.zeros(shape)
    emb[rows] = weights.pop("__embeddings__")
    weights[key] = emb
    save_file(weights, target / "model.safetensors", metadata={"format": "pt"})
    for f in (payload / "minilm").iterdir():
        if f.name != "packed.safetensors":
            shutil.copy(f, target / f.name)
    if (payload / "packed.json").is_file():
        shutil.copy(payload / "packed.json", target / "packed.json")
    return target


def random_mpnet(target: Path, payload: Path) -> Path:
    """MPNet's architecture and tokenizer with random weights (seed 0): timings only."""
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(payload / "mpnet")).save_pretrained(target)
    for f in (payload / "mpnet").iterdir():
        if f.name != "config.json":
            shutil.copy(f, target / f.name)
    return target


def packed_benchmarks(model_dir: str | Path) -> list[str] | None:
    """The benchmarks whose texts a packed model's word embeddings cover (``packed.json``), or
    None for a model that was not packed (every text is covered)."""
    path = Path(model_dir) / "packed.json"
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text())
    if manifest.get("format") != PACK_FORMAT:
        raise ValueError(f"{path}: format {manifest.get('format')!r}, expected {PACK_FORMAT!r}")
    return list(manifest["benchmarks"])


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gpu")
    packed = extract_payload(out / "packed")
    rebuild_minilm(out / "minilm", packed)
    if (packed / "mpnet").is_dir():
        random_mpnet(out / "mpnet", packed)
    shutil.move(packed / "ftus", out / "ftus")  # never over a checkout's artifacts/
    shutil.copy(packed / "commit", out / "commit")
    print("unpacked", sorted(str(x.relative_to(out)) for x in out.iterdir()))
