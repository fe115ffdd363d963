"""Checking analytical gradients against finite differences."""

from __future__ import annotations

import numpy as np

from torcia import Tensor, enable_grad, no_grad


class GradcheckError(RuntimeError):
    """The analytical and numerical Jacobians disagree.

    Examples
    --------
    A function whose gradient is wrong (``detach`` hides one factor from autograd):

    >>> import torcia
    >>> x = torcia.tensor([1.0, 2.0], dtype=torcia.float64, requires_grad=True)
    >>> try:
    ...     torcia.autograd.gradcheck(lambda t: t.detach() * t, (x,))
    ... except torcia.autograd.GradcheckError as error:
    ...     print(str(error).splitlines()[0])
    Jacobian mismatch for output 1 with respect to input 0,
    """


def _outputs(fn, inputs):
    out = fn(*inputs)
    return (out,) if isinstance(out, Tensor) else tuple(out)


def _flat_real(outputs):
    """The outputs as one float64 vector: real outputs as they are, complex ones as their
    real parts followed by their imaginary parts."""
    parts = []
    for o in outputs:
        d = o.detach()._data.reshape(-1)
        if d.dtype.kind == "c":
            parts += [d.real.astype(np.float64), d.imag.astype(np.float64)]
        else:
            parts.append(d.astype(np.float64))
    return np.concatenate(parts) if parts else np.zeros(0)


def _numerical_jacobian(fn, inputs, wrt, eps):
    """Central differences of the real-embedded outputs (see :func:`_flat_real`); column j
    is the derivative by the flat input element j, and for a complex input the real parts'
    columns come first, then the imaginary parts' (each perturbed on its own)."""
    columns = []
    for i in wrt:
        x = inputs[i]
        flat = x._data.reshape(-1)  # a view: the inputs were made contiguous
        steps = (eps, eps * 1j) if flat.dtype.kind == "c" else (eps,)
        cols = []
        for step in steps:
            for j in range(flat.size):
                orig = flat[j].item()
                flat[j] = orig + step
                with no_grad():
                    plus = _flat_real(_outputs(fn, inputs)).copy()
                flat[j] = orig - step
                with no_grad():
                    minus = _flat_real(_outputs(fn, inputs)).copy()
                flat[j] = orig
                cols.append((plus - minus) / (2 * eps))
        columns.append(np.stack(cols, axis=1) if cols else None)
    return columns


def _analytical_jacobian(fn, inputs, wrt):
    """Rows from backward passes, one per real-embedded output: a complex output's real part
    seeds its gradient with 1, its imaginary part with 1j (PyTorch's convention makes the
    input gradient then d/da + i d/db of that part, for an input a + ib)."""
    from torcia.autograd.engine import grad as autograd_grad

    outputs = _outputs(fn, inputs)
    sizes = [o.numel() * (2 if o.is_complex() else 1) for o in outputs]
    widths = [inputs[i].numel() * (2 if inputs[i].is_complex() else 1) for i in wrt]
    jac = [np.zeros((sum(sizes), w)) for w in widths]
    row = 0
    for o, rows in zip(outputs, sizes):
        if not o.requires_grad:
            row += rows
            continue
        n = o.numel()
        for part, unit in enumerate((1, 1j) if o.is_complex() else (1,)):
            for k in range(n):
                seed = np.zeros(n, dtype=o._data.dtype)
                seed[k] = unit
                g_out = Tensor._make(seed.reshape(o._data.shape), o._device)
                grads = autograd_grad(o, [inputs[i] for i in wrt], g_out, retain_graph=True,
                                      allow_unused=True)
                for c, g in enumerate(grads):
                    if g is not None:
                        d = g.detach()._data.reshape(-1)
                        jac[c][row + part * n + k] = (
                            np.concatenate([d.real, d.imag]) if d.dtype.kind == "c" else d)
        row += rows
    return jac


