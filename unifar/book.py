"""What every chapter of the book shares: set-up, profile results, and numbers glued into prose.

A chapter is a papermill notebook with a ``profile`` parameter (``smoke``, ``default``, ``full``,
``paper``). Its second cell is one call::

    ch = setup_chapter("ch04", profile, device=device, seed=seed, parameters=globals())

which looks up the chapter's profiles in :mod:`unifar.profiles`, checks the notebook's parameters,
moves to the repository root (nbval starts kernels in ``notebooks/``), silences the known
harmless warnings, pins the CPU threads, sets the plotting theme and returns a :class:`Chapter`
holding the chosen profile's settings. The chapter then saves what it measured with
:meth:`Chapter.save`: a JSON file with the results, the configuration and the run's facts
(commit, machine, date, duration). The ``full`` profile's files are committed under
``results/<chapter>/full/``; every other profile writes under ``artifacts/results/`` (ignored by
git), so re-running the default never dirties the repository. :meth:`Chapter.full` reads the
committed ``full`` results back, and :meth:`Chapter.full_label` says where they came from, so the
chapter can show them beside its own run.

Numbers in prose come from :func:`glue` (myst-nb's glue, not displayed where it is called) and
are written in markdown as ``{glue:text}`name:.2f```; the book never types a measured number.
"""

from __future__ import annotations

import ast
import json
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .files import REPO, atomic_file
from .profiles import PROFILES
from .runtime import run_facts

if TYPE_CHECKING:
    import torch

__all__ = [
    "Chapter",
    "FORMAT",
    "PROFILE_NAMES",
    "glue",
    "glue_dict",
    "load_record",
    "load_results",
    "same_results",
    "check_parameters",
    "setup_chapter",
]

FORMAT = "unifar-chapter-results/1"
#: the profiles a chapter may offer (each chapter offers ``default`` and ``smoke`` at least)
PROFILE_NAMES = ("smoke", "default", "full", "paper")


# ----------------------------------------------------------------------------- results files
def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from e


def load_record(name: str | os.PathLike[str], results_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """A committed record under ``results_dir`` (default: the repository's ``results/``), e.g.
    ``load_record("ch04/tuning_dev.json")``: a study script's JSON (``benchmarks/studies/``), read
    as it is. A missing file or bad JSON is an error that names the file."""
    path = (REPO / "results" if results_dir is None else Path(results_dir)) / name
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such record (the scripts under benchmarks/ write the committed ones)")
    return _read_json(path)


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a chapter results file written by :meth:`Chapter.save`, checking its format."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a chapter results file (expected format {FORMAT!r})")
    return data


