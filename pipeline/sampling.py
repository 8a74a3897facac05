"""Which interactions are judged: sampling and routing rules, then a judge budget per app (pure logic).

``Sampler.decide`` takes an interaction and returns a ``schemas.sampling.Decision``:

1. the rules of the rules file (``schemas.sampling.SamplingRules``) are tried in order and the FIRST
   whose scope (``app``, ``model``) and conditions (``when``: metadata values, tags, answer length,
   ground truth present) all match decides: ``judge`` (always), ``skip`` (never) or ``sample`` at its
   ``rate``; no rule matching: ``sampling.default_rate``;
2. a rate keeps the interactions whose ``stable_fraction(interaction_id)`` is under it: a SHA-256 of the
   id (and the file's ``salt``), so the decision is the same in every process, worker, replay and run;
3. an interaction the rules would judge is still skipped while its app's judge budget is spent
   (``JudgeBudgets``: tokens over the last 60 s of the injected clock's monotonic time, USD over the
   UTC day of its wall time). Spend is recorded with ``record`` from the evaluations a worker writes, so a
   budget is per worker process, and interactions already being judged when it runs out still finish.

A skipped interaction becomes ``skipped_evaluation``: an Evaluation with ``judged=False`` and the
decision's reason, no scores and no judge call.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

from pipeline.clock import Clock, SystemClock
from pipeline.rules_file import read_rules_file
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.sampling import Conditions, Decision, JudgeBudget, SamplingRule, SamplingRules

TOKEN_WINDOW_S = 60.0
_MISSING = object()


def load_sampling_rules(path: Path) -> SamplingRules:
    """``rules:`` and ``budgets:`` in YAML (.yaml/.yml) or JSON (a bare list is the rules); a bad file or
    rule raises a ConfigError naming the file, the rule's index, the field and the reason."""
    return read_rules_file(path, SamplingRules, "sampling rules file")


