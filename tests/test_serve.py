"""``unifar serve``: the search page answers queries and explains a result, in a test client and in
a real headless browser (Debian's chromium); bad requests get a clear 4xx, never a traceback."""

from __future__ import annotations

import shutil
import subprocess
import threading
from urllib.parse import urlencode

import pytest

from unifar.search.corpus_index import Index
from unifar.search.serve import create_app

from .test_search import papers


@pytest.fixture
def index(make_model):
    return Index(make_model()).add(papers()).build()


@pytest.fixture
def client(index):
    return create_app(index).test_client()


def test_a_question_lists_papers_with_their_three_facet_scores(index, client):
    page = client.get("/?" + urlencode({"q": "speech vectors", "k": 4}))
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert html.count('<tr class="hit">') == 4
    api = client.get("/api/search?" + urlencode({"q": "speech vectors", "k": 4})).get_json()
    expected = index.search("speech vectors", k=4)
    assert [h["id"] for h in api["results"]] == [h.id for h in expected]
    first = api["results"][0]
    assert set(first["facets"]) == {"background", "method", "result"}
    assert first["score"] == pytest.approx(sum(first["facets"].values()) / 3, abs=1e-3)
    assert expected[0].title in html


def test_papers_like_one_on_a_facet_with_hybrid(client):
    api = client.get("/api/search?like=p4&facet=method&hybrid=0.25&k=3").get_json()
    ids = [h["id"] for h in api["results"]]
    assert len(ids) == 3 and "p4" not in ids and api["results"][0]["bm25"] is not None
    # a result's score on one facet is that facet's cosine
    assert api["results"][0]["dense"] == pytest.approx(api["results"][0]["facets"]["method"], abs=1e-3)


def test_the_explain_view_shows_matrix_sentences_and_terms(client):
    html = client.get("/explain?" + urlencode({"doc": "p5", "q": "speech contrastive loss"})).get_data(
        as_text=True)
    assert 'id="matrix"' in html and html.count("<td style=\"background: rgba") >= 9
    assert "Our model is trained with a contrastive loss on graphs." in html
    assert 'id="bm25"' in html and "contrast" in html
    ex = client.get("/api/explain?doc=p5&like=p4").get_json()
    assert len(ex["matrix"]) == 3 and len(ex["units"]) == 7  # the title and six sentences


@pytest.mark.parametrize("query, status, message", [
    ("/?q=x&k=abc", 400, "k must be a whole number, got &#39;abc&#39;"),
    ("/?q=x&k=0", 400, "k must be a whole number &gt;= 1"),
    ("/?q=x&hybrid=nan", 400, "hybrid must be a finite number"),
    ("/?q=x&hybrid=-1", 400, "hybrid must be a finite number &gt;= 0"),
    ("/?q=x&facet=discussion", 400, "facet must be all, background, method, result"),
    ("/?like=nope", 404, "no paper &#39;nope&#39;"),
    ("/explain?doc=nope&q=x", 404, "no paper &#39;nope&#39;"),
    ("/explain?doc=p1", 400, "give a question"),
    ("/api/search?q=x&k=2.5", 400, "k must be a whole number"),
])
def test_bad_requests_are_clear_4xx_without_a_traceback(client, query, status, message):
    page = client.get(query)
    text = page.get_data(as_text=True)
    assert page.status_code == status
    assert message in text and "Traceback" not in text


def test_an_empty_page_has_the_form_and_no_results(client):
    html = client.get("/").get_data(as_text=True)
    assert '<form action="/"' in html and 'id="results"' not in html


def test_a_real_browser_renders_results_and_an_explanation(index):
    """chromium (installed by .ci/setup) loads the page from a real server and runs nothing but
    HTML: the DOM it builds holds the results and the explain view."""
    from werkzeug.serving import make_server

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is not installed: run bash .ci/setup (it installs it)"
    server = make_server("127.0.0.1", 0, create_app(index))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"

    def dom(path: str) -> str:
        done = subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", base + path],
            capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    try:
        results = dom("/?" + urlencode({"q": "speech vectors", "facet": "method", "k": 3}))
        assert results.count('class="hit"') == 3 and "<option value=\"method\" selected" in results
        explained = dom("/explain?" + urlencode({"doc": "p2", "q": "speech vectors"}))
        assert 'id="matrix"' in explained and "Paper 2 about speech" in explained
        bad = dom("/?q=x&hybrid=nan")
        assert 'id="error"' in bad and "Traceback" not in bad
    finally:
        server.shutdown()
        thread.join(timeout=10)
