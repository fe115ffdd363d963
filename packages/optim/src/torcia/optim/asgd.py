"""ASGD: averaged stochastic gradient descent."""

from __future__ import annotations

import torcia
from torcia.optim.elementwise import ElementwiseOptimizer
from torcia.optim.optimizer import check_value, step_tensor


class ASGD(ElementwiseOptimizer):
    r"""Averaged SGD (Polyak & Juditsky, 1992), with PyTorch's decaying step size and
    running average ``ax`` of the iterates (kept in the state, started at step ``t0``).

    .. math::
        \theta_t &\leftarrow (1 - \lambda\eta_{t-1})\theta_{t-1} - \eta_{t-1} g_t \\
        \bar\theta_t &\leftarrow \bar\theta_{t-1} + \mu_{t-1}(\theta_t - \bar\theta_{t-1}) \\
        \eta_t &= \gamma / (1 + \lambda\gamma t)^\alpha, \quad \mu_t = 1 / \max(1, t - t_0)

    Parameters
    ----------
    params : iterable of Tensor or dict
    lr : float, default 1e-2
    lambd : float, default 1e-4
        Decay term.
    alpha : float, default 0.75
        Power of the step-size decay.
    t0 : float, default 1e6
        Step at which averaging starts.
    weight_decay : float, default 0
    foreach : bool or None, default None
    maximize : bool, default False

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = torcia.optim.ASGD([w], lr=0.1)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    kernel_op = "asgd_step"
    buffers = ("eta", "mu", "ax")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        check_value(lr >= 0.0, "learning rate", lr)
        check_value(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def init_state(self, p, group):
        return {"step": step_tensor(), "eta": torcia.tensor(float(group["lr"])),
                "mu": torcia.tensor(1.0), "ax": torcia.zeros_like(p)}

    def hyper(self, group):
        return dict(lr=group["lr"], lambd=group["lambd"], alpha=group["alpha"],
                    t0=group["t0"], weight_decay=group["weight_decay"],
                    maximize=group["maximize"])

    @staticmethod
    def reference(p, grad, state, step, *, lr, lambd, alpha, t0, weight_decay, maximize):
        if maximize:
            grad = -grad
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        eta, mu, ax = state["eta"], state["mu"], state["ax"]
        p.mul_(1 - lambd * eta.item())
        p.add_(grad, alpha=-eta.item())
        if mu.item() != 1:
            ax.add_(p.sub(ax).mul_(mu.item()))
        else:
            ax.copy_(p)
        eta.fill_(lr / ((1 + lambd * lr * step) ** alpha))
        mu.fill_(1 / max(1, step - t0))
