"""benchmarks/accuracy_cv.py: groups, rule decisions, nested selection (synthetic data, no ../shared)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from benchmarks import accuracy_cv as cv
from pipeline.metrics.crossval import FoldResult, Scored, grouped_folds


def test_groups_join_cases_sharing_a_question_or_a_passage() -> None:
    questions = ["Who won?", "who won", "When?", "Summarize.", "Summarize.", "Summarize.", "Where?"]
    contexts = [
        "A",
        "B",
        "C",
        "Poseidon grossed $181 million",
        "Poseidon grossed $181 million!",
        "Other",
        "C",
    ]
    groups = cv.group_keys(questions, contexts)
    assert groups[0] == groups[1]  # the same question, normalised
    assert groups[3] == groups[4]  # the same passage (first 60 characters, normalised)
    assert groups[2] == groups[6]  # the same context
    assert groups[5] == groups[3]  # "Summarize." is shared by under half of the cases: a key
    assert len(set(groups)) == 3


def test_an_instruction_shared_by_most_cases_is_no_group() -> None:
    questions = ["Summarize the passage."] * 4
    contexts = ["one passage", "one passage", "another", "a third"]
    assert len(set(cv.group_keys(questions, contexts))) == 3


def _fold(fold: int, bacc: float, auc: float = 0.7) -> FoldResult:
    return FoldResult(fold=fold, n=10, threshold=0.5, balanced_accuracy=bacc, roc_auc=auc)


def test_effect_is_on_minus_off_per_fold() -> None:
    on = [_fold(0, 0.8), _fold(1, 0.7)]
    off = [_fold(0, 0.7), _fold(1, 0.7)]
    e = cv.effect(on, off)
    assert e.balanced_accuracy[0] == pytest.approx(0.05)
    assert e.balanced_accuracy[1] == pytest.approx(0.0707107, rel=1e-5)
    assert e.roc_auc == (pytest.approx(0.0), pytest.approx(0.0))


def test_keep_rule() -> None:
    helps = cv.Effect((0.02, 0.01), (0.0, 0.0))
    nothing = cv.Effect((0.0, 0.0), (0.0, 0.0))
    hurts_within_sd = cv.Effect((-0.01, 0.02), (0.0, 0.0))
    hurts_beyond_sd = cv.Effect((-0.03, 0.01), (0.0, 0.0))
    assert cv.keep_rule({"a": helps, "b": nothing})
    assert not cv.keep_rule({"a": nothing, "b": nothing})  # no help: fewer rules
    assert cv.keep_rule({"a": helps, "b": hurts_within_sd})
    assert not cv.keep_rule({"a": helps, "b": helps, "c": hurts_beyond_sd})


def test_restrict_renumbers_the_kept_folds() -> None:
    s = Scored(labels=[1, 0, 1, 0], scores=[0.9, 0.1, 0.8, 0.2], folds=[0, 1, 2, 3])
    r = cv.restrict(s, [1, 3])
    assert (list(r.labels), list(r.scores), list(r.folds)) == ([0, 0], [0.1, 0.2], [0, 1])


def _synthetic_sets(config: cv.Config) -> dict[str, tuple[Scored, str]]:
    """Two sets; "clauses" carries the signal of set a, "kind_weights" changes nothing."""
    out = {}
    for name, seed in (("a", 1), ("b", 2)):
        rng = random.Random(seed)
        groups = [i // 2 for i in range(300)]
        labels = [rng.randint(0, 1) for _ in groups]
        noise = [rng.random() for _ in groups]
        signal = config.options.clauses or name == "b"
        scores = [0.5 * y + 0.5 * n if signal else n for y, n in zip(labels, noise, strict=True)]
        out[name] = (Scored(labels, scores, grouped_folds(groups, 5, 0)), "context_entailment")
    return out


def test_ablation_keeps_a_rule_that_helps_and_drops_one_that_does_nothing() -> None:
    decisions = cv.ablate(cv.FULL, ["clauses", "kind_weights"], _synthetic_sets, 5)
    effects, kept = decisions["clauses"]
    assert kept and effects["a"].balanced_accuracy[0] is not None and effects["a"].balanced_accuracy[0] > 0.2
    assert effects["b"].balanced_accuracy == (0.0, 0.0)
    assert decisions["kind_weights"][1] is False


def _duplicated(config: cv.Config) -> dict[str, tuple[Scored, str]]:
    """ "clauses" and "sharpen" each carry the same signal: useless alone, needed together."""
    sets = _synthetic_sets(cv.FULL)
    if config.options.clauses or config.options.sharpen:
        return sets
    return _synthetic_sets(config.without("clauses"))


def test_elimination_keeps_one_of_two_duplicate_rules() -> None:
    decisions, dropped = cv.eliminate(cv.FULL, ["clauses", "sharpen", "kind_weights"], _duplicated, 5)
    assert not decisions["clauses"][1] and not decisions["sharpen"][1]  # each useless while the other is on
    assert "kind_weights" in dropped
    assert ("clauses" in dropped) != ("sharpen" in dropped)  # one of the two stays


def test_nested_selection_uses_training_folds_and_scores_every_outer_fold() -> None:
    results, dropped = cv.nested(cv.FULL, ["clauses", "kind_weights"], _synthetic_sets, 5)
    assert dropped == [["kind_weights"]] * 5
    assert [r.fold for r in results["a"]] == [0, 1, 2, 3, 4]
    assert sum(r.n for r in results["a"]) == 300
    assert all(r.balanced_accuracy is not None and r.balanced_accuracy > 0.7 for r in results["a"])


def test_config_switches_and_keys() -> None:
    off = cv.FULL.without("clauses").without("refusal:apology").without("exact_match")
    assert off.options.clauses is False and off.options.refusal_off == frozenset({"apology"})
    assert off.exact_match is False
    assert len({cv.FULL.key(), off.key(), cv.FULL.dropping(["clauses"]).key()}) == 3
    assert cv.FULL.dropping(["clauses"]).key() == cv.FULL.without("clauses").key()


def test_length_stratified_auc_discounts_what_length_alone_explains() -> None:
    from pipeline.metrics.classification import roc_auc

    rng = random.Random(3)
    lengths = [rng.randint(5, 200) for _ in range(1000)]
    # short answers are mostly the positives, as in HaluEval
    labels = [int(rng.random() < (0.8 if n < 60 else 0.2)) for n in lengths]
    by_length = [-float(n) for n in lengths]
    overall = roc_auc(labels, by_length)
    within = cv.length_stratified_auc(labels, by_length, lengths)
    assert overall is not None and within is not None
    assert overall > 0.7 and within < overall - 0.1
    noise = cv.length_stratified_auc(labels, [rng.random() for _ in lengths], lengths)
    assert noise is not None and abs(noise - 0.5) < 0.08
    truth = cv.length_stratified_auc(labels, [y + rng.random() for y in labels], lengths)
    assert truth is not None and truth > 0.95  # a score that sees the label is not discounted


def test_absent_data_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cv.main(["--data", str(tmp_path / "nope")]) == 0
    assert "nothing to measure" in capsys.readouterr().err


def test_end_to_end_on_a_tiny_set(tmp_path: Path) -> None:
    context = "Jonathan Stark won two Grand Slam doubles titles in 1994 and 1995."
    lines = []
    for i in range(8):
        q = f"Question {i}?"
        lines.append(
            {
                "id": f"r{i}",
                "question": q,
                "contexts": [f"{i} {context}"],
                "answer": "Jonathan Stark",
                "labels": {"grounded": 1},
            }
        )
        wrong = "Henri Leconte won seven titles in 1988."
        lines.append({"id": f"h{i}", "question": q, "contexts": [f"{i} {context}"], "answer": wrong,
                      "labels": {"grounded": 0}})  # fmt: skip
    data = tmp_path / "data"
    data.mkdir()
    (data / "tiny_grounding.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = tmp_path / "cv.md"
    argv = ["--data", str(data), "--k", "2", "--out", str(out), "--no-nested", "--cache", str(tmp_path / "c")]
    assert cv.main(argv) == 0
    assert len(list((tmp_path / "c").glob("tiny_grounding-*.json"))) >= len(cv.ALL_SWITCHES)
    payload = json.loads(out.with_suffix(".json").read_text())
    assert payload["sets"]["tiny_grounding"] == {
        "score": "context_entailment", "groups": 8, "cases": 16, "label": "grounded"
    }  # fmt: skip
    folds = payload["cv"]["every rule on"]["tiny_grounding"]
    assert [f["balanced_accuracy"] for f in folds] == [1.0, 1.0]
    assert "clauses" in payload["ablation"] and "Ablation" in out.read_text()


def test_correctness_sets_carry_the_other_direction_as_a_line(tmp_path: Path) -> None:
    lines = [
        {"id": f"c{i}", "question": f"q{i // 2}", "contexts": [], "ground_truth": "Paris", "answer": "Paris",
         "labels": {"correct": i % 2}}
        for i in range(6)
    ]  # fmt: skip
    path = tmp_path / "correctness_tiny.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    primary, other = cv.load_sets(path, 2, 0)
    assert (primary.name, primary.score) == ("correctness_tiny", "answer_entails_ground_truth")
    assert (other.name, other.score) == (
        "correctness_tiny.ground_truth_entails_answer",
        "ground_truth_entails_answer",
    )
    assert other.folds == primary.folds and len(set(primary.groups)) == 3


def _tiny_grounding(tmp_path: Path) -> Path:
    context = "The battery has a two-year warranty and a 30-day return window."
    lines = []
    for i in range(8):
        q = f"Question {i}?"
        lines.append({"id": f"r{i}", "question": q, "contexts": [f"{i} {context}"],
                      "answer": "The warranty lasts 2 years.", "labels": {"grounded": 1}})  # fmt: skip
        lines.append({"id": f"h{i}", "question": q, "contexts": [f"{i} {context}"],
                      "answer": "The warranty lasts 5 years.", "labels": {"grounded": 0}})  # fmt: skip
    data = tmp_path / "data"
    data.mkdir()
    (data / "tiny_grounding.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return data


def test_quick_check_of_named_switches_against_a_baseline(tmp_path: Path) -> None:
    data = _tiny_grounding(tmp_path)
    common = ["--data", str(data), "--k", "2", "--cache", str(tmp_path / "c")]
    base_out = tmp_path / "base.md"
    assert cv.main([*common, "--switches", "exact_match", "--out", str(base_out)]) == 0
    out = tmp_path / "quick.md"
    argv = [
        *common,
        "--switches",
        "number_units",
        "--baseline",
        str(base_out.with_suffix(".json")),
        "--out",
        str(out),
    ]
    assert cv.main(argv) == 0
    payload = json.loads(out.with_suffix(".json").read_text())
    assert list(payload["cv"]) == [cv.DEFAULTS_BLOCK] and list(payload["ablation"]) == ["number_units"]
    # "2 years" against "two-year": the rule is what separates the right answer from the wrong one
    effect = payload["ablation"]["number_units"]["effects"]["tiny_grounding"]
    assert effect["balanced_accuracy"][0] > 0
    text = out.read_text()
    assert "against the baseline, threshold per set" in text
    assert "| +0.000 ± 0.000 | +0.000 ± 0.000 | +0.000, +0.000 |" in text
    assert "nested" not in text  # no elimination, no nested estimate


def test_quick_check_refuses_an_unknown_switch_or_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _tiny_grounding(tmp_path)
    assert cv.main(["--data", str(data), "--switches", "number_unit"]) == 2
    assert "unknown switch 'number_unit'" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert cv.main(["--data", str(data), "--baseline", str(bad)]) == 2
    assert "not a cv.json" in capsys.readouterr().err
