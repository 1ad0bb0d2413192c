"""The reproduction summary: every row of the paper's tables the book touches, reported beside
measured, with a status.

:func:`reproduction_summary` reads the paper's numbers from :mod:`unifar.paper` and the book's
measurements from the chapters' committed ``full`` results (``results/<chapter>/full/*.json``),
plus the one measurement it makes itself (scoring the SPECTER rankings CSFCube ships), and
returns one row per (table, system, metric):

* ``reproduced exactly``: the same system on the same data gives the paper's digits;
* ``reproduced``: the paper's claim holds here, beyond the paired bootstrap's noise;
* ``within noise``: the measured difference is inside the 95 % paired bootstrap interval of 0, and
  no minimum detectable effect was stated for the comparison;
* ``underpowered``: within noise, and the benchmark's minimum detectable effect (stated before the
  comparison, :mod:`unifar.evaluation.power`) is larger than the effect the paper reports, so the
  comparison could not have seen it;
* ``differs``: measured here, and not the paper's number; ``why`` says what differs;
* ``not runnable offline``: the data or weights are not available offline; ``why`` says what a
  user who has them runs;
* ``not run yet``: a chapter of the book that would measure it is still planned;
* ``beyond the paper``: a system the paper does not have (the facet-aware hybrid of chapter 5),
  measured here and shown beside the paper's best row.

The book's page ``book/reproduction_summary`` shows the table; the statuses are computed here, the
reasons are stated once, beside the rows they explain.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import paper
from .datasets.csfcube import load_csfcube
from .evaluation.ablation import PAPER_ROWS
from .evaluation.csfcube import evaluate_csfcube_rankings, read_ranked_pools
from .evaluation.power import labelled_verdicts
from .evaluation.report import HEADLINE_METRICS
from .files import REPO

__all__ = ["STATUSES", "SummaryRow", "reproduction_summary", "summary_frame", "summary_section"]

STATUSES = ("reproduced exactly", "reproduced", "within noise", "underpowered", "differs", "not runnable offline",
            "not run yet", "beyond the paper")


def _status(verdict: str, agrees: bool = True) -> str:
    """A summary status from a comparison's verdict (:func:`unifar.evaluation.power.verdict`'s labels
    or the plain bootstrap's): "better"/"worse" reproduce the paper when their sign ``agrees`` with
    the paper's; "no detectable difference" (the paper's effect would have shown) differs.

    >>> _status("underpowered"), _status("no detectable difference"), _status("worse", agrees=False)
    ('underpowered', 'differs', 'differs')
    """
    if verdict in ("within noise", "underpowered"):
        return verdict
    if verdict == "no detectable difference":
        return "differs"
    return "reproduced" if agrees else "differs"


def _mde_text(verdict: Mapping[str, Any]) -> str:
    """", minimum detectable effect X" for a verdict that states one (a number, not NaN), else ""."""
    mde = verdict.get("mde")
    return f", minimum detectable effect {mde:.2f}" if mde is not None and mde == mde else ""


DORIS_NEEDS = ("the DORIS-MAE dataset JSON (Zenodo): `python -m unifar evaluate all --model M --doris-mae FILE` "
               "(chapter 5's `doris_mae` parameter)")
LITSEARCH_NEEDS = ("a local copy of princeton-nlp/LitSearch: `python -m unifar evaluate all --model M --litsearch DIR` "
                   "(chapter 5's `litsearch` parameter)")
NO_WEIGHTS = "its weights are not shipped on PyPI, so it cannot be loaded offline; online, give its hub name as `model`"
GPU_AND_LLM = ("training it needs a GPU for the trainable MPNet/SciBERT base and LLM-built FTUs (chapter 3's `llm` "
               "back ends); chapter 4's `paper` profile is that recipe")


@dataclass
class SummaryRow:
    """One cell of a paper's table beside what the book measured."""

    table: str
    system: str
    metric: str
    reported: float | None
    measured: float | None
    measured_as: str  # what exactly was measured, and where (chapter, profile)
    status: str
    why: str


def _full(chapter: str, name: str, root: Path) -> dict[str, Any] | None:
    path = root / chapter / "full" / f"{name}.json"
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))["results"]


