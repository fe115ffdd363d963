"""Sample-input generators: a family per kind of op, and the ops of their own kind.

A generator takes the record, a dtype name and a NumPy generator and returns a list of
:class:`~opinfo.core.Sample`: values of each dtype's range (edges included: 0, -0.0,
+-inf, NaN, the integer limits), 0-dim, empty and non-contiguous tensors, broadcasting,
Python numbers, and arguments PyTorch refuses (``kind="refuse"``). Families read options
from the record's ``args`` (``domain``, ``dim``, ...).
"""

from __future__ import annotations

import numpy as np

from .core import BOOL, COMPLEX, INTS, Derived, Dtype, Sample, T

GENERATORS: dict = {}


def generator(name):
    def register(fn):
        GENERATORS[name] = fn
        return fn

    return register


def samples_for(info, dtype, rng):
    return GENERATORS[info.samples](info, dtype, rng)


# ----- values -----------------------------------------------------------------------------

_DOMAINS = {
    # name: (low, high) of the ordinary values; edges are added per dtype
    "real": (-3.0, 3.0), "positive": (0.1, 4.0), "unit": (-0.95, 0.95), "prob": (0.02, 0.98),
    "ge1": (1.05, 4.0), "nonneg": (0.0, 4.0), "small": (-1.0, 1.0), "wide": (-30.0, 30.0),
}


def values(rng, shape, dtype, domain="real"):
    """Ordinary values of ``dtype`` in ``domain`` ("distinct": no two equal, so that the
    indices sorting and selecting ops return are unambiguous)."""
    if dtype in BOOL:
        return rng.integers(0, 2, shape).astype(bool)
    if domain == "distinct":
        n = int(np.prod(shape))
        start = 0 if dtype == "uint8" else -(n // 2)
        x = rng.permutation(n) + start
        return (x if dtype in INTS else x * 0.5 + 0.25).reshape(shape).astype(
            dtype if dtype in INTS else np.float64)
    low, high = _DOMAINS[domain]
    if dtype in INTS:
        lo = max(int(np.floor(low)), 0 if dtype == "uint8" else -9)
        hi = max(int(np.ceil(high)), lo + 2)
        if domain in ("positive", "ge1"):
            lo = max(lo, 1)
        return rng.integers(lo, hi, shape).astype(dtype)
    x = rng.uniform(low, high, shape)
    if dtype in COMPLEX:
        x = x + 1j * rng.uniform(low, high, shape)
    return x


def edges(dtype, domain="real"):
    """The edge values of ``dtype`` an op should handle: 1-D."""
    if dtype in BOOL:
        return np.array([True, False])
    if dtype in INTS:
        info = np.iinfo(dtype)
        vals = [0, 1, info.max, info.min, info.max - 1] + ([-1] if info.min else [])
        if domain in ("positive", "ge1"):
            vals = [1, 2, int(info.max)]
        return np.array(vals, dtype=dtype)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 1e-30, -1e-30, 1e30, 7.5]
    if domain in ("positive", "ge1", "prob", "nonneg", "unit"):
        special += [1.0 - 1e-7, 1e-7]
    x = np.array(special)
    if dtype in COMPLEX:
        with np.errstate(invalid="ignore"):  # inf * 1j: the (nan, inf) edge it is meant to be
            x = np.concatenate([x + 0j, x * 1j, np.array([np.nan + 1j, 1 + np.inf * 1j])])
    return x


def tensor(rng, shape, dtype, domain="real", noncontig=False, grad=True):
    return T(values(rng, shape, dtype, domain), dtype, noncontig=noncontig, grad=grad)


def scalar_for(dtype, rng):
    """Python numbers that meet a tensor of ``dtype`` in a binary op."""
    out = [2, -1.5, True]
    if dtype in COMPLEX:
        out.append(0.5 - 1j)
    return out


# ----- families ---------------------------------------------------------------------------

SHAPES = [(3, 4), (7,), (), (0,), (2, 0, 3)]


@generator("unary")
def unary(info, dtype, rng):
    """``op(x, **kwargs)`` elementwise: shapes, a non-contiguous input, edge values."""
    domain = info.arg("domain", "real")
    kwargs = dict(info.arg("kwargs", {}))
    out = []
    for shape in SHAPES:
        kind = "zero-dim" if shape == () else "empty" if 0 in shape else "value"
        out.append(Sample((tensor(rng, shape, dtype, domain),), dict(kwargs), kind))
    out.append(Sample((tensor(rng, (4, 5), dtype, domain, noncontig=True),), dict(kwargs),
                      "noncontig"))
    out.append(Sample((T(edges(dtype, domain), dtype, grad=False),), dict(kwargs), "edge"))
    for extra in info.arg("variants", ()):
        out.append(Sample((tensor(rng, (3, 4), dtype, domain),), {**kwargs, **extra}))
    return out


