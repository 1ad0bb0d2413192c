"""What does one point of a training run's fold1_dev curve cost when the base encoder trains?

A run that trains the whole encoder stack (chapter 4's E2) cannot cache the base's token states,
so each point of its dev curve (:mod:`unifar.learning_curve`) encodes every paper it scores with
the whole model. This script times, for UniFAR on an untrained base without a state cache (the
cost of a trained base), the three ways of measuring CSFCube fold1_dev MAP:

* the whole collection: every one of the 4,205 papers of the pools, ranked and aggregated
  (``UniFARRetriever.csfcube_score_fn`` + ``aggregate_csfcube(split="dev")``: what
  ``benchmarks/studies/tune_dev.py``'s dev curve did before);
* fold1_dev's own papers (:func:`unifar.learning_curve.csfcube_dev_measure`): its query papers
  and their pools only; the same MAP to the printed 0.01;
* the first ``--max-queries`` query facets of each facet: a quick curve, not the split's number.

    python benchmarks/dev_point.py --out results/ch04/dev_point_cost.json

Prints a table and writes JSON with the run facts (commit, machine, duration).
"""

from __future__ import annotations

import argparse
import time


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-model", default="minilm")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--max-queries", type=int, default=4, help="query facets per facet of the quick curve")
    ap.add_argument("--out", default="results/ch04/dev_point_cost.json")
    args = ap.parse_args(argv)

    import torch

    from unifar import UniFAR, UniFARConfig
    from unifar.datasets.csfcube import load_csfcube
    from unifar.evaluation.csfcube import aggregate_csfcube, csfcube_per_query, csfcube_split_papers, rank_pools
    from unifar.evaluation.dense import UniFARRetriever
    from unifar.files import write_json
    from unifar.learning_curve import csfcube_dev_measure
    from unifar.runtime import run_facts

    start = time.perf_counter()
    cube = load_csfcube()
    model = UniFAR(UniFARConfig(base_model=args.base_model, max_tokens=args.max_tokens)).eval()

    def whole_collection(m, record) -> float:
        ranked = rank_pools(UniFARRetriever(m).csfcube_score_fn(cube), cube)
        return aggregate_csfcube(csfcube_per_query(ranked, cube), cube, split="dev")["all"]["map"]

    ways = {"whole collection": (whole_collection, len(cube.pool_pids())),
            "fold1_dev's papers": (csfcube_dev_measure(cube), len(csfcube_split_papers(cube, "fold1_dev")[0])),
            f"first {args.max_queries} query facets per facet":
                (csfcube_dev_measure(cube, max_queries=args.max_queries),
                 len(csfcube_split_papers(cube, "fold1_dev", max_queries=args.max_queries)[0]))}
    rows = {}
    print(f"{'fold1_dev MAP from':<36} {'papers':>7} {'seconds':>8} {'MAP':>7}")
    for name, (measure, n_papers) in ways.items():
        t0 = time.perf_counter()
        with torch.no_grad():
            value = float(measure(model, {}))
        rows[name] = {"papers": n_papers, "seconds": round(time.perf_counter() - t0, 1), "fold1_dev_map": round(value, 4)}
        print(f"{name:<36} {n_papers:>7} {rows[name]['seconds']:>8.1f} {value:>7.2f}", flush=True)
    same = round(rows["whole collection"]["fold1_dev_map"], 2) == rows["fold1_dev's papers"]["fold1_dev_map"]
    out = {"what": "seconds of one fold1_dev point of a dev curve for UniFAR without a state cache (a trained "
                   "base), by the papers it encodes; measured here",
           "model": args.base_model, "max_tokens": args.max_tokens, "threads": torch.get_num_threads(),
           "rows": rows, "same_map_to_0.01": same,
           "speed_up": round(rows["whole collection"]["seconds"] / rows["fold1_dev's papers"]["seconds"], 2),
           "run": run_facts(start)}
    print(f"same MAP to 0.01: {same}; fold1_dev's papers are {out['speed_up']}x faster")
    write_json(args.out, out)
    print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
