"""Facet-aware hybrid retrieval through the evaluation runner: how far does fusing dense and
lexical evidence go, with every fusion weight chosen on a dev split only?

Runs :func:`unifar.evaluation.runner.evaluate_all` with the base systems (``bm25``, ``mean``,
``unifar-untrained``) and the hybrids of :mod:`unifar.evaluation.hybrid` (``hybrid-mean``,
``hybrid-mean-labeller``, ``hybrid-unifar``, ``hybrid-mean-unifar``), plus each z-score hybrid's
rank-fusion twin (``--rank-fusion``), on CSFCube and the q-doc benchmarks. CSFCube weights are
chosen on fold1_dev; the 2-fold test and the untouched fold1_test are reported, each hybrid
against its dense base by the paired bootstrap (:func:`unifar.evaluation.report.verdict_table`).

    python benchmarks/studies/hybrid_eval.py --rank-fusion                    # MiniLM, 4 benchmarks
    python benchmarks/studies/hybrid_eval.py --model mpnet --benchmarks csfcube \\
        --systems mean,hybrid-mean --out results/ch05/hybrid_mpnet.json
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

SYSTEMS = (
    "bm25,mean,unifar-untrained,hybrid-mean,hybrid-mean-labeller,hybrid-unifar,hybrid-mean-unifar"
)
#: each hybrid's dense base(s), its paired-bootstrap references
BASES = {
    "hybrid-mean": ["mean"],
    "hybrid-mean-labeller": ["mean"],
    "hybrid-unifar-untrained": ["unifar-untrained"],
    "hybrid-mean-unifar-untrained": ["mean", "unifar-untrained"],
}


def fold_mean(res: dict, entry: dict, metric: str, fold: str) -> float:
    """One system's mean of ``metric`` over the query facets of one CSFCube fold."""
    from unifar.evaluation.report import fold_strata

    ids = fold_strata(entry, metric)[fold]
    return round(float(np.mean([res["per_query"][metric][i] for i in ids])), 2)


def summary(result: dict) -> dict:
    """Per benchmark and system: headline metrics (CSFCube also fold1_test) and chosen weights."""
    from unifar.evaluation.report import HEADLINE_METRICS

    out: dict = {}
    for bench, entry in result["benchmarks"].items():
        rows = {}
        for name, res in entry["systems"].items():
            chosen = result["meta"]["systems"][name].get("weights_by_benchmark", {}).get(bench)
            if entry["kind"] == "csfcube":
                row = {
                    "map": res["metrics"]["all/map"],
                    "ndcg%20": res["metrics"]["all/ndcg%20"],
                    **{
                        f"{f}/map": res["metrics"][f"{f}/map"]
                        for f in ("background", "method", "result")
                    },
                    "fold1_test map": fold_mean(res, entry, "all/map", "fold1_test"),
                    "fold1_test ndcg%20": fold_mean(res, entry, "all/ndcg%20", "fold1_test"),
                }
            else:
                row = {
                    m: res["metrics"][m]
                    for m in HEADLINE_METRICS.get(bench, list(res["metrics"])[:2])
                }
            if chosen is not None:
                best = (
                    max(chosen["dev_curve"], key=lambda c: c["dev"])
                    if chosen["dev_curve"]
                    else None
                )
                row |= {
                    "weights": chosen["weights"],
                    "chosen_on": chosen["chosen_on"],
                    "dev_best": round(best["dev"], 2) if best else None,
                }
            rows[name] = {k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}
        out[bench] = rows
    return out


def public_command(command: str) -> str:
    """A command line without machine paths (an absolute path outside the repository is cut to
    its name, :func:`unifar.evaluation.benchmarks.public_path`)."""
    from unifar.files import public_path

    return " ".join(public_path(a) if a.startswith("/") else a for a in command.split())


def combine(paths: list[str], out_path: str) -> dict:
    """One file from the outputs of earlier runs on disjoint benchmarks: their summaries and
    verdicts side by side, each run (with its command, commit and machine) kept whole."""
    import json
    from pathlib import Path

    from unifar.files import write_json

    runs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in paths]
    out = {"combined_from": [public_command(p) for p in paths], "summary": {}, "verdicts": {}}
    out["runs"] = runs
    for run in runs:
        run["command"] = public_command(run["command"])
        out["summary"].update(run["summary"])
        for name, v in run["verdicts"].items():
            merged = out["verdicts"].setdefault(name, {"all": [], "folds": []})
            merged["all"] += v["all"]
            merged["folds"] += v["folds"]
    write_json(out_path, out, indent=1)
    print(f"wrote {out_path} from {len(runs)} runs")
    return out


