"""The offline sentence facet labeller: a :class:`~unifar.construction.labelling.SentenceLabeller`
trained on CSAbstruct's human sentence roles, the stand-in for the paper's LLM labeller.

A sentence is embedded by a :class:`~unifar.rhetoric.encoder.SentenceEncoder` (a plain base encoder with
mean pooling, or one fine-tuned with a SciToricsBERT loss, :func:`unifar.rhetoric.finetune.finetune`),
then classified by a head:

* ``"linear"``: multinomial logistic regression on the L2-normalised embedding (scikit-learn,
  L-BFGS, L2 penalty ``C``), ``p(c|x) = softmax(W x + b)_c``; prediction ``argmax_c``;
* ``"knn"``: the ``k`` training sentences of highest cosine similarity vote (majority; ties
  broken by the summed similarity).

Classes are the three facets, mapped from CSAbstruct's labels as CSFCube does
(:data:`~unifar.facets.CSABSTRUCT_TO_FACET`): background and objective -> background,
method -> method, result -> result; ``other`` sentences are left out of training and of
evaluation. The labeller predicts a facet for every sentence (never ``None``) unless
``min_confidence`` is set, below which it answers ``None``.

**Leakage.** The training documents (:mod:`unifar.rhetoric.labeller_data`) leave out the
CSAbstruct abstracts that are CSFCube papers; the dropped ids are kept in the labeller's
metadata and saved with it. Its scores are :mod:`unifar.rhetoric.labeller_scores`.

Saved as a folder: ``labeller.json`` (head, hyper-parameters, facets, encoder source, training
metadata), ``head.safetensors`` (``W``/``b``, or the kNN memory ``embeddings``/``labels``) and,
when the encoder is not an unchanged named base model, ``encoder/`` (``transformers``
safetensors + tokenizer). No pickle anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from ..facets import FACETS
from .encoder import SentenceEncoder
from .labeller_data import labelled_sentences
from .labeller_scores import facet_scores

__all__ = ["FacetLabeller", "fit_linear_head"]

CONFIG_NAME = "labeller.json"
HEAD_NAME = "head.safetensors"
ENCODER_DIR = "encoder"
FORMAT_VERSION = 1


def fit_linear_head(X: torch.Tensor, y: torch.Tensor, C: float, class_weight: str | None = None,
                    max_iter: int = 1000, tol: float = 1e-6) -> tuple[dict[str, torch.Tensor], int]:
    """Multinomial logistic regression (scikit-learn, L-BFGS, L2 penalty ``C``) of classes ``y``
    [N] on features ``X`` [N, d], fitted in float64: ``{"W": [3, d], "b": [3]}`` and the number
    of L-BFGS iterations. Predict with ``argmax(X W^T + b)``."""
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=C, class_weight=class_weight, max_iter=max_iter, tol=tol)
    clf.fit(torch.as_tensor(X).double().numpy(), torch.as_tensor(y).numpy())
    params = {"W": torch.from_numpy(clf.coef_.copy()), "b": torch.from_numpy(clf.intercept_.copy())}
    return params, int(clf.n_iter_.max())


# ----------------------------------------------------------------------------- the labeller


class FacetLabeller:
    """Sentence -> facet classifier on sentence embeddings (see the module docstring).

    Args:
        encoder: the sentence encoder (kept frozen here; fine-tune it beforehand if wanted).
        head: ``"linear"`` or ``"knn"``.
        C: inverse L2 strength of the logistic regression (``"linear"``).
        k: neighbours (``"knn"``).
        class_weight: ``None`` or ``"balanced"`` (``"linear"``; scikit-learn's meaning).
        max_iter: L-BFGS iterations at most (``"linear"``).
        tol: L-BFGS stopping tolerance (``"linear"``). 1e-6, not scikit-learn's 1e-4: at 1e-4 a
            weakly regularised fit (C = 10, 100) stops early at a point that moves with 1e-6
            noise in the embeddings. Measured here (``benchmarks/studies/labeller_stability.py``, base
            MiniLM, 1,453 CSAbstruct train / 193 dev sentences): at 1e-4 the dev macro-F1 of
            C = 10 and 100 moved by up to 0.006 under that noise, at 1e-6 by 0 for every C
            (CI once picked another C than this machine for that reason).
        min_confidence: answer ``None`` when the top class probability (linear) or vote share
            (kNN) is below it; ``None``: always a facet.
        batch_size: sentences per encoder call.
        progress: show a progress bar while encoding (default: for long inputs).
    """

    def __init__(
        self,
        encoder: SentenceEncoder,
        head: str = "linear",
        C: float = 1.0,
        k: int = 10,
        class_weight: str | None = None,
        max_iter: int = 1000,
        tol: float = 1e-6,
        min_confidence: float | None = None,
        batch_size: int = 64,
        progress: bool | None = None,
    ) -> None:
        if head not in ("linear", "knn"):
            raise ValueError(f"head must be 'linear' or 'knn', got {head!r}")
        if class_weight not in (None, "balanced"):
            raise ValueError(f"class_weight must be None or 'balanced', got {class_weight!r}")
        self.encoder = encoder
        self.head = head
        self.C = float(C)
        self.k = int(k)
        self.class_weight = class_weight
        self.max_iter = int(max_iter)
        self.tol = float(tol)
        self.min_confidence = min_confidence
        self.batch_size = batch_size
        self.progress = progress
        self.params: dict[str, torch.Tensor] = {}
        self.metadata: dict[str, Any] = {}
        self.tie_margin = 1e-4  # decision-score gap below which float64 decides (predict_sentences)
        self.last_near_ties = 0  # how many sentences the last predict_sentences call re-decided
        self._encoder64: Any = None

    # -- training --------------------------------------------------------------------------------
    def embed(self, sentences: Sequence[str]) -> torch.Tensor:
        """L2-normalised float32 embeddings [N, d] on the CPU."""
        return self.encoder.encode(sentences, batch_size=self.batch_size, normalize=True, progress=self.progress)

    def fit(self, docs: Sequence[Mapping[str, Any]], **metadata: Any) -> "FacetLabeller":
        """Train the head on the facet-labelled sentences of ``docs`` (``labels`` column; ``None``
        skipped). ``metadata`` (e.g. the excluded ids) is stored and saved with the labeller."""
        sents, labels = labelled_sentences(docs)
        return self.fit_sentences(sents, labels, documents=len(docs), **metadata)

    def fit_sentences(self, sentences: Sequence[str], labels: Sequence[str], **metadata: Any) -> "FacetLabeller":
        """Train the head on sentences and their facets."""
        if len(sentences) != len(labels):
            raise ValueError(f"{len(sentences)} sentences but {len(labels)} labels")
        missing = sorted(set(FACETS) - set(labels))
        if missing:
            raise ValueError(f"no training sentence for facet(s) {missing}")
        return self.fit_embeddings(self.embed(sentences), labels, **metadata)

    def fit_embeddings(self, X: torch.Tensor, labels: Sequence[str], **metadata: Any) -> "FacetLabeller":
        """Train the head on pre-computed embeddings (L2-normalised, from :meth:`embed`) and
        facets; lets a notebook compare heads without encoding again."""
        if len(X) != len(labels):
            raise ValueError(f"{len(X)} embeddings but {len(labels)} labels")
        missing = sorted(set(FACETS) - set(labels))
        if missing:
            raise ValueError(f"no training sentence for facet(s) {missing}")
        unknown = sorted(set(labels) - set(FACETS))
        if unknown:
            raise ValueError(f"unknown facet(s) {unknown}; expected {FACETS}")
        X = torch.as_tensor(X, dtype=torch.float32)
        y = torch.tensor([FACETS.index(x) for x in labels], dtype=torch.long)
        if self.head == "linear":
            self.params, iterations = fit_linear_head(X, y, self.C, self.class_weight, self.max_iter, self.tol)
            metadata = {**metadata, "lbfgs_iterations": iterations}
        else:
            self.params = {"embeddings": X.contiguous(), "labels": y}
        counts = torch.bincount(y, minlength=len(FACETS)).tolist()
        self.metadata = {**metadata, "sentences": len(labels), "class_counts": dict(zip(FACETS, counts))}
        return self

    # -- prediction ------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not self.params:
            raise RuntimeError("the labeller is not fitted; call fit() or load()")

    def predict_proba_embeddings(self, X: torch.Tensor) -> torch.Tensor:
        """Class scores [N, 3] (linear: probabilities in float64; kNN: vote shares)."""
        self._check_fitted()
        if self.head == "linear":
            return torch.softmax(X.double() @ self.params["W"].T + self.params["b"], dim=-1)
        return self._knn_votes(X)[0] / min(self.k, len(self.params["labels"]))

    def _knn_votes(self, X: torch.Tensor, chunk: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
        """kNN vote counts and summed similarities, both [N, 3]."""
        mem, ys = self.params["embeddings"], self.params["labels"]
        k = min(self.k, len(ys))
        votes = torch.zeros(len(X), len(FACETS), dtype=torch.float64)
        sims = torch.zeros_like(votes)
        for i in range(0, len(X), chunk):
            s, idx = torch.topk(X[i : i + chunk].float() @ mem.T, k, dim=1)
            onehot = torch.nn.functional.one_hot(ys[idx], len(FACETS)).double()  # [n, k, 3]
            votes[i : i + chunk] = onehot.sum(1)
            sims[i : i + chunk] = (onehot * s.double().unsqueeze(-1)).sum(1)
        return votes, sims

    def decision_scores(self, X: torch.Tensor) -> torch.Tensor:
        """Scores [N, 3] (float64) whose argmax is the prediction: the logits ``W x + b``
        (linear), or votes then summed similarity, lexicographically (kNN)."""
        self._check_fitted()
        if self.head == "linear":
            return X.double() @ self.params["W"].T + self.params["b"]
        votes, sims = self._knn_votes(X)
        k = min(self.k, len(self.params["labels"]))
        # lexicographic: votes first, then summed similarity (in [-k, k]) breaks ties
        return votes * (2 * k + 1) + (sims + k)

    def predict_embeddings(self, X: torch.Tensor) -> list[str | None]:
        """Facets of pre-computed (normalised) embeddings."""
        self._check_fitted()
        if len(X) == 0:
            return []
        pred = self.decision_scores(X).argmax(dim=-1)
        if self.head == "linear":
            conf = self.predict_proba_embeddings(X).gather(1, pred.unsqueeze(1)).squeeze(1)
        else:
            votes, _ = self._knn_votes(X)
            conf = votes.gather(1, pred.unsqueeze(1)).squeeze(1) / min(self.k, len(self.params["labels"]))
        out: list[str | None] = [FACETS[i] for i in pred.tolist()]
        if self.min_confidence is not None:
            out = [f if c >= self.min_confidence else None for f, c in zip(out, conf.tolist())]
        return out

    def near_ties(self, X: torch.Tensor) -> torch.Tensor:
        """Indices of the rows whose two best decision scores differ by less than
        :attr:`tie_margin`: the decisions that float32 rounding noise could flip."""
        if len(X) == 0:
            return torch.empty(0, dtype=torch.long)
        top2 = self.decision_scores(X).topk(2, dim=-1).values
        return torch.nonzero(top2[:, 0] - top2[:, 1] < self.tie_margin).flatten()

    @torch.no_grad()
    def embed_float64(self, sentences: Sequence[str]) -> torch.Tensor:
        """L2-normalised float64 embeddings [N, d], one sentence at a time (no padding) with a
        float64 copy of the encoder: what float32 approximates, the same on every CPU to ~1e-15."""
        enc = self.encoder
        if getattr(self, "_encoder64", None) is None:
            import copy

            self._encoder64 = copy.deepcopy(enc.model).to("cpu", torch.float64).eval()
        out = torch.empty(len(sentences), enc.embedding_size, dtype=torch.float64)
        for i, sentence in enumerate(sentences):
            t = enc.tokenizer([sentence], truncation=True, max_length=enc.max_length, return_tensors="pt")
            hidden = self._encoder64(**t).last_hidden_state[0]
            m = t["attention_mask"][0].to(torch.float64).unsqueeze(-1)
            out[i] = torch.nn.functional.normalize((hidden * m).sum(0) / m.sum(), dim=-1)
        return out

    def predict_sentences(self, sentences: Sequence[str]) -> list[str | None]:
        """One facet (or ``None``, see ``min_confidence``) per sentence.

        Near ties are decided in float64: a sentence whose two best classes score within
        :attr:`tie_margin` (1e-4) in float32 is embedded again in float64 and classified on that.
        Another CPU moves the float32 embeddings by about 1e-7, which flips an argmax only when
        the margin is of that size; such a sentence is always a near tie, decided identically
        everywhere, and a sentence outside the band keeps its decision on every CPU. (Once, one
        of about 13,000 chapter-3 labels flipped between an AVX2 and an AVX-512 machine.)
        """
        sentences = list(sentences)
        X = self.embed(sentences)
        preds = self.predict_embeddings(X)
        near = self.near_ties(X).tolist()
        if near:
            for i, p in zip(near, self.predict_embeddings(self.embed_float64([sentences[i] for i in near]))):
                preds[i] = p
        self.last_near_ties = len(near)
        return preds

    def label_documents(self, docs: Sequence[Mapping[str, Any]]) -> list[list[str | None]]:
        """:class:`~unifar.construction.labelling.SentenceLabeller`: one facet per sentence of each
        document's ``sentences`` (all documents' sentences encoded in one pass)."""
        flat: list[str] = []
        sizes: list[int] = []
        for k, doc in enumerate(docs):
            sents = doc.get("sentences")
            if sents is None or isinstance(sents, str):
                raise ValueError(f"document {k} ({doc.get('id', '?')!r}) needs a 'sentences' list")
            flat.extend(sents)
            sizes.append(len(sents))
        preds = self.predict_sentences(flat)
        out, start = [], 0
        for n in sizes:
            out.append(preds[start : start + n])
            start += n
        return out

    # -- evaluation ------------------------------------------------------------------------------
    def evaluate(self, docs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """:func:`~unifar.rhetoric.labeller_scores.facet_scores` of this labeller on the facet-labelled sentences of ``docs``
        (gold ``None``, e.g. CSAbstruct's ``other``, skipped)."""
        sents, gold = labelled_sentences(docs)
        return facet_scores(gold, self.predict_sentences(sents))

    # -- persistence -----------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "head": self.head,
            "facets": list(FACETS),
            "C": self.C,
            "k": self.k,
            "class_weight": self.class_weight,
            "max_iter": self.max_iter,
            "tol": self.tol,
            "min_confidence": self.min_confidence,
            "batch_size": self.batch_size,
            "encoder": {
                "name": self.encoder.name if not self.encoder.finetuned else None,
                "finetuned": self.encoder.finetuned,
                "max_length": self.encoder.max_length,
            },
            "metadata": self.metadata,
        }

    def save(self, directory: str | Path, save_encoder: bool | None = None) -> Path:
        """Write the labeller to ``directory``; the encoder's weights go along when it has no
        name or was fine-tuned (or when ``save_encoder`` is True)."""
        from safetensors.torch import save_file

        self._check_fitted()
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        cfg = self.config()
        if save_encoder is None:
            save_encoder = cfg["encoder"]["name"] is None
        if save_encoder:
            self.encoder.save_pretrained(path / ENCODER_DIR)
        elif cfg["encoder"]["name"] is None:
            raise ValueError("an unnamed or fine-tuned encoder must be saved (save_encoder=True)")
        cfg["encoder"]["saved"] = bool(save_encoder)
        save_file({k: v.contiguous() for k, v in self.params.items()}, str(path / HEAD_NAME))
        (path / CONFIG_NAME).write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(
        cls, directory: str | Path, encoder: SentenceEncoder | None = None, device: str | torch.device | None = None
    ) -> "FacetLabeller":
        """Read a labeller written by :meth:`save`. ``encoder`` overrides the stored one;
        otherwise ``encoder/`` is loaded if saved, else the named base model."""
        from safetensors.torch import load_file

        path = Path(directory)
        cfg = json.loads((path / CONFIG_NAME).read_text(encoding="utf-8"))
        if cfg.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path / CONFIG_NAME}: unsupported format_version {cfg.get('format_version')!r}")
        if tuple(cfg["facets"]) != FACETS:
            raise ValueError(f"{path / CONFIG_NAME}: facets {cfg['facets']} differ from {FACETS}")
        enc_cfg = cfg["encoder"]
        if encoder is None:
            source = str(path / ENCODER_DIR) if enc_cfg.get("saved") else enc_cfg["name"]
            encoder = SentenceEncoder.from_name(source, max_length=enc_cfg["max_length"])
            encoder.name = enc_cfg["name"]
            encoder.finetuned = bool(enc_cfg["finetuned"])
        if device is not None:
            encoder.to(device)
        lab = cls(
            encoder, head=cfg["head"], C=cfg["C"], k=cfg["k"], class_weight=cfg["class_weight"],
            max_iter=cfg["max_iter"], tol=cfg.get("tol", 1e-4), min_confidence=cfg["min_confidence"], batch_size=cfg["batch_size"],
        )
        lab.params = load_file(str(path / HEAD_NAME))
        lab.metadata = cfg.get("metadata", {})
        return lab
