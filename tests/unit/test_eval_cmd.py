"""`groundwatch eval` end to end on a small JSONL with bad lines, with the lexical judge (no mocks)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from groundwatch import cli
from groundwatch.commands import eval_cmd
from schemas.conversation import ConversationRollup

LINES = [
    # 1: grounded, short answer the context contains
    {
        "id": "g1",
        "question": "Who won more Grand Slam titles?",
        "contexts": ["Jonathan Stark won two Grand Slam doubles titles in 1994 and 1995."],
        "answer": "Jonathan Stark",
        "labels": {"grounded": 1},
        "peers": {"detector": 1},
    },
    # 2: not grounded, a wrong number and a name the context lacks
    {
        "id": "g2",
        "question": "Who won more Grand Slam titles?",
        "contexts": ["Jonathan Stark won two Grand Slam doubles titles in 1994 and 1995."],
        "answer": "Henri Leconte won 7 Grand Slam titles in 1988.",
        "labels": {"grounded": 0},
        "peers": {"detector": 1},
    },
    "this line is not JSON",
    # 4: correctness with gold answers
    {
        "id": "c1",
        "question": "what is the definition of the word hosanna",
        "contexts": [],
        "ground_truth": "savior | save | rescue",
        "gold_answers": ["savior", "save", "rescue"],
        "answer": "It is a cry to save us.",
        "labels": {"correct": 1},
    },
    {"id": "bad", "question": "no answer field"},
    "",
    # 7: duplicate of line 1
    {"id": "g1", "question": "q", "answer": "a"},
    # 8: a refusal
    {
        "id": "r1",
        "question": "Where is the spare tire?",
        "contexts": ["The jack is under the rear seat."],
        "answer": "The given context does not provide information about the spare tire.",
        "labels": {"answer_refusal": 1},
    },
]


def _write(path: Path) -> Path:
    path.write_text(
        "\n".join(line if isinstance(line, str) else json.dumps(line) for line in LINES) + "\n",
        encoding="utf-8",
    )
    return path


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    eval_cmd.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_eval_lexical_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _write(tmp_path / "in.jsonl")
    out = tmp_path / "out" / "report.json"
    code = eval_cmd.run(
        _args(str(data), "--judge", "lexical", "--out", str(out), "--quiet", "--concurrency", "2")
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["judge"] == "lexical" and report["judge_model"] == "lexical-v1"
    assert report["lines_read"] == 7 and report["blank_lines"] == 1
    assert report["evaluated"] == 4 and report["failed"] == 3
    errors = {e["line"]: e for e in report["errors"]}
    assert sorted(errors) == [3, 5, 7]
    assert "not valid JSON" in errors[3]["reason"]
    assert errors[5]["interaction_id"] == "bad" and "answer" in errors[5]["reason"]
    assert "duplicate" in errors[7]["reason"] and "line 1" in errors[7]["reason"]

    evaluations = [
        json.loads(x) for x in (tmp_path / "out" / "report.evaluations.jsonl").read_text().splitlines()
    ]
    assert [e["interaction_id"] for e in evaluations] == ["g1", "g2", "c1", "r1"]  # input order
    by_id = {e["interaction_id"]: e for e in evaluations}
    assert by_id["g1"]["context_entailment"] == 1.0 and by_id["g1"]["hallucination"] is False
    assert by_id["g2"]["context_entailment"] < 0.5 and by_id["g2"]["hallucination"] is True
    assert by_id["c1"]["ground_truth_entails_answer"] == 1.0 and by_id["c1"]["context_entailment"] is None
    assert by_id["r1"]["answer_refusal"] is True
    assert all(e["judge"] == "lexical" and e["labels"] for e in evaluations)

    grounded = report["labels"]["grounded"]
    assert grounded["primary"]["n"] == 2 and grounded["primary"]["roc_auc"] == 1.0
    assert grounded["primary"]["balanced_accuracy"] == 1.0
    assert grounded["peers"]["peers"] == {"detector": 0.5}
    assert report["labels"]["answer_refusal"]["primary"]["balanced_accuracy"] == 1.0
    assert report["counts"]["interactions"] == 4 and report["counts"]["answer_refusals"] == 1
    assert report["calls"]["input_tokens"] == 0 and report["calls"]["by_stage"]["nli"] >= 4
    assert report["trust_eval"]["em_cases"] == 1 and report["trust_eval"]["regular_em"] == 1.0
    assert report["scores"]["context_entailment"]["n"] == 3
    printed = capsys.readouterr()
    assert "4 evaluated, 3 errors" in printed.err and "line 3" in printed.err
    # every AUC and balanced accuracy is printed with its bootstrap interval, and is in the report
    assert "95% percentile bootstrap interval (1000 resamples" in printed.err
    assert "grounded vs context_entailment: n=2 AUC=1.000 [1.000, 1.000] bacc@" in printed.err
    # g1 and g2 answer on the same passage: one group, so every resample holds both (no spread)
    assert "peers on 2 cases (bacc): ours=1.000 [1.000, 1.000]; detector=0.500 [0.500, 0.500]" in printed.err
    assert grounded["primary"]["roc_auc_ci"]["resamples"] == 1000
    assert report["settings"]["bootstrap_resamples"] == 1000


def test_eval_limit_and_explicit_evaluations_path(tmp_path: Path) -> None:
    data = _write(tmp_path / "in.jsonl")
    out = tmp_path / "r.json"
    evals = tmp_path / "evals.jsonl"
    args = _args(
        str(data), "--judge", "lexical", "--out", str(out), "--limit", "2", "--evaluations", str(evals)
    )
    assert eval_cmd.run(args) == 0
    report = json.loads(out.read_text())
    assert report["lines_read"] == 2 and report["evaluated"] == 2 and report["errors"] == []
    assert len(evals.read_text().splitlines()) == 2


def test_eval_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["eval", str(tmp_path / "nope.jsonl"), "--judge", "lexical", "--out", str(tmp_path / "r.json")]
    )
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"groundwatch eval: ConfigError: no such file: {tmp_path / 'nope.jsonl'}"
    ]
    assert not (tmp_path / "r.json").exists()


def test_all_lines_bad_exits_2_as_bad_input_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text("[1, 2]\n{}\n", encoding="utf-8")
    out = tmp_path / "r.json"
    assert eval_cmd.run(_args(str(data), "--judge", "lexical", "--out", str(out), "--quiet")) == 2
    printed = capsys.readouterr().err
    assert "line 1: [validate]" in printed and "conversations" not in printed  # no figures of nothing
    assert eval_cmd.run(_args("--estimate", str(data), "--judge", "lexical", "--quiet")) == 2
    report = json.loads(out.read_text())
    assert report["failed"] == 2 and "JSON object" in report["errors"][0]["reason"]


def test_eval_cascade_sends_only_unsure_hypotheses_to_the_llm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cascade over real HTTP to the fake OpenAI-compatible server (a test double of the LLM)."""
    from tests.fakes.openai_server import FakeOpenAIServer

    data = _write(tmp_path / "in.jsonl")
    unsure = {
        "id": "u1",
        "question": "What did he win?",
        "contexts": ["Jonathan Stark won two Grand Slam doubles titles in 1994 and 1995 with his partner."],
        "answer": "Jonathan Stark won several doubles titles. He played with a partner from Sweden.",
    }
    with data.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(unsure) + "\n")
    out = tmp_path / "r.json"
    with FakeOpenAIServer() as fake:
        monkeypatch.setenv("GROUNDWATCH_JUDGE__CASCADE_LLM", "openai")
        monkeypatch.setenv("GROUNDWATCH_JUDGE__BASE_URL", fake.base_url)
        monkeypatch.setenv("GROUNDWATCH_JUDGE__API_KEY", "test-key")
        monkeypatch.setenv("GROUNDWATCH_JUDGE__MODEL", "fake-model")
        monkeypatch.setenv("GROUNDWATCH_JUDGE__CACHE_ENABLED", "false")
        # by default only answer_ground_truth reaches the LLM; these interactions have no ground truth
        monkeypatch.setenv("GROUNDWATCH_JUDGE__CASCADE_LLM_PAIRS", '["context_answer"]')
        assert eval_cmd.run(_args(str(data), "--judge", "cascade", "--out", str(out), "--quiet")) == 0
    report = json.loads(out.read_text())
    assert report["judge"] == "cascade" and report["evaluated"] == 5 and report["failed"] == 3
    evaluations = {
        e["interaction_id"]: e
        for e in map(json.loads, (tmp_path / "r.evaluations.jsonl").read_text().splitlines())
    }
    nli_judges = {
        iid: sorted({c["judge"] for c in e["calls"] if c["stage"] == "nli"}) for iid, e in evaluations.items()
    }
    # the short answer the context holds (1.0) and the one with wrong numbers and names (near 0) are
    # decided lexically: no NLI call of theirs reaches the LLM
    assert nli_judges["g1"] == ["lexical"] and nli_judges["g2"] == ["lexical"]
    # the partly supported answer is inside the unsure band: the LLM decides it
    assert nli_judges["u1"] == ["lexical", "openai"]
    # pronouns go to the LLM, for texts of two sentences or more (one sentence has nothing to resolve from)
    pronoun_calls = {
        iid: [c["judge"] for c in e["calls"] if c["stage"] == "pronouns"] for iid, e in evaluations.items()
    }
    assert pronoun_calls["u1"] == ["openai"]
    assert pronoun_calls["g1"] == []  # a one-sentence answer and no ground truth
    # the refusal phrase of r1 is decided without the LLM
    assert evaluations["r1"]["answer_refusal"] is True
    # refusals stay with the phrase detector (cascade_llm_refusals is off by default)
    refusal_judges = {c["judge"] for e in evaluations.values() for c in e["calls"] if c["stage"] == "refusal"}
    assert refusal_judges == {"lexical"}
    assert report["calls"]["input_tokens"] > 0


