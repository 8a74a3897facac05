"""Rules of the dashboard's JavaScript (streams/dashboard/static): no import circle, every request through
``api`` (state.js), one ``missing``, the label kinds read in one place (labels.js); each rule shown to
catch a planted violation."""

from __future__ import annotations

import re
from pathlib import Path

STATIC = Path(__file__).resolve().parents[2] / "streams" / "dashboard" / "static"
IMPORT = re.compile(r'^import [^;]*? from "\./([a-z_]+\.js)";', re.MULTILINE)


def modules(root: Path = STATIC) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(root.glob("*.js"))}


def import_circles(sources: dict[str, str]) -> list[list[str]]:
    """Each import path that comes back to where it started (depth-first, one per back edge)."""
    graph = {name: IMPORT.findall(text) for name, text in sources.items()}
    found: list[list[str]] = []
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            found.append([*path[path.index(name) :], name])
            return
        if name in done:
            return
        for dep in graph.get(name, []):
            visit(dep, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    return found


def places(sources: dict[str, str], pattern: str) -> set[str]:
    return {name for name, text in sources.items() if re.search(pattern, text, re.MULTILINE)}


RULES = {
    "requests": (r"\bfetch\(|XMLHttpRequest", {"state.js"}),
    "missing": (r"^(export )?const missing\b|function missing\b", {"format.js"}),
    "label kinds": (r'"label-kinds"', {"labels.js"}),
}


def test_the_modules_import_no_circle() -> None:
    assert import_circles(modules()) == []


def test_each_concern_lives_in_one_module() -> None:
    sources = modules()
    for concern, (pattern, where) in RULES.items():
        assert places(sources, pattern) == where, concern


def test_the_rules_catch_planted_violations() -> None:
    planted = {
        "a.js": 'import { b } from "./b.js";\nconst missing = (v) => v == null;\n',
        "b.js": 'import { a } from "./a.js";\nfetch("api/x");\napi("label-kinds");\n',
        "c.js": 'import { a } from "./a.js";\n',
    }
    assert import_circles(planted) == [["a.js", "b.js", "a.js"]]
    assert places(planted, RULES["requests"][0]) == {"b.js"}
    assert places(planted, RULES["missing"][0]) == {"a.js"}
    assert places(planted, RULES["label kinds"][0]) == {"b.js"}
