"""``groundwatch schema`` prints what travels on each topic, from the registry the processors decode with."""

from __future__ import annotations

import dataclasses
import json

import pytest

from groundwatch import cli
from schemas.topics import TOPIC_MESSAGES
from streams.processors.convert import ConvertProcessor
from streams.processors.evaluate import EvaluateProcessor
from streams.processors.judge import JudgeProcessor
from streams.processors.labels import LabelsProcessor
from streams.topics import TopicNames


def test_schema_prints_the_message_of_every_topic(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    on_topics = {m.__name__ for m in TOPIC_MESSAGES.by_topic().values()}
    assert set(printed) == on_topics | {"AlertRule", "WindowAggregate"}
    assert {"JudgeResult", "Label"} <= set(printed)  # the judged and labels topics
    assert cli.main(["schema", "Label"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "Label"


def test_every_topic_has_a_model_and_the_processors_read_theirs_from_the_registry() -> None:
    assert [f.name for f in dataclasses.fields(TopicNames)] == list(TOPIC_MESSAGES.by_topic())
    assert ConvertProcessor.input_model is TOPIC_MESSAGES.interactions
    assert EvaluateProcessor.input_model is TOPIC_MESSAGES.interactions
    assert JudgeProcessor.input_model is TOPIC_MESSAGES.converted
    assert LabelsProcessor.input_model is TOPIC_MESSAGES.labels