def _specter_rows(data_dir: Path) -> list[SummaryRow]:
    cube = load_csfcube(data_dir)
    measured = evaluate_csfcube_rankings(read_ranked_pools(data_dir / "sample_ranked_pools"), cube)
    rows = []
    for facet, label in (("background", "background"), ("method", "method"), ("result", "result"), ("all", "aggregated")):
        for metric, key in (("MAP", "map"), ("NDCG%20", "ndcg%20")):
            col = f"{label} {metric}"
            rep, got = paper.UNIFAR_TABLE2.value("SPECTER", col), measured[facet][key]
            exact = round(got, 2) == rep
            rows.append(SummaryRow(
                "table 2 (CSFCube)", "SPECTER", col, rep, got, "the SPECTER rankings CSFCube ships, official protocol (chapter 1)",
                "reproduced exactly" if exact else "differs",
                "the protocol (pools, grades >= 2, NDCG%20 with the first two ranks undiscounted, 2-fold mean)"
                if exact else "the protocol implementation no longer gives the golden values: a bug"))
    return rows


def _csfcube_rows(ch01: Mapping[str, Any] | None) -> list[SummaryRow]:
    rows: list[SummaryRow] = []
    t2 = paper.UNIFAR_TABLE2
    agg = ("aggregated MAP", "aggregated NDCG%20")
    key = {"aggregated MAP": "map", "aggregated NDCG%20": "ndcg%20"}
    mpnet = (ch01 or {}).get("pools_as_annotated", {}).get("mpnet mean pooling")
    for col in agg:
        rows.append(SummaryRow(
            "table 2 (CSFCube)", "MPNet", col, t2.value("MPNet", col),
            mpnet["all"][key[col]] if mpnet else None,
            "all-mpnet-base-v2, mean pooling of title [SEP] abstract, 512 tokens (chapter 1, full profile)",
            "differs" if mpnet else "not run yet",
            "the paper does not say which MPNet checkpoint, input recipe or self-candidate rule it used; the "
            "sentence-transformers checkpoint measured here is stronger, about by the paper's own UniFAR-MPNet gain"))
    for system in ("UniFAR-MPNet", "UniFAR-SciBERT", "UniFAR-Contriever"):
        for col in agg:
            rows.append(SummaryRow("table 2 (CSFCube)", system, col, t2.value(system, col), None,
                                   "not trained here (the trained model of this book is UniFAR-MiniLM, below)",
                                   "not runnable offline", GPU_AND_LLM))
    for system in ("SciBERT", "SPECTER-2", "SciNCL", "Contriever"):
        rows.append(SummaryRow("table 2 (CSFCube)", system, "aggregated MAP", t2.value(system, "aggregated MAP"), None,
                               "not measured", "not runnable offline", NO_WEIGHTS))
    return rows


def _gain_rows(ch05: Mapping[str, Any] | None) -> list[SummaryRow]:
    """The paper's central claim: UniFAR beats its own base encoder."""
    t2, t1 = paper.UNIFAR_TABLE2, paper.UNIFAR_TABLE1
    reported = t2.value("UniFAR-MPNet", "aggregated MAP") - t2.value("MPNet", "aggregated MAP")
    rows = []
    verdicts = [v for v in (ch05 or {}).get("verdicts", [])
                if v.get("vs") == "mean" and not v.get("fold")]
    for bench, metric, what in (("csfcube", "all/map", "CSFCube aggregated MAP"),
                                ("cranfield", "ndcg@10", "Cranfield nDCG@10"),
                                ("pubmedqa", "mrr@10", "PubMedQA MRR@10"),
                                ("scirepeval", "ndcg@10", "SciRepEval search nDCG@10")):
        v = next((x for x in verdicts if x["benchmark"] == bench and x["metric"] == metric), None)
        rep = reported if bench == "csfcube" else None
        if v is None:
            rows.append(SummaryRow("claim: UniFAR beats its base", "UniFAR - base", what, rep, None,
                                   "chapter 5, full profile", "not run yet", "chapter 5's full results are missing"))
            continue
        status = _status(v["verdict"], agrees=v["verdict"] != "worse")
        mde = _mde_text(v)
        why = (f"paired bootstrap over queries, 95 % interval [{v['ci_low']:.2f}, {v['ci_high']:.2f}]{mde}; the paper's "
               "gain is for MPNet (+ LLM-built FTUs, full fine-tuning), ours for MiniLM with a frozen base on offline "
               "FTUs (chapters 4 and 5 show why a frozen base caps the gain)")
        rows.append(SummaryRow("claim: UniFAR beats its base", "UniFAR-MiniLM - MiniLM mean pooling", what, rep, v["diff"],
                               "chapter 5, full profile (chapter 4's model, seed 0)", status, why))
    doris = t1.value("UniFAR-MPNet", "Query MAP") - t1.value("MPNet", "Query MAP")
    rows.append(SummaryRow("claim: UniFAR beats its base", "UniFAR-MPNet - MPNet", "DORIS-MAE Query MAP", doris, None,
                           "not measured", "not runnable offline", DORIS_NEEDS))
    return rows


