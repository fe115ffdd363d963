"""What the op families of :mod:`torcia._ops` share: the common shape rules and the
half-precision wrapper of decompositions. Imports nothing of torcia but dtypes, so that
:mod:`torcia.ops` (below the Tensor) can read the declarations."""

from __future__ import annotations

import numpy as np

from torcia import _dtype as D

#: the dtypes whose decompositions compute in float32 and round once, as the reference
#: kernels (and PyTorch's opmath) do: rounding after each step would drift by several ulps
HALF = (D.float16, D.bfloat16)


def first_shape(x, *rest, **params):
    """The first input's shape and dtype: ``x`` with the same shape as ``g`` (backward
    of activations, ``masked_fill``, ``softmax``...)."""
    return x.shape, x.dtype


def grad_like(g, x, *rest, **params):
    """The broadcast of a gradient and an input, in their common dtype (the fused
    ``*_backward`` ops of elementwise functions)."""
    return np.broadcast_shapes(g.shape, x.shape), np.result_type(g.dtype, x.dtype)


def opmath(fn):
    """``fn`` computed in float32 for half-precision tensors, its result rounded back.
    Tensors are told by their torcia dtype (this module is below the Tensor class)."""
    def run(a, *args, **kw):
        if getattr(a, "dtype", None) in HALF:
            wide = [t.float() if getattr(t, "dtype", None) in HALF else t for t in args]
            return fn(a.float(), *wide, **kw).to(a.dtype)
        return fn(a, *args, **kw)

    run.__name__ = fn.__name__
    run.__wrapped__ = fn  # its signature and source (the op reference shows the source)
    return run