def same_results(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two results files hold the same measurements: ``config`` and ``results`` equal,
    the run facts (commit, date, machine, duration) ignored.

    >>> x = {"config": {"seed": 0}, "results": {"map": 40.0}, "run": {"duration_s": 1.0}}
    >>> same_results(x, {**x, "run": {"duration_s": 2.0}}), same_results(x, {**x, "results": {"map": 41.0}})
    (True, False)
    """
    return a.get("config") == b.get("config") and a.get("results") == b.get("results")


def _jsonable(obj: Any) -> Any:
    """Round-trip through JSON so the file holds exactly what a reader gets back (tuples become
    lists, numpy scalars numbers)."""
    import numpy as np

    def default(o: Any) -> Any:
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, Path):
            return o.as_posix()
        raise TypeError(f"{type(o).__name__} is not JSON serialisable: {o!r}")

    return json.loads(json.dumps(obj, default=default))


@dataclass
class Chapter:
    """A chapter's run: its name (``"ch04"``), notebook, profile and the profile's settings.

    ``results_dir`` is where :meth:`save` writes: ``results/<name>/full`` for the ``full``
    profile (committed), ``artifacts/results/<name>/<profile>`` otherwise.
    """

    name: str
    notebook: str
    profile: str
    settings: dict[str, Any]
    started: float = field(default_factory=time.perf_counter)

    @property
    def results_dir(self) -> Path:
        if self.profile == "full":
            return REPO / "results" / self.name / "full"
        return REPO / "artifacts" / "results" / self.name / self.profile

    def save(self, name: str, results: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> Path:
        """Write ``results_dir/<name>.json`` atomically: ``results`` (what was measured, no
        timings, so that a re-run compares equal), ``config`` (what produced it) and the run's
        facts (commit, machine, date, time since :func:`setup_chapter`). Returns the path."""
        record = {
            "format": FORMAT,
            "chapter": self.name,
            "notebook": self.notebook,
            "profile": self.profile,
            "name": name,
            "config": _jsonable(dict(config or {})),
            "results": _jsonable(dict(results)),
            "run": {**run_facts(self.started), "command": self.command(self.profile)},
        }
        path = self.results_dir / f"{name}.json"
        atomic_file(path, lambda tmp: tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8"))
        return path

    def full_path(self, name: str) -> Path:
        return REPO / "results" / self.name / "full" / f"{name}.json"

    def full(self, name: str) -> dict[str, Any]:
        """The committed ``full`` results ``results/<chapter>/full/<name>.json`` (the whole
        record: ``results``, ``config``, ``run``). A missing file is an error that says how to
        make it, except in the ``smoke`` profile, which then stands in its own results (saved
        by this run with :meth:`save`) so that a fresh checkout can exercise every cell."""
        path = self.full_path(name)
        if not path.exists():
            own = self.results_dir / f"{name}.json"
            if self.profile == "smoke" and own.exists():
                print(f"({path.relative_to(REPO)} is missing: the smoke run's own results stand in for it)")
                return load_results(own)
            raise FileNotFoundError(f"{path.relative_to(REPO)} is missing: run the full profile: {self.command('full')}")
        return load_results(path)

    def results_of(self, chapter: str, name: str) -> dict[str, Any]:
        """Another chapter's results file of *this* profile (``full``: the committed one), e.g.
        chapter 3 reading which labeller chapter 2 chose in the same profile."""
        base = REPO / "results" / chapter / "full" if self.profile == "full" else REPO / "artifacts" / "results" / chapter / self.profile
        path = base / f"{name}.json"
        if not path.exists():
            raise FileNotFoundError(f"{path.relative_to(REPO)} is missing: run {chapter} at profile {self.profile!r} first")
        return load_results(path)

    def artifact_dir(self, kind: str) -> Path:
        """``artifacts/<kind>/<profile>``: where this profile's files for later chapters go
        (``ch02`` labeller, ``ftus``, ``ch04`` runs), so that profiles never overwrite each other."""
        return REPO / "artifacts" / kind / self.profile

    def full_label(self, name: str) -> str:
        """Where the ``full`` numbers come from, for a table caption: profile, date, commit,
        duration and machine, e.g. "measured here, full profile, 2026-11-26, commit 1a2b3c4,
        41 min on 2 CPU cores"."""
        record = self.full(name)
        run = record["run"]
        if record.get("profile") != "full":
            return f"measured here, this {record.get('profile')} run standing in for the full profile"
        minutes = run.get("duration_s", 0) / 60
        took = f"{minutes:.0f} min" if minutes >= 1 else f"{run.get('duration_s', 0):.0f} s"
        machine = run.get("machine", {})
        return (f"measured here, full profile, {str(run.get('date', '?'))[:10]}, commit "
                f"{str(run.get('commit') or '?')[:7]}{' (+ uncommitted changes)' if run.get('dirty') else ''}, "
                f"{took} on {machine.get('cpu_count', '?')} CPU cores")

    def command(self, profile: str = "full") -> str:
        """The papermill command that runs this chapter at ``profile``."""
        stem = Path(self.notebook).stem
        return (f"papermill {self.notebook} _build/papermill/{stem}.{profile}.ipynb --cwd . -k python3 "
                f"-p profile {profile}")


def setup_chapter(
    name: str,
    profile: str,
    profiles: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    notebook: str | None = None,
    device: str | torch.device | None = None,
    threads: int = 2,
    seed: int | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> Chapter:
    """The set-up every chapter's second cell does, in one call (see the module docstring).

    ``profiles`` maps each profile the chapter offers to its settings (default: the chapter's
    in :data:`unifar.profiles.PROFILES`); an unknown ``profile`` is an error listing them. On a
    CPU, torch uses at most ``threads`` threads (the book's timings are for 2 cores). ``seed``
    seeds Python's, NumPy's and torch's generators. Given the notebook's ``parameters`` (its
    ``globals()``), every parameter annotated in the parameters cell is checked against its
    annotation first (:func:`check_parameters`), so a papermill ``-p batch_size abc`` fails here,
    naming the parameter, not deep in a run.
    """
    if notebook is None:
        matches = sorted((REPO / "notebooks").glob(f"{name.removeprefix('ch')}_*.ipynb"))
        notebook = matches[0].relative_to(REPO).as_posix() if matches else f"notebooks/{name}.ipynb"
    if parameters is not None:
        check_parameters(parameters, REPO / notebook)
    if profiles is None:
        profiles = PROFILES[name]
    if profile not in profiles:
        raise ValueError(f"unknown profile {profile!r} for {name}; this chapter offers {sorted(profiles)}")
    unknown = sorted(set(profiles) - set(PROFILE_NAMES))
    if unknown:
        raise ValueError(f"profile names must be among {PROFILE_NAMES}, got {unknown}")
    os.chdir(REPO)  # nbval starts kernels in notebooks/; every path of the book is from the root
    warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets
    warnings.filterwarnings("ignore", message="Tight layout not applied")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:  # inline figures when run by Jupyter/papermill/nbval
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None:
            shell.run_line_magic("matplotlib", "inline")
    except ImportError:  # pragma: no cover - IPython ships with the book extra
        pass
    import seaborn as sns

    sns.set_theme(style="whitegrid")
    import torch

    want_cuda = (device is None and torch.cuda.is_available()) or str(device or "").startswith("cuda")
    if not want_cuda:
        torch.set_num_threads(max(1, min(threads, os.cpu_count() or 1)))
    if seed is not None:
        import random

        import numpy as np

        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
    return Chapter(name=name, notebook=notebook, profile=profile, settings=dict(profiles[profile]))


# ----------------------------------------------------------------------------- parameters
_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,),
                                       "list": (list,), "dict": (dict,)}


