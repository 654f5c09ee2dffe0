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