def test_invalid_utf8_line_is_reported_not_repaired(tmp_path: Path) -> None:
    from pipeline.dataset import read_dataset

    path = tmp_path / "mixed.jsonl"
    good = b'{"id": "a", "question": "q?", "answer": "Yes."}\n'
    bad = b'{"id": "b", "question": "q?", "answer": "caf\xe9"}\n'
    path.write_bytes(good + bad)
    dataset = read_dataset(path)
    assert [line.interaction.interaction_id for line in dataset.lines] == ["a"]
    assert len(dataset.errors) == 1 and dataset.errors[0].line == 2
    assert "not UTF-8" in dataset.errors[0].reason


def test_eval_bootstrap_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _write(tmp_path / "in.jsonl")
    out = tmp_path / "r.json"
    assert (
        eval_cmd.run(_args(str(data), "--judge", "lexical", "--out", str(out), "--quiet", "--bootstrap", "0"))
        == 0
    )
    report = json.loads(out.read_text())
    assert report["labels"]["grounded"]["primary"]["roc_auc_ci"] is None
    printed = capsys.readouterr().err
    assert "bootstrap interval" not in printed and "AUC=1.000 bacc@" in printed


CONTEXT = "Orders ship within 2 days. Returns are accepted within 30 days of delivery."
CONVERSATION_LINES = [
    # c1: resolved, two turns
    {"id": "c1-1", "conversation_id": "c1", "timestamp": 100, "question": "When do orders ship?",
     "contexts": [CONTEXT], "answer": "Orders ship within 2 days."},
    {"id": "c1-2", "conversation_id": "c1", "timestamp": 110, "question": "How long do I have to return it?",
     "contexts": [CONTEXT], "answer": "Returns are accepted within 30 days of delivery."},
    # c2 (lines out of order): asked twice, the answer's number changes, ends in a refusal
    {"id": "c2-3", "conversation_id": "c2", "timestamp": 230, "question": "Can I get a refund on shipping?",
     "contexts": ["The jack is under the rear seat."],
     "answer": "The given context does not provide information about refunds on shipping."},
    {"id": "c2-1", "conversation_id": "c2", "timestamp": 210, "question": "How long do I have to return it?",
     "contexts": [CONTEXT], "answer": "Returns are accepted within 30 days of delivery."},
    {"id": "c2-2", "conversation_id": "c2", "timestamp": 220,
     "question": "How long do I have to return it again?", "contexts": [CONTEXT],
     "answer": "Returns are accepted within 14 days of delivery."},
    # no conversation_id: a conversation of one turn
    {"id": "s1", "timestamp": 300, "question": "When do orders ship?", "contexts": [CONTEXT],
     "answer": "Orders ship within 2 days."},
]  # fmt: skip


