"""The demo's history of a user's own file (``groundwatch demo --data``)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from groundwatch import demo_history
from groundwatch.demo_history import CITED_PASSAGES, simulate, stamp_file, with_citation

NOW = datetime(2026, 11, 23, 12, tzinfo=UTC)


def test_lines_without_app_or_model_count_in_the_schemas_default_series() -> None:
    """The bundled labeled sets have no app or model: the worker stores them as default / unknown, and
    the demo waits for the windows of that one series."""
    records = [{"id": f"q{k}", "question": "Why?", "answer": "Because."} for k in range(6)]
    records.append({"id": "own", "app": "mine", "question": "Why?", "answer": "Because."})
    history = stamp_file(records, days=1, now=NOW)
    assert all("app" not in json.loads(line) for line in history.lines[:6])
    assert history.windows(10**10) == 2  # (default, unknown) and (mine, unknown), one window each
    assert history.windows(3600) == 7  # every line in an hour of its own


def _sample() -> list[dict[str, Any]]:
    path = Path(__file__).resolve().parents[2] / "groundwatch" / "data" / "sample_interactions.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _cited(answer: str) -> int:
    match = re.search(r" \[(\d+)\]$", answer)
    assert match, answer
    return int(match.group(1))


def test_the_citing_app_cites_its_own_passage_until_its_renderer_goes_off_by_one() -> None:
    """policy-qa / epsilon: before the citation bug each answer cites the passage it came with (whose text
    is its source record's); from the bug on it cites the next one, which is another record's passage, and
    still a passage of the answer (never a dangling number). The answers themselves do not change."""
    records = _sample()
    own_passage = {str(r["id"]): r["contexts"][0] for r in records if r.get("contexts")}
    own_answer = {str(r["id"]): str(r["answer"]).rstrip() for r in records}
    history = simulate(records, 3000, now=NOW)
    assert history.citing == ("policy-qa", "epsilon") and history.citation_bug is not None
    before = after = 0
    for line in history.lines:
        record = json.loads(line)
        if record["app"] != "policy-qa":
            continue
        source = record["id"].rsplit("-epsilon-", 1)[0]
        contexts = record["contexts"]
        assert len(contexts) == CITED_PASSAGES
        own = next(n for n, c in enumerate(contexts, start=1) if c["text"] == own_passage[source])
        cited = _cited(record["answer"])
        assert record["answer"] == f"{own_answer[source]} [{cited}]"
        assert 1 <= cited <= CITED_PASSAGES
        if datetime.fromisoformat(record["timestamp"]) < history.citation_bug:
            before += 1
            assert cited == own
        else:
            after += 1
            assert cited == own + 1
            assert contexts[cited - 1]["document"] != contexts[own - 1]["document"]
    assert before > 50 and after > 50


def test_the_citing_app_leaves_the_other_series_as_they_were(monkeypatch: pytest.MonkeyPatch) -> None:
    """The citing series draws from a generator of its own: every other series' interactions are those a
    history without it would hold (the other apps' alerts fire as before)."""
    records = _sample()
    with_it = simulate(records, 2000, now=NOW)
    others = [line for line in with_it.lines if json.loads(line)["app"] != "policy-qa"]
    monkeypatch.setattr(demo_history, "PLANS", tuple(p for p in demo_history.PLANS if not p.cites))
    without = simulate(records, 2000, now=NOW)
    assert others == without.lines


def test_with_citation_refuses_a_position_whose_next_passage_is_missing() -> None:
    record = {"id": "r", "answer": "1928", "contexts": [{"text": "own", "document": "d0"}]}
    others = [{"contexts": [{"text": f"other {k}", "document": f"d{k}"}]} for k in (1, 2)]
    right = with_citation(record, others, 2, off_by_one=False)
    assert [c["document"] for c in right["contexts"]] == ["d1", "d0", "d2"] and right["answer"] == "1928 [2]"
    assert with_citation(record, others, 2, off_by_one=True)["answer"] == "1928 [3]"
    with pytest.raises(ValueError):
        with_citation(record, others, CITED_PASSAGES, off_by_one=False)  # [4] would name no passage
    with pytest.raises(ValueError):
        with_citation(record, others[:1], 1, off_by_one=False)


def test_one_series_refuses_its_music_questions_from_the_outage_and_nothing_else_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """wiki-qa / alpha refuses nine in ten of its questions about music from the subject outage on, labeled
    as the refusals they are; its other questions, its earlier ones and every other series are as a
    history without the outage holds them (their draws are not touched)."""
    from dataclasses import replace

    records = _sample()
    history = simulate(records, 3000, now=NOW)
    assert history.subject_failing == ("wiki-qa", "alpha") and history.subject_outage is not None
    rows = [json.loads(line) for line in history.lines]
    refused = [r for r in rows if r["answer"] == demo_history.SUBJECT_REFUSAL]
    assert refused and all(r["labels"] == {"answer_refusal": 1} for r in refused)
    assert {(r["app"], r["model"]) for r in refused} == {history.subject_failing}
    assert all(demo_history.SUBJECT.search(r["question"]) for r in refused)
    assert all(datetime.fromisoformat(r["timestamp"]) >= history.subject_outage for r in refused)
    on_subject = [
        r for r in rows
        if (r["app"], r["model"]) == history.subject_failing and demo_history.SUBJECT.search(r["question"])
        and datetime.fromisoformat(r["timestamp"]) >= history.subject_outage
    ]  # fmt: skip
    assert len(refused) == len(on_subject) - (len(on_subject) + 1) // 10  # all but every tenth
    plans = tuple(replace(p, refuses_subject=False) for p in demo_history.PLANS)
    monkeypatch.setattr(demo_history, "PLANS", plans)
    without = [json.loads(line) for line in simulate(records, 3000, now=NOW).lines]
    changed = [(a, b) for a, b in zip(rows, without, strict=True) if a != b]
    assert len(changed) == len(refused)
    assert all(a["id"] == b["id"] and a["question"] == b["question"] for a, b in changed)