BINARY_SHAPES = [((3, 4), (3, 4), "value"), ((3, 4), (4,), "broadcast"),
                 ((2, 1, 4), (3, 1), "broadcast"), ((), (3,), "zero-dim"),
                 ((3,), (), "zero-dim"), ((0, 2), (2,), "empty")]


@generator("binary")
def binary(info, dtype, rng):
    """``op(x, y)`` elementwise with broadcasting, Python numbers and a second dtype."""
    da, db = info.arg("domain", "real"), info.arg("other_domain", info.arg("domain", "real"))
    kwargs = dict(info.arg("kwargs", {}))
    out = []
    for sa, sb, kind in BINARY_SHAPES:
        out.append(Sample((tensor(rng, sa, dtype, da), tensor(rng, sb, dtype, db)),
                          dict(kwargs), kind))
    out.append(Sample((tensor(rng, (4, 5), dtype, da, noncontig=True),
                       tensor(rng, (4, 5), dtype, db, noncontig=True)), dict(kwargs),
                      "noncontig"))
    e = edges(dtype, da)
    out.append(Sample((T(e, dtype, grad=False), T(np.roll(edges(dtype, db), 3)[:e.size], dtype,
                                                   grad=False)), dict(kwargs), "edge"))
    if info.arg("scalars", True):
        for s in scalar_for(dtype, rng):
            out.append(Sample((tensor(rng, (3,), dtype, da), s), dict(kwargs), "scalar"))
        if info.arg("scalar_first", False):
            out.append(Sample((2, tensor(rng, (3,), dtype, db)), dict(kwargs), "scalar"))
    for other in info.arg("mixed", ("int64", "float64", "bool")):
        if other != dtype:
            out.append(Sample((tensor(rng, (3,), dtype, da), tensor(rng, (3,), other, db)),
                              dict(kwargs), "promote"))
            out.append(Sample((tensor(rng, (3,), dtype, da), tensor(rng, (), other, db)),
                              dict(kwargs), "promote"))
    return out


@generator("reduce")
def reduce(info, dtype, rng):
    """``op(x, dim, keepdim)`` over no dim, one, several, a 0-dim tensor's and an empty
    one's; ``dtype=`` where the op takes it."""
    domain = info.arg("domain", "real")
    dims = info.arg("dims", (None, 0, -1, (0, 1)))
    has_keepdim = info.arg("keepdim", True)
    out = []

    def call(x, dim, keepdim, kind="value", **extra):
        kw = dict(info.arg("kwargs", {}), **extra)
        args = (x,)
        if dim is not None or info.arg("dim_required", False):
            kw["dim"] = dim if dim is not None else 0
        if has_keepdim and keepdim:
            kw["keepdim"] = True
        return Sample(args, kw, kind)

    x = tensor(rng, (3, 4), dtype, domain)
    for dim in dims:
        for keepdim in (False, True) if has_keepdim else (False,):
            out.append(call(x, dim, keepdim))
    out.append(call(tensor(rng, (4, 5), dtype, domain, noncontig=True), -1, False, "noncontig"))
    zero = tensor(rng, (), dtype, domain)
    out.append(call(zero, None, False, "zero-dim"))
    for d in (0, -1):
        out.append(call(zero, d, True, "zero-dim"))
    out.append(call(tensor(rng, (2, 0), dtype, domain), 1, False, "empty"))
    out.append(call(tensor(rng, (0, 3), dtype, domain), 1, False, "empty"))
    out.append(call(T(edges(dtype, domain), dtype, grad=False), 0, False, "edge"))
    out.append(call(x, 2, False, "refuse"))
    for out_dtype in info.arg("dtype_arg", ()):
        out.append(call(x, None, False, "promote", dtype=Dtype(out_dtype)))
        out.append(call(x, 0, False, "promote", dtype=Dtype(out_dtype)))
    return out


