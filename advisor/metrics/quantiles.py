"""Two distribution quantiles the anomaly model needs, for integer parameters.

The chi-square quantile (the robust fit's cut-offs, ``robust_fit``) and the
Beta quantile (the Clopper-Pearson bound on how often slow steps recur,
``anomaly``) are asked only with whole-number parameters, where both
distributions have closed-form tails:

* chi-square with ``k`` degrees of freedom: the upper tail at ``x`` is
  ``exp(-x/2) * sum_{i < k/2} (x/2)^i / i!`` for even ``k``, and
  ``erfc(sqrt(x/2)) + exp(-x/2) * sum_{i=1..(k-1)/2} (x/2)^(i-1/2) / Gamma(i+1/2)``
  for odd ``k``;
* Beta(a, b) with whole ``a``, ``b``: its distribution function at ``x`` is
  the chance of ``a`` or more successes in ``a + b - 1`` trials of
  probability ``x``.

Each quantile is found by bisection on that tail to double precision. They
agree with SciPy's ``chdtri`` and ``betaincinv`` to 1e-9 relative (the
tests check a grid), without importing SciPy: ``scipy.special`` alone takes
~0.35 s to import, a fifth of a 1024-rank report.
"""

from __future__ import annotations

import math

#: Bisection steps: each halves the bracket; 200 reach adjacent doubles.
_STEPS = 200


def _bisect(below, lo: float, hi: float) -> float:
    """The point where ``below(x)`` turns from True to False in [lo, hi]."""
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if below(mid):
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def chi2_upper_tail(x: float, df: int) -> float:
    """P(X > x) for X chi-square with ``df`` (a positive whole number)
    degrees of freedom."""
    if x <= 0:
        return 1.0
    half = x / 2
    if df % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, df // 2):
            term *= half / i
            total += term
        return math.exp(-half) * total
    term = math.sqrt(half) / math.gamma(1.5)
    total = term
    for i in range(2, (df + 1) // 2):
        term *= half / (i - 0.5)
        total += term
    return math.erfc(math.sqrt(half)) + (math.exp(-half) * total if df > 1 else 0.0)


def chi2_quantile(q: float, df: int) -> float:
    """The ``q`` quantile (0 < q < 1) of the chi-square distribution with
    ``df`` degrees of freedom: the x with P(X <= x) = q."""
    if not 0 < q < 1 or df < 1 or df != int(df):
        raise ValueError(f"chi2_quantile needs 0 < q < 1 and a whole df >= 1, got q={q}, df={df}")
    tail = 1.0 - q
    hi = float(df) + 10.0
    while chi2_upper_tail(hi, df) > tail:
        hi *= 2
    return _bisect(lambda x: chi2_upper_tail(x, df) > tail, 0.0, hi)


def beta_cdf(x: float, a: int, b: int) -> float:
    """P(X <= x) for X ~ Beta(a, b), ``a`` and ``b`` positive whole numbers:
    the chance of ``a`` or more successes in ``a + b - 1`` trials."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    n = a + b - 1
    lx, l1x, ln = math.log(x), math.log1p(-x), math.lgamma(n + 1)

    def terms(js):  # binomial probabilities in logs: no overflow at thousands of trials
        return math.fsum(math.exp(ln - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * lx + (n - j) * l1x)
                         for j in js)

    # the shorter of the two sums
    return terms(range(a, n + 1)) if n - a < a else 1.0 - terms(range(a))


def beta_quantile(q: float, a: int, b: int) -> float:
    """The ``q`` quantile (0 < q < 1) of Beta(a, b) for whole ``a``, ``b``."""
    if not 0 < q < 1 or a < 1 or b < 1 or a != int(a) or b != int(b):
        raise ValueError(f"beta_quantile needs 0 < q < 1 and whole a, b >= 1, got q={q}, a={a}, b={b}")
    return _bisect(lambda x: beta_cdf(x, a, b) < q, 0.0, 1.0)
