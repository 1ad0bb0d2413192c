"""The reproduction summary: statuses computed from the committed full results and the paper."""

from __future__ import annotations

import json

from unifar import paper
from unifar.summary import STATUSES, reproduction_summary, summary_frame


def _write(root, chapter, name, results):
    path = root / chapter / "full" / f"{name}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": "unifar-chapter-results/1", "results": results}))


def test_statuses_follow_the_measurements(tmp_path):
    per = {f: {"map": 41.94, "ndcg%20": 62.42} for f in ("background", "method", "result", "all")}
    _write(tmp_path, "ch01", "csfcube", {"pools_as_annotated": {"mpnet mean pooling": per}})
    verdict = {"benchmark": "csfcube", "fold": "", "vs": "mean", "metric": "all/map", "diff": 0.62,
               "ci_low": -0.47, "ci_high": 1.80, "within_noise": True, "verdict": "within noise"}
    better = {**verdict, "benchmark": "pubmedqa", "metric": "mrr@10", "ci_low": 0.1, "within_noise": False,
              "verdict": "better"}
    systems = {"mean": {"metrics": {"all/map": 39.40, "all/ndcg%20": 59.66}},
               "unifar-trained": {"metrics": {"all/map": 40.02, "all/ndcg%20": 60.39}}}
    _write(tmp_path, "ch05", "evaluation", {"benchmarks": {"csfcube": {"systems": systems}},
                                            "verdicts": [verdict, better]})
    rows = reproduction_summary(tmp_path)
    assert {r.status for r in rows} <= set(STATUSES)
    specter = [r for r in rows if r.system == "SPECTER" and r.table.startswith("table 2")]
    assert len(specter) == 8 and all(r.status == "reproduced exactly" for r in specter)  # the golden pools
    mpnet = next(r for r in rows if r.system == "MPNet" and r.metric == "aggregated MAP")
    assert mpnet.measured == 41.94 and mpnet.status == "differs"
    assert mpnet.reported == paper.UNIFAR_TABLE2.value("MPNet", "aggregated MAP")
    gain = {r.metric: r for r in rows if r.table.startswith("claim")}
    assert gain["CSFCube aggregated MAP"].status == "within noise"
    assert gain["PubMedQA MRR@10"].status == "reproduced"
    assert gain["Cranfield nDCG@10"].status == "not run yet"  # no verdict for it in this file
    assert all(r.status == "not runnable offline" for r in rows if r.table.startswith("table 1"))
    assert all(r.status == "not run yet" for r in rows if r.table.startswith("table 3"))
    assert len(summary_frame(rows)) == len(rows)


def test_missing_full_results_leave_rows_unmeasured(tmp_path):
    rows = reproduction_summary(tmp_path)
    mpnet = next(r for r in rows if r.system == "MPNet" and r.metric == "aggregated MAP")
    assert mpnet.measured is None and mpnet.status == "not run yet"
