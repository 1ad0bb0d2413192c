"""Distillation of the hybrid teacher (beyond the paper): the teacher lists an FTU carries, their
place in a batch, the L_KD term at weight 0 (the paper's objective, unchanged) and above 0, and
a short run on a tiny model that makes the student rank more like its teacher."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from unifar import UniFARConfig
from unifar.datasets.ftu import FTU, TeacherList
from unifar.datasets.ftu_files import load_ftus, write_ftus
from unifar.objective import build_ftu_batch, ftu_batch_loss, ftu_objective
from unifar.train import train
from unifar.training_log import read_log

from .test_train import FACETS, args_for, make_dataset, small


def with_teachers(ds, n_cands: int = 6, seed: int = 0, drop_facet: str | None = "result"):
    """Give every FTU a teacher list: ``n_cands`` other documents with random graded scores per
    facet (the first FTU has no ``drop_facet`` scores, as a query document without that facet)."""
    rng = np.random.default_rng(seed)
    ids = list(ds.documents)
    for b, u in enumerate(ds.ftus):
        others = [d for d in ids if d != u.query]
        cands = [others[i] for i in rng.choice(len(others), size=n_cands, replace=False)]
        facets = [f for f in FACETS if not (b == 0 and f == drop_facet)]
        u.teacher = TeacherList(cands, {f: [round(float(x), 6) for x in rng.normal(size=n_cands)] for f in facets})
    return ds


def test_teacher_lists_in_the_batch(make_model):
    model = make_model(distill_weight=1.0)
    ds = with_teachers(make_dataset(3))
    fb = build_ftu_batch(model, ds.ftus, ds.documents, rng=np.random.default_rng(0))
    assert fb.teacher_idx.shape == (3, 6) and fb.teacher_scores.shape == fb.teacher_mask.shape == (3, 3, 6)
    assert fb.teacher_mask[0].tolist() == [[True] * 6, [True] * 6, [False] * 6]  # no result scores
    for b, u in enumerate(ds.ftus):  # every index points at its candidate, every score at its value
        assert [fb.doc_ids[i] for i in fb.teacher_idx[b].tolist()] == u.teacher.candidates
        for f, name in enumerate(FACETS):
            if name in u.teacher.scores:
                assert fb.teacher_scores[b, f].tolist() == pytest.approx(u.teacher.scores[name])
    # weight 0 (the paper's objective): the batch carries no teacher lists, nor their documents
    plain = build_ftu_batch(make_model(), ds.ftus, ds.documents, rng=np.random.default_rng(0))
    assert plain.teacher_idx is None and len(plain.doc_ids) < len(fb.doc_ids)
    # a cap keeps the teacher's head of every facet and fills up with a sample
    capped = build_ftu_batch(model, ds.ftus, ds.documents, rng=np.random.default_rng(0), max_teacher_candidates=4)
    assert capped.teacher_idx.shape == (3, 4)
    top = {u.teacher.candidates[int(np.argmax(v))] for u in ds.ftus[1:2] for v in u.teacher.scores.values()}
    assert top <= {capped.doc_ids[i] for i in capped.teacher_idx[1].tolist()}


def test_weight_zero_is_the_papers_objective_and_weight_mu_adds_mu_times_l_kd(make_model):
    ds = with_teachers(make_dataset(4))
    paper = make_model().eval()  # eval: no dropout, so two forwards are comparable
    bare = make_dataset(4)  # the same FTUs without teacher lists
    t0 = ftu_batch_loss(paper, ds.ftus[:2], ds.documents, rng=np.random.default_rng(0))
    t_bare = ftu_batch_loss(paper, bare.ftus[:2], bare.documents, rng=np.random.default_rng(0))
    assert t0.distill is None and t0.total.item() == t_bare.total.item()
    mu = 0.7
    student = make_model(distill_weight=mu).eval()
    t = ftu_batch_loss(student, ds.ftus[:2], ds.documents, rng=np.random.default_rng(0))
    assert t.distill is not None and t.distill.item() > 0
    assert t.total.item() == pytest.approx(t.doc_doc.item() + t.question_doc.item() + 0.3 * t.kl.item()
                                           + mu * t.distill.item(), rel=1e-5)
    # the paper's terms do not change when the distillation term is added
    assert (t.doc_doc.item(), t.question_doc.item()) == pytest.approx((t0.doc_doc.item(), t0.question_doc.item()), rel=1e-5)
    # L_KD alone reaches the base and the aggregation module
    t.distill.backward()
    for name in ("base", "aggregation", "anchors"):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in student.parameter_groups()[name]), name


def test_l_kd_is_the_listwise_kl_of_the_students_cosines(make_model):
    """The term in the objective is listwise_distillation_loss on the facet cosines of d_q and its
    candidates, averaged over (FTU, facet) lists: recomputed here by hand from the embeddings."""
    model = make_model(distill_weight=1.0, distill_temperature=0.5).eval()
    ds = with_teachers(make_dataset(2))
    fb = build_ftu_batch(model, ds.ftus, ds.documents, rng=np.random.default_rng(0))
    with torch.no_grad():
        terms = ftu_objective(model, fb, 0.3)
        E = model(fb.documents).embeddings
    expect = []
    for b, u in enumerate(ds.ftus):
        q = E[fb.query_idx[b]]
        for f, name in enumerate(FACETS):
            if name not in u.teacher.scores:
                continue
            s = torch.stack([q[f] @ E[fb.doc_ids.index(c), f] for c in u.teacher.candidates]) / 0.08
            p_t = torch.softmax(torch.tensor(u.teacher.scores[name]) / 0.5, 0)
            expect.append(float((p_t * (p_t.log() - torch.log_softmax(s, 0))).sum()))
    assert terms.distill.item() == pytest.approx(np.mean(expect), rel=1e-5)
    margin = make_model(distill_weight=1.0, distill_loss="margin_mse")
    assert ftu_objective(margin, fb, 0.3).distill.item() > 0


def test_training_on_the_teacher_makes_the_student_rank_like_it(make_model, tmp_path):
    """A teacher that prefers low-numbered documents in every list: a short run with L_KD alone
    lowers L_KD on its FTUs (the student's cosines come to order the candidates as the teacher
    does), and the log records the term at every step."""
    ds = with_teachers(make_dataset(8, n_docs=16), n_cands=6)
    number = {d: i for i, d in enumerate(ds.documents)}
    for u in ds.ftus:
        u.teacher.scores = {f: [-number[c] / 4.0 for c in u.teacher.candidates] for f in FACETS}
    model = make_model(**small(), distill_weight=1.0, use_kl_loss=False, use_qd_loss=False,
                       lr_aggregation=1e-2, lr_anchors=1e-2, lr_base=1e-2, warmup_ratio=0.0)

    def l_kd(m):
        with torch.no_grad():
            return ftu_batch_loss(m.eval(), ds.ftus, ds.documents, rng=np.random.default_rng(0)).distill.item()

    before = l_kd(model)
    res = train(None, ds, args_for(tmp_path, epochs=20, max_steps=20), model=model.train())
    log = read_log(res.output_dir)
    assert len(log) == 20 and all(math.isfinite(r["l_kd"]) and r["l_kd"] >= 0 for r in log)
    assert l_kd(res.model) < 0.5 * before


def test_held_out_loss_reports_l_kd_also_for_the_papers_objective(make_model, tmp_path):
    ds = with_teachers(make_dataset(12))
    res = train(None, ds, args_for(tmp_path, max_steps=2, eval_fraction=0.25), model=make_model(**small()))
    assert "l_kd" in res.run_info["held_out"] and "l_kd" not in res.last_terms


def test_teacher_lists_round_trip_and_bad_lists_are_named(tmp_path):
    ds = with_teachers(make_dataset(3))
    folder = write_ftus(tmp_path / "ftus", ds.ftus, ds.documents, command="test")
    back = load_ftus(folder)
    assert [u.teacher for u in back.ftus] == [u.teacher for u in ds.ftus]
    good = ds.ftus[1].to_dict()
    bad_cases = {
        "one per candidate": {**good["teacher"], "scores": {"method": [1.0]}},
        "non-finite": {**good["teacher"], "scores": {"method": [float("nan")] * 6}},
        "unknown facet": {**good["teacher"], "scores": {"topic": [0.0] * 6}},
        "twice": {**good["teacher"], "candidates": [good["teacher"]["candidates"][0]] * 6},
        "query document itself": {**good["teacher"], "candidates": [good["query"]] + good["teacher"]["candidates"][1:]},
    }
    for message, teacher in bad_cases.items():
        with pytest.raises(ValueError, match=message):
            FTU.from_dict({**good, "teacher": teacher})
    # a candidate missing from documents.jsonl is named with the file and line
    lines = (folder / "ftus.jsonl").read_text().splitlines()
    import json

    rec = json.loads(lines[1])
    rec["teacher"]["candidates"][0] = "nowhere"
    lines[1] = json.dumps(rec)
    (folder / "ftus.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"ftus.jsonl:2: teacher candidates refer to unknown document 'nowhere'"):
        load_ftus(folder, verify_hashes=False)


def test_distillation_config_is_checked():
    with pytest.raises(ValueError, match="distill_loss"):
        UniFARConfig(distill_loss="mse")
    with pytest.raises(ValueError, match="distill_temperature"):
        UniFARConfig(distill_temperature=0.0)
    with pytest.raises(ValueError, match="distill_weight"):
        UniFARConfig(distill_weight=-1.0)
    assert UniFARConfig().distill_weight == 0.0  # the paper's objective by default


def test_the_single_vector_control_is_the_token_mean_and_trains_on_the_same_loop(make_model, tmp_path, docs):
    """aggregation="mean" (chapter 5's control): every facet embedding is the mean of the input's
    token states; the same loop trains it on the same FTUs and teacher lists."""
    from unifar.pooling import mean_pool

    control = make_model(aggregation="mean", use_kl_loss=False, distill_weight=1.0, **small()).eval()
    items = control.tokenize_documents(docs)
    from unifar.text import collate

    batch = collate(items, control.tokenizer.pad_token_id)
    with torch.no_grad():
        out = control(batch)
        expect = torch.nn.functional.normalize(mean_pool(control.token_states(batch), batch.attention_mask), dim=-1)
    assert torch.allclose(out.embeddings, expect.unsqueeze(1).expand_as(out.embeddings), atol=1e-6)
    assert torch.equal(out.embeddings[:, 0], out.embeddings[:, 2])  # facets cannot differ
    res = train(None, with_teachers(make_dataset(8)), args_for(tmp_path, max_steps=2), model=control.train())
    assert res.steps == 2 and res.last_terms["l_kd"] > 0 and res.last_terms["l_kl"] == 0.0
    with pytest.raises(ValueError, match="use_kl_loss=False"):
        UniFARConfig(aggregation="mean")
