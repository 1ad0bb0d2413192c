"""Choose chapter 4's CPU training profile on dev data only: CSFCube fold1_dev and held-out FTUs.

Trains UniFAR-MiniLM (``--base-model``) with a frozen base, or a row's ``freeze_base: false`` (every
base parameter trains, no state cache: a GPU's work), for each variant of a small grid on 85 % of an FTU
folder (a seeded split; the other 15 % are held out) and measures, per variant:

* CSFCube **fold1_dev** MAP per facet and aggregated (the paper's tuning split; test is never
  looked at here);
* held-out q-doc retrieval: each *real* question of the held-out FTUs (PubMedQA / SciRepEval
  search, origin != icrop) against all documents of the folder, its gold being the document it
  was asked of (MRR@10, R@1); the same for up to 300 held-out cropped questions;
* PubMedQA within one field, chapter 5's protocol on training data: the PubMedQA **train half**
  questions against all 1,000 PubMedQA abstracts (MRR@10), for all 500 (most of them trained
  on) and for those whose FTU is held out. A pool from one field is harder than the mixed
  folder, and this check caught the question collapse that the mixed one missed;
* the held-out loss terms.

Every variant shares one cache of base token states (the base is frozen), so the base encoder
runs once per input for the whole sweep.

    python benchmarks/studies/tune_dev.py --ftus artifacts/ftus/full --out results/ch04/tuning_dev.json
    python benchmarks/studies/tune_dev.py --hold-out-prefix pubmedqa: --mean-pooling --untrained '{}' \
        --grid '{"whole base": {"freeze_base": false, "epochs": 1, "seed": 0}}' --out OUT.json   # a GPU's rows

Prints one line per variant and writes JSON (grid, split, per-variant metrics, seconds, git
commit, machine). With ``--mean-pooling`` and an untrained row, the JSON also states fold1_dev's
power before any verdict (``fold1_dev_power``): the minimum detectable effect of a paired
comparison on its query facets (80 % power; reference pair mean pooling against the untrained
model), and each trained row's paired bootstrap against both, from the per-query APs every row
keeps (``fold1_dev_ap``).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import shutil
import time
from pathlib import Path

import numpy as np

DEFAULT_GRID = {
    "default (paper lrs, all aggregation parameters)": {},
    "fixed values + w/o MHA_tok (chapter 4's default)": {"config": {"train_values": False, "use_token_attention": False}},
    "fixed values (V, out_proj kept at init)": {"config": {"train_values": False}},
    "fixed values, lrs x10": {"config": {"train_values": False, "lr_anchors": 2e-4, "lr_aggregation": 5e-4}},
    "w/o L_QD": {"config": {"use_qd_loss": False}},
    "real questions only (no crops)": {"real_only": True},
}


def fold1_dev_power(runs: dict) -> dict | None:
    """fold1_dev's minimum detectable effect (80 % power; reference pair: mean pooling against the
    untrained model, known before any trained row is compared) and each trained row's paired
    bootstrap against both (aggregated MAP, percent), from the rows' per-query APs
    (``fold1_dev_ap``). None without a mean-pooling and an untrained row."""
    from unifar.evaluation.bootstrap import paired_bootstrap
    from unifar.evaluation.power import minimum_detectable_effect

    mean_row = runs.get("mean pooling (base encoder)")
    untrained_row = next((r for n, r in runs.items() if n.startswith("untrained")), None)
    if not mean_row or not untrained_row or "fold1_dev_ap" not in mean_row:
        return None
    base, start = mean_row["fold1_dev_ap"], untrained_row["fold1_dev_ap"]
    mde = minimum_detectable_effect(base, start, reference="mean pooling vs untrained UniFAR")
    out = {"mde": round(mde.mde, 3), "se": round(mde.se, 4), "n_queries": mde.n, "reference": mde.reference,
           "power": mde.power, "alpha": mde.alpha, "paired": {}}
    for name, r in runs.items():
        if "fold1_dev_ap" in r and r is not mean_row and r is not untrained_row:
            out["paired"][name] = {ref: {k: round(v, 3) for k, v in dataclasses.asdict(paired_bootstrap(r["fold1_dev_ap"], other)).items()
                                         if k in ("diff", "low", "high")}
                                   for ref, other in (("mean pooling", base), ("untrained", start))}
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ftus", default="artifacts/ftus/full")
    ap.add_argument("--pubmedqa", default="data/pubmedqa_pqal", help="PubMedQA folder (its train half is used)")
    ap.add_argument("--untrained", default=None, help="JSON {name: config overrides}: untrained rows "
                    "(default: the identity-initialised model, with and without MHA_tok)")
    ap.add_argument("--out", default="results/ch04/tuning_dev.json")
    ap.add_argument("--work", default="artifacts/tune_dev", help="scratch folder for the runs")
    ap.add_argument("--grid", default=None, help="JSON {name: {config: {...}, real_only: bool, epochs: int, max_steps: int, "
                    "train_top_layers: int, top_layers_dropout: bool, freeze_base: bool, seed: int, "
                    "max_teacher_candidates: int, dev_every: int, dev_queries: int, eval_max_ftus: int, patience: int, "
                    "min_delta: float}}; dev_every k "
                    "records a fold1_dev MAP curve every k steps and stops when it flattens (dev_queries q: on the "
                    "first q query facets of each facet, a quick curve); a row's seed "
                    "reseeds its initialisation and training order (the held-out split stays --seed's); "
                    "freeze_base false trains every base parameter (the paper; a GPU's work) with no state cache")
    ap.add_argument("--base-model", default="minilm", help="minilm (default), mpnet, a hub id or a local encoder folder")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--held-out", type=float, default=0.15, help="fraction of FTUs held out (default 0.15)")
    ap.add_argument("--hold-out-prefix", default=None, metavar="PREFIX",
                    help="also hold out every FTU whose query document id starts with PREFIX; 'pubmedqa:' makes "
                         "the PubMedQA train half a clean q-doc dev set (none of its questions is trained on)")
    ap.add_argument("--mean-pooling", action="store_true", help="add the base encoder's mean pooling as a reference row")
    ap.add_argument("--cache-dir", default="artifacts/cache", help="the chapters' cache: mean-pooling embeddings "
                    "and the frozen base's token states (read and extended)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch

    from unifar import UniFAR, UniFARConfig
    from unifar.caching import TokenStateCache
    from unifar.config import TrainArgs
    from unifar.datasets.csfcube import load_csfcube
    from unifar.datasets.ftu_files import FTUDataset, load_ftus
    from unifar.datasets.pubmedqa import load_pubmedqa
    from unifar.evaluation.csfcube import aggregate_csfcube, csfcube_per_query, rank_pools
    from unifar.evaluation.dense import UniFARRetriever
    from unifar.facets import FACETS
    from unifar.files import write_json
    from unifar.learning_curve import DevCurve, csfcube_dev_measure
    from unifar.runtime import run_facts
    from unifar.train import train

    torch.manual_seed(args.seed)
    grid = json.loads(args.grid) if args.grid else DEFAULT_GRID
    ds = load_ftus(args.ftus)
    perm = np.random.default_rng([args.seed, 777]).permutation(len(ds.ftus))
    held = set(perm[: int(args.held_out * len(ds.ftus))].tolist())
    if args.hold_out_prefix:
        held |= {i for i, u in enumerate(ds.ftus) if u.query.startswith(args.hold_out_prefix)}
    tr = FTUDataset([u for i, u in enumerate(ds.ftus) if i not in held], ds.documents, ds.manifest)
    ev = FTUDataset([u for i, u in enumerate(ds.ftus) if i in held], ds.documents, ds.manifest)
    asked = [q for u in ev.ftus for q in u.questions.values() if q is not None]
    real_q = [(q.text, q.doc_id) for q in asked if q.origin != "icrop"]
    crop_q = [(q.text, q.doc_id) for q in asked if q.origin == "icrop"][:300]
    doc_ids = sorted(ds.documents)
    docs = [ds.documents[i] for i in doc_ids]
    row_of = {d: i for i, d in enumerate(doc_ids)}
    print(f"{len(tr)} training / {len(ev)} held-out FTUs; {len(real_q)} real and {len(crop_q)} cropped held-out "
          f"questions against {len(docs)} documents", flush=True)
    cube = load_csfcube("data/csfcube")
    pm_full, pm_train = load_pubmedqa(args.pubmedqa), load_pubmedqa(args.pubmedqa, split="train")
    pm_docs = [{"title": d["title"], "sentences": d["sentences"]} for d in pm_full.documents]
    pm_row = {d["id"]: i for i, d in enumerate(pm_full.documents)}
    pm_q = [(q["text"], pm_row[next(iter(pm_train.qrels[q["qid"]]))]) for q in pm_train.questions]
    held_text = {q.text for q in asked if q.origin == "pubmedqa"}
    pm_held = [i for i, (t, _) in enumerate(pm_q) if t in held_text]
    print(f"PubMedQA train half: {len(pm_q)} questions ({len(pm_held)} of them held out) against {len(pm_docs)} abstracts",
          flush=True)
    # One cache per number of trained top base layers k: the states entering those layers are
    # shared by every variant with the same k (k = 0: the frozen base's last states), on disk
    # under --cache-dir, so the chapters and later sweeps find them (the base runs once per input).
    caches: dict[int, TokenStateCache] = {}

    def cache(k: int, name: str = "") -> TokenStateCache:
        if k not in caches:
            caches[k] = TokenStateCache.on_disk(base, args.cache_dir, top_layers=k)
        return caches[k]

    def ranks(retriever, questions, documents, gold) -> np.ndarray:
        scores = retriever.score(questions, retriever.index(documents))
        return (scores > scores[np.arange(len(gold)), gold][:, None]).sum(1) + 1

    def mrr10(rank) -> float:
        return round(float(np.where(rank <= 10, 1 / rank, 0).mean()) * 100, 2)

    def scores_of(csfcube_fn, retriever, pm_retriever=None, qd_retriever=None) -> dict:
        """Every dev figure of one system: a CSFCube score function and q-doc retrievers."""
        per_query = csfcube_per_query(rank_pools(csfcube_fn, cube), cube)
        dev = aggregate_csfcube(per_query, cube, split="dev")

        def qdoc(qs) -> dict:
            rank = ranks(qd_retriever or retriever, [q for q, _ in qs], docs, np.array([row_of[d] for _, d in qs]))
            return {"mrr@10": mrr10(rank), "r@1": round(float((rank == 1).mean()) * 100, 2)}

        pm_rank = ranks(pm_retriever or retriever, [t for t, _ in pm_q], pm_docs, np.array([g for _, g in pm_q]))
        return {"fold1_dev_map": {f: round(dev[f]["map"], 2) for f in (*FACETS, "all")},
                "fold1_dev_ap": fold1_dev_ap(per_query),
                "heldout_real_questions": qdoc(real_q), "heldout_crop_questions": qdoc(crop_q),
                "pubmedqa_train_half_mrr@10": {"all": mrr10(pm_rank), "held_out": mrr10(pm_rank[pm_held])}}

    def fold1_dev_ap(per_query) -> dict[str, float]:
        """AP (percent) of every aggregated fold1_dev query facet, keyed ``{qpid}_{facet}``: the
        per-query scores behind the paired intervals and the MDE of :func:`power`."""
        keyed = {f"{q}_{f}": m["map"] for f, per_q in per_query.items() for q, m in per_q.items()}
        return {k: round(100 * keyed[k], 4) for k in cube.splits["all"]["fold1_dev"]}

    def evaluate(model, k: int | None = 0) -> dict:
        """Dev scores; ``k`` trained top layers share the caches of the states below them, None: no cache."""
        c = (lambda name: None) if k is None else (lambda name: cache(k, name))
        return scores_of(UniFARRetriever(model, state_cache=c("cube")).csfcube_score_fn(cube),
                         None, UniFARRetriever(model, state_cache=c("pm")), UniFARRetriever(model, state_cache=c("qd")))

    def only_real(d):
        keep = [dataclasses.replace(u, questions={f: q for f, q in u.questions.items() if q is not None and q.origin != "icrop"})
                for u in d.ftus]
        return FTUDataset(keep, d.documents, d.manifest)

    def save() -> dict:
        """Write every row so far (atomically): a run killed for time keeps its finished rows."""
        for c in caches.values():
            c.save()
        out = {"what": f"dev-only tuning of chapter 4's training profile (UniFAR on {args.base_model}): CSFCube "
                       "fold1_dev MAP and held-out FTU question -> source-document retrieval (percent)",
               "ftus": args.ftus, "n_ftus": len(ds), "n_train_ftus": len(tr), "n_held_out_ftus": len(ev),
               "n_real_questions": len(real_q), "n_crop_questions": len(crop_q), "n_documents": len(docs),
               "n_pubmedqa_train_questions": len(pm_q), "n_pubmedqa_held_out": len(pm_held), "n_pubmedqa_abstracts": len(pm_docs),
               "seed": args.seed, "max_tokens": args.max_tokens, "hold_out_prefix": args.hold_out_prefix, "runs": runs, "fold1_dev_power": fold1_dev_power(runs), "run": run_facts()}
        write_json(args.out, out)
        return out

    base = UniFAR(UniFARConfig(base_model=args.base_model, max_tokens=args.max_tokens))
    runs = {}
    if args.mean_pooling:
        from unifar.evaluation.dense import MeanPoolingRetriever
        from unifar.evaluation.mean_pooling import MeanPoolingEncoder

        t0 = time.perf_counter()
        mp = MeanPoolingRetriever(MeanPoolingEncoder(base.config.base_model, max_length=args.max_tokens, show_progress=False,
                                                     cache_dir=args.cache_dir))
        runs["mean pooling (base encoder)"] = {"spec": {"baseline": "mean pooling"}, **scores_of(mp.csfcube_score_fn(cube), mp),
                                               "seconds": round(time.perf_counter() - t0, 1)}
        print("mean pooling", runs["mean pooling (base encoder)"], flush=True)
        save()
    untrained = json.loads(args.untrained) if args.untrained else {
        "untrained (identity init)": {}, "untrained, w/o MHA_tok": {"use_token_attention": False}}
    for name, over in untrained.items():
        t0 = time.perf_counter()
        model = UniFAR(UniFARConfig(**{"base_model": args.base_model, "max_tokens": args.max_tokens, **over}),
                       base_model=base.base, tokenizer=base.tokenizer)
        runs[name] = {"spec": {"config": over}, **evaluate(model), "seconds": round(time.perf_counter() - t0, 1)}
        print(name, runs[name], flush=True)
        save()
    for name, spec in grid.items():
        t0 = time.perf_counter()
        cfg = UniFARConfig(**{"base_model": args.base_model, "max_tokens": args.max_tokens, **spec.get("config", {})})
        frozen = bool(spec.get("freeze_base", True))
        k = int(spec.get("train_top_layers", 0))
        if not frozen and k:
            raise ValueError(f"grid row {name!r}: train_top_layers needs freeze_base true (the default)")
        # A row without its own seed takes the generator where the rows before it left it (how every
        # committed row was run); a row with one is reseeded, so seed rows measure training noise.
        seed = int(spec.get("seed", args.seed))
        if "seed" in spec:
            torch.manual_seed(seed)
        # a variant that trains base layers gets its own copy of the base; the others share it
        own_base = k or not frozen
        model = UniFAR(cfg, base_model=copy.deepcopy(base.base) if own_base else base.base, tokenizer=base.tokenizer)
        work = Path(args.work) / name.replace(" ", "_").replace("/", "-")
        shutil.rmtree(work, ignore_errors=True)  # a fresh run (and dev curve) for every row
        callbacks, curve = [], None
        if spec.get("dev_every"):  # a fold1_dev learning curve; the run stops once it flattens
            # fold1_dev's 1,946 papers, not the collection's 4,205: the same MAP (to the printed
            # 0.01), at less than half the cost of a dev point when the base trains
            dev_map = csfcube_dev_measure(cube, cache(k, "cube") if frozen else None,
                                          max_queries=spec.get("dev_queries"))
            curve = DevCurve(model, {"fold1_dev_map": dev_map,
                                     "held_out_l_kd": lambda m, r: float((r.get("eval") or {}).get("l_kd", float("nan")))},
                             work, every=int(spec["dev_every"]), monitor="fold1_dev_map",
                             patience=int(spec.get("patience", 3)), min_delta=float(spec.get("min_delta", 0.1)))
            callbacks.append(curve)
        res = train(None, only_real(tr) if spec.get("real_only") else tr,
                    TrainArgs(output_dir=str(work), freeze_base=frozen, progress=False, seed=seed, save_every=10**6,
                              epochs=spec.get("epochs"), max_steps=spec.get("max_steps"), train_top_layers=k,
                              max_teacher_candidates=spec.get("max_teacher_candidates"),
                              eval_every=int(spec.get("dev_every", 0)), eval_max_ftus=spec.get("eval_max_ftus", 256),
                              top_layers_dropout=bool(spec.get("top_layers_dropout", False))),
                    model=model, state_cache=cache(k, "ftu") if frozen else None, eval_dataset=ev, callbacks=callbacks)
        held_out = {k: round(v, 3) for k, v in (res.run_info.get("held_out") or {}).items() if isinstance(v, float)}
        runs[name] = {"spec": spec, **evaluate(res.model, k if frozen else None), "held_out_loss": held_out,
                      "steps": res.steps, "seconds": round(time.perf_counter() - t0, 1),
                      "stopped_early": res.run_info.get("stopped_early"),
                      "dev_curve": curve.points if curve is not None else None,
                      "ftus_per_second": res.run_info.get("ftus_per_second"), "bf16": res.run_info.get("bf16")}
        print(name, runs[name], flush=True)
        save()
    out = save()
    print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
