"""Replay input lines: key = interaction id, overrides, a produce-time stamp; bad lines pass to the worker."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from groundwatch.replay import prepare
from schemas.errors import ConfigError
from schemas.settings import KafkaSettings
from streams.topics import bootstrap_servers, check_copartitioned, topic_names


def test_prepare_keys_overrides_and_stamps() -> None:
    key, value = prepare(json.dumps({"id": 7, "question": "Q", "answer": "A"}), app="x", model="y")
    data = json.loads(value)
    assert key == "7" and data["app"] == "x" and data["model"] == "y"
    assert datetime.fromisoformat(data["timestamp"]).tzinfo is not None
    _, kept = prepare(json.dumps({"interaction_id": "a", "timestamp": "2024-05-01T00:00:00Z"}))
    assert json.loads(kept)["timestamp"] == "2024-05-01T00:00:00Z"


def test_the_client_gives_an_interaction_without_an_id_one_of_its_own() -> None:
    """``GroundwatchClient.send({"question": ..., "answer": ...})`` (docs/input.md): an app that has no id
    for its turns gets one per send, so the worker does not dead-letter every one for a missing id; an
    id given (``interaction_id`` or ``id``) is kept, and ``groundwatch replay`` leaves a file's lines as
    written (the worker names a line without one)."""
    from schemas.interaction import Interaction

    key, value = prepare(json.dumps({"question": "Q?", "answer": "A"}), ensure_id=True)
    data = json.loads(value)
    assert key is not None and data["interaction_id"] == key and len(key) == 32
    assert Interaction.model_validate(data).interaction_id == key
    other, _ = prepare(json.dumps({"question": "Q?", "answer": "A"}), ensure_id=True)
    assert other != key
    assert prepare(json.dumps({"id": "x-1", "question": "Q?"}), ensure_id=True)[0] == "x-1"
    assert "interaction_id" not in json.loads(prepare(json.dumps({"id": "x-1"}), ensure_id=True)[1])
    assert prepare(json.dumps({"question": "Q?", "answer": "A"}))[0] is None


def test_malformed_lines_are_sent_untouched_for_the_dead_letter_topic() -> None:
    assert prepare("not json") == (None, b"not json")
    assert prepare("[1, 2]") == (None, b"[1, 2]")


def test_topic_names_and_bootstrap() -> None:
    names = topic_names(KafkaSettings(topic_prefix="p."))
    assert names.all() == [
        "p.interactions", "p.converted", "p.judged", "p.evaluations", "p.alerts", "p.deadletter", "p.otlp",
        "p.otlp_logs", "p.labels", "p.touches", "p.topic_models"
    ]  # fmt: skip
    assert bootstrap_servers("kafka://h1:9092;kafka://h2:9093") == "h1:9092,h2:9093"
    assert bootstrap_servers("h:1") == "h:1"


def test_copartitioning_check_names_the_odd_topic() -> None:
    check_copartitioned({"p.nli": 4, "p.converted": 4, "p.absent": 0})
    with pytest.raises(ConfigError, match=r"p\.nli=2"):
        check_copartitioned({"p.nli": 2, "p.converted": 4})
