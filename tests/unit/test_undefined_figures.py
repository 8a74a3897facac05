"""An undefined statistic (a kappa with one class only, a figure nobody could compute) prints as ``-`` in
the command line's text and as ``null`` in its JSON, never as ``nan``."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from groundwatch.agreement_report import render
from groundwatch.figures import defined, fixed
from pipeline.judge_quality import QualityBlock
from pipeline.metrics.agreement import LabeledCase, ReviewerAgreement, agreement
from schemas.label import LabelKind
from streams.judge_quality import QualityReport


def one_class_report() -> QualityReport:
    """Every label says "hallucinated" and the judge flagged each: kappa (and specificity) undefined."""
    cases = [LabeledCase(f"i{n}", f"g{n}", condition=True, flagged=True) for n in range(12)]
    quality = agreement(cases, resamples=50)
    assert quality.kappa.value is None
    block = QualityBlock(
        app="shop", model="m1", judge="lexical", judge_model="lexical", prompt_version="",
        kind=LabelKind.GROUNDED, condition="hallucinated", rate_metric=None, labels=12, interactions=12,
        agreement=quality, reviewers=ReviewerAgreement(interactions=0, pairs=0),
    )  # fmt: skip
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return QualityReport(
        start=at, end=at, min_per_class=5, include_end_user=False, judges=[block], apps=[block]
    )


def test_agreement_prints_an_undefined_kappa_as_a_dash() -> None:
    text = render(one_class_report())
    assert "nan" not in text.lower()
    lines = text.splitlines()
    header = next(line for line in lines if "kappa" in line)
    row = next(line for line in lines if line.strip().startswith("grounded"))
    end = header.index("kappa") + len("kappa")
    assert row[end - 6 : end] == "     -"  # the kappa column, right-aligned as the header


def test_agreement_json_has_null_for_an_undefined_kappa() -> None:
    data = json.loads(one_class_report().model_dump_json())
    assert data["apps"][0]["agreement"]["kappa"]["value"] is None


@pytest.mark.parametrize("value", [None, math.nan, math.inf, -math.inf])
def test_every_undefined_value_is_a_dash(value: float | None) -> None:
    assert defined(value) is None
    assert fixed(value) == "-"
    assert fixed(value, width=6) == "     -"


def test_a_defined_value_keeps_its_digits() -> None:
    assert fixed(0.5) == "0.500" and fixed(-0.25, 1, 6) == "  -0.2"


def test_json_output_has_null_for_every_undefined_float() -> None:
    from groundwatch.figures import json_safe

    data = {"a": math.nan, "b": [1.5, math.inf, {"c": -math.inf}], "d": "nan", "e": 2, "f": None}
    text = json.dumps(json_safe(data), allow_nan=False)  # raises on NaN or Infinity
    assert json.loads(text) == {"a": None, "b": [1.5, None, {"c": None}], "d": "nan", "e": 2, "f": None}


def test_eval_prints_a_custom_evaluators_undefined_figures_as_a_dash() -> None:
    """``groundwatch eval --evaluators``: an evaluator that scored nothing (no value) and agrees with
    labels of one class only (kappa undefined) shows ``-`` for both, as every other figure does."""
    from groundwatch.commands.eval_cmd import custom_lines
    from pipeline.custom_evaluators import CustomSummary

    cases = [LabeledCase(f"i{n}", f"g{n}", condition=True, flagged=True) for n in range(12)]
    quality = agreement(cases, resamples=50)
    summary = CustomSummary(
        metric="custom.tone", kind="rate", version="1", value=None, scored=0, missing=3, agreement=quality
    )
    text = "\n".join(custom_lines({"tone": summary}))
    assert "rate - over 0 scored" in text and "kappa -" in text, text
    assert "n/a" not in text and "nan" not in text


@pytest.mark.parametrize("mean, sd", [(math.nan, 0.1), (math.inf, None), (None, None), (0.8, math.nan)])
def test_calibrate_prints_an_undefined_mean_or_spread_as_a_dash(mean: float | None, sd: float | None) -> None:
    from groundwatch.commands.calibrate_cmd import _fmt

    text = _fmt(mean, sd)
    assert "nan" not in text and "inf" not in text, text
    assert text == "-" if defined(mean) is None else text == "0.800 ± -"
