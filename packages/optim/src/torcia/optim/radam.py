"""RAdam: Adam with a rectified adaptive learning rate."""

from __future__ import annotations

import torcia
from torcia.optim.adam import adam_moments
from torcia.optim.elementwise import ElementwiseOptimizer
from torcia.optim.kernels import _rectification
from torcia.optim.optimizer import check_betas, check_value, step_tensor


class RAdam(ElementwiseOptimizer):
    r"""RAdam (Liu et al., 2020): Adam whose adaptive term is switched on, and rectified,
    once the variance of the adaptive learning rate is tractable.

    .. math::
        \rho_\infty &= \frac{2}{1 - \beta_2} - 1, \quad
        \rho_t = \rho_\infty - \frac{2 t \beta_2^t}{1 - \beta_2^t} \\
        \theta_t &\leftarrow \theta_{t-1} - \gamma \frac{m_t}{1 - \beta_1^t}
            \cdot \begin{cases} r_t \frac{\sqrt{1 - \beta_2^t}}{\sqrt{v_t} + \epsilon}
            & \rho_t > 5 \\ 1 & \text{otherwise} \end{cases}, \quad
        r_t = \sqrt{\frac{(\rho_t - 4)(\rho_t - 2)\rho_\infty}
                         {(\rho_\infty - 4)(\rho_\infty - 2)\rho_t}}

    Parameters
    ----------
    params : iterable of Tensor or dict
    lr : float, default 1e-3
    betas : tuple of float, default (0.9, 0.999)
    eps : float, default 1e-8
    weight_decay : float, default 0
    decoupled_weight_decay : bool, default False
    foreach : bool or None, default None
        Use the device's multi-tensor kernel ``radam_step`` (None: when there is one).
    maximize : bool, default False

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0], requires_grad=True)
    >>> opt = torcia.optim.RAdam([w], lr=0.1)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 4)
    0.8
    """

    kernel_op = "radam_step"
    buffers = ("exp_avg", "exp_avg_sq")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False):
        check_value(lr >= 0.0, "learning rate", lr)
        check_value(eps >= 0.0, "epsilon value", eps)
        check_betas(betas)
        check_value(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def init_state(self, p, group):
        return {"step": step_tensor(), "exp_avg": torcia.zeros_like(p),
                "exp_avg_sq": torcia.zeros_like(p)}

    def hyper(self, group):
        beta1, beta2 = group["betas"]
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                    weight_decay=group["weight_decay"],
                    decoupled_weight_decay=group["decoupled_weight_decay"],
                    maximize=group["maximize"])

    @staticmethod
    def reference(p, grad, state, step, *, lr, beta1, beta2, eps, weight_decay,
                  decoupled_weight_decay, maximize):
        adam_moments(p, grad, state, lr=lr, beta1=beta1, beta2=beta2,
                     weight_decay=weight_decay, decoupled=decoupled_weight_decay,
                     maximize=maximize)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        bias_correction2 = 1 - beta2**step
        update = exp_avg / (1 - beta1**step) * lr
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        if rho_t > 5.0:
            adaptive = (bias_correction2**0.5) / exp_avg_sq.sqrt().add_(eps)
            update = update * adaptive * _rectification(rho_t, rho_inf)
        p.add_(update, alpha=-1.0)
