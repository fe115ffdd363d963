"""Adagrad."""

from __future__ import annotations

import torcia
from torcia.optim.elementwise import ElementwiseOptimizer
from torcia.optim.optimizer import check_value, step_tensor


class Adagrad(ElementwiseOptimizer):
    r"""Adagrad (Duchi et al., 2011).

    .. math::
        \tilde\gamma_t &= \gamma / (1 + (t - 1)\eta) \\
        s_t &\leftarrow s_{t-1} + g_t^2 \\
        \theta_t &\leftarrow \theta_{t-1} - \tilde\gamma_t \frac{g_t}{\sqrt{s_t} + \epsilon}

    The state is made for every parameter when the optimizer is built, as PyTorch does
    (so ``s_0`` is ``initial_accumulator_value``).

    Parameters
    ----------
    params : iterable of Tensor or dict
    lr : float, default 1e-2
    lr_decay : float, default 0
        :math:`\eta`.
    weight_decay : float, default 0
    initial_accumulator_value : float, default 0
    eps : float, default 1e-10
    foreach : bool or None, default None
        Use the device's multi-tensor kernel ``adagrad_step`` (None: when there is one).
    maximize : bool, default False

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0], requires_grad=True)
    >>> opt = torcia.optim.Adagrad([w], lr=0.1)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 4)
    0.9
    """

    kernel_op = "adagrad_step"
    buffers = ("sum",)

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0,
                 initial_accumulator_value=0, eps=1e-10, foreach=None, *, maximize=False):
        check_value(lr >= 0.0, "learning rate", lr)
        check_value(lr_decay >= 0.0, "lr_decay value", lr_decay)
        check_value(weight_decay >= 0.0, "weight_decay value", weight_decay)
        check_value(initial_accumulator_value >= 0.0, "initial_accumulator_value value",
                    initial_accumulator_value)
        check_value(eps >= 0.0, "epsilon value", eps)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p].update(self.init_state(p, group))

    def init_state(self, p, group):
        return {"step": step_tensor(),
                "sum": torcia.full_like(p, group["initial_accumulator_value"])}

    def hyper(self, group):
        return {k: group[k] for k in ("lr", "lr_decay", "weight_decay", "eps", "maximize")}

    @staticmethod
    def reference(p, grad, state, step, *, lr, lr_decay, weight_decay, eps, maximize):
        if maximize:
            grad = -grad
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        clr = lr / (1 + (step - 1) * lr_decay)
        state_sum = state["sum"]
        state_sum.addcmul_(grad, grad, value=1)
        std = state_sum.sqrt().add_(eps)
        p.addcdiv_(grad, std, value=-clr)
