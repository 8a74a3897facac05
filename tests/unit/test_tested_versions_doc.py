"""The versions the contract tests install (Makefile, the otel-contract extra) are those the README's "Agents
and tools" table and docs/input.md's OpenTelemetry table name: a pin bumped without the docs fails here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# pins that are plumbing, not a tested framework or instrumentation
NOT_IN_TABLE = {
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp-proto-common",
    "openai",
    "opentelemetry-util-genai",
}


def _makefile_variable(name: str) -> str:
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    match = re.search(rf"^{name} :=(.*)$", text, re.MULTILINE)
    assert match, f"{name} is not set in the Makefile"
    return match.group(1)


def _pins(spec: str) -> set[tuple[str, str]]:
    return set(re.findall(r"([A-Za-z0-9_.\-]+)(?:\[[a-z,]+\])?==([A-Za-z0-9.]+)", spec))


def _tested_pins(variables: tuple[str, ...]) -> set[tuple[str, str]]:
    pins: set[tuple[str, str]] = set()
    for variable in variables:
        pins |= _pins(_makefile_variable(variable))
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for requirement in extras["project"]["optional-dependencies"]["otel-contract"]:
        pins |= _pins(requirement)
    return {(name, version) for name, version in pins if name not in NOT_IN_TABLE}


def _section(path: Path, heading: str) -> str:
    text = path.read_text(encoding="utf-8")
    match = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"{path.name} has no section {heading!r}"
    return match.group(1)


def _table_rows(section: str) -> list[str]:
    """The table's rows, a row whose first cell is "same" prefixed with the row it repeats."""
    rows: list[str] = []
    for line in section.splitlines():
        if not line.startswith("|"):
            continue
        if line.startswith("| same |") and rows:
            line = rows[-1].split(" |")[0] + " " + line
        rows.append(line)
    return rows


def _names(row: str, name: str, version: str) -> bool:
    return (
        re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", row, re.IGNORECASE) is not None
        and re.search(rf"(?<![\w.]){re.escape(version)}(?![\w.])", row) is not None
    )


def test_the_makefile_pins_are_read() -> None:
    pins = _tested_pins(("AGENTS_OPENAI2", "AGENTS_OPENAI3", "OPENLLMETRY_054"))
    assert ("langgraph", "1.2.24") in pins
    assert ("opentelemetry-instrumentation-openai", "0.54.0") in pins
    assert ("opentelemetry-instrumentation-openai", "0.62.4") in pins
    assert any(name == "pydantic-ai-slim" for name, _ in pins)


# the README's table is the agent frameworks'; docs/input.md's also has the RAG-only OpenLLMetry 0.54
@pytest.mark.parametrize(
    ("document", "heading", "variables"),
    [
        ("README.md", "Agents and tools", ("AGENTS_OPENAI2", "AGENTS_OPENAI3")),
        ("docs/input.md", "OpenTelemetry input", ("AGENTS_OPENAI2", "AGENTS_OPENAI3", "OPENLLMETRY_054")),
    ],
)
def test_every_tested_package_and_version_is_in_the_table(
    document: str, heading: str, variables: tuple[str, ...]
) -> None:
    rows = _table_rows(_section(ROOT / document, heading))
    missing = [
        f"{name} {version}"
        for name, version in sorted(_tested_pins(variables))
        if not any(_names(row, name, version) for row in rows)
    ]
    assert not missing, f"{document} ({heading}) does not name the tested versions: {', '.join(missing)}"
