"""The ablation study of the paper's table 3: train every row on the same FTUs, seeds and schedule.

A *row* is a model configuration and a training mode. :data:`ROWS` holds the paper's eight (the
full model and its seven variants, :data:`unifar.config.ABLATIONS`) and two of ours: the full
model with the top base layer trained on cached lower states, and chapter 4's CPU profile.
:func:`train_rows` trains each (row, seed) into ``<output_dir>/<row folder>/seed<k>`` with a
frozen base whose token states are computed once for all rows
(:class:`~unifar.caching.TokenStateCache`), skips runs whose record says they finished with the
same settings (so an interrupted study resumes), and returns one :class:`AblationRun` per run.
The evaluation and the table are :mod:`unifar.evaluation.ablation`.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .caching import TokenStateCache
from .config import ABLATIONS, TrainArgs, UniFARConfig
from .files import atomic_file
from .frozen_base import frozen_base_mode
from .model import UniFAR
from .objective import held_out_loss
from .profiles import CH4_CPU_MODEL
from .reuse import reused_message
from .train import train
from .training_data import split_ftus

if TYPE_CHECKING:
    from .datasets.ftu_files import FTUDataset
    from .learning_curve import DevCurve

__all__ = ["CPU_PROFILE", "FULL_MODEL", "ROWS", "AblationRun", "row_config", "row_folder", "train_rows"]

#: The paper's architecture (section 3): both branches, trained value projections, trained anchors.
FULL_MODEL: dict[str, Any] = {"use_sentence_attention": True, "use_token_attention": True,
                              "train_values": True, "use_anchors": True, "freeze_anchors": False,
                              "use_input_embedding": True, "use_kl_loss": True, "use_qd_loss": True}

#: Chapter 4's CPU profile over :data:`FULL_MODEL`: questions through the sentence branch and the
#: distillation of chapter 3's teacher at weight 10 (:data:`unifar.profiles.CH4_CPU_MODEL`).
#: Without the distillation the row was "w/o MHA_tok" again, and scored like it to every digit.
CPU_PROFILE: dict[str, Any] = {k: CH4_CPU_MODEL[k] for k in ("use_token_attention", "distill_weight")}

#: Row name -> ``config`` overrides of :data:`FULL_MODEL` and ``args`` overrides of the training
#: arguments. The first eight are the paper's table 3; the last three are ours.
ROWS: dict[str, dict[str, dict[str, Any]]] = {
    **{name: {"config": dict(over), "args": {}} for name, over in ABLATIONS.items()},
    "full, top layer trained": {"config": {}, "args": {"train_top_layers": 1}},
    "chapter 4 CPU profile": {"config": dict(CPU_PROFILE), "args": {}},
    # for a base configuration that distils (chapter 6's is the paper's objective): what the teacher adds
    "w/o L_KD (the paper's objective)": {"config": {"distill_weight": 0.0}, "args": {}},
}

RECORD = "ablation_run.json"


@dataclass
class AblationRun:
    """One trained (row, seed): where its model is and what training measured."""

    row: str
    seed: int
    model_dir: str  # the final checkpoint folder
    steps: int
    ftus_seen: int
    held_out: dict[str, float] | None  # held-out L_total, L_DD, L_QD, L_KL at the end
    first_held_out: dict[str, float] | None  # the same before the first step
    seconds: float
    config: dict[str, Any]
    args: dict[str, Any]
    dev_curve: list[dict[str, Any]] | None = None  # unifar.learning_curve points, when recorded
    stopped_early: dict[str, Any] | None = None  # why the run ended before its epochs, if it did


def row_folder(row: str) -> str:
    """A folder name for a row: ``"w/o L_KL"`` -> ``"wo_L_KL"``.

    >>> row_folder("w/o MHA_sent"), row_folder("full, top layer trained")
    ('wo_MHA_sent', 'full_top_layer_trained')
    """
    return re.sub(r"[^A-Za-z0-9_]+", "_", row.replace("w/o", "wo")).strip("_")


def row_config(row: str, base: UniFARConfig) -> UniFARConfig:
    """``base`` with :data:`FULL_MODEL` and the row's overrides applied."""
    if row not in ROWS:
        raise ValueError(f"unknown ablation row {row!r}; choose from {list(ROWS)}")
    return UniFARConfig.from_dict({**base.to_dict(), **FULL_MODEL, **ROWS[row]["config"]})


def _finished(run_dir: Path, config: UniFARConfig, args: Mapping[str, Any]) -> AblationRun | None:
    """The record of a finished run with the same settings, else None."""
    path = run_dir / RECORD
    if not path.is_file() or not (run_dir / "final").is_dir():
        return None
    rec = json.loads(path.read_text(encoding="utf-8"))
    if rec.get("config") != config.to_dict() or rec.get("args") != dict(args):
        return None
    # the model is the one beside its record: the recorded path goes stale when the folder moves
    return AblationRun(**{**rec, "model_dir": str(run_dir / "final")})


