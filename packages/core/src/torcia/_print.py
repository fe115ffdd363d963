"""``repr`` of tensors, formatted like PyTorch's, and ``set_printoptions``."""

from __future__ import annotations

import numpy as np

from torcia import _dtype as D

_OPTIONS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80,
            "sci_mode": None}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """Set how tensors print, as ``torch.set_printoptions``.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_printoptions(precision=2); torcia.tensor([1.2345])
    tensor([1.23])
    >>> torcia.set_printoptions(profile="default")
    """
    if profile == "default":
        _OPTIONS.update(precision=4, threshold=1000, edgeitems=3, linewidth=80)
    elif profile == "short":
        _OPTIONS.update(precision=2, threshold=1000, edgeitems=2, linewidth=80)
    elif profile == "full":
        _OPTIONS.update(precision=4, threshold=2 ** 63 - 1, edgeitems=3, linewidth=80)
    for key, value in (("precision", precision), ("threshold", threshold),
                       ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if value is not None:
            _OPTIONS[key] = value
    _OPTIONS["sci_mode"] = sci_mode


def _float_formatter(values: np.ndarray):
    prec = _OPTIONS["precision"]
    finite = values[np.isfinite(values)]
    nonzero = np.abs(finite[finite != 0])
    int_mode = finite.size == 0 or bool(np.all(finite == np.ceil(finite)))
    sci = _OPTIONS["sci_mode"]
    if sci is None:
        sci = False
        if nonzero.size:
            hi, lo = nonzero.max(), nonzero.min()
            if hi / lo > 1000.0 or hi > 1e8 or lo < 1e-4:
                sci = True
    if int_mode and not sci:
        def fmt(v):
            return _special(v) or f"{v:.0f}."
        if nonzero.size and nonzero.max() > 1e8:
            def fmt(v):  # noqa: F811
                return _special(v) or f"{v:.{prec}e}"
    elif sci:
        def fmt(v):
            return _special(v) or f"{v:.{prec}e}"
    else:
        def fmt(v):
            return _special(v) or f"{v:.{prec}f}"
    return fmt


def _complex_formatter(values: np.ndarray):
    """``real+imagj``: each part formatted as a float tensor of those parts would be, the
    real part padded to the widest one, the imaginary part with its sign."""
    parts = []
    for part in (values.real, values.imag):
        fmt = _float_formatter(part)
        shown = part[np.isfinite(part) & (part != 0)]
        parts.append((fmt, max((len(fmt(v)) for v in shown.tolist()), default=1)))
    (real_fmt, width), (imag_fmt, _) = parts

    def fmt(v):
        imag = imag_fmt(v.imag)
        return real_fmt(v.real).rjust(width) + ("" if imag[0] == "-" else "+") + imag + "j"

    return fmt


def _special(v):
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def _format_array(arr: np.ndarray, indent: int) -> str:
    kind = arr.dtype.kind
    summarize = arr.size > _OPTIONS["threshold"]
    edge = _OPTIONS["edgeitems"]
    if kind == "b":
        def fmt(v):
            return "True" if v else "False"
        sample = arr
    elif kind in "iu":
        def fmt(v):
            return str(int(v))
        sample = arr
    elif kind == "c":
        sample = arr.astype(np.complex128)
        fmt = _complex_formatter(_summary_values(sample, edge) if summarize
                                 else sample.reshape(-1))
    else:
        sample = arr.astype(np.float64)
        fmt = _float_formatter(_summary_values(sample, edge) if summarize else sample.reshape(-1))
    if arr.ndim == 0:
        return fmt(sample.item())
    if kind == "c":
        # each part is padded by its own formatter already, as PyTorch does
        return _nest(sample, fmt, 1, indent, summarize, edge)
    values = _summary_values(sample, edge) if summarize else sample.reshape(-1)
    if kind not in "biu":
        # as PyTorch: the column width comes from the finite nonzero values only
        values = values[np.isfinite(values) & (values != 0)]
    width = max((len(fmt(v)) for v in values.tolist()), default=1)
    return _nest(sample, fmt, width, indent, summarize, edge)


def _summary_values(arr, edge):
    if arr.ndim == 0:
        return arr.reshape(-1)
    if arr.shape[0] > 2 * edge:
        parts = [arr[:edge], arr[-edge:]]
    else:
        parts = [arr]
    return np.concatenate([_summary_values(p[i], edge) if p.ndim > 1 else p.reshape(-1)
                           for p in parts for i in (range(len(p)) if p.ndim > 1 else [0])]
                          ) if arr.ndim > 1 else np.concatenate(parts)


def _nest(arr, fmt, width, indent, summarize, edge):
    if arr.ndim == 1:
        items = arr.tolist()
        if summarize and len(items) > 2 * edge:
            cells = [fmt(v).rjust(width) for v in items[:edge]] + [" ..."] + [
                fmt(v).rjust(width) for v in items[-edge:]]
        else:
            cells = [fmt(v).rjust(width) for v in items]
        per_line = max(1, (_OPTIONS["linewidth"] - indent) // (width + 2))
        lines = [", ".join(cells[i:i + per_line]) for i in range(0, len(cells), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    rows = range(arr.shape[0])
    if summarize and arr.shape[0] > 2 * edge:
        rows = list(range(edge)) + [None] + list(range(arr.shape[0] - edge, arr.shape[0]))
    parts = []
    for r in rows:
        if r is None:
            parts.append("...")
        else:
            parts.append(_nest(arr[r], fmt, width, indent + 1, summarize, edge))
    sep = "," + "\n" * (arr.ndim - 1) + " " * (indent + 1)
    return "[" + sep.join(parts) + "]"


def tensor_repr(t) -> str:
    if t.device.type == "meta":
        # no data to show, as PyTorch prints it
        extras = [f"size={tuple(t.shape)}"]
        if t.dtype is not D.get_default_dtype():
            extras.append(f"dtype=torcia.{t.dtype.name}")
        return f"tensor(..., device='meta', {', '.join(extras)})"
    arr = t._data if t.device.type == "cpu" else t.device.backend.to_host(t._data)
    if t.dtype is D.bfloat16:
        arr = arr.astype(np.float32)
    prefix = "tensor("
    extras = []
    if t.device.type != "cpu":
        extras.append(f"device='{t.device}'")
    if arr.size == 0 and arr.ndim != 1 or arr.size == 0:
        body = "[]"
        if arr.ndim != 1:
            extras.append(f"size={tuple(arr.shape)}")
    else:
        body = _format_array(arr, len(prefix))
    # an empty tensor shows any dtype but the default float one, as PyTorch does
    default_dtypes = (D.get_default_dtype(),) if arr.size == 0 else (
        D.get_default_dtype(), D.int64, D.bool_, D.default_complex())
    if t.dtype not in default_dtypes:
        extras.append(f"dtype=torcia.{t.dtype.name}")
    if t.grad_fn is not None:
        # the class name ("CopySlices" where name() has its C++ namespace), as PyTorch's
        extras.append(f"grad_fn=<{t.grad_fn.name().rpartition('::')[2]}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return prefix + ", ".join([body] + extras) + ")"
