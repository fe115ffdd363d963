"""Muon: momentum orthogonalised by Newton-Schulz iterations, for 2-D parameters."""

from __future__ import annotations

import math

import torcia
from torcia.optim.optimizer import Optimizer, _closure_loss

#: Keller Jordan's quintic coefficients and defaults, as PyTorch's
DEFAULT_NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
EPS = 1e-7
DEFAULT_NS_STEPS = 5


def zeropower_via_newtonschulz(grad, ns_coefficients=DEFAULT_NS_COEFFICIENTS,
                               ns_steps=DEFAULT_NS_STEPS, eps=EPS):
    """An approximate orthogonalisation ``U S' V^T`` of the matrix ``grad = U S V^T``
    (``S'`` near 1), by ``ns_steps`` quintic Newton-Schulz iterations in bfloat16, as
    PyTorch's Muon computes it.

    Parameters
    ----------
    grad : Tensor
        A 2-D matrix.
    ns_coefficients : tuple of 3 floats
        ``(a, b, c)`` of the polynomial ``a X + b (X X^T) X + c (X X^T)^2 X``.
    ns_steps : int
        Iterations (fewer than 100).
    eps : float
        Guards the normalisation by the Frobenius norm.

    Returns
    -------
    Tensor
        A bfloat16 matrix of ``grad``'s shape.

    Examples
    --------
    >>> import torcia
    >>> from torcia.optim.muon import zeropower_via_newtonschulz
    >>> o = zeropower_via_newtonschulz(torcia.tensor([[3.0, 0.0], [0.0, 0.5]]))
    >>> [round(v, 1) for v in o.float().diagonal().tolist()]
    [0.7, 1.0]
    """
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    x = grad.bfloat16()
    tall = grad.shape[0] > grad.shape[1]
    if tall:
        x = x.T
    # a spectral norm of at most 1, from the Frobenius norm
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        # PyTorch's bfloat16 addmm accumulates in float32 and rounds once: computing in
        # float32 and rounding each result gives its iterates
        xf = x.float()
        gram = (xf @ xf.T).bfloat16().float()
        update = torcia.addmm(gram, gram, gram, beta=b, alpha=c).bfloat16().float()
        x = torcia.addmm(xf, update, xf, beta=a).bfloat16()
    return x.T if tall else x


def _adjust_lr(lr, adjust_lr_fn, shape):
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    return lr * ratio


class Muon(Optimizer):
    r"""Muon (Jordan et al., 2024), as PyTorch 2.13 implements it: SGD momentum whose
    update is orthogonalised by Newton-Schulz iterations, for the 2-D parameters of
    hidden layers (optimise biases and embeddings with another optimizer such as AdamW).

    .. math::
        B_t &\leftarrow \mu B_{t-1} + (1 - \mu) g_t \\
        \tilde B_t &\leftarrow g_t + \mu (B_t - g_t) \text{ (nesterov) or } B_t \\
        O_t &\leftarrow \mathrm{NS}^{(a,b,c)}_k(\tilde B_t; \varepsilon) \\
        \theta_t &\leftarrow (1 - \gamma\lambda)\,\theta_{t-1} - \gamma' O_t

    where :math:`\gamma' = \gamma \sqrt{\max(1, A/B)}` (``adjust_lr_fn="original"``, the
    default) or :math:`0.2 \gamma \sqrt{\max(A, B)}` (``"match_rms_adamw"``) for an
    ``A x B`` parameter.

    Parameters
    ----------
    params : iterable of Tensor or dict
        2-D parameters only.
    lr : float, default 1e-3
    weight_decay : float, default 0.1
        Decoupled weight decay.
    momentum : float, default 0.95
    nesterov : bool, default True
    ns_coefficients : tuple of 3 floats, default (3.4445, -4.775, 2.0315)
    eps : float, default 1e-7
    ns_steps : int, default 5
    adjust_lr_fn : {None, "original", "match_rms_adamw"}

    Examples
    --------
    >>> import torcia
    >>> w = torcia.nn.Parameter(torcia.tensor([[1.0, 0.0], [0.0, 2.0]]))
    >>> opt = torcia.optim.Muon([w], lr=0.1, weight_decay=0.0)
    >>> (w ** 2).sum().backward()
    >>> opt.step()
    >>> [round(v, 2) for v in w.detach().diagonal().tolist()]
    [0.89, 1.93]
    """

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=DEFAULT_NS_COEFFICIENTS, eps=EPS,
                 ns_steps=DEFAULT_NS_STEPS, adjust_lr_fn=None):
        if isinstance(lr, torcia.Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn not in (None, "original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                        nesterov=nesterov, ns_coefficients=ns_coefficients, eps=eps,
                        ns_steps=ns_steps, adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError("Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")

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
                lr = float(group["lr"])
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if p.is_complex():
                        raise RuntimeError("Muon does not support complex parameters")
                    grad = p.grad
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = torcia.zeros_like(grad)
                    buf = state["momentum_buffer"]
                    buf.lerp_(grad, 1 - group["momentum"])
                    update = grad.lerp(buf, group["momentum"]) if group["nesterov"] else buf
                    update = zeropower_via_newtonschulz(update, group["ns_coefficients"],
                                                        group["ns_steps"], group["eps"])
                    p.mul_(1 - lr * group["weight_decay"])
                    p.add_(update.to(p.dtype),
                           alpha=-_adjust_lr(lr, group["adjust_lr_fn"], p.shape))
        return loss
