"""Command line: ``python -m unifar evaluate csfcube ...`` and ``python -m unifar evaluate all ...``.

Score rankings already written in the upstream format::

    python -m unifar evaluate csfcube --rankings data/csfcube/sample_ranked_pools --json out.json

or rank the annotated pools with a model and score them::

    python -m unifar evaluate csfcube --model minilm --method mean --json results/x.json

``--json OUT`` writes ``{facet: {"map": x, "ndcg%20": y}}`` (percent, unrounded) for background,
method, result and all; the run's metadata goes to the sibling ``OUT`` with suffix ``.meta.json``.

Every system on every benchmark in one run (:func:`unifar.evaluation.runner.evaluate_all`)::

    python -m unifar evaluate all --model minilm --json artifacts/eval.json \
        [--systems bm25,mean,facet-query,unifar] [--benchmarks csfcube,cranfield,pubmedqa,scirepeval] \
        [--base-model minilm] [--max-length N] [--doris-mae FILE] [--litsearch DIR]

writes one JSON (aggregates, per-query values, bootstrap intervals, metadata) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .files import atomic_file, sha256_file
from .runtime import run_facts

__all__ = ["main", "build_parser", "format_table"]

METHODS = ("bm25", "mean", "facet-query", "unifar")


def build_parser() -> argparse.ArgumentParser:
    """The ``unifar`` argument parser."""
    parser = argparse.ArgumentParser(prog="unifar", description="UniFAR reproduction tools.")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="evaluate rankings or a model on a benchmark")
    ev.add_argument("benchmark", choices=["csfcube", "all"], help="csfcube, or all: every system on every benchmark (see --systems, --benchmarks)")
    src = ev.add_mutually_exclusive_group()
    src.add_argument("--rankings", metavar="DIR", help="folder of test-pid2pool-csfcube-<name>-<facet>-ranked.json files")
    src.add_argument("--model", metavar="MODEL", help="base encoder (minilm, mpnet, hub id, path) or UniFAR checkpoint folder")
    ev.add_argument("--name", help="ranker name in the rankings folder (with --rankings) or for --save-rankings")
    ev.add_argument("--method", choices=METHODS, help="how the pools are ranked: bm25 (no --model needed), mean, facet-query, unifar (default: mean)")
    ev.add_argument("--max-length", type=int, default=None, metavar="N", help="token budget per document (default: 512, or a UniFAR checkpoint's own max_tokens)")
    ev.add_argument("--batch-size", type=int, default=32, metavar="N", help="encoding batch size (default 32)")
    ev.add_argument("--device", help="torch device (default: cuda when available, else cpu)")
    ev.add_argument("--split", choices=["test", "dev"], default="test", help="test: 2-fold test score (reported); dev: fold1_dev (tuning)")
    ev.add_argument("--no-query-title", action="store_true", help="facet-query: the query is the facet's sentences without the title")
    ev.add_argument("--exclude-self", action="store_true", help="leave a query paper out of its own pool (as the shipped SPECTER rankings do)")
    ev.add_argument("--allow-partial", action="store_true", help="with --rankings: score rankings that leave candidates of a "
                    "pool unranked, as the official scripts do (unranked candidates are not scored, which inflates MAP; "
                    "default: refuse them)")
    ev.add_argument("--json", metavar="OUT", help="write the scores as JSON (csfcube: metadata to OUT with suffix .meta.json; all: one JSON holding everything)")
    ev.add_argument("--save-rankings", metavar="DIR", help="also write the rankings in the upstream format")
    ev.add_argument("--data-dir", metavar="DIR", help="CSFCube folder (default: the repository's data/csfcube)")
    ev.add_argument("--no-progress", action="store_true", help="hide progress bars")
    ev.add_argument("--cache-dir", metavar="DIR", help="store mean-pooling embeddings here and reuse them when the same "
                    "encoder encodes the same texts again; UniFAR's base token states of CSFCube are saved there too "
                    "(about 1.5 GB for MiniLM) and read back by any model on the same base (default: no cache)")
    al = ev.add_argument_group("evaluate all")
    al.add_argument("--systems", metavar="LIST", help="comma-separated, from bm25,mean,facet-query,unifar,unifar-untrained "
                    "(default: bm25,mean,facet-query,unifar, plus unifar-untrained for a checkpoint)")
    al.add_argument("--benchmarks", metavar="LIST", help="comma-separated, from csfcube,cranfield,pubmedqa,scirepeval,doris_mae,litsearch "
                    "(default: csfcube,cranfield,pubmedqa,scirepeval, plus those whose files are given)")
    al.add_argument("--base-model", metavar="NAME", help="base encoder of the baselines (default: the checkpoint's base, or --model)")
    al.add_argument("--doris-mae", metavar="FILE", help="DORIS-MAE dataset JSON (from Zenodo)")
    al.add_argument("--doris-levels", metavar="LIST", default="query,aspect,subquery_2", help="DORIS-MAE levels (default query,aspect,subquery_2)")
    al.add_argument("--litsearch", metavar="DIR", help="local copy of princeton-nlp/LitSearch (query/ and corpus_clean/)")
    al.add_argument("--scirepeval-part", choices=["test", "train", "all"], default="test", help="SciRepEval search questions: the test half (reported, default), the train half, or all")
    al.add_argument("--n-resamples", type=int, default=1000, metavar="N", help="bootstrap resamples (default 1000)")
    al.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    ev.set_defaults(subparser=ev)
    _add_train_parser(sub)
    from .search.cli import add_search_parsers

    add_search_parsers(sub)  # encode, index, search, explain (unifar.search.cli)
    return parser


def format_table(scores: dict[str, dict[str, float]], title: str = "") -> str:
    """A fixed-width table: one row per facet, MAP and NDCG%20 columns (2 decimals).

    >>> print(format_table({"all": {"map": 34.2253, "ndcg%20": 53.2801}}))
    facet          MAP  NDCG%20
    all          34.23    53.28
    """
    lines = [title] if title else []
    lines.append(f"{'facet':<10} {'MAP':>7} {'NDCG%20':>8}")
    for facet, m in scores.items():
        lines.append(f"{facet:<10} {m['map']:>7.2f} {m['ndcg%20']:>8.2f}")
    return "\n".join(lines)


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", text).strip("_") or "run"


def _public_model_name(model: str) -> str:
    """The model as given, without machine-specific absolute paths."""
    return Path(model).name if os.path.isabs(model) else model


def _retriever(args: argparse.Namespace, method: str) -> Any:
    """The system ``--method`` names (:func:`unifar.evaluation.systems.build_retrievers`): a UniFAR
    checkpoint keeps its own max_tokens unless --max-length is given; the baselines encode with
    ``--model`` itself."""
    from .evaluation.systems import build_retrievers

    (retriever,), _ = build_retrievers(
        args.model if method != "bm25" else None, systems=[method], base_model=args.model if method != "bm25" else None,
        max_length=args.max_length, batch_size=args.batch_size, device=args.device, show_progress=not args.no_progress,
        query_title=not args.no_query_title, cache_dir=args.cache_dir,
    )
    if method == "unifar":
        retriever.cache_dir = args.cache_dir  # CSFCube's base token states are saved there and read back
    return retriever


def _evaluate_csfcube(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, dict[str, float]]:
    from .datasets.csfcube import load_csfcube
    from .evaluation.csfcube import rank_pools, read_ranked_pools, score_csfcube_ranking, write_ranked_pools

    given = [f"--{k.replace('_', '-')}" for k in _ALL_ONLY if getattr(args, k, None) is not None]
    if given:
        parser.error(f"{', '.join(given)} apply to 'evaluate all', not to 'evaluate csfcube'")
    start = time.perf_counter()
    meta: dict[str, Any] = {"benchmark": "csfcube", "split": args.split}
    if args.rankings is not None:
        if args.method:
            parser.error("--method applies to --model, not to --rankings")
        if not Path(args.rankings).is_dir():
            parser.error(f"--rankings: folder not found: {args.rankings}")
        data = load_csfcube(args.data_dir, check_texts=False)
        ranked = read_ranked_pools(args.rankings, args.name)
        _report_coverage(ranked, data, args.allow_partial)
        meta.update(source="rankings", rankings=Path(args.rankings).name, name=args.name)
        if args.allow_partial:
            meta["allow_partial"] = True
        title = f"CSFCube ({args.split}), rankings in {args.rankings}"
    else:
        method = args.method or "mean"
        if args.model is None and method != "bm25":
            parser.error("give --rankings DIR, or --model MODEL (or --method bm25)")
        if args.no_query_title and method != "facet-query":
            parser.error("--no-query-title applies to --method facet-query only")
        if args.max_length is not None and args.max_length < 8:
            parser.error(f"--max-length must be at least 8, got {args.max_length}")
        if args.batch_size < 1:
            parser.error(f"--batch-size must be positive, got {args.batch_size}")
        if args.allow_partial:
            parser.error("--allow-partial applies to --rankings: a model ranks every candidate")
        _check_device_and_models(args.device, args.model if method != "bm25" else None)
        data = load_csfcube(args.data_dir)
        ranked = rank_pools(_retriever(args, method), data, exclude_query=args.exclude_self)
        model = _public_model_name(args.model) if args.model and method != "bm25" else None
        meta.update(
            source="model",
            method=method,
            model=model,
            # None for unifar: the checkpoint's own max_tokens (512 for a base-model name)
            max_length=None if method == "bm25" else (args.max_length or 512) if method != "unifar" else args.max_length,
            batch_size=args.batch_size if method != "bm25" else None,
            exclude_query_from_pool=args.exclude_self,
            query_title=not args.no_query_title if method == "facet-query" else None,
        )
        title = f"CSFCube ({args.split}), method={method}" + (f", model={model}" if model else "")
        if args.save_rankings:
            name = _safe_name(args.name or "-".join(x for x in (model, method) if x))
            write_ranked_pools(ranked, args.save_rankings, name)
            meta["rankings_name"] = name
    scores, _ = score_csfcube_ranking(ranked, data, split=args.split, allow_partial=args.allow_partial)  # as `evaluate all`
    print(format_table(scores, title))
    if args.json:
        out = Path(args.json)
        _write_text(out, json.dumps(scores, indent=2) + "\n")
        abstracts = Path(data.root) / "abstracts-csfcube-preds.jsonl" if data.root else None
        meta.update(
            wall_seconds=round(time.perf_counter() - start, 1),
            abstracts_sha256=sha256_file(abstracts) if abstracts and abstracts.is_file() else None,
            run=run_facts(start),
        )
        meta_path = out.with_name(out.name[: -len(out.suffix)] + ".meta.json" if out.suffix else out.name + ".meta.json")
        _write_text(meta_path, json.dumps(meta, indent=2) + "\n")
        print(f"wrote {out} and {meta_path}")
    return scores


def _write_text(path: Path, text: str) -> None:
    """Write a result file atomically: a reader or a parallel run never sees a half-written one."""
    atomic_file(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def _check_device_and_models(device: str | None, *models: str | None) -> None:
    """Fail on a ``--device`` this machine lacks, or a model name that names nothing (``minlm``),
    before any data or model is loaded (:func:`unifar.base_models.check_model_name`)."""
    from .base_models import check_model_name
    from .evaluation.systems import is_unifar_checkpoint

    for model in models:
        if model is not None and not is_unifar_checkpoint(model):
            check_model_name(model)  # ValueError / FileNotFoundError naming the short names
    if device is not None:
        from .runtime import pick_device

        pick_device(device)  # ValueError naming the devices that exist


def _report_coverage(ranked: Any, data: Any, allow_partial: bool) -> None:
    """Say on stderr which queries of a ranking file leave candidates unranked (with
    ``--allow-partial``) and which leave only the query paper out of its own pool."""
    from .evaluation.csfcube import pool_coverage

    cov = pool_coverage(ranked, data)
    if cov["incomplete"] and allow_partial:
        n_missing = sum(x[2] for x in cov["incomplete"])
        print(f"warning: --allow-partial: {len(cov['incomplete'])} ranked queries leave {n_missing} candidates of "
              "their pools unranked; they are not scored (the official scripts' behaviour), which inflates MAP",
              file=sys.stderr)
    if cov["self_left_out"]:
        where = ", ".join(f"{q} ({f})" for f, q in cov["self_left_out"])
        print(f"note: the rankings leave the query paper out of its own pool for {len(cov['self_left_out'])} "
              f"queries [{where}], as --exclude-self does; scored without it", file=sys.stderr)


_ALL_ONLY = ("systems", "benchmarks", "base_model", "doris_mae", "litsearch")
_CSFCUBE_ONLY = ("rankings", "method", "name", "save_rankings")


def _split_list(text: str | None) -> list[str] | None:
    return [x.strip() for x in text.split(",") if x.strip()] if text else None


def _evaluate_all(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """``evaluate all``: :func:`unifar.evaluation.runner.evaluate_all`, one JSON, one printed table."""
    given = [f"--{k.replace('_', '-')}" for k in _CSFCUBE_ONLY if getattr(args, k) is not None]
    if given:
        parser.error(f"{', '.join(given)} apply to 'evaluate csfcube', not to 'evaluate all'")
    if args.allow_partial:
        parser.error("--allow-partial applies to 'evaluate csfcube --rankings', not to 'evaluate all'")
    _check_device_and_models(args.device, args.model, args.base_model)
    from .evaluation.report import format_results
    from .evaluation.runner import EvalOptions, evaluate_all, save_results

    systems = _split_list(args.systems)
    if args.model is None and (systems is None or any(s != "bm25" for s in systems)):
        parser.error("give --model MODEL (a base encoder name or a UniFAR checkpoint folder), or --systems bm25")
    try:
        options = EvalOptions(
            base_model=args.base_model, max_length=args.max_length, batch_size=args.batch_size, device=args.device,
            show_progress=not args.no_progress, csfcube_split=args.split, scirepeval_part=args.scirepeval_part,
            exclude_self=args.exclude_self, query_title=not args.no_query_title,
            data_dirs={"csfcube": args.data_dir} if args.data_dir else None, doris_mae=args.doris_mae,
            doris_levels=_split_list(args.doris_levels) or (), litsearch=args.litsearch,
            n_resamples=args.n_resamples, seed=args.seed, cache_dir=args.cache_dir,
        )
    except ValueError as err:  # name the flag, not the field ("batch_size must be ..." -> "--batch-size must be ...")
        field, rest = str(err).split(" ", 1)
        parser.error(f"--{ {'csfcube_split': 'split'}.get(field, field).replace('_', '-')} {rest}")
    result = evaluate_all(args.model, systems, _split_list(args.benchmarks), options)
    print(format_results(result))
    print(f"wall time {result['meta']['wall_seconds']:.1f} s")
    if args.json:
        print(f"wrote {save_results(result, args.json)}")
    return result


# ----- train ----------------------------------------------------------------------------------
def _add_train_parser(sub: Any) -> None:
    """``unifar train``: see :mod:`unifar.train` (also for the torchrun launch)."""
    tr = sub.add_parser("train", help="train UniFAR on an FTU folder (section 4.2, appendix A)")
    tr.add_argument("--ftus", required=True, metavar="DIR", help="FTU folder written by unifar.datasets.ftu_files.write_ftus")
    tr.add_argument("--output", required=True, metavar="DIR", help="run folder: checkpoints/, log.jsonl, run.json, final/")
    tr.add_argument("--config", metavar="JSON", help="UniFARConfig JSON file (default: the built-in defaults)")
    tr.add_argument("--profile", choices=["default", "paper"], default="default",
                    help="paper: MPNet base, lr 3e-6 for base and anchors, the paper's other values (appendix A)")
    tr.add_argument("--base-model", metavar="NAME", help="minilm, mpnet, a hub id or a local encoder folder")
    tr.add_argument("--ablation", metavar="NAME", help="a table-3 ablation, e.g. 'w/o L_KL' (see unifar.config.ABLATIONS)")
    tr.add_argument("--max-tokens", type=int, metavar="N", help="token budget per input")
    tr.add_argument("--epochs", type=int, metavar="N", help="override the config's epochs")
    tr.add_argument("--max-steps", type=int, metavar="N", help="stop after N optimizer steps (the schedule ends there)")
    tr.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    tr.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None, help="bf16 autocast (default: on CUDA)")
    tr.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --output")
    tr.add_argument("--save-every", type=int, default=500, metavar="N", help="checkpoint every N optimizer steps (default 500)")
    tr.add_argument("--keep-checkpoints", type=int, default=2, metavar="N", help="checkpoints kept (default 2)")
    tr.add_argument("--delete-checkpoints-when-done", action="store_true",
                    help="delete checkpoints/ once final/ is written (they only serve a resume)")
    tr.add_argument("--log-every", type=int, default=1, metavar="N", help="log.jsonl record every N steps (default 1)")
    tr.add_argument("--seed", type=int, default=0, help="seed of the run (default 0)")
    tr.add_argument("--max-positives", type=int, metavar="K", help="sample at most K positives per facet and FTU (default: all)")
    tr.add_argument("--max-negatives", type=int, metavar="K", help="sample at most K negatives per facet and FTU (default: all)")
    tr.add_argument("--eval-fraction", type=float, default=0.0, metavar="X", help="hold out this fraction of FTUs for a held-out loss")
    tr.add_argument("--eval-every", type=int, default=0, metavar="N", help="held-out loss every N steps (default: at the end)")
    tr.add_argument("--grad-clip", type=float, default=1.0, metavar="X", help="gradient norm clip (default 1.0; 0 = none)")
    tr.add_argument("--max-loss", type=float, default=100.0, metavar="X", help="stop when the loss exceeds X (default 100)")
    tr.add_argument("--freeze-base", action="store_true",
                    help="train only the anchors and the aggregation module over cached base states (our CPU profile)")
    tr.add_argument("--train-top-layers", type=int, default=0, metavar="K",
                    help="with --freeze-base: the top K layers of the base still train, on cached states of the "
                         "layers below (BERT-style bases; default 0)")
    tr.add_argument("--top-layers-dropout", action="store_true",
                    help="with --train-top-layers: dropout in the trained layers (off by default: it halves the "
                         "speed on a CPU)")
    tr.add_argument("--fixed-values", action="store_true",
                    help="keep the attentions' value/output projections at their init (train_values=False; "
                         "chapter 4's CPU profile, with --freeze-base and --ablation 'w/o MHA_tok')")
    tr.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    tr.set_defaults(subparser=tr)


def _train_config(args: argparse.Namespace) -> Any:
    """The UniFARConfig of a ``train`` command: --config or the defaults, then --profile, then flags."""
    from .config import PAPER_PROFILE, UniFARConfig

    cfg = UniFARConfig.from_json(args.config) if args.config else UniFARConfig()
    d = cfg.to_dict()
    if args.profile == "paper":
        d.update(PAPER_PROFILE)
    if args.base_model:
        d["base_model"] = args.base_model
    if args.max_tokens is not None:
        d["max_tokens"] = args.max_tokens
    if getattr(args, "fixed_values", False):
        d["train_values"] = False
    cfg = UniFARConfig.from_dict(d)
    return cfg.ablation(args.ablation) if args.ablation else cfg


def _train_args(args: argparse.Namespace) -> Any:
    from .config import TrainArgs

    return TrainArgs(
        output_dir=args.output, epochs=args.epochs, max_steps=args.max_steps, max_positives=args.max_positives,
        max_negatives=args.max_negatives, save_every=args.save_every, keep_checkpoints=args.keep_checkpoints,
        keep_checkpoints_when_done=not args.delete_checkpoints_when_done,
        log_every=args.log_every, eval_fraction=args.eval_fraction, eval_every=args.eval_every, seed=args.seed,
        device=args.device, bf16=args.bf16, grad_clip=args.grad_clip or None, max_loss=args.max_loss,
        resume=args.resume, progress=not args.no_progress, freeze_base=args.freeze_base,
        train_top_layers=args.train_top_layers, top_layers_dropout=args.top_layers_dropout,
    )


def _train_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    from .datasets.ftu_files import load_ftus
    from .train import TrainingDiverged, train

    config = _train_config(args)
    try:
        targs = _train_args(args)
    except ValueError as err:  # e.g. --train-top-layers without --freeze-base
        parser.error(str(err))
    data = load_ftus(args.ftus)
    try:
        res = train(config, data, targs)
    except FileExistsError as err:
        parser.error(str(err))
    except TrainingDiverged as err:
        sys.exit(f"error: {err}")
    if not res.run_info:  # a rank other than 0 under torchrun
        return
    info = res.run_info
    terms = ", ".join(f"{k} {v:.4f}" for k, v in res.last_terms.items())
    mem = info["peak_memory"]["bytes"]
    print(f"trained {config.base_model}: steps {res.start_step}->{res.steps} of {info['total_steps']} "
          f"({info['n_train_ftus']} FTUs, {info['ftus_per_step']} per step, world size {info['world_size']})")
    print(f"last step: {terms}")
    if info.get("held_out"):
        print(f"held-out loss: {info['held_out']['loss']:.4f}")
    print(f"time {info['wall_seconds']:.1f} s, {info['ftus_per_second']} FTUs/s, peak memory "
          f"{mem / 2**30:.2f} GiB ({info['peak_memory']['kind']})" if mem else "")
    print(f"final model: {res.final_dir} (python -m unifar evaluate csfcube --model {res.final_dir} --method unifar)")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m unifar`` and the ``unifar`` script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "evaluate" and args.benchmark == "csfcube":
            _evaluate_csfcube(args, args.subparser)
        elif args.command == "evaluate" and args.benchmark == "all":
            _evaluate_all(args, args.subparser)
        elif args.command == "train":
            _train_command(args, args.subparser)
        else:  # encode, index, search, explain
            from .search.cli import run_search_command

            run_search_command(args)
    except (FileNotFoundError, ValueError, KeyError, ModuleNotFoundError) as err:
        msg = err.args[0] if isinstance(err, KeyError) and err.args else err
        getattr(args, "subparser", parser).error(str(msg))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
