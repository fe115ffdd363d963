"""Adamax: Adam with the infinity norm."""

from __future__ import annotations

import torcia
from torcia.optim.elementwise import ElementwiseOptimizer
from torcia.optim.optimizer import check_betas, check_value, step_tensor


class Adamax(ElementwiseOptimizer):
    r"""Adamax (Kingma & Ba, 2015, section 7): Adam whose second moment is an exponentially
    weighted infinity norm.

    .. math::
        m_t &\leftarrow \beta_1 m_{t-1} + (1 - \beta_1) g_t \\
        u_t &\leftarrow \max(\beta_2 u_{t-1}, |g_t| + \epsilon) \\
        \theta_t &\leftarrow \theta_{t-1} - \frac{\gamma}{1 - \beta_1^t} \frac{m_t}{u_t}

    Parameters
    ----------
    params : iterable of Tensor or dict
    lr : float, default 2e-3
    betas : tuple of float, default (0.9, 0.999)
    eps : float, default 1e-8
    weight_decay : float, default 0
        L2 penalty added to the gradient.
    foreach : bool or None, default None
        Use the device's multi-tensor kernel ``adamax_step`` (None: when there is one).
    maximize : bool, default False

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = torcia.optim.Adamax([w], lr=0.1)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    kernel_op = "adamax_step"
    buffers = ("exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False):
        check_value(lr >= 0.0, "learning rate", lr)
        check_value(eps >= 0.0, "epsilon value", eps)
        check_betas(betas)
        check_value(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def init_state(self, p, group):
        return {"step": step_tensor(), "exp_avg": torcia.zeros_like(p),
                "exp_inf": torcia.zeros_like(p)}

    def hyper(self, group):
        beta1, beta2 = group["betas"]
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                    weight_decay=group["weight_decay"], maximize=group["maximize"])

    @staticmethod
    def reference(p, grad, state, step, *, lr, beta1, beta2, eps, weight_decay, maximize):
        if maximize:
            grad = -grad
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_inf.copy_(torcia.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
        p.addcdiv_(exp_avg, exp_inf, value=-(lr / (1 - beta1**step)))
