"""Checking analytical gradients against finite differences."""

from __future__ import annotations

import numpy as np

from torcia import Tensor, enable_grad, no_grad
from torcia import ones_like as torcia_ones_like
from torcia import randn as torcia_randn
from torcia import zeros_like as torcia_zeros_like
from torcia.library import array, wrap


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
        d = array(o).reshape(-1)
        if d.dtype.kind == "c":
            parts += [d.real.astype(np.float64), d.imag.astype(np.float64)]
        else:
            parts.append(d.astype(np.float64))
    return np.concatenate(parts) if parts else np.zeros(0)


def _numerical_jacobian(fn, inputs, wrt, eps):
    """Central differences of the real-embedded outputs (see :func:`_flat_real`); column j
    is the derivative by the input element j (in row-major order), and for a complex input
    the real parts' columns come first, then the imaginary parts' (each perturbed on its
    own)."""
    columns = []
    for i in wrt:
        flat = array(inputs[i]).flat  # any layout: a non-contiguous input stays one
        steps = (eps, eps * 1j) if array(inputs[i]).dtype.kind == "c" else (eps,)
        cols = []
        for step in steps:
            for j in range(array(inputs[i]).size):
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


def _directional(fn, inputs, i, v, eps):
    """Central differences along ``v`` (an array of input ``i``'s shape): the numerical
    ``J v`` of the real-embedded outputs."""
    data = array(inputs[i])
    orig = data.copy()
    data[...] = orig + eps * v
    with no_grad():
        plus = _flat_real(_outputs(fn, inputs)).copy()
    data[...] = orig - eps * v
    with no_grad():
        minus = _flat_real(_outputs(fn, inputs)).copy()
    data[...] = orig
    return (plus - minus) / (2 * eps)


def _seed(o, k, unit):
    """A one-hot gradient for output ``o``: ``unit`` at flat position ``k``."""
    seed = np.zeros(o.numel(), dtype=array(o).dtype)
    seed[k] = unit
    return wrap(seed.reshape(array(o).shape), o.device)


def _vjp_row(outputs, o, g_out, inputs, wrt, check_grad_dtypes):
    """``g_out``'s gradients with respect to the ``wrt`` inputs, each flat (real parts,
    then imaginary parts, for a complex input), zeros where one gets none."""
    from torcia.autograd.engine import grad as autograd_grad

    grads = autograd_grad(o, [inputs[i] for i in wrt], g_out, retain_graph=True,
                          allow_unused=True)
    row = []
    for i, g in zip(wrt, grads):
        x = inputs[i]
        width = x.numel() * (2 if x.is_complex() else 1)
        if g is None:
            row.append(np.zeros(width))
            continue
        if check_grad_dtypes and (g.dtype != x.dtype or g.device != x.device):
            raise GradcheckError(f"Gradient has dtype mismatch: input {i} is {x.dtype} on "
                                 f"{x.device}, its gradient {g.dtype} on {g.device}")
        d = array(g).reshape(-1)
        row.append(np.concatenate([d.real, d.imag]) if d.dtype.kind == "c" else
                   d.astype(np.float64))
    return row


def _analytical_jacobian(fn, inputs, wrt, check_grad_dtypes=False):
    """Rows from backward passes, one per real-embedded output: a complex output's real part
    seeds its gradient with 1, its imaginary part with 1j (PyTorch's convention makes the
    input gradient then d/da + i d/db of that part, for an input a + ib)."""
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
                got = _vjp_row(outputs, o, _seed(o, k, unit), inputs, wrt, check_grad_dtypes)
                for c, values in enumerate(got):
                    jac[c][row + part * n + k] = values
        row += rows
    return jac


def _forward_columns(fn, inputs, i, tangent):
    """The real-embedded outputs' tangents for ``tangent`` on input ``i`` (one dual
    pass)."""
    from torcia.autograd import forward_ad as fwAD

    with fwAD.dual_level():
        # the inputs keep requiring grad: a function that runs backward inside (the first
        # derivative, for gradgradcheck's forward over reverse) needs them to
        args = list(inputs)
        args[i] = fwAD.make_dual(inputs[i], tangent)
        outs = _outputs(fn, args)
        parts = []
        for o in outs:
            t = fwAD.unpack_dual(o).tangent
            width = o.numel() * (2 if o.is_complex() else 1)
            parts.append(np.zeros(width) if t is None else _flat_real((t,)))
    return np.concatenate(parts) if parts else np.zeros(0)


def _forward_jacobian(fn, inputs, wrt):
    """Columns from forward mode: one dual pass per input element with a one-hot tangent,
    laid out as :func:`_numerical_jacobian` does (a complex input's tangents 1 first, then
    1j; a complex output's tangent as its real parts, then its imaginary parts)."""
    columns = []
    for i in wrt:
        x = inputs[i]
        cols = [_forward_columns(fn, inputs, i, _seed(x, j, unit))
                for unit in ((1, 1j) if x.is_complex() else (1,)) for j in range(x.numel())]
        columns.append(np.stack(cols, axis=1) if cols else None)
    return columns


