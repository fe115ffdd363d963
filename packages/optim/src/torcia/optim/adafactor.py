"""Adafactor: Adam-like steps with factored second moments."""

from __future__ import annotations

import math

import torcia
from torcia.optim.optimizer import Optimizer, _closure_loss, check_value, step_tensor


class Adafactor(Optimizer):
    r"""Adafactor (Shazeer & Stern, 2018) as PyTorch implements it: the second moment of a
    matrix gradient is kept as row and column means (memory ``O(n + m)``), the step is
    relative to the parameter's RMS and capped by the update's RMS ``d``.

    Parameters
    ----------
    params : iterable of Tensor or dict
    lr : float, default 1e-2
        Upper bound of the relative step size ``min(lr, 1/sqrt(t))``.
    beta2_decay : float, default -0.8
        The second-moment weight is ``t ** beta2_decay``.
    eps : tuple, default (None, 1e-3)
        ``eps1`` guards the denominator (None: the dtype's machine epsilon), ``eps2``
        the parameter scale.
    d : float, default 1.0
        Clipping threshold of the update's RMS.
    weight_decay : float, default 0.0
        Decoupled weight decay.
    foreach : bool or None, default None
        Accepted; the update runs parameter by parameter.
    maximize : bool, default False

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([[1.0, -2.0], [0.5, 3.0]], requires_grad=True)
    >>> opt = torcia.optim.Adafactor([w])
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> w.detach().round(decimals=4)
    tensor([[ 0.9732, -1.9834],
            [ 0.4902,  2.9817]])
    """

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        check_value(0.0 <= lr, "learning rate", lr)
        check_value(beta2_decay <= 0.0, "beta2_decay value", beta2_decay)
        check_value(eps[0] is None or eps[0] >= 0.0, "epsilon1 value", eps[0])
        check_value(eps[1] >= 0.0, "epsilon2 value", eps[1])
        check_value(d >= 1.0, "clipping threshold d value", d)
        check_value(weight_decay >= 0.0, "weight_decay value", weight_decay)
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """Perform a single optimization step.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the model and returns the loss.
        """
        loss = _closure_loss(closure)
        with torcia.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._update(p, group)
        return loss

    def _update(self, p, group):
        grad = -p.grad if group["maximize"] else p.grad
        state = self.state[p]
        if not state:
            state["step"] = step_tensor()
            if grad.dim() > 1:
                state["row_var"] = torcia.zeros(*grad.shape[:-1], 1, dtype=grad.dtype)
                state["col_var"] = torcia.zeros(*grad.shape[:-2], 1, grad.shape[-1],
                                                dtype=grad.dtype)
            else:
                state["variance"] = torcia.zeros_like(grad)
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = torcia.finfo(p.dtype).eps
        state["step"].add_(1)
        step = state["step"].item()
        one_minus_beta2 = step ** group["beta2_decay"]
        rho = min(group["lr"], 1 / math.sqrt(step))
        alpha = max(eps2, p.norm(2).item() / math.sqrt(p.numel())) * rho
        if group["weight_decay"] != 0:
            p.mul_(1 - group["lr"] * group["weight_decay"])
        if grad.dim() > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            row_var.lerp_(grad.norm(dim=-1, keepdim=True).square() / grad.shape[-1],
                          one_minus_beta2)
            col_var.lerp_(grad.norm(dim=-2, keepdim=True).square() / grad.shape[-2],
                          one_minus_beta2)
            var_estimate = row_var @ col_var
            var_estimate = var_estimate / row_var.mean(dim=-2, keepdim=True).clamp(min=eps1)
        else:
            state["variance"].lerp_(grad * grad, one_minus_beta2)
            var_estimate = state["variance"].clone()
        update = var_estimate.clamp(min=eps1 * eps1).rsqrt() * grad
        denom = max(1.0, update.norm(2).item() / (math.sqrt(update.numel()) * group["d"]))
        p.add_(update, alpha=-alpha / denom)
