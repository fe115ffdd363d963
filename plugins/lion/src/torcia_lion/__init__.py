"""torcia-lion: the Lion optimizer (Chen et al., 2023, "Symbolic Discovery of Optimization
Algorithms") as a torcia plugin.

Installing the distribution is all it takes; torcia finds the plugin through its entry point
and the optimizer appears by name::

    import torcia
    opt = torcia.optim.create("lion", model.parameters(), lr=1e-4, weight_decay=1.0)
    opt = torcia.optim.Lion(model.parameters())     # the same class

The plugin also registers ``lion_step``, a multi-tensor NumPy kernel for the "cpu" device
(signature in the style of :mod:`torcia.optim.kernels`: params, grads, exp_avgs; keywords
lr, beta1, beta2, weight_decay).
"""

from __future__ import annotations

import numpy as np

import torcia
from torcia.optim import ElementwiseOptimizer
from torcia.optim.optimizer import check_betas, check_value

__all__ = ["Lion", "lion_step"]


class Lion(ElementwiseOptimizer):
    r"""Lion: the sign of an interpolated momentum, with decoupled weight decay.

    .. math::
        c_t &= \beta_1 m_{t-1} + (1 - \beta_1) g_t \\
        \theta_t &\leftarrow \theta_{t-1} - \gamma (\operatorname{sign}(c_t)
                   + \lambda \theta_{t-1}) \\
        m_t &\leftarrow \beta_2 m_{t-1} + (1 - \beta_2) g_t

    Every coordinate moves by exactly ``lr`` (plus decay), so Lion wants a smaller rate and
    a larger weight decay than AdamW (the paper suggests 3-10x less and more).

    Parameters
    ----------
    params : iterable of Tensor or dict
    lr : float, default 1e-4
    betas : tuple of float, default (0.9, 0.99)
        Interpolation factor of the update and decay rate of the momentum.
    weight_decay : float, default 0
    foreach : bool or None, default None
        Use the device's ``lion_step`` kernel (None: when there is one).

    Examples
    --------
    >>> import torcia
    >>> from torcia_lion import Lion
    >>> w = torcia.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = Lion([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    kernel_op = "lion_step"
    buffers = ("exp_avg",)
    has_step = False
    kernel_takes_steps = False

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, *, foreach=None):
        check_value(lr >= 0.0, "learning rate", lr)
        check_betas(betas)
        check_value(weight_decay >= 0.0, "weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay,
                                      foreach=foreach))

    def init_state(self, p, group):
        return {"exp_avg": torcia.zeros_like(p)}

    def hyper(self, group):
        beta1, beta2 = group["betas"]
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2,
                    weight_decay=group["weight_decay"])

    @staticmethod
    def reference(p, grad, state, step, *, lr, beta1, beta2, weight_decay):
        exp_avg = state["exp_avg"]
        p.mul_(1 - lr * weight_decay)
        update = exp_avg.mul(beta1).add(grad, alpha=1 - beta1).sign_()
        p.add_(update, alpha=-lr)
        exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)


def lion_step(params, grads, exp_avgs, *, lr, beta1, beta2, weight_decay):
    """Lion's update of every parameter in place, in the order of ``Lion.reference``."""
    for p, g, m in zip(params, grads, exp_avgs):
        p *= 1 - lr * weight_decay
        c = m * beta1
        c += g * (1 - beta1)
        np.sign(c, out=c)
        p += c * -lr
        m *= beta2
        m += g * (1 - beta2)


@torcia.hookimpl
def torcia_register_optimizers(registry):
    registry.add("lion", Lion)


@torcia.hookimpl
def torcia_register_kernels(registry):
    registry.add("lion_step", "cpu", lion_step)
