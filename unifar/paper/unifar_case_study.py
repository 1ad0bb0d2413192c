"""The UniFAR paper's case study (appendix F, table 9 and figure 4), as the paper prints it.

Table 9 prints one LitSearch question and three retrieved abstracts with every sentence indexed
(S0, S1, ...); the prose of appendix F says where each facet's attention peaks in figure 4. Both
are kept here verbatim (sentences as printed, without their "(Sk)" markers), so that chapter 6
can draw figure 4 for the same inputs and measure how much of each facet's attention falls on
the paper's spans.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CaseStudyDocument", "UNIFAR_CASE_STUDY_QUESTION", "UNIFAR_CASE_STUDY_DOCUMENTS"]


@dataclass(frozen=True)
class CaseStudyDocument:
    """One abstract of table 9 and, per facet, the sentence indices figure 4's prose names."""

    title: str
    sentences: tuple[str, ...]
    spans: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def as_document(self) -> dict[str, object]:
        """The ``{"title", "sentences"}`` form :meth:`unifar.model.UniFAR.encode_documents` takes."""
        return {"title": self.title, "sentences": list(self.sentences)}


def _span(first: int, last: int) -> tuple[int, ...]:
    return tuple(range(first, last + 1))


#: Appendix F, table 9: the scientific question (LitSearch).
UNIFAR_CASE_STUDY_QUESTION = (
    "Which papers should I refer to for learning about the application of transformer language "
    "models to the generation of argumentative text conclusions, including the assessment of "
    "their novelty and validity?"
)

#: Appendix F, table 9: the three retrieved documents; ``spans`` from the prose on figure 4 (b)-(d):
#: "Doc 1: S0-S4; Doc 2: S0-S1; Doc 3: S0-S3" (background), "Doc 1: S5-S8; Doc 2: S2-S5,S7;
#: Doc 3: S4-S5" (method), "Doc 1: S9; Doc 2: S5-S6; Doc 3: S6-S7" (result).
UNIFAR_CASE_STUDY_DOCUMENTS: tuple[CaseStudyDocument, ...] = (
    CaseStudyDocument(
        title="Generating Informative Conclusions for Argumentative Texts",
        sentences=(
            "The purpose of an argumentative text is to support a certain conclusion.",
            "Yet, they are often omitted, expecting readers to infer them rather.",
            "While appropriate when reading an individual text, this rhetorical device limits "
            "accessibility when browsing many texts (e.g., on a search engine or on social media).",
            "In these scenarios, an explicit conclusion makes for a good candidate summary of an "
            "argumentative text.",
            "This is especially true if the conclusion is informative, emphasizing specific concepts "
            "from the text.",
            "With this paper we introduce the task of generating informative conclusions: First, "
            "Webis-ConcluGen-21 is compiled, a large-scale corpus of 136,996 samples of argumentative "
            "texts and their conclusions.",
            "Second, two paradigms for conclusion generation are investigated; one extractive, the "
            "other abstractive in nature.",
            "The latter exploits argumentative knowledge that augment the data via control codes and "
            "finetuning the BART model on several subsets of the corpus.",
            "Third, insights are provided into the suitability of our corpus for the task, the "
            "differences between the two generation paradigms, the trade-off between informativeness "
            "and conciseness, and the impact of encoding argumentative knowledge.",
            "The corpus, code, and the trained models are publicly available.",
        ),
        spans={"background": _span(0, 4), "method": _span(5, 8), "result": (9,)},
    ),
    CaseStudyDocument(
        title="Explainable Unsupervised Argument Similarity Rating with Abstract Meaning "
              "Representation and Conclusion Generation",
        sentences=(
            "When assessing the similarity of arguments, researchers typically use approaches that do "
            "not provide interpretable evidence or justifications for their ratings.",
            "Hence, the features that determine argument similarity remain elusive.",
            "We address this issue by introducing novel argument similarity metrics that aim at high "
            "performance and explainability.",
            "We show that Abstract Meaning Representation (AMR) graphs can be useful for representing "
            "arguments, and that novel AMR graph metrics can offer explanations for argument "
            "similarity ratings.",
            "We start from the hypothesis that similar premises often lead to similar conclusions and "
            "extend an approach for AMR-based argument similarity rating by estimating, in addition, "
            "the similarity of conclusions that we automatically infer from the arguments used as "
            "premises.",
            "We show that AMR similarity metrics make argument similarity judgements more "
            "interpretable and may even support argument quality judgements.",
            "Our approach provides significant performance improvements over strong baselines in a "
            "fully unsupervised setting.",
            "Finally, we make first steps to address the problem of reference-less evaluation of "
            "argumentative conclusion generations.",
        ),
        spans={"background": _span(0, 1), "method": (*_span(2, 5), 7), "result": _span(5, 6)},
    ),
    CaseStudyDocument(
        title="Assessing the Sufficiency of Arguments through Conclusion Generation",
        sentences=(
            "The premises of an argument give evidence or other reasons to support a conclusion.",
            "However, the amount of support required depends on the generality of a conclusion, the "
            "nature of the individual premises, and similar.",
            "An argument whose premises make its conclusion rationally worthy to be drawn is called "
            "sufficient in argument quality research.",
            "Previous work tackled sufficiency assessment as a standard text classification problem, "
            "not modeling the inherent relation of premises and conclusion.",
            "In this paper, we hypothesize that the conclusion of a sufficient argument can be "
            "generated from its premises.",
            "To study this hypothesis, we explore the potential of assessing sufficiency based on the "
            "output of large-scale pre-trained language models.",
            "Our best model variant achieves an F1-score of 0.885, outperforming the previous "
            "state-of-the-art and being on par with human experts.",
            "While manual evaluation reveals the quality of the generated conclusions, their impact "
            "remains low ultimately.",
        ),
        spans={"background": _span(0, 3), "method": _span(4, 5), "result": _span(6, 7)},
    ),
)