def _held_out_before(model: UniFAR, ftus: FTUDataset, args: TrainArgs, cache: TokenStateCache) -> dict[str, float] | None:
    """The held-out loss terms of the untrained ``model`` on the FTUs :func:`~unifar.train.train`
    will hold out for ``args`` (same split, same sample caps; lambda at its final value)."""
    from contextlib import nullcontext

    _, eval_ftus, eval_docs = split_ftus(ftus, None, args, args.seed)
    if not eval_ftus:
        return None
    frozen_base_mode(model, args.train_top_layers)
    return held_out_loss(model, eval_ftus, eval_docs, args, 1.0, nullcontext(), cache)


def train_rows(
    ftus: FTUDataset,
    base_config: UniFARConfig,
    rows: Sequence[str],
    seeds: Sequence[int],
    output_dir: str | Path,
    train_args: Mapping[str, Any],
    cache_dir: str | Path | None = None,
    device: str | None = None,
    resume: bool = True,
    log: Callable[[str], None] | None = print,
    shared: UniFAR | None = None,
    caches: dict[int, TokenStateCache] | None = None,
    dev_curve: Callable[[UniFAR, TrainArgs, TokenStateCache], DevCurve | None] | None = None,
) -> dict[tuple[str, int], AblationRun]:
    """Train every ``row`` x ``seed`` on ``ftus`` with a frozen base (``freeze_base=True``).

    ``train_args`` are :class:`~unifar.config.TrainArgs` fields shared by every run (the row may
    add ``train_top_layers``). The frozen base is loaded once and shared; its token states are
    cached in ``cache_dir`` (one file set per depth) and reused by every row and seed. With
    ``resume``, a run whose record matches its settings is not trained again. Returns
    ``{(row, seed): AblationRun}`` in row, then seed order. ``shared``: a :class:`~unifar.UniFAR`
    whose base encoder and tokenizer the runs use (default: one loaded for ``base_config``).
    ``caches``: ``{top layers: TokenStateCache}`` of ``shared``'s base to use and fill (a chapter
    that evaluates afterwards passes its own, so the states are held in memory once).
    ``dev_curve(model, args, cache)``: a :class:`~unifar.learning_curve.DevCurve` for each run
    (e.g. :func:`~unifar.learning_curve.standard_dev_curve`), so that every row trains until its
    dev curve flattens; its points are kept in the run's record.
    """
    say = log or (lambda _msg: None)
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        raise ValueError(f"unknown ablation rows {unknown}; choose from {list(ROWS)}")
    if not train_args.get("freeze_base", True):
        raise ValueError("train_rows trains on a frozen base (freeze_base=True); the rows share its states")
    if shared is None:
        shared = UniFAR(row_config("full", base_config), device=device).eval()
    caches = {} if caches is None else caches
    out: dict[tuple[str, int], AblationRun] = {}
    for row in rows:
        config = row_config(row, base_config)
        args = {**train_args, "freeze_base": True, **ROWS[row]["args"]}
        top = int(args.get("train_top_layers", 0))
        for seed in seeds:
            run_dir = Path(output_dir) / row_folder(row) / f"seed{seed}"
            record = {**args, "seed": seed}
            done = _finished(run_dir, config, record) if resume else None
            if done is not None:
                say(reused_message(f"{row}, seed {seed}", done.steps))
                out[(row, seed)] = done
                continue
            shutil.rmtree(run_dir, ignore_errors=True)  # a half-finished or stale run starts again
            if top not in caches:
                caches[top] = (TokenStateCache.on_disk(shared, cache_dir, top_layers=top) if cache_dir
                               else TokenStateCache(top_layers=top))
            # a row that trains base layers gets its own copy of the base; the others share it
            base = copy.deepcopy(shared.base) if top else shared.base
            import torch

            torch.manual_seed(seed)
            model = UniFAR(config, base_model=base, tokenizer=shared.tokenizer, device=device)
            targs = TrainArgs(output_dir=str(run_dir), device=device, progress=False, **record)
            first = _held_out_before(model, ftus, targs, caches[top])
            curve = dev_curve(model, targs, caches[top]) if dev_curve is not None else None
            if curve is not None:
                curve.begin()
            t0 = time.perf_counter()
            res = train(None, ftus, targs, model=model, state_cache=caches[top], callbacks=[curve] if curve else [])
            run = AblationRun(row=row, seed=seed, model_dir=str(res.final_dir), steps=res.steps,
                              ftus_seen=int(res.run_info["ftus_seen"]), held_out=res.run_info.get("held_out"),
                              first_held_out=first,
                              seconds=round(time.perf_counter() - t0, 1), config=config.to_dict(), args=record,
                              dev_curve=curve.points if curve is not None else None,
                              stopped_early=res.run_info.get("stopped_early"))
            text = json.dumps(asdict(run), indent=1) + "\n"
            atomic_file(run_dir / RECORD, lambda tmp: tmp.write_text(text, encoding="utf-8"))
            say(f"{row}, seed {seed}: {run.steps} steps in {run.seconds:.0f} s")
            out[(row, seed)] = run
    return out
