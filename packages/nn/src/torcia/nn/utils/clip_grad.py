"""Gradient utilities: ``clip_grad_norm_``, ``clip_grad_value_`` and ``zero_grad``."""

from __future__ import annotations

import math
import warnings

import torcia
from torcia import Tensor, no_grad
from torcia.library import zero_grad

__all__ = ["clip_grad_norm_", "clip_grad_value_", "zero_grad"]


def _grads(parameters) -> list[Tensor]:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


@no_grad()
def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale the gradients in place so that their total norm is at most ``max_norm``.

    The total norm is the ``norm_type``-norm of all gradients taken together as one vector
    (``inf`` for the largest absolute value). Gradients are scaled by
    ``max_norm / (total_norm + 1e-6)`` when that is below 1.

    Parameters
    ----------
    parameters : Tensor or iterable of Tensor
        Tensors whose ``.grad`` to clip.
    max_norm : float
        The largest total norm allowed.
    norm_type : float
        The p of the p-norm, or ``float("inf")``. Default: 2.
    error_if_nonfinite : bool
        Raise when the total norm is NaN or infinite instead of scaling by it.

    Returns
    -------
    Tensor
        The total norm before clipping.

    Examples
    --------
    >>> import torcia
    >>> p = torcia.nn.Parameter(torcia.zeros(2))
    >>> p.grad = torcia.tensor([3.0, 4.0])
    >>> torcia.nn.utils.clip_grad_norm_([p], max_norm=1.0)
    tensor(5.)
    >>> p.grad
    tensor([0.6000, 0.8000])
    """
    grads = _grads(parameters)
    max_norm = float(max_norm)
    norm_type = float(norm_type)
    if not grads:
        return torcia.tensor(0.0)
    if norm_type == math.inf:
        total = torcia.stack([g.detach().abs().max() for g in grads]).max()
    else:
        # the norm of the per-tensor norms is the norm of all gradients as one vector
        total = torcia.stack([g.detach().norm(norm_type) for g in grads]).norm(norm_type)
    if error_if_nonfinite and not math.isfinite(float(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"
        )
    coef = max_norm / (float(total) + 1e-6)
    if coef < 1.0:
        for g in grads:
            g.mul_(coef)
    return total


@no_grad()
def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient in place to ``[-clip_value, clip_value]``.

    Examples
    --------
    >>> import torcia
    >>> p = torcia.nn.Parameter(torcia.zeros(3))
    >>> p.grad = torcia.tensor([-5.0, 0.5, 5.0])
    >>> torcia.nn.utils.clip_grad_value_([p], 1.0)
    >>> p.grad
    tensor([-1.0000,  0.5000,  1.0000])
    """
    clip_value = float(clip_value)
    for g in _grads(parameters):
        g.clamp_(min=-clip_value, max=clip_value)


@no_grad()
def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """The ``norm_type``-norm of ``tensors`` taken together as one vector (``inf``: the
    largest absolute value), as :func:`clip_grad_norm_` computes it for gradients.

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.utils.get_total_norm([torcia.tensor([3.0]), torcia.tensor([4.0])])
    tensor(5.)
    """
    tensors = [tensors] if isinstance(tensors, Tensor) else [t for t in tensors
                                                             if t is not None]
    norm_type = float(norm_type)
    if not tensors:
        return torcia.tensor(0.0)
    if norm_type == math.inf:
        total = torcia.stack([t.detach().abs().max() for t in tensors]).max()
    else:
        total = torcia.stack([t.detach().norm(norm_type) for t in tensors]).norm(norm_type)
    if error_if_nonfinite and not math.isfinite(float(total)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped.")
    return total


@no_grad()
def clip_grads_with_norm_(parameters, max_norm: float, total_norm, foreach=None) -> None:
    """Scale the gradients in place by ``min(1, max_norm / (total_norm + 1e-6))``, given a
    ``total_norm`` computed beforehand (e.g. by :func:`get_total_norm`).

    Examples
    --------
    >>> import torcia
    >>> p = torcia.nn.Parameter(torcia.zeros(2))
    >>> p.grad = torcia.tensor([3.0, 4.0])
    >>> torcia.nn.utils.clip_grads_with_norm_([p], 1.0, torcia.tensor(5.0))
    >>> p.grad
    tensor([0.6000, 0.8000])
    """
    coef = min(1.0, float(max_norm) / (float(total_norm) + 1e-6))
    for g in _grads(parameters):
        g.mul_(coef)


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Deprecated name of :func:`clip_grad_norm_` (warns), as in PyTorch.

    Examples
    --------
    >>> import warnings
    >>> import torcia
    >>> w = torcia.tensor([3.0, 4.0], requires_grad=True)
    >>> w.grad = torcia.tensor([3.0, 4.0])
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", FutureWarning)
    ...     total = torcia.nn.utils.clip_grad_norm([w], max_norm=1.0)
    >>> total, w.grad
    (tensor(5.), tensor([0.6000, 0.8000]))
    """
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
                  "`torch.nn.utils.clip_grad_norm_`.", FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)
