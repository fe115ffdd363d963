"""RMSprop."""

from __future__ import annotations

import torcia
from torcia.optim.elementwise import ElementwiseOptimizer
from torcia.optim.optimizer import check_value, step_tensor


class RMSprop(ElementwiseOptimizer):
    r"""RMSprop (Hinton's lecture notes; centered form after Graves, 2013).

    .. math::
        v_t &\leftarrow \alpha v_{t-1} + (1 - \alpha) g_t^2 \\
        \bar g_t &\leftarrow \alpha \bar g_{t-1} + (1 - \alpha) g_t, \quad
        \tilde v_t = v_t - \bar g_t^2 \ \text{(centered, else } v_t) \\
        b_t &\leftarrow \mu b_{t-1} + g_t / (\sqrt{\tilde v_t} + \epsilon), \quad
        \theta_t \leftarrow \theta_{t-1} - \gamma b_t
        \ \text{(momentum, else } b_t = g_t / (\sqrt{\tilde v_t} + \epsilon))

    Parameters
    ----------
    params : iterable of Tensor or dict
    lr : float, default 1e-2
    alpha : float, default 0.99
        Smoothing constant of the squared-gradient average.
    eps : float, default 1e-8
    weight_decay : float, default 0
    momentum : float, default 0
    centered : bool, default False
        Normalize by an estimate of the gradient's variance.
    foreach : bool or None, default None
        Use the device's multi-tensor kernel ``rmsprop_step`` (None: when there is one).
    maximize : bool, default False

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0], requires_grad=True)
    >>> opt = torcia.optim.RMSprop([w], lr=0.01)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> round(w.item(), 4)
    0.9
    """

    kernel_op = "rmsprop_step"
    buffers = ("square_avg", "grad_avg", "momentum_buffer")
    kernel_takes_steps = False

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, foreach=None, maximize=False):
        check_value(lr >= 0.0, "learning rate", lr)
        check_value(eps >= 0.0, "epsilon value", eps)
        check_value(momentum >= 0.0, "momentum value", momentum)
        check_value(weight_decay >= 0.0, "weight_decay value", weight_decay)
        check_value(alpha >= 0.0, "alpha value", alpha)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def init_state(self, p, group):
        state = {"step": step_tensor(), "square_avg": torcia.zeros_like(p)}
        if group["momentum"] > 0:
            state["momentum_buffer"] = torcia.zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = torcia.zeros_like(p)
        return state

    def hyper(self, group):
        return {k: group[k] for k in ("lr", "alpha", "eps", "weight_decay", "momentum",
                                      "centered", "maximize")}

    @staticmethod
    def reference(p, grad, state, step, *, lr, alpha, eps, weight_decay, momentum, centered,
                  maximize):
        if maximize:
            grad = -grad
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        square_avg = state["square_avg"]
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        if centered:
            grad_avg = state["grad_avg"]
            grad_avg.lerp_(grad, 1 - alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg = avg.add_(eps)
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf.mul_(momentum).addcdiv_(grad, avg)
            p.add_(buf, alpha=-lr)
        else:
            p.addcdiv_(grad, avg, value=-lr)
