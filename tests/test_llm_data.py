"""Data construction: prompts (paper appendix C), LLM clients and cache, label parsing, questions
(LLM and independent cropping), FTU merge and on-disk format, leakage guard. No network, no real LLM."""

from __future__ import annotations

import json
import random
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from unifar.construction.ftu import Triplet, fill_questions, merge_triplets, read_triplets
from unifar.construction.labelling import (
    LabelParseError,
    LLMLabeller,
    SentenceLabeller,
    parse_labels,
    parse_labels_detailed,
)
from unifar.datasets.leakage import (
    ForbiddenSet,
    LeakageError,
    check_no_leakage,
    find_leaks,
    forbidden_from_repo_data,
    normalise_text,
)
from unifar.construction.llm import CachedClient, FakeClient, LLMClient, LLMError
from unifar.construction.llm_backends import OpenAICompatibleClient
from unifar.construction.prompts import (
    FACET_REQUIREMENTS,
    LABELLING_SYSTEM,
    LABELLING_USER,
    QUESTION_SYSTEM,
    QUESTION_USER,
    labelling_messages,
    question_messages,
)
from unifar.construction.questions import (
    ICropQuestionGenerator,
    LLMQuestionGenerator,
    QuestionLengthWarning,
    clean_question,
    independent_crop,
    random_crop_span,
)
from unifar.datasets.ftu import FTU, Question
from unifar.datasets.ftu_files import SCHEMA_VERSION, FTUDataset, load_ftus, write_ftus
from unifar.datasets.ftu_statistics import field_table, ftu_statistics
from unifar.text import split_sentences

REPO = Path(__file__).resolve().parents[1]

# ----- the paper's appendix C, as printed (tables 5 and 6; non-breaking spaces made plain) --------
PAPER_Q_SYSTEM = (
    "You are an expert in scientific literature retrieval, specializing in generating professional "
    "academic search queries."
)
PAPER_Q_USER = (
    "Generate an English query for the {facet_type} facet based on the following sentences from the seed "
    "paper and positive papers. {facet_type} sentences from seed paper: {query_text} {facet_type} sentences "
    "from positive papers: {pos_text} Requirements: 1. Generate a natural, fluent, concise, and professional "
    "query that highlights {requirement}. 2. The query should be between 25\u201350 words. 3. Output only the "
    "query itself, without any explanation or additional content. Generated {facet_type} query:"
)
PAPER_REQUIREMENTS = {
    "background": "research questions, research motivation, and limitations of existing studies",
    "method": "technical methods, experimental design, and innovations",
    "result": "key findings, data support, and conclusions",
}
PAPER_L_SYSTEM = "You are an expert in classifying sentences from scientific paper abstracts into rhetorical roles."
PAPER_L_USER = (
    "The following sentences come from the same scientific abstract:{sentences_list} Task Description: 1. Based "
    "on the content and contextual meaning, classify each sentence into one of the following categories: "
    "{background, method, result}. 2. Return the output in a structured JSON format, ensuring each sentence is "
    'paired with the correct category. 3. The expected output format is: [{ "sentence": "Sentence1", '
    '"category": "background" }, { "sentence": "Sentence2", "category": "method" }, { "sentence": '
    '"Sentence3", "category": "result" }] Please output only the structured JSON result without any explanation.'
)


def _nows(s: str) -> str:
    return "".join(s.split())


SENTS = [
    "Retrieval of scientific papers needs facets.",
    "Existing encoders produce one vector per paper.",
    "We train facet anchors with a contrastive loss on citation triplets.",
    "Our model improves MAP by two points on CSFCube.",
]
LABELS = ["background", "background", "method", "result"]


def _doc(i: str, labels=LABELS, sents=SENTS, title: str | None = None, field: str | None = "Computer Science"):
    return {"id": i, "title": title or f"Paper {i}", "sentences": list(sents), "labels": labels,
            "source": "test", "field": field}


# ----- prompts ----------------------------------------------------------------------------------
def test_templates_are_the_papers_text():
    assert QUESTION_SYSTEM == PAPER_Q_SYSTEM
    assert LABELLING_SYSTEM == PAPER_L_SYSTEM
    assert _nows(QUESTION_USER) == _nows(PAPER_Q_USER)
    assert _nows(LABELLING_USER) == _nows(PAPER_L_USER)
    assert FACET_REQUIREMENTS == PAPER_REQUIREMENTS
    # Only line breaks were added: every paper word sequence between placeholders is intact.
    for template, paper in ((QUESTION_USER, PAPER_Q_USER), (LABELLING_USER, PAPER_L_USER)):
        assert " ".join(template.split()).replace("abstract: {", "abstract:{") == paper


