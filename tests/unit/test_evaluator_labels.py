"""Your own evaluators as label kinds (``custom.<name>``, schemas/label_kinds.py): refused when the
evaluators file has no such pattern or pass/fail evaluator (the model, the dashboard's 400, the labels
import's exit 2, the labels topic's dead letter), and measured like the core judge: agreement per
evaluator version, the corrected rate of ``custom.<name>``, a label given twice counted once, the labels
of an evaluator removed from the file kept but left out until it is back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from groundwatch.cli import main
from pipeline.clock import ManualClock
from pipeline.custom_evaluators import install_spec, load_evaluators
from pipeline.judge_quality import judge_quality
from schemas.evaluation import Evaluation
from schemas.label import Label, LabeledRow, LabelKind, label_targets
from schemas.results import CustomScore
from schemas.settings import Settings
from streams.agreement_gauges import AgreementGauges
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.store import ClickHouseStore
from streams.codec import InvalidMessage, dead_letter, decode
from streams.judge_quality import read_quality
from tests.fixtures.dashboard import client_for
from tests.fixtures.messages import EVALUATED_AT
from tests.fixtures.store import store_with_window
from tests.integration.chdb import fresh_chdb_url

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = T0 + timedelta(days=1)
HOUR = timedelta(hours=1)

EVALUATORS = """
evaluators:
  - name: competitor
    version: "1"
    kind: pattern
    field: answer
    words: [Globex]
  - name: no_medical_advice
    version: "3"
    kind: rubric
    output: pass_fail
    instructions: Pass unless the answer gives medical advice.
  - name: tone
    version: "1"
    kind: rubric
    output: score_1_5
    instructions: 5 is polite, 1 is rude.
