"""The closed-form quantiles agree with SciPy's over the parameters the
anomaly model asks for and well beyond, and refuse what they cannot do."""

from __future__ import annotations

import pytest

from advisor.metrics import quantiles

special = pytest.importorskip("scipy.special")

PROBABILITIES = (1e-6, 0.001, 0.1, 0.5, 0.9, 0.975, 0.999, 1 - 1e-6)


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 7, 8, 15, 40])
def test_chi2_quantiles_are_scipys(df):
    for q in PROBABILITIES:
        assert quantiles.chi2_quantile(q, df) == pytest.approx(float(special.chdtri(df, 1 - q)), rel=1e-9)


@pytest.mark.parametrize("a", [1, 2, 4, 17, 60])
@pytest.mark.parametrize("b", [1, 3, 17, 400, 3000])
def test_beta_quantiles_are_scipys(a, b):
    for q in PROBABILITIES[1:-1]:
        assert quantiles.beta_quantile(q, a, b) == pytest.approx(float(special.betaincinv(a, b, q)), rel=1e-9)


@pytest.mark.parametrize("call", [lambda: quantiles.chi2_quantile(1.0, 3), lambda: quantiles.chi2_quantile(0.5, 2.5),
                                  lambda: quantiles.beta_quantile(0.0, 1, 2), lambda: quantiles.beta_quantile(0.5, 0, 2)])
def test_outside_the_closed_forms_is_refused(call):
    with pytest.raises(ValueError):
        call()