@pytest.mark.parametrize("facet", ["background", "method", "result"])
def test_question_messages_fill_every_placeholder(facet):
    msgs = question_messages(facet, ["Q one.", "Q two."], [["P one."], ["P {pos_text} two."]])
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == PAPER_Q_SYSTEM
    user = msgs[1]["content"]
    for ph in ("{facet_type}", "{query_text}", "{requirement}"):
        assert ph not in user
    assert user.count("{pos_text}") == 1  # inserted text is not substituted again
    assert f"highlights {PAPER_REQUIREMENTS[facet]}." in user
    assert f"{facet} sentences from seed paper:\nQ one. Q two.\n" in user
    assert "- P one.\n- P {pos_text} two." in user
    assert user.endswith(f"Generated {facet} query:")
    assert "between 25\u201350 words" in user


def test_labelling_messages_render_sentences_as_json():
    sents = ['A "quoted" sentence.', "Unicode \u03b1-helix works."]
    user = labelling_messages(sents)[1]["content"]
    assert "{sentences_list}" not in user
    assert "{background, method, result}" in user  # literal braces of the paper stay
    listed = user.split("abstract:\n", 1)[1].split("\n\nTask Description:", 1)[0]
    assert json.loads(listed) == sents
    numbered = labelling_messages(sents, "numbered")[1]["content"]
    assert '1. A "quoted" sentence.\n2. Unicode' in numbered


def test_prompt_errors():
    with pytest.raises(ValueError, match="unknown facet"):
        question_messages("objective", ["a"], [])
    with pytest.raises(TypeError):
        labelling_messages("one string")
    with pytest.raises(ValueError, match="without sentences"):
        labelling_messages([])
    assert "(none)" in question_messages("method", ["a"], [])[1]["content"]


# ----- clients and cache ------------------------------------------------------------------------
MSG = [{"role": "user", "content": "hello"}]


def test_fake_client_and_cache_hits(tmp_path):
    fake = FakeClient(lambda msgs, **kw: f"answer to {msgs[-1]['content']} {kw.get('temperature', 0)}")
    assert isinstance(fake, LLMClient) and fake.origin == "llm:fake"
    cached = CachedClient(fake, tmp_path / "cache")
    assert cached.complete(MSG) == "answer to hello 0"
    assert cached.complete(MSG) == "answer to hello 0"
    assert (cached.hits, cached.misses, len(fake.calls)) == (1, 1, 1)
    cached.complete(MSG, temperature=0.7)  # other generation arguments: another entry
    assert (cached.misses, len(cached)) == (2, 2)
    again = CachedClient(FakeClient([]), tmp_path / "cache")  # a new process, same cache
    assert again.complete(MSG) == "answer to hello 0" and again.hits == 1
    assert not list((tmp_path / "cache").rglob(".tmp-*"))
    with pytest.raises(LLMError, match="only 0 responses"):
        again.complete([{"role": "user", "content": "new"}])
    with pytest.raises(ValueError, match="role"):
        fake.complete([{"role": "robot", "content": "x"}])


def test_cache_key_depends_on_model_and_messages(tmp_path):
    a = CachedClient(FakeClient(["x"], model="m1"), tmp_path)
    b = CachedClient(FakeClient(["y"], model="m2"), tmp_path)
    assert a.key(MSG) != b.key(MSG)
    assert a.key(MSG) != a.key([{"role": "user", "content": "hello!"}])
    assert a.key(MSG, {"temperature": 0}) != a.key(MSG)


def test_interrupted_labelling_resumes_without_paying_twice(tmp_path):
    docs = [_doc(str(i), labels=None, sents=[f"Sentence {i} a.", f"Sentence {i} b."]) for i in range(5)]

    def answer(msgs, **kw):
        sents = json.loads(msgs[1]["content"].split("abstract:\n", 1)[1].split("\n\nTask", 1)[0])
        return json.dumps([{"sentence": s, "category": c} for s, c in zip(sents, ["background", "result"])])

    calls = {"n": 0}

    def flaky(msgs, **kw):
        calls["n"] += 1
        if calls["n"] > 3:
            raise ConnectionError("simulated crash after 3 paid calls")
        return answer(msgs)

    with pytest.raises(ConnectionError):
        LLMLabeller(CachedClient(FakeClient(flaky), tmp_path)).label_documents(docs)
    resumed = CachedClient(FakeClient(answer), tmp_path)
    labeller = LLMLabeller(resumed)
    labels = labeller.label_documents(docs)
    assert (resumed.hits, resumed.misses) == (3, 2)
    assert labels == [["background", "result"]] * 5
    assert labeller.summary == {"documents": 5, "sentences": 10, "none": 0, "unparsable": 0}
    assert isinstance(labeller, SentenceLabeller)


