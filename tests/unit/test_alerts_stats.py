"""The rate test of the baseline rules: Fisher's exact test, one-sided, and its false-alarm rate."""

from __future__ import annotations

import math

import pytest

from streams.alerts.stats import Obs, fisher_greater, significant


def test_fisher_greater_is_the_hypergeometric_upper_tail() -> None:
    # all 3 events in the 3 current interactions out of 13: 1 / C(13, 3)
    assert fisher_greater(Obs(3, 3), Obs(0, 10)) == pytest.approx(1 / 286)
    # 5 of 40 against 10 of 480: sum over k >= 5 of C(15, k) C(505, 40 - k) / C(520, 40)
    want = sum(math.comb(15, k) * math.comb(505, 40 - k) for k in range(5, 16)) / math.comb(520, 40)
    assert fisher_greater(Obs(5, 40), Obs(10, 480)) == pytest.approx(want, rel=1e-9)
    assert fisher_greater(Obs(0, 10), Obs(0, 100)) == 1.0  # no events: nothing to test
    assert fisher_greater(Obs(1, 40), Obs(10, 480)) > 0.5  # at the baseline's rate


def binomial(n: int, p: float) -> list[float]:
    return [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]


@pytest.mark.parametrize("rate", [0.02, 0.10])
def test_the_false_alarm_rate_is_at_most_the_nominal_level_at_a_few_events_a_window(rate: float) -> None:
    """Exactly, not by simulation: every outcome of 40 current and 480 baseline interactions at the same
    rate, weighted by its probability; the share the test calls significant stays under 1 - confidence."""
    confidence, n1, n0 = 0.999, 40, 480
    current, baseline = binomial(n1, rate), binomial(n0, rate)
    level = 0.0
    for x1, p1 in enumerate(current):
        if p1 < 1e-15:
            continue
        for x0, p0 in enumerate(baseline):
            if (
                p0 > 1e-15
                and significant("hallucination_rate", Obs(x1, n1), Obs(x0, n0), [], confidence, True)[0]
            ):
                level += p1 * p0
    assert 0 < level <= 1 - confidence


def test_a_falling_rate_is_tested_on_its_complement() -> None:
    baseline = Obs(400, 500)  # 80 %
    assert significant("answer_refusal_rate", Obs(10, 100), baseline, [], 0.999, up=False)[0]
    assert not significant("answer_refusal_rate", Obs(10, 100), baseline, [], 0.999, up=True)[0]
    assert not significant("answer_refusal_rate", Obs(79, 100), baseline, [], 0.999, up=False)[0]
