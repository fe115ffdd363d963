"""Adam and AdamW."""

from __future__ import annotations

import torcia
from torcia.optim.elementwise import ElementwiseOptimizer
from torcia.optim.optimizer import check_betas, check_value, step_tensor


def adam_moments(p, grad, state, *, lr, beta1, beta2, weight_decay, decoupled, maximize):
    """The Adam family's first half: sign, weight decay (L2 into the gradient, or decoupled
    into the parameter) and both moment averages in ``state``; returns the gradient used."""
    if maximize:
        grad = -grad
    if weight_decay != 0:
        if decoupled:
            p.mul_(1 - lr * weight_decay)
        else:
            grad = grad.add(p, alpha=weight_decay)
    state["exp_avg"].lerp_(grad, 1 - beta1)
    state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    return grad


class Adam(ElementwiseOptimizer):
    r"""Adam (Kingma & Ba, 2015), with the AMSGrad variant and optional decoupled weight
    decay.

    With gradient :math:`g_t` (negated when ``maximize``) and step :math:`t`:

    .. math::
        g_t &\leftarrow g_t + \lambda \theta_{t-1} \quad
              (\text{or } \theta_{t-1} \leftarrow (1 - \gamma\lambda)\theta_{t-1}
              \text{ when decoupled}) \\
        m_t &\leftarrow \beta_1 m_{t-1} + (1 - \beta_1) g_t \\
        v_t &\leftarrow \beta_2 v_{t-1} + (1 - \beta_2) g_t^2 \\
        \hat v_t &\leftarrow \max(\hat v_{t-1}, v_t) \ \text{(amsgrad, else } v_t) \\
        \theta_t &\leftarrow \theta_{t-1} - \frac{\gamma}{1 - \beta_1^t}
              \frac{m_t}{\sqrt{\hat v_t} / \sqrt{1 - \beta_2^t} + \epsilon}

    Parameters
    ----------
    params : iterable of Tensor or dict
        Parameters or parameter groups.
    lr : float, default 1e-3
    betas : tuple of float, default (0.9, 0.999)
        Decay rates of the first and second moment averages.
    eps : float, default 1e-8
        Added to the denominator.
    weight_decay : float, default 0
    amsgrad : bool, default False
        Use the running maximum of the second moment.
    foreach : bool or None, default None
        Use the device's multi-tensor kernel ``adam_step`` (None: when there is one).
    maximize : bool, default False
    decoupled_weight_decay : bool, default False
        Decay the weights directly (AdamW) instead of adding an L2 term to the gradient.

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = torcia.optim.Adam([w], lr=0.1)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    kernel_op = "adam_step"
    buffers = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, decoupled_weight_decay=False):
        check_value(lr >= 0.0, "learning rate", lr)
        check_value(eps >= 0.0, "epsilon value", eps)
        check_betas(betas)
        check_value(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def init_state(self, p, group):
        state = {"step": step_tensor(), "exp_avg": torcia.zeros_like(p),
                 "exp_avg_sq": torcia.zeros_like(p)}
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = torcia.zeros_like(p)
        return state

    def hyper(self, group):
        beta1, beta2 = group["betas"]
        return dict(lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
                    weight_decay=group["weight_decay"], amsgrad=group["amsgrad"],
                    maximize=group["maximize"],
                    decoupled_weight_decay=group["decoupled_weight_decay"])

    @staticmethod
    def reference(p, grad, state, step, *, lr, beta1, beta2, eps, weight_decay, amsgrad,
                  maximize, decoupled_weight_decay):
        adam_moments(p, grad, state, lr=lr, beta1=beta1, beta2=beta2,
                     weight_decay=weight_decay, decoupled=decoupled_weight_decay,
                     maximize=maximize)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        bias_correction1 = 1 - beta1**step
        bias_correction2_sqrt = (1 - beta2**step) ** 0.5
        if amsgrad:
            max_sq = state["max_exp_avg_sq"]
            max_sq.copy_(torcia.maximum(max_sq, exp_avg_sq))
            exp_avg_sq = max_sq
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        p.addcdiv_(exp_avg, denom, value=-(lr / bias_correction1))


class AdamW(Adam):
    r"""Adam with decoupled weight decay (Loshchilov & Hutter, 2019): the weights shrink by
    :math:`1 - \gamma\lambda` each step instead of the gradient getting an L2 term.

    Same parameters as :class:`Adam`, with ``weight_decay`` defaulting to 1e-2.

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = torcia.optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.8500, -1.8000], requires_grad=True)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, decoupled_weight_decay=True)
