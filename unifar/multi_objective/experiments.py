"""The multi-objective paper's experiments in our terms (Parisot and Zavrel, 2022, tables 1 and 2):
which objectives, combined how, and a resumable trainer for a set of them.

Our three objectives stand for the paper's three (section 3.2; :func:`build_objectives`):

* ``questions`` (question -> document) for MS MARCO: the PubMedQA and SciRepEval search training
  halves, the real questions we have;
* ``citations`` (document -> document) for SPECTER: SciRepEval's citation triplets and chapter 3's
  doc-doc FTU pairs;
* ``icrop``: independent cropping over the FTU documents (the paper crops its own corpus).

An :class:`Experiment` is a tuple of objectives and how they are combined (section 3.3):
``single``, ``mix`` (in-batch mixing, equal weights), ``alternate`` (alternating batches) or
``finetune`` ("A -> B": train on A, then a shorter phase on B at a lower learning rate). A
fine-tuning run starts from the single-objective run of A, as the paper's does ("we train a
model on A until convergence and then finetune it on a target objective B"), so table 2's
fine-tuned rows share their first phase with table 1. :func:`train_experiments` trains a list
of them on one frozen base, each saved with a record of its settings (``mo_run.json``, written
last) so that a rerun reloads what finished instead of training it again.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..bi_encoder import BiEncoder
from ..caching import TokenStateCache
from ..datasets.ftu_files import load_ftus
from ..files import write_json
from ..reuse import reused_message
from .icrop import icrop_objective
from .objectives import (DOCUMENT_TO_DOCUMENT, QUESTION_TO_DOCUMENT, Objective, ftu_docdoc_objective,
                         hold_out, pubmedqa_objective, scirepeval_search_objective, specter_objective)
from .schedules import (
    PAPER_BATCH_SIZE,
    PAPER_FINETUNE_LR,
    PAPER_LR,
    Phase,
    alternate,
    mix,
)
from .training import (
    BiEncoderTrainArgs,
    BiEncoderTrainResult,
    examples_digest,
    finished_run,
    train_bi_encoder,
)

if TYPE_CHECKING:
    import torch

__all__ = [
    "HOW",
    "OBJECTIVES",
    "PAPER_NAMES",
    "TABLE1",
    "TABLE2",
    "Experiment",
    "ExperimentRun",
    "build_objectives",
    "concat_objectives",
    "experiment_phases",
    "train_experiments",
]

OBJECTIVES = ("questions", "citations", "icrop")
#: Our objective -> the paper's objective it stands for (names as the paper's tables print them).
PAPER_NAMES = {"questions": "MS MARCO", "citations": "SPECTER", "icrop": "ICrop."}
HOW = ("single", "mix", "alternate", "finetune")
RUN_RECORD = "mo_run.json"  # a finished run's settings (what a resumed run must match)


@dataclass(frozen=True)
class Experiment:
    """Objectives (names of :data:`OBJECTIVES` or any others given to the trainer) and how they
    are combined; ``finetune`` means ``objectives[0]`` then ``objectives[1]``.

    >>> Experiment(("questions", "icrop"), "finetune").name
    'questions → icrop'
    >>> Experiment(("citations", "questions"), "mix").paper_row()
    ('table 2', '(1) SPECTER, (2) MS MARCO: in batch mix')
    >>> Experiment(("icrop", "questions"), "finetune").paper_row()
    ('table 2', '(1) MS MARCO, (2) ICrop.: finetune 2 → 1')
    """

    objectives: tuple[str, ...]
    how: str = "single"

    def __post_init__(self) -> None:
        n, objs = len(self.objectives), self.objectives
        if self.how not in HOW:
            raise ValueError(f"how={self.how!r}: choose from {HOW}")
        if len(set(objs)) != n:
            raise ValueError(f"objectives must be distinct, got {objs}")
        need = {"single": "one", "finetune": "two"}.get(self.how, "two or more")
        if (n == 1) != (need == "one") or (need == "two" and n != 2):
            raise ValueError(f"{self.how!r} takes {need} objectives, got {objs}")

    @property
    def name(self) -> str:
        if self.how == "single":
            return self.objectives[0]
        if self.how == "finetune":
            return " → ".join(self.objectives)
        return f"{self.how}({'+'.join(self.objectives)})"

    @property
    def folder(self) -> str:
        """A folder name: ``"questions → icrop"`` -> ``"questions_then_icrop"``."""
        return re.sub(r"[^A-Za-z0-9]+", "_", self.name.replace("→", "then")).strip("_")

    @property
    def start(self) -> Experiment | None:
        """The run a fine-tuning run starts from (the single run of its first objective)."""
        return Experiment(self.objectives[:1]) if self.how == "finetune" else None

    def paper_row(self) -> tuple[str, str] | None:
        """``(table, row)`` of :mod:`unifar.paper.multi_objective` this experiment reproduces."""
        if any(o not in PAPER_NAMES for o in self.objectives):
            return None
        names = [PAPER_NAMES[o] for o in self.objectives]
        if self.how == "single":
            return (
                ("table 3", "ICrop.") if names == ["ICrop."] else ("table 1", names[0])
            )
        if len(names) == 3:
            how = {"mix": "in batch mix", "alternate": "alternate"}[self.how]
            return "table 2", f"MS MARCO, SPECTER, ICrop.: {how}"
        pair = next(p for p in _PAPER_PAIRS if set(p) == set(names))
        how = {"mix": "in batch mix", "alternate": "alternate"}.get(self.how)
        if how is None:  # fine-tuning: the paper numbers its pair (1), (2)
            how = "finetune 1 → 2" if names[0] == pair[0] else "finetune 2 → 1"
        return "table 2", f"(1) {pair[0]}, (2) {pair[1]}: {how}"


_PAPER_PAIRS = (("MS MARCO", "ICrop."), ("SPECTER", "MS MARCO"), ("SPECTER", "ICrop."))
_OURS = {v: k for k, v in PAPER_NAMES.items()}

#: Table 1 in our terms: each objective alone, and all three alternating (the paper's AllObj-Alt).
TABLE1: tuple[Experiment, ...] = (
    *(Experiment((o,)) for o in OBJECTIVES),
    Experiment(OBJECTIVES, "alternate"),
)
#: Table 2 in our terms: each of the paper's pairs (in its order) mixed in-batch, alternated and
#: fine-tuned both ways; all three mixed and alternated.
TABLE2: tuple[Experiment, ...] = (
    *(
        exp
        for a, b in (tuple(_OURS[n] for n in pair) for pair in _PAPER_PAIRS)
        for exp in (
            Experiment((a, b), "mix"),
            Experiment((a, b), "alternate"),
            Experiment((a, b), "finetune"),
            Experiment((b, a), "finetune"),
        )
    ),
    Experiment(OBJECTIVES, "mix"),
    Experiment(OBJECTIVES, "alternate"),
)


def concat_objectives(name: str, parts: Sequence[Objective]) -> Objective:
    """One objective holding the examples of ``parts`` (all of one kind, none resampled); its
    stats keep each part's as ``<part>/<stat>``.

    >>> from .objectives import Example
    >>> a = Objective("a", "icrop", [Example("x", "y")])
    >>> b = Objective("b", "icrop", [Example("u", "v")] * 2, {"examples": 2})
    >>> c = concat_objectives("ab", [a, b])
    >>> len(c), c.stats
    (3, {'examples': 3, 'b/examples': 2})
    """
    kinds = {p.kind for p in parts}
    if len(kinds) != 1 or any(p.resample is not None for p in parts):
        raise ValueError(
            f"{name}: concatenate objectives of one kind without resampling, got {[(p.name, p.kind) for p in parts]}"
        )
    stats = {f"{p.name}/{k}": v for p in parts for k, v in p.stats.items()}
    examples = [e for p in parts for e in p.examples]
    return Objective(name, kinds.pop(), examples, {"examples": len(examples), **stats})


def build_objectives(
    ftu_dir: str | Path, sep: str = "[SEP]", seed: int = 0, n_dev: int = 0
) -> dict[str, Objective]:
    """:data:`OBJECTIVES` from the repository's data and chapter 3's FTUs in ``ftu_dir``, each
    behind the leakage guard (:func:`~unifar.multi_objective.objectives.drop_leaks`). ``n_dev``:
    examples of each objective held out of training (ICrop: documents), its ``dev`` examples,
    on which :func:`train_experiments` draws every run's dev curve."""
    questions = concat_objectives(
        "questions", [pubmedqa_objective(sep=sep), scirepeval_search_objective(sep=sep)]
    )
    citations = concat_objectives(
        "citations",
        [specter_objective(sep=sep), ftu_docdoc_objective(ftu_dir, sep=sep)],
    )
    documents = load_ftus(ftu_dir, verify_hashes=False).documents.values()
    assert (
        questions.kind == QUESTION_TO_DOCUMENT
        and citations.kind == DOCUMENT_TO_DOCUMENT
    )
    if n_dev:
        questions, citations = (hold_out(o, n_dev, seed) for o in (questions, citations))
    return {
        "questions": questions,
        "citations": citations,
        "icrop": icrop_objective(documents, seed, n_dev=n_dev),
    }


