"""Sorting, selection and counting: ``sort``, ``topk``, ``kthvalue``, ``unique``,
``searchsorted``, ``bucketize``, ``bincount``, ``histc``/``histogram``, ``isin``... The
public functions of the ops (``sort``... ``histc``) are written beside their declarations
in :mod:`torcia._ops.sorting`; here are those built on them.
"""

from __future__ import annotations

import builtins

import numpy as np

from torcia import _creation as C
from torcia import _dtype as D
from torcia._oplib._common import _return_type
from torcia._oplib.elementwise import to_dtype
from torcia._oplib.views import cat
from torcia._ops import sorting as _declared
from torcia._ops.sorting import searchsorted, sort
from torcia._tensor import Tensor, _cpp_name, result_type

#: the public functions declared beside their ops in torcia._ops.sorting
globals().update({fn.__name__: fn for fn in _declared.PUBLIC})




def argsort(input, dim=-1, descending=False, stable=False):
    """The indices that sort ``input`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> torcia.argsort(torcia.tensor([3, 1, 2]), descending=True)
    tensor([0, 2, 1])
    """
    return sort(input, dim, descending, stable).indices


def msort(input):
    """Sort along the first dim.

    Examples
    --------
    >>> import torcia
    >>> torcia.msort(torcia.tensor([[3, 1], [1, 2]]))
    tensor([[1, 1],
            [3, 2]])
    """
    return sort(input, 0).values










