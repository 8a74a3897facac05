"""The house rules docs/architecture.md states, read from the code (its AST) so the build enforces them:

- layers: groundwatch -> streams -> pipeline -> prompts -> schemas; a module imports only from its own
  layer or one below, and no two modules import each other, directly or around a loop (an import inside
  a function counts; one under ``if TYPE_CHECKING:`` does not);
- one clock: in streams/ and pipeline/ nothing reads the wall clock, the monotonic clock or sleeps but
  ``pipeline/clock.py``; a retry there waits on a clock it is given (``sleep=``); no model in schemas/
  that streams/ or pipeline/ build stamps a field from the wall clock by default (``default_factory``):
  the worker's clock sets it;
- one dead-letter builder: ``DeadLetter(`` only in ``streams.codec.dead_letter``;
- one error hierarchy: every exception class defined in the code derives from ``GroundwatchError``;
- short functions: none in any layer is over ``MAX_FUNCTION_LINES``
  lines (its signature, docstring and body), so each step has a name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("groundwatch", "streams", "pipeline", "prompts", "schemas")  # top to bottom
CLOCK = "pipeline/clock.py"
MAX_FUNCTION_LINES = 60
# what reads or waits on real time: only the clock may (pipeline/clock.py: Clock, Stopwatch)
TIME_CALLS = {
    ("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"),
    ("time", "monotonic"), ("time", "time"), ("time", "perf_counter"), ("time", "sleep"),
    ("time", "monotonic_ns"), ("time", "time_ns"), ("time", "perf_counter_ns"),
    ("asyncio", "sleep"), ("threading", "Timer"),
}  # fmt: skip
#: a timer on the event loop reads the loop's own (real) time
LOOP_TIMERS = {"call_later", "call_at"}
#: where real time is read on purpose, each with why the injected clock would be wrong there
REAL_TIME = {
    "streams/lifecycle.py": "the stop's deadline: a thread timer, which fires even when the loop is stuck",
    "pipeline/nli_grouping.py": "an NLI group's linger: milliseconds of the loop's own time between requests",
    "pipeline/refusal.py": "a refusal batch's linger: milliseconds of the loop's own time between requests",
    "streams/clickhouse/migrations.py": "the wait for another worker's migration lock, before a clock exists",
}


def sources(*packages: str) -> Iterator[tuple[str, ast.Module]]:
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def module_name(relative: str) -> str:
    parts = relative.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def type_checking_nodes(tree: ast.Module) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(sub) for stmt in node.body for sub in ast.walk(stmt))
    return skipped


def import_graph() -> dict[str, set[str]]:
    trees = {module_name(rel): (rel, tree) for rel, tree in sources(*LAYERS)}

    def known(name: str) -> str | None:
        while name and name not in trees:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, (rel, tree) in trees.items():
        skipped = type_checking_nodes(tree)
        package = module.split(".") if rel.endswith("__init__.py") else module.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                deps.update(d for a in node.names if (d := known(a.name)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                for alias in node.names:  # ``from pkg import module`` imports the module
                    target = f"{base}.{alias.name}"
                    dep = target if target in trees else known(base)
                    if dep:
                        deps.add(dep)
        deps.discard(module)
        graph[module] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_imports_only_go_down_the_layers() -> None:
    rank = {layer: n for n, layer in enumerate(LAYERS)}
    upward = [
        f"{module} -> {dep}"
        for module, deps in import_graph().items()
        for dep in sorted(deps)
        if rank[dep.split(".")[0]] < rank[module.split(".")[0]]
    ]
    assert upward == []


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_loop_and_only_a_loop() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> what it is, for the modules and classes that read time: ``import time as t`` gives
    ``t -> time``, ``from datetime import datetime as D`` gives ``D -> datetime``."""
    known = {"time", "datetime", "asyncio", "threading", "date"}
    names = {n: n for n in known}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in known:
                    names[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module == "datetime":
            for a in node.names:
                if a.name in ("datetime", "date"):
                    names[a.asname or a.name] = a.name
    return names


def time_reads(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Where a module reads real time or waits on it: ``datetime.now`` (called or passed along, through
    an alias or as ``datetime.datetime.now``), ``time.perf_counter``, ``time.sleep``, ``threading.Timer``,
    a loop's ``call_later``/``call_at``, ``from time import monotonic``."""
    aliases = _aliases(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = node.value
            if isinstance(owner, ast.Attribute) and isinstance(owner.value, ast.Name):
                if aliases.get(owner.value.id) == "datetime":  # datetime.datetime.now
                    owner = ast.Name(id=owner.attr)
            if isinstance(owner, ast.Name):
                what = (aliases.get(owner.id, owner.id), node.attr)
                if what in TIME_CALLS:
                    yield node.lineno, f"{what[0]}.{what[1]}"
            if node.attr in LOOP_TIMERS:
                yield node.lineno, f"loop.{node.attr}"
        elif isinstance(node, ast.ImportFrom) and node.module in {"time", "asyncio", "datetime", "threading"}:
            for alias in node.names:
                if (node.module, alias.name) in TIME_CALLS:
                    yield node.lineno, f"from {node.module} import {alias.name}"


def called(node: ast.Call) -> str | None:
    """The name a call calls: ``f(...)``, ``m.f(...)``; a model's ``M.model_validate(...)`` and
    ``M.model_construct(...)`` build an ``M``; ``M.model_validate_json`` decodes one."""
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        if func.attr in ("model_validate", "model_construct"):
            inner = func.value
            return (
                inner.id
                if isinstance(inner, ast.Name)
                else inner.attr
                if isinstance(inner, ast.Attribute)
                else None
            )
        return func.attr
    return None


def retries_without_a_clock(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and called(node) == "retry":
            if not any(k.arg == "sleep" for k in node.keywords):
                yield node.lineno, "retry(...) without sleep="


def test_time_is_read_from_the_clock_only() -> None:
    found = [
        f"{rel}:{line}: {what}"
        for rel, tree in sources("streams", "pipeline")
        if rel != CLOCK and rel not in REAL_TIME
        for line, what in time_reads(tree)
    ]
    unused = [
        rel for rel, tree in sources("streams", "pipeline") if rel in REAL_TIME and not any(time_reads(tree))
    ]
    assert unused == [], "listed in REAL_TIME but reading no real time"
    found += [
        f"{rel}:{line}: {what}"
        for rel, tree in sources("streams", "pipeline")
        for line, what in retries_without_a_clock(tree)
    ]
    assert found == []


def test_the_time_rule_sees_each_way_of_reading_time() -> None:
    code = ast.parse(
        "import asyncio, time\nfrom datetime import datetime\nfrom time import monotonic\n"
        "a = datetime.now()\nb = time.monotonic()\nsleep = asyncio.sleep\nretry(f, what='x')\n"
        "import time as t\nimport datetime as dt\nimport threading\nfrom datetime import datetime as D\n"
        "c = t.perf_counter()\nd = dt.datetime.now()\ne = D.utcnow()\nthreading.Timer(1, f)\n"
        "loop.call_later(1, f)\nt.sleep(1)\nm.retry(f)\n"
    )
    assert sorted(w for _, w in time_reads(code)) == sorted([
        "asyncio.sleep", "datetime.now", "from time import monotonic", "time.monotonic", "time.perf_counter",
        "datetime.now", "datetime.utcnow", "threading.Timer", "loop.call_later", "time.sleep",
    ])  # fmt: skip
    assert [w for _, w in retries_without_a_clock(code)] == ["retry(...) without sleep="] * 2


def clock_defaults(tree: ast.Module) -> Iterator[tuple[str, str]]:
    """(class, field) of each ``Field(default_factory=...)`` in a class body that reads real time."""
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value):
                continue
            for call in (n for n in ast.walk(stmt.value) if isinstance(n, ast.Call)):
                for keyword in call.keywords:
                    if keyword.arg == "default_factory" and any(True for _ in time_reads(keyword.value)):
                        yield cls.name, stmt.target.id


def built_by_the_worker() -> set[str]:
    """The names the worker's code calls (a model it builds is called by its class name)."""
    return {
        n.func.id
        for _, tree in sources("streams", "pipeline")
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


def test_models_the_worker_builds_take_their_time_from_its_clock() -> None:
    built = built_by_the_worker()
    found = [
        f"{rel}: {cls}.{field}"
        for rel, tree in sources("schemas")
        for cls, field in clock_defaults(tree)
        if cls in built
    ]
    assert found == []


def test_the_default_rule_sees_a_wall_clock_default() -> None:
    code = ast.parse(
        "class M(BaseModel):\n"
        "    at: datetime = Field(default_factory=lambda: datetime.now(UTC))\n"
        "    n: list[int] = Field(default_factory=list)\n"
        "    t: float = Field(default_factory=time.time, description='x')\n"
    )
    assert list(clock_defaults(code)) == [("M", "at"), ("M", "t")]
    assert {"Evaluation", "Label", "Alert"} <= built_by_the_worker()


def calls_of(name: str, tree: ast.AST) -> set[int]:
    """The lines that build (or call) ``name``: ``name(...)``, ``x.name(...)``, ``name.model_validate(...)``
    (decoding one from bytes, ``model_validate_json``, builds nothing new)."""
    return {n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and called(n) == name}


def test_dead_letters_are_built_in_one_place() -> None:
    built = {(rel, line) for rel, tree in sources(*LAYERS) for line in calls_of("DeadLetter", tree)}
    [codec] = [tree for rel, tree in sources("streams") if rel == "streams/codec.py"]
    [builder] = [n for n in ast.walk(codec) if isinstance(n, ast.FunctionDef) and n.name == "dead_letter"]
    inside = {("streams/codec.py", line) for line in calls_of("DeadLetter", builder)}
    assert inside, "streams.codec.dead_letter no longer builds the DeadLetter"
    assert built - inside == set()


def class_paths(
    tree: ast.AST, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], ast.ClassDef]]:
    """Every class with bases, nested ones too (in classes and functions), with its path of names."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.ClassDef):
            if node.bases:
                yield (*prefix, node.name), node
            yield from class_paths(node, (*prefix, node.name))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from class_paths(node, (*prefix, f"{node.name}()"))
        elif not isinstance(node, ast.expr):
            yield from class_paths(node, prefix)


def exception_classes() -> Iterator[tuple[str, str, type[BaseException] | None]]:
    """Each exception class (its module imported to see its bases' classes); a class inside a function
    cannot be reached so: it is yielded with None when one of its bases is named like an error."""
    import importlib

    for rel, tree in sources(*LAYERS):
        for path, node in class_paths(tree):
            if any(p.endswith("()") for p in path):
                if any(ast.unparse(b).split(".")[-1].endswith(("Error", "Exception")) for b in node.bases):
                    yield rel, ".".join(path), None
                continue
            value: object = importlib.import_module(module_name(rel))
            for name in path:
                value = getattr(value, name, None)
            if isinstance(value, type) and issubclass(value, BaseException):
                yield rel, ".".join(path), value


def test_every_error_raised_on_purpose_derives_from_groundwatch_error() -> None:
    from schemas.errors import GroundwatchError

    outside = [
        f"{rel}: {name}"
        for rel, name, cls in exception_classes()
        if cls is None or not issubclass(cls, GroundwatchError)
    ]
    assert outside == []


def test_the_exception_rule_sees_nested_classes() -> None:
    code = ast.parse(
        "class A(Base):\n    class B(ValueError): ...\n"
        "def f():\n    class C(RuntimeError): ...\n    class D: ...\n"
    )
    assert [".".join(p) for p, _ in class_paths(code)] == ["A", "A.B", "f().C"]


def long_functions(tree: ast.Module) -> Iterator[tuple[int, str, int]]:
    """(line, name, lines) of each function or method longer than ``MAX_FUNCTION_LINES``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                yield node.lineno, node.name, length


def test_no_function_is_over_sixty_lines() -> None:
    found = [
        f"{rel}:{line}: {name} ({length} lines)"
        for rel, tree in sources(*LAYERS)
        for line, name, length in long_functions(tree)
    ]
    assert found == []


def test_the_length_rule_counts_a_long_function_and_a_long_method() -> None:
    lines = [f"x{i} = {i}" for i in range(MAX_FUNCTION_LINES)]  # with the def: one line too many
    function = "def f():\n" + "".join(f"    {line}\n" for line in lines)
    method = "class C:\n    async def m(self):\n" + "".join(f"        {line}\n" for line in lines)
    short = "def g():\n" + "".join(f"    {line}\n" for line in lines[1:])
    code = ast.parse(function + method + short)
    assert [(name, length) for _, name, length in long_functions(code)] == [
        ("f", MAX_FUNCTION_LINES + 1),
        ("m", MAX_FUNCTION_LINES + 1),
    ]


#: the one reader of JSON from outside (size, depth, NaN, encoding): schemas.json_input
JSON_READER = "schemas/json_input.py"
#: where JSON is parsed otherwise, each with why it is not outside input
TRUSTED_JSON = {
    "streams/status.py": "the worker's own status file",
    "streams/clickhouse/labels.py": "a labels row's statements, written by this code",
    "pipeline/judges/llm_judge.py": "the judge cache's entries, written by this code",
    "pipeline/conversation_judge.py": "the judge cache's entries, written by this code",
    "pipeline/llm/http.py": "judge responses through orjson (speed; it refuses NaN and deep nesting itself)",
    "prompts/__init__.py": "a pydantic model's own JSON schema",
    "schemas/settings/source.py": "a setting's value, checked to be JSON before pydantic reads it",
    "groundwatch/demo_history.py": "the bundled sample",
    "groundwatch/commands/demo_cmd.py": "the bundled sample",
}


def json_parses(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) of each JSON parse: ``json.loads``/``json.load`` and their aliases, ``orjson.loads``,
    a ``JSONDecoder``."""
    aliases = {"json": "json", "orjson": "orjson"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in ("json", "orjson"):
                    aliases[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module in ("json", "orjson"):
            for a in node.names:
                if a.name in ("loads", "load", "JSONDecoder"):
                    yield node.lineno, f"from {node.module} import {a.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id)
            if module is not None and node.attr in ("loads", "load", "JSONDecoder"):
                yield node.lineno, f"{module}.{node.attr}"


def test_json_from_outside_is_read_by_one_reader() -> None:
    found = [
        f"{rel}:{line}: {what}"
        for rel, tree in sources(*LAYERS)
        if rel != JSON_READER and rel not in TRUSTED_JSON
        for line, what in json_parses(tree)
    ]
    assert found == []
    assert any(True for rel, tree in sources("schemas") if rel == JSON_READER for _ in json_parses(tree))


def test_the_json_rule_sees_aliases_attribute_calls_and_decoders() -> None:
    code = ast.parse(
        "import json as j\nimport orjson\nfrom json import loads as parse\n"
        "a = j.loads(x)\nb = orjson.loads(x)\nc = json.JSONDecoder()\nd = json.dumps(x)\n"
    )
    assert sorted(w for _, w in json_parses(code)) == [
        "from json import loads",
        "json.JSONDecoder",
        "json.loads",
        "orjson.loads",
    ]


#: the one UTC helper (schemas/utc.py): a naive time read as UTC, an aware one converted
UTC_HELPER = "schemas/utc.py"
#: builtin exceptions a module may not raise on purpose (a GroundwatchError says what went wrong); a
#: validator's ValueError and TypeError, the system's OSError, AssertionError and NotImplementedError may be
BROAD_RAISES = {"Exception", "RuntimeError", "BaseException", "LookupError"}


def utc_conversions(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """``x.astimezone(...)`` and ``x.replace(tzinfo=...)``: a UTC helper written inline."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "astimezone":
                yield node.lineno, "astimezone"
            elif node.func.attr == "replace" and any(k.arg == "tzinfo" for k in node.keywords):
                yield node.lineno, "replace(tzinfo=...)"


def broad_raises(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name) and target.id in BROAD_RAISES:
                yield node.lineno, f"raise {target.id}"


def test_one_utc_helper_and_no_broad_raise() -> None:
    found = [
        f"{rel}:{line}: {what}"
        for rel, tree in sources(*LAYERS)
        for line, what in [*(utc_conversions(tree) if rel != UTC_HELPER else ()), *broad_raises(tree)]
    ]
    assert found == []


def test_the_utc_and_raise_rules_catch_planted_violations() -> None:
    code = ast.parse(
        "a = ts.astimezone(UTC)\nb = ts.replace(tzinfo=UTC)\nc = ts.replace(year=1)\n"
        "raise RuntimeError('x')\nraise Exception\nraise ValueError('validator')\n"
    )
    assert [w for _, w in utc_conversions(code)] == ["astimezone", "replace(tzinfo=...)"]
    assert [w for _, w in broad_raises(code)] == ["raise RuntimeError", "raise Exception"]


#: the one pairing rule for tool calls and their results (chat messages and OpenTelemetry alike)
PAIRING = "schemas/tool_pairing.py"


def call_id_matches(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Where a call id decides something: compared (``==``, ``in``...) or used as a key (``x[call_id]``,
    ``{s.call_id ...}``); reading one, passing it on or asking whether there is one (``is None``) is not
    matching."""

    def names_call_id(node: ast.AST) -> bool:
        return any(
            (isinstance(n, ast.Attribute) and n.attr in ("call_id", "tool_call_id"))
            or (isinstance(n, ast.Name) and n.id in ("call_id", "tool_call_id"))
            for n in ast.walk(node)
        )

    for node in ast.walk(tree):
        presence = isinstance(node, ast.Compare) and all(isinstance(o, ast.Is | ast.IsNot) for o in node.ops)
        if isinstance(node, ast.Compare) and not presence and names_call_id(node):
            yield node.lineno, f"compares {ast.unparse(node)}"
        elif isinstance(node, ast.Subscript) and names_call_id(node.slice):
            yield node.lineno, f"keys {ast.unparse(node)}"
        elif isinstance(node, ast.SetComp | ast.DictComp) and names_call_id(
            node.elt if isinstance(node, ast.SetComp) else node.key
        ):
            yield node.lineno, f"collects {ast.unparse(node)[:60]}"


def test_tool_results_are_paired_with_their_calls_by_one_rule() -> None:
    found = [
        f"{rel}:{line}: {what}"
        for rel, tree in sources(*LAYERS)
        if rel != PAIRING
        for line, what in call_id_matches(tree)
    ]
    assert found == []
    assert any(True for rel, tree in sources("schemas") if rel == PAIRING for _ in call_id_matches(tree))


def test_the_pairing_rule_sees_a_second_pairing() -> None:
    code = ast.parse(
        "if call_id in self.by_id:\n    slot = self.by_id.pop(call_id)\n"
        "step = steps[result.call_id]\nids = {s.call_id for s in given}\nsame = a.call_id == b.tool_call_id\n"
        "found = ResultFound(call_id, name, text)\nx = step.call_id\nif m.tool_call_id is not None: pass\n"
    )
    assert [w.split()[0] for _, w in call_id_matches(code)] == ["compares", "keys", "collects", "compares"]


def imports_of_test_modules(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Imports of another test module (``tests.<dir>.test_*``): a shared helper belongs in a helper
    module (``tests/fixtures/``, a directory's ``helpers``/``conftest``), not in a test."""
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "tests" and any(p.startswith("test_") for p in parts[1:]):
                yield node.lineno, name
                break


def test_no_test_imports_another_test_module() -> None:
    found = [
        f"{rel}:{line}: {what}"
        for rel, tree in sources("tests")
        for line, what in imports_of_test_modules(tree)
    ]
    assert found == []


def test_the_test_import_rule_sees_both_forms() -> None:
    code = ast.parse(
        "from tests.unit.test_a import helper\nfrom tests.unit import test_b\nimport tests.unit.test_c\n"
        "from tests.fixtures.store import store_settings\nfrom tests.integration import helpers\n"
    )
    assert [w for _, w in imports_of_test_modules(code)] == [
        "tests.unit.test_a", "tests.unit.test_b", "tests.unit.test_c",
    ]  # fmt: skip
