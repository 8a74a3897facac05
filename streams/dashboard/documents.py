"""Per context document: retrievals (``evaluations.context_documents``) and the verdicts of the answer
statements judged against its passages (``evaluation_statements.document``, the current evaluation's
rows only). Read by the Documents page, its API and ``groundwatch report --documents``."""

from __future__ import annotations

from typing import Any

from pipeline.metrics.wilson import wilson_interval
from schemas.documents import DocumentReport, DocumentRow, DocumentsQuery
from schemas.safe_text import safe_text
from streams.clickhouse.slices import slice_condition
from streams.clickhouse.sql import in_range
from streams.clickhouse.store import ClickHouseStore


def _in_range(db: str, condition: str) -> str:
    """Judged interactions of the slice in the range (the table's key starts with app, model and time)."""
    return f"{in_range()} AND {condition} AND judged = 1"


def documents_sql(db: str, condition: str) -> str:
    """One row per document: retrievals, the context pair's verdicts against its passages, and the
    citations of its passages (``cited``: one per statement and cited passage) with those for a statement
    the passage does not support (``miscited``: ``cited_precise`` 0; a citation whose support is unknown,
    ``cited_precise`` empty, is cited only); and one row with document NULL whose ``without_passage``
    counts the statements with no recorded passage."""
    current = (
        f"(interaction_id, version) IN (SELECT interaction_id, version FROM {db}.evaluations FINAL "
        f"WHERE {_in_range(db, condition)})"
    )
    zero = "toUInt64(0)"
    # one (document, precise) per cited passage of a statement; precise 2 where the support is unknown
    cites = (
        "arrayZip(cited_documents, if(length(cited_precise) = length(cited_documents), cited_precise, "
        "arrayMap(d -> toUInt8(2), cited_documents)))"
    )
    return (
        "SELECT doc AS document, sum(r) AS retrieved, sum(s) AS statements, sum(e) AS supported, "
        "sum(n) AS not_stated, sum(c) AS contradicted, sum(np) AS without_passage, sum(ci) AS cited, "
        "sum(mc) AS miscited FROM (\n"
        f"  SELECT toNullable(arrayJoin(context_documents)) AS doc, count() AS r, {zero} AS s, {zero} AS e, "
        f"{zero} AS n, {zero} AS c, {zero} AS np, {zero} AS ci, {zero} AS mc\n"
        f"  FROM {db}.evaluations FINAL WHERE {_in_range(db, condition)} GROUP BY doc\n"
        "  UNION ALL\n"
        f"  SELECT document AS doc, {zero} AS r, count() AS s, "
        "countIf(verdict = 'entailed') AS e, countIf(verdict = 'not_stated') AS n, "
        "countIf(verdict = 'contradicted') AS c, countIf(passage IS NULL) AS np, "
        f"{zero} AS ci, {zero} AS mc\n"
        f"  FROM {db}.evaluation_statements FINAL\n"
        f"  WHERE pair = 'context_answer' AND {current} GROUP BY doc\n"
        "  UNION ALL\n"
        f"  SELECT toNullable(cite.1) AS doc, {zero} AS r, {zero} AS s, {zero} AS e, {zero} AS n, "
        f"{zero} AS c, {zero} AS np, count() AS ci, countIf(cite.2 = 0) AS mc\n"
        f"  FROM {db}.evaluation_statements FINAL ARRAY JOIN {cites} AS cite\n"
        f"  WHERE pair = 'context_answer' AND notEmpty(cited_documents) AND {current} GROUP BY doc\n"
        ") GROUP BY doc"
    )


def document_row(r: dict[str, Any]) -> DocumentRow:
    statements = int(r["statements"])
    supported = int(r["supported"])
    unsupported = statements - supported
    interval = wilson_interval(unsupported, statements)
    return DocumentRow(
        document=r["document"],
        retrieved=int(r["retrieved"]),
        statements=statements,
        supported=supported,
        not_stated=int(r["not_stated"]),
        contradicted=int(r["contradicted"]),
        unsupported_share=unsupported / statements if statements else None,
        lower=interval[0] if interval else None,
        upper=interval[1] if interval else None,
        never_supporting=int(r["retrieved"]) > 0 and supported == 0,
        cited=int(r["cited"]),
        miscited=int(r["miscited"]),
    )


def worst_first(rows: list[DocumentRow]) -> list[DocumentRow]:
    """By the lower bound of the unsupported share (a document judged a few times ranks by what it
    surely is; none judged: 0), then never supporting first, then retrievals; the name breaks ties."""
    return sorted(rows, key=lambda d: (-(d.lower or 0.0), not d.never_supporting, -d.retrieved, d.document))


async def read_documents(store: ClickHouseStore, q: DocumentsQuery) -> DocumentReport:
    condition, params = slice_condition(q.slice, "s")
    params = {**params, "start": q.start, "end": q.end}
    found = await store.query(documents_sql(store.db, condition), params)
    rows = [document_row(r) for r in found if r["document"] is not None]
    ranked = worst_first(rows)
    return DocumentReport(
        start=q.start,
        end=q.end,
        slice=q.slice,
        documents=ranked[: q.limit],
        total=len(ranked),
        statements_without_passage=sum(int(r["without_passage"]) for r in found if r["document"] is None),
    )


def render_documents(report: DocumentReport) -> str:
    """The report as a text table (``groundwatch report --documents``)."""
    lines = [
        f"Documents {report.start:%Y-%m-%d %H:%M} .. {report.end:%Y-%m-%d %H:%M} UTC, "
        f"{report.slice.describe()}: {report.total} documents, worst first",
        f"{'document':<40} {'retrieved':>9} {'statements':>10} {'unsupported':>11} {'95% interval':>15} "
        f"{'contradicted':>12} {'miscited':>8}  note",
    ]
    for d in report.documents:
        share = "-" if d.unsupported_share is None else f"{100 * d.unsupported_share:.1f}%"
        interval = "-" if d.lower is None else f"{100 * d.lower:.0f}-{100 * (d.upper or 0):.0f}%"
        note = "retrieved, never supporting" if d.never_supporting else ""
        name = safe_text(d.document or "(no document name)", 40)
        counts = (
            f"{d.retrieved:>9} {d.statements:>10} {share:>11} {interval:>15} {d.contradicted:>12} "
            f"{d.miscited:>8}"
        )
        lines.append(f"{name:<40} {counts}  {note}")
    if report.statements_without_passage:
        lines.append(f"{report.statements_without_passage} answer statements have no recorded passage")
    return "\n".join(lines)
