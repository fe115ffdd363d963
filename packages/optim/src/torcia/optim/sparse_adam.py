"""SparseAdam: Adam for sparse gradients (an ``Embedding(..., sparse=True)``'s)."""

from __future__ import annotations

import math

import torcia
from torcia.optim.optimizer import Optimizer, _closure_loss, check_betas, check_value


class SparseAdam(Optimizer):
    r"""The lazy Adam of PyTorch's ``SparseAdam``: each step updates only the rows (the
    stored coordinates) the sparse gradient holds, their moment averages and their
    parameters; the other rows and their moments stay as they are.

    With the gradient's values :math:`g` at its coordinates and step :math:`t`:

    .. math::
        m \leftarrow \beta_1 m + (1 - \beta_1) g, \quad
        v \leftarrow \beta_2 v + (1 - \beta_2) g^2, \quad
        \theta \leftarrow \theta - \gamma \frac{\sqrt{1 - \beta_2^t}}{1 - \beta_1^t}
        \frac{m}{\sqrt{v} + \epsilon}

    at those coordinates only.

    Parameters
    ----------
    params : iterable of Tensor or dict
        Dense parameters whose gradients are sparse.
    lr : float, default 1e-3
    betas : tuple of float, default (0.9, 0.999)
    eps : float, default 1e-8
    maximize : bool, default False

    Examples
    --------
    >>> import torcia
    >>> emb = torcia.nn.Embedding(4, 2, sparse=True)
    >>> before = emb.weight.detach().clone()
    >>> opt = torcia.optim.SparseAdam(emb.parameters(), lr=0.1)
    >>> emb(torcia.tensor([1, 3])).sum().backward()
    >>> opt.step()
    >>> (emb.weight != before).any(dim=1).tolist()  # only the rows looked up moved
    [False, True, False, True]
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        check_value(lr >= 0.0, "learning rate", lr)
        check_value(eps >= 0.0, "epsilon value", eps)
        check_betas(betas)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        sparse_params = [(gi, pi) for gi, group in enumerate(self.param_groups)
                         for pi, p in enumerate(group["params"]) if p.is_sparse]
        if sparse_params:
            raise ValueError(f"Sparse params at indices {sparse_params}: SparseAdam requires "
                             "dense parameter tensors")

    def step(self, closure=None):
        """Update the parameters from their sparse gradients.

        Parameters
        ----------
        closure : callable, optional
            Re-evaluates the model and returns the loss.
        """
        loss = _closure_loss(closure)
        with torcia.no_grad():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if not p.grad.is_sparse:
                        raise RuntimeError("SparseAdam does not support dense gradients, "
                                           "please consider Adam instead")
                    self._update(p, p.grad, group["lr"], beta1, beta2, group["eps"],
                                 group["maximize"])
        return loss

    def _update(self, p, grad, lr, beta1, beta2, eps, maximize):
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["exp_avg"] = torcia.zeros_like(p)
            state["exp_avg_sq"] = torcia.zeros_like(p)
        state["step"] += 1
        grad = grad.coalesce()
        values = -grad.values() if maximize else grad.values()
        if values.numel() == 0:
            return
        idx = tuple(grad.indices())
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        # old <- b * old + (1 - b) * new, at the gradient's coordinates only
        m = exp_avg[idx]
        v = exp_avg_sq[idx]
        m = m + (values - m) * (1 - beta1)
        v = v + (values * values - v) * (1 - beta2)
        exp_avg[idx] = m
        exp_avg_sq[idx] = v
        step = state["step"]
        step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
        p[idx] = p[idx] - step_size * m / (v.sqrt() + eps)