def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each element of ``input`` among the 1-D sorted ``boundaries``.

    Examples
    --------
    >>> import torcia
    >>> torcia.bucketize(torcia.tensor([0.5, 1.0, 2.5]), torcia.tensor([1.0, 2.0]))
    tensor([0, 0, 2])
    """
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)






def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Collapse runs of equal consecutive elements (of the flattened input, or slices
    along ``dim``).

    Examples
    --------
    >>> import torcia
    >>> torcia.unique_consecutive(torcia.tensor([1, 1, 2, 2, 1]), return_counts=True)
    (tensor([1, 2, 1]), tensor([2, 2, 1]))
    """
    x = input.reshape(-1) if dim is None else input.movedim(dim, 0)
    n = x.shape[0]
    if n == 0:
        outs = [input]
    else:
        flat = x.reshape(n, -1)
        change = C.ones(n, dtype=D.bool_, device=input.device)
        if n > 1:
            change[1:] = (flat[1:] != flat[:-1]).any(dim=1)
        starts = change.nonzero().reshape(-1)
        values = x[starts]
        outs = [values if dim is None else values.movedim(0, dim)]
        if return_inverse:
            inverse = change.long().cumsum(0) - 1
            outs.append(inverse.reshape(input.shape) if dim is None else inverse)
        if return_counts:
            ends = cat([starts[1:], C.tensor([n], device=input.device)])
            outs.append(ends - starts)
    return outs[0] if len(outs) == 1 else tuple(outs)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Where each of ``elements`` occurs in ``test_elements``.

    Examples
    --------
    >>> import torcia
    >>> torcia.isin(torcia.tensor([1, 2, 3]), torcia.tensor([2, 5]))
    tensor([False,  True, False])
    """

    device = (elements if isinstance(elements, Tensor) else test_elements).device
    el = elements if isinstance(elements, Tensor) else C.tensor(elements, device=device)
    te = test_elements if isinstance(test_elements, Tensor) else \
        C.tensor(test_elements, device=device)
    dt = result_type(el, te)
    if dt is D.bool_:  # torcia is lenient here (torch refuses bool); searched as uint8
        dt = D.uint8
    # with tensor ops, not NumPy on the host: they run on the meta device and under vmap
    flat, te = to_dtype(el, dt).reshape(-1), to_dtype(te, dt).reshape(-1)
    if not te.numel() or not flat.numel():
        found = C.zeros(flat.shape, dtype=D.bool_, device=device)
    elif dt.is_complex:  # no order to search in: compare with every test element
        found = (flat.unsqueeze(-1) == te).any(-1)
    else:
        ordered = te.sort().values
        at = searchsorted(ordered, flat).clamp(max=te.numel() - 1)
        found = ordered.take(at) == flat
    found = found.reshape(el.shape)
    return ~found if invert else found


_Histogram = _return_type("histogram", ("hist", "bin_edges"))


def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """Histogram of ``input``'s values: ``bins`` equal bins over ``range`` (default the
    data's extent) or explicit edges; returns ``(hist, bin_edges)``, as NumPy's.

    Examples
    --------
    >>> import torcia
    >>> hist, edges = torcia.histogram(torcia.tensor([1.0, 2.0, 2.0, 4.0]), bins=3)
    >>> hist
    tensor([1., 2., 1.])
    >>> edges
    tensor([1., 2., 3., 4.])
    """
    # tensor ops rather than NumPy on the host: they run under vmap (each sample its own
    # range) and on any device
    x = input.detach().reshape(-1)
    dev = input.device
    if isinstance(bins, Tensor) and range is not None:
        raise TypeError("histogram(): range= goes with a number of bins; bins given as a "
                        "tensor of edges bound the histogram themselves")
    if weight is not None and weight.dtype != input.dtype:
        raise RuntimeError(f"torch.histogramdd: if weight tensor is provided, input tensor "
                           f"and weight tensor should have the same dtype, but got "
                           f"input({_cpp_name(input.dtype)}), and weight"
                           f"({_cpp_name(weight.dtype)})")
    if isinstance(bins, Tensor):
        if bins.dtype != input.dtype:
            raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have "
                               f"the same dtype, but got input with dtype "
                               f"{_cpp_name(input.dtype)} and bins for dimension 0 with dtype "
                               f"{_cpp_name(bins.dtype)}")
        if bins.numel() < 2:
            raise RuntimeError("torch.histogram(): bins must be > 0, but got 0 for dimension 0")
        edges = bins.detach()
    else:
        n = int(bins)
        if n <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {n} for "
                               f"dimension 0")
        if range is not None:
            lo, hi = (C.full((), float(r), dtype=D.float64, device=dev) for r in range)
        elif x.numel():
            lo, hi = x.amin().double(), x.amax().double()
        else:
            lo, hi = (C.full((), r, dtype=D.float64, device=dev) for r in (0.0, 1.0))
        # every sample's range at once (a batched array's min and max take them all)
        first, last = float(lo._data.min()), float(hi._data.max())
        if first > last:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min "
                               f"{first:g} max {last:g} for dimension 0")
        if not (np.isfinite(first) and np.isfinite(last)):
            raise RuntimeError(f"torch.histogramdd: dimension 0's range [{first:g}, {last:g}] "
                               f"is not finite")
        same = (lo == hi).double() * 0.5  # an empty range widened, as NumPy's
        # the edges in the input's dtype by PyTorch's linspace (from each end towards the
        # middle): the values on an edge fall in the bin torch's do (integers, which torch
        # refuses, in float64)
        ct = input.dtype if input.is_floating_point() else D.float64
        lo, hi = (lo - same).to(ct), (hi + same).to(ct)
        at = C.arange(n + 1, dtype=ct, device=dev)
        step = (hi - lo) / n
        edges = (lo + step * at).where(at < (n + 1) // 2, hi - step * (n - at))
    n = edges.numel() - 1
    xe = x.to(edges.dtype)
    # the bin whose edges hold the value, the last one closed on the right
    at = searchsorted(edges, xe, right=True).sub(1).clamp(0, n - 1)
    keep = ((xe >= edges[0]) & (xe <= edges[-1])).double()
    w = keep if weight is None else keep * weight.detach().reshape(-1).double()
    hist = C.zeros(n, dtype=D.float64, device=dev).scatter_add(0, at, w)
    if density:
        hist = hist / (edges[1:] - edges[:-1]).double() / hist.sum()
    return _Histogram(hist.to(input.dtype), edges.to(input.dtype, copy=True))



_Histogramdd = _return_type("histogramdd", ("hist", "bin_edges"))


def histogramdd(input, bins=10, *, range=None, weight=None, density=False):  # noqa: A002
    """The histogram of the points in ``input`` (``... x D``: the last dimension holds
    each point's coordinates): ``bins`` is a number of equal bins per dimension, a list of
    them, or a list of 1-D tensors of bin edges; ``range`` is ``[lo0, hi0, lo1, hi1...]``.
    Returns ``(hist, bin_edges)``, ``bin_edges`` a list of one tensor per dimension.

    Examples
    --------
    >>> import torcia
    >>> pts = torcia.tensor([[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    >>> torcia.histogramdd(pts, bins=[2, 2]).hist
    tensor([[1., 0.],
            [1., 1.]])
    """
    if not input.is_floating_point():
        raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have "
                           f"the same dtype, but got input {input.dtype}")
    pts = input.detach().cpu().numpy()
    ndim = pts.shape[-1]
    pts = pts.reshape(-1, ndim)
    if isinstance(bins, Tensor):
        bins = bins.tolist()
    if isinstance(bins, (list, tuple)):
        bins = [b.detach().cpu().numpy() if isinstance(b, Tensor) else int(b) for b in bins]
    ranges = None
    if range is not None:
        r = list(range)
        if len(r) != 2 * ndim:
            raise RuntimeError(f"torch.histogramdd: for a {ndim}-dimensional histogram, range "
                               f"should have {2 * ndim} elements, but got {len(r)}")
        ranges = [(r[2 * k], r[2 * k + 1]) for k in builtins.range(ndim)]
    w = None if weight is None else weight.detach().cpu().numpy().reshape(-1)
    hist, edges = np.histogramdd(pts, bins, range=ranges, weights=w, density=density)
    dt = pts.dtype
    return _Histogramdd(C.tensor(hist.astype(dt), device=input.device),
                        [C.tensor(e.astype(dt), device=input.device) for e in edges])


#: the functions here that are also Tensor methods, under the same name
METHODS = tuple(fn.__name__ for fn in _declared.PUBLIC if fn is not searchsorted) + (
    "argsort", "msort",
)

#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = (
    "unique_consecutive", "isin", "histogram",
)

#: the names ``torcia`` exports from here
__all__ = sorted(tuple(fn.__name__ for fn in _declared.PUBLIC) + (
    "argsort", "bucketize", "histogram", "histogramdd", "isin", "msort", "unique_consecutive",
))