def stable_fraction(interaction_id: str, salt: str = "") -> float:
    """A number in [0, 1) fixed by the id (and salt): the first 8 bytes of SHA-256(salt NUL id)."""
    digest = hashlib.sha256(f"{salt}\x00{interaction_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def metadata_value(metadata: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of the metadata (``user.tier``), or ``_MISSING``."""
    if path in metadata:
        return metadata[path]
    node: Any = metadata
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _value_matches(actual: Any, wanted: Any) -> bool:
    if actual is _MISSING:
        return False
    options = wanted if isinstance(wanted, list) else [wanted]
    return any(actual == option for option in options)


def _tags_of(metadata: dict[str, Any]) -> set[str]:
    tags = metadata.get("tags")
    if isinstance(tags, str):
        return {tags}
    if isinstance(tags, list):
        return {str(t) for t in tags}
    return set()


def conditions_hold(when: Conditions, interaction: Interaction) -> bool:
    """Every condition given holds for the interaction (no condition: True)."""
    meta = interaction.metadata
    if not all(_value_matches(metadata_value(meta, k), v) for k, v in when.metadata.items()):
        return False
    if when.tags and not (_tags_of(meta) & set(when.tags)):
        return False
    if when.answer_chars is not None:
        n = len(interaction.answer)
        low, high = when.answer_chars.min, when.answer_chars.max
        if (low is not None and n < low) or (high is not None and n > high):
            return False
    if when.has_ground_truth is not None and (interaction.ground_truth is not None) != when.has_ground_truth:
        return False
    return True


def rule_matches(rule: SamplingRule, interaction: Interaction) -> bool:
    if rule.app is not None and rule.app != interaction.app:
        return False
    if rule.model is not None and rule.model != interaction.model:
        return False
    return conditions_hold(rule.when, interaction)


def route(rules: SamplingRules, default_rate: float, interaction: Interaction) -> Decision:
    """The rules' decision for one interaction (no budget): the first matching rule, else the default rate."""
    for rule in rules.rules:
        if not rule_matches(rule, interaction):
            continue
        if rule.action == "judge":
            return Decision(judge=True, reason=f"always:{rule.name}")
        if rule.action == "skip":
            return Decision(judge=False, reason=f"never:{rule.name}")
        return _sampled(interaction.interaction_id, float(rule.rate or 0.0), rule.name, rules.salt)
    return _sampled(interaction.interaction_id, default_rate, "default", rules.salt)


def _sampled(interaction_id: str, rate: float, name: str, salt: str) -> Decision:
    if rate >= 1.0 or stable_fraction(interaction_id, salt) < rate:
        return Decision(judge=True, reason=f"sampled:{name}")
    return Decision(judge=False, reason=f"sampled_out:{name}")


@dataclass
class _Spend:
    tokens: deque[tuple[float, int]] = field(default_factory=deque)  # (monotonic time, tokens)
    token_sum: int = 0
    day: date | None = None
    cost: float = 0.0


class JudgeBudgets:
    """The spend of each app against its budget, on an injected clock (see the module docstring)."""

    def __init__(self, budgets: Iterable[JudgeBudget], clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        listed = list(budgets)
        self.by_app = {b.app: b for b in listed if b.app is not None}
        self.default = next((b for b in listed if b.app is None), None)
        self._spend: dict[str, _Spend] = {}

    def budget_for(self, app: str) -> JudgeBudget | None:
        return self.by_app.get(app, self.default)

    def _current(self, app: str) -> _Spend:
        spend = self._spend.setdefault(app, _Spend())
        cutoff = self.clock.monotonic() - TOKEN_WINDOW_S
        while spend.tokens and spend.tokens[0][0] <= cutoff:
            spend.token_sum -= spend.tokens.popleft()[1]
        today = self.clock.now().date()
        if spend.day != today:
            spend.day, spend.cost = today, 0.0
        return spend

    def record(self, app: str, tokens: int, cost_usd: float) -> None:
        """Judge spend of one evaluation of ``app`` (apps without a budget are not tracked)."""
        if self.budget_for(app) is None or (tokens <= 0 and cost_usd <= 0):
            return
        spend = self._current(app)
        spend.tokens.append((self.clock.monotonic(), tokens))
        spend.token_sum += tokens
        spend.cost += cost_usd

    def spent(self, app: str) -> tuple[int, float]:
        """(tokens over the last 60 s, USD today) of an app."""
        spend = self._current(app)
        return spend.token_sum, spend.cost

    def exhausted(self, app: str) -> str | None:
        """The skip reason when the app's budget is spent, else None."""
        budget = self.budget_for(app)
        if budget is None:
            return None
        spend = self._current(app)
        if budget.tokens_per_minute is not None and spend.token_sum >= budget.tokens_per_minute:
            return "budget:tokens_per_minute"
        if budget.cost_per_day_usd is not None and spend.cost >= budget.cost_per_day_usd:
            return "budget:cost_per_day"
        return None


class Sampler:
    """Rules, then budgets: ``decide`` an interaction; ``record`` what a judged one spent."""

    def __init__(self, rules: SamplingRules, default_rate: float = 1.0, clock: Clock | None = None) -> None:
        if not 0.0 <= default_rate <= 1.0:
            raise ValueError(f"default_rate must lie in [0, 1], got {default_rate}")
        self.rules = rules
        self.default_rate = default_rate
        self.budgets = JudgeBudgets(rules.budgets, clock)

    @classmethod
    def from_files(cls, rules_file: Path | None, default_rate: float, clock: Clock | None = None) -> Sampler:
        rules = load_sampling_rules(rules_file) if rules_file is not None else SamplingRules()
        return cls(rules, default_rate, clock)

    def decide(self, interaction: Interaction, *, budgets: bool = True) -> Decision:
        decision = route(self.rules, self.default_rate, interaction)
        if decision.judge and budgets:
            spent = self.budgets.exhausted(interaction.app)
            if spent is not None:
                return Decision(judge=False, reason=spent)
        return decision

    def record(self, evaluations: Iterable[Evaluation]) -> None:
        for e in evaluations:
            if e.judged:
                self.budgets.record(e.app, e.input_tokens + e.output_tokens, e.cost_usd)


def skipped_evaluation(
    interaction: Interaction, reason: str, judge: str, evaluated_at: datetime
) -> Evaluation:
    """The Evaluation of an interaction that is not judged: no scores, no calls, its skip reason."""
    return Evaluation(
        evaluated_at=evaluated_at,
        interaction_id=interaction.interaction_id,
        timestamp=interaction.timestamp,
        app=interaction.app,
        model=interaction.model,
        conversation_id=interaction.conversation_id,
        judge=judge,
        judged=False,
        skip_reason=reason,
        labels=interaction.labels,
        interaction=interaction,
    )
