"""Tests for capacity.symbolic.

Two kinds of check:
- algebra that needs nothing else (sympy simplification against textbook
  identities: P-K with exponential service is the M/M/1 wait, Erlang C with
  one server is rho, the M/M/1 quantile inverts the M/M/1 tail);
- the symbolic forms evaluated at parameter points against the numeric
  implementations in capacity.fcfs, capacity.erlang, capacity.ps and
  capacity.closed.  The two are written independently (textbook formula vs.
  stable vectorised code), so agreement checks both.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import sympy

from capacity import symbolic as sy
from capacity.distributions import Service

lam, mu, ES, ES2, rho, c, a = sy.lam, sy.mu, sy.ES, sy.ES2, sy.rho, sy.c, sy.a


# ---------------------------------------------------------------------- pure algebra


def test_pk_with_exponential_service_is_mm1_wait():
    # E[S] = 1/mu, E[S^2] = 2/mu^2 (exponential): P-K must reduce to the M/M/1
    # wait rho/(mu - lambda), rho = lambda/mu (Kleinrock vol. 1 sec. 3.2).
    w = sy.pollaczek_khinchine_mean_wait().subs({ES: 1 / mu, ES2: 2 / mu**2})
    assert sympy.simplify(w - (lam / mu) / (mu - lam)) == 0
    assert sympy.simplify(w - sy.mm1_mean_wait()) == 0


def test_pk_with_deterministic_service_halves_mm1_wait():
    # M/D/1: E[S^2] = E[S]^2, so W_MD1 = W_MM1 / 2 at equal mean (P-K with scv = 0 vs scv = 1).
    w_md1 = sy.pollaczek_khinchine_mean_wait().subs({ES: 1 / mu, ES2: 1 / mu**2})
    assert sympy.simplify(w_md1 - sy.mm1_mean_wait() / 2) == 0


def test_erlang_c_one_server_is_utilization():
    # M/M/1: the probability of waiting is rho = a (c = 1).
    assert sympy.simplify(sy.erlang_c(1, a).doit() - a) == 0


def test_erlang_b_one_server():
    # M/M/1/1: B = a/(1 + a), by hand from the two-state chain.
    assert sympy.simplify(sy.erlang_b(1, a).doit() - a / (1 + a)) == 0


def test_erlang_c_from_b_agrees_with_sum_form():
    # C = B / (1 - rho (1 - B)), a standard identity (e.g. R. B. Cooper, Introduction to
    # Queueing Theory, 1981, ch. 3); exact rationals, so the comparison is exact.
    for servers, load in [(2, sympy.Rational(3, 2)), (5, sympy.Rational(7, 2)), (14, 10)]:
        b = sy.erlang_b(servers, load).doit()
        from_b = sy.erlang_c_from_b(servers, load, b)
        assert from_b.is_Rational and from_b == sy.erlang_c(servers, load).doit()


def test_erlang_b_recursion_matches_closed_form():
    # Iterate B(k) = a B(k-1)/(k + a B(k-1)) from B(0) = 1 in exact rationals.
    load = sympy.Rational(37, 4)
    b = sympy.Integer(1)
    for servers in range(1, 13):
        b = sy.erlang_b_step(servers, load, b)
        assert b == sy.erlang_b(servers, load).doit()


def test_erlang_c_textbook_value():
    # c = 14, a = 10: C = 0.1741319... (value given in the project brief; also
    # recomputed here with mpmath from the same textbook sum at 30 digits).
    import mpmath
    mpmath.mp.dps = 30
    top = mpmath.mpf(10) ** 14 / mpmath.factorial(14) * mpmath.mpf(14) / 4
    ref = top / (mpmath.fsum(mpmath.mpf(10) ** j / mpmath.factorial(j) for j in range(14)) + top)
    value = sy.erlang_c(14, 10).doit()
    assert value.is_Rational  # evaluated exactly, no float round-off
    assert float(value) == pytest.approx(float(ref), rel=1e-15)
    assert abs(float(value) - 0.1741319) < 1e-7


def test_mm1_quantile_inverts_tail():
    # Solving P(T > t) = 1 - q for t must give the quantile formula.
    t = sy.t
    sols = sympy.solve(sympy.Eq(sy.mm1_response_sf(t, lam, mu), 1 - sy.q), t)
    assert len(sols) == 1
    assert sympy.simplify(sympy.expand_log(sols[0] - sy.mm1_response_quantile(), force=True)) == 0


def test_ps_conditional_mean_averages_to_mean():
    # E[T] = E[T(S)]: the conditional mean is linear in x, so averaging over x gives E[S]/(1 - rho).
    assert sympy.simplify(sy.ps_conditional_mean_response(ES) - sy.ps_mean_response()) == 0


def test_mva_step_symbolic_one_station():
    # With Q(N-1) = 0 and N = 1: R = D, X = 1/(Z + D) (one user never queues).
    step = sy.mva_step(previous_queue=0, users=1)
    assert step.residence_time == sy.D
    assert sympy.simplify(step.throughput - 1 / (sy.Z + sy.D)) == 0
    # Little's law and the response-time law are built in: Q = X R, R = N/X - Z.
    general = sy.mva_step()
    assert sympy.simplify(general.mean_number - general.throughput * general.residence_time) == 0
    assert sympy.simplify(sy.N / general.throughput - sy.Z - general.response) == 0


def test_mva_step_hand_worked_two_stations():
    """D = [1/5, 1/10], Z = 1, exact (same hand-worked numbers as tests/test_closed.py).

    X(1) = 10/13, X(2) = 130/87, X(3) = 522/241.
    """
    queue = (0, 0)
    throughput = []
    for n in (1, 2, 3):
        step = sy.mva_step([sympy.Rational(1, 5), sympy.Rational(1, 10)], 1, n, queue)
        queue = step.mean_number
        throughput.append(step.throughput)
    assert throughput == [sympy.Rational(10, 13), sympy.Rational(130, 87), sympy.Rational(522, 241)]


def test_mva_step_rejects_mismatched_queue():
    with pytest.raises(ValueError, match="previous_queue"):
        sy.mva_step([1, 2], 0, 1, (0,))


# ---------------------------------------------------------------------- catalogue / LaTeX


def test_formulas_catalogue_and_latex():
    expected_symbols = {
        "pollaczek_khinchine_mean_wait": [r"\lambda", r"\mathbb{E}[S^{2}]", r"\rho"],
        "mm1_mean_wait": [r"\rho", r"\mu", r"\lambda"],
        "erlang_b": [r"\sum", "c!", "a^{k}"],
        "erlang_b_recursion": ["B(c-1, a)"],
        "erlang_c": [r"\sum", "c - a", "a^{c}", "c!"],
        "erlang_c_from_b": ["B(c, a)"],
        "ps_mean_response": [r"\mathbb{E}[S]", r"\rho"],
        "ps_conditional_mean_response": ["x", r"\rho"],
        "mm1_response_sf": [r"\mu", r"\lambda", "t"],
        "mm1_response_quantile": [r"\log", "q", r"\mu", r"\lambda"],
        "mva_residence_time": ["D", "Q(N-1)"],
        "mva_throughput": ["N", "Z", "R(N)"],
        "mva_queue_length": ["X(N)", "R(N)"],
    }
    assert set(sy.FORMULAS) == set(expected_symbols)
    for name, symbols in expected_symbols.items():
        equation, description = sy.FORMULAS[name]
        assert isinstance(equation, sympy.Eq)
        assert isinstance(description, str) and description
        text = sy.latex(name)
        assert "=" in text and "$" not in text
        for s in symbols:
            assert s in text, (name, s, text)
        assert "ES2" not in text and "Q_{prev}" not in text


def test_latex_unknown_name():
    with pytest.raises(ValueError, match="name"):
        sy.latex("no_such_formula")


@pytest.mark.parametrize("name, function, rho_means", [
    ("pollaczek_khinchine_mean_wait", sy.pollaczek_khinchine_mean_wait, lam * ES),
    ("ps_mean_response", sy.ps_mean_response, lam * ES),
    ("ps_conditional_mean_response", sy.ps_conditional_mean_response, lam * ES),
    ("mm1_mean_wait", sy.mm1_mean_wait, lam / mu),
    ("mm1_response_quantile", sy.mm1_response_quantile, lam / mu),
    ("mm1_response_sf", sy.mm1_response_sf, lam / mu),
    ("erlang_c_from_b", sy.erlang_c_from_b, None),
    ("erlang_b_recursion", sy.erlang_b_step, None),
])
def test_display_forms_equal_functions(name, function, rho_means):
    # The catalogue is written out by hand for readability; it must be the same formula.
    shown = sy.FORMULAS[name][0].rhs
    if rho_means is not None:
        shown = shown.subs(rho, rho_means)
    assert sympy.simplify(shown - function()) == 0


def test_erlang_display_forms_equal_functions():
    for name, function in [("erlang_c", sy.erlang_c), ("erlang_b", sy.erlang_b)]:
        shown = sy.FORMULAS[name][0].rhs
        for servers, load in [(1, sympy.Rational(1, 2)), (3, sympy.Rational(5, 2)), (6, 4)]:
            got = shown.subs({c: servers, a: load}).doit()
            assert got.is_Rational and got == function(servers, load).doit()


def test_lambdify_vectorises():
    f = sympy.lambdify((lam, ES, ES2), sy.pollaczek_khinchine_mean_wait(), "numpy")
    lam_values = np.array([1.0, 5.0, 9.0])
    # By hand: lambda E[S^2] / (2 (1 - lambda E[S])) with E[S] = 0.1, E[S^2] = 0.02.
    np.testing.assert_allclose(f(lam_values, 0.1, 0.02),
                               lam_values * 0.02 / (2 * (1 - lam_values * 0.1)), rtol=1e-15)


# ---------------------------------------------------------------------- against the numeric package
# Parameter points: (arrival_rate, mean service).  Utilizations 0.1 .. 0.95.
OPEN_POINTS = [(1.0, 0.1), (8.0, 0.1), (95.0, 0.01), (0.5, 1.0), (3.0, 0.3)]


@pytest.mark.parametrize("arrival_rate, mean", OPEN_POINTS)
@pytest.mark.parametrize("service_factory", [
    lambda m: Service.exponential(m),
    lambda m: Service.deterministic(m),
    lambda m: Service.gamma(m, scv=4.0),
    lambda m: Service.lognormal(m, scv=0.5),
])
def test_pk_matches_fcfs_mean_wait(arrival_rate, mean, service_factory):
    from capacity import fcfs
    service = service_factory(mean)
    second = float(service.moment(2))
    symbolic = float(sy.pollaczek_khinchine_mean_wait(arrival_rate, mean, second))
    assert fcfs.mean_wait(arrival_rate, service) == pytest.approx(symbolic, rel=1e-10)


@pytest.mark.parametrize("servers, load", [(1, 0.5), (2, 1.5), (5, 3.0), (14, 10), (30, 27.5), (50, 20.0)])
def test_symbolic_erlang_c_matches_numeric(servers, load):
    from capacity import erlang
    exact = sy.erlang_c(servers, sympy.nsimplify(load)).doit()
    assert erlang.erlang_c(servers, load) == pytest.approx(float(exact), rel=1e-12)
    exact_b = sy.erlang_b(servers, sympy.nsimplify(load)).doit()
    assert erlang.erlang_b(servers, load) == pytest.approx(float(exact_b), rel=1e-12)


def test_erlang_c_14_10_matches_numeric():
    from capacity import erlang
    assert erlang.erlang_c(14, 10) == pytest.approx(float(sy.erlang_c(14, 10).doit()), rel=1e-12)
    assert abs(erlang.erlang_c(14, 10) - 0.1741319) < 1e-7


@pytest.mark.parametrize("arrival_rate, mean", OPEN_POINTS)
def test_ps_forms_match_numeric(arrival_rate, mean):
    from capacity import ps
    service = Service.lognormal(mean, scv=3.0)  # PS mean is insensitive: any distribution
    assert ps.mean_response(arrival_rate, service) == pytest.approx(
        float(sy.ps_mean_response(arrival_rate, mean)), rel=1e-10)
    for size in (0.1 * mean, mean, 7.0 * mean):
        assert ps.conditional_mean_response(size, arrival_rate, service) == pytest.approx(
            float(sy.ps_conditional_mean_response(size, arrival_rate, mean)), rel=1e-10)


@pytest.mark.parametrize("arrival_rate, mean", OPEN_POINTS)
@pytest.mark.parametrize("q", [0.5, 0.9, 0.99, 0.999999])
def test_mm1_quantile_matches_fcfs(arrival_rate, mean, q):
    from capacity import fcfs
    symbolic = float(sy.mm1_response_quantile(q, arrival_rate, 1 / mean))
    assert fcfs.response_quantile(q, arrival_rate, mean) == pytest.approx(symbolic, rel=1e-8)
    t = symbolic
    assert fcfs.response_sf(t, arrival_rate, mean) == pytest.approx(
        float(sy.mm1_response_sf(t, arrival_rate, 1 / mean)), rel=1e-8)


@pytest.mark.parametrize("demands, think_time, users", [
    ([sympy.Rational(1, 5), sympy.Rational(1, 10)], 1, 12),
    ([sympy.Rational(1, 100)], sympy.Rational(9, 100), 25),
    ([sympy.Rational(3, 100), sympy.Rational(1, 50), sympy.Rational(7, 1000)], 0, 15),
])
def test_symbolic_mva_matches_closed(demands, think_time, users):
    from capacity.closed import mva
    res = mva([float(d) for d in demands], float(think_time), users)
    queue = tuple(0 for _ in demands)
    for n in range(1, users + 1):
        step = sy.mva_step(demands, think_time, n, queue)
        queue = step.mean_number
        assert res.throughput[n - 1] == pytest.approx(float(step.throughput), rel=1e-13)
        assert res.response[n - 1] == pytest.approx(float(step.response), rel=1e-13)
        np.testing.assert_allclose(res.mean_number[n - 1], [float(v) for v in queue], rtol=1e-13)
    assert math.isfinite(res.throughput[-1])


def test_old_mva_step_names_warn_and_still_work():
    step = sy.mva_step(sympy.Rational(1, 5), 1, 1, 0)
    with pytest.warns(DeprecationWarning, match="is now .response"):
        assert step.response_time == step.response == sympy.Rational(1, 5)
    with pytest.warns(DeprecationWarning, match="is now .mean_number"):
        assert step.queue_length == step.mean_number


def test_old_erlang_parameter_names_warn_and_give_the_same_expression():
    with pytest.warns(DeprecationWarning, match="'c' is now 'servers'"):
        old = sy.erlang_c(c=14, a=10)
    assert old.doit() == sy.erlang_c(servers=14, offered_load=10).doit()
    with pytest.warns(DeprecationWarning, match="'k' is now 'servers'"):
        assert sy.erlang_b_step(k=2, a=1, previous=sympy.Rational(1, 2)) == sy.erlang_b_step(2, 1, sympy.Rational(1, 2))