# ----- OpenAI-compatible client against a local server ------------------------------------------
class _Server:
    """A chat-completions stub on 127.0.0.1: answers from a script of (status, body) pairs."""

    def __init__(self) -> None:
        self.script: list[tuple[int, object]] = []
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 5

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
                status, payload = outer.script.pop(0) if outer.script else (500, {"error": "script exhausted"})
                data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server():
    s = _Server()
    try:
        yield s
    finally:
        s.close()


def _ok(text: str) -> tuple[int, dict]:
    return 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}


def test_openai_client_posts_chat_completions(server, monkeypatch):
    monkeypatch.setenv("UNIFAR_TEST_KEY", "sk-secret-123")
    sleeps: list[float] = []
    client = OpenAICompatibleClient(server.url, "test-model", api_key_env="UNIFAR_TEST_KEY", timeout=5,
                                    retries=2, backoff=0.5, sleep=sleeps.append)
    server.script = [_ok("fine")]
    assert client.complete(MSG, max_tokens=7) == "fine"
    req = server.requests[-1]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-secret-123"
    assert req["body"]["model"] == "test-model" and req["body"]["messages"] == MSG
    assert req["body"]["max_tokens"] == 7 and req["body"]["temperature"] == 0.0
    # 500 and 429 are retried with exponential backoff.
    server.script = [(500, {"error": "busy"}), (429, {"error": "slow down"}), _ok("after retries")]
    assert client.complete(MSG) == "after retries"
    assert sleeps == [0.5, 1.0]
    # Other 4xx fail at once, and the key appears nowhere.
    server.script = [(400, {"error": "bad request"})]
    with pytest.raises(LLMError, match="HTTP 400") as err:
        client.complete(MSG)
    assert "sk-secret-123" not in str(err.value) and "sk-secret-123" not in repr(client)
    server.script = [(500, "x")] * 3
    with pytest.raises(LLMError, match="after 3 attempts"):
        client.complete(MSG)
    server.script = [(200, {"unexpected": True})]
    with pytest.raises(LLMError, match="malformed"):
        client.complete(MSG)


def test_openai_client_missing_key_and_unreachable(monkeypatch):
    monkeypatch.delenv("UNIFAR_TEST_KEY", raising=False)
    client = OpenAICompatibleClient("http://127.0.0.1:9/v1", "m", api_key_env="UNIFAR_TEST_KEY")
    with pytest.raises(LLMError, match="UNIFAR_TEST_KEY"):
        client.complete(MSG)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    down = OpenAICompatibleClient(f"http://127.0.0.1:{port}", "m", api_key_env=None, timeout=2, retries=1, sleep=sleeps.append)
    with pytest.raises(LLMError, match="ConnectionError"):
        down.complete(MSG)
    assert sleeps == [1.0]
    with pytest.raises(ValueError, match="http"):
        OpenAICompatibleClient("localhost:8000", "m")


def test_transformers_client_on_a_tiny_local_model(tmp_path, tokenizer):
    from transformers import GPT2Config, GPT2LMHeadModel

    from unifar.construction.llm_backends import TransformersClient

    model_dir = tmp_path / "tiny-gpt2"
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=512, n_embd=16, n_layer=1, n_head=2)).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    client = TransformersClient(model_dir, device="cpu", max_new_tokens=4)
    assert client.model == "tiny-gpt2" and client._model is None  # lazy
    out = client.complete(MSG)
    assert isinstance(out, str) and client._model is not None
    assert client.complete(MSG) == out  # greedy: deterministic
    with pytest.raises(FileNotFoundError):
        TransformersClient(tmp_path / "missing" / "model")
    # With a chat template, the tokenizer's template formats the messages.
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
    try:
        tokenizer.save_pretrained(model_dir)
    finally:
        tokenizer.chat_template = None
    chat = TransformersClient(model_dir, device="cpu", max_new_tokens=3, model_name="tiny-chat")
    assert isinstance(chat.complete(MSG), str) and chat._tokenizer.chat_template and chat.origin == "llm:tiny-chat"