def _compare(reference, got, wrt, rtol, atol, what, raise_exception, header="Jacobian"):
    for c, i in enumerate(wrt):
        a, n = got[c], reference[c]
        if n is None:
            continue
        if not np.allclose(a, n, rtol=rtol, atol=atol):
            bad = np.unravel_index(np.argmax(np.abs(a - n) - rtol * np.abs(n)), a.shape)
            msg = (f"{header} mismatch for output {bad[0] if a.ndim else 0} with respect to "
                   f"input {i},\n{what[0]}:\n{n}\n{what[1]}:\n{a}\n")
            if raise_exception:
                raise GradcheckError(msg)
            return False
    return True


def _fail(msg, raise_exception):
    if raise_exception:
        raise GradcheckError(msg)
    return False


def _private_copy(x: Tensor) -> Tensor:
    """A copy of ``x`` to perturb, of the same layout: a non-contiguous input stays
    non-contiguous, so that formulas meet the strides they were given."""
    data = array(x)
    if data.flags.c_contiguous:
        copy = np.array(data, order="C", copy=True)
    else:
        buf = np.zeros(data.shape + (2,), dtype=data.dtype)
        buf[..., 0] = data
        copy = buf[..., 0]
    return wrap(copy, x.device).requires_grad_(True)


def _check_fast(func, work, wrt, eps, rtol, atol, check_backward_ad, check_forward_ad,
                raise_exception, check_grad_dtypes):
    """PyTorch's fast mode: for each input, ``u^T J v`` with random ``u`` and ``v``, by
    finite differences along ``v``, from one backward pass (``J^T u``) and from one
    forward pass (``J v``)."""
    rng = np.random.default_rng(0)
    outputs = _outputs(func, work)
    sizes = [o.numel() * (2 if o.is_complex() else 1) for o in outputs]
    u = rng.standard_normal(sum(sizes))
    for i in wrt:
        x = work[i]
        v = rng.standard_normal(array(x).shape)
        if x.is_complex():
            v = v + 1j * rng.standard_normal(array(x).shape)
        numerical = float(u @ _directional(func, work, i, v, eps))
        v_flat = (np.concatenate([v.real.reshape(-1), v.imag.reshape(-1)]) if x.is_complex()
                  else v.reshape(-1))
        if check_backward_ad:
            total, offset = 0.0, 0
            for o, size in zip(outputs, sizes):
                uo = u[offset:offset + size]
                offset += size
                if not o.requires_grad:
                    continue
                n = o.numel()
                seed = uo[:n] + 1j * uo[n:] if o.is_complex() else uo
                g_out = wrap(seed.astype(array(o).dtype).reshape(array(o).shape), o.device)
                row = _vjp_row(outputs, o, g_out, work, [i], check_grad_dtypes)[0]
                total += float(row @ v_flat)
            if not np.isclose(total, numerical, rtol=rtol, atol=atol):
                return _fail(f"Jacobian mismatch for output 0 with respect to input {i},\n"
                             f"Fast gradcheck failed: u^T J v is {numerical} by finite "
                             f"differences, {total} from backward mode\n", raise_exception)
        if check_forward_ad:
            tangent = wrap(v.astype(array(x).dtype), x.device)
            forward = float(u @ _forward_columns(func, work, i, tangent))
            if not np.isclose(forward, numerical, rtol=rtol, atol=atol):
                return _fail(f"Jacobian computed with forward mode mismatch for output 0 with "
                             f"respect to input {i},\nFast gradcheck failed: u^T J v is "
                             f"{numerical} by finite differences, {forward} from forward "
                             "mode\n", raise_exception)
    return True


