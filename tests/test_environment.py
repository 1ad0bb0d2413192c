"""environment.yml (conda/mamba) must list exactly the dependencies of pyproject.toml.

Every requirement of pyproject.toml (core ``dependencies`` and every extra in
``optional-dependencies``) must appear in the ``pip:`` section of environment.yml with the same
version specifier, and environment.yml must not pip-install anything that pyproject.toml does
not declare (apart from the ``-e .`` line that installs the package itself). Names are compared
after normalisation (lower case, ``_`` and ``.`` -> ``-``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 (pytest depends on tomli there)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def normalise(name: str) -> str:
    """Lower case, with runs of ``-``, ``_`` and ``.`` replaced by a single ``-`` (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_map(lines, where: str) -> dict[str, Requirement]:
    """Parse requirement strings into {normalised name: Requirement}; duplicates are errors."""
    out: dict[str, Requirement] = {}
    for line in lines:
        req = Requirement(line)
        key = normalise(req.name)
        assert key not in out, f"{req.name} is listed twice in {where}"
        out[key] = req
    return out


@pytest.fixture(scope="module")
def pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)


@pytest.fixture(scope="module")
def environment() -> dict:
    with open(ROOT / "environment.yml", encoding="utf-8") as fh:
        return yaml.safe_load(fh)


@pytest.fixture(scope="module")
def pyproject_requirements(pyproject) -> dict[str, Requirement]:
    project = pyproject["project"]
    lines = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        lines.extend(extra)
    return requirement_map(lines, "pyproject.toml")


