"""Adadelta."""

from __future__ import annotations

import torcia
from torcia.optim.elementwise import ElementwiseOptimizer
from torcia.optim.optimizer import check_value, step_tensor


class Adadelta(ElementwiseOptimizer):
    r"""Adadelta (Zeiler, 2012).

    .. math::
        v_t &\leftarrow \rho v_{t-1} + (1 - \rho) g_t^2 \\
        \Delta_t &= \frac{\sqrt{u_{t-1} + \epsilon}}{\sqrt{v_t + \epsilon}} g_t \\
        u_t &\leftarrow \rho u_{t-1} + (1 - \rho) \Delta_t^2, \quad
        \theta_t \leftarrow \theta_{t-1} - \gamma \Delta_t

    Parameters
    ----------
    params : iterable of Tensor or dict
    lr : float, default 1.0
        Scales the update :math:`\Delta_t`.
    rho : float, default 0.9
        Decay rate of both running averages.
    eps : float, default 1e-6
    weight_decay : float, default 0
    foreach : bool or None, default None
        Use the device's multi-tensor kernel ``adadelta_step`` (None: when there is one).
    maximize : bool, default False

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0], requires_grad=True)
    >>> opt = torcia.optim.Adadelta([w])
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 4)
    0.9968
    """

    kernel_op = "adadelta_step"
    buffers = ("square_avg", "acc_delta")
    kernel_takes_steps = False

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 maximize=False):
        check_value(lr >= 0.0, "learning rate", lr)
        check_value(0.0 <= rho <= 1.0, "rho value", rho)
        check_value(eps >= 0.0, "epsilon value", eps)
        check_value(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach)
        super().__init__(params, defaults)

    def init_state(self, p, group):
        return {"step": step_tensor(), "square_avg": torcia.zeros_like(p),
                "acc_delta": torcia.zeros_like(p)}

    def hyper(self, group):
        return {k: group[k] for k in ("lr", "rho", "eps", "weight_decay", "maximize")}

    @staticmethod
    def reference(p, grad, state, step, *, lr, rho, eps, weight_decay, maximize):
        if maximize:
            grad = -grad
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
        acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-lr)
