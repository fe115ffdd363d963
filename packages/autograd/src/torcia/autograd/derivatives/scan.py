"""Backward formulas of the scans (declared in ``_ops/scan.py``): ``cumsum``, ``cumprod``,
``logcumsumexp`` (``cummax`` and ``cummin`` pick their input's elements, as ``sort``: see
``derivatives/sorting.py``)."""

from __future__ import annotations

import torcia
from torcia.autograd.derivatives import _c, _read_as, derivative


@derivative("cumsum")
def _(grad, _x, *, dim, dtype=None):
    return grad.flip((dim,)).cumsum(dim).flip((dim,))


@derivative("cumprod")
def _(grad, x, *, dim, result, dtype=None):
    # d out_j / d x_i = prod_{k<=j, k!=i} x_k, summed over j >= i
    x = _read_as(x, dtype)
    n = x.shape[dim]
    out = []
    for i in range(n):
        xi = x.narrow(dim, i, 1)
        others = torcia.cat([x.narrow(dim, 0, i), torcia.ones_like(xi),
                             x.narrow(dim, i + 1, n - i - 1)], dim).cumprod(dim)
        out.append((grad.narrow(dim, i, n - i) * _c(others.narrow(dim, i, n - i))).sum(
            dim, keepdim=True))
    return torcia.cat(out, dim)


@derivative("logcumsumexp")
def _(grad, x, *, dim, result):
    # d r_j / d x_i = exp(x_i - r_j) for i <= j; shifted by the total so exp stays small
    n = x.shape[dim]
    total = result.narrow(dim, n - 1, 1)
    tail = (grad * _c((total - result).exp())).flip((dim,)).cumsum(dim).flip((dim,))
    return tail * _c((x - total).exp())
