"""Rprop: resilient backpropagation."""

from __future__ import annotations

import torcia
from torcia.optim.elementwise import ElementwiseOptimizer
from torcia.optim.optimizer import check_value, step_tensor


class Rprop(ElementwiseOptimizer):
    r"""Resilient backpropagation (Riedmiller & Braun, 1993): each weight has its own step
    size, grown by ``etas[1]`` while its gradient keeps its sign and shrunk by ``etas[0]``
    when the sign flips (that step is then skipped); only the gradient's sign is used.

    Parameters
    ----------
    params : iterable of Tensor or dict
    lr : float, default 1e-2
        Initial step size.
    etas : tuple of float, default (0.5, 1.2)
        Multiplicative decrease and increase factors.
    step_sizes : tuple of float, default (1e-6, 50)
        Minimal and maximal step sizes.
    foreach : bool or None, default None
    maximize : bool, default False

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = torcia.optim.Rprop([w], lr=0.1)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> w
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    kernel_op = "rprop_step"
    buffers = ("prev", "step_size")

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        check_value(lr >= 0.0, "learning rate", lr)
        check_value(0.0 < etas[0] < 1.0 < etas[1], "eta values", etas)
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                        maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def init_state(self, p, group):
        return {"step": step_tensor(), "prev": torcia.zeros_like(p),
                "step_size": torcia.full_like(p, group["lr"])}

    def hyper(self, group):
        etaminus, etaplus = group["etas"]
        step_min, step_max = group["step_sizes"]
        return dict(etaminus=etaminus, etaplus=etaplus, step_min=step_min,
                    step_max=step_max, maximize=group["maximize"])

    @staticmethod
    def reference(p, grad, state, step, *, etaminus, etaplus, step_min, step_max, maximize):
        if maximize:
            grad = -grad
        prev, step_size = state["prev"], state["step_size"]
        agreement = (grad * prev).sign()
        factor = torcia.where(agreement > 0, etaplus, torcia.where(agreement < 0, etaminus,
                                                                   1.0))
        step_size.mul_(factor).clamp_(step_min, step_max)
        # a sign flip skips this step and forgets the gradient
        grad = torcia.where(agreement < 0, torcia.zeros_like(grad), grad)
        p.addcmul_(grad.sign(), step_size, value=-1)
        prev.copy_(grad)
