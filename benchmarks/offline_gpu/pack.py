"""Pack what the GPU rows need for a GPU machine with no network and a 64 MiB upload (see
README.md beside this file) into the ignored folder ``.gpu/``, and check the packed MiniLM.

The upload holds the whole working tree (about 38 MiB of tracked files) beside ``.gpu/``, so
MiniLM's fp32 weights (87 MiB), and even its fp16 ones (44 MiB), do not fit. Every matrix goes
in int8 with one fp16 scale per group of :data:`GROUP` columns; vectors (biases, LayerNorms) go
in fp16. Of the word embeddings only the rows of tokens that occur in a text the GPU stages read
go: the FTUs and every shipped benchmark (CSFCube, Cranfield, PubMedQA, SciRepEval search,
documents and questions). ``unpack.py`` rebuilds an fp32 folder; the rows no text used are zero
there, so the packed model is only right on those texts: the manifest (``packed.json``) names
them, and ``gpu_profile.py`` refuses a benchmark that is not among them. MPNet goes as its config
and tokenizer only (random weights: speed only). Python packages the GPU image lacks go as wheels
(:data:`WHEELS`; ``rehearse.sh`` finds them by running the stages in a copy of that image's
package set).

    python benchmarks/offline_gpu/pack.py --ftus artifacts/ftus/full --json results/gpu/pack_check.json

The check: mean-pooled embeddings of CSFCube abstracts by the shipped and the rebuilt MiniLM
(minimum and mean cosine), and with ``--check-map`` the mean-pooling MAP on CSFCube fold1_dev of
both, written to ``--json``. The script fails, naming the sizes, when the working tree and
``.gpu/`` together would not fit the upload.
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
from unpack import GROUP, PACK_FORMAT, PAYLOAD, dequantize, extract_payload, rebuild_minilm  # noqa: E402

UPLOAD_LIMIT = 64 * 2**20  # the device tool's working tree, tracked files and carried folders
#: Packages the stages import that the GPU image does not hold (found by rehearse.sh: ranx imports
#: ir_datasets, orjson, cbor2 and lz4 when it loads), pinned to .ci/requirements.lock's versions;
#: pure Python or manylinux wheels for CPython 3.12. PyStemmer (0.7 MiB) stays behind:
#: snowballstemmer gives the same stems without it, only slower.
WHEELS = ["datasets==5.2.0", "dill==0.4.1", "multiprocess==0.70.19", "ranx==0.3.21", "ir-datasets==0.6.3",
          "orjson==3.13.0", "cbor2==6.3.0", "lz4==4.4.5", "bm25s==0.3.16", "snowballstemmer==3.1.1"]
# the fast tokenizer reads tokenizer.json; vocab.txt would repeat it
TOKENIZER_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
BENCHMARKS = ("csfcube", "cranfield", "pubmedqa", "scirepeval")  # every shipped one


def quantize(t: torch.Tensor, group: int = GROUP) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 values and fp16 scales (one per ``group`` columns) of a matrix: ``dequantize`` of
    the pair is within half a step of ``t``, a step being the group's largest magnitude / 127.

    >>> t = torch.tensor([[1.0, -0.5, 0.25, 0.0], [10.0, 0.0, 0.0, -10.0]])
    >>> q, s = quantize(t, group=2)
    >>> q.tolist(), s.float().tolist()
    ([[127, -64, 127, 0], [127, 0, 0, -127]], [[0.00787353515625, 0.0019683837890625], [0.0787353515625, 0.0787353515625]])
    >>> bool((dequantize(q, s) - t).abs().max() < 0.04)
    True
    """
    rows, cols = t.shape
    if cols % group:
        raise ValueError(f"{cols} columns do not split into groups of {group}")
    g = t.float().reshape(rows, cols // group, group)
    scale = (g.abs().amax(-1) / 127).clamp(min=1e-12).half()
    q = torch.round(g / scale.float()[..., None]).clamp(-127, 127).to(torch.int8)
    return q.reshape(rows, cols), scale


def texts_sent(ftus: Path) -> dict[str, list[str]]:
    """Every text the GPU stages read, by source: the FTU folder (its documents, and each line of
    its FTU file, which holds the questions; over-inclusive) and each shipped benchmark."""
    from unifar.evaluation.benchmarks import LOADERS

    out = {"ftus": ["background method result"]}
    for line in (ftus / "documents.jsonl").read_text(encoding="utf-8").splitlines():
        d = json.loads(line)
        out["ftus"] += [d.get("title") or "", *d.get("sentences", [])]
    out["ftus"] += (ftus / "ftus.jsonl").read_text(encoding="utf-8").splitlines()
    for name in BENCHMARKS:
        texts: list[str] = []
        for lb in LOADERS[name]({}):
            if lb.kind == "csfcube":
                texts += [t for p in lb.data.papers.values() for t in (p["title"], *p["sentences"])]
            else:
                docs = lb.data.documents.select_columns(["title", "sentences"]).to_list()
                texts += [t for d in docs for t in (d["title"] or "", *d["sentences"])]
                texts += list(lb.data.questions["text"])
        out[name] = texts
    return out


def used_token_ids(tokenizer, texts: list[str]) -> torch.Tensor:
    """Every token id of ``texts``, and the special tokens, sorted."""
    ids = set(tokenizer.all_special_ids)
    for i in range(0, len(texts), 5000):
        for x in tokenizer(texts[i : i + 5000], verbose=False)["input_ids"]:
            ids.update(x)
    return torch.tensor(sorted(ids), dtype=torch.int32)


def pack_minilm(model_dir: Path, rows: torch.Tensor, target: Path) -> dict:
    """Write the packed MiniLM into ``target`` (``packed.safetensors``, tokenizer files)."""
    tensors: dict[str, torch.Tensor] = {}
    for k, t in load_file(model_dir / "model.safetensors").items():
        if k.endswith("word_embeddings.weight"):
            tensors["__rows__"] = rows
            tensors["__shape__"] = torch.tensor(t.shape, dtype=torch.int64)
            tensors["__key__"] = torch.tensor(list(k.encode()), dtype=torch.uint8)
            t = t[rows.long()]
            k = "__embeddings__"
        if t.is_floating_point() and t.dim() == 2:
            tensors[f"{k}::q"], tensors[f"{k}::scale"] = quantize(t)
        else:
            tensors[k] = t.half() if t.is_floating_point() else t
    target.mkdir(parents=True, exist_ok=True)
    for f in TOKENIZER_FILES:  # as many as the folder has (newer tokenizers write fewer)
        if (model_dir / f).is_file():
            shutil.copy(model_dir / f, target / f)
    save_file(tensors, target / "packed.safetensors")
    return {"vocabulary_rows_sent": len(rows), "vocabulary_size": int(tensors["__shape__"][0])}


def tree_bytes(root: Path) -> int:
    """Bytes of the working tree the device tool uploads: tracked files and untracked ones git
    does not ignore (``.gpu/`` is ignored and travels as a carried folder)."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                           capture_output=True, check=True).stdout.split(b"\0")
    return sum((root / n.decode()).stat().st_size for n in names if n and (root / n.decode()).is_file())


def check_model(rebuilt: Path, n_docs: int, check_map: bool) -> dict:
    """Cosine of mean-pooled CSFCube abstracts, shipped against rebuilt MiniLM (and with
    ``check_map`` both models' mean-pooling MAP on fold1_dev)."""
    from unifar.datasets.csfcube import load_csfcube
    from unifar.evaluation.dense import MeanPoolingRetriever
    from unifar.evaluation.mean_pooling import MeanPoolingEncoder
    from unifar.evaluation.texts import document_text
    from unifar.evaluation.tuning import csfcube_dev_map

    cube = load_csfcube()
    encoders = {name: MeanPoolingEncoder(spec, show_progress=False, device="cpu")
                for name, spec in (("shipped", "minilm"), ("packed", str(rebuilt)))}
    texts = [document_text(cube.papers[p], encoders["shipped"].sep_token) for p in cube.pool_pids()[:n_docs]]
    cos = torch.nn.functional.cosine_similarity(encoders["shipped"].encode(texts), encoders["packed"].encode(texts))
    out = {"documents": len(texts), "cosine_min": round(float(cos.min()), 6), "cosine_mean": round(float(cos.mean()), 6)}
    if check_map:
        for name, enc in encoders.items():
            out[f"fold1_dev_map_{name}"] = round(csfcube_dev_map(MeanPoolingRetriever(enc).csfcube_score_fn(cube), cube), 2)
    return out


def stage_payload(ftus: Path, mpnet: bool, stage: Path) -> dict:
    """Write into ``stage`` what ``payload.tar.xz`` holds: the packed MiniLM, MPNet's tokenizer
    (``mpnet``), the FTUs, the commit and ``packed.json``; returns the manifest."""
    from transformers import AutoTokenizer

    from unifar.base_models import resolve_base_model

    mini = Path(resolve_base_model("minilm"))
    sources = texts_sent(ftus)
    rows = used_token_ids(AutoTokenizer.from_pretrained(mini), [t for ts in sources.values() for t in ts])
    facts = pack_minilm(mini, rows, stage / "minilm")
    if mpnet:  # only run.sh's timing rows use it (random weights)
        (stage / "mpnet").mkdir()
        for f in TOKENIZER_FILES:
            shutil.copy(Path(resolve_base_model("mpnet")) / f, stage / "mpnet" / f)
    shutil.copytree(ftus, stage / "ftus")
    # the lent machine has no git: the commit (and whether the tree differed from it) travels
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True,
                           check=True).stdout.strip()
    (stage / "commit").write_text(head + ("-dirty" if dirty else "") + "\n")
    manifest = {"format": PACK_FORMAT, "group": GROUP, "ftus": str(ftus), "texts": {k: len(v) for k, v in sources.items()},
                "benchmarks": list(BENCHMARKS), "mpnet": mpnet, **facts}
    (stage / "packed.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ftus", default="artifacts/ftus/full")
    ap.add_argument("--mpnet", action="store_true", help="also MPNet's tokenizer, for run.sh's timing rows")
    ap.add_argument("--check-docs", type=int, default=300, help="CSFCube abstracts of the cosine check (default 300)")
    ap.add_argument("--check-map", action="store_true", help="also both models' fold1_dev MAP (a few minutes)")
    ap.add_argument("--no-wheels", action="store_true", help="leave the wheels out (a CPU rehearsal in this venv)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from unifar.runtime import run_facts

    ftus = Path(args.ftus)
    if not (ftus / "documents.jsonl").is_file():
        raise SystemExit(f"{ftus}: no FTU folder (documents.jsonl); run chapter 3 at the matching profile first")
    shutil.rmtree(PAYLOAD, ignore_errors=True)
    PAYLOAD.mkdir()
    with tempfile.TemporaryDirectory() as tmp:
        manifest = stage_payload(ftus, args.mpnet, Path(tmp))
        with tarfile.open(PAYLOAD / "payload.tar.xz", "w:xz", preset=9) as tf:  # tokenizers and JSON shrink
            for part in sorted(Path(tmp).iterdir()):
                tf.add(part, arcname=part.name)
    if not args.no_wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
                        "3.12", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64", "--platform",
                        "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64", "-d", str(PAYLOAD / "whl"),
                        *WHEELS], check=True)
    payload = sum(f.stat().st_size for f in PAYLOAD.rglob("*") if f.is_file())
    tree = tree_bytes(Path.cwd())
    sizes = {"payload_mib": round(payload / 2**20, 1), "tree_mib": round(tree / 2**20, 1),
             "upload_mib": round((payload + tree) / 2**20, 1), "limit_mib": UPLOAD_LIMIT // 2**20}
    print(json.dumps(sizes))
    with tempfile.TemporaryDirectory() as tmp:
        check = check_model(rebuild_minilm(Path(tmp) / "minilm", extract_payload(Path(tmp) / "packed")),
                            args.check_docs, args.check_map)
    report = {"what": "MiniLM as packed for the GPU machine (int8 matrices in groups of "
                      f"{GROUP} columns with fp16 scales, fp16 vectors, only the word-embedding rows of the texts sent) "
                      "against the shipped fp32 model: mean-pooled CSFCube abstracts",
              **manifest, **sizes, **check, "run": run_facts()}
    print(json.dumps({k: v for k, v in report.items() if k != "run"}))
    if args.json:
        from unifar.files import write_json

        print(f"wrote {write_json(args.json, report)}")
    if payload + tree > UPLOAD_LIMIT:
        raise SystemExit(f"the upload would be {sizes['upload_mib']} MiB (tree {sizes['tree_mib']} + .gpu/ "
                         f"{sizes['payload_mib']}), over the device tool's {sizes['limit_mib']} MiB")
    return report


if __name__ == "__main__":
    main()