def _table1_rows() -> list[SummaryRow]:
    t1 = paper.UNIFAR_TABLE1
    return [SummaryRow("table 1 (DORIS-MAE)", system, col, t1.value(system, col), None, "not measured",
                       "not runnable offline", DORIS_NEEDS)
            for system in ("MPNet", "UniFAR-MPNet") for col in ("Query MAP", "Aspect MAP", "Subquery_2 MAP")]


def _table8_rows() -> list[SummaryRow]:
    t8 = paper.UNIFAR_TABLE8
    return [SummaryRow("table 8 (LitSearch)", system, col, t8.value(system, col), None, "not measured",
                       "not runnable offline", LITSEARCH_NEEDS)
            for system in t8.rows for col in ("Recall@10",) if col in t8.rows[system]]


def _table3_rows(ch06: Mapping[str, Any] | None) -> list[SummaryRow]:
    """Table 3 (CSFCube aggregated MAP): each row's mean over seeds; a variant's status is the paired
    bootstrap of its difference to the full row against the paper's difference."""
    t3, col = paper.UNIFAR_TABLE3, "CSFCube aggregated MAP"
    ours = {paper_row: row for row, paper_row in PAPER_ROWS.items()}
    means = (ch06 or {}).get("table_mean", {})
    verdicts = {v["row"]: v for v in (ch06 or {}).get("verdicts", []) if v["column"] == col}
    n_seeds = len({r["seed"] for r in (ch06 or {}).get("runs", {}).values()})
    kd = (ch06 or {}).get("base_distill_weight", 0.0)
    objective = (f", every row also distilling chapter 3's teacher (weight {kd:g}, beyond the paper)" if kd
                 else "")
    rows = []
    for system in t3.rows:
        row = ours.get(system)
        value = means.get(row, {}).get(col) if row else None
        if value is None:
            rows.append(SummaryRow("table 3 (ablation)", system, col, t3.value(system, col), None, "not measured",
                                   "not run yet", "chapter 6's full results are missing"))
            continue
        measured_as = f"UniFAR-MiniLM, frozen base, row '{row}', mean of {n_seeds} seeds{objective} (chapter 6, full profile)"
        if row == "full":
            rows.append(SummaryRow("table 3 (ablation)", system, col, t3.value(system, col), value, measured_as,
                                   "differs", "MiniLM with a frozen base on offline FTUs, not a fine-tuned SciBERT on "
                                   f"{paper.UNIFAR_FACTS_PRINTED['ftus']} LLM-built FTUs; the variants below are "
                                   "compared with this row"))
            continue
        v = verdicts[row]
        theirs = t3.value(system, col) - t3.value("UniFAR (full)", col)
        status = _status(v["verdict"], agrees=(v["diff"] > 0) == (theirs > 0))
        mde = _mde_text(v)
        why = (f"row - full = {v['diff']:+.2f} measured (95 % paired interval [{v['ci_low']:.2f}, {v['ci_high']:.2f}]"
               f"{mde}), {theirs:+.2f} reported")
        rows.append(SummaryRow("table 3 (ablation)", system, col, t3.value(system, col), value, measured_as, status, why))
    return rows