def _check_zero_and_undefined(func, work, wrt, check_undefined_grad, raise_exception):
    """Backward multiplies by its output gradient (zeros give zeros), and, with
    ``check_undefined_grad``, copes with outputs that get no gradient (a multi-output
    function backpropagated from one output): as if theirs were zeros."""
    from torcia.autograd.engine import grad as autograd_grad

    outputs = [o for o in _outputs(func, work) if o.requires_grad]
    if not outputs:
        return True
    inputs = [work[i] for i in wrt]
    zeros = autograd_grad(outputs, inputs, [torcia_zeros_like(o) for o in outputs],
                          retain_graph=True, allow_unused=True)
    for i, g in zip(wrt, zeros):
        if g is not None and np.any(array(g) != 0):
            return _fail(f"backward not multiplied by grad_output: input {i} gets a nonzero "
                         "gradient from zero output gradients", raise_exception)
    if not check_undefined_grad or len(outputs) < 2:
        return True
    for k, o in enumerate(outputs):
        ones = torcia_ones_like(o)
        try:
            alone = autograd_grad([o], inputs, [ones], retain_graph=True, allow_unused=True)
        except RuntimeError as error:
            return _fail("Expected backward function to handle undefined output grads (the "
                         f"other outputs' gradients, when only output {k} gets one): "
                         f"{error}", raise_exception)
        with_zeros = autograd_grad(
            outputs, inputs, [ones if j == k else torcia_zeros_like(p)
                              for j, p in enumerate(outputs)],
            retain_graph=True, allow_unused=True)
        for i, a, b in zip(wrt, alone, with_zeros):
            a = 0 if a is None else array(a)
            b = 0 if b is None else array(b)
            if not np.allclose(a, b):
                return _fail(f"Expected undefined output gradients to act as zeros: input {i}'s "
                             f"gradient from output {k} alone differs", raise_exception)
    return True


def _check_batched_grad(func, work, wrt, atol, rtol, raise_exception):
    """``vmap`` over the output gradients of one backward, against a loop of them."""
    import torcia.func
    from torcia.autograd.engine import grad as autograd_grad

    outputs = _outputs(func, work)
    inputs = [work[i] for i in wrt]
    for k, o in enumerate(outputs):
        if not o.requires_grad:
            continue
        gos = torcia_randn((2,) + tuple(o.shape), dtype=o.dtype)
        looped = [autograd_grad(o, inputs, g, retain_graph=True, allow_unused=True)
                  for g in gos]
        try:
            batched = torcia.func.vmap(
                lambda g, o=o: autograd_grad(o, inputs, g, retain_graph=True,
                                             materialize_grads=True))(gos)
        except RuntimeError as error:
            return _fail(f"While computing batched gradients, got: {error}", raise_exception)
        for i, b, per in zip(wrt, batched, zip(*looped)):
            want = np.stack([np.zeros(array(work[i]).shape) if g is None else array(g)
                             for g in per])
            if not np.allclose(array(b), want, rtol=rtol, atol=atol):
                return _fail(f"Batched grad mismatch for output {k} with respect to input {i}"
                             f",\nbatched:\n{b}\nlooped:\n{want}\n", raise_exception)
    return True


