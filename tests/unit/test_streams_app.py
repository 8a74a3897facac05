"""The faust app from settings: local-only web server, at-least-once, our topics and processors."""

from __future__ import annotations

from schemas.settings import KafkaSettings
from streams.app import create_app
from tests.settings_factory import make_settings


def test_create_app_wires_processors_and_safe_defaults(tmp_path) -> None:
    settings = make_settings(
        kafka=KafkaSettings(topic_prefix="x.", partitions=3, datadir=tmp_path, web_port=6070, processes=1)
    )
    stream_app = create_app(settings)
    conf = stream_app.app.conf
    assert conf.web_bind == "127.0.0.1" and conf.web_port == 6070
    assert conf.processing_guarantee.value == "at_least_once"
    assert conf.topic_partitions == 3
    # a real Kafka's timings by default (faust's own); the embedded broker's come from worker_env
    assert (conf.broker_session_timeout, conf.broker_heartbeat_interval) == (60.0, 3.0)
    assert conf.broker_rebalance_timeout == 60.0
    # the topics between stages are read from their start by a new group (kafka.start_offset is applied
    # to the input topics alone, streams.offsets)
    assert conf.consumer_auto_offset_reset == "earliest"
    agents = set(stream_app.app.agents)
    # the fused topology by default: one processor judges, the sink writes
    assert agents == {f"groundwatch.{n}" for n in ("evaluate", "sink", "touches", "labels", "dead_letters")}
    # the judge's agreement gauges are on the registry /metrics serves, and refreshed by a timer
    from prometheus_client import generate_latest

    exposed = generate_latest(stream_app.ctx.metrics.registry).decode()
    assert "# TYPE groundwatch_judge_balanced_accuracy gauge" in exposed
    assert "groundwatch_judge_corrected_rate" in exposed


def test_with_judging_processes_this_one_writes_and_they_judge(tmp_path) -> None:
    settings = make_settings(kafka=KafkaSettings(datadir=tmp_path, processes=2))
    assert set(create_app(settings).app.agents) == {
        f"groundwatch.{n}" for n in ("sink", "touches", "labels", "dead_letters")
    }
    judging = create_app(settings, judging_only=True)
    assert set(judging.app.agents) == {"groundwatch.evaluate"}
    assert not judging.app.conf.web_enabled


def test_staged_topology_has_a_processor_a_stage(tmp_path) -> None:
    settings = make_settings(kafka=KafkaSettings(datadir=tmp_path, topology="staged"))
    assert set(create_app(settings).app.agents) == {
        f"groundwatch.{n}" for n in ("convert", "judge", "join", "sink", "touches", "labels", "dead_letters")
    }