def _accepts(annotation: ast.expr, value: Any) -> bool:
    """Whether ``value`` fits a parameter annotation: ``int``, ``float``, ``str``, ``bool``,
    ``None``, unions with ``|``, ``list[...]`` and ``dict[...]`` (``bool`` is not an ``int``)."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _accepts(annotation.left, value) or _accepts(annotation.right, value)
    if isinstance(annotation, ast.Constant) and annotation.value is None:
        return value is None
    if isinstance(annotation, ast.Subscript):
        if not _accepts(annotation.value, value):
            return False
        if isinstance(value, list) and not isinstance(annotation.slice, ast.Tuple):
            return all(_accepts(annotation.slice, v) for v in value)
        return True
    if isinstance(annotation, ast.Name) and annotation.id in _TYPES:
        if isinstance(value, bool) and annotation.id != "bool":
            return False
        return isinstance(value, _TYPES[annotation.id])
    raise ValueError(f"parameter annotation {ast.unparse(annotation)!r} is not one check_parameters knows")


def check_parameters(values: Mapping[str, Any], notebook: str | os.PathLike[str]) -> None:
    """Check the values of a notebook's papermill parameters against the annotations of its
    ``parameters`` cell (``batch_size: int = 32``); a wrong type is a ``TypeError`` naming the
    parameter, its value and the notebook.

    >>> import json, tempfile
    >>> cell = {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": "batch_size: int = 32"}
    >>> with tempfile.NamedTemporaryFile("w", suffix=".ipynb", delete=False) as f:
    ...     json.dump({"cells": [cell]}, f)
    >>> check_parameters({"batch_size": 64}, f.name)
    >>> check_parameters({"batch_size": "abc"}, f.name)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    TypeError: ...: parameter batch_size = 'abc' (str): expected int (papermill -p batch_size ...)
    """
    path = Path(notebook)
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    source = next(("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if source is None:
        raise ValueError(f"{path}: no cell tagged 'parameters'")
    for node in ast.parse(source).body:
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        name = node.target.id
        if name in values and not _accepts(node.annotation, values[name]):
            value = values[name]
            raise TypeError(f"{path.name}: parameter {name} = {value!r} ({type(value).__name__}): expected "
                            f"{ast.unparse(node.annotation)} (papermill -p {name} ...)")


# ----------------------------------------------------------------------------- glue
def glue(name: str, value: Any) -> Any:
    """Store ``value`` under ``name`` for the chapter's prose (myst-nb), without displaying it.

    Floats are stored as they are; the markdown chooses the format
    (``{glue:text}`name:.2f```). Returns ``value`` so a cell can glue and use it in one line.
    """
    import numpy as np

    if isinstance(value, np.generic):
        value = value.item()
    from myst_nb import glue as _glue

    _glue(name, value, display=False)
    return value


def glue_dict(prefix: str, values: Mapping[str, Any]) -> None:
    """:func:`glue` every ``values[key]`` as ``<prefix><key>``."""
    for key, value in values.items():
        glue(f"{prefix}{key}", value)