def _hybrid_rows(root: Path) -> list[SummaryRow]:
    """The facet-aware hybrid (mean pooling + facet BM25, weight chosen on fold1_dev) of chapter 5's
    benchmark study, beside the best row of the paper's table 2: with CSFCube's own sentence labels
    (``hybrid-mean``) and with chapter 2's labeller's (``hybrid-mean-labeller``, what a user's
    corpus gets)."""
    from .evaluation.hybrid import relative_weights  # W as every chapter writes it

    best = paper.UNIFAR_TABLE2.value("UniFAR-MPNet", "aggregated MAP")
    rows = []
    for model, stem in (("minilm", "hybrid_minilm"), ("minilm", "hybrid_minilm_labeller"),
                        ("mpnet", "hybrid_mpnet")):
        path = root / "ch05" / f"{stem}.json"
        if not path.is_file():
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        runs = record.get("runs", [record])
        summary = next((r["summary"]["csfcube"] for r in runs if "csfcube" in r.get("summary", {})), {})
        for key, labels in (("hybrid-mean", "CSFCube's sentence labels"),
                            ("hybrid-mean-labeller", "chapter 2's labeller's sentence labels")):
            if key not in summary:
                continue
            h, m = summary[key], summary["mean"]
            system = f"{model} mean pooling + facet BM25" + (" (labeller)" if key.endswith("labeller") else "")
            rows.append(SummaryRow(
                "beyond the paper: facet-aware hybrid (CSFCube)", system, "aggregated MAP",
                best, h["map"], f"benchmarks/studies/hybrid_eval.py, results/ch05/{stem}.json (chapter 5)",
                "beyond the paper",
                f"no training; facet BM25 over {labels}; weight W = {relative_weights(h['weights'])[-1]:.3g} chosen on fold1_dev; "
                f"{m['map']:.2f} for mean pooling alone; on fold1_test (never tuned on) {h['fold1_test map']:.2f} "
                f"vs {m['fold1_test map']:.2f}; the reported number is UniFAR-MPNet's, the best row of table 2"))
    return rows


def _labelled(res: Mapping[str, Any] | None, base: str, reference: str) -> list[dict[str, Any]]:
    """A chapter's saved verdicts with their power labels (:func:`unifar.evaluation.power.labelled_verdicts`;
    a record saved before the labels is labelled from its per-query scores)."""
    if not res or not res.get("verdicts"):
        return []
    if all("mde" in v for v in res["verdicts"]) or "benchmarks" not in res:
        return list(res["verdicts"])  # labelled already, or no per-query scores to label them by
    return labelled_verdicts(res, base, reference, folds=(None, "fold1_test")).to_dict(orient="records")


def _flew_rows(ch07: Mapping[str, Any] | None) -> list[SummaryRow]:
    """FLeW (chapter 7): UniFAR's table 2 row FLeW-bg/mt/rs (each CSFCube facet ranked by its own
    facet encoder) and FLeW's table 1 SciRepEval search column, beside FLeW-MiniLM trained here."""
    t2, t1 = paper.UNIFAR_TABLE2, paper.FLEW_TABLE1
    systems = {b: e["systems"] for b, e in (ch07 or {}).get("benchmarks", {}).items()}
    verdicts = [v for v in _labelled(ch07, "mean", "unifar-trained")
                if v.get("system") == "flew-cls" and not v.get("fold")]
    what = ("FLeW-MiniLM, [CLS] pooling, top base layer trained per facet on chapter 3's FTU triplets "
            "(chapter 7, full profile)")
    why = ("FLeW fine-tunes all of SciBERT on triplets sampled from a citation graph with intents, which is not "
           "available offline; here three MiniLM encoders train their top layer on the hybrid teacher's triplets")
    rows = []
    cube = systems.get("csfcube", {}).get("flew-cls")
    for label, key in (("background", "background"), ("method", "method"), ("result", "result"),
                       ("aggregated", "all")):
        col = f"{label} MAP"
        value = cube["metrics"][f"{key}/map"] if cube else None
        extra = ""
        if key == "all" and cube:
            v = next((x for x in verdicts if x["benchmark"] == "csfcube" and x["metric"] == "all/map"
                      and x["vs"] == "mean"), None)
            if v is not None:
                extra = (f"; {v['diff']:+.2f} against MiniLM mean pooling (paired 95 % interval "
                         f"[{v['ci_low']:.2f}, {v['ci_high']:.2f}]{_mde_text(v)}, {v['verdict']})")
        rows.append(SummaryRow("table 2 (CSFCube)", "FLeW-bg/mt/rs", col, t2.value("FLeW-bg/mt/rs", col), value,
                               what if cube else "not measured", "differs" if cube else "not run yet",
                               (why + extra) if cube else "chapter 7's full results are missing"))
    search = systems.get("scirepeval", {}).get("flew-cls")
    rows.append(SummaryRow(
        "FLeW table 1 (SciRepEval)", "FLeW", "Search nDCG", t1.value("FLeW", "Search"),
        search["metrics"]["ndcg@10"] if search else None,
        (what.replace("(chapter 7", "eq. 8 with weights chosen on the training half; our sample of SciRepEval "
                      "search's test set, nDCG@10 (chapter 7") if search else "not measured"),
        "differs" if search else "not run yet",
        (why + "; SciRepEval's search test here is the offline sample of chapter 5, not the full test set")
        if search else "chapter 7's full results are missing"))
    return rows