def conda_pip_section(environment) -> list[str]:
    sections = [d["pip"] for d in environment["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(sections) == 1, "environment.yml needs exactly one `pip:` section"
    return [str(line).strip() for line in sections[0]]


@pytest.fixture(scope="module")
def environment_requirements(environment) -> dict[str, Requirement]:
    # "-e ." (the package itself) and other pip options are not requirements.
    lines = [line for line in conda_pip_section(environment) if not line.startswith("-")]
    return requirement_map(lines, "environment.yml")


def test_environment_installs_the_package_itself(environment):
    assert "-e ." in conda_pip_section(environment)


def test_pyproject_has_the_expected_extras(pyproject):
    extras = set(pyproject["project"].get("optional-dependencies", {}))
    assert {"models", "book", "dev"} <= extras


def test_every_pyproject_dependency_is_in_environment(pyproject_requirements, environment_requirements):
    missing = sorted(set(pyproject_requirements) - set(environment_requirements))
    assert not missing, f"in pyproject.toml but not in environment.yml: {missing}"


def test_every_environment_dependency_is_in_pyproject(pyproject_requirements, environment_requirements):
    extra = sorted(set(environment_requirements) - set(pyproject_requirements))
    assert not extra, f"in environment.yml but not in pyproject.toml: {extra}"


def test_specifiers_agree(pyproject_requirements, environment_requirements):
    differ = {
        name: (str(req.specifier), str(environment_requirements[name].specifier))
        for name, req in pyproject_requirements.items()
        if name in environment_requirements
        and (
            req.specifier != environment_requirements[name].specifier
            or req.extras != environment_requirements[name].extras
            or req.marker != environment_requirements[name].marker
        )
    }
    assert not differ, f"specifiers differ (pyproject, environment.yml): {differ}"


def test_conda_python_satisfies_requires_python(pyproject, environment):
    requires = SpecifierSet(pyproject["project"]["requires-python"])
    pythons = [
        str(d) for d in environment["dependencies"]
        if isinstance(d, str) and re.match(r"python\b", d) and not d.startswith("python-")
    ]
    assert len(pythons) == 1, "environment.yml must pin python once"
    match = re.fullmatch(r"python\s*=+\s*([0-9.]+)\*?", pythons[0])
    assert match, f"python pin should look like python=3.11, got {pythons[0]!r}"
    assert Version(match.group(1)) in requires, f"{pythons[0]} does not satisfy requires-python {requires}"


def test_conda_packages_are_only_python_and_pip(environment):
    # Everything else comes from PyPI so that one specifier list (pyproject.toml) rules.
    names = {re.split(r"[=<>!~ ]", d, maxsplit=1)[0] for d in environment["dependencies"] if isinstance(d, str)}
    assert names == {"python", "pip"}, names


def _sanitize_patterns() -> list:
    nbval_plugin = pytest.importorskip("nbval.plugin")
    return nbval_plugin.get_sanitize_patterns((ROOT / ".ci" / "nbval_sanitize.cfg").read_text(encoding="utf-8"))


def _sanitiser():
    """What CI's nbval does to stored and fresh outputs before comparing them."""
    patterns = _sanitize_patterns()

    def sanitise(text: str) -> str:
        for regex, rep in patterns:
            text = re.sub(regex, rep, text)
        return text

    return sanitise


def test_nbval_sanitiser_hides_timings_whatever_their_width():
    """CI compares re-executed notebooks with their stored outputs after `.ci/nbval_sanitize.cfg`:
    a timing a warm cache makes short ("    0.2 s") must compare equal to a cold one ("  288.0 s"),
    padding included (chapter 1's timing table once failed CI for that), and a tqdm rate must go."""
    patterns = _sanitize_patterns()
    assert len(patterns) >= 5 and all(rep for _, rep in patterns)
    sanitise = _sanitiser()

    def row(name: str, seconds: float) -> str:
        return f"{name:<34} {seconds:7.1f} s\n"

    assert sanitise(row("minilm mean pooling", 0.2)) == sanitise(row("minilm mean pooling", 288.0))
    assert sanitise("wall 424 s, 47.0 FTUs/s") == sanitise("wall 61 s, 3.1 FTUs/s")
    assert sanitise("MAP 41.68") == "MAP 41.68"  # numbers without a unit are compared as they are


def test_nbval_sanitiser_makes_a_reused_run_read_as_a_trained_one():
    """A chapter that reuses a finished run prints :func:`unifar.reuse.reused_message` where a cold
    clone trains and prints its time (chapter 8's stored output once said "reused" and failed CI
    on a fresh clone): both must compare equal, and a different loss must still differ."""
    from unifar.reuse import reused_message

    sanitise = _sanitiser()

    cold = "icrop: 10 steps in 16 s, loss 0.158 -> 0.038\n"
    assert sanitise(reused_message("icrop", 10, ", loss 0.158 -> 0.038") + "\n") == sanitise(cold)
    assert sanitise(reused_message("icrop", 10, ", loss 0.158 -> 0.039") + "\n") != sanitise(cold)
    assert sanitise(reused_message("full, seed 0", 20) + "\n") == sanitise("full, seed 0: 20 steps in 15 s\n")


def lock_pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for n, line in enumerate((ROOT / ".ci" / "requirements.lock").read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f".ci/requirements.lock:{n}: not an exact pin: {line!r}"
        assert normalise(name) not in pins, f".ci/requirements.lock:{n}: {name} pinned twice"
        pins[normalise(name)] = Version(version)
    return pins


def test_lock_pins_every_pyproject_dependency_within_its_range(pyproject_requirements):
    """`.ci/setup` installs the lock with --no-deps: a dependency missing from it would be missing
    from the environment, and a pin outside pyproject's range would contradict it (run
    `bash .ci/lock.sh` after changing pyproject.toml)."""
    pins = lock_pins()
    missing = sorted(set(pyproject_requirements) - set(pins))
    assert not missing, f"in pyproject.toml but not pinned in .ci/requirements.lock: {missing}"
    outside = {name: (str(req.specifier), str(pins[name])) for name, req in pyproject_requirements.items()
               if not req.specifier.contains(pins[name], prereleases=True)}
    assert not outside, f"lock pins outside pyproject's ranges (range, pin): {outside}"
    assert str(pins["torch"]).startswith("2.13.0"), "the CPU torch of the stored outputs"


def test_nbval_sanitiser_hides_pandas_styler_ids():
    """pandas' Styler names each HTML table after a random uuid (T_69971): a re-executed chapter
    must compare equal with its stored output, and the table's content must still be compared."""
    sanitise = _sanitiser()

    html = '<style>#T_25638_row0_col0 {color: red}</style><table id="T_25638"><td id="T_25638_row0_col0">41.68</td>'
    assert sanitise(html) == sanitise(html.replace("25638", "69971"))
    assert sanitise(html) != sanitise(html.replace("41.68", "41.69"))
