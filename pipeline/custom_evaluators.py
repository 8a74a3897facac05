"""Your own evaluators (schemas.evaluators) run on an interaction, beside the core verdicts (pure, async).

``load_evaluators`` reads and validates the evaluators file, imports each python evaluator's function and
installs the evaluators' metrics in the catalogue (``schemas.metrics.install_custom``) and their label
kinds (``schemas.label_kinds.install_custom_kinds``, ``install_spec``); any problem is a
``ConfigError`` of one line naming the file, the evaluator and the field.

``CustomEvaluators.run`` scores one interaction with every evaluator whose scope, conditions and sample
rate take it, concurrently, and never raises: an evaluator that fails (an exception, a timeout, a judge
that gave up, an answer that is not a score) gives ``CustomScore(score=None, reason=...)``, counted per
evaluator (``failures``). Kinds:

- pattern: compiled once with the ``regex`` module (Python's ``re`` syntax); the first ``max_chars`` of
  each field are searched (one that is absent, no ground truth, as empty text) in a thread that releases
  the GIL while it matches (``concurrent=True``), each search stopped at its share of the evaluator's
  ``timeout_s``: a pattern that backtracks without end never holds the event loop, and gives a missing
  score (reason timeout);
- python: the function runs in a subprocess of the evaluator's own pool (``pipeline.evaluator_sandbox``,
  ``evaluators.python_processes`` each) on a copy of the interaction, under its ``timeout_s``; a call past
  it has its process killed, and an exception, ``SystemExit``, a crash or a result that is not a score
  costs that call's score only, never another evaluator's (whose processes are its own);
- rubric: rendered from prompts/rubric.md and sent through the judge's ``JudgeClient`` (retries, request
  slots, cost), its verdict cached by content with the evaluator's name and version in the key. Needs an
  LLM judge (openai, local, or a cascade's LLM); with the lexical judge its score is missing.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, cast

import regex
from pydantic import BaseModel, Field

from pipeline.assemble import with_calls
from pipeline.clock import SYSTEM_CLOCK, Clock, wait_all, within
from pipeline.evaluator_sandbox import EvaluatorSandbox
from pipeline.judges.base import Judge
from pipeline.llm.cache import cache_key
from pipeline.metrics.agreement import Agreement, LabeledCase, agreement
from pipeline.paced_log import PacedLog
from pipeline.rules_file import read_rules_file
from pipeline.sampling import conditions_hold, stable_fraction
from prompts import Prompts, PronounTurn, RubricInput, RubricPassFailAnswer, RubricScoreAnswer
from schemas.errors import ConfigError
from schemas.evaluation import Evaluation
from schemas.evaluators import (
    CUSTOM_PREFIX,
    Evaluator,
    EvaluatorField,
    EvaluatorsFile,
    PatternEvaluator,
    PythonEvaluator,
    RubricEvaluator,
)
from schemas.interaction import Interaction
from schemas.label_kinds import install_custom_kinds
from schemas.metrics import install_custom
from schemas.results import CustomScore, JudgeCall
from schemas.settings import EvaluatorsSettings

log = logging.getLogger(__name__)

PythonFunction = Callable[[Interaction], Any]
REASON_CHARS = 400  # a reason longer than this is cut
LOG_EVERY_S = 60.0  # an evaluator's failures are logged at most once a minute each


def install_from_settings(settings: EvaluatorsSettings) -> None:
    """The evaluators file's metrics in the catalogue, for a command that reads them (report, dashboard,
    export) without running the evaluators (their functions are not imported); without a file, none is
    (an earlier file's metrics leave the catalogue)."""
    if settings.file is None:
        install_spec(None)
    else:
        load_evaluators(settings.file, functions=False)


def open_custom(
    settings: EvaluatorsSettings, judge: Judge | None, clock: Clock = SYSTEM_CLOCK
) -> CustomEvaluators | None:
    """The custom evaluators of ``evaluators.file`` (installed in the catalogue), or None without one
    (and then no custom metric is in the catalogue, whatever an earlier file installed)."""
    if settings.file is None:
        install_spec(None)
        return None
    return CustomEvaluators(load_evaluators(settings.file), settings, judge, clock=clock)


def load_evaluators(path: Path, *, install: bool = True, functions: bool = True) -> LoadedEvaluators:
    """Read, validate and (``functions``) import the evaluators file; with ``install``, its metrics join
    the catalogue. Raises ConfigError: ``evaluators file F: evaluator 'name' (evaluators.N) field: why``."""
    where = f"evaluators file {path}"
    try:
        spec = read_rules_file(path, EvaluatorsFile, "evaluators file", key="evaluators")
    except ConfigError as exc:
        raise ConfigError(_name_the_evaluator(str(exc), path)) from None
    imported: dict[str, PythonFunction] = {}
    folder = str(path.resolve().parent)
    for i, ev in enumerate(spec.evaluators):
        if functions and isinstance(ev, PythonEvaluator):
            if folder not in sys.path:
                sys.path.insert(0, folder)
            try:
                imported[ev.name] = import_function(ev.function)
            except ConfigError as exc:
                raise ConfigError(
                    f"{where}: evaluator {ev.name!r} (evaluators.{i}) function: {exc}"
                ) from None
    loaded = LoadedEvaluators(spec, imported, folder)
    if install:
        install_spec(spec)
    return loaded


def install_spec(spec: EvaluatorsFile | None) -> None:
    """The evaluators' metrics in the catalogue and their label kinds (``custom.<name>``) among the
    label kinds, together; None: none (an earlier file's leave both)."""
    install_custom(spec.metrics() if spec is not None else ())
    install_custom_kinds(
        spec.label_targets() if spec is not None else (), spec.score_names() if spec is not None else ()
    )


def _name_the_evaluator(message: str, path: Path) -> str:
    """``evaluators.2.python.timeout_s: ...`` -> ``evaluator 'slow' (evaluators.2) timeout_s: ...``."""
    try:
        import yaml

        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except Exception:
        return message
    entries = raw.get("evaluators") if isinstance(raw, dict) else raw
    if not isinstance(entries, list):
        return message

    def name(m: re.Match[str]) -> str:
        i = int(m.group(1))
        entry = entries[i] if i < len(entries) else None
        who = entry.get("name") if isinstance(entry, dict) else None
        rest = m.group(3) or ""
        label = f"evaluator {who!r} (evaluators.{i})" if who else f"evaluators.{i}"
        return f"{label} {rest.lstrip('.')}".rstrip() + ":" if rest else f"{label}:"

    return re.sub(r"evaluators\.(\d+)(\.(?:pattern|python|rubric))?((?:\.[\w-]+)*):", name, message)


def import_function(spec: str) -> PythonFunction:
    """``module:function`` imported; ConfigError when it cannot be, or is not a callable of one argument."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # a module that exits on import is a bad file, not a stop
        raise ConfigError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    fn = getattr(module, attr, None)
    if fn is None or not callable(fn):
        raise ConfigError(f"module {module_name!r} has no function {attr!r}")
    if inspect.iscoroutinefunction(fn):
        raise ConfigError(f"{spec} is async: give a plain function (it runs in a subprocess)")
    try:
        inspect.signature(fn).bind(None)
    except TypeError:
        raise ConfigError(f"{spec} must take one argument (the interaction)") from None
    except ValueError:  # no signature to read (a builtin): call it and see
        pass
    return cast(PythonFunction, fn)


class LoadedEvaluators:
    """A validated evaluators file, its python evaluators' functions (imported once to check them; they
    run in subprocesses) and its folder (on the subprocesses' import path)."""

    def __init__(
        self, spec: EvaluatorsFile, functions: Mapping[str, PythonFunction], folder: str = "."
    ) -> None:
        self.spec = spec
        self.functions = dict(functions)
        self.folder = folder

    @property
    def evaluators(self) -> list[Evaluator]:
        return list(self.spec.evaluators)


def applies(ev: Evaluator, interaction: Interaction) -> bool:
    """Whether an evaluator scores this interaction: its scope, its conditions and its sample rate."""
    if ev.app is not None and ev.app != interaction.app:
        return False
    if ev.model is not None and ev.model != interaction.model:
        return False
    if not conditions_hold(ev.when, interaction):
        return False
    return ev.sample_rate >= 1.0 or stable_fraction(interaction.interaction_id, ev.name) < ev.sample_rate


def field_text(interaction: Interaction, name: EvaluatorField) -> str:
    """A field as a pattern searches it: contexts and history joined by newlines; an absent one ''."""
    if name == "answer":
        return interaction.answer
    if name == "question":
        return interaction.question
    if name == "ground_truth":
        return interaction.ground_truth or ""
    if name == "contexts":
        return "\n".join(p.text for p in interaction.contexts)
    return "\n".join(m.content for m in interaction.history)


class _Pattern:
    """An evaluator's patterns and words, compiled once with the ``regex`` module: each search is given
    its share of ``timeout_s`` (a catastrophic backtracking stops there), releases the GIL while it
    matches, and reads the first ``max_chars`` of a field."""

    def __init__(self, ev: PatternEvaluator) -> None:
        self.ev = ev
        flags = 0 if ev.case_sensitive else regex.IGNORECASE
        self.regexes = [regex.compile(p, flags) for p in ev.patterns]
        if ev.words:
            words = "|".join(regex.escape(w.strip()) for w in ev.words)
            self.regexes.append(regex.compile(rf"(?<!\w)(?:{words})(?!\w)", flags))
        self.timeout_s = ev.timeout_s / (len(self.regexes) * len(ev.searched))

    def score(self, interaction: Interaction) -> CustomScore:
        """The evaluator's score; TimeoutError (the ``regex`` module's) when a search runs out of time."""
        for name in self.ev.searched:
            text = field_text(interaction, name)[: self.ev.max_chars]
            for compiled in self.regexes:
                m = compiled.search(text, timeout=self.timeout_s, concurrent=True)
                if m is not None:
                    found = f"{name}: {m.group(0)[:80]!r}"
                    flagged = self.ev.flag_when == "any"
                    return CustomScore(
                        score=float(flagged), reason=f"matched {found}", version=self.ev.version
                    )
        flagged = self.ev.flag_when == "none"
        return CustomScore(score=float(flagged), reason="no match", version=self.ev.version)


class CustomEvaluators:
    """Runs the evaluators of a file on interactions; one instance serves many concurrent ``run`` calls.
    ``judge``: the core judge, whose LLM client and cache the rubrics use. ``failures``: evaluator ->
    scores missing so far, ``failures_by_kind``: (evaluator, kind) -> the same by the first word of the
    reason (what the dashboard and Prometheus count come from the stored rows). A failure is logged in
    one WARNING line naming the evaluator and its reason, at most once a ``LOG_EVERY_S`` per evaluator
    (with the count of the others since)."""

    def __init__(
        self,
        loaded: LoadedEvaluators,
        settings: EvaluatorsSettings,
        judge: Judge | None = None,
        prompts: Prompts | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.loaded = loaded
        self.settings = settings
        self.judge = judge
        self.llm = llm_of(judge)
        rubrics = any(isinstance(e, RubricEvaluator) for e in loaded.evaluators)
        self.prompts = (prompts or Prompts()) if rubrics else None
        self._patterns = {e.name: _Pattern(e) for e in loaded.evaluators if isinstance(e, PatternEvaluator)}
        # a pool of processes per python evaluator: one that spins or hangs holds its own processes only
        self._sandboxes = {
            e.name: EvaluatorSandbox(loaded.folder, settings.python_processes, settings.python_memory_mb)
            for e in loaded.evaluators
            if isinstance(e, PythonEvaluator)
        }
        for sandbox in self._sandboxes.values():
            sandbox.start()
        self.clock = clock
        self.failures: Counter[str] = Counter()
        self.failures_by_kind: Counter[tuple[str, str]] = Counter()
        self._paced = PacedLog(LOG_EVERY_S, clock)  # one line per evaluator at most once a LOG_EVERY_S

    def __bool__(self) -> bool:
        return bool(self.loaded.evaluators)

    async def run_bounded(
        self, interaction: Interaction, core: asyncio.Future[Any]
    ) -> tuple[dict[str, CustomScore], list[JudgeCall]]:
        """``run`` started beside the core verdicts (``core``): once the core is done, the evaluators
        still running get ``wait_after_core_s`` more; those past it are missing (reason timeout)."""
        chosen = [e for e in self.loaded.evaluators if applies(e, interaction)]
        if not chosen:
            return {}, []
        scores: dict[str, CustomScore] = {}
        calls: list[JudgeCall] = []
        waiting = list(chosen)
        tasks = [asyncio.ensure_future(self._one(e, interaction)) for e in waiting]
        try:
            await asyncio.wait([core])
            if tasks and not core.cancelled() and core.exception() is None:
                await wait_all(self.clock, tasks, self.settings.wait_after_core_s)
        finally:
            late = [task for task in tasks if not task.done()]
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        for ev, task in zip(waiting, tasks, strict=True):
            if task.cancelled():
                wait = self.settings.wait_after_core_s
                scores[ev.name] = self.missing(ev, f"timeout: not done {wait:g} s after the core verdicts")
                continue
            score, call = task.result()
            scores[ev.name] = score
            if call is not None:
                calls.append(call)
        return {e.name: scores[e.name] for e in chosen}, calls

    async def run(self, interaction: Interaction) -> tuple[dict[str, CustomScore], list[JudgeCall]]:
        """Every evaluator that applies, concurrently: name -> score (or why it is missing), and the judge
        calls the rubrics made. Never raises (a cancellation goes through)."""
        chosen = [e for e in self.loaded.evaluators if applies(e, interaction)]
        if not chosen:
            return {}, []
        outcomes = await asyncio.gather(*(self._one(e, interaction) for e in chosen))
        scores: dict[str, CustomScore] = {}
        calls: list[JudgeCall] = []
        for ev, (score, call) in zip(chosen, outcomes, strict=True):
            scores[ev.name] = score
            if call is not None:
                calls.append(call)
        return scores, calls

    def missing(self, ev: Evaluator, reason: str) -> CustomScore:
        """No score from ``ev``, for ``reason`` (its first word, before a colon, is the kind): counted,
        and logged in one line per evaluator at most once a ``LOG_EVERY_S``."""
        missing = CustomScore(score=None, reason=reason[:REASON_CHARS], version=ev.version)
        self.failures[ev.name] += 1
        self.failures_by_kind[(ev.name, missing.failure_kind or "")] += 1
        held = self._paced.due(ev.name)
        if held is not None:
            more = f" ({held} more failures of it since the last line)" if held else ""
            log.warning("custom evaluator %s gave no score: %s%s", ev.name, reason[:REASON_CHARS], more)
        return missing

    def _pattern(self, ev: PatternEvaluator, interaction: Interaction) -> CustomScore:
        try:
            return self._patterns[ev.name].score(interaction)
        except TimeoutError:
            return self.missing(ev, f"timeout: its patterns searched over {ev.timeout_s:g} s")
        except Exception as exc:  # MemoryError, RecursionError
            return self.missing(ev, f"error: {type(exc).__name__}: {exc}")

    async def _one(self, ev: Evaluator, interaction: Interaction) -> tuple[CustomScore, JudgeCall | None]:
        try:
            if isinstance(ev, PatternEvaluator):
                return await asyncio.to_thread(self._pattern, ev, interaction), None
            if isinstance(ev, PythonEvaluator):
                return await self._python(ev, interaction), None
            return await self._rubric(ev, interaction)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an evaluator never fails the interaction
            return self.missing(ev, f"error: {type(exc).__name__}: {exc}"), None

    async def _python(self, ev: PythonEvaluator, interaction: Interaction) -> CustomScore:
        sandbox = self._sandboxes[ev.name]
        result = await sandbox.score(ev.function, interaction, ev.output == "pass_fail", ev.timeout_s)
        if result.score is None:
            return self.missing(ev, result.reason)
        return CustomScore(score=result.score, reason=result.reason[:REASON_CHARS], version=ev.version)

    async def _rubric(
        self, ev: RubricEvaluator, interaction: Interaction
    ) -> tuple[CustomScore, JudgeCall | None]:
        if self.llm is None or self.prompts is None:
            return self.missing(ev, "no LLM judge: a rubric needs judge.kind openai, local or cascade"), None
        client, cache, model = self.llm
        inp = rubric_input(ev, interaction)
        prompt = self.prompts.rubric(inp, ev.output)
        key = cache_key("rubric", f"{prompt.version}:{ev.identity}", model, ev.output, inp.model_dump_json())
        if cache is not None:
            (hit,) = await cache.get_many([key])
            if hit is not None:
                call = JudgeCall(
                    stage="custom", judge=client.judge_name, model=model, cached=True, attempts=0
                )
                return _rubric_score(ev, prompt.output_model.model_validate_json(hit)), call
        try:
            answer, call = await within(self.clock, ev.timeout_s, client.complete(prompt, stage="custom"))
        except TimeoutError:
            return self.missing(ev, f"timeout: the judge took over {ev.timeout_s:g} s"), None
        if cache is not None:
            await cache.put_many([(key, answer.model_dump_json())])
        return _rubric_score(ev, answer), call

    def close(self) -> None:
        """Kill the python evaluators' subprocesses (a call still running gets no score)."""
        for sandbox in self._sandboxes.values():
            sandbox.close()


def _rubric_score(ev: RubricEvaluator, answer: Any) -> CustomScore:
    if isinstance(answer, RubricScoreAnswer):
        score = (answer.score - 1) / 4.0
    elif isinstance(answer, RubricPassFailAnswer):
        score = 1.0 if answer.verdict == "pass" else 0.0
    else:  # pragma: no cover - the prompt's output model is one of the two
        raise TypeError(type(answer).__name__)
    return CustomScore(score=score, reason=answer.reason[:REASON_CHARS], version=ev.version)


def rubric_input(ev: RubricEvaluator, interaction: Interaction) -> RubricInput:
    """What a rubric shows the judge: the fields it names that the interaction has."""
    chosen = set(ev.fields)
    return RubricInput(
        instructions=ev.instructions,
        question=interaction.question if "question" in chosen else None,
        history=[
            PronounTurn(role=m.role, text=m.content)
            for m in interaction.history
            if m.role in ("user", "assistant")
        ]
        if "history" in chosen and interaction.history
        else None,
        contexts=[p.text for p in interaction.contexts] if "contexts" in chosen else None,
        answer=interaction.answer if "answer" in chosen else None,
        ground_truth=interaction.ground_truth if "ground_truth" in chosen else None,
    )


def llm_of(judge: Judge | None) -> tuple[Any, Any, str] | None:
    """(JudgeClient, verdict cache, model id) of the judge's LLM: an LLM judge's own, a cascade's LLM's."""
    for candidate in (judge, getattr(judge, "llm", None)):
        client = getattr(candidate, "client", None)
        if client is not None and hasattr(client, "complete"):
            return client, getattr(candidate, "cache", None), str(client.model_id)
    return None


def with_custom(
    evaluation: Evaluation, scores: Mapping[str, CustomScore], calls: list[JudgeCall]
) -> Evaluation:
    """The evaluation with its custom scores, and the rubrics' judge calls in its calls, tokens and cost."""
    if not scores and not calls:
        return evaluation
    return with_calls(evaluation, calls, custom={**evaluation.custom, **scores})


class CustomSummary(BaseModel):
    """One custom evaluator over a run (``groundwatch eval --evaluators``): its metric's value, how many
    it scored and failed to, the commonest reasons of its failures and a few of its scores' reasons."""

    metric: str = Field(description="custom.<name>")
    kind: str = Field(description="rate or mean")
    version: str
    value: float | None = Field(description="the rate of 1s (a flag, a pass) or the mean score")
    scored: int
    missing: int
    missing_reasons: dict[str, int] = Field(default_factory=dict, description="why, with counts (top 5)")
    reasons: list[str] = Field(default_factory=list, description="reasons of up to 5 flagged or low scores")
    agreement: Agreement | None = Field(
        None,
        description="against the lines' labels 'custom.<name>' (1: the evaluator should give 1, a flag or a "
        "pass; a score counts 1 from 0.5), with 95 % bootstrap intervals by conversation; None without "
        "labels",
    )


def summarise(loaded: LoadedEvaluators, evaluations: Iterable[Evaluation]) -> dict[str, CustomSummary]:
    """Each evaluator of the file over these evaluations (those it applied to)."""
    scores: dict[str, list[float]] = {e.name: [] for e in loaded.evaluators}
    failed: dict[str, Counter[str]] = {e.name: Counter() for e in loaded.evaluators}
    low: dict[str, list[str]] = {e.name: [] for e in loaded.evaluators}
    labeled: dict[str, list[LabeledCase]] = {e.name: [] for e in loaded.evaluators}
    for evaluation in evaluations:
        for name, c in evaluation.custom.items():
            if name not in scores:
                continue
            if c.score is None:
                failed[name][c.reason.split(":")[0] if ":" in c.reason else c.reason] += 1
                continue
            scores[name].append(c.score)
            label = (evaluation.labels or {}).get(CUSTOM_PREFIX + name)
            if label in (0, 1):
                group = evaluation.conversation_id or evaluation.interaction_id
                labeled[name].append(
                    LabeledCase(evaluation.interaction_id, group, bool(label), c.score >= 0.5)
                )
            flagged = c.score >= 0.5 if _flag_is_bad(loaded, name) else c.score < 0.5
            if flagged and c.reason and len(low[name]) < 5:
                low[name].append(f"{evaluation.interaction_id}: {c.reason}")
    out = {}
    for ev in loaded.evaluators:
        values = scores[ev.name]
        metric = ev.metric()
        out[ev.name] = CustomSummary(
            metric=metric.name, kind=metric.kind.value, version=ev.version,
            value=sum(values) / len(values) if values else None, scored=len(values),
            missing=sum(failed[ev.name].values()), missing_reasons=dict(failed[ev.name].most_common(5)),
            reasons=low[ev.name], agreement=agreement(labeled[ev.name]) if labeled[ev.name] else None,
        )  # fmt: skip
    return out


def _flag_is_bad(loaded: LoadedEvaluators, name: str) -> bool:
    ev = next(e for e in loaded.evaluators if e.name == name)
    return not ev.good_when_high()
