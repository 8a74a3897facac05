"""Alert rules with group_by on chDB: a regression confined to one prompt version fires for that slice
while the app's overall rate stays under the threshold; min_interactions counts per slice; the slice
resolves on its own; a rule grouped by a dimension the workers do not store is refused at start."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipeline.clock import ManualClock
from schemas.alert import Alert, AlertRule, AlertRules
from schemas.errors import ConfigError
from schemas.evaluation import Evaluation
from schemas.evaluation_row import EvalRow
from schemas.window import WindowAggregate
from streams.alerts.engine import AlertEngine
from streams.alerts.slices import slice_name, slice_values
from streams.clickhouse.store import ClickHouseStore
from streams.windows.aggregator import aggregate
from streams.windows.tumbling import TumblingWindows
from tests.fixtures import messages
from tests.settings_factory import make_settings

HOUR = timedelta(hours=1)
T0 = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)  # on a window boundary


def evaluation(iid: str, at: datetime, version: str, bad: bool) -> Evaluation:
    interaction = messages.interaction(
        interaction_id=iid, timestamp=at, question="q", answer="a", metadata={"prompt_version": version}
    )
    return messages.evaluation(
        interaction, context_entailment=0.2 if bad else 0.9, hallucination=bad, answer_refusal=None
    )


def hour(i: int, plan: dict[str, tuple[int, int]]) -> list[Evaluation]:
    """Window ``i``: per version, (interactions, hallucinated)."""
    out = []
    for version, (n, bad) in plan.items():
        for k in range(n):
            at = T0 + i * HOUR + timedelta(seconds=10 * len(out))
            out.append(evaluation(f"{i}-{version}-{k}", at, version, k < bad))
    return out


RULE = AlertRule(
    name="halluc-by-prompt", metric="hallucination_rate", op=">", threshold=0.3, windows=1,
    min_interactions=10, resolve_for=1, cooldown_seconds=0, group_by=["prompt_version"],
)  # fmt: skip


async def close(
    engine: AlertEngine, store: ClickHouseStore, i: int, plan: dict[str, tuple[int, int]]
) -> tuple[WindowAggregate, list[Alert]]:
    rows = hour(i, plan)
    store.insert_evaluations_sync(rows)
    window = aggregate(
        (EvalRow.from_evaluation(e) for e in rows), window_start=T0 + i * HOUR,
        window_end=T0 + (i + 1) * HOUR, app="bot", model="m",
    )  # fmt: skip
    return window, await engine.on_window(window)


async def test_a_regression_in_one_slice_fires_for_that_slice_alone(store: ClickHouseStore) -> None:
    clock = ManualClock(T0 + 100 * HOUR)
    engine = AlertEngine(
        AlertRules(rules=[RULE]), make_settings().alerts, TumblingWindows(3600), store, clock=clock
    )
    # v1 90 at 10 %, v2 20 at 70 %, v3 5 all bad (under min_interactions): overall 32/115 = 0.28 < 0.3
    window, made = await close(engine, store, 0, {"v1": (90, 9), "v2": (20, 14), "v3": (5, 5)})
    assert window.hallucination_rate is not None and window.hallucination_rate < RULE.threshold
    (alert,) = made
    assert alert.slice == "prompt_version=v2" and alert.value == pytest.approx(0.7)
    assert alert.interactions == 20 and "bot/m [prompt_version=v2]" in alert.message
    assert alert.alert_id.endswith("|prompt_version=v2")
    stored = await store.latest_alert(RULE.name, "bot", "m", "prompt_version=v2")
    assert stored is not None and stored.state == "firing"
    assert await store.latest_alert(RULE.name, "bot", "m") is None  # the unsliced series has none
    # the next hour v2 is fine again: that slice resolves; v3 now has enough traffic and fires
    _, made = await close(engine, store, 1, {"v1": (90, 9), "v2": (20, 2), "v3": (12, 6)})
    assert sorted((a.slice, a.state) for a in made) == [
        ("prompt_version=v2", "resolved"), ("prompt_version=v3", "firing"),
    ]  # fmt: skip
    # closing the same window again decides nothing new
    assert await engine.on_window(window) == []


def test_a_group_by_naming_no_stored_dimension_is_refused_at_start(tmp_path: Path) -> None:
    from groundwatch.commands.worker_cmd import read_files

    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - {name: r, metric: hallucination_rate, threshold: 0.2, group_by: [tenant]}\n",
        encoding="utf-8",
    )
    settings = make_settings(alerts={"rules_file": rules})
    with pytest.raises(
        ConfigError, match=r"group_by tenant is not a dimension.*GROUNDWATCH_DIMENSIONS__PATHS"
    ):
        read_files(settings)
    read_files(settings.with_changes(dimensions={"paths": ["tenant"]}))  # configured: accepted


@pytest.mark.parametrize(
    ("dimensions", "values"),
    [
        (["prompt_version"], ["v2"]),
        (["city", "retriever"], ["Paris, France", "dense"]),
        (["customer.tier", "formula"], ["gold", "a=b, c"]),
    ],
)
def test_a_slice_name_reads_back_whatever_its_values_hold(dimensions: list[str], values: list[str]) -> None:
    """The dashboard finds a slice's alerts by reading their slice names back (slices_api.in_slice)."""
    assert slice_values(slice_name(dimensions, values)) == dict(zip(dimensions, values, strict=True))
    assert slice_values("") == {}
