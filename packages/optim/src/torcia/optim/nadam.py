"""NAdam: Adam with Nesterov momentum."""

from __future__ import annotations

import torcia
from torcia.optim.adam import adam_moments
from torcia.optim.elementwise import ElementwiseOptimizer
from torcia.optim.optimizer import check_betas, check_value, step_tensor


class NAdam(ElementwiseOptimizer):
    r"""NAdam (Dozat, 2016): Adam with Nesterov momentum and the momentum schedule
    :math:`\mu_t = \beta_1 (1 - \frac12 0.96^{t \psi})`.

    .. math::
        m_t &\leftarrow \beta_1 m_{t-1} + (1 - \beta_1) g_t, \quad
        v_t \leftarrow \beta_2 v_{t-1} + (1 - \beta_2) g_t^2 \\
        d_t &= \sqrt{v_t / (1 - \beta_2^t)} + \epsilon \\
        \theta_t &\leftarrow \theta_{t-1}
            - \gamma \frac{1 - \mu_t}{1 - \prod_{i \le t} \mu_i} \frac{g_t}{d_t}
            - \gamma \frac{\mu_{t+1}}{1 - \prod_{i \le t+1} \mu_i} \frac{m_t}{d_t}

    Parameters
    ----------
    params : iterable of Tensor or dict
    lr : float, default 2e-3
    betas : tuple of float, default (0.9, 0.999)
    eps : float, default 1e-8
    weight_decay : float, default 0
    momentum_decay : float, default 4e-3
        :math:`\psi` of the momentum schedule.
    decoupled_weight_decay : bool, default False
        Decay the weights directly (as AdamW) instead of an L2 term in the gradient.
    foreach : bool or None, default None
        Use the device's multi-tensor kernel ``nadam_step`` (None: when there is one).
    maximize : bool, default False

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0], requires_grad=True)
    >>> opt = torcia.optim.NAdam([w], lr=0.1)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 4)
    0.8944
    """

    kernel_op = "nadam_step"
    buffers = ("exp_avg", "exp_avg_sq", "mu_product")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False):
        check_value(lr >= 0.0, "learning rate", lr)
        check_value(eps >= 0.0, "epsilon value", eps)
        check_betas(betas)
        check_value(weight_decay >= 0.0, "weight_decay value", weight_decay)
        check_value(momentum_decay >= 0.0, "momentum_decay value", momentum_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach)
        super().__init__(params, defaults)

    def init_state(self, p, group):
        return {"step": step_tensor(), "mu_product": torcia.tensor(1.0, dtype=torcia.float32),
                "exp_avg": torcia.zeros_like(p), "exp_avg_sq": torcia.zeros_like(p)}

    def hyper(self, group):
        beta1, beta2 = group["betas"]
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                    weight_decay=group["weight_decay"], momentum_decay=group["momentum_decay"],
                    decoupled_weight_decay=group["decoupled_weight_decay"],
                    maximize=group["maximize"])

    @staticmethod
    def reference(p, grad, state, step, *, lr, beta1, beta2, eps, weight_decay, momentum_decay,
                  decoupled_weight_decay, maximize):
        grad = adam_moments(p, grad, state, lr=lr, beta1=beta1, beta2=beta2,
                            weight_decay=weight_decay, decoupled=decoupled_weight_decay,
                            maximize=maximize)
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        # the running product is a float32 tensor, rounded each step as PyTorch keeps it
        mu_product = state["mu_product"].mul_(mu).item()
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        denom = exp_avg_sq.div(1 - beta2**step).sqrt().add_(eps)
        p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - mu_product))
        p.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - mu_product * mu_next))
