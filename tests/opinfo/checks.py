"""The properties checked of each record, one function each; every one returns a list of
:class:`Finding` (empty when the property holds on the sample).

- ``torch``: torcia and torch 2.13 agree on the sample: both raise (errors of one class),
  or both return the same structure with the same shapes, dtypes, NaN positions and
  values within the dtype's tolerance;
- ``grad`` / ``gradgrad``: finite differences in float64 (``torcia.autograd.gradcheck``),
  with ``forward_ad`` also forward mode against reverse mode;
- ``vmap``: ``torcia.func.vmap`` of the op over a batch is the stack of its calls;
- ``meta``: on the "meta" device the op gives the shapes and dtypes it gives on "cpu";
- ``native``: the kernels of torcia-cpu give what the NumPy reference kernels give;
- ``no_write``: an out-of-place op leaves its inputs as they were.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import warnings

import numpy as np

import torcia

from .core import COMPLEX, FLOAT_COMPLEX, HALF, INTS, Dtype, Sample, T, _walk, resolve, to_lib

try:  # the specification, where installed: its checks are skipped elsewhere
    import torch
except ImportError:
    torch = None


@dataclasses.dataclass
class Finding:
    """A property that does not hold: ``what`` is a short category, ``detail`` the rest."""

    prop: str
    what: str
    detail: str = ""


def call(lib, path, sample, **materialise):
    """Run ``path`` of ``lib`` on ``sample``; returns ("ok", value) or ("error", exc)
    (making the arguments may raise too: a factorisation of a dtype refused)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            args = to_lib(lib, sample.args, **materialise)
            kwargs = to_lib(lib, sample.kwargs, **materialise)
            return "ok", resolve(lib, path)(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any error is an outcome to compare
            return "error", exc


# ----- comparing results -----------------------------------------------------------------

_BASES = (NotImplementedError, IndexError, KeyError, ZeroDivisionError, OverflowError,
          TypeError, ValueError, AttributeError, RuntimeError, ArithmeticError, LookupError,
          Exception)


def error_class(exc) -> str:
    """The most specific built-in class of ``exc``: what PyTorch's contract names.
    NotImplementedError counts as the RuntimeError it derives from: PyTorch raises it
    for a dtype without a kernel where torcia's checks raise RuntimeError, and
    ``except RuntimeError`` catches both."""
    for base in _BASES:
        if isinstance(exc, base):
            return "RuntimeError" if base is NotImplementedError else base.__name__
    return type(exc).__name__


def same_error(ours, theirs) -> bool:
    """Whether torcia's error is of the class torch's is (an ``except`` clause written
    for torch's catches it), NotImplementedError and RuntimeError counting as one."""
    return error_class(ours) == error_class(theirs) or (
        error_class(theirs) != "Exception" and isinstance(
            ours, next(b for b in _BASES if b.__name__ == error_class(theirs))))


#: (rtol, atol) per dtype: one or two roundings of the dtype, as PyTorch's OpInfo tests
TOLERANCES = {"float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (1.3e-5, 1e-5),
              "float64": (1e-7, 1e-7), "complex64": (1.3e-5, 1e-5), "complex128": (1e-7, 1e-7)}


def _host(t):
    """A torcia or torch tensor as (dtype name, NumPy array) on the host."""
    name = str(t.dtype).split(".")[-1]
    t = t.detach()
    if hasattr(t, "resolve_conj"):
        t = t.resolve_conj().resolve_neg()  # torch's lazy conjugate and negative views
    if name == "bfloat16":
        t = t.float()
    arr = t.cpu().numpy() if hasattr(t, "cpu") else t.numpy()
    return name, np.asarray(arr)


def _is_tensor(x):
    return isinstance(x, torcia.Tensor) or (torch is not None and isinstance(x, torch.Tensor))


def compare(ours, theirs, tol=1.0, where="result"):
    """Why ``ours`` (torcia's result) differs from ``theirs`` (torch's), or None."""
    if _is_tensor(ours) or _is_tensor(theirs):
        if not (_is_tensor(ours) and _is_tensor(theirs)):
            return f"{where}: a {type(ours).__name__} where torch gives a {type(theirs).__name__}"
        return _compare_tensors(ours, theirs, tol, where)
    if isinstance(ours, (tuple, list)) and isinstance(theirs, (tuple, list)):
        if len(ours) != len(theirs):
            return f"{where}: {len(ours)} items where torch gives {len(theirs)}"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            why = compare(a, b, tol, f"{where}[{i}]")
            if why:
                return why
        return None
    if isinstance(ours, dict) and isinstance(theirs, dict):
        if set(ours) != set(theirs):
            return f"{where}: keys {sorted(ours)} where torch gives {sorted(theirs)}"
        for k in ours:
            why = compare(ours[k], theirs[k], tol, f"{where}[{k!r}]")
            if why:
                return why
        return None
    a, b = _plain(ours), _plain(theirs)
    if isinstance(a, str) and isinstance(b, str) and a.startswith("torch.") != b.startswith(
            "torch."):
        # a dtype: torcia.bfloat16 against torch.bfloat16, by name
        a, b = a.split(".")[-1], b.split(".")[-1]
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return None
        if math.isclose(a, b, rel_tol=1e-6 * tol, abs_tol=1e-9 * tol):
            return None
    if a != b:
        return f"{where}: {a!r:.80} where torch gives {b!r:.80}"
    return None


def _plain(x):
    """Non-tensor results in a library-neutral form (dtypes and devices by name)."""
    if x is None or isinstance(x, (bool, int, float, complex, str)):
        return x.replace("torcia", "torch") if isinstance(x, str) else x
    name = type(x).__name__
    if name in ("dtype",) or str(x).startswith(("torch.", "torcia.")) and "dtype" in name:
        return str(x).split(".")[-1]
    if name == "device":
        return str(x)
    if name == "Size":
        return tuple(x)
    return repr(x).replace("torcia", "torch")


def _compare_tensors(a, b, tol, where):
    if tuple(a.shape) != tuple(b.shape):
        return f"{where}: shape {list(a.shape)} where torch gives {list(b.shape)}"
    da, x = _host(a)
    db, y = _host(b)
    if da != db:
        return f"{where}: dtype {da} where torch gives {db}"
    if x.dtype.kind in "biu":
        if not np.array_equal(x, y):
            bad = np.argwhere(x != y)[0]
            return (f"{where}: {x[tuple(bad)]!r} at {tuple(bad)} where torch gives "
                    f"{y[tuple(bad)]!r}")
        return None
    if x.dtype.kind == "c":
        # real and imaginary parts as two floats each: NaN and infinity part by part
        x, y = np.stack([x.real, x.imag]), np.stack([y.real, y.imag])
    nan_x, nan_y = np.isnan(x), np.isnan(y)
    if not np.array_equal(nan_x, nan_y):
        bad = np.argwhere(nan_x != nan_y)[0]
        return (f"{where}: NaN positions differ, {x[tuple(bad)]!r} at {tuple(bad)} where "
                f"torch gives {y[tuple(bad)]!r}")
    rtol, atol = TOLERANCES.get(da, (0.0, 0.0))
    rtol, atol = rtol * tol, atol * tol
    ok = ~nan_x
    xs, ys = x[ok], y[ok]
    inf = np.isinf(xs) | np.isinf(ys)
    if not np.array_equal(xs[inf], ys[inf]):
        return f"{where}: infinities differ ({xs[inf][:3]} where torch gives {ys[inf][:3]})"
    close = np.abs(xs[~inf] - ys[~inf]) <= atol + rtol * np.abs(ys[~inf])
    if not close.all():
        i = np.argmin(close)
        got, want = xs[~inf][i], ys[~inf][i]
        return (f"{where}: {got!r} where torch gives {want!r} (|diff| {abs(got - want):.3g}, "
                f"rtol {rtol:.2g}, atol {atol:.2g})")
    zero = (xs == 0) & (ys == 0)
    if not np.array_equal(np.signbit(xs[zero]), np.signbit(ys[zero])):
        i = np.argmax(np.signbit(xs[zero]) != np.signbit(ys[zero]))
        return f"{where}: {xs[zero][i]!r} where torch gives {ys[zero][i]!r} (the sign of zero)"
    return None


# ----- the properties -----------------------------------------------------------------------


def check_torch(info, sample, random=False):
    """Agreement with torch; returns ([findings], outcome) where outcome is "agree",
    "both-raise" or "differ"."""
    ours = call(torcia, info.path, sample)
    theirs = call(torch, info.torch_path, sample)
    if ours[0] == "error" or theirs[0] == "error":
        if ours[0] == theirs[0]:
            if same_error(ours[1], theirs[1]):
                return [], "both-raise"
            return [Finding("torch", "error class",
                            f"{error_class(ours[1])}: {ours[1]!s:.120} where torch raises "
                            f"{error_class(theirs[1])}: {theirs[1]!s:.120}")], "differ"
        if ours[0] == "error":
            return [Finding("torch", "refused",
                            f"{error_class(ours[1])}: {ours[1]!s:.160}")], "differ"
        if not random:
            why = _widened_check(info, sample, ours[1])
            if why:
                return [Finding("torch", _kind(why), why)], "differ"
        return [Finding("torch", "accepted",
                        f"torch raises {error_class(theirs[1])}: {theirs[1]!s:.160}")], \
            "differ"
    if random:
        why = _compare_layout(ours[1], theirs[1])
    elif info.arg("gauge"):
        # factors unique up to the sign (phase) of each vector: compare magnitudes
        why = compare(_magnitudes(ours[1]), _magnitudes(theirs[1]), info.tol)
    else:
        why = compare(ours[1], theirs[1], info.tol)
    if why:
        return [Finding("torch", _kind(why), why)], "differ"
    return [], "agree"


def _kind(why):
    """The kind of a difference ``compare`` describes."""
    return ("dtype" if "dtype" in why else "shape" if "shape" in why else
            "nan" if "NaN" in why or "infinit" in why else "value")


def _widened(value, narrow, wide="float32"):
    """A sample's tensors of the dtypes ``narrow`` (and its dtype arguments among them)
    made ``wide``, the values rounded to their dtype first (1e30 is infinity in float16)."""
    if isinstance(value, T) and value.dtype in narrow:
        if wide != "float32":
            values = np.asarray(value.values, wide)
        else:
            with np.errstate(over="ignore"):
                exact = torch.from_numpy(np.asarray(value.values).astype(np.float32))
                if value.dtype in HALF:
                    exact = exact.to(getattr(torch, value.dtype)).float()
            values = exact.numpy()
        return dataclasses.replace(value, values=values, dtype=wide)
    if isinstance(value, Dtype) and value.name in narrow:
        return Dtype(wide)
    if isinstance(value, (list, tuple)):
        return type(value)(_widened(v, narrow, wide) for v in value)
    if isinstance(value, dict):
        return {k: _widened(v, narrow, wide) for k, v in value.items()}
    return value


def _narrowed(x, dtype):
    """torch's float32 results of a widened call, rounded to ``dtype``."""
    if torch is not None and isinstance(x, torch.Tensor):
        return x.to(getattr(torch, dtype)) if x.dtype == torch.float32 else x
    if isinstance(x, (list, tuple)):
        return type(x)(_narrowed(v, dtype) for v in x)
    return x


def _widened_check(info, sample, ours):
    """Why torcia's answer to a sample torch refuses for its dtype (no CPU kernel) is not
    torch's float32 answer on the same values, or None; None too where torch refuses the
    float32 call as well, or where the sample is not one of the two cases checked:

    - half precision (one of float16, bfloat16): torcia computes in float32 and rounds, so
      its answer is torch's float32 answer rounded to the dtype;
    - integer and bool tensors only, with a float32 answer: torch's answer on the values
      made int64 where torch takes int64 (its integer arithmetic, e.g. an average pool's
      truncation, is what the op does in integers), else made float32 (the promotion).

    What torcia promises there is then checked, not only that it answers."""
    given = {t.dtype for t in sample.tensors()}
    halves = (given & set(HALF)) | {v.name for v in _walk((sample.args, sample.kwargs))
                                    if isinstance(v, Dtype) and v.name in HALF}
    outs = ours if isinstance(ours, (tuple, list)) else (ours,)
    if not all(_is_tensor(o) and not o.is_complex() for o in outs):
        # a NumPy array, a number, or complex (no complex bfloat16 to round torch's to)
        return None
    if len(halves) == 1:
        narrow = halves
    elif given and given <= set(INTS + ("bool",)) and all(
            o.dtype == torcia.float32 for o in outs):
        narrow = given
    else:
        return None
    outcome = "error"
    if narrow != halves and not narrow & {"bool", "int64"}:
        wide = Sample(_widened(sample.args, narrow, "int64"),
                      _widened(sample.kwargs, narrow, "int64"), sample.kind)
        outcome, theirs = call(torch, info.torch_path, wide)
    if outcome == "error":
        wide = Sample(_widened(sample.args, narrow), _widened(sample.kwargs, narrow),
                      sample.kind)
        outcome, theirs = call(torch, info.torch_path, wide)
    if outcome == "error":
        return None
    if narrow == halves:
        theirs = _narrowed(theirs, next(iter(halves)))
    if info.arg("gauge"):
        ours, theirs = _magnitudes(ours), _magnitudes(theirs)
    why = compare(ours, theirs, info.tol)
    return why and f"{why} (torch's float32 answer" + (", rounded)" if narrow == halves else ")")


def _magnitudes(x):
    if _is_tensor(x):
        return x.abs() if x.is_floating_point() or x.is_complex() else x
    if isinstance(x, (tuple, list)):
        return tuple(_magnitudes(v) for v in x)
    return x


def _compare_layout(a, b):
    """Random results: only the structure, shapes and dtypes can agree."""
    if isinstance(a, (tuple, list)):
        if len(a) != len(b):
            return f"{len(a)} results where torch gives {len(b)}"
        return next((w for w in map(_compare_layout, a, b) if w), None)
    if _is_tensor(a) and _is_tensor(b):
        if tuple(a.shape) != tuple(b.shape):
            return f"shape {list(a.shape)} where torch gives {list(b.shape)}"
        da, db = str(a.dtype).split(".")[-1], str(b.dtype).split(".")[-1]
        if da != db:
            return f"dtype {da} where torch gives {db}"
    return None


@dataclasses.dataclass
class _Leaf:
    """Where the i-th differentiated tensor goes in a sample's arguments."""

    index: int


def _differentiable_call(info, sample):
    """(fn, leaves): the op as a function of its floating tensors, made float64 leaves."""
    leaves = []

    def collect(value):
        if isinstance(value, T) and value.dtype in FLOAT_COMPLEX and value.grad:
            t = to_lib(torcia, value, requires_grad=True, float64=True)
            leaves.append(t)
            return _Leaf(len(leaves) - 1)
        if isinstance(value, (list, tuple)):
            return type(value)(collect(v) for v in value)
        if isinstance(value, dict):
            return {k: collect(v) for k, v in value.items()}
        return value

    args, kwargs = collect(sample.args), collect(sample.kwargs)
    op = resolve(torcia, info.path)

    def build(value, given):
        if isinstance(value, _Leaf):
            return given[value.index]
        if isinstance(value, (list, tuple)):
            return type(value)(build(v, given) for v in value)
        if isinstance(value, dict):
            return {k: build(v, given) for k, v in value.items()}
        return to_lib(torcia, value, float64=True)

    def fn(*given):
        out = op(*build(args, given), **build(kwargs, given))
        outs = out if isinstance(out, (tuple, list)) else (out,)
        kept = tuple(o for o in outs if isinstance(o, torcia.Tensor) and (
            o.is_floating_point() or o.is_complex()))
        return kept if len(kept) != 1 else kept[0]

    return fn, leaves


def check_grad(info, sample, second=False):
    """Finite differences (first order, with forward mode where recorded; or second).
    Only in double precision: a sample asking for another result dtype (a cast, an
    integer ``dtype=``) and one whose result is not finite (a pole) say nothing."""
    if any(isinstance(a, Dtype) and a.name not in ("float64", "complex128")
           for a in _walk((sample.args, sample.kwargs))):
        return []
    fn, leaves = _differentiable_call(info, sample)
    if not leaves:
        return []
    if info.arg("hermitian"):
        # a function of a Hermitian matrix reads half of it: differentiate it as a
        # function of A + A^H (PyTorch's OpInfo tests do the same)
        inner = fn
        fn = lambda a, *rest: inner((a + a.mH) / 2, *rest)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = fn(*leaves)
        except Exception:  # noqa: BLE001 - the op refuses the sample: the torch check
            return []      # says whether it should
        if isinstance(out, tuple) and not out:
            return [Finding("grad", "no gradient", "no floating output requires grad")]
        if not all(bool(o.detach().isfinite().all()) for o in
                   (out if isinstance(out, tuple) else (out,))):
            return []
        try:
            if second:
                ok = torcia.autograd.gradgradcheck(fn, tuple(leaves))
            else:
                ok = torcia.autograd.gradcheck(
                    fn, tuple(leaves), check_forward_ad="forward_ad" in info.props)
        except Exception as exc:  # noqa: BLE001
            return [Finding("gradgrad" if second else "grad", "mismatch",
                            f"{error_class(exc)}: {exc!s:.300}")]
    return [] if ok else [Finding("gradgrad" if second else "grad", "mismatch", "")]


def _batched(value, rng):
    """A batch of two: ``value`` and its values rolled (same dtype, same domain)."""
    if isinstance(value, T):
        other = np.roll(value.values.reshape(-1), 1).reshape(value.shape)
        return T(np.stack([value.values, other]), value.dtype), T(other, value.dtype)
    return value, value


def check_vmap(info, sample):
    """``vmap(op)`` over a batch of two against the two calls stacked."""
    from torcia.func import vmap

    if not any(isinstance(a, T) for a in sample.args):
        return []  # nothing to map over in the positional arguments
    in_dims, batched, second = [], [], []
    for a in sample.args:
        b, s = _batched(a, None)
        in_dims.append(0 if isinstance(a, T) else None)
        batched.append(b)
        second.append(s)
    op = resolve(torcia, info.path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            kwargs = to_lib(torcia, sample.kwargs)
            singles = [op(*to_lib(torcia, tuple(args)), **kwargs)
                       for args in (sample.args, tuple(second))]
        except Exception:  # noqa: BLE001 - the torch check reports refusals
            return []
        if _stack(singles) is None:
            return []  # no tensor results to map (a string, a Python number)
        try:
            got = vmap(lambda *a: op(*a, **kwargs), in_dims=tuple(in_dims))(
                *to_lib(torcia, tuple(batched)))
        except Exception as exc:  # noqa: BLE001
            return [Finding("vmap", "raised", f"{error_class(exc)}: {exc!s:.200}")]
    want = _stack(singles)
    if want is None:
        return []
    why = compare_torcia(got, want, info.tol)
    return [Finding("vmap", "mismatch", why)] if why else []


def _stack(results):
    first = results[0]
    if isinstance(first, torcia.Tensor):
        return torcia.stack(results)
    if isinstance(first, (tuple, list)) and all(isinstance(r, torcia.Tensor) for r in first):
        return tuple(torcia.stack(parts) for parts in zip(*results))
    return None


def compare_torcia(a, b, tol=1.0):
    """``compare`` between two torcia results (dtype-aware, NaN positions)."""
    return compare(a, b, tol)


def check_meta(info, sample):
    """On the "meta" device: the shapes and dtypes of the "cpu" result."""
    cpu = call(torcia, info.path, sample)
    if cpu[0] == "error" or not sample.tensors():
        return []
    meta = call(torcia, info.path, sample, device="meta")
    if meta[0] == "error":
        return [Finding("meta", "raised", f"{error_class(meta[1])}: {meta[1]!s:.200}")]
    why = _compare_layout(meta[1], cpu[1])
    return [Finding("meta", "mismatch", why)] if why else []


@contextlib.contextmanager
def reference_kernels():
    """Run "cpu" ops on the NumPy reference kernels instead of the installed ones."""
    from torcia import library
    from torcia.backend import device

    cpu = device("cpu")
    cpu.backend  # noqa: B018 - builds the tables
    saved = cpu.kernels
    table = dict(saved)
    table.update(library.ReferenceKernels().table())
    cpu.kernels = table
    try:
        yield
    finally:
        cpu.kernels = saved


def check_native(info, sample):
    """The installed "cpu" kernels (torcia-cpu's where it overrides) against the reference."""
    native = call(torcia, info.path, sample)
    with reference_kernels():
        ref = call(torcia, info.path, sample)
    if native[0] != ref[0]:
        bad = native if native[0] == "error" else ref
        side = "native" if native[0] == "error" else "reference"
        return [Finding("native", f"{side} raised", f"{bad[1]!s:.200}")]
    if native[0] == "error":
        return []
    # native kernels may sum in another order: a few roundings of the dtype
    why = compare(native[1], ref[1], 4.0 * info.tol)
    return [Finding("native", "mismatch", why)] if why else []


def check_no_write(info, sample):
    """An out-of-place op leaves its tensor inputs unchanged."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            args = to_lib(torcia, sample.args)
            kwargs = to_lib(torcia, sample.kwargs)
            inputs = [t for t in _tensors((args, kwargs))]
            before = [_host(t)[1].copy() for t in inputs]
            resolve(torcia, info.path)(*args, **kwargs)
        except Exception:  # noqa: BLE001 - the torch check reports refusals
            return []
    for i, (t, old) in enumerate(zip(inputs, before)):
        if not np.array_equal(_host(t)[1], old, equal_nan=old.dtype.kind in "fc"):
            return [Finding("no_write", "input written", f"input {i} changed")]
    return []


def _tensors(x):
    if isinstance(x, torcia.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)


def complex_sample(sample) -> bool:
    return any(t.dtype in COMPLEX for t in sample.tensors())
