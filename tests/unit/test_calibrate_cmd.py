"""`groundwatch calibrate` on labels in chDB: the app's own threshold is today's, and the setting it
prints to apply keeps every other app's thresholds and is a valid setting."""

from __future__ import annotations

import asyncio
import json

import pytest

from groundwatch.cli import main
from schemas.evaluation import Evaluation
from schemas.label import Label
from schemas.settings import settings_from_env
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.store import ClickHouseStore
from tests.fixtures.messages import EVALUATED_AT
from tests.fixtures.store import store_settings
from tests.fixtures.wall_clock import recent
from tests.integration.chdb import fresh_chdb_url

# recent: the command reads the labeled interactions since --since (90 days by default) before the wall
# clock's now
NOW = recent(days=1)
OTHERS = {"other": {"hallucination": 0.2}}


def _store_labeled(url: str, judge: str) -> None:
    store = ClickHouseStore.open_sync(store_settings(url))
    try:
        scores = [i / 100 for i in range(20, 100, 2)]
        evaluations = [
            Evaluation(
                evaluated_at=EVALUATED_AT,
                interaction_id=f"i{i}",
                timestamp=NOW,
                app="shop",
                model="m",
                judge=judge,
                conversation_id=f"c{i // 2}",
                context_entailment=s,
                hallucination=s < 0.81,
                answer_refusal=False,
            )
            for i, s in enumerate(scores)
        ]
        store.insert_evaluations_sync(evaluations)
        # people call it grounded from 0.6 up, but for two near the line
        labels = [
            Label(
                labeled_at=EVALUATED_AT,
                interaction_id=f"i{i}",
                kind="grounded",
                value=int((s >= 0.6) != (i in (19, 21))),
                reviewer="a",
            )
            for i, s in enumerate(scores)
        ]
        asyncio.run(LabelStore(store).insert(labels))
    finally:
        store.close()


@pytest.mark.parametrize("judge", ["lexical", "cascade"])
def test_calibrate_prints_the_app_thresholds_to_apply(
    judge: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = fresh_chdb_url()
    _store_labeled(url, judge)
    monkeypatch.setenv(
        "GROUNDWATCH_PIPELINE__APP_THRESHOLDS", json.dumps({**OTHERS, "shop": {"hallucination": 0.7}})
    )
    assert main(["calibrate", "--app", "shop", "--clickhouse", url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [grounded] = [c for c in report["calibrations"] if c["kind"] == "grounded"]
    assert grounded["current_threshold"] == 0.7  # the app's own, not the judge's 0.81
    assert 0.55 < grounded["proposed_threshold"] <= 0.6
    applied = json.loads(report["apply"])
    assert applied["other"] == OTHERS["other"]
    assert applied["shop"]["hallucination"] == round(grounded["proposed_threshold"], 3)
    pipe = settings_from_env({"GROUNDWATCH_PIPELINE__APP_THRESHOLDS": report["apply"]}).pipeline
    assert pipe.threshold_for("context_entailment", judge, "shop", "m") == applied["shop"]["hallucination"]
    assert (grounded["cascade_band"] is not None) is (judge == "cascade")
    assert main(["calibrate", "--app", "shop", "--model", "m", "--clickhouse", url]) == 0
    text = capsys.readouterr().out
    assert "GROUNDWATCH_PIPELINE__APP_THRESHOLDS='" in text and '"models": {"m": {"hallucination"' in text
    assert ("GROUNDWATCH_JUDGE__CASCADE_UNSURE_LOW=" in text) is (judge == "cascade")