def _check_batched_forward_grad(func, work, wrt, atol, rtol, raise_exception):
    """``vmap`` over the tangents of one forward-mode pass, against a loop of them."""
    import torcia.func

    plain = [w.detach() if isinstance(w, Tensor) else w for w in work]
    for i in wrt:
        x = work[i]
        tangents = torcia_randn((2,) + tuple(x.shape), dtype=x.dtype)

        def tangent_of(t, i=i):
            return torcia.func.jvp(lambda xi: func(*(plain[:i] + [xi] + plain[i + 1:])),
                                   (plain[i],), (t,))[1]

        looped = [tangent_of(t) for t in tangents]
        try:
            batched = torcia.func.vmap(tangent_of)(tangents)
        except RuntimeError as error:
            return _fail(f"While computing batched forward gradients, got: {error}",
                         raise_exception)
        looped = [(r,) if isinstance(r, Tensor) else tuple(r) for r in looped]
        batched = (batched,) if isinstance(batched, Tensor) else tuple(batched)
        for k, b in enumerate(batched):
            want = np.stack([array(r[k]) for r in looped])
            if not np.allclose(array(b), want, rtol=rtol, atol=atol):
                return _fail(f"Batched forward grad mismatch for output {k} with respect to "
                             f"input {i}", raise_exception)
    return True


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """Compare gradients from autograd with central finite differences.

    Parameters
    ----------
    func : callable
        Takes the ``inputs`` and returns a tensor or a sequence of tensors.
    inputs : Tensor or sequence
        Those that require grad are checked (float64 or complex128 for the default
        tolerances); they are perturbed in private copies of the same layout.
    eps, atol, rtol : float
        The finite-difference step and the tolerances of the comparisons.
    raise_exception : bool
        Raise :class:`GradcheckError` on a mismatch (else return False).
    nondet_tol : float
        How much two backward passes with the same inputs and output gradients may
        differ (0: backward must be deterministic).
    check_undefined_grad : bool
        Backward must treat the gradient of an output that gets none as zeros.
    check_grad_dtypes : bool
        Each gradient must have its input's dtype and device.
    check_batched_grad, check_batched_forward_grad : bool
        ``vmap`` over output gradients (over tangents) must give what a loop gives
        (``torcia.func``, from torcia-nn).
    check_forward_ad, check_backward_ad : bool
        Check the Jacobian from forward mode (:mod:`torcia.autograd.forward_ad`), and
        from backward mode; with ``check_backward_ad=False`` nothing calls backward.
    fast_mode : bool
        Compare ``u^T J v`` for random ``u``, ``v`` instead of whole Jacobians: one
        backward and one forward pass per input instead of one per element.
    masked : bool, optional
        Concerns sparse inputs, which torcia's gradcheck does not take.

    Notes
    -----
    Complex inputs and outputs are checked through their real and imaginary parts, with
    PyTorch's convention for complex gradients (see ``_analytical_jacobian``).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.randn(3, dtype=torcia.float64, requires_grad=True)
    >>> torcia.autograd.gradcheck(lambda t: (t * t.sin()).sum(), (x,), check_forward_ad=True)
    True
    >>> torcia.autograd.gradcheck(lambda t: t.exp(), (x,), fast_mode=True)
    True
    """
    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    if any(isinstance(x, Tensor) and x.is_sparse for x in inputs):
        raise NotImplementedError("gradcheck: sparse inputs are not supported (masked="
                                  f"{masked!r})")
    wrt = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not wrt:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of them have requires_grad=True.")
    for i in wrt:
        if inputs[i].dtype.name not in ("float64", "complex128"):
            import warnings

            warnings.warn(f"Input #{i} requires gradient and is not a double precision "
                          "floating point. This check will likely fail.", stacklevel=2)
    # perturb private copies so the caller's tensors are untouched
    work = list(inputs)
    for i in wrt:
        work[i] = _private_copy(inputs[i])
    if check_batched_forward_grad and not _check_batched_forward_grad(
            func, work, wrt, atol, rtol, raise_exception):
        return False
    if fast_mode:
        if not _check_fast(func, work, wrt, eps, rtol, atol, check_backward_ad,
                           check_forward_ad, raise_exception, check_grad_dtypes):
            return False
    else:
        numerical = _numerical_jacobian(func, work, wrt, eps)
        if check_backward_ad:
            analytical = _analytical_jacobian(func, work, wrt, check_grad_dtypes)
            if not _compare(numerical, analytical, wrt, rtol, atol,
                            ("numerical", "analytical"), raise_exception):
                return False
            again = _analytical_jacobian(func, work, wrt)
            if not _compare(analytical, again, wrt, 0.0, nondet_tol,
                            ("first backward", "second backward"), raise_exception,
                            header="Backward is not reentrant, i.e., running backward with "
                            "same input and grad_output multiple times gives different "
                            f"values (the tolerance for nondeterminism is {nondet_tol}):"
                            " Jacobian"):
                return False
        if check_forward_ad:
            forward = _forward_jacobian(func, work, wrt)
            if not _compare(numerical, forward, wrt, rtol, atol, ("numerical", "forward mode"),
                            raise_exception, header="Jacobian computed with forward mode"):
                return False
    if not check_backward_ad:
        return True
    if check_batched_grad and not _check_batched_grad(func, work, wrt, atol, rtol,
                                                      raise_exception):
        return False
    return _check_zero_and_undefined(func, work, wrt, check_undefined_grad, raise_exception)


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False,
                  check_batched_grad=False, check_fwd_over_rev=False,
                  check_rev_over_rev=True, fast_mode=False, masked=False):
    """Check second derivatives: :func:`gradcheck` of the first gradient as a function of
    the inputs and the output gradients.

    ``grad_outputs`` default to random tensors (non-contiguous ones with
    ``gen_non_contig_grad_outputs``); ``check_rev_over_rev`` checks the second derivative
    by backward mode, ``check_fwd_over_rev`` by forward mode over the first backward; the
    other options are :func:`gradcheck`'s.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.randn(3, dtype=torcia.float64, requires_grad=True)
    >>> torcia.autograd.gradgradcheck(lambda t: (t ** 3).sum(), (x,))
    True
    >>> torcia.autograd.gradgradcheck(lambda t: t.sin(), (x,), check_fwd_over_rev=True,
    ...                               check_rev_over_rev=False)
    True
    """
    from torcia.autograd.engine import grad as autograd_grad

    inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
    outputs = _outputs(func, inputs)
    if grad_outputs is None:
        grad_outputs = tuple(_random_like(o, gen_non_contig_grad_outputs)
                             for o in outputs if o.requires_grad)
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
                     rtol=rtol, raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     check_forward_ad=check_fwd_over_rev, check_backward_ad=check_rev_over_rev,
                     fast_mode=fast_mode, masked=masked)


def _random_like(o, non_contiguous):
    """A random output gradient for ``o`` that requires grad; non-contiguous (every other
    element of a larger buffer) when asked."""
    if not non_contiguous or o.numel() < 2:
        return torcia_randn(tuple(o.shape), dtype=o.dtype).requires_grad_(True)
    wide = torcia_randn(tuple(o.shape) + (2,), dtype=o.dtype)
    return wide[..., 0].requires_grad_(True)