# ----- label parsing ----------------------------------------------------------------------------
S3 = ["We study retrieval.", "We train a 'dual' encoder.", "It improves recall by 5%."]
GOLD = ["background", "method", "result"]
MESSY = {
    "plain": json.dumps([{"sentence": s, "category": c} for s, c in zip(S3, GOLD)]),
    "fenced with prose": "Sure! Here is the result:\n```json\n"
    + json.dumps([{"sentence": s, "category": c} for s, c in zip(S3, GOLD)], indent=2)
    + "\n```\nLet me know if you need anything else.",
    "single quotes + trailing comma": "[{'sentence': 'We study retrieval.', 'category': 'Background'}, "
    "{'sentence': \"We train a 'dual' encoder.\", 'category': 'METHODS'}, "
    "{'sentence': 'It improves recall by 5%.', 'category': 'results',},]",
    "synonyms, shuffled": json.dumps(
        [{"Sentence": S3[2], "Category": "Findings"}, {"Sentence": S3[0], "Category": "Objective"},
         {"Sentence": S3[1], "Category": "Methodology"}]
    ),
    "case/punct differences": json.dumps(
        [{"sentence": "we study retrieval", "category": "background"},
         {"sentence": "We train a dual encoder", "category": "method"},
         {"sentence": "It improves recall by 5 %.", "category": "result"}]
    ),
    "paraphrased (fuzzy)": json.dumps(
        [{"sentence": "We studied retrieval.", "category": "background"},
         {"sentence": "We trained a dual encoder.", "category": "method"},
         {"sentence": "It improves the recall by 5%", "category": "result"}]
    ),
    "placeholder names": json.dumps(
        [{"sentence": "Sentence1", "category": "background"}, {"sentence": "Sentence2", "category": "method"},
         {"sentence": "Sentence3", "category": "result"}]
    ),
    "label key, wrapped": json.dumps({"results": [{"text": s, "label": c} for s, c in zip(S3, GOLD)]}),
    "pairs": json.dumps([[s, c] for s, c in zip(S3, GOLD)]),
    "mapping object": json.dumps(dict(zip(S3, GOLD))),
    "bare categories": '["Background", "Method", "Result"]',
    "broken json, regex fallback": '[{"sentence": "We study retrieval.", "category": "background"} '
    '{"sentence": "We train a \'dual\' encoder.", "category": "method"} '
    '{"sentence": "It improves recall by 5%.", "category": "result"',
    "extra item ignored": json.dumps(
        [{"sentence": s, "category": c} for s, c in zip(S3 + ["An invented sentence about cats."], GOLD + ["method"])]
    ),
}


@pytest.mark.parametrize("name", sorted(MESSY))
def test_parse_labels_messy(name):
    assert parse_labels(MESSY[name], S3) == GOLD


def test_parse_labels_missing_unknown_and_duplicates():
    missing = json.dumps([{"sentence": S3[0], "category": "background"}, {"sentence": S3[2], "category": "result"}])
    assert parse_labels(missing, S3) == ["background", None, "result"]
    other = json.dumps([{"sentence": s, "category": c} for s, c in zip(S3, ["other", "conclusion", "banana"])])
    assert parse_labels(other, S3) == [None, "result", None]
    dup = ["Same.", "Same.", "Different."]
    ans = json.dumps([{"sentence": "Same.", "category": "method"}, {"sentence": "Same.", "category": "result"},
                      {"sentence": "Different.", "category": "background"}])
    assert parse_labels(ans, dup) == ["method", "result", "background"]
    labels, info = parse_labels_detailed(missing, S3)
    assert info.n_missing == 1 and info.matched_by == ["exact", None, "exact"]
    with pytest.raises(LabelParseError):
        parse_labels("I cannot help with that.", S3)


def test_llm_labeller_counts_unparsable_and_none():
    docs = [_doc("a", labels=None, sents=S3), _doc("b", labels=None, sents=S3), {"id": "c", "sentences": []}]
    answers = iter([MESSY["plain"], "no json here"])
    labeller = LLMLabeller(FakeClient(lambda m, **k: next(answers)))
    out = labeller.label_documents(docs)
    assert out == [GOLD, [None, None, None], []]
    assert labeller.summary == {"documents": 3, "sentences": 6, "none": 3, "unparsable": 1}