def _multi_objective_rows(ch08: Mapping[str, Any] | None) -> list[SummaryRow]:
    """The multi-objective paper (chapter 8): each row of its tables 1 and 2 beside the run of ours
    that stands for it (its q-doc and doc-doc column beside ours: different benchmarks, both x100),
    and each of its findings counted alike on its numbers and ours
    (:func:`unifar.multi_objective.report.findings`)."""
    import pandas as pd

    from .multi_objective.experiments import TABLE1, TABLE2
    from .multi_objective.report import CLAIMS, findings, paper_frame

    res = ch08 or {}
    scores = res.get("scores", {})
    trained = pd.DataFrame(scores).T.drop(index=["base", "unifar-trained"], errors="ignore")
    ours = findings(trained) if len(trained) else {}
    # each benchmark's headline metric on the whole benchmark, as chapter 8 counts them
    verdicts = [v for v in _labelled(res, "base", "unifar-trained") if not v.get("fold")
                and v.get("metric", "all/map") == HEADLINE_METRICS.get(v.get("benchmark"), ("all/map",))[0]]
    moved = {v["system"] for v in verdicts if v["verdict"] in ("better", "worse")}
    n_runs = len({v["system"] for v in verdicts})
    n_under = sum(v["verdict"] == "underpowered" for v in verdicts)
    noise_label = "underpowered" if n_under > len(verdicts) / 2 else "within noise"
    where = "MiniLM mean pooling, top base layer trained (chapter 8, full profile)"
    how_long = ("one layer trained until its held-out loss flattened"
                if any(e.get("dev_curve") for e in res.get("experiments", {}).values()) else "a few dozen steps")
    missing = "chapter 8's full results are missing"
    reported = paper_frame()
    theirs = findings(reported)
    rows = []
    for exp in dict.fromkeys(TABLE1 + TABLE2):
        table, row = exp.paper_row()
        got = scores.get(exp.name)
        noise = ("beyond the untrained base's noise on a benchmark" if exp.name in moved
                 else "within the untrained base's noise on every benchmark")
        for metric, col, ours_col in (("q-doc: paper BEIR nDCG@10, here SciRepEval (x100)", "BEIR subset", "scirepeval"),
                                      ("doc-doc: paper ICLR2022, here CSFCube MAP (x100)", "ICLR2022", "csfcube")):
            value = got.get(ours_col) if got else None
            rows.append(SummaryRow(
                f"multi-objective {table}", row, metric, 100 * float(reported.at[exp.name, col]), value,
                f"our run {exp.name} ({noise})" if got else "not measured",
                "differs" if got else "not run yet",
                f"different benchmarks, a sentence encoder as the base, {how_long}" if got else missing))
    for claim, text in CLAIMS.items():
        t, o = theirs[claim], ours.get(claim)
        if o is None:
            status, why = "not run yet", missing
        else:
            # when at most 10 % of the runs move beyond the base's noise (chapter 6's threshold),
            # the comparisons between runs are comparisons of noise, whatever they count
            # ... and when most of those comparisons could not have detected the paper's effect, the
            # noise says nothing: underpowered
            status = ((noise_label if len(moved) <= 0.1 * max(1, n_runs) else
                       "reproduced" if (t["share"] > 0.5) == (o["share"] > 0.5) else "differs"))
            why = (f"{text}; holds in {t['holds']} of {t['of']} comparisons in the paper, {o['holds']} of "
                   f"{o['of']} here ({o['ties']} ties left out); {len(moved)} of {n_runs} trained runs differ "
                   f"from the untrained base beyond noise; {n_under} of {len(verdicts)} comparisons with the base "
                   "are underpowered")
        rows.append(SummaryRow("multi-objective findings", claim, "share of comparisons (%)", 100 * t["share"],
                               100 * o["share"] if o else None, where if o else "not measured", status, why))
    return rows


