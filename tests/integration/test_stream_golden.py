"""The worker's verdicts do not move when its plumbing changes: 200 bundled interactions through the
fused (default) and the staged topology on a real Tansu broker and chDB, with the lexical judge and
with the fake OpenAI-compatible judge, give the same Evaluations (scores, flags, statements, verdicts,
completeness) as ``tests/fixtures/golden_verdicts.json``, captured with ``tests/integration/golden.py``
from the code before the stream was batched and its messages slimmed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from groundwatch.local.tansu import TansuBroker
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.golden import CONFIGS, N, run_config
from tests.integration.helpers import REPO

GOLDEN = REPO / "tests" / "fixtures" / "golden_verdicts.json"
#: recorded since the capture, beside the verdicts: each statement's supporting passage and the NLI
#: prompt's version (v3 asks for the passage), the outcome, what tool calls add (the sample calls no
#: tools), the custom evaluators' scores (the run configures none), citations (no sample answer cites;
#: the lexical judge names a lone passage that entails a statement anyway), and the topic (the run assigns
#: none); the verdicts and scores themselves must not move
SINCE_CAPTURE = {
    "passage",
    "prompt_version",
    "outcome",
    "no_evidence",
    "evidence",
    "tool_calls",
    "tool_error",
    "ungrounded_arguments",
    "ungrounded_argument_values",
    "argument_judge_failure",
    "custom",
    "supported_by",
    "citations",
    "citation_recall",
    "citation_precision",
    "uncited_statements",
    "miscited",
    "dangling_citations",
    "dangling_citation",
    "answerable",
    "answerable_source",
    "over_refusal",
    "answered_unanswerable",
    "refused_unanswerable",
    "answered_answerable",
    "justified_refusal",
    "justified_answer",
    "topic",
    "topic_label",
    "topic_model",
}


def as_captured(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: as_captured(v) for k, v in value.items() if k not in SINCE_CAPTURE}
    if isinstance(value, list):
        return [as_captured(v) for v in value]
    return value


@pytest.mark.parametrize("topology", ["fused", "staged"])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_the_verdicts_of_200_interactions_match_the_golden_file(
    config: str, topology: str, broker: TansuBroker, tmp_path: Path
) -> None:
    golden = as_captured(json.loads(GOLDEN.read_text())[config])
    env = {**CONFIGS[config], "GROUNDWATCH_KAFKA__TOPOLOGY": topology}
    with FakeOpenAIServer() as fake:
        got = as_captured(run_config(broker.url, tmp_path, env, fake.base_url))
    assert len(golden) == N and sorted(got) == sorted(golden)
    assert all(len(v) == 1 for v in got.values()), "one Evaluation per interaction"
    differ = [iid for iid in golden if got[iid] != golden[iid]]
    assert not differ, f"{len(differ)} differ, e.g. {differ[0]}: {got[differ[0]]} != {golden[differ[0]]}"