# ----- questions --------------------------------------------------------------------------------
def test_clean_question():
    assert clean_question('Generated background query: "What limits X?"') == "What limits X?"
    assert clean_question("**Query:** \u201cHow to scale Y?\u201d") == "How to scale Y?"
    assert clean_question("```\nWhat about Z?\n```\n\nExplanation: ...") == "What about Z?"
    assert clean_question("  A   plain\nquestion?  ") == "A plain question?"


def test_llm_question_generator(recwarn):
    q_doc = _doc("q")
    pos = [_doc("p1", sents=["Background one.", "We use graphs.", "It works."], labels=["background", "method", "result"])]
    long_q = " ".join(["word"] * 30)
    fake = FakeClient([f'Generated method query: "{long_q}"', "Too short question?"], model="my-llm")
    gen = LLMQuestionGenerator(fake)
    q = gen.generate(q_doc, "method", pos)
    assert q == Question(long_q, "method", "llm:my-llm", "q", {"fallback": False, "n_positives": 1})
    user = fake.calls[0][0][1]["content"]
    assert "method sentences from seed paper:\nWe train facet anchors" in user
    assert "- We use graphs." in user and "Background one." not in user
    assert not [w for w in recwarn if w.category is QuestionLengthWarning]
    with pytest.warns(QuestionLengthWarning, match="3 words"):
        gen.generate(q_doc, "result", pos)
    assert gen.counts == {"generated": 2, "out_of_range": 1, "empty": 0}
    with pytest.raises(ValueError, match="no sentence labels"):
        gen.generate(_doc("u", labels=None), "method")


def test_independent_crop_spans():
    rng = random.Random(0)
    for n in [1, 5, 10, 11, 37, 100, 1000]:
        for _ in range(50):
            (a, b), (c, d) = independent_crop(n, rng)
            for s, e in ((a, b), (c, d)):
                assert 0 <= s < e <= n
                assert e - s == n if n <= 10 else 10 <= e - s <= max(10, int(0.5 * n))
    lengths = [b - a for (a, b), _ in (independent_crop(1000, rng) for _ in range(300))]
    assert min(lengths) >= 100 and max(lengths) <= 500 and len(set(lengths)) > 50
    with pytest.raises(ValueError):
        random_crop_span(0, rng)


def test_icrop_questions_are_deterministic_and_order_independent():
    long_sents = [f"Method sentence {i} describes step {i} of the pipeline in some detail." for i in range(6)]
    docs = [_doc(str(i), sents=long_sents + ["A result."], labels=["method"] * 6 + ["result"]) for i in range(4)]
    gen = ICropQuestionGenerator(seed=13)
    first = [gen.generate(d, "method") for d in docs]
    again = [ICropQuestionGenerator(seed=13).generate(d, "method") for d in reversed(docs)][::-1]
    assert first == again
    other = [ICropQuestionGenerator(seed=14).generate(d, "method") for d in docs]
    assert first != other
    text = " ".join(long_sents)
    for q in first:
        assert q.origin == "icrop" and q.facet == "method" and q.text in text
        assert q.n_words >= 10 and q.meta["span"][1] - q.meta["span"][0] == q.n_words
    short = gen.generate(docs[0], "result")  # 2 words: the whole facet text
    assert short.text == "A result." and not short.meta["fallback"]
    fb = gen.generate(docs[0], "background")  # no background sentence: falls back to all
    assert fb.meta["fallback"] is True
    assert ICropQuestionGenerator(fallback="skip").generate(docs[0], "background") is None


# ----- FTUs -------------------------------------------------------------------------------------
TRIPLETS = [
    {"query_id": "q1", "pos_id": "a", "neg_id": "x", "facet": "bg"},
    {"query_id": "q1", "pos_id": "b", "neg_id": "x", "facet": "background"},
    {"query_id": "q2", "pos_id": "a", "neg_id": "y", "facet": "rs"},
    {"query_id": "q1", "pos_id": "a", "neg_id": "y", "facet": "mt"},
    {"query_id": "q1", "pos_id": "a", "neg_id": "z", "facet": "bg"},  # duplicate positive
    {"query_id": "q1", "pos_id": "c", "neg_id": "b", "facet": "bg"},  # b is also a positive: dropped as negative
    {"query_id": "q2", "pos_id": "q2", "neg_id": "y", "facet": "rs"},  # self-triplet: dropped
]


