"""Citations: markers and structured citations read, removed and mapped to passages; each statement's
citations checked by the lexical judge in its NLI pass; the figures stored per interaction and per
statement (docs/citations.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from pipeline.citations import MAX_DANGLING_PER_SENTENCE, read_citations
from pipeline.evaluator import Evaluator
from pipeline.judges.lexical import LexicalJudge
from pipeline.judges.llm_judge import answer_support
from pipeline.nli import combine_parts
from prompts.models import StatementAnswer
from schemas.citations import Citation
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction, Passage
from schemas.results import HypothesisResult, StatementVerdict
from schemas.settings import CitationSettings, Limits, SplitSettings
from streams.clickhouse.store import ClickHouseStore
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fixtures.dashboard import client_for
from tests.fixtures.judges import judge_for
from tests.fixtures.messages import T0
from tests.settings_factory import make_settings

EIFFEL = "The Eiffel Tower was completed in 1889 in Paris."
COLOSSEUM = "The Colosseum in Rome was completed in 80 AD."
PASSAGES = [
    Passage(text=EIFFEL, document="eiffel.md"),
    Passage(text=COLOSSEUM, document="https://example.com/colosseum/"),
]


def read(answer: str, citations: list[Citation] | None = None, passages: list[Passage] | None = None) -> Any:
    sentences, cited = read_citations(
        answer, citations or [], PASSAGES if passages is None else passages, SplitSettings(), 500
    )
    return sentences, [(s.passages, s.dangling) for s in cited.sentences]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("The tower is from 1889 [1]. The arena is from 80 AD [2].", [([0], []), ([1], [])]),
        ("The tower is from 1889.[1] The arena is from 80 AD.[2]", [([0], []), ([1], [])]),
        ("The tower is from 1889 [1][2]. The arena is from 80 AD [2, 1].", [([0, 1], []), ([1, 0], [])]),
        ("The tower is from 1889 [1-2]. The arena is from 80 AD.", [([0, 1], []), ([], [])]),
        ("The tower is from 1889 [doc1]. The arena is from 80 AD [Source 2].", [([0], []), ([1], [])]),
        (
            "The tower is from 1889 【3:0†eiffel.md】. The arena is from 80 AD 【2†source】.",
            [([0], []), ([1], [])],
        ),
        ("The tower is from 1889 【0:1†x】. The arena is from 80 AD.", [([1], []), ([], [])]),
        (
            "The tower is from 1889 [^a]. The arena is from 80 AD [^2].\n\n[^a]: eiffel.md",
            [([0], []), ([1], [])],
        ),
        ("The tower is from 1889 [eiffel.md]. The arena is from 80 AD.", [([0], []), ([], [])]),
        (
            "The tower is from 1889 ([1](https://x.org)). The arena is from [Rome](http://www.example.com/colosseum).",
            [([0], []), ([1], [])],
        ),
    ],
)
def test_every_marker_style_cites_its_passage_and_is_removed(answer: str, expected: list[Any]) -> None:
    sentences, cited = read(answer)
    assert cited == expected
    assert sentences[0] == "The tower is from 1889."
    assert all("[" not in s and "【" not in s and "^" not in s for s in sentences)


def test_a_marker_pointing_at_no_passage_is_dangling_never_an_error() -> None:
    sentences, cited = read("The tower is from 1889 [7]. The arena is from 80 AD [^x] 【9†nowhere.pdf】.")
    assert sentences == ["The tower is from 1889.", "The arena is from 80 AD."]
    assert cited == [([], ["[7]"]), ([], ["[^x]", "【9†nowhere.pdf】"])]
    _, none = read("The tower is from 1889 [1].", passages=[])  # no evidence at all
    assert none == [([], ["[1]"])]


def test_markers_of_any_length_are_read_and_dangle_when_they_point_nowhere() -> None:
    sentences, cited = read(
        "The tower is from 1889 [10000]. The arena is from 80 AD [doc123456] [2, 99999999999]."
    )
    assert sentences == ["The tower is from 1889.", "The arena is from 80 AD."]
    assert cited == [([], ["[10000]"]), ([1], ["[doc123456]", "[2, 99999999999]"])]
    _, huge = read("The tower is from 1889 [" + "9" * 5000 + "].")  # past int()'s digit limit
    assert huge == [([], ["[" + "9" * 5000 + "]"])]


def test_citations_null_means_none() -> None:
    none = Interaction.model_validate(
        {"interaction_id": "c", "timestamp": T0, "app": "a", "model": "m", "question": "q?", "answer": "a.",
         "citations": None}
    )  # fmt: skip
    assert none.citations == []


def test_text_that_only_looks_like_a_marker_stays() -> None:
    sentences, cited = read("Read x[1] from the array. See [the guide](https://other.org) for more of it.")
    assert sentences == ["Read x[1] from the array.", "See [the guide](https://other.org) for more of it."]
    assert cited == [([], []), ([], [])]


def test_structured_citations_in_every_shape() -> None:
    answer = "The tower is from 1889. The arena is from 80 AD."
    shapes = [
        {"start": 0, "end": 22, "passages": [1]},
        {"type": "url_citation", "start_index": 24, "end_index": 48, "url": "https://example.com/colosseum"},
        {"type": "file_citation", "index": 48, "file_id": "file-9", "filename": "eiffel.md"},  # at the end
        {"type": "char_location", "document_index": 1, "cited_text": "80 AD", "start": 24, "end": 48},
        {"documents": ["missing.pdf"]},  # no position: every sentence
    ]
    citations = [Citation.model_validate(s) for s in shapes]
    _, cited = read(answer, citations)
    assert cited == [([0], ["span document 'missing.pdf'"]), ([1, 0], ["span document 'missing.pdf'"])]


def test_a_structured_span_uses_the_answer_as_written_markers_and_all() -> None:
    answer = "The tower is from 1889 [1]. The arena is from 80 AD."
    arena = answer.index("The arena")
    _, cited = read(answer, [Citation(start=arena, end=len(answer), passages=[2])])
    assert cited == [([0], []), ([1], [])]


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "quote", "text": "x"},  # a type no provider sends
        {"start": 3, "end": 1, "passages": [1]},
        {"start": 0, "end": 4},  # names nothing
        {"start": 0, "passages": [1], "pages": [2]},  # a typo of a key
    ],
)
def test_a_malformed_citation_is_refused_with_its_reason(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Citation.model_validate(bad)


def test_the_citation_count_and_settings_are_limited() -> None:
    data = {"id": "i", "question": "q", "answer": "a", "citations": [{"passages": [1]}] * 3}
    with pytest.raises(ValidationError, match="over the limit of 2"):
        Interaction.model_validate(data, context={"limits": Limits(max_citations=2)})
    with pytest.raises(ValidationError):
        CitationSettings(max_marker=3)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        CitationSettings(max_markers=0)
    _, many = read_citations("A [1] b [1] c [1] d [1].", [], PASSAGES, SplitSettings(), 2)
    assert many.truncated and many.markers == 2


async def evaluate(answer: str, enabled: bool = True, **fields: Any) -> Evaluation:
    settings = make_settings(judge={"kind": "lexical"}, citations={"enabled": enabled})
    interaction = Interaction.model_validate(
        {"id": "c1", "timestamp": T0, "question": "When were they built?", "contexts": PASSAGES,
         "answer": answer, **fields}
    )  # fmt: skip
    return await Evaluator(LexicalJudge(), settings).evaluate(interaction)


async def test_right_citations_are_precise_and_supported() -> None:
    e = await evaluate(
        "The Eiffel Tower was completed in 1889 [1]. The Colosseum was completed in 80 AD [2]."
    )
    assert (e.citation_recall, e.citation_precision, e.miscited) == (1.0, 1.0, False)
    assert (e.uncited_statements, e.dangling_citations, e.dangling_citation) == (0.0, 0, False)
    statements = [s for h in e.pairs[0].hypotheses for s in h.statements]
    assert statements[0].statement == "The Eiffel Tower was completed in 1889."
    assert [(s.citations.cited, s.citations.precise) for s in statements if s.citations] == [
        ([0], [True]), ([1], [True]),
    ]  # fmt: skip


async def test_swapped_citations_are_miscited_while_the_answer_stays_grounded() -> None:
    e = await evaluate(
        "The Eiffel Tower was completed in 1889 [2]. The Colosseum was completed in 80 AD [1]."
    )
    assert e.hallucination is False  # every statement is in the evidence ...
    assert (e.citation_recall, e.citation_precision, e.miscited) == (0.0, 0.0, True)  # ... not where cited


async def test_an_uncited_statement_and_a_dangling_marker_are_counted() -> None:
    e = await evaluate("The Eiffel Tower was completed in 1889. The Colosseum was completed in 80 AD [2][5].")
    assert e.uncited_statements == 0.5 and e.citation_recall == 1.0
    assert e.dangling_citations == 1 and e.dangling_citation is True


async def test_a_hallucinated_statement_with_a_citation_is_miscited() -> None:
    e = await evaluate(
        "The Eiffel Tower was completed in 1925 [1]. The Colosseum was completed in 80 AD [2]."
    )
    assert e.miscited is True and e.citation_recall == 0.5 and e.citation_precision == 0.5


async def test_an_answer_without_citations_has_no_citation_figures() -> None:
    e = await evaluate("The Eiffel Tower was completed in 1889. The Colosseum was completed in 80 AD.")
    assert (e.citation_recall, e.miscited, e.uncited_statements, e.dangling_citation) == (None,) * 4
    assert all(s.citations is None for h in e.pairs[0].hypotheses for s in h.statements)


async def test_with_citations_off_the_markers_are_judged_as_written() -> None:
    e = await evaluate("The Eiffel Tower was completed in 1889 [1].", enabled=False)
    assert e.pairs[0].hypotheses[0].hypothesis.endswith("[1].")
    assert e.miscited is None and e.citation_recall is None


async def test_structured_citations_on_the_event_are_checked() -> None:
    answer = "The Eiffel Tower was completed in 1889. The Colosseum was completed in 80 AD."
    e = await evaluate(
        answer, citations=[{"start": 0, "end": 10, "documents": ["https://example.com/colosseum"]}]
    )
    assert e.miscited is True and e.uncited_statements == 0.5


@pytest.fixture
def citation_store(store: ClickHouseStore) -> ClickHouseStore:
    return store


async def test_statement_citations_are_stored_for_the_drill_down(citation_store: ClickHouseStore) -> None:
    e = await evaluate(
        "The Eiffel Tower was completed in 1889 [2][1]. The Colosseum was completed in 80 AD [9]."
    )
    await citation_store.insert_evaluations([e])
    db = citation_store.db
    [row] = citation_store.query_sync(
        f"SELECT miscited, citation_recall, dangling_citations FROM {db}.evaluations FINAL "
        "WHERE interaction_id = 'c1'"
    )
    assert (row["miscited"], row["citation_recall"], row["dangling_citations"]) == (0, 1.0, 1)
    rows = citation_store.query_sync(
        f"SELECT cited_passages, cited_precise, citation_supported, dangling_citations, cited_documents, "
        f"supported_by FROM {db}.evaluation_statements_current WHERE interaction_id = 'c1' "
        "AND pair = 'context_answer' ORDER BY hypothesis_index, statement_index"
    )
    assert [tuple(r.values()) for r in rows] == [
        ([1, 0], [0, 1], 1, [], ["https://example.com/colosseum/", "eiffel.md"], [0]),
        ([], [], None, ["[9]"], [], [1]),
    ]
    # the drill-down's API serves each statement's citations with the evaluation
    client = await client_for(citation_store)
    try:
        detail = await (await client.get("/dashboard/api/interactions/c1")).json()
    finally:
        await client.close()
    evaluation = detail["evaluation"]
    [pair] = [p for p in evaluation["pairs"] if p["pair"] == "context_answer"]
    first = pair["hypotheses"][0]["statements"][0]
    assert first["citations"] == {
        "cited": [1, 0], "precise": [False, True], "supported": True, "dangling": [], "factual": True,
    }  # fmt: skip
    assert first["supported_by"] == [0] and evaluation["miscited"] is False
    assert [c["document"] for c in evaluation["interaction"]["contexts"]] == [
        "eiffel.md",
        PASSAGES[1].document,
    ]


@pytest.mark.parametrize(
    "answer", ["[", "[1", "【", "[^]", "[](", "\udcff [1]", "[1]" * 10_000, "[0]", "[99999]"]
)
def test_the_reader_never_fails_on_what_an_answer_says(answer: str) -> None:
    sentences, cited = read_citations(answer, [], PASSAGES, SplitSettings(), 500)
    assert len(cited.sentences) == len(sentences)
    assert all(p in (0, 1) for s in cited.sentences for p in s.passages)


async def llm_evaluate(fake: FakeOpenAIServer, answer: str, enabled: bool = True) -> Evaluation:
    settings = make_settings(judge={"kind": "openai"}, citations={"enabled": enabled})
    judge = judge_for(fake)
    interaction = Interaction.model_validate(
        {
            "id": "c1",
            "timestamp": T0,
            "question": "When were they built?",
            "contexts": PASSAGES,
            "answer": answer,
        }
    )
    evaluator = Evaluator(judge, settings)
    try:
        return await evaluator.evaluate(interaction)
    finally:
        await evaluator.aclose()


async def test_the_llm_judge_names_the_supporting_passages_in_its_nli_call(
    fake_openai: FakeOpenAIServer,
) -> None:
    swapped = "The Eiffel Tower was completed in 1889 [2]. The Colosseum was completed in 80 AD [1]."
    e = await llm_evaluate(fake_openai, swapped)
    nli = [b for b in fake_openai.stats.bodies if "<premise>" in b["messages"][-1]["content"]]
    assert len(nli) == 1 and "<support_question>" in nli[0]["messages"][-1]["content"]
    statements = [s for h in e.pairs[0].hypotheses for s in h.statements]
    assert [s.supported_by for s in statements] == [[0], [1]]
    assert (e.miscited, e.citation_recall, e.citation_precision) == (True, 0.0, 0.0)
    assert e.hallucination is False


async def test_the_support_question_is_asked_only_of_an_answer_that_cites(
    fake_openai: FakeOpenAIServer,
) -> None:
    e = await llm_evaluate(fake_openai, "The Eiffel Tower was completed in 1889. The Colosseum is old.")
    [body] = [b for b in fake_openai.stats.bodies if "<premise>" in b["messages"][-1]["content"]]
    assert "<support_question>" not in body["messages"][-1]["content"]
    assert all(s.supported_by is None for h in e.pairs[0].hypotheses for s in h.statements)
    off = await llm_evaluate(fake_openai, "The Eiffel Tower was completed in 1889 [1].", enabled=False)
    assert "<support_question>" not in fake_openai.stats.bodies[-1]["messages"][-1]["content"]
    assert off.miscited is None


def test_an_answer_without_supported_by_parses_as_not_asked() -> None:
    old = StatementAnswer(statement="s", reason="r", verdict="entailed", tag="claim", passage=2)
    assert answer_support(old, 3, asked=True) is None and answer_support(old, 3, asked=False) is None
    assert answer_support(old, 1, asked=True) == [0]  # one passage: the verdict says it
    given = old.model_copy(update={"supported_by": [3, 9, 3, 0]})  # 9 and 0: ids the premise lacks
    assert answer_support(given, 3, asked=True) == [2]


async def test_grouped_prompts_ask_the_support_question_for_their_citing_cases(
    fake_openai: FakeOpenAIServer,
) -> None:
    settings = make_settings(judge={"kind": "openai"})
    answers = {
        "right": "The Eiffel Tower was completed in 1889 [1]. The Colosseum was completed in 80 AD [2].",
        "swapped": "The Eiffel Tower was completed in 1889 [2]. The Colosseum was completed in 80 AD [1].",
        "plain": "The Eiffel Tower was completed in 1889. The Colosseum was completed in 80 AD.",
    }
    items = [
        Interaction.model_validate(
            {"id": k, "timestamp": T0, "question": "When?", "contexts": PASSAGES, "answer": a}
        )
        for k, a in answers.items()
    ]
    evaluator = Evaluator(judge_for(fake_openai), settings)
    try:
        got = {e.interaction_id: e for e in await asyncio.gather(*(evaluator.evaluate(i) for i in items))}
    finally:
        await evaluator.aclose()
    grouped = [b["messages"][-1]["content"] for b in fake_openai.stats.bodies if '<case id="' in str(b)]
    assert grouped and all("<support_question>" in text for text in grouped)  # cases share one prompt
    assert (got["right"].miscited, got["swapped"].miscited, got["plain"].miscited) == (False, True, None)
    plain = [s for h in got["plain"].pairs[0].hypotheses for s in h.statements]
    assert all(s.supported_by is None for s in plain)  # asked in the shared prompt, not taken for it


def test_a_statement_judged_against_premise_parts_keeps_the_support_of_every_part() -> None:
    def part(supported: list[int], score: float) -> HypothesisResult:
        verdict = "entailed" if score else "not_stated"
        s = StatementVerdict(statement="s", verdict=verdict, score=score, supported_by=supported)
        return HypothesisResult(hypothesis="h", statements=[s], score=score)

    combined = combine_parts([part([], 0.0), part([3], 1.0), part([5, 3], 1.0)])
    assert combined.statements[0].supported_by == [3, 5] and combined.score == 1.0


def test_markers_naming_thousands_of_missing_passages_stay_bounded_findings() -> None:
    """100 markers in one sentence, each naming about a hundred positions past the two passages: each
    marker is one dangling reference (not one per position), and a sentence keeps at most
    MAX_DANGLING_PER_SENTENCE of them, so an evaluation cannot grow with what an answer claims to cite."""
    markers = " ".join(f"[{1000 + j}-{1099 + j}]" for j in range(100))
    _, cited = read(f"The tower is from 1889 {markers}. The arena is from 80 AD [5, 6].")
    assert cited[0] == ([], [f"[{1000 + j}-{1099 + j}]" for j in range(MAX_DANGLING_PER_SENTENCE)])
    assert cited[1] == ([], ["[5, 6]"])  # one marker, two missing positions: one dangling reference


async def test_a_citation_with_no_evidence_at_all_is_dangling() -> None:
    """No passage to cite: the reference names none, the worst dangling citation, and it is counted."""
    e = await evaluate("The Eiffel Tower was completed in 1889 [3].", contexts=[])
    assert (e.dangling_citations, e.dangling_citation) == (1, True)
    assert e.miscited is None and e.citation_recall is None  # nothing cited exists to check
