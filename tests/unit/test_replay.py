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


def test_malformed_lines_are_sent_untouched_for_the_dead_letter_topic() -> None:
    assert prepare("not json") == (None, b"not json")
    assert prepare("[1, 2]") == (None, b"[1, 2]")


def test_topic_names_and_bootstrap() -> None:
    names = topic_names(KafkaSettings(topic_prefix="p."))
    assert names.all() == [
        "p.interactions", "p.converted", "p.judged", "p.evaluations", "p.alerts", "p.deadletter", "p.otlp",
        "p.otlp_logs", "p.labels"
    ]  # fmt: skip
    assert bootstrap_servers("kafka://h1:9092;kafka://h2:9093") == "h1:9092,h2:9093"
    assert bootstrap_servers("h:1") == "h:1"


def test_copartitioning_check_names_the_odd_topic() -> None:
    check_copartitioned({"p.nli": 4, "p.converted": 4, "p.absent": 0})
    with pytest.raises(ConfigError, match=r"p\.nli=2"):
        check_copartitioned({"p.nli": 2, "p.converted": 4})
