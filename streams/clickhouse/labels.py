"""People's labels in ClickHouse: written from the labels topic, the dashboard and ``groundwatch labels
import``, read for agreement, the corrected rates and the review queue.

``labels`` is a ReplacingMergeTree keyed by (interaction, kind, reviewer) with the label's time as its
version: the latest label of a person on an interaction wins, and a redelivered message replaces its row.

Reads return the labels of the kinds known now (``schemas.label.label_targets``): those of an evaluator
since removed from the evaluators file stay stored and count again when it is back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from pipeline.review import REVIEW_FRACTION_SQL
from schemas.evaluation import Evaluation
from schemas.label import CONVERSATION_KINDS, Label, LabeledRow, label_targets
from schemas.metrics import MetricKind, catalogue
from schemas.results import CustomScore
from schemas.settings import LabelsSettings
from schemas.slice_filter import SliceFilter
from schemas.utc import utc
from streams.clickhouse.slices import slice_condition
from streams.clickhouse.sql import APP_FILTER, MODEL_FILTER, in_range, pooled_columns
from streams.clickhouse.sql import TS as _TS
from streams.clickhouse.store import ClickHouseStore

LABEL_COLUMNS = [
    "interaction_id", "kind", "reviewer", "value", "source", "labeled_at",
    "note", "statements", "inclusion_probability", "version",
]  # fmt: skip

#: labels from reviewers and imports: end users' thumbs neither take an interaction out of the review
#: queue nor count as a reviewer's progress
_PEOPLE = "source != 'end_user'"
_FILTER = f"{APP_FILTER} AND {MODEL_FILTER}"
#: labels on an interaction, not on a conversation (schemas.label_kinds.CONVERSATION_KINDS)
_NOT_CONVERSATION = "kind NOT IN (" + ", ".join(f"'{k.value}'" for k in sorted(CONVERSATION_KINDS)) + ")"
_EVAL_COLUMNS = (
    "interaction_id, conversation_id, timestamp, app, model, judge, judge_model, prompt_version, "
    "hallucination, answer_refusal, ground_truth_refusal, answer_entails_ground_truth, context_entailment, "
    "custom_scores, custom_versions"
)
#: the labels of the kinds known now (``kinds``: label_targets' names)
_KNOWN = "kind IN {kinds:Array(String)}"


def _labeled_row(r: dict[str, Any]) -> LabeledRow:
    """A row of ``LabelStore._labeled_sql`` as a LabeledRow: the labeled custom evaluator's score (None
    when it failed to score) and the version it ran as (for a custom kind) under ``custom``; nothing when
    it did not run on the interaction."""
    name = str(r["kind"]).removeprefix("custom.")
    custom = {}
    ran = name in r["custom_scores"] or name in r["custom_versions"]
    if r["kind"].startswith("custom.") and ran:
        version = r["custom_versions"].get(name, "")
        custom[name] = CustomScore(score=r["custom_scores"].get(name), version=version)
    return LabeledRow.model_validate({**r, "timestamp": utc(r["timestamp"]), "custom": custom})


def label_row(label: Label) -> list[Any]:
    labeled_at = utc(label.labeled_at)
    return [
        label.interaction_id,
        str(label.kind),
        label.reviewer,
        label.value,
        label.source.value,
        labeled_at,
        label.note,
        json.dumps([s.model_dump() for s in label.statements]),
        label.inclusion_probability,
        int(labeled_at.timestamp() * 1000),
    ]


def _threshold_sql(
    overrides: Sequence[tuple[str, str, float]], by_judge: Mapping[str, float] | None = None
) -> tuple[str, dict[str, Any]]:
    """The decision threshold of a row's app and model as SQL: the first of ``overrides`` (app, model or
    '' for the whole app, threshold) that matches, else the default of the judge that scored the row
    (``by_judge``: judge kind -> threshold), else the parameter ``threshold``."""
    cases: list[str] = []
    params: dict[str, Any] = {}
    for i, (app, model, value) in enumerate(overrides):
        condition = f"app = {{t_app{i}:String}}"
        params[f"t_app{i}"] = app
        if model:
            condition += f" AND model = {{t_model{i}:String}}"
            params[f"t_model{i}"] = model
        cases.append(f"{condition}, {{t_value{i}:Float64}}")
        params[f"t_value{i}"] = value
    for i, (judge, value) in enumerate(sorted((by_judge or {}).items())):
        cases.append(f"judge = {{t_judge{i}:String}}, {{t_judge_value{i}:Float64}}")
        params[f"t_judge{i}"] = judge
        params[f"t_judge_value{i}"] = value
    if not cases:
        return "{threshold:Float64}", {}
    return f"multiIf({', '.join(cases)}, {{threshold:Float64}})", params


class FlagCounts(BaseModel):
    """One app/model's judged interactions and flags of each rate metric over a period (from windows)."""

    app: str
    model: str
    flagged: dict[str, int]
    total: dict[str, int]


