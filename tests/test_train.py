"""The training loop of section 4.2 / appendix A on a tiny random BERT: losses, masks, groups,
schedule, exact resume, files, divergence, ablations and the ``train`` command."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from unifar import UniFAR, UniFARConfig
from unifar.checkpoints import latest_checkpoint
from unifar.config import TrainArgs
from unifar.datasets.ftu import FTU, Question
from unifar.datasets.ftu_files import FTUDataset, load_ftus, write_ftus
from unifar.objective import build_ftu_batch, ftu_batch_loss
from unifar.optim import make_optimizer, warmup_linear_factor
from unifar.train import TrainingDiverged, train
from unifar.training_log import read_log

from .conftest import SENTS

FACETS = ("background", "method", "result")
CYCLE = ["background", "method", None, "result", "method", "background"]


def _doc(i: int, labelled: bool = True) -> dict:
    sents = [f"Paper {i} sentence {k}: {SENTS[(i + k) % len(SENTS)]}" for k in range(3 + i % 3)]
    return {
        "id": f"d{i}",
        "title": f"Title of paper {i}",
        "sentences": sents,
        "labels": [CYCLE[(i + k) % len(CYCLE)] for k in range(len(sents))] if labelled else None,
        "source": "synthetic",
        "field": "computer science",
    }


def make_dataset(n_ftus: int = 10, n_docs: int = 24, n_pos: int = 1, n_neg: int = 1, questions: bool = True) -> FTUDataset:
    """FTUs over a small pool of documents (every 5th document has no labels)."""
    docs = {f"d{i}": _doc(i, labelled=i % 5 != 4) for i in range(n_docs)}
    rng = np.random.default_rng(0)
    ftus = []
    for u in range(n_ftus):
        q = f"d{u % n_docs}"
        others = [d for d in docs if d != q]
        ftu = FTU(q)
        for f in FACETS:
            pick = rng.choice(len(others), size=n_pos + n_neg, replace=False)
            ftu.positives[f] = [others[i] for i in pick[:n_pos]]
            ftu.negatives[f] = [others[i] for i in pick[n_pos:]]
            if questions:
                ftu.questions[f] = Question(f"Which papers share the {f} of paper {u}?", f, "test", q)
        ftus.append(ftu)
    return FTUDataset(ftus=ftus, documents=docs)


def small(**kw) -> dict:
    """Config overrides for fast runs: 2 FTUs per micro-batch, 2 micro-batches per step."""
    return {"batch_size": 2, "grad_accumulation": 2, **kw}


def args_for(tmp_path, name: str = "run", **kw) -> TrainArgs:
    return TrainArgs(output_dir=str(tmp_path / name), progress=False, **kw)


# ----------------------------------------------------------------------------- the loss
def test_loss_is_finite_and_reaches_every_group(make_model):
    model = make_model()
    ds = make_dataset(4)
    terms = ftu_batch_loss(model, ds.ftus[:2], ds.documents, progress=0.5)
    vals = terms.as_floats()
    assert all(math.isfinite(v) for v in vals.values())
    assert vals["l_dd"] > 0 and vals["l_qd"] > 0 and vals["l_kl"] > 0 and vals["lambda"] == pytest.approx(0.4)
    assert terms.total.item() == pytest.approx(vals["l_dd"] + vals["l_qd"] + 0.4 * vals["l_kl"], rel=1e-5)
    terms.total.backward()
    for name, params in model.parameter_groups().items():
        grads = [p.grad for p in params if p.grad is not None]
        assert grads and any(g.abs().sum() > 0 for g in grads), name
        assert all(torch.isfinite(g).all() for g in grads), name


def test_kl_alone_does_not_reach_the_base(make_model):
    """Figure 2: L_KL is detached from the base model."""
    model = make_model(use_qd_loss=False)
    ds = make_dataset(2)
    terms = ftu_batch_loss(model, ds.ftus[:2], ds.documents)
    terms.kl.backward()
    assert all(p.grad is None or p.grad.abs().sum() == 0 for p in model.parameter_groups()["base"])
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameter_groups()["aggregation"])


def test_batch_caps_masks_and_label_alignment(make_model):
    model = make_model(max_tokens=40)  # truncates the longer documents
    ds = make_dataset(3, n_pos=3, n_neg=4)
    del ds.ftus[0].positives["result"]  # a facet without positives is masked out
    del ds.ftus[1].questions["method"]  # a facet without a question
    fb = build_ftu_batch(model, ds.ftus, ds.documents, max_positives=2, max_negatives=3, rng=np.random.default_rng(1))
    assert fb.pos_idx.shape == (3, 3, 2) and fb.neg_idx.shape == (3, 3, 3)
    assert fb.facet_mask.tolist() == [[True, True, False], [True] * 3, [True] * 3]
    assert fb.pos_mask[0, 2].sum() == 0 and fb.pos_mask[1].all()
    assert fb.question_mask[1].tolist() == [True, False, True]
    # every index points at the right document
    for b, u in enumerate(ds.ftus):
        assert fb.doc_ids[fb.query_idx[b]] == u.query
        for f, name in enumerate(FACETS):
            chosen = [fb.doc_ids[i] for i, m in zip(fb.pos_idx[b, f].tolist(), fb.pos_mask[b, f].tolist()) if m]
            assert set(chosen) <= set(u.positives.get(name, []))
    assert len(set(fb.doc_ids)) == len(fb.doc_ids)  # unique documents, one forward
    # labels: title -1, then the kept sentences' facets, truncated ones dropped
    items = model.tokenize_documents([ds.documents[d] for d in fb.doc_ids])
    fidx = {f: i for i, f in enumerate(FACETS)}
    for i, (d, item) in enumerate(zip(fb.doc_ids, items)):
        doc = ds.documents[d]
        row = fb.doc_labels[i].tolist()
        assert all(x == -1 for x in row[item.n_sentences :])
        if doc["labels"] is None:
            assert all(x == -1 for x in row)
        else:
            expect = [-1] + [fidx[lab] if lab else -1 for lab in doc["labels"]][: item.n_sentences - 1]
            assert row[: item.n_sentences] == expect
    assert any(x.truncated for x in items)
    # the same rng seed gives the same sample
    again = build_ftu_batch(model, ds.ftus, ds.documents, 2, 3, np.random.default_rng(1))
    assert torch.equal(again.pos_idx, fb.pos_idx) and again.doc_ids == fb.doc_ids


@pytest.mark.parametrize("ablation", ["w/o L_KL", "w/o L_QD"])
def test_ablations_run(make_model, tmp_path, ablation):
    cfg = UniFARConfig(base_model="tiny-bert", num_heads=4, **small()).ablation(ablation)
    model = make_model(**{k: v for k, v in cfg.to_dict().items() if k in ("use_kl_loss", "use_qd_loss")}, **small())
    res = train(None, make_dataset(4), args_for(tmp_path, max_steps=1), model=model)
    assert res.steps == 1
    key = "l_kl" if ablation == "w/o L_KL" else "l_qd"
    assert res.last_terms[key] == 0.0 and res.last_terms["l_dd"] > 0


# ----------------------------------------------------------------------------- optimiser
def test_parameter_groups_get_the_paper_learning_rates(make_model):
    model = make_model()
    opt = make_optimizer(model, model.config)
    by_name = {g["name"]: g for g in opt.param_groups}
    assert by_name["base"]["lr"] == 2e-5 and by_name["anchors"]["lr"] == 2e-5 and by_name["aggregation"]["lr"] == 5e-5
    assert by_name["base/no_decay"]["weight_decay"] == 0.0 and by_name["base"]["weight_decay"] == 0.01
    assert all(p.ndim < 2 for p in by_name["aggregation/no_decay"]["params"])
    n_opt = sum(len(g["params"]) for g in opt.param_groups)
    assert n_opt == sum(1 for p in model.parameters() if p.requires_grad)
    frozen = make_model(freeze_anchors=True)
    assert "anchors" not in {g["name"] for g in make_optimizer(frozen, frozen.config).param_groups}


def test_warmup_then_linear_decay():
    total, warm = 100, 5  # 5 % warm-up
    values = [warmup_linear_factor(s, warm, total) for s in range(total + 1)]
    assert values[0] == 0.0 and values[5] == 1.0 and values[2] == pytest.approx(0.4)
    assert values[100] == 0.0 and values[50] == pytest.approx(50 / 95)
    assert all(a <= b for a, b in zip(values[:6], values[1:6]))  # rising warm-up
    assert all(a >= b for a, b in zip(values[5:], values[6:]))  # falling afterwards


def test_logged_learning_rates_follow_the_schedule(make_model, tmp_path):
    model = make_model(**small(warmup_ratio=0.5))
    res = train(None, make_dataset(8), args_for(tmp_path), model=model)  # 2 steps/epoch x 2 epochs
    log = read_log(res.output_dir)
    assert [r["step"] for r in log] == [1, 2, 3, 4]
    base = [r["lr"]["base"] for r in log]
    agg = [r["lr"]["aggregation"] for r in log]
    assert base == pytest.approx([0.0, 1e-5, 2e-5, 1e-5])  # warm-up 2 steps, decay over 2
    assert agg == pytest.approx([0.0, 2.5e-5, 5e-5, 2.5e-5])
    assert [r["lambda"] for r in log] == pytest.approx([0.3, 0.3 + 0.2 / 3, 0.3 + 0.4 / 3, 0.5])


# ----------------------------------------------------------------------------- runs
def test_resume_gives_exactly_the_uninterrupted_weights(make_model, tmp_path):
    ds = make_dataset(10)  # 3 steps/epoch (4, 4, 2 FTUs), 2 epochs = 6 steps
    common = dict(save_every=2, keep_checkpoints=5, seed=3, max_positives=1, max_negatives=1)
    full = train(None, ds, args_for(tmp_path, "full", **common), model=make_model(**small()))
    assert full.steps == 6

    class Killed(Exception):
        pass

    def kill_after_3(record):
        if record["step"] == 3:
            raise Killed

    with pytest.raises(Killed):
        train(None, ds, args_for(tmp_path, "cut", **common), model=make_model(**small()), callbacks=[kill_after_3])
    assert latest_checkpoint(tmp_path / "cut").name == "step-000002"  # mid-epoch: step 3 was never saved
    # a different fresh model: everything must come from the checkpoint
    torch.manual_seed(123)
    resumed = train(None, ds, args_for(tmp_path, "cut", resume=True, **common), model=make_model(**small()))
    assert resumed.start_step == 2 and resumed.steps == 6
    a, b = full.model.state_dict(), resumed.model.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # the log has each step once, and the repeated step 3 logged the same loss
    log_full, log_cut = read_log(tmp_path / "full"), read_log(tmp_path / "cut")
    assert [r["step"] for r in log_cut] == [1, 2, 3, 4, 5, 6]
    assert [r["loss"] for r in log_cut] == [r["loss"] for r in log_full]


def test_run_files(make_model, tmp_path):
    ds = make_dataset(10)
    args = args_for(tmp_path, save_every=1, keep_checkpoints=2, eval_fraction=0.2, eval_every=2)
    res = train(None, ds, args, model=make_model(**small()))
    out = res.output_dir
    ckpts = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert ckpts == [f"step-{res.steps - 1:06d}", f"step-{res.steps:06d}"]  # only the last two kept
    last = out / "checkpoints" / ckpts[-1]
    for name in ("model.safetensors", "config.json", "base", "optimizer.pt", "scheduler.pt", "rng_state.pt", "trainer_state.json"):
        assert (last / name).exists(), name
    state = json.loads((last / "trainer_state.json").read_text())
    assert state["step"] == res.steps and state["epoch"] == 2 and state["step_in_epoch"] == 0
    assert state["config"]["batch_size"] == 2 and state["args"]["seed"] == 0
    assert not any(p.name.startswith(".") for p in (out / "checkpoints").iterdir())  # no temp dirs left
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "finished" and run["steps"] == res.steps and run["n_eval_ftus"] == 2
    assert run["run"]["machine"]["torch"] == torch.__version__ and run["peak_memory"]["bytes"] > 0
    assert {"commit", "dirty", "date", "duration_s"} <= set(run["run"])  # unifar.runtime.run_facts
    assert run["ftus_per_second"] > 0 and run["seed"] == 0
    log = read_log(out)
    assert len(log) == res.steps and {"step", "epoch", "progress", "lr", "loss", "l_dd", "l_qd", "l_kl", "lambda",
                                      "grad_norm", "seconds", "ftus_per_s"} <= set(log[0])
    assert "eval" in log[1] and math.isfinite(log[1]["eval"]["loss"])
    from unifar import UniFAR

    final = UniFAR.from_pretrained(out / "final")
    for k, v in res.model.state_dict().items():
        assert torch.equal(v, final.state_dict()[k]), k
    with pytest.raises(FileExistsError):  # a second run into the same folder needs --resume
        train(None, ds, args, model=make_model(**small()))


def test_checkpoints_deleted_when_done(make_model, tmp_path):
    """keep_checkpoints_when_done=False keeps final/ and run.json only; a resume says why it cannot."""
    ds = make_dataset(10)
    args = args_for(tmp_path, save_every=1, keep_checkpoints_when_done=False)
    res = train(None, ds, args, model=make_model(**small()))
    out = res.output_dir
    assert not (out / "checkpoints").exists() and res.last_checkpoint is None
    run = json.loads((out / "run.json").read_text())
    assert run["checkpoints_deleted"] is True and run["last_checkpoint"] is None and run["status"] == "finished"
    final = UniFAR.from_pretrained(out / "final")
    for k, v in res.model.state_dict().items():
        assert torch.equal(v, final.state_dict()[k]), k
    with pytest.raises(FileExistsError, match="checkpoints were deleted"):
        train(None, ds, args, model=make_model(**small()), resume=True)


def test_nan_loss_raises_training_diverged(make_model, tmp_path, monkeypatch):
    import unifar.objective as T

    real = T.doc_doc_loss
    calls = {"n": 0}

    def poisoned(*a, **kw):
        calls["n"] += 1
        out = real(*a, **kw)
        return out * float("nan") if calls["n"] > 4 else out  # steps 1-2 fine (2 micro-batches each)

    monkeypatch.setattr(T, "doc_doc_loss", poisoned)
    args = args_for(tmp_path, save_every=1)
    with pytest.raises(TrainingDiverged, match=r"step 3: non-finite loss .*step-000002") as err:
        train(None, make_dataset(12), args, model=make_model(**small()))
    assert err.value.step == 3 and math.isnan(err.value.terms["l_dd"])
    out = tmp_path / "run"
    assert latest_checkpoint(out).name == "step-000002" and not (out / "final").exists()
    assert json.loads((out / "run.json").read_text())["status"] == "diverged"


def test_loss_above_max_loss_raises(make_model, tmp_path):
    with pytest.raises(TrainingDiverged, match="max_loss"):
        train(None, make_dataset(4), args_for(tmp_path, max_loss=1e-3), model=make_model(**small()))


def test_config_mismatch_is_refused(make_model, tmp_path):
    model = make_model()
    with pytest.raises(ValueError, match="num_heads"):
        train(UniFARConfig(base_model="tiny-bert", num_heads=2), make_dataset(4), args_for(tmp_path), model=model)


# ----------------------------------------------------------------------------- command line
def test_cli_train_on_a_tiny_folder(tmp_path, tokenizer, capsys):
    from unifar.cli import main

    from .conftest import tiny_bert

    base = tmp_path / "tiny-bert"
    tiny_bert(tokenizer).save_pretrained(base)
    tokenizer.save_pretrained(base)
    ds = make_dataset(8)
    write_ftus(tmp_path / "ftus", ds.ftus, ds.documents, command="test")
    assert len(load_ftus(tmp_path / "ftus")) == 8
    cfg = UniFARConfig(base_model=str(base), num_heads=4, batch_size=2, grad_accumulation=2)
    cfg.to_json(tmp_path / "config.json")
    argv = ["train", "--ftus", str(tmp_path / "ftus"), "--output", str(tmp_path / "out"), "--config",
            str(tmp_path / "config.json"), "--epochs", "1", "--device", "cpu", "--max-positives", "1", "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "steps" in printed and "final" in printed
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["steps"] == 2 and run["args"]["max_positives"] == 1 and run["config"]["epochs"] == 2
    assert (tmp_path / "out" / "final" / "model.safetensors").exists()


def test_cli_train_arguments():
    from unifar.cli import _train_config, build_parser

    p = build_parser()
    a = p.parse_args(["train", "--ftus", "F", "--output", "O", "--profile", "paper", "--max-steps", "5", "--resume"])
    cfg = _train_config(a)
    assert cfg.base_model == "mpnet" and cfg.lr_base == 3e-6 and cfg.lr_anchors == 3e-6 and cfg.lr_aggregation == 5e-5
    assert (cfg.batch_size, cfg.grad_accumulation, cfg.epochs, cfg.warmup_ratio, cfg.temperature) == (4, 4, 2, 0.05, 0.08)
    assert a.max_steps == 5 and a.resume
    a = p.parse_args(["train", "--ftus", "F", "--output", "O", "--base-model", "minilm", "--ablation", "w/o L_KL"])
    cfg = _train_config(a)
    assert cfg.base_model == "minilm" and cfg.lr_base == 2e-5 and not cfg.use_kl_loss and cfg.train_values
    cfg = _train_config(p.parse_args(["train", "--ftus", "F", "--output", "O", "--freeze-base", "--fixed-values"]))
    assert not cfg.train_values
    from unifar.cli import _train_args

    assert _train_args(p.parse_args(["train", "--ftus", "F", "--output", "O"])).keep_checkpoints_when_done
    argv = ["train", "--ftus", "F", "--output", "O", "--delete-checkpoints-when-done"]
    assert not _train_args(p.parse_args(argv)).keep_checkpoints_when_done


def test_plot_losses(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from unifar.plots import plot_losses

    records = [{"step": s, "loss": 3 - s / 10, "l_dd": 1.0, "l_qd": 1.5, "l_kl": 0.4, "lambda": 0.3 + s / 100}
               for s in range(1, 21)]
    records[9]["eval"] = {"loss": 2.5}
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    for source in (records, path, tmp_path):
        ax = plot_losses(source, smooth=3)
        labels = ax.get_legend_handles_labels()[1]
        assert {"L_total", "L_DD", "L_QD", "L_KL", "held-out L_total"} <= set(labels)
        plt.close("all")
    with pytest.raises(ValueError):
        plot_losses([])


# ----------------------------------------------------------------------------- frozen base, question-only facets
def test_frozen_state_cache_gives_the_same_loss(make_model):
    """Cached base states are the states the base would compute (eval mode): same loss terms."""
    from unifar.caching import TokenStateCache

    model = make_model()
    model.eval()
    ds = make_dataset(4)
    cache = TokenStateCache()
    with torch.no_grad():
        plain = ftu_batch_loss(model, ds.ftus[:3], ds.documents, 0.3).as_floats()
        first = ftu_batch_loss(model, ds.ftus[:3], ds.documents, 0.3, cache=cache).as_floats()
        again = ftu_batch_loss(model, ds.ftus[:3], ds.documents, 0.3, cache=cache).as_floats()
    assert cache.hits > 0 and len(cache) == cache.misses
    for k in plain:
        assert first[k] == pytest.approx(plain[k], rel=1e-5, abs=1e-6), k
        assert again[k] == pytest.approx(plain[k], rel=1e-5, abs=1e-6), k


def test_training_and_evaluation_share_the_frozen_base_states(make_model, tmp_path):
    """Rows are keyed by token ids: the states a frozen-base training run cached for its documents
    and questions serve a later evaluation of the trained model (another process, same base)
    without running the base again."""
    from unifar.caching import TokenStateCache

    model = make_model(**small())
    ds = make_dataset(8)
    cache = TokenStateCache.on_disk(model, tmp_path / "cache")
    res = train(None, ds, args_for(tmp_path / "run", max_steps=2, freeze_base=True), model=model, state_cache=cache)
    later = TokenStateCache.on_disk(res.model, tmp_path / "cache")
    assert len(later) == len(cache) > 0
    docs = [ds.documents[d] for d in list(ds.documents)[:5]]
    res.model.encode_documents(docs, state_cache=later)
    assert later.misses == 0 and later.hits == len(docs)


def test_freeze_base_trains_only_the_aggregation_module(make_model, tmp_path):
    model = make_model(**small())
    before = {k: v.clone() for k, v in model.base.state_dict().items()}
    anchors = model.anchors.detach().clone()
    res = train(None, make_dataset(8), args_for(tmp_path, max_steps=2, freeze_base=True), model=model)
    assert all(torch.equal(before[k], v) for k, v in res.model.base.state_dict().items())
    assert not torch.equal(anchors, res.model.anchors.detach())
    assert res.run_info["frozen_state_cache"]["hits"] > 0
    assert {g["name"].split("/")[0] for g in make_optimizer(res.model, res.model.config).param_groups} == {"anchors", "aggregation"}


def test_a_question_without_document_positives_still_gives_l_qd(make_model):
    """A real question for its own abstract: P = {d_q}; L_DD masked out, L_QD kept."""
    model = make_model()
    model.eval()  # no dropout: the two batches below must see the same embeddings
    ds = make_dataset(2, questions=False)
    u = FTU(ds.ftus[0].query)
    u.positives["method"] = []
    u.negatives["method"] = [ds.ftus[1].query]
    u.questions["method"] = Question("Which method does this paper use?", "method", "real", u.query)
    terms = ftu_batch_loss(model, [u], ds.documents).as_floats()
    assert terms["l_dd"] == 0.0 and terms["l_qd"] > 0
    both = ftu_batch_loss(model, [u, ds.ftus[1]], ds.documents).as_floats()
    alone = ftu_batch_loss(model, [ds.ftus[1]], ds.documents).as_floats()
    assert both["l_dd"] == pytest.approx(alone["l_dd"], rel=1e-5)  # L_DD: mean over facets with a positive


def test_fixed_values_learn_only_where_to_attend(make_model, tmp_path):
    """train_values=False: V rows and out_proj of both attentions keep their init (no weight
    decay either); Q/K rows, anchors and the query MLP still train."""
    model = make_model(**small(train_values=False))
    h = model.hidden_size
    init = {k: v.detach().clone() for k, v in model.state_dict().items() if not k.startswith("base.")}
    res = train(None, make_dataset(8), args_for(tmp_path, max_steps=3, freeze_base=True), model=model)
    after = {k: v.detach() for k, v in res.model.state_dict().items() if not k.startswith("base.")}
    for mha in ("mha_sent", "mha_tok"):
        assert torch.equal(after[f"{mha}.in_proj_weight"][2 * h :], init[f"{mha}.in_proj_weight"][2 * h :])
        assert torch.equal(after[f"{mha}.in_proj_bias"][2 * h :], init[f"{mha}.in_proj_bias"][2 * h :])
        assert torch.equal(after[f"{mha}.out_proj.weight"], init[f"{mha}.out_proj.weight"])
    assert not torch.equal(after["mha_sent.in_proj_weight"][:h], init["mha_sent.in_proj_weight"][:h])
    assert not torch.equal(after["anchors"], init["anchors"])
    decayed = [p for g in make_optimizer(res.model, res.model.config).param_groups if g["weight_decay"] > 0 for p in g["params"]]
    assert all(p is not res.model.mha_sent.in_proj_weight for p in decayed)


def test_lower_then_upper_states_equal_the_base(make_model, docs):
    """The base split for train_top_layers: cached lower states + the top k layers = the base."""
    model = make_model()
    model.eval()
    from unifar.text import collate

    batch = collate(model.tokenize_documents(docs), model.tokenizer.pad_token_id)  # padded rows
    with torch.no_grad():
        full = model.token_states(batch)
        real = batch.attention_mask.bool()
        for k in (0, 1, 2):
            for chunk in (None, 2):  # one padded batch, or length-sorted chunks padded on their own
                split = model.upper_states(model.lower_states(batch, k), batch.attention_mask, k, chunk_size=chunk)
                assert torch.allclose(split[real], full[real], atol=1e-5), (k, chunk)
                if k:
                    assert not split[~real].any(), "padding comes back as zeros"
    assert batch.input_ids.shape[0] > 2 and len(set(batch.attention_mask.sum(1).tolist())) > 1
    with pytest.raises(ValueError, match="top_layers"):
        model.lower_states(batch, 3)


def test_train_top_layers_trains_only_those_layers(make_model, tmp_path):
    """freeze_base + train_top_layers=1: the last base layer and the aggregation module change,
    the embeddings and the layers below do not; the checkpoint holds the trained layer."""
    model = make_model(**small())
    before = {k: v.clone() for k, v in model.base.state_dict().items()}
    res = train(None, make_dataset(8), args_for(tmp_path / "a", max_steps=2, freeze_base=True, train_top_layers=1),
                model=model)
    after = res.model.base.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("encoder.layer.1.") for k in changed)
    assert {g["name"].split("/")[0] for g in make_optimizer(res.model, res.model.config).param_groups} == {"base", "anchors", "aggregation"}
    # the saved model holds the trained layer, and its (cache-free) encoding uses it
    again = UniFAR.from_pretrained(res.final_dir)
    assert torch.equal(again.base.state_dict()["encoder.layer.1.output.dense.weight"], after["encoder.layer.1.output.dense.weight"])
    with pytest.raises(ValueError, match="needs freeze_base"):
        TrainArgs(train_top_layers=1)


def test_top_layers_dropout_switch(make_model):
    """The trained top layers run without dropout unless asked (a CPU speed choice)."""
    from unifar.frozen_base import frozen_base_mode

    model = make_model()
    model.train()
    frozen_base_mode(model, 1)
    assert not any(m.training for m in model.base.modules())
    frozen_base_mode(model, 1, dropout=True)
    top = set(map(id, model.top_base_layers(1).modules()))
    assert all(m.training == (id(m) in top) for m in model.base.modules())


def test_train_top_layers_rejects_a_base_it_cannot_split(make_model):
    model = make_model()
    model.base.config.model_type = "mpnet"
    with pytest.raises(NotImplementedError, match="BERT-style"):
        model.base_layers()


# ----------------------------------------------------------------------------- run summaries
def test_summarize_log_on_a_real_run(make_model, tmp_path):
    """The summary reads a run's log.jsonl: first/last records, window means, held-out records."""
    from unifar.training_log import summarize_log

    res = train(None, make_dataset(n_ftus=12), args_for(tmp_path, max_steps=4, eval_fraction=0.25, eval_every=2),
                model=make_model(**small()))
    log = read_log(res.output_dir)
    s = summarize_log(log, window=50)
    assert s["steps"] == res.steps == 4 and s["window"] == 2  # at most half the run
    assert s["first"]["loss"] == pytest.approx(log[0]["loss"]) and s["last"] == {
        t: pytest.approx(res.last_terms[t]) for t in ("loss", "l_dd", "l_qd", "l_kl")}
    assert s["last_mean"]["l_kl"] == pytest.approx(np.mean([r["l_kl"] for r in log[-2:]]))
    assert [h["step"] for h in s["held_out"]] == [2, 4]
    assert s["held_out"][-1]["loss"] == pytest.approx(res.run_info["held_out"]["loss"])
    with pytest.raises(ValueError, match="no records"):
        summarize_log([])


