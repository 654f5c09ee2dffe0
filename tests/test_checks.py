"""Input checks: every bad value is named in the error."""
import numpy as np
import pytest

from capacity._checks import check_nonnegative, check_positive, check_quantile, check_servers


def test_servers_accepts_whole_numbers():
    assert check_servers(4).item() == 4
    assert check_servers(4.0).item() == 4
    assert check_servers([1, 2, 3.0]).tolist() == [1, 2, 3]


@pytest.mark.parametrize("bad", [0, -1, 2.5, float("nan"), float("inf"), True, "two", [1, 0]])
def test_servers_rejects(bad):
    with pytest.raises(ValueError, match="servers"):
        check_servers(bad)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_quantile_rejects(bad):
    with pytest.raises(ValueError, match=r"^q must"):
        check_quantile(bad)


def test_positive_and_nonnegative_name_the_value():
    with pytest.raises(ValueError, match=r"arrival_rate .* got -2.0"):
        check_nonnegative(np.array([1.0, -2.0]), "arrival_rate")
    with pytest.raises(ValueError, match="mean"):
        check_positive(0.0, "mean")
    with pytest.raises(ValueError, match="NaN"):
        check_positive([1.0, np.nan], "mean")
    assert check_nonnegative(0.0, "x").item() == 0.0


# ---------------------------------------------------------------- issue 14: bad input that slipped through
@pytest.mark.parametrize("call, name", [
    (lambda: __import__("capacity").erlang_c("5", 1.0), "servers"),
    (lambda: __import__("capacity").erlang_c(5, "1.0"), "offered_load"),
    (lambda: __import__("capacity").fcfs.mean_response(0.5, 1.0, servers="4"), "servers"),
    (lambda: __import__("capacity").fcfs.mean_response(["0.5"], 1.0), "arrival_rate"),
    (lambda: __import__("capacity").Service.gamma(1.0, "2"), "scv"),
])
def test_numeric_text_is_refused_not_parsed(call, name):
    """numpy turns "5" into 5.0; the checks say strings are rejected, and now they are."""
    with pytest.raises(ValueError, match=rf"^{name} must be a number .*not text"):
        call()


def _mismatched():
    from capacity import Service, erlang_c, fcfs, rr
    three, two = [0.1, 0.2, 0.3], [1.0, 2.0]
    return [
        (lambda: fcfs.mean_response(three, two), ("service", "arrival_rate")),
        (lambda: fcfs.mean_response(three, 0.5, servers=[1, 2]), ("servers", "arrival_rate")),
        (lambda: erlang_c([1, 2, 3], two), ("offered_load", "servers")),
        (lambda: rr.response_quantile([0.5, 0.9], three, 1.0, slices=2), ("q", "arrival_rate/service/servers")),
        (lambda: rr.mean_response(three, 1.0, slices=[2, 3]), ("slices", "arrival_rate/service/servers")),
        (lambda: Service.gamma(two, [1.0, 2.0, 3.0]), ("scv", "mean")),
        (lambda: Service.erlang(two, [1, 2, 3]), ("k", "mean")),
    ]


@pytest.mark.parametrize("case", range(len(_mismatched())))
def test_mismatched_shapes_name_both_parameters(case):
    call, names = _mismatched()[case]
    with pytest.raises(ValueError) as err:
        call()
    message = str(err.value)
    assert all(name in message for name in names), message
    assert "do not broadcast" in message and "arg 0" not in message


def test_broadcast_check_returns_the_shape_and_finds_the_clashing_pair():
    from capacity._checks import check_broadcast
    assert check_broadcast(a=[1, 2, 3], b=2.0, c=[[1], [2]]) == (2, 3)
    with pytest.raises(ValueError, match=r"^c has shape \(2,\) and a has shape \(3,\)"):
        check_broadcast(a=[1, 2, 3], b=[[1], [2]], c=[1, 2])


def test_percentile_keys_given_as_text_are_refused():
    from capacity import fit
    with pytest.raises(ValueError, match=r"quantile keys must be numbers.*'0.5'"):
        fit.from_percentiles({0.5: .1, "0.5": .12, 0.99: .3}, arrival_rate=5)