@generator("scan")
def scan(info, dtype, rng):
    """``op(x, dim)`` along one dim (a cumulative op)."""
    domain = info.arg("domain", "real")
    kw = dict(info.arg("kwargs", {}))
    x = tensor(rng, (3, 4), dtype, domain)
    out = [Sample((x, d), dict(kw)) for d in (0, 1, -1)]
    out.append(Sample((tensor(rng, (4, 5), dtype, domain, noncontig=True), 1), dict(kw),
                      "noncontig"))
    out.append(Sample((tensor(rng, (), dtype, domain), 0), dict(kw), "zero-dim"))
    out.append(Sample((tensor(rng, (0, 3), dtype, domain), 0), dict(kw), "empty"))
    out.append(Sample((T(edges(dtype, domain), dtype, grad=False), 0), dict(kw), "edge"))
    out.append(Sample((x, 2), dict(kw), "refuse"))
    for out_dtype in info.arg("dtype_arg", ()):
        out.append(Sample((x, 1), dict(kw, dtype=Dtype(out_dtype)), "promote"))
    return out


@generator("calls")
def calls(info, dtype, rng):
    """Explicit calls: ``args["calls"]`` lists ``(args, kwargs, kind)`` (kwargs and kind
    optional). In them ``("x", shape)`` is a tensor of the sample's dtype in the record's
    domain, ``("nc", shape)`` a non-contiguous one, ``("t", shape, dtype[, domain])`` a
    tensor of another dtype, ``("i", values)`` an int64 tensor, ``("v", values[, dtype])``
    a tensor of those values, ``("dtype", name)`` a dtype (``"same"``: the sample's);
    anything else is passed as it is."""
    domain = info.arg("domain", "real")
    out = []
    for entry in info.arg("calls"):
        args = entry[0]
        kwargs = entry[1] if len(entry) > 1 else {}
        kind = entry[2] if len(entry) > 2 else "value"
        out.append(Sample(tuple(_spec(a, dtype, domain, rng) for a in args),
                          {k: _spec(v, dtype, domain, rng) for k, v in kwargs.items()}, kind))
    return out


def _spec(a, dtype, domain, rng):
    tag = a[0] if isinstance(a, tuple) and a and isinstance(a[0], str) else None
    if tag == "x":
        return tensor(rng, a[1], dtype, domain)
    if tag == "c":
        if len(a) > 2:
            return tensor(rng, a[1], a[2], a[3] if len(a) > 3 else domain, grad=False)
        return tensor(rng, a[1], dtype, domain, grad=False)
    if tag == "nc":
        return tensor(rng, a[1], dtype, domain, noncontig=True)
    if tag == "t":
        return tensor(rng, a[1], a[2], a[3] if len(a) > 3 else domain)
    if tag == "i":
        return T(np.asarray(a[1], dtype=np.int64), "int64", grad=False)
    if tag == "v":
        name = dtype if len(a) < 3 else a[2]
        # the given values as they are, floats in float64 as values() leaves them: NumPy
        # knows bfloat16 only once ml_dtypes is loaded
        held = name if name in INTS or name in BOOL else np.complex128 if name in COMPLEX \
            else np.float64
        return T(np.asarray(a[1]).astype(held), name)
    if tag == "dtype":
        return Dtype(dtype if a[1] == "same" else a[1])
    if tag == "derive-c":
        # a spectrogram of a real signal of the complex dtype's parts
        real = {"complex64": "float32", "complex128": "float64"}.get(dtype, dtype)
        return Derived(a[1], tuple(_spec(v, real, domain, rng) for v in a[2]),
                       kwargs={"return_complex": True})
    if tag == "derive":
        return Derived(a[1], tuple(_spec(v, dtype, domain, rng) for v in a[2]), a[3])
    if tag == "logsm":
        return Derived("nn.functional.log_softmax", (tensor(rng, a[1], dtype, domain), -1))
    if tag in ("sq", "spd", "tril", "triu"):
        return T(_matrix(rng, tag, a[1], dtype), dtype)
    if isinstance(a, list):
        return [_spec(v, dtype, domain, rng) for v in a]
    if isinstance(a, tuple):
        return tuple(_spec(v, dtype, domain, rng) for v in a)
    return a


def _matrix(rng, kind, shape, dtype):
    """Well-conditioned matrices for the linear algebra: diagonally dominant ("sq"),
    symmetric (Hermitian) positive definite ("spd"), or triangular with a dominant
    diagonal ("tril", "triu")."""
    n = shape[-1]
    a = values(rng, shape, dtype, "small")
    if dtype in BOOL or dtype in INTS:
        return a
    eye = np.eye(shape[-2], n) if len(shape) > 1 else np.eye(n)
    if kind == "spd":
        a = a @ np.conj(np.swapaxes(a, -1, -2)) + n * eye
    else:
        a = a + n * eye
    if kind in ("tril", "triu"):
        # a real diagonal: what a Cholesky factor of a Hermitian matrix has
        a = np.tril(a) if kind == "tril" else np.triu(a)
        idx = np.arange(n)
        a[..., idx, idx] = a[..., idx, idx].real
    return a
