"""On the GPU machine: rebuild what pack.py sent (see README.md beside this file).

    python benchmarks/offline_gpu/unpack.py /tmp/gpu   # -> /tmp/gpu/minilm (fp32), /tmp/gpu/mpnet (random), FTUs
"""
from __future__ import annotations

import shutil
import sys
import tarfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

PAYLOAD = Path(".gpu")


def rebuild_minilm(target: Path, payload: Path = PAYLOAD) -> Path:
    """fp32 MiniLM folder from the packed one: fp16 tensors up-cast, the int8 word-embedding rows
    de-quantised, the rows no text used left at zero."""
    target.mkdir(parents=True, exist_ok=True)
    p = load_file(payload / "minilm" / "packed.safetensors")
    key = bytes(p.pop("__key__").tolist()).decode()
    shape = p.pop("__shape__").tolist()
    rows, q, scale = p.pop("__rows__").long(), p.pop("__q__"), p.pop("__scale__")
    emb = torch.zeros(shape)
    emb[rows] = q.float() * scale.float()
    w = {k: (t.float() if t.is_floating_point() else t) for k, t in p.items()}
    w[key] = emb
    save_file(w, target / "model.safetensors", metadata={"format": "pt"})
    for f in (payload / "minilm").iterdir():
        if f.name != "packed.safetensors":
            shutil.copy(f, target / f.name)
    return target


def random_mpnet(target: Path, payload: Path = PAYLOAD) -> Path:
    """MPNet's architecture and tokenizer with random weights (seed 0): timings only."""
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(payload / "mpnet")).save_pretrained(target)
    for f in (payload / "mpnet").iterdir():
        if f.name != "config.json":
            shutil.copy(f, target / f.name)
    return target


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gpu")
    rebuild_minilm(out / "minilm")
    random_mpnet(out / "mpnet")
    with tarfile.open(PAYLOAD / "ftus.tar.xz") as tf:
        tf.extractall(".")
    print("unpacked", sorted(str(x) for x in out.rglob("*")))
