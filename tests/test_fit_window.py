"""The luck of a finite measurement window (capacity.fit._window, ``predict(..., window=)``).

Reference: an M/M/1 queue run window by window with the Lindley recursion written here in numpy
(independent of capacity's simulator), each window from its own seed and an empty queue warmed
for 10 s, its p99 against the exact M/M/1 p99 ``-ln(0.01) / (mu - lambda)``.
"""
import math

import numpy as np
import pytest

from capacity import fit
from capacity.fit._model import QueueModel
from capacity.fit._window import window_log_spread

MEAN_S, RATE = 0.016, 50.0                   # utilisation 0.8
EXACT_P99 = -math.log(0.01) / (1.0 / MEAN_S - RATE)
EXACT_MEAN = 1.0 / (1.0 / MEAN_S - RATE)
PARAMS = {"mean": np.array([MEAN_S]), "scv": np.array([1.0])}
MODEL = QueueModel("fcfs", "exponential")


def lindley_windows(window_s: float, n_windows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """p99 and mean response of ``n_windows`` independent M/M/1 windows of ``window_s`` seconds."""
    rng = np.random.default_rng(seed)
    warm = 10.0
    n = int(RATE * (window_s + warm) * 1.2) + 200
    p99, mean = np.empty(n_windows), np.empty(n_windows)
    for w in range(n_windows):
        gaps = rng.exponential(1.0 / RATE, n)
        service = rng.exponential(MEAN_S, n)
        arrival = np.cumsum(gaps)
        # Lindley: W_j = X_j - min(0, min_{i<=j} X_i), X_j = sum_{i<j} (S_i - A_{i+1}).
        x = np.r_[0.0, np.cumsum(service[:-1] - gaps[1:])]
        wait = x - np.minimum(0.0, np.minimum.accumulate(x))
        response = (wait + service)[(arrival >= warm) & (arrival < warm + window_s)]
        p99[w], mean[w] = np.quantile(response, 0.99), response.mean()
    return p99, mean


@pytest.fixture(scope="module")
def minute_reference():
    return lindley_windows(60.0, 300, seed=7)


def test_a_minutes_p99_and_mean_spread_as_independent_windows_do(minute_reference):
    p99, mean = minute_reference
    spread = window_log_spread(MODEL, PARAMS, np.array([0.99, np.nan]), RATE, 1, 60.0)
    # Spread (sd of the log) within 30 %: the simulated one from >= 24 windows has a relative
    # standard error near 1 / sqrt(2 * 24) = 14 %, the reference's 4 %.
    for j, (ref, exact) in enumerate(((p99, EXACT_P99), (mean, EXACT_MEAN))):
        ref_sd, sd = np.log(ref / exact).std(ddof=1), spread[:, j].std(ddof=1)
        assert sd == pytest.approx(ref_sd, rel=0.3), (j, sd, ref_sd)
    # Skewed as the reference: a typical minute shows less than the long-run p99 (a minute without
    # a long busy period), a few show much more.
    for j, (ref, exact) in enumerate(((p99, EXACT_P99), (mean, EXACT_MEAN))):
        assert np.median(spread[:, j]) == pytest.approx(np.median(np.log(ref / exact)), abs=0.06)
    assert np.median(spread[:, 0]) < -0.05
    # What the module's docstring says a minute at 80 % shows: roughly +-25 % about the long run.
    assert 0.12 < spread[:, 0].std(ddof=1) < 0.3


def test_a_long_window_is_scaled_from_shorter_ones_at_the_central_limit_rate():
    window = 600.0                           # 30,000 requests: beyond the per-window budget
    p99, _ = lindley_windows(window, 120, seed=11)
    spread = window_log_spread(MODEL, PARAMS, np.array([0.99]), RATE, 1, window)
    ref_sd = np.log(p99 / EXACT_P99).std(ddof=1)
    assert spread[:, 0].std(ddof=1) == pytest.approx(ref_sd, rel=0.35)
    # And it is narrower than a minute's by about sqrt(10).
    minute = window_log_spread(MODEL, PARAMS, np.array([0.99]), RATE, 1, 60.0)
    ratio = minute[:, 0].std(ddof=1) / spread[:, 0].std(ddof=1)
    assert 2.0 < ratio < 5.0


@pytest.fixture(scope="module")
def exact_fit():
    """An M/M/1 fitted from its exact percentiles at utilisation 0.3 and 0.6 with many requests:
    parameters pinned down, so its window interval is the window's luck alone."""
    records = [{"percentiles": {q: -math.log(1 - q) / (1 / MEAN_S - rate) for q in (0.5, 0.9, 0.99)},
                "arrival_rate": rate, "n_requests": 10**7} for rate in (18.75, 37.5)]
    return fit.from_percentiles(records, discipline="fcfs", family="exponential")


def test_the_window_interval_holds_nine_in_ten_measured_minutes(exact_fit, minute_reference):
    p99, mean = minute_reference
    with pytest.warns(Warning):             # extrapolates past the busiest observation (0.6)
        long_run = exact_fit.predict(0.99, RATE, interval=0.9)
    with pytest.warns(Warning):
        minute = exact_fit.predict(0.99, RATE, interval=0.9, window=60.0)
        minute_mean = exact_fit.predict_mean(RATE, interval=0.9, window=60.0)
    assert long_run.estimate == pytest.approx(EXACT_P99, rel=1e-3)
    held_long_run = np.mean((p99 >= long_run.low) & (p99 <= long_run.high))
    held = np.mean((p99 >= minute.low) & (p99 <= minute.high))
    held_mean = np.mean((mean >= minute_mean.low) & (mean <= minute_mean.high))
    # Without the window a pinned-down fit's interval is narrow and most minutes fall outside it.
    assert held_long_run < 0.5
    # With it, 90 % +- the noise of 300 reference windows and of the simulated spread.
    assert 0.8 <= held <= 0.97, held
    assert 0.8 <= held_mean <= 0.97, held_mean


def test_window_is_checked(exact_fit):
    with pytest.raises(ValueError, match="interval"):
        exact_fit.predict(0.99, RATE, window=60.0)
    with pytest.raises(ValueError, match="window"):
        exact_fit.predict(0.99, RATE, interval=0.9, window=-1.0)
    with pytest.raises(ValueError, match="window"):
        exact_fit.predict(0.99, RATE, interval=0.9, window=math.inf)
    with pytest.raises(ValueError, match="holds about 5.0 requests"):
        exact_fit.predict(0.99, 0.5, interval=0.9, window=10.0)
    with pytest.raises(ValueError, match="at most 8 loads"):
        exact_fit.predict(0.99, np.linspace(5.0, 40.0, 9), interval=0.9, window=60.0)


def test_an_unstable_load_keeps_an_infinite_prediction(exact_fit):
    with pytest.warns(Warning):
        p = exact_fit.predict(0.99, 70.0, interval=0.9, window=60.0)
    assert math.isinf(p.estimate) and math.isinf(p.high)
