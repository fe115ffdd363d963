"""Multi-tensor update kernels: one call updates every parameter of a group.

Optimizers look these ops up in the kernel table of their parameters' device
(``device.backend.kernels``) and call them on lists of arrays under ``no_grad``, then bump
each parameter's version counter. torcia-optim's plugin registers the NumPy versions below
for the ``"cpu"`` device with priority 0; a backend overrides one by registering the same op
name with a higher priority::

    @torcia.hookimpl
    def torcia_register_kernels(registry):
        registry.add("adam_step", "cpu", my_fused_adam, priority=10)

Every kernel has the same shape: lists of arrays positionally (parameters, gradients, state
buffers; all of one length, in the same order), hyperparameters as keywords; it updates
parameters and buffers in place and returns None. ``steps`` are the step counts after this
step's increment, as Python floats (the optimizer owns the step tensors). Gradients are
never written to. A device without a kernel falls back to the optimizer's per-parameter
path, which defines the results: a kernel must match it (the tests check bit equality for
these NumPy kernels).

========================  ====================================================================
op                        positional arrays
========================  ====================================================================
``sgd_step``              params, grads, momentum_buffers (a None entry is a buffer yet to be
                          made: the kernel puts a copy of the gradient there)
``adam_step``             params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs (None
                          entries unless amsgrad), steps
``adamax_step``           params, grads, exp_avgs, exp_infs, steps
``nadam_step``            params, grads, exp_avgs, exp_avg_sqs, mu_products (0-d), steps
``radam_step``            params, grads, exp_avgs, exp_avg_sqs, steps
``rmsprop_step``          params, grads, square_avgs, grad_avgs (None entries unless
                          centered), momentum_buffers (None entries unless momentum > 0)
``adagrad_step``          params, grads, state_sums, steps
``adadelta_step``         params, grads, square_avgs, acc_deltas
========================  ====================================================================

The keywords of each are the optimizer's hyperparameters, named as in the optimizer (Adam's
``betas`` arrive as ``beta1`` and ``beta2``). The operations below follow the order of the
per-parameter path step for step, so both round alike.
"""

from __future__ import annotations

import numpy as np

from torcia.library import get_backend


def _grad(g, p, maximize, weight_decay):
    """The gradient to use: negated when maximizing, plus the L2 term (new arrays only)."""
    if maximize:
        g = np.negative(g)
    if weight_decay != 0:
        g = _add(g, p, weight_decay)
    return g


def _add(a, b, alpha, out=None):
    """``a + alpha * b`` as ``add(..., alpha=)`` rounds it (one fused multiply-add, as
    torch's), by the "cpu" device's add kernel; into ``out`` (``a`` for ``add_``), else a
    new array."""
    return _kernel("add")(a, b, alpha=alpha, out=out)


def _lerp_(a, b, weight):
    """``a.lerp_(b, weight)`` in place, by the "cpu" device's lerp kernel (one fused
    multiply-add from the nearer end, as torch's), the weight at the dtype lerp_ takes a
    number in (float32 beside float16 and bfloat16)."""
    a[...] = _kernel("lerp")(a, b, _opmath(a).type(weight))


def _addcmul_(a, t1, t2, value):
    """``a += value * t1 * t2`` in place, by the "cpu" device's addcmul kernel
    (``value * t1`` rounded, then one fused multiply-add, as torch's)."""
    a[...] = _kernel("addcmul")(a, t1, t2, value=_opmath(a).type(value))


def _kernel(op):
    """The "cpu" device's kernel of ``op``: the per-parameter path's, to the bit."""
    return get_backend("cpu").kernels[op]


def _opmath(a):
    """The dtype a number beside the array ``a`` is taken in by lerp and addcmul."""
    return np.dtype(np.float32) if a.dtype.itemsize == 2 else a.dtype


def _addcdiv_(a, t1, t2, value, tmp):
    """``a += value * t1 / t2`` in place."""
    np.multiply(t1, value, out=tmp)
    tmp /= t2
    a += tmp


def _adam_moments(p, g, m, v, *, lr, beta1, beta2, weight_decay, decoupled, maximize):
    """The Adam family's first half: sign, weight decay (L2 into the gradient, or decoupled
    into the parameter) and both moment averages; returns the gradient used."""
    g = _grad(g, p, maximize, 0)
    if weight_decay != 0:
        if decoupled:
            p *= 1 - lr * weight_decay
        else:
            g = _add(g, p, weight_decay)
    _lerp_(m, g, 1 - beta1)
    v *= beta2
    _addcmul_(v, g, g, 1 - beta2)
    return g


