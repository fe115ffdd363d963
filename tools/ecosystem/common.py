"""What every case uses: seeded inputs and weights that are the same on torcia and PyTorch.

A case runs twice, once on PyTorch and once on torcia through the compat runner; ``torch``
below is whichever the process imported. Weights are set from a NumPy generator keyed by
each parameter's name, never by the framework's initialisers, so both runs start equal.
"""

from __future__ import annotations

import zlib

import numpy as np
import torch


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def randn(*shape, seed: int = 0, scale: float = 1.0):
    """A float32 tensor of normal samples from NumPy's generator ``seed``."""
    return torch.tensor((rng(seed).standard_normal(shape) * scale).astype(np.float32))


def randint(high: int, *shape, seed: int = 0):
    return torch.tensor(rng(seed).integers(0, high, shape).astype(np.int64))


def seed_weights(model, scale: float = 0.05):
    """Overwrite every floating parameter (and batch-norm statistics) with values drawn
    from a generator keyed by its name: the same model on both frameworks."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dtype.is_floating_point:
                p.copy_(_values(name, tuple(p.shape), scale))
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(_values(name, tuple(b.shape), 0.1))
            elif name.endswith("running_var"):
                b.copy_(1.0 + _values(name, tuple(b.shape), 0.1).abs())
    return model


def _values(name: str, shape, scale: float):
    g = np.random.default_rng(zlib.crc32(name.encode()))
    values = g.standard_normal(shape) * scale
    if len(shape) == 1 and name.endswith("weight"):
        values += 1.0  # a norm layer's scale
    return torch.tensor(values.astype(np.float32))


def numpy(value) -> np.ndarray:
    """A tensor (or number) as a NumPy array, detached and on the CPU."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        return np.asarray(value.numpy())
    return np.asarray(value)


def grads(model) -> dict:
    """The gradients of ``model``'s parameters by name."""
    return {f"grad.{n}": numpy(p.grad) for n, p in model.named_parameters()
            if p.grad is not None}


def params(model, prefix: str = "param.") -> dict:
    return {prefix + n: numpy(p) for n, p in model.named_parameters()}


def case(*, library: str | None = None, needs: tuple = (), known_failure: str | None = None,
         rtol: float = 1e-4, atol: float = 1e-5):
    """Describe a case function: the library it exercises (the module's name by default),
    the torcia modules it needs (skipped where one is not installed), why it is known not
    to run on torcia yet, and the tolerance of its comparison with PyTorch."""

    def mark(fn):
        fn.library, fn.needs, fn.known_failure = library, tuple(needs), known_failure
        fn.rtol, fn.atol = rtol, atol
        return fn

    return mark