def test_merge_triplets():
    ftus = merge_triplets(TRIPLETS)
    assert [f.query for f in ftus] == ["q1", "q2"]
    q1, q2 = ftus
    assert q1.positives == {"background": ["a", "b", "c"], "method": ["a"]}
    assert q1.negatives == {"background": ["x", "z"], "method": ["y"]}
    assert q2.positives == {"result": ["a"]} and q2.negatives == {"result": ["y"]}
    assert q1.facets == ["background", "method"]
    assert merge_triplets([Triplet(**{k: t[k] for k in ("query_id", "pos_id", "neg_id")}, facet=t["facet"])
                           for t in TRIPLETS])[0].to_dict() == q1.to_dict()
    with pytest.raises(ValueError, match="unknown facet"):
        merge_triplets([{"query_id": "q", "pos_id": "a", "neg_id": "b", "facet": "intro"}])


def test_read_triplets_jsonl_and_errors(tmp_path):
    path = tmp_path / "flew.jsonl"
    path.write_text("\n".join(json.dumps(t) for t in TRIPLETS) + "\n")
    triplets, docs = read_triplets(path)
    assert len(triplets) == len(TRIPLETS) and docs == {}
    assert merge_triplets(triplets)[0].positives["background"] == ["a", "b", "c"]
    path.write_text(json.dumps(TRIPLETS[0]) + "\n{broken\n")
    with pytest.raises(ValueError, match="flew.jsonl:2"):
        read_triplets(path)
    with pytest.raises(ValueError, match="no facet"):
        read_triplets([{"query_id": "q", "pos_id": "a", "neg_id": "b"}])


def test_merge_scirepeval_sample_triplets():
    path = REPO / "data" / "scirepeval_samples" / "specter_small.json"
    if not path.is_file():
        pytest.skip("data/scirepeval_samples/specter_small.json not copied into the repository yet")
    triplets, docs = read_triplets(path, facet="method", source="scirepeval-specter")
    assert len(triplets) == 200
    ftus = merge_triplets(triplets)
    assert len(ftus) == 200  # 200 distinct query documents, one citation triplet each
    assert all(len(f.positives["method"]) == 1 and len(f.negatives["method"]) == 1 for f in ftus)
    referenced = {d for f in ftus for d in f.doc_ids()}
    assert referenced <= set(docs) and len(referenced) == 596
    assert all(d["labels"] is None and isinstance(d["sentences"], list) for d in docs.values())
    # The same triplets through the corpus loader (facet-less rows, facet given to the merge).
    scirepeval = pytest.importorskip("unifar.datasets.scirepeval")
    corpus = scirepeval.load_scirepeval_triplets(path)
    merged = merge_triplets(corpus.triplets, facet="method")
    assert [f.to_dict() for f in merged] == [f.to_dict() for f in ftus]


def _dataset() -> tuple[list[FTU], dict[str, dict]]:
    ftus = merge_triplets(TRIPLETS)
    docs = {i: _doc(i, field="Medicine" if i in ("q2", "y") else "Computer Science") for i in ["q1", "q2", "a", "b", "c", "x", "y", "z"]}
    docs["z"]["labels"] = None
    return ftus, docs