def sgd_step(params, grads, momentum_buffers, *, lr, weight_decay, momentum, dampening,
             nesterov, maximize):
    """SGD with momentum over lists of arrays, in place (see the module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.optim import kernels
    >>> p, g = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    >>> buffers = [None]
    >>> kernels.sgd_step([p], [g], buffers, lr=0.1, weight_decay=0.0, momentum=0.9,
    ...                  dampening=0.0, nesterov=False, maximize=False)
    >>> p, buffers[0]
    (array([0.95, 2.05]), array([ 0.5, -0.5]))
    """
    for i, (p, g) in enumerate(zip(params, grads)):
        g = _grad(g, p, maximize, weight_decay)
        if momentum != 0:
            buf = momentum_buffers[i]
            if buf is None:
                buf = momentum_buffers[i] = g.copy()
            else:
                buf *= momentum
                _add(buf, g, 1 - dampening, out=buf)
            g = _add(g, buf, momentum) if nesterov else buf
        _add(p, g, -lr, out=p)


def adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, *, lr, beta1,
              beta2, eps, weight_decay, amsgrad, maximize, decoupled_weight_decay):
    """Adam or AdamW (``decoupled_weight_decay``) over lists of arrays, in place.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.optim import kernels
    >>> p, g = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    >>> m, v = np.zeros(2), np.zeros(2)
    >>> kernels.adam_step([p], [g], [m], [v], [None], [1.0], lr=0.1, beta1=0.9, beta2=0.999,
    ...                   eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
    ...                   decoupled_weight_decay=False)
    >>> p.round(4)
    array([0.9, 2.1])
    """
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        tmp = np.empty_like(p)
        _adam_moments(p, g, m, v, lr=lr, beta1=beta1, beta2=beta2,
                      weight_decay=weight_decay, decoupled=decoupled_weight_decay,
                      maximize=maximize)
        step = steps[i]
        bias_correction1 = 1 - beta1**step
        bias_correction2_sqrt = (1 - beta2**step) ** 0.5
        if amsgrad:
            np.maximum(max_exp_avg_sqs[i], v, out=max_exp_avg_sqs[i])
            v = max_exp_avg_sqs[i]
        denom = np.sqrt(v)
        denom /= bias_correction2_sqrt
        denom += eps
        _addcdiv_(p, m, denom, -(lr / bias_correction1), tmp)


def adamax_step(params, grads, exp_avgs, exp_infs, steps, *, lr, beta1, beta2, eps,
                weight_decay, maximize):
    """Adamax (the infinity-norm Adam) over lists of arrays, in place.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.optim import kernels
    >>> p, g = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    >>> m, u = np.zeros(2), np.zeros(2)
    >>> kernels.adamax_step([p], [g], [m], [u], [1.0], lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8,
    ...                     weight_decay=0.0, maximize=False)
    >>> p.round(4)
    array([0.9, 2.1])
    """
    for i, (p, g, m, u) in enumerate(zip(params, grads, exp_avgs, exp_infs)):
        g = _grad(g, p, maximize, weight_decay)
        tmp = np.empty_like(p)
        _lerp_(m, g, 1 - beta1)
        u *= beta2
        np.abs(g, out=tmp)
        tmp += eps
        np.maximum(u, tmp, out=u)
        clr = lr / (1 - beta1 ** steps[i])
        _addcdiv_(p, m, u, -clr, tmp)


def nadam_step(params, grads, exp_avgs, exp_avg_sqs, mu_products, steps, *, lr, beta1, beta2,
               eps, weight_decay, momentum_decay, decoupled_weight_decay, maximize):
    """NAdam (Adam with Nesterov momentum) over lists of arrays, in place.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.optim import kernels
    >>> p, g = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    >>> m, v, mu = np.zeros(2), np.zeros(2), np.array(1.0)
    >>> kernels.nadam_step([p], [g], [m], [v], [mu], [1.0], lr=0.1, beta1=0.9, beta2=0.999,
    ...                    eps=1e-8, weight_decay=0.0, momentum_decay=0.004,
    ...                    decoupled_weight_decay=False, maximize=False)
    >>> p.round(4)
    array([0.8944, 2.1056])
    """
    for i, (p, g, m, v, mu_product) in enumerate(
        zip(params, grads, exp_avgs, exp_avg_sqs, mu_products)
    ):
        tmp = np.empty_like(p)
        g = _adam_moments(p, g, m, v, lr=lr, beta1=beta1, beta2=beta2,
                          weight_decay=weight_decay, decoupled=decoupled_weight_decay,
                          maximize=maximize)
        step = steps[i]
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        mu_product *= mu
        denom = v / (1 - beta2**step)
        np.sqrt(denom, out=denom)
        denom += eps
        product = float(mu_product)
        _addcdiv_(p, g, denom, -lr * (1.0 - mu) / (1.0 - product), tmp)
        _addcdiv_(p, m, denom, (-lr * mu_next) / (1.0 - product * mu_next), tmp)