def systems_of(args: argparse.Namespace) -> list:
    """The named systems, plus each hybrid's rank-fusion twin and the facet-query hybrid
    on request."""
    from unifar.evaluation.hybrid import FusedRetriever
    from unifar.evaluation.systems import build_retrievers

    names = args.systems.split(",")
    retrievers, _ = build_retrievers(
        args.model,
        names,
        show_progress=False,
        cache_dir=args.cache_dir,
        labeller=args.labeller if "hybrid-mean-labeller" in names else None,
    )
    if args.rank_fusion:
        retrievers += [
            FusedRetriever(
                f"{r.name}-rank",
                r.label.replace("hybrid", "rank fusion", 1),
                r.csfcube_parts,
                r.qdoc_parts,
                fusion="rank",
            )
            for r in list(retrievers)
            if isinstance(r, FusedRetriever)
        ]
    if args.facet_query:  # a second facet-aware dense signal: the query reduced to its facet
        by_name = {r.name: r for r in retrievers}
        lexical = next(r for r in retrievers if isinstance(r, FusedRetriever)).csfcube_parts[-1]
        parts = [by_name["mean"], by_name["facet-query"], lexical]
        retrievers.append(
            FusedRetriever("hybrid-mean-fq", "mean + facet query + facet-BM25", parts)
        )
    return retrievers


def paired(measured: dict, retrievers: list, n_resamples: int) -> dict:
    """Each hybrid against its dense base(s): the paired bootstrap on the whole benchmarks and
    within each CSFCube fold."""
    from unifar.evaluation.hybrid import FusedRetriever
    from unifar.evaluation.report import verdict_table

    verdicts = {}
    for name in [r.name for r in retrievers if isinstance(r, FusedRetriever)]:
        bases = BASES.get(name.removesuffix("-rank"), ["mean"])
        verdicts[name] = {
            "all": verdict_table(measured, name, bases, n_resamples=n_resamples).to_dict(
                orient="records"
            ),
            "folds": verdict_table(
                measured,
                name,
                bases,
                folds=["fold1_test", "fold2_test"],
                n_resamples=n_resamples,
            ).to_dict(orient="records"),
        }
    return verdicts


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model", default="minilm", help="base encoder (or a UniFAR checkpoint folder)"
    )
    ap.add_argument("--benchmarks", default="csfcube,scirepeval,cranfield,pubmedqa")
    ap.add_argument("--systems", default=SYSTEMS)
    ap.add_argument(
        "--labeller", default="artifacts/ch02/full/labeller", help="chapter 2's labeller folder"
    )
    ap.add_argument(
        "--rank-fusion", action="store_true", help="also each z-score hybrid with rank fusion"
    )
    ap.add_argument(
        "--facet-query",
        action="store_true",
        help="also mean + facet-restricted query + facet-BM25 (CSFCube; facet-query in --systems)",
    )
    ap.add_argument("--cache-dir", default="artifacts/cache")
    ap.add_argument("--n-resamples", type=int, default=1000)
    ap.add_argument("--out", default="results/ch05/hybrid_minilm.json")
    ap.add_argument(
        "--combine",
        nargs="+",
        metavar="JSON",
        help="run nothing: write the outputs of earlier runs (disjoint benchmarks) as one file",
    )
    args = ap.parse_args(argv)
    if args.combine:
        return combine(args.combine, args.out)

    from unifar.evaluation.report import strip_timings
    from unifar.evaluation.runner import evaluate_all
    from unifar.files import write_json
    from unifar.runtime import run_facts

    t0 = time.perf_counter()
    retrievers = systems_of(args)
    res = evaluate_all(
        args.model,
        benchmarks=args.benchmarks.split(","),
        retrievers=retrievers,
        n_resamples=args.n_resamples,
        cache_dir=args.cache_dir,
        show_progress=False,
    )
    measured = strip_timings(res)
    verdicts = paired(measured, retrievers, args.n_resamples)
    table = summary(res)
    out = {
        "command": public_command(
            "python benchmarks/studies/hybrid_eval.py "
            + " ".join(sys.argv[1:] if argv is None else argv)
        ),
        "model": args.model,
        "summary": table,
        "verdicts": verdicts,
        "result": measured,
        "run": run_facts(t0),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    write_json(args.out, out, indent=1)
    for bench, rows in table.items():
        print(f"\n== {bench}")
        for name, row in rows.items():
            print(
                f"  {name:<32} " + "  ".join(f"{k}={v}" for k, v in row.items() if k != "chosen_on")
            )
    print(f"wrote {args.out} in {out['seconds']} s")
    return out


if __name__ == "__main__":
    main()