def _forward_jacobian(fn, inputs, wrt):
    """Columns from forward mode: one dual pass per input element with a one-hot tangent,
    laid out as :func:`_numerical_jacobian` does (a complex input's tangents 1 first, then
    1j; a complex output's tangent as its real parts, then its imaginary parts)."""
    from torcia.autograd import forward_ad as fwAD

    columns = []
    for i in wrt:
        x = inputs[i]
        units = (1, 1j) if x.is_complex() else (1,)
        cols = []
        for unit in units:
            for j in range(x.numel()):
                seed = np.zeros(x.numel(), dtype=x._data.dtype)
                seed[j] = unit
                tangent = Tensor._make(seed.reshape(x._data.shape), x._device)
                with fwAD.dual_level():
                    args = list(inputs)
                    for k in wrt:
                        args[k] = inputs[k].detach()
                    args[i] = fwAD.make_dual(inputs[i].detach(), tangent)
                    outs = _outputs(fn, args)
                    parts = []
                    for o in outs:
                        t = fwAD.unpack_dual(o).tangent
                        width = o.numel() * (2 if o.is_complex() else 1)
                        parts.append(np.zeros(width) if t is None else _flat_real((t,)))
                cols.append(np.concatenate(parts) if parts else np.zeros(0))
        columns.append(np.stack(cols, axis=1) if cols else None)
    return columns


def _compare(reference, got, wrt, rtol, atol, what, raise_exception):
    for c, i in enumerate(wrt):
        a, n = got[c], reference[c]
        if n is None:
            continue
        if not np.allclose(a, n, rtol=rtol, atol=atol):
            bad = np.unravel_index(np.argmax(np.abs(a - n) - rtol * np.abs(n)), a.shape)
            msg = (f"Jacobian mismatch for output {bad[0]} with respect to input {i},\n"
                   f"{what[0]}:\n{n}\n{what[1]}:\n{a}\n")
            if raise_exception:
                raise GradcheckError(msg)
            return False
    return True


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, fast_mode=False,
              check_forward_ad=False, check_backward_ad=True):
    """Compare gradients from autograd with central finite differences.

    With ``check_forward_ad=True`` the Jacobian from forward mode
    (:mod:`torcia.autograd.forward_ad`) must also agree with the one from backward mode
    (and with finite differences).

    Inputs that require grad should be float64 (or complex128) for the default tolerances.
    Complex inputs and outputs are checked through their real and imaginary parts, with
    PyTorch's convention for complex gradients (see ``_analytical_jacobian``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.randn(3, dtype=torcia.float64, requires_grad=True)
    >>> torcia.autograd.gradcheck(lambda t: (t * t.sin()).sum(), (x,), check_forward_ad=True)
    True
    """
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    wrt = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not wrt:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of them have requires_grad=True.")
    for i in wrt:
        if inputs[i].dtype.name not in ("float64", "complex128"):
            import warnings

            warnings.warn(f"Input #{i} requires gradient and is not a double precision "
                          "floating point. This check will likely fail.", stacklevel=2)
    # perturb private contiguous copies so the caller's tensors are untouched
    work = list(inputs)
    for i in wrt:
        t = Tensor._make(np.array(inputs[i]._data, order="C", copy=True), inputs[i]._device)
        t.requires_grad_(True)
        work[i] = t
    numerical = _numerical_jacobian(func, work, wrt, eps)
    analytical = _analytical_jacobian(func, work, wrt)
    if check_backward_ad and not _compare(numerical, analytical, wrt, rtol, atol,
                                          ("numerical", "analytical"), raise_exception):
        return False
    if check_forward_ad:
        forward = _forward_jacobian(func, work, wrt)
        reference = analytical if check_backward_ad else numerical
        if not _compare(reference, forward, wrt, rtol, atol,
                        ("backward mode" if check_backward_ad else "numerical",
                         "forward mode"), raise_exception):
            return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True):
    """Check second derivatives: gradcheck of the first gradient as a function of the
    inputs and the output gradients.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.randn(3, dtype=torcia.float64, requires_grad=True)
    >>> torcia.autograd.gradgradcheck(lambda t: (t ** 3).sum(), (x,))
    True
    """
    from torcia import randn
    from torcia.autograd.engine import grad as autograd_grad

    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    outputs = _outputs(func, inputs)
    if grad_outputs is None:
        grad_outputs = tuple(
            randn(o.shape, dtype=o.dtype, device=o.device).requires_grad_(True)
            for o in outputs if o.requires_grad
        )
    else:
        grad_outputs = (grad_outputs,) if isinstance(grad_outputs, Tensor) else tuple(
            grad_outputs)
    n_in = len(inputs)
    wrt = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]

    def first_grads(*args):
        xs, gos = args[:n_in], args[n_in:]
        # finite differences evaluate this under no_grad; the first gradient still needs a graph
        with enable_grad():
            outs = [o for o in _outputs(func, xs) if o.requires_grad]
            gs = autograd_grad(outs, [xs[i] for i in wrt], gos, create_graph=True,
                               allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_grads, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception)