def _appendix_b_rows(ch03: Mapping[str, Any] | None) -> list[SummaryRow]:
    ftus = None
    if ch03 is not None:
        stats = ch03.get("statistics") or ch03.get("ftu_statistics") or {}
        ftus = stats.get("ftus")
    return [SummaryRow("appendix B (training data)", "FTUs", "count", float(paper.UNIFAR_FACTS["ftus"]),
                       float(ftus) if ftus is not None else None,
                       "offline FTUs from public corpora (chapter 3, full profile)", "differs",
                       "built offline from CSAbstruct, NICTA-PIBOSO, PubMedQA and SciRepEval with a hybrid teacher and "
                       "cropped questions, instead of FLeW's citation-intent triplets labelled and questioned by an LLM")]


def reproduction_summary(results_dir: str | Path | None = None, data_dir: str | Path | None = None) -> list[SummaryRow]:
    """Every summary row (see the module docstring), from the committed full results under
    ``results_dir`` (default: the repository's ``results/``) and CSFCube under ``data_dir``."""
    root = Path(results_dir) if results_dir is not None else REPO / "results"
    cube = Path(data_dir) if data_dir is not None else REPO / "data" / "csfcube"
    ch01, ch03, ch05 = _full("ch01", "csfcube", root), _full("ch03", "ftus", root), _full("ch05", "evaluation", root)
    ch06, ch07 = _full("ch06", "ablations", root), _full("ch07", "flew", root)
    ch08 = _full("ch08", "multi_objective", root)
    return (_specter_rows(cube) + _csfcube_rows(ch01) + _flew_rows(ch07) + _gain_rows(ch05) + _table1_rows()
            + _table8_rows() + _table3_rows(ch06) + _appendix_b_rows(ch03) + _hybrid_rows(root)
            + _multi_objective_rows(ch08))


def summary_frame(rows: list[SummaryRow]):
    """The rows as a pandas DataFrame (one row per cell), in table order."""
    import pandas as pd

    return pd.DataFrame([asdict(r) for r in rows])


def summary_section(rows: list[SummaryRow], table_prefix: str) -> tuple[Any, str]:
    """One section of the summary page: a compact table (system, metric -> reported, measured,
    status; "-" where nothing is measured or reported) and the notes that explain it, one line
    per system as markdown (what was measured, and why the status)."""
    import pandas as pd

    part = [r for r in rows if r.table.startswith(table_prefix)]
    frame = pd.DataFrame([{"system": r.system, "metric": r.metric, "reported": r.reported,
                           "measured": r.measured, "status": r.status} for r in part])
    frame[["reported", "measured"]] = frame[["reported", "measured"]].astype(float).round(2)
    frame = frame.set_index(["system", "metric"]).astype(object).where(lambda t: t.notna(), "-")
    seen: dict[tuple[str, str, str], list[SummaryRow]] = {}
    for r in part:
        seen.setdefault((r.system, r.measured_as, r.why), []).append(r)
    several = {system for system, _, _ in seen if sum(k[0] == system for k in seen) > 1}
    lines = []
    for (system, measured_as, why), group in seen.items():
        label = f"{system} ({', '.join(r.metric for r in group)})" if system in several else system
        lines.append(f"* **{label}**: {measured_as}; {why}.")
    return frame, "\n".join(lines)