class QueueItem(BaseModel):
    interaction_id: str
    timestamp: datetime
    app: str
    model: str
    context_entailment: float | None
    hallucination: bool | None
    answer_refusal: bool | None
    inclusion_probability: float


class QueueProgress(BaseModel):
    app: str
    model: str
    labeled_this_week: int
    target: int


class LabelStore:
    """Label reads and writes over an open ``ClickHouseStore``."""

    def __init__(self, store: ClickHouseStore) -> None:
        self.store = store
        self.db = store.db

    async def insert(self, labels: Sequence[Label]) -> None:
        if not labels:
            return
        rows = [label_row(label) for label in labels]
        await self.store.insert_rows("labels", rows, LABEL_COLUMNS)

    async def of_interaction(self, interaction_id: str) -> list[Label]:
        return await self._labels("interaction_id = {iid:String}", {"iid": interaction_id})

    async def _labels(self, where: str, params: dict[str, Any]) -> list[Label]:
        """Current labels matching ``where``, by interaction, kind and reviewer."""
        rows = await self.store.query(
            f"SELECT {', '.join(LABEL_COLUMNS[:-1])} FROM {self.db}.labels FINAL WHERE ({where}) "
            f"AND {_KNOWN} ORDER BY interaction_id, kind, reviewer",
            {**params, "kinds": list(label_targets())},
        )
        return [
            Label.model_validate(
                {**r, "labeled_at": utc(r["labeled_at"]), "statements": json.loads(r["statements"] or "[]")}
            )
            for r in rows
        ]

    def _labeled_sql(self, evaluations: str, labels: str = "1") -> str:
        """Current labels (``labels``: a condition on them) joined with the judge's verdicts on the
        judged interactions ``evaluations`` (a condition on evaluations) selects: one evaluation per
        interaction, its newest version (an id stored again on another day is another row of
        ``evaluations``; a label is of the interaction, so it meets one verdict). Labels of a
        conversation kind are left to ``_conversation_sql``."""
        return (
            "SELECT l.interaction_id AS interaction_id, e.conversation_id AS conversation_id, "
            "e.timestamp AS timestamp, e.app AS app, e.model AS model, e.judge AS judge, "
            "e.judge_model AS judge_model, e.prompt_version AS prompt_version, l.kind AS kind, "
            "l.reviewer AS reviewer, l.source AS source, l.value AS value, "
            "l.inclusion_probability AS inclusion_probability, e.hallucination AS hallucination, "
            "e.answer_refusal AS answer_refusal, e.ground_truth_refusal AS ground_truth_refusal, "
            "e.answer_entails_ground_truth AS answer_entails_ground_truth, "
            "e.context_entailment AS context_entailment, e.custom_scores AS custom_scores, "
            "e.custom_versions AS custom_versions, CAST(NULL, 'Nullable(UInt8)') AS ended_unresolved\n"
            f"FROM (SELECT interaction_id, kind, reviewer, source, value, inclusion_probability "
            f"FROM {self.db}.labels FINAL WHERE {labels} AND {_NOT_CONVERSATION}) AS l\n"
            f"INNER JOIN (SELECT {_EVAL_COLUMNS} FROM {self.db}.evaluations FINAL "
            f"WHERE interaction_id IN (SELECT interaction_id FROM {self.db}.labels) AND judged = 1 "
            f"AND {_FILTER} AND {evaluations} ORDER BY version DESC LIMIT 1 BY interaction_id) AS e "
            "ON l.interaction_id = e.interaction_id\n"
        )

    def _conversation_sql(self, conversations: str) -> str:
        """Current labels of a conversation kind (the label's interaction_id is a conversation_id) joined
        with the stored rollups of the conversations ``conversations`` (a condition on them) selects that
        had a judged turn: the rollup's ``ended_unresolved`` is the judge's flag; the judge is the one of
        the conversation's last judged turn, the conversation's time its last turn's. A conversation_id
        of two app/models is two conversations, each with the label."""
        return (
            "SELECT l.interaction_id AS interaction_id, c.conversation_id AS conversation_id, "
            "c.last_turn_at AS timestamp, c.app AS app, c.model AS model, t.judge AS judge, "
            "t.judge_model AS judge_model, t.prompt_version AS prompt_version, l.kind AS kind, "
            "l.reviewer AS reviewer, l.source AS source, l.value AS value, "
            "l.inclusion_probability AS inclusion_probability, "
            "CAST(NULL, 'Nullable(UInt8)') AS hallucination, "
            "CAST(NULL, 'Nullable(UInt8)') AS answer_refusal, "
            "CAST(NULL, 'Nullable(UInt8)') AS ground_truth_refusal, "
            "CAST(NULL, 'Nullable(Float64)') AS answer_entails_ground_truth, "
            "CAST(NULL, 'Nullable(Float64)') AS context_entailment, "
            "CAST(map(), 'Map(LowCardinality(String), Float64)') AS custom_scores, "
            "CAST(map(), 'Map(LowCardinality(String), String)') AS custom_versions, "
            "CAST(c.ended_unresolved, 'Nullable(UInt8)') AS ended_unresolved\n"
            f"FROM (SELECT interaction_id, kind, reviewer, source, value, inclusion_probability "
            f"FROM {self.db}.labels FINAL WHERE NOT {_NOT_CONVERSATION}) AS l\n"
            f"INNER JOIN (SELECT app, model, conversation_id, last_turn_at, ended_unresolved "
            f"FROM {self.db}.conversations FINAL WHERE judged_turns > 0 AND {_FILTER} AND {conversations} "
            f"AND conversation_id IN (SELECT interaction_id FROM {self.db}.labels)) AS c "
            "ON l.interaction_id = c.conversation_id\n"
            "INNER JOIN (SELECT app, model, assumeNotNull(conversation_id) AS conversation_id, "
            "argMax(judge, timestamp) AS judge, argMax(judge_model, timestamp) AS judge_model, "
            f"argMax(prompt_version, timestamp) AS prompt_version FROM {self.db}.evaluations FINAL "
            f"WHERE judged = 1 AND {_FILTER} AND conversation_id IN (SELECT interaction_id FROM "
            f"{self.db}.labels) GROUP BY app, model, conversation_id) AS t "
            "ON c.app = t.app AND c.model = t.model AND c.conversation_id = t.conversation_id\n"
        )

    async def labeled_rows(
        self, start: datetime, end: datetime, app: str | None = None, model: str | None = None
    ) -> list[LabeledRow]:
        """Every current label of interactions judged with start <= timestamp < end, joined with the
        judge's verdicts on them, and every current label of conversations whose last turn is in
        [start, end), joined with their rollups."""
        sql = (
            f"SELECT * FROM ({self._labeled_sql(in_range(), _KNOWN)} UNION ALL "
            f"{self._conversation_sql(in_range('last_turn_at'))}) "
            "ORDER BY app, model, interaction_id, kind, reviewer"
        )
        params = {"start": utc(start), "end": utc(end), "app": app or "", "model": model or "",
                  "kinds": list(label_targets())}  # fmt: skip
        rows = await self.store.query(sql, params)
        return [_labeled_row(r) for r in rows]

    async def latest_labeled(
        self,
        app: str,
        model: str,
        kind: str,
        before: datetime,
        interactions: int,
        include_end_user: bool = False,
    ) -> list[LabeledRow]:
        """The current labels of one kind on the last ``interactions`` interactions of an app/model
        judged before ``before`` (by event time) that people labeled (end users too with
        ``include_end_user``), newest interaction first."""
        labels = "kind = {kind:String}" + ("" if include_end_user else f" AND {_PEOPLE}")
        latest = (
            f"interaction_id IN (SELECT interaction_id FROM {self.db}.evaluations FINAL "
            f"WHERE judged = 1 AND {_FILTER} AND timestamp < {{before:{_TS}}} AND interaction_id IN "
            f"(SELECT interaction_id FROM {self.db}.labels FINAL WHERE {labels}) "
            "ORDER BY timestamp DESC, interaction_id DESC LIMIT 1 BY interaction_id LIMIT {n:UInt32})"
        )
        sql = self._labeled_sql(latest, labels) + ("ORDER BY timestamp DESC, interaction_id DESC, reviewer")
        params = {"app": app, "model": model, "before": utc(before), "kind": str(kind), "n": interactions}
        rows = await self.store.query(sql, params)
        return [_labeled_row(r) for r in rows]

    async def flag_counts(
        self, start: datetime, end: datetime, app: str | None = None, model: str | None = None
    ) -> list[FlagCounts]:
        """Flags and denominators of every rate metric (the custom evaluators' too) per app/model, pooled
        from the windows that start in [start, end) exactly as the catalogue pools them."""
        rates = [m for m in catalogue() if m.kind is MetricKind.RATE]
        columns = pooled_columns(rates)
        rows = await self.store.query(
            f"SELECT app, model, {columns} FROM {self.db}.window_aggregates FINAL "
            f"WHERE {in_range('window_start')} AND {_FILTER} "
            "GROUP BY app, model ORDER BY app, model",
            {"start": utc(start), "end": utc(end), "app": app or "", "model": model or ""},
        )
        return [
            FlagCounts(
                app=r["app"],
                model=r["model"],
                flagged={m.name: int(r[f"{m.name}__num"] or 0) for m in rates},
                total={m.name: int(r[f"{m.name}__den"] or 0) for m in rates},
            )
            for r in rows
        ]

    async def queue(
        self,
        start: datetime,
        end: datetime,
        settings: LabelsSettings,
        threshold: float,
        *,
        overrides: Sequence[tuple[str, str, float]] = (),
        by_judge: Mapping[str, float] | None = None,
        app: str | None = None,
        model: str | None = None,
        limit: int = 50,
    ) -> list[QueueItem]:
        """The review queue: judged interactions in the range that the stable draw picks
        (``pipeline.review``) and nobody has labeled yet, newest first. The near-threshold stratum lies
        around an app/model's own threshold (``overrides``: ``app_threshold_overrides``), else the
        default of the judge that scored the row (``by_judge``), else ``threshold``: the same threshold
        a label of the row is given its inclusion probability with."""
        threshold_sql, threshold_params = _threshold_sql(overrides, by_judge)
        probability = (
            "if({near:Float64} > 0 AND context_entailment IS NOT NULL "
            f"AND abs(context_entailment - {threshold_sql}) <= {{band:Float64}}, "
            "greatest({rate:Float64}, {near:Float64}), {rate:Float64})"
        )
        rows = await self.store.query(
            "SELECT interaction_id, timestamp, app, model, context_entailment, hallucination, "
            f"answer_refusal, {probability} AS inclusion_probability FROM {self.db}.evaluations FINAL "
            f"WHERE {in_range()} AND judged = 1 AND {_FILTER} "
            f"AND {REVIEW_FRACTION_SQL} < {probability} "
            f"AND interaction_id NOT IN (SELECT interaction_id FROM {self.db}.labels WHERE {_PEOPLE}) "
            "ORDER BY timestamp DESC LIMIT {limit:UInt32}",
            {
                "start": utc(start),
                "end": utc(end),
                "app": app or "",
                "model": model or "",
                "rate": settings.review_rate,
                "near": settings.review_near_threshold_rate,
                "band": settings.review_near_threshold_band,
                "threshold": threshold,
                "limit": limit,
                **threshold_params,
            },
        )
        return [QueueItem.model_validate({**r, "timestamp": utc(r["timestamp"])}) for r in rows]

    async def progress(
        self, since: datetime, target: int, app: str | None = None, model: str | None = None
    ) -> list[QueueProgress]:
        """Interactions labeled since ``since`` per app/model, against the weekly target."""
        rows = await self.store.query(
            f"SELECT app, model, uniqExact(l.interaction_id) AS n FROM "
            f"(SELECT interaction_id FROM {self.db}.labels FINAL "
            f"WHERE labeled_at >= {{since:{_TS}}} AND {_PEOPLE}) AS l "
            f"INNER JOIN (SELECT interaction_id, app, model FROM {self.db}.evaluations FINAL "
            f"WHERE interaction_id IN (SELECT interaction_id FROM {self.db}.labels) AND {_FILTER}) AS e "
            "ON l.interaction_id = e.interaction_id GROUP BY app, model ORDER BY app, model",
            {"since": utc(since), "app": app or "", "model": model or ""},
        )
        return [
            QueueProgress(app=r["app"], model=r["model"], labeled_this_week=int(r["n"]), target=target)
            for r in rows
        ]

    async def export_rows(
        self,
        start: datetime,
        end: datetime,
        *,
        app: str | None = None,
        model: str | None = None,
        labeled_only: bool = False,
        worst: int | None = None,
        slice_filter: SliceFilter | None = None,
    ) -> list[tuple[Evaluation, list[Label]]]:
        """Judged interactions of the range (of one slice, when given) with their current labels: every
        one, only the labeled, or the ``worst`` by context entailment (lowest first)."""
        condition, values = slice_condition(slice_filter or SliceFilter(), "f")
        where = f"{in_range()} AND judged = 1 AND {_FILTER} AND {condition}"
        if labeled_only:
            where += f" AND interaction_id IN (SELECT interaction_id FROM {self.db}.labels)"
        order = (
            "ORDER BY context_entailment ASC NULLS LAST, interaction_id" if worst else "ORDER BY timestamp"
        )
        limit = f" LIMIT {int(worst)}" if worst else ""
        rows = await self.store.query(
            f"SELECT payload FROM {self.db}.evaluations FINAL WHERE {where} {order}{limit}",
            {"start": utc(start), "end": utc(end), "app": app or "", "model": model or "", **values},
        )
        evaluations = [Evaluation.model_validate_json(r["payload"]) for r in rows]
        by_id: dict[str, list[Label]] = {e.interaction_id: [] for e in evaluations}
        if by_id:
            for label in await self._labels("interaction_id IN {ids:Array(String)}", {"ids": list(by_id)}):
                by_id[label.interaction_id].append(label)
        return [(e, by_id[e.interaction_id]) for e in evaluations]
