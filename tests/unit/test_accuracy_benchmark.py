"""benchmarks/accuracy.py end to end with the lexical judge on a tiny labeled set (real subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import accuracy

CONTEXT = "Jonathan Stark won two Grand Slam doubles titles in 1994 and 1995."
LINES = [
    {"id": "r1", "question": "Who won?", "contexts": [CONTEXT], "answer": "Jonathan Stark",
     "labels": {"grounded": 1}, "peers": {"det": 1}},
    {"id": "h1", "question": "Who won?", "contexts": [CONTEXT],
     "answer": "Henri Leconte won seven Grand Slam titles in 1988.",
     "labels": {"grounded": 0}, "peers": {"det": 1}},
    {"id": "r2", "question": "When?", "contexts": [CONTEXT], "answer": "1994 and 1995",
     "labels": {"grounded": 1}, "peers": {"det": 0}},
    {"id": "h2", "question": "When?", "contexts": [CONTEXT], "answer": "He won them in 2003 in Paris.",
     "labels": {"grounded": 0}, "peers": {"det": 0}},
]  # fmt: skip


def test_table_for_a_labeled_set(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "tiny_grounding.jsonl").write_text("\n".join(json.dumps(x) for x in LINES) + "\n")
    table = tmp_path / "t.md"
    code = accuracy.main(
        ["--data", str(data), "--judges", "lexical", "--work", str(tmp_path / "w"), "--table", str(table)]
    )
    assert code == 0
    (row,) = json.loads(table.with_suffix(".json").read_text())["rows"]
    assert (row["set"], row["label"], row["judge"], row["score"]) == (
        "tiny_grounding",
        "grounded",
        "lexical",
        "context_entailment",
    )
    assert row["n"] == 4 and row["complete"] is True and row["threshold"] == 0.81
    assert row["roc_auc"] == 1.0 and row["balanced_accuracy"] == 1.0
    assert row["peers"] == {"det": pytest.approx(0.5)} and row["peer_cases"] == 4
    assert row["length_auc"] == 1.0  # the right answers are the short ones here too
    assert row["curve"]["0.50"] is not None
    text = table.read_text()
    assert "| tiny_grounding | grounded: context_entailment | lexical | 4 |" in text
    assert "Threshold curve" in text


def test_absent_data_dir_is_said_and_not_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert accuracy.main(["--data", str(tmp_path / "nowhere"), "--table", str(tmp_path / "t.md")]) == 0
    assert "no data directory" in capsys.readouterr().err
    assert not (tmp_path / "t.md").exists()


def test_partial_run_counts_what_finished(tmp_path: Path) -> None:
    data = tmp_path / "tiny_grounding.jsonl"
    data.write_text("\n".join(json.dumps(x) for x in LINES) + "\n")
    work = tmp_path / "w"
    accuracy.run_one(data, "lexical", None, work, "grounded", 0)
    evaluations = work / "lexical" / "tiny_grounding.evaluations.jsonl"
    kept = evaluations.read_text().splitlines()[:3]
    evaluations.write_text("\n".join(kept) + "\n")  # as if stopped after three
    (work / "lexical" / "tiny_grounding.json").unlink()  # a stopped run writes no report
    row = accuracy.tabulate(data, "lexical", work, accuracy.Settings())
    assert row is not None and row.n == 3 and row.complete is False and row.lines == 4


def test_balanced_sample_takes_each_class_in_turn(tmp_path: Path) -> None:
    data = tmp_path / "tiny_grounding.jsonl"
    rows = [LINES[1], LINES[3], LINES[0], LINES[2]]  # both negatives first
    data.write_text("\n".join(json.dumps(x) for x in rows) + "\n")
    sample = accuracy.balanced_sample(data, 2, tmp_path / "w")
    ids = [json.loads(t)["id"] for t in sample.read_text().splitlines()]
    assert ids == ["h1", "r1"]  # the first of each class, interleaved


def test_cv_option_runs_the_cross_validation(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    lines = [
        {**line, "id": f"{line['id']}-{i}", "question": f"{line['question']} {i}"}
        for i in range(3)
        for line in LINES
    ]
    (data / "tiny_grounding.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    work = tmp_path / "w"
    code = accuracy.main(["--data", str(data), "--cv", "--k", "2", "--work", str(work)])
    assert code == 0
    payload = json.loads((work / "cv.json").read_text())
    assert payload["k"] == 2 and payload["sets"]["tiny_grounding"]["cases"] == 12
    assert "nested" in " ".join(payload["cv"])