def experiment_phases(
    exp: Experiment,
    objectives: Mapping[str, Objective],
    steps: int,
    finetune_steps: int,
    batch_size: int = PAPER_BATCH_SIZE,
    lr: float = PAPER_LR,
    finetune_lr: float = PAPER_FINETUNE_LR,
    seed: int = 0,
) -> list[Phase]:
    """The training phases of ``exp`` (a fine-tuning run: only its second phase; its first is
    the single run of :attr:`Experiment.start`)."""
    missing = [o for o in exp.objectives if o not in objectives]
    if missing:
        raise ValueError(
            f"{exp.name}: no objective named {missing}; have {sorted(objectives)}"
        )
    objs = [objectives[o] for o in exp.objectives]
    if exp.how == "finetune":
        if finetune_lr > lr:
            raise ValueError(
                f"fine-tuning uses a lower learning rate; got {finetune_lr} > {lr}"
            )
        (phase,) = mix(
            objs[1:],
            finetune_steps,
            batch_size=batch_size,
            lr=finetune_lr,
            seed=seed + 1000,
        )
        phase.name = f"{objs[1].name} (fine-tune)"
        return [phase]
    combine = alternate if exp.how == "alternate" else mix
    return combine(objs, steps, batch_size=batch_size, lr=lr, seed=seed)


