"""Stochastic gradient descent, with momentum and Nesterov momentum."""

from __future__ import annotations

from torcia.optim.elementwise import ElementwiseOptimizer
from torcia.optim.optimizer import check_value


class SGD(ElementwiseOptimizer):
    r"""Stochastic gradient descent (optionally with momentum).

    With gradient :math:`g_t` (negated when ``maximize``), for each step:

    .. math::
        g_t &\leftarrow g_t + \lambda \theta_{t-1} \\
        b_t &\leftarrow \mu b_{t-1} + (1 - \tau) g_t \quad (b_1 = g_1) \\
        g_t &\leftarrow g_t + \mu b_t \ \text{(nesterov)} \ \text{or} \ b_t \\
        \theta_t &\leftarrow \theta_{t-1} - \gamma g_t

    Parameters
    ----------
    params : iterable of Tensor or dict
        Parameters or parameter groups.
    lr : float, default 1e-3
        Learning rate :math:`\gamma`.
    momentum : float, default 0
        Momentum factor :math:`\mu`.
    dampening : float, default 0
        Dampening :math:`\tau` of the momentum.
    weight_decay : float, default 0
        L2 penalty :math:`\lambda`.
    nesterov : bool, default False
        Nesterov momentum (needs momentum > 0 and zero dampening).
    maximize : bool, default False
        Maximize the objective instead of minimizing it.
    foreach : bool or None, default None
        Use the device's multi-tensor kernel ``sgd_step`` (None: when there is one).

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = torcia.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    sparse_gradients = True
    kernel_op = "sgd_step"
    buffers = ("momentum_buffer",)
    has_step = False
    kernel_takes_steps = False

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None):
        check_value(lr >= 0.0, "learning rate", lr)
        check_value(momentum >= 0.0, "momentum value", momentum)
        check_value(weight_decay >= 0.0, "weight_decay value", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach)
        super().__init__(params, defaults)

    def init_state(self, p, group):
        return {}

    def hyper(self, group):
        return {k: group[k] for k in ("lr", "weight_decay", "momentum", "dampening",
                                      "nesterov", "maximize")}

    @staticmethod
    def reference(p, grad, state, step, *, lr, weight_decay, momentum, dampening, nesterov,
                  maximize):
        if maximize:
            grad = -grad
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = grad.detach().clone()
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            grad = grad.add(buf, alpha=momentum) if nesterov else buf
        p.add_(grad, alpha=-lr)