def test_ftu_write_load_round_trip(tmp_path):
    ftus, docs = _dataset()
    counts = fill_questions(ftus, docs, ICropQuestionGenerator(seed=1))
    assert counts == {"generated": 3}
    ftus[0].questions["method"] = Question("How do anchors help?", "method", "pubmedqa", "q1")
    folder = write_ftus(tmp_path / "ftus", ftus, docs, command="pytest", provenance={"labels": "test"},
                        created_at="2026-01-01T00:00:00+00:00")
    assert sorted(p.name for p in folder.iterdir()) == ["documents.jsonl", "ftus.jsonl", "manifest.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    data = load_ftus(folder)
    assert [f.to_dict() for f in data.ftus] == [f.to_dict() for f in ftus]
    assert set(data.documents) == {"q1", "q2", "a", "b", "c", "x", "y", "z"}
    assert data.documents["a"] == docs["a"]
    m = data.manifest
    assert m["schema_version"] == SCHEMA_VERSION == 2 and m["command"] == "pytest"
    assert m["counts"] == {"ftus": 2, "documents": 8}
    stats = m["statistics"]
    assert stats["questions_per_origin"] == {"icrop": 2, "pubmedqa": 1}
    assert stats["document_slots"] == 1 + 5 + 2 + 1 + 2
    assert stats["per_field"]["Medicine"] == {"documents": 2, "questions": 1}
    assert stats["unlabelled_documents"] == 1
    assert stats == ftu_statistics(ftus, docs) == data.statistics()
    table = field_table(stats)
    assert list(table.columns) == ["documents", "questions"] and table.loc["Computer Science", "questions"] == 2
    with pytest.raises(FileExistsError):
        write_ftus(folder, ftus, docs)
    write_ftus(folder, ftus[:1], docs, overwrite=True)
    assert len(load_ftus(folder)) == 1


def test_ftu_load_errors(tmp_path):
    ftus, docs = _dataset()
    folder = write_ftus(tmp_path / "f", ftus, docs)
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 99}))
    with pytest.raises(ValueError, match="schema_version 99 is not supported"):
        load_ftus(folder)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    lines = (folder / "documents.jsonl").read_text().splitlines()
    kept = [ln for ln in lines if json.loads(ln)["id"] != "x"]
    (folder / "documents.jsonl").write_text("\n".join(kept) + "\n")
    with pytest.raises(ValueError, match=r"ftus.jsonl:1: negatives\[background\] refers to unknown document 'x'"):
        load_ftus(folder)
    (folder / "documents.jsonl").write_text("\n".join(lines[:2] + ['{"id": "bad", "title": 3, "sentences": [], "source": "t"}']) + "\n")
    with pytest.raises(ValueError, match=r"documents.jsonl:3: field 'title'"):
        load_ftus(folder)
    (folder / "documents.jsonl").write_text("\n".join(lines) + "\n")
    assert len(load_ftus(folder)) == 2
    (folder / "ftus.jsonl").write_text((folder / "ftus.jsonl").read_text().splitlines()[0] + "\n")
    with pytest.raises(ValueError, match="1 records but manifest.json says 2"):
        load_ftus(folder)
    with pytest.raises(KeyError, match="not in documents"):
        write_ftus(tmp_path / "g", ftus, {k: v for k, v in docs.items() if k != "a"})
    bad = dict(docs, a={**docs["a"], "labels": ["method"]})
    with pytest.raises(ValueError, match="4 sentences but 1 labels"):
        write_ftus(tmp_path / "h", ftus, bad)
    assert not (tmp_path / "h").exists()


# ----- leakage ----------------------------------------------------------------------------------
def test_normalise_text():
    assert normalise_text("Get Out the VOTE: determining-support!") == normalise_text("get out the vote determining support")


@pytest.fixture(scope="module")
def repo_forbidden() -> ForbiddenSet:
    return forbidden_from_repo_data()


def test_leakage_guard_catches_a_planted_csfcube_title(tmp_path, repo_forbidden):
    from unifar.datasets.csfcube import load_csfcube

    cube = load_csfcube(check_texts=False)
    forbidden = repo_forbidden
    pid = "1587"
    title = cube.papers[pid]["title"]
    ftus, docs = _dataset()
    folder = write_ftus(tmp_path / "clean", ftus, docs)
    report = check_no_leakage(folder, forbidden)
    assert report.ok and report.documents_checked == 8
    assert check_no_leakage(FTUDataset(ftus, docs), forbidden).ok
    planted = {**docs["b"], "id": "s2-99999999", "title": "  " + title.upper().replace(":", " --") + "."}
    docs_leak = dict(docs, b=planted)
    ftus[0].positives["background"][1] = "s2-99999999"
    docs_leak["s2-99999999"] = planted
    folder = write_ftus(tmp_path / "leaky", ftus, docs_leak)
    with pytest.raises(LeakageError, match="s2-99999999") as err:
        check_no_leakage(folder, forbidden)
    hit = err.value.report.hits[0]
    assert hit.kind == "title" and hit.matched == f"csfcube paper {pid}"
    assert "GET OUT THE VOTE" in str(err.value) and "s2-99999999" in str(err.value)