@dataclass
class ExperimentRun:
    """One trained experiment: the model, its per-step log, where it is, what it cost."""

    experiment: Experiment
    model: BiEncoder
    log: list[dict[str, Any]] = field(default_factory=list)
    final_dir: Path | None = None
    seconds: float = 0.0
    reused: bool = False
    dev_curve: list[dict[str, Any]] = field(default_factory=list)  # held-out losses, see train_bi_encoder
    stopped: dict[str, int] = field(default_factory=dict)  # phase -> steps, where the dev curve ended it

    def losses(self) -> list[float]:
        return [r["loss"] for r in self.log]


def train_experiments(
    experiments: Sequence[Experiment],
    objectives: Mapping[str, Objective],
    base: BiEncoder,
    output_dir: str | Path,
    steps: int,
    finetune_steps: int | None = None,
    batch_size: int = PAPER_BATCH_SIZE,
    lr: float = PAPER_LR,
    finetune_lr: float = PAPER_FINETUNE_LR,
    top_layers: int | None = 1,
    seed: int = 0,
    state_cache: TokenStateCache | None = None,
    resume: bool = True,
    show_progress: bool = False,
    log: Callable[[str], None] | None = print,
    dev_every: int = 0,
    patience: int = 3,
    min_delta: float = 0.0,
) -> dict[str, ExperimentRun]:
    """Train every experiment from a copy of ``base`` (a fine-tuning run from its start run,
    trained first if it is not in the list) into ``output_dir/<experiment folder>``.

    ``steps`` per run; a fine-tuning run's second phase has ``finetune_steps`` (default
    ``steps // 2``: "shorter"). ``top_layers``: train the top base layers on cached lower
    states shared by every run (``state_cache``), or the whole base (None). With ``resume`` a
    run whose record matches its settings is loaded, not trained. ``dev_every`` > 0: every run
    draws a dev curve on the held-out examples of every objective (their ``dev``,
    :func:`build_objectives`'s ``n_dev``) and stops once the mean over its own objectives (a
    fine-tuning run: its target B) has not improved by ``min_delta`` for ``patience``
    measurements; ``steps`` is then a budget. Returns ``{name: run}``, start runs first.
    """
    say = log or (lambda _msg: None)
    finetune_steps = max(1, steps // 2) if finetune_steps is None else finetune_steps
    if top_layers and state_cache is None:  # the frozen layers agree across runs
        state_cache = TokenStateCache(top_layers=top_layers)
    todo = [e.start for e in experiments if e.start is not None] + list(experiments)
    todo = list(dict.fromkeys(sorted(todo, key=lambda e: e.how == "finetune")))
    digests = {name: examples_digest(o.examples) for name, o in objectives.items()}
    dev = {name: o.dev for name, o in objectives.items() if o.dev} if dev_every > 0 else {}
    runs: dict[str, ExperimentRun] = {}
    for exp in todo:
        where = Path(output_dir) / exp.folder
        phases = experiment_phases(
            exp, objectives, steps, finetune_steps, batch_size, lr, finetune_lr, seed
        )
        start = runs[exp.start.name] if exp.start is not None else None
        settings = {
            "experiment": exp.name,
            "base": base.fingerprint() if start is None else start.model.fingerprint(),
            "config": base.config.to_dict(),
            "objectives": {o: digests[o] for o in exp.objectives},
            "phases": [{"name": p.name, "lr": p.lr, "steps": p.steps} for p in phases],
            "batch_size": batch_size, "top_layers": top_layers, "seed": seed,
        }
        monitor = list(exp.objectives[1:] if exp.how == "finetune" else exp.objectives)
        if dev:
            settings["dev"] = _dev_settings(exp, dev, monitor, dev_every, patience, min_delta)
        done = _finished(exp, where, settings, base.device) if resume else None
        if done is not None:
            runs[exp.name] = done
            say(reused_message(exp.name, len(done.log), _run_tail(done.log, done.dev_curve, phases)))
            continue
        model = copy.deepcopy(start.model if start is not None else base)
        t0 = time.perf_counter()
        args = BiEncoderTrainArgs(
            top_layers=top_layers, seed=seed, show_progress=show_progress,
            dev_every=dev_every if dev else 0, patience=patience, min_delta=min_delta,
            dev_batch_size=batch_size,
        )
        res: BiEncoderTrainResult = train_bi_encoder(
            model, phases, args=args, out_dir=where, state_cache=state_cache,
            dev=dev, monitor=monitor if dev else None,
        )
        write_json(where / RUN_RECORD, settings)  # last: the run is complete
        runs[exp.name] = ExperimentRun(exp, model, res.log, res.final_dir, res.seconds,
                                       dev_curve=res.dev_curve, stopped=res.stopped)
        say(f"{exp.name}: {len(res.log)} steps in {time.perf_counter() - t0:.0f} s"
            + _run_tail(res.log, res.dev_curve, phases))
    return runs


def _run_tail(log: Sequence[Mapping[str, Any]], curve: Sequence[Mapping[str, Any]], phases: Sequence[Any]) -> str:
    """What a trained or a reused run's line says after its step count (the same for both, so
    that a stored output does not depend on what ``artifacts/`` held)."""
    tail = f" (budget {sum(p.steps for p in phases)})"
    if log:
        tail += f", loss {log[0]['loss']:.3f} -> {log[-1]['loss']:.3f}"
    return tail + (f", dev {curve[0]['dev']:.3f} -> {curve[-1]['dev']:.3f}" if curve else "")


def _dev_settings(exp: Experiment, dev: Mapping[str, Sequence[Any]], monitor: Sequence[str], every: int,
                  patience: int, min_delta: float) -> dict[str, Any]:
    """What of a run's dev curve its record must match (the held-out examples by digest)."""
    missing = [m for m in monitor if m not in dev]
    if missing:
        raise ValueError(f"{exp.name}: no held-out examples for {missing} (build_objectives' n_dev)")
    return {"every": every, "patience": patience, "min_delta": min_delta, "monitor": list(monitor),
            "examples": {n: examples_digest(d) for n, d in dev.items()}}


def _finished(
    exp: Experiment, where: Path, settings: Mapping[str, Any], device: str | torch.device | None
) -> ExperimentRun | None:
    """The run saved in ``where`` if its record matches ``settings``, else None."""
    done = finished_run(where, settings, RUN_RECORD, device)
    if done is None:
        return None
    return ExperimentRun(exp, done.model, done.log, done.final_dir, done.seconds, reused=True,
                         dev_curve=done.dev_curve, stopped=done.stopped)
