"""Reference kernels for sorting, selection and counting.

A mixin of :class:`torcia._numpy_backend.Reference`: the same conventions hold (arrays of
``self.xp`` positionally, parameters as keywords, multi-output ops return a tuple). The
public functions have already wrapped dims and checked shapes and dtypes.
"""

from __future__ import annotations

import math

import numpy as np

from torcia._ops.reduce import pick as _pick


class ExtraKernels:
    """Kernels that are more than one array-module call."""

    xp = np

    # ----- sorting and selection -------------------------------------------------------
    def sort(self, a, dim=-1, descending=False, stable=False):
        xp = self.xp
        if a.ndim == 0:
            return a.copy(), xp.zeros((), dtype=np.int64)
        if descending:
            # a stable ascending sort of the reversed array, reversed again, keeps equal
            # elements in their original order (as PyTorch's stable descending sort)
            n = a.shape[dim]
            rev = xp.flip(a, axis=dim)
            idx = xp.flip(xp.argsort(rev, axis=dim, kind="stable"), axis=dim)
            idx = (n - 1) - idx
        else:
            idx = xp.argsort(a, axis=dim, kind="stable")
        return xp.take_along_axis(a, idx, axis=dim), idx.astype(np.int64)

    def topk(self, a, k, dim=-1, largest=True, sorted=True):
        vals, idx = self.sort(a, dim=dim, descending=largest)
        key = [slice(None)] * a.ndim
        key[dim] = slice(0, k)
        key = tuple(key)
        return vals[key].copy(), idx[key].copy()

    def kthvalue(self, a, k, dim=-1, keepdim=False):
        vals, idx = self.sort(a, dim=dim)
        return _pick(self.xp, vals, idx, k - 1, dim, keepdim)

    def unique(self, a, dim=None):
        """Sorted unique values (or slices along ``dim``), the inverse and the counts."""
        xp = self.xp
        vals, inverse, counts = xp.unique(a, return_inverse=True, return_counts=True, axis=dim)
        inverse = inverse.reshape(a.shape) if dim is None else inverse.reshape(-1)
        return vals, inverse.astype(np.int64), counts.astype(np.int64)

    def nonzero(self, a):
        return self.xp.argwhere(a).astype(np.int64)

    def searchsorted(self, seq, values, right=False, out_int32=False):
        xp = self.xp
        side = "right" if right else "left"
        dtype = np.int32 if out_int32 else np.int64
        if seq.ndim == 1:
            return xp.asarray(xp.searchsorted(seq, values, side=side), dtype=dtype)
        # the rows counted, not inferred: a sequence of length 0 has as many (-1 is ambiguous)
        n = math.prod(seq.shape[:-1])
        if not n:
            return xp.zeros(values.shape, dtype)
        rows = seq.reshape(n, seq.shape[-1])
        vrows = values.reshape(n, values.shape[-1])
        out = xp.stack([xp.searchsorted(s, v, side=side) for s, v in zip(rows, vrows)])
        return out.reshape(values.shape).astype(dtype)

    def bincount(self, a, weights=None, minlength=0):
        xp = self.xp
        out = xp.bincount(a, weights=weights, minlength=minlength)
        if weights is None:
            return out.astype(np.int64)
        return out.astype(weights.dtype if weights.dtype == np.float32 else np.float64)

    def histc(self, a, bins=100, min=0.0, max=0.0):
        xp = self.xp
        lo, hi = float(min), float(max)
        if lo == hi and a.size:
            lo, hi = float(a.min()), float(a.max())
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        counts, _ = xp.histogram(a, bins=bins, range=(lo, hi))
        return counts.astype(a.dtype)
