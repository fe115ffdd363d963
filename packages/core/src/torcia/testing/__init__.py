"""``torcia.testing``: comparing tensors in tests, as ``torch.testing``.

Examples
--------
>>> import torcia
>>> from torcia.testing import assert_close
>>> assert_close(torcia.tensor([1.0, 2.0]), torcia.tensor([1.0, 2.0000001]))
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from torcia import _creation
from torcia import _dtype as D
from torcia._tensor import Size, Tensor

#: Default (rtol, atol) by dtype, PyTorch's: loose enough for one rounding of the dtype.
_TOLERANCES = {
    D.float16: (1e-3, 1e-5),
    D.bfloat16: (1.6e-2, 1e-5),
    D.float32: (1.3e-6, 1e-5),
    D.float64: (1e-7, 1e-7),
    D.complex64: (1.3e-6, 1e-5),
    D.complex128: (1e-7, 1e-7),
}


def default_tolerances(*dtypes) -> tuple[float, float]:
    """The (rtol, atol) ``assert_close`` uses for inputs of ``dtypes``: the loosest.

    Examples
    --------
    >>> import torcia
    >>> torcia.testing.default_tolerances(torcia.float32)
    (1.3e-06, 1e-05)
    >>> torcia.testing.default_tolerances(torcia.float32, torcia.float64)
    (1.3e-06, 1e-05)
    """
    pairs = [_TOLERANCES.get(d, (0.0, 0.0)) for d in dtypes]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


class _Mismatch(AssertionError):
    """A failed comparison; ``path`` says where inside nested containers it happened."""

    def __init__(self, message, path=""):
        super().__init__(message)
        self.message = message
        self.path = path


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """Assert that ``actual`` and ``expected`` are close: ``|a - e| <= atol + rtol * |e|``
    elementwise, with PyTorch's default tolerances for their dtype (float16 1e-3/1e-5,
    bfloat16 1.6e-2/1e-5, float32 1.3e-6/1e-5, float64 1e-7/1e-7, integers and bools
    exact).

    Tensors, NumPy arrays, Python numbers and (nested) sequences and mappings of them
    are compared; shapes, and unless disabled dtypes and devices, must match. The error
    counts the mismatched elements and gives the greatest absolute and relative
    differences with their index, as PyTorch's does. ``msg`` (a string, or a callable
    taking the generated message) replaces the message.

    Examples
    --------
    >>> import torcia
    >>> from torcia.testing import assert_close
    >>> assert_close(torcia.tensor([1.0, 3.0]), torcia.tensor([1.0, 2.0]))
    Traceback (most recent call last):
    ...
    AssertionError: Tensor-likes are not close!
    <BLANKLINE>
    Mismatched elements: 1 / 2 (50.0%)
    Greatest absolute difference: 1.0 at index (1,) (up to 1e-05 allowed)
    Greatest relative difference: 0.5 at index (1,) (up to 1.3e-06 allowed)
    """
    if (rtol is None) != (atol is None):
        missing = "atol" if atol is None else "rtol"
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but "
                         f"got no {missing}.")
    options = {"rtol": rtol, "atol": atol, "equal_nan": equal_nan,
               "check_device": check_device, "check_dtype": check_dtype}
    try:
        _compare(actual, expected, options)
    except _Mismatch as exc:
        text = exc.message + (f"\n\nThe failure occurred for item {exc.path}" if exc.path
                              else "")
        if callable(msg):
            text = msg(text)
        elif msg is not None:
            text = msg
        raise AssertionError(text) from None


def _kind(x):
    if isinstance(x, (Tensor, np.ndarray)):
        return "array"
    if isinstance(x, (bool, int, float, np.generic)):
        return "scalar"
    if isinstance(x, Mapping):
        return "mapping"
    if isinstance(x, Sequence) and not isinstance(x, str):
        return "sequence"
    return None


def _compare(actual, expected, options, path=""):
    ka, ke = _kind(actual), _kind(expected)
    same_family = ka == ke and (ka != "array" or type(actual) is type(expected)
                                or isinstance(actual, Tensor) == isinstance(expected, Tensor))
    if ka is None or not same_family:
        raise TypeError(f"No comparison pair was able to handle inputs of type "
                        f"{type(actual)} and {type(expected)}.")
    if ka == "sequence":
        if len(actual) != len(expected):
            raise _Mismatch(f"The length of the sequences mismatch: {len(actual)} != "
                            f"{len(expected)}", path)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, options, f"{path}[{i}]")
        return
    if ka == "mapping":
        if set(actual) != set(expected):
            raise _Mismatch(f"The keys of the mappings do not match:\nMissing keys in the "
                            f"actual mapping: {sorted(set(expected) - set(actual))}\n"
                            f"Additional keys in the actual mapping: "
                            f"{sorted(set(actual) - set(expected))}", path)
        for key in expected:
            _compare(actual[key], expected[key], options, f"{path}[{key!r}]")
        return
    try:
        if ka == "scalar":
            _compare_scalars(actual, expected, options)
        else:
            _compare_arrays(actual, expected, options)
    except _Mismatch as exc:
        exc.path = path
        raise


def _scalar_dtype(x):
    if isinstance(x, np.generic):
        return D.from_numpy_dtype(x.dtype)
    return D.bool_ if isinstance(x, bool) else (D.int64 if isinstance(x, int) else D.float64)


def _tolerances(options, *dtypes):
    if options["rtol"] is not None:
        return options["rtol"], options["atol"]
    return default_tolerances(*dtypes)


def _compare_scalars(actual, expected, options):
    rtol, atol = _tolerances(options, _scalar_dtype(actual), _scalar_dtype(expected))
    a, e = float(actual), float(expected)
    if _close(np.float64(a), np.float64(e), rtol, atol, options["equal_nan"]):
        return
    exact = not isinstance(actual, float) and not isinstance(expected, float)
    abs_diff = abs(actual - expected) if exact else abs(a - e)
    rel_diff = abs_diff / abs(e) if e else (np.nan if abs_diff == 0 else np.inf)
    word, up_abs, up_rel = ("equal", "", "") if exact else (
        "close", f" (up to {atol} allowed)", f" (up to {rtol} allowed)")
    raise _Mismatch(f"Scalars are not {word}!\n\nExpected {expected} but got {actual}.\n"
                    f"Absolute difference: {abs_diff}{up_abs}\n"
                    f"Relative difference: {rel_diff}{up_rel}")


def _host(x):
    if isinstance(x, np.ndarray):
        return x, D.from_numpy_dtype(x.dtype), None
    arr = x.detach()._data
    if x.device.type != "cpu":
        arr = x.device.backend.to_host(arr)
    return np.asarray(arr), x.dtype, x.device


def _compare_arrays(actual, expected, options):
    a, adt, adev = _host(actual)
    e, edt, edev = _host(expected)
    if a.shape != e.shape:
        raise _Mismatch(f"The values for attribute 'shape' do not match: "
                        f"{_size(a.shape)} != {_size(e.shape)}.")
    if options["check_device"] and adev != edev:
        raise _Mismatch(f"The values for attribute 'device' do not match: {adev} != {edev}.")
    if options["check_dtype"] and adt is not edt:
        raise _Mismatch(f"The values for attribute 'dtype' do not match: {adt} != {edt}.")
    rtol, atol = _tolerances(options, adt, edt)
    if adt.is_complex or edt.is_complex:
        # as PyTorch: complex values compare by their real and imaginary parts
        a, e = (np.stack([x.real, x.imag], -1) if x.dtype.kind == "c" else
                np.stack([x, np.zeros_like(x)], -1) for x in (a, e))
        adt, edt = adt.to_real(), edt.to_real()
        if not adt.is_floating_point:
            adt = edt
    exact = not (adt.is_floating_point or edt.is_floating_point)
    if a.ndim == 0:
        a_item = a.item() if exact else float(a.astype(np.float64))
        e_item = e.item() if exact else float(e.astype(np.float64))
        return _compare_scalars(a_item, e_item, {**options, "rtol": rtol, "atol": atol})
    # differences in the promoted dtype, as PyTorch reports them (half types in float32)
    common = D.promote_types(adt, edt)
    work = np.int64 if exact else (common.np if common in (D.float32, D.float64)
                                   else np.float32)
    a64, e64 = a.astype(work), e.astype(work)
    ok = _close(a64, e64, rtol, atol, options["equal_nan"])
    if ok.all():
        return
    n_bad, total = int((~ok).sum()), ok.size
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        abs_diff = np.abs(a64 - e64)
        rel_diff = abs_diff / np.abs(e64).astype(abs_diff.dtype if not exact else np.float64)
    i_abs = np.unravel_index(int(np.argmax(abs_diff)), a.shape)
    i_rel = np.unravel_index(int(np.argmax(rel_diff)), a.shape)
    title = "Tensor-likes are not equal!" if exact else "Tensor-likes are not close!"
    allowed_abs = "" if exact else f" (up to {atol} allowed)"
    allowed_rel = "" if exact else f" (up to {rtol} allowed)"
    raise _Mismatch(
        f"{title}\n\nMismatched elements: {n_bad} / {total} ({100 * n_bad / total:.1f}%)\n"
        f"Greatest absolute difference: {abs_diff[i_abs].item()} at index "
        f"{tuple(int(i) for i in i_abs)}{allowed_abs}\n"
        f"Greatest relative difference: {rel_diff[i_rel].item()} at index "
        f"{tuple(int(i) for i in i_rel)}{allowed_rel}")


def _size(shape):
    return repr(Size(shape))


def _close(a, e, rtol, atol, equal_nan):
    with np.errstate(invalid="ignore", over="ignore"):
        ok = a == e
        if a.dtype.kind == "f":
            # non-finite values are close only when equal
            finite = np.isfinite(a) & np.isfinite(e)
            ok = ok | (finite & (np.abs(a - e) <= atol + rtol * np.abs(e)))
            if equal_nan:
                ok = ok | (np.isnan(a) & np.isnan(e))
    return ok


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """PyTorch's deprecated predecessor of :func:`assert_close` (NaNs equal, dtypes not
    compared); warns and compares.

    Examples
    --------
    >>> import warnings
    >>> import torcia
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     torcia.testing.assert_allclose(torcia.tensor([1.0]), [1.0])
    """
    warnings.warn("`torch.testing.assert_allclose()` is deprecated since 1.12 and will be "
                  "removed in a future release. Please use `torch.testing.assert_close()` "
                  "instead.", FutureWarning, stacklevel=2)
    if not isinstance(actual, Tensor):
        actual = _creation.tensor(actual)
    if not isinstance(expected, Tensor):
        expected = _creation.tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        rtol, atol = default_tolerances(actual.dtype, expected.dtype)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_device=True, check_dtype=False, check_stride=False, msg=msg or None)


from torcia.testing._make import make_tensor  # noqa: E402

__all__ = ["assert_allclose", "assert_close", "default_tolerances", "make_tensor"]

