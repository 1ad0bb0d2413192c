"""Pack what chapter 4's GPU rows need for a GPU machine with no network and a 64 MiB upload
(see README.md beside this file) into the ignored folder ``.gpu/``, and check the packed MiniLM.

MiniLM's fp32 weights (87 MiB) do not fit. Every tensor goes in fp16, except the word
embeddings: only the rows of tokens that occur in the texts used there (FTUs, CSFCube, PubMedQA)
go, in int8 with one fp16 scale per row. unpack.py rebuilds an fp32 folder; the rows no text uses
are zero there. MPNet goes as its config and tokenizer only (random weights: speed only).

    python benchmarks/offline_gpu/pack.py --json results/ch04/h200_transport_check.json

The check: mean-pooled embeddings of CSFCube abstracts by the shipped and the rebuilt MiniLM
(minimum and mean cosine), written to ``--json``.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, str(Path(__file__).parent))
from unpack import PAYLOAD, rebuild_minilm  # noqa: E402

WHEELS = ["datasets==5.2.0", "dill==0.4.1", "multiprocess==0.70.19"]  # not in the GPU image
TOKENIZER_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"]


def used_token_ids(tokenizer, ftus: str) -> torch.Tensor:
    """Every token id of the texts the GPU rows read, the special tokens and the facet words."""
    from unifar.datasets.csfcube import load_csfcube

    texts = ["background method result"]
    for line in open(f"{ftus}/documents.jsonl"):
        d = json.loads(line)
        texts += [d.get("title") or "", *d.get("sentences", [])]
    texts += open(f"{ftus}/ftus.jsonl").read().splitlines()  # questions inside; over-inclusive
    for p in load_csfcube("data/csfcube").papers.values():
        texts += [p["title"], *p["sentences"]]
    for v in json.load(open("data/pubmedqa_pqal/ori_pqal.json")).values():
        texts += [v["QUESTION"], *v["CONTEXTS"]]
    ids = set(tokenizer.all_special_ids)
    for i in range(0, len(texts), 5000):
        for x in tokenizer(texts[i : i + 5000])["input_ids"]:
            ids.update(x)
    return torch.tensor(sorted(ids), dtype=torch.int32)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ftus", default="artifacts/ftus/full")
    ap.add_argument("--check-docs", type=int, default=300, help="CSFCube abstracts of the check (default 300)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from transformers import AutoTokenizer

    from unifar.base_models import resolve_base_model

    mini, mpnet = Path(resolve_base_model("minilm")), Path(resolve_base_model("mpnet"))
    rows = used_token_ids(AutoTokenizer.from_pretrained(mini), args.ftus)
    out: dict[str, torch.Tensor] = {}
    for k, t in load_file(mini / "model.safetensors").items():
        if k.endswith("word_embeddings.weight"):
            sub = t[rows.long()]
            scale = sub.abs().amax(1, keepdim=True) / 127
            out.update(__rows__=rows, __q__=torch.round(sub / scale).clamp(-127, 127).to(torch.int8),
                       __scale__=scale.half(), __shape__=torch.tensor(t.shape, dtype=torch.int64),
                       __key__=torch.tensor(list(k.encode()), dtype=torch.uint8))
        else:
            out[k] = t.half() if t.is_floating_point() else t
    for name, src in (("minilm", mini), ("mpnet", mpnet)):
        (PAYLOAD / name).mkdir(parents=True, exist_ok=True)
        for f in TOKENIZER_FILES:
            shutil.copy(src / f, PAYLOAD / name / f)
    save_file(out, PAYLOAD / "minilm" / "packed.safetensors")
    with tarfile.open(PAYLOAD / "ftus.tar.xz", "w:xz") as tf:
        tf.add(args.ftus, arcname="artifacts/ftus/full")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
                    "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64", "-d", str(PAYLOAD / "whl"),
                    *WHEELS], check=True)
    size = sum(f.stat().st_size for f in PAYLOAD.rglob("*") if f.is_file())

    from unifar.evaluation.mean_pooling import MeanPoolingEncoder
    from unifar.evaluation.texts import document_text
    from unifar.datasets.csfcube import load_csfcube
    from unifar.runtime import run_facts

    cube = load_csfcube("data/csfcube")
    pids = cube.pool_pids()[: args.check_docs]
    with tempfile.TemporaryDirectory() as tmp:
        shipped = MeanPoolingEncoder("minilm", show_progress=False, device="cpu")
        rebuilt = MeanPoolingEncoder(str(rebuild_minilm(Path(tmp) / "minilm")), show_progress=False, device="cpu")
        texts = [document_text(cube.papers[p], shipped.sep_token) for p in pids]
        cos = torch.nn.functional.cosine_similarity(shipped.encode(texts), rebuilt.encode(texts))
    report = {
        "what": "MiniLM as packed for the GPU machine (fp16; int8 rows of the used word embeddings) against the shipped "
                "fp32 model: cosine of mean-pooled embeddings of CSFCube abstracts",
        "vocabulary_rows_sent": len(rows), "payload_mib": round(size / 2**20, 1), "documents": len(pids),
        "cosine_min": round(float(cos.min()), 6), "cosine_mean": round(float(cos.mean()), 6),
        "run": run_facts(),
    }
    print(json.dumps({k: v for k, v in report.items() if k not in ("machine", "git")}))
    if args.json:
        from unifar.files import write_json

        print(f"wrote {write_json(args.json, report)}")
    return report


if __name__ == "__main__":
    main()