def test_leakage_by_id_text_sentences_and_questions():
    fs = ForbiddenSet()
    abstract = ("Aspirin reduces the risk of stroke in adults over sixty years old. "
                "We enrolled four hundred patients across twelve hospitals in two countries. "
                "The hazard ratio was substantially below one in the treated group.")
    fs.add_document("pubmedqa:123", None, abstract, "pubmedqa-test 123 abstract")
    fs.add_text("Does aspirin prevent stroke in older adults?", "pubmedqa-test 123 question", sentences=False)
    docs = [
        {"id": "pubmedqa:123", "title": "", "sentences": ["Unrelated."]},
        {"id": "d2", "title": "", "sentences": abstract.lower().replace(".", " .").split(" . ")},
        {"id": "d3", "title": "T", "sentences": split_sentences(abstract)[:2]},  # partial copy
        {"id": "d4", "title": "T", "sentences": split_sentences(abstract)[:1]},  # one shared sentence: allowed
        {"id": "ok", "title": "Fine", "sentences": ["Nothing in common with the test set at all, really."]},
    ]
    questions = [("ftu q1", "does ASPIRIN prevent stroke in older adults"), ("ftu q2", "Another question?")]
    report = find_leaks(docs, fs, questions)
    assert [(h.kind, h.training_id) for h in report.hits] == [
        ("id", "pubmedqa:123"), ("text", "d2"), ("2 sentences", "d3"), ("question", "ftu q1")]
    assert not report.ok and "4 leak(s)" in report.summary()


def test_forbidden_from_repo_data_covers_what_is_present(repo_forbidden):
    fs = repo_forbidden
    assert fs.ids["1587"] == fs.ids["csfcube:1587"] == "csfcube paper 1587"
    assert len([v for v in set(fs.ids.values()) if v.startswith("csfcube")]) == 4205
    if (REPO / "data" / "pubmedqa_pqal").is_dir():
        assert "pmid:12377809" in fs.ids
    if (REPO / "data" / "cranfield").is_dir():
        assert "cranfield:1" in fs.ids
        assert normalise_text("what similarity laws must be obeyed when constructing aeroelastic models of "
                              "heated high speed aircraft .") in fs.texts
    if (REPO / "data" / "scirepeval_samples").is_dir():
        from unifar.datasets.scirepeval import load_scirepeval_search, split_scirepeval_search

        halves = {p: split_scirepeval_search(load_scirepeval_search(), p) for p in ("train", "test")}
        test_q = halves["test"].questions[0]["text"]
        assert fs.texts[normalise_text(test_q)].startswith("scirepeval-search-test question")
        assert f"s2:{halves['test'].documents[0]['id']}" in fs.ids
        train_only = set(halves["train"].documents["id"]) - set(halves["test"].documents["id"])
        assert train_only and not any(fs.ids.get(f"s2:{d}", "").startswith("scirepeval-search-test") for d in train_only)
        assert normalise_text(halves["train"].questions[0]["text"]) not in fs.texts
    with pytest.raises(ValueError, match="unknown"):
        forbidden_from_repo_data(include=("doris",))


def test_forbidden_from_raw_pubmedqa_and_cranfield_files(tmp_path):
    pq = tmp_path / "pubmedqa_pqal"
    pq.mkdir()
    (pq / "ori_pqal.json").write_text(json.dumps({
        "111": {"QUESTION": "Is X safe?", "CONTEXTS": ["Context one is long enough to be a sentence key.",
                                                        "Context two is also long enough to count here."],
                "LONG_ANSWER": "X is safe."},
        "222": {"QUESTION": "Train question?", "CONTEXTS": ["Train."], "LONG_ANSWER": "Yes."}}))
    (pq / "test_ground_truth.json").write_text(json.dumps({"111": "yes"}))
    raw = tmp_path / "cranfield" / "raw"
    raw.mkdir(parents=True)
    (raw / "cran.all.1400").write_text(".I 1\n.T\nwing flow in a\nslipstream .\n.A\nsmith\n.B\nj. 1958\n.W\nwing flow "
                                       "in a\nslipstream .\n  the lift of a wing .\n.I 2\n.T\n.A\n.B\n.W\n")
    (raw / "cran.qry").write_text(".I 001\n.W\nwhat similarity laws\nmust be obeyed .\n")
    fs = forbidden_from_repo_data(tmp_path, include=("pubmedqa", "cranfield"), require_all=True)
    assert "pubmedqa:111" in fs.ids and "pubmedqa:222" not in fs.ids
    assert normalise_text("is x safe") in fs.texts and normalise_text("train question") not in fs.texts
    assert "cranfield:1" in fs.ids and normalise_text("wing flow in a slipstream") in fs.titles
    assert normalise_text("what similarity laws must be obeyed") in fs.texts
    report = find_leaks([{"id": "n1", "title": "", "sentences": ["Context one is long enough to be a sentence key.",
                                                                 "Context two is also long enough to count here."]}], fs)
    assert [h.matched for h in report.hits] == ["pubmedqa-test 111 abstract"]
