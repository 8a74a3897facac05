"""The judge-quality report as text (``groundwatch agreement``): per app/model, per label kind."""

from __future__ import annotations

from groundwatch.figures import defined, fixed
from pipeline.judge_quality import QualityBlock
from pipeline.metrics.agreement import Estimate
from streams.judge_quality import QualityReport


def _est(e: Estimate | None) -> str:
    if e is None or defined(e.value) is None:
        return "-"
    if defined(e.low) is None or defined(e.high) is None:
        return fixed(e.value)
    return f"{fixed(e.value)} [{fixed(e.low)}, {fixed(e.high)}]"


def _pct(value: float | None) -> str:
    shown = defined(value)
    return "-" if shown is None else f"{100 * shown:.1f} %"


#: what a kind without a flag rate in the windows (correctness: a score, not a flag) shows as corrected
NO_RATE = "agreement only: no flag rate of this kind to correct"


def _corrected(block: QualityBlock) -> str:
    c = block.corrected
    if c is None:
        return NO_RATE if block.rate_metric is None else "no judged traffic in the period"
    if c.corrected is None:
        return c.note
    interval = f" [{_pct(c.low)}, {_pct(c.high)}]" if c.low is not None and c.high is not None else ""
    return f"{_pct(c.corrected)}{interval}"


def _judge(block: QualityBlock) -> str:
    version = f" prompt {block.prompt_version}" if block.prompt_version else ""
    return f"{block.judge} ({block.judge_model}{version})"


def render(report: QualityReport) -> str:
    lines = [
        f"Judge quality on people's labels, interactions from {report.start:%Y-%m-%d %H:%M} to "
        f"{report.end:%Y-%m-%d %H:%M} UTC ({report.min_per_class} labels of each class before a rate is "
        f"corrected; end users' labels {'counted' if report.include_end_user else 'left out'})"
    ]
    if not report.apps:
        lines.append("no labels of judged interactions in the period (groundwatch labels import FILE)")
        return "\n".join(lines)
    header = (
        f"  {'kind':<21} {'labels':>6} {'cases':>5}  {'sensitivity [95 %]':<22} {'specificity [95 %]':<22} "
        f"{'balanced acc. [95 %]':<22} {'kappa':>6}  {'flagged':>8}  corrected [95 %]"
    )
    current = None
    for block in report.apps:
        if (block.app, block.model) != current:
            current = (block.app, block.model)
            lines += ["", f"{block.app} / {block.model}", header]
        a = block.agreement
        flagged = _pct(block.corrected.flagged_rate) if block.corrected else "-"
        lines.append(
            f"  {block.kind!s:<21} {block.labels:>6} {a.cases if a else 0:>5}  "
            f"{_est(a.sensitivity if a else None):<22} {_est(a.specificity if a else None):<22} "
            f"{_est(a.balanced_accuracy if a else None):<22} "
            f"{fixed(a.kappa.value if a else None, width=6)}  {flagged:>8}  "
            f"{_corrected(block)}"
        )
        notes = []
        if block.disputed:
            notes.append(f"{block.disputed} disputed (reviewers tied)")
        if block.no_verdict:
            notes.append(f"{block.no_verdict} without a judge verdict")
        if block.reviewers.pairs:
            r = block.reviewers
            kappa = f", kappa {fixed(r.kappa)}" if defined(r.kappa) is not None else ""
            notes.append(f"reviewers agree on {_pct(r.percent_agreement)} of {r.pairs} pairs{kappa}")
        if block.identities > 1:
            notes.append(f"{block.identities} judge identities pooled (see below)")
        if notes:
            lines.append(f"  {'':<21} {'; '.join(notes)}")
    lines += ["", "per judge identity (balanced accuracy [95 %], cases):"]
    for block in report.judges:
        a = block.agreement
        lines.append(
            f"  {block.app} / {block.model}  {_judge(block)}  {block.kind}: "
            f"{_est(a.balanced_accuracy if a else None)}, {a.cases if a else 0}"
        )
    return "\n".join(lines)