def _jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def _lexical_report(tmp_path: Path, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """groundwatch eval --judge lexical of ``lines``: the report it writes."""
    data = _jsonl(tmp_path / "lines.jsonl", lines)
    out = tmp_path / "report.json"
    assert eval_cmd.run(_args(str(data), "--judge", "lexical", "--out", str(out), "--quiet")) == 0
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def test_eval_reports_the_conversations_of_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    c = _lexical_report(tmp_path, CONVERSATION_LINES)["conversations"]
    assert (c["conversations"], c["multi_turn"]) == (3, 2)
    metrics = c["metrics"]
    assert metrics["conversation_unresolved_rate"] == pytest.approx(1 / 3)
    assert metrics["conversation_reask_rate"] == pytest.approx(1 / 3)
    assert metrics["conversation_contradiction_rate"] == pytest.approx(1 / 3)
    assert metrics["mean_turns_per_conversation"] == pytest.approx(2.0)
    [worst] = c["worst"]
    assert (worst["conversation_id"], worst["turns"], worst["unresolving_turn_id"]) == ("c2", 3, "c2-3")
    assert (worst["reasked_turns"], worst["contradictions"]) == (1, 1)
    printed = capsys.readouterr().err
    assert "3 conversations (2 with a conversation_id): " in printed and "worst c2 (turn c2-2)" in printed
    # every conversation's outcome, a line each as the stream's conversations table holds them
    lines = (tmp_path / "report.conversations.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [ConversationRollup.model_validate_json(line) for line in lines]
    assert len(rows) == c["conversations"] == 3
    by_id = {(r.conversation_id or r.interaction_id): r for r in rows}
    assert (by_id["c2"].turns, by_id["c2"].reasked_turns, by_id["c2"].ended_unresolved) == (3, 1, True)
    assert by_id["c2"] == ConversationRollup.model_validate(worst)


def test_eval_decides_re_asks_and_contradictions_with_the_llm_judge_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``conversations.judge`` llm over real HTTP to the fake server: the re-ask pair and the answer pair of
    c2 go to it (two calls), the fake's NLI finds no contradiction where the lexical rule saw one."""
    from tests.fakes.openai_server import FakeOpenAIServer

    data = _jsonl(tmp_path / "conversations.jsonl", CONVERSATION_LINES)
    out = tmp_path / "report.json"
    with FakeOpenAIServer() as fake:
        monkeypatch.setenv("GROUNDWATCH_JUDGE__BASE_URL", fake.base_url)
        monkeypatch.setenv("GROUNDWATCH_JUDGE__API_KEY", "test-key")
        monkeypatch.setenv("GROUNDWATCH_JUDGE__MODEL", "fake-model")
        monkeypatch.setenv("GROUNDWATCH_JUDGE__CACHE_ENABLED", "false")
        monkeypatch.setenv("GROUNDWATCH_CONVERSATIONS__JUDGE", "llm")
        assert eval_cmd.run(_args(str(data), "--judge", "openai", "--out", str(out), "--quiet")) == 0
        assert fake.stats.by_prompt["reask"] == 1
    c = json.loads(out.read_text())["conversations"]
    assert c["metrics"]["conversation_reask_rate"] == pytest.approx(1 / 3)
    assert c["metrics"]["conversation_contradiction_rate"] == pytest.approx(0.0)
    assert c["judge_calls"] == 2 and c["judge_input_tokens"] > 0
    [worst] = [w for w in c["worst"] if w["conversation_id"] == "c2"]
    assert (worst["pair_judge"], worst["judge_calls"], worst["contradictions"]) == ("llm", 2, 0)
    assert "re-asks and contradictions: 2 judge calls" in capsys.readouterr().err


KB_RESULT = '[{"id": "kb-12", "content": "Refunds are paid within 14 days."}]'
TOOL_LINES = [
    {  # an OpenAI chat log: the assistant called search_kb, answered from its result
        "interaction_id": "t1",
        "messages": [
            {"role": "user", "content": "How long do refunds take?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "search_kb", "arguments": '{"query": "refund time"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": KB_RESULT},
        ],
        "answer": "Refunds are paid within 14 days.",
    },
    {  # a tool that failed, called with an order id nobody gave
        "interaction_id": "t2",
        "question": "Where is my parcel?",
        "steps": [
            {"name": "get_order", "arguments": {"order_id": "A-99812"}, "result": "error: order not found"}
        ],
        "answer": "Your parcel left the depot on Monday.",
    },
    {  # a search that found nothing: the answer has no evidence at all
        "interaction_id": "t3",
        "question": "Do you ship to Norway?",
        "steps": [{"name": "search_kb", "arguments": {"query": "shipping Norway"}, "result": "[]"}],
        "answer": "We ship to Norway within 5 days.",
    },
]  # fmt: skip


def test_eval_prints_the_answers_and_tools_figures_of_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = _lexical_report(tmp_path, TOOL_LINES)["metrics"]
    assert (metrics["mean_tool_calls"], metrics["tool_error_rate"]) == (1.0, pytest.approx(1 / 3))
    assert metrics["no_evidence_rate"] == pytest.approx(1 / 3) and metrics["ungrounded_arguments_rate"] == 1.0
    assert (
        metrics["hallucination_rate"] == 0.5
    )  # t2's answer is not in its tool's error; t3 has nothing to judge
    printed = capsys.readouterr().err.splitlines()
    # the catalogue's labels, as the dashboards name them; an undefined figure is '-'
    assert (
        "  answers: hallucination rate 0.500, answer refusal rate 0.000, answers without evidence 0.333"
        in printed
    )
    assert (
        "  tools: tool calls per interaction 1.000, tool error rate 0.333, ungrounded tool arguments 1.000"
        in printed
    )