"""


def evaluators_file(tmp_path: Path, text: str = EVALUATORS) -> Path:
    path = tmp_path / "evaluators.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def without_competitor(tmp_path: Path) -> Path:
    kept = EVALUATORS.split("  - name: no_medical_advice")[1]
    return evaluators_file(tmp_path, "evaluators:\n  - name: no_medical_advice" + kept)


def label(iid: str, kind: str, value: int, reviewer: str = "ann", at: datetime = LATER) -> Label:
    return Label.model_validate(
        {"interaction_id": iid, "kind": kind, "value": value, "reviewer": reviewer, "labeled_at": at}
    )


# ---- which kinds a label may name ---------------------------------------------------------------------


def test_each_pattern_and_pass_fail_evaluator_is_a_label_kind_and_nothing_else_is(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"custom\.competitor: no evaluators file is loaded"):
        label("i", "custom.competitor", 1)
    load_evaluators(evaluators_file(tmp_path), functions=False)
    assert label("i", "custom.competitor", 1).kind == "custom.competitor"
    assert label("i", "grounded", 1).kind is LabelKind.GROUNDED
    assert list(label_targets())[-2:] == ["custom.competitor", "custom.no_medical_advice"]
    rubric = label_targets()["custom.no_medical_advice"]
    assert (rubric.evaluator, rubric.rate_metric, rubric.keys, rubric.yes_text) == (
        "rubric", "custom.no_medical_advice", ("3", "4"), "pass"
    )  # fmt: skip
    with pytest.raises(ValidationError, match=r"custom\.competitr: no such evaluator in the evaluators file"):
        label("i", "custom.competitr", 1)  # a typo
    with pytest.raises(ValidationError, match=r"custom\.tone is a score evaluator"):
        label("i", "custom.tone", 1)
    with pytest.raises(ValidationError, match="unknown label kind 'custom'"):
        label("i", "custom", 1)
    with pytest.raises(ValidationError, match="value"):
        label("i", "custom.competitor", 2)
    schema = json.dumps(Label.model_json_schema())
    assert "custom\\\\." in schema and "ground_truth_refusal" in schema


def test_a_label_for_an_unknown_evaluator_on_the_labels_topic_is_a_dead_letter_with_its_reason(
    tmp_path: Path,
) -> None:
    load_evaluators(evaluators_file(tmp_path), functions=False)
    raw = json.dumps({"interaction_id": "i1", "kind": "custom.nope", "value": 1, "reviewer": "ann"}).encode()
    with pytest.raises(InvalidMessage) as caught:
        decode(raw, Label, received_at=LATER)
    letter = dead_letter(stage="labels", error=caught.value, payload=raw, failed_at=LATER)
    assert "custom.nope: no such evaluator in the evaluators file" in letter.error
    assert letter.interaction_id == "i1"
    good = raw.replace(b"custom.nope", b"custom.competitor")
    assert decode(good, Label, received_at=LATER).labeled_at == LATER


# ---- agreement per evaluator version, the corrected rate ------------------------------------------------


def scored(iid: str, flag: int, version: str, *, app: str = "a") -> Evaluation:
    return Evaluation(
        evaluated_at=EVALUATED_AT, interaction_id=iid, timestamp=T0, app=app, model="m", judge="lexical",
        judge_model="lexical-v1", context_entailment=0.9, hallucination=False, answer_refusal=False,
        custom={"competitor": CustomScore(score=float(flag), version=version)},
    )  # fmt: skip


async def seed(store: ClickHouseStore) -> list[Evaluation]:
    """60 interactions scored by competitor v1 (20 flagged) and 40 by v2 (10 flagged), in one window, and
    one v2 failed to score."""
    evals = [scored(f"v1-{i}", int(i < 20), "1") for i in range(60)]
    evals += [scored(f"v2-{i}", int(i < 10), "2") for i in range(40)]
    timed_out = CustomScore(reason="timeout: over 60 s", version="2")
    evals.append(scored("v2-missing", 0, "2").model_copy(update={"custom": {"competitor": timed_out}}))
    await store_with_window(store, evals, T0, datetime.now(UTC))
    return evals


async def test_agreement_is_per_evaluator_version_and_the_custom_rate_is_corrected(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    load_evaluators(evaluators_file(tmp_path), functions=False)
    await seed(store)
    labels = LabelStore(store)
    # v1: of its 20 flags people agree with 16; of its 40 others, 4 did name a competitor.
    marks = [label(f"v1-{i}", "custom.competitor", 1 if i < 16 or 20 <= i < 24 else 0) for i in range(60)]
    # v2: every verdict right
    marks += [label(f"v2-{i}", "custom.competitor", int(i < 10)) for i in range(40)]
    marks.append(label("v2-missing", "custom.competitor", 1))
    await labels.insert(marks)
    await labels.insert(marks[:5])  # the same labels again (a redelivery): replace their own rows
    settings = Settings().with_changes(labels={"min_per_class": 10, "bootstrap_resamples": 200})
    report = await read_quality(labels, settings, T0, T0 + HOUR, app="a")
    judges = {b.prompt_version: b for b in report.judges if b.kind == "custom.competitor"}
    assert set(judges) == {"1", "2"}
    v1, v2 = judges["1"], judges["2"]
    assert (v1.judge, v1.judge_model, v1.labels, v2.labels) == ("custom.pattern", "", 60, 41)
    assert (v1.no_verdict, v2.no_verdict) == (0, 1)  # its missing score: under the version it ran as
    assert v1.agreement is not None and v2.agreement is not None
    assert v1.agreement.sensitivity.value == pytest.approx(16 / 20)  # flags among the 20 with a competitor
    assert v1.agreement.specificity.value == pytest.approx(36 / 40)
    assert v2.agreement.balanced_accuracy.value == pytest.approx(1.0)
    [pooled] = [b for b in report.apps if b.kind == "custom.competitor"]
    assert (pooled.identities, pooled.rate_metric, pooled.condition) == (
        2, "custom.competitor", "competitor: flagged"
    )  # fmt: skip
    a = pooled.agreement
    assert a is not None and a.cases == 100
    se = (16 + 10) / (20 + 10)
    sp = (36 + 30) / (40 + 30)
    c = pooled.corrected
    assert c is not None and (c.flagged, c.total) == (30, 100)
    assert c.corrected == pytest.approx((0.3 + sp - 1) / (se + sp - 1))
    gauges = AgreementGauges(settings, ManualClock(LATER))
    gauges.report = report
    samples = {
        (s.name, s.labels.get("prompt_version"), s.labels["kind"]): s.value
        for family in gauges.collect() for s in family.samples if "kind" in s.labels
    }  # fmt: skip
    assert samples[("groundwatch_judge_labeled_cases", "1", "custom.competitor")] == 60
    assert samples[("groundwatch_judge_balanced_accuracy", "2", "custom.competitor")] == pytest.approx(1.0)
    assert ("groundwatch_judge_corrected_rate", None, "custom.competitor") in samples


async def test_labels_of_an_evaluator_removed_from_the_file_are_kept_but_left_out_until_it_is_back(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    load_evaluators(evaluators_file(tmp_path), functions=False)
    await seed(store)
    labels = LabelStore(store)
    await labels.insert([label("v1-0", "custom.competitor", 1), label("v1-0", "grounded", 1)])
    load_evaluators(without_competitor(tmp_path), functions=False)  # the worker restarted without it
    assert [x.kind for x in await labels.of_interaction("v1-0")] == [LabelKind.GROUNDED]
    rows = await labels.labeled_rows(T0, T0 + HOUR)
    assert [r.kind for r in rows] == [LabelKind.GROUNDED]
    report = await read_quality(labels, Settings(), T0, T0 + HOUR)
    assert {str(b.kind) for b in report.judges} == {"grounded"}
    stored = await store.query(f"SELECT count() AS n FROM {store.db}.labels FINAL")
    assert stored[0]["n"] == 2
    with pytest.raises(ValidationError, match="no such evaluator"):
        label("v1-1", "custom.competitor", 1)  # and no new one is taken
    load_evaluators(evaluators_file(tmp_path), functions=False)  # back
    back = await labels.labeled_rows(T0, T0 + HOUR)
    assert {str(r.kind) for r in back} == {"grounded", "custom.competitor"}


def test_an_interaction_the_evaluator_did_not_score_gives_no_verdict(tmp_path: Path) -> None:
    load_evaluators(evaluators_file(tmp_path), functions=False)
    base: dict[str, Any] = {"timestamp": T0, "app": "a", "model": "m", "judge": "lexical", "reviewer": "ann",
                            "source": "reviewer", "kind": "custom.no_medical_advice", "value": 1}  # fmt: skip
    passed, timed_out = CustomScore(score=1.0, version="3"), CustomScore(reason="timeout")
    rows = [
        LabeledRow(interaction_id="s", custom={"no_medical_advice": passed}, **base),
        LabeledRow(interaction_id="m", custom={"no_medical_advice": timed_out}, **base),
        LabeledRow(interaction_id="n", **base),  # out of its scope or sample
    ]
    [block] = judge_quality(rows, lambda _: 0.5, resamples=0, per_identity=False)
    assert (block.labels, block.no_verdict, block.identities) == (3, 2, 2)
    assert block.agreement is not None and block.agreement.cases == 1
    by_version = judge_quality(rows, lambda _: 0.5, resamples=0)
    assert [(b.judge, b.prompt_version) for b in by_version] == [
        ("custom.rubric", ""),
        ("custom.rubric", "3"),
    ]


# ---- the dashboard and the labels import ------------------------------------------------------------------


async def test_the_dashboard_asks_and_takes_custom_labels_and_refuses_unknown_ones(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    load_evaluators(evaluators_file(tmp_path), functions=False)
    await seed(store)
    client = await client_for(store)
    try:
        kinds = await (await client.get("/dashboard/api/label-kinds")).json()
        custom = {k["kind"]: k for k in kinds if k["kind"].startswith("custom.")}
        assert custom["custom.competitor"] == {
            "kind": "custom.competitor", "question": "competitor: should it be flagged?",
            "yes_text": "flag", "no_text": "no flag", "keys": ["1", "2"],
        }  # fmt: skip
        assert "custom.tone" not in custom  # a score evaluator: no label kind
        keys = [key for k in kinds for key in k["keys"]]
        assert len(keys) == len(set(keys))
        body = {"interaction_id": "v1-0", "kind": "custom.competitor", "value": 0, "reviewer": "ann"}
        assert (await client.post("/dashboard/api/labels", json=body)).status == 201
        assert (await client.post("/dashboard/api/labels", json=body)).status == 201  # again: one row
        detail = await (await client.get("/dashboard/api/interactions/v1-0")).json()
        assert [(x["kind"], x["value"]) for x in detail["labels"]] == [("custom.competitor", 0)]
        for kind, why in (("custom.nope", "no such evaluator"), ("custom.tone", "a score evaluator")):
            bad = await client.post("/dashboard/api/labels", json={**body, "kind": kind})
            assert bad.status == 400
            assert why in await bad.text()
    finally:
        await client.close()
    assert len(await LabelStore(store).of_interaction("v1-0")) == 1


def test_labels_import_takes_custom_kinds_and_refuses_an_unknown_one_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GROUNDWATCH_EVALUATORS__FILE", str(evaluators_file(tmp_path)))
    url = fresh_chdb_url()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "x1", "labels": {"custom.competitor": 1, "answerable": 1}}\n'
        '{"id": "x2", "labels": {"custom.competitorr": 0}}\n',
        encoding="utf-8",
    )
    assert main(["labels", "import", str(bad), "--clickhouse", url]) == 2
    err = capsys.readouterr().err
    assert "line 2: labels.custom.competitorr" in err and "no such evaluator" in err
    assert "1 bad lines; nothing imported" in err
    good = tmp_path / "good.jsonl"
    good.write_text('{"id": "x1", "labels": {"custom.competitor": 1, "answerable": 1}}\n', encoding="utf-8")
    assert main(["labels", "import", str(good), "--clickhouse", url]) == 0
    out = capsys.readouterr().out
    assert "1 labels of 1 interactions imported" in out and "answerable (1)" in out
    install_spec(None)


# ---- alert rules on custom metrics ----------------------------------------------------------------------


def test_the_alert_rules_schema_takes_custom_metric_names() -> None:
    import re

    from schemas.alert import AlertRule

    metric = AlertRule.model_json_schema()["properties"]["metric"]
    [fixed, custom] = metric["anyOf"]
    assert "hallucination_rate" in fixed["enum"] and "judge_kappa" in fixed["enum"]
    for name in ("custom.competitor", "custom.same_language.missing"):
        assert re.fullmatch(custom["pattern"], name), name
    for name in ("custom.", "custom.Competitor", "custom.a.b", "competitor", "custom.x.missing.missing"):
        assert not re.fullmatch(custom["pattern"], name), name


def test_the_worker_refuses_a_rule_on_an_unknown_custom_metric_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import os

    from tests.fixtures.cli import one_line

    for name in [n for n in os.environ if n.startswith("GROUNDWATCH_")]:
        monkeypatch.delenv(name)
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n  - {name: r, metric: custom.competitr, op: '>', threshold: 0.1}\n", encoding="utf-8"
    )
    monkeypatch.setenv("GROUNDWATCH_ALERTS__RULES_FILE", str(rules))
    monkeypatch.setenv("GROUNDWATCH_CLICKHOUSE__URL", "http://127.0.0.1:9/db")  # never reached
    line = one_line(capsys, "worker", "--broker", "kafka://127.0.0.1:9")
    assert line.startswith("groundwatch worker: ConfigError: alert rules file")
    assert "custom.competitr: no such metric of the evaluators file" in line and "none is loaded" in line
    monkeypatch.setenv("GROUNDWATCH_EVALUATORS__FILE", str(evaluators_file(tmp_path)))
    line = one_line(capsys, "worker", "--broker", "kafka://127.0.0.1:9")
    assert "custom.competitr: no such metric of the evaluators file" in line
    assert "its metrics are custom.competitor, custom.competitor.missing" in line
    assert line.endswith("(GROUNDWATCH_ALERTS__RULES_FILE)")


async def test_a_judge_drift_rule_watches_a_custom_evaluators_agreement(
    store: ClickHouseStore, tmp_path: Path
) -> None:
    from schemas.alert import AlertRules
    from streams.alerts.judge_drift import JudgeDrift
    from streams.judge_quality import correct_threshold

    rule = {"name": "comp-agreement", "metric": "judge_balanced_accuracy", "label_kind": "custom.competitor",
            "op": "<", "threshold": 0.95, "labels": 100, "min_interactions": 50}  # fmt: skip
    with pytest.raises(ValidationError, match="no evaluators file is loaded"):
        AlertRules.model_validate({"rules": [rule]})
    load_evaluators(evaluators_file(tmp_path), functions=False)
    [parsed] = AlertRules.model_validate({"rules": [rule]}).rules
    await seed(store)
    marks = [label(f"v1-{i}", "custom.competitor", 1 if i < 16 or 20 <= i < 24 else 0) for i in range(60)]
    marks += [label(f"v2-{i}", "custom.competitor", int(i < 10)) for i in range(40)]
    await LabelStore(store).insert(marks)
    drift = JudgeDrift(LabelStore(store).latest_labeled, correct_threshold(Settings()), resamples=100)
    check = await drift.check(parsed, "a", "m", T0 + HOUR, None)
    current = check.current
    assert (current.cases, current.identities) == (100, 2)  # both versions pooled, and said so
    assert (current.judge, current.prompt_version) == ("custom.pattern", "2")  # the newest label's
    assert current.value == pytest.approx(((26 / 30) + (66 / 70)) / 2)  # 0.905
    assert check.breach