def test_facet_attention_stats_untrained_is_uniform(make_model):
    """The identity-initialised model attends uniformly: entropy 1, gold mass = uniform's."""
    from unifar.evaluation.attention import facet_attention_stats

    model = make_model()
    docs = [_doc(i) for i in range(6)] + [_doc(9, labelled=False)]
    enc = model.encode_documents(docs, show_progress=False)
    stats = facet_attention_stats(model, docs, enc, reference=enc.embeddings)
    assert stats["n_documents"] == len(docs)
    assert stats["norm_entropy"] == pytest.approx(1.0, abs=1e-3)
    assert stats["mass_on_gold"] == pytest.approx(stats["uniform_mass_on_gold"], abs=1e-3)
    assert stats["cos_to_reference"] == pytest.approx(1.0, abs=1e-4)
    # uniform attention over the title + n sentences puts 1 / (n + 1) on the title
    want = np.mean([1 / (1 + len(d["sentences"])) for d in docs])
    assert stats["title_mass"] == pytest.approx(want, abs=1e-3)
    assert set(stats["mass_on_gold_by_facet"]) == set(FACETS)
    # attention that sits on the labelled sentences: mass 1 on gold, entropy below 1
    import dataclasses

    fidx = {f: i for i, f in enumerate(FACETS)}
    peaked = []
    for d, A in zip(docs, enc.attention):
        B = torch.zeros_like(A)
        labs = [-1] + [fidx.get(lab, -1) if lab else -1 for lab in (d["labels"] or [])]
        for f in range(len(FACETS)):
            cols = [j for j, lab in enumerate(labs[: A.shape[1]]) if lab == f]
            B[f, cols if cols else list(range(A.shape[1]))] = 1.0
        peaked.append(B / B.sum(1, keepdim=True))
    stats = facet_attention_stats(model, docs, dataclasses.replace(enc, attention=peaked))
    assert stats["mass_on_gold"] == pytest.approx(1.0) and stats["norm_entropy"] < 0.9
    assert "cos_to_reference" not in stats


def test_a_finished_run_is_reused_not_trained_again(make_model, tmp_path):
    """finished_run loads a finished run's final weights into a fresh model and refuses one
    trained with other settings."""
    from unifar.reuse import finished_run

    args = args_for(tmp_path, "done", max_steps=2, keep_checkpoints_when_done=False)
    res = train(None, make_dataset(8), args, model=make_model())
    fresh = make_model()
    assert finished_run(tmp_path / "nothing", fresh) is None
    again = finished_run(args.output_dir, fresh, args)
    assert again.steps == res.steps == 2 and again.last_terms == pytest.approx(res.last_terms)
    for (name, a), b in zip(res.model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    with pytest.raises(ValueError, match="max_steps"):
        finished_run(args.output_dir, make_model(), args_for(tmp_path, "done", max_steps=3))