def radam_step(params, grads, exp_avgs, exp_avg_sqs, steps, *, lr, beta1, beta2, eps,
               weight_decay, decoupled_weight_decay, maximize):
    """RAdam (Adam with a rectified variance) over lists of arrays, in place; the first
    steps are plain momentum steps.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.optim import kernels
    >>> p, g = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    >>> m, v = np.zeros(2), np.zeros(2)
    >>> kernels.radam_step([p], [g], [m], [v], [1.0], lr=0.1, beta1=0.9, beta2=0.999, eps=1e-8,
    ...                    weight_decay=0.0, decoupled_weight_decay=False, maximize=False)
    >>> p.round(4)
    array([0.95, 2.05])
    """
    rho_inf = 2 / (1 - beta2) - 1
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        tmp = np.empty_like(p)
        _adam_moments(p, g, m, v, lr=lr, beta1=beta1, beta2=beta2,
                      weight_decay=weight_decay, decoupled=decoupled_weight_decay,
                      maximize=maximize)
        step = steps[i]
        bias_correction2 = 1 - beta2**step
        update = m / (1 - beta1**step)
        update *= lr
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        if rho_t > 5.0:
            np.sqrt(v, out=tmp)
            tmp += eps
            # a number over a tensor, as torch (and the per-parameter path): the
            # reciprocal times the number
            np.reciprocal(tmp, out=tmp)
            tmp *= p.dtype.type(bias_correction2**0.5)
            update *= tmp
            update *= _rectification(rho_t, rho_inf)
        update *= -1.0
        p += update


def _rectification(rho_t, rho_inf):
    """RAdam's variance rectification term r_t."""
    return (
        (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
    ) ** 0.5


def rmsprop_step(params, grads, square_avgs, grad_avgs, momentum_buffers, *, lr, alpha, eps,
                 weight_decay, momentum, centered, maximize):
    """RMSprop (optionally centered, with momentum) over lists of arrays, in place.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.optim import kernels
    >>> p, g = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    >>> square_avg = np.zeros(2)
    >>> kernels.rmsprop_step([p], [g], [square_avg], [None], [None], lr=0.01, alpha=0.99,
    ...                      eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
    ...                      maximize=False)
    >>> p.round(4)
    array([0.9, 2.1])
    """
    for i, (p, g, v) in enumerate(zip(params, grads, square_avgs)):
        g = _grad(g, p, maximize, weight_decay)
        tmp = np.empty_like(p)
        v *= alpha
        _addcmul_(v, g, g, 1 - alpha)
        if centered:
            mean = grad_avgs[i]
            _lerp_(mean, g, 1 - alpha)
            avg = v.copy()
            _addcmul_(avg, mean, mean, -1)
            np.sqrt(avg, out=avg)
        else:
            avg = np.sqrt(v)
        avg += eps
        if momentum > 0:
            buf = momentum_buffers[i]
            buf *= momentum
            _addcdiv_(buf, g, avg, 1, tmp)
            _add(p, buf, -lr, out=p)
        else:
            _addcdiv_(p, g, avg, -lr, tmp)


def adagrad_step(params, grads, state_sums, steps, *, lr, lr_decay, weight_decay, eps,
                 maximize):
    """Adagrad over lists of arrays, in place.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.optim import kernels
    >>> p, g = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    >>> state_sum = np.zeros(2)
    >>> kernels.adagrad_step([p], [g], [state_sum], [1.0], lr=0.1, lr_decay=0.0,
    ...                      weight_decay=0.0, eps=1e-10, maximize=False)
    >>> p.round(4), state_sum
    (array([0.9, 2.1]), array([0.25, 0.25]))
    """
    for i, (p, g, s) in enumerate(zip(params, grads, state_sums)):
        g = _grad(g, p, maximize, weight_decay)
        clr = lr / (1 + (steps[i] - 1) * lr_decay)
        tmp = np.empty_like(p)
        _addcmul_(s, g, g, 1)
        std = np.sqrt(s)
        std += eps
        _addcdiv_(p, g, std, -clr, tmp)


def adadelta_step(params, grads, square_avgs, acc_deltas, *, lr, rho, eps, weight_decay,
                  maximize):
    """Adadelta over lists of arrays, in place.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.optim import kernels
    >>> p, g = np.array([1.0, 2.0]), np.array([0.5, -0.5])
    >>> square_avg, acc_delta = np.zeros(2), np.zeros(2)
    >>> kernels.adadelta_step([p], [g], [square_avg], [acc_delta], lr=1.0, rho=0.9, eps=1e-6,
    ...                       weight_decay=0.0, maximize=False)
    >>> p.round(4)
    array([0.9968, 2.0032])
    """
    for p, g, v, u in zip(params, grads, square_avgs, acc_deltas):
        g = _grad(g, p, maximize, weight_decay)
        v *= rho
        _addcmul_(v, g, g, 1 - rho)
        std = v + eps
        np.sqrt(std, out=std)
        delta = u + eps
        np.sqrt(delta, out=delta)
        delta /= std
        delta *= g
        u *= rho
        _addcmul_(u, delta, delta, 1 - rho)
        _add(p, delta, -lr, out=p)


#: op name -> NumPy kernel, registered for "cpu" by torcia-optim's plugin
KERNELS = {
    "sgd_step": sgd_step,
    "adam_step": adam_step,
    "adamax_step": adamax_step,
    "nadam_step": nadam_step,
    "radam_step": radam_step,
    "rmsprop_step": rmsprop_step,
    "adagrad_step": adagrad_step,
    "adadelta_step": adadelta_step,
}
