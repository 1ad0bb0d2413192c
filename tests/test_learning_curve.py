"""Training until the dev curve flattens (unifar.learning_curve.DevCurve as a train() callback)."""

from __future__ import annotations

import json

import pytest

from unifar.learning_curve import DevCurve, Plateau, read_curve
from unifar.train import train

from .test_train import args_for, make_dataset, small


def test_a_flat_dev_curve_ends_the_run_and_is_recorded(make_model, tmp_path):
    model = make_model(**small())
    values = iter([0.50, 0.60, 0.61, 0.60, 0.62, 0.9, 0.9])  # flat after the second evaluation
    calls = []

    def measure(m, record):
        calls.append(record.get("step", 0))
        assert m is model
        return next(values)

    out = tmp_path / "run"
    curve = DevCurve(model, {"dev": measure, "step_seen": lambda m, r: float(r.get("step", 0))}, out, every=2,
                     monitor="dev", patience=3, min_delta=0.05)
    assert curve.begin()["dev"] == 0.50 and curve.begin() is None  # step 0 once
    res = train(None, make_dataset(16), args_for(tmp_path, "run", epochs=10, max_steps=40, save_every=100),
                model=model, callbacks=[curve])
    # evaluations at steps 2, 4, 6, 8: 0.60 is the best, 0.61 / 0.60 / 0.62 do not beat it by 0.05
    assert res.steps == 8 and calls == [0, 2, 4, 6, 8]
    stop = res.run_info["stopped_early"]
    assert stop["step"] == 8 and "dev flat for 3 evaluations (best 0.6 at step 2" in stop["reason"]
    points = read_curve(out)
    assert [p["step"] for p in points] == [0, 2, 4, 6, 8] and [p["step_seen"] for p in points] == [0, 2, 4, 6, 8]
    assert curve.best["step"] == 2
    assert json.loads((out / "run.json").read_text())["stopped_early"]["step"] == 8
    # the final model and a checkpoint exist at the stop
    assert (out / "final").is_dir() and res.last_checkpoint is not None


def test_min_steps_and_a_resumed_curve(make_model, tmp_path):
    model = make_model(**small())
    out = tmp_path / "run"
    constant = DevCurve(model, {"dev": lambda m, r: 1.0}, out, every=1, monitor="dev", patience=1, min_steps=3)
    res = train(None, make_dataset(16), args_for(tmp_path, "run", epochs=10, max_steps=20), model=model,
                callbacks=[constant])
    assert res.steps == 3  # flat from step 1, but never stopped before min_steps
    again = DevCurve(model, {"dev": lambda m, r: 1.0}, out, every=1, monitor="dev", patience=1)
    assert [p["step"] for p in again.points] == [1, 2, 3] and again.plateau.since_best == 2  # read back


def test_dev_curve_arguments_are_checked(make_model, tmp_path):
    with pytest.raises(ValueError, match="monitor 'map' is not one of"):
        DevCurve(None, {"dev": lambda m, r: 0.0}, tmp_path, every=1, monitor="map")
    with pytest.raises(ValueError, match="every must be at least 1"):
        DevCurve(None, {"dev": lambda m, r: 0.0}, tmp_path, every=0, monitor="dev")
    with pytest.raises(ValueError, match="mode"):
        Plateau(mode="up")
    with pytest.raises(ValueError, match="finite"):
        Plateau().update(float("nan"))


def test_held_out_measure_uses_the_records_value_or_computes_it(make_model):
    from unifar.config import TrainArgs
    from unifar.learning_curve import held_out_measure

    from .test_distillation import with_teachers

    ds = with_teachers(make_dataset(6))
    model = make_model(**small()).eval()
    measure = held_out_measure("l_kd", ds.ftus[:4], ds.documents, TrainArgs(progress=False))
    assert measure(model, {"eval": {"l_kd": 0.25}}) == 0.25  # the step's own held-out value
    computed = measure(model, {})  # no record: computed on the held-out FTUs
    assert computed > 0 and measure(model, {}) == computed


def test_held_out_measures_compute_once_per_point_from_a_sorted_cache(make_model, monkeypatch):
    """The terms of one point share one held_out_loss call; with a state cache the held-out
    inputs are cached first (in length-sorted batches), and the values equal those without it."""
    import unifar.objective as objective
    from unifar.caching import TokenStateCache
    from unifar.config import TrainArgs
    from unifar.learning_curve import held_out_measures

    from .test_distillation import with_teachers

    ds = with_teachers(make_dataset(6))
    model = make_model(**small()).eval()
    args = TrainArgs(progress=False, freeze_base=True)
    calls = []
    real = objective.held_out_loss
    monkeypatch.setattr(objective, "held_out_loss", lambda *a, **k: calls.append(1) or real(*a, **k))
    cache = TokenStateCache()
    with_cache = held_out_measures(["l_kd", "loss"], ds.ftus[:4], ds.documents, args, cache)
    values = {t: m(model, {}) for t, m in with_cache.items()}
    assert len(calls) == 1 and len(cache) > 0 and cache.misses == 0  # all filled before the loss
    without = held_out_measures(["l_kd", "loss"], ds.ftus[:4], ds.documents, args)
    assert {t: m(model, {}) for t, m in without.items()} == pytest.approx(values, rel=1e-5)
    with_cache["loss"](model, {"step": 10})  # another point: computed again
    assert len(calls) == 3


def test_train_until_flat_trains_once_then_reuses_the_finished_run(make_model, tmp_path):
    from dataclasses import replace

    import torch

    from unifar.datasets.csfcube import load_csfcube
    from unifar.learning_curve import train_until_flat

    cube, ftus = load_csfcube(), make_dataset(16)
    args = args_for(tmp_path, "run", epochs=10, max_steps=4, eval_every=2, seed=3)
    made = []

    def state():  # made only when the run trains
        made.append(1)
        return None

    first = train_until_flat(make_model(**small()), ftus, args, cube, state, max_queries=1)
    points = read_curve(args.output_dir)
    assert first.steps == 4 and [p["step"] for p in points] == [0, 2, 4] and made == [1]
    assert all(0 <= p["fold1_dev_map"] <= 100 for p in points)
    again = train_until_flat(make_model(**small()), ftus, replace(args, resume=True), cube, state, max_queries=1)
    assert made == [1] and again.steps == 4 and read_curve(args.output_dir) == points  # reused, not trained
    assert all(torch.equal(a, b) for a, b in zip(first.model.state_dict().values(), again.model.state_dict().values()))
    with pytest.raises(ValueError, match="training arguments differ"):  # another run's folder is not reused
        train_until_flat(make_model(**small()), ftus, replace(args, resume=True, max_steps=6), cube, max_queries=1)
    with pytest.raises(ValueError, match="eval_every must be"):
        train_until_flat(make_model(**small()), ftus, replace(args, eval_every=0), cube)
