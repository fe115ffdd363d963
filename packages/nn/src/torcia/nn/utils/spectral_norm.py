"""The hook-based spectral normalization (PyTorch's older ``nn.utils.spectral_norm``); the
parametrization :func:`torcia.nn.utils.parametrizations.spectral_norm` is the newer form."""

from __future__ import annotations

import torcia
import torcia.nn.functional as F
from torcia.nn.modules.conv import ConvTranspose1d, ConvTranspose2d
from torcia.nn.modules.module import Module
from torcia.nn.parameter import Parameter

__all__ = ["SpectralNorm", "remove_spectral_norm", "spectral_norm"]


class SpectralNorm:
    """The forward pre-hook that sets ``<name>`` to ``<name>_orig`` divided by its estimated
    largest singular value; ``<name>_u`` and ``<name>_v`` hold the power-iteration vectors."""

    def __init__(self, name: str = "weight", n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name = name
        self.dim = dim
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with torcia.no_grad():
                mat = weight_mat.detach()
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(mat.T @ u, dim=0, eps=self.eps))
                    u.copy_(F.normalize(mat @ v, dim=0, eps=self.eps))
                # the buffers change in place on the next pass: backward needs these values
                u = u.clone()
                v = v.clone()
        sigma = torcia.dot(u, weight_mat @ v)
        return weight / sigma

    def remove(self, module: Module) -> None:
        with torcia.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name,
                self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int,
              eps: float) -> SpectralNorm:
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError("Cannot register two spectral_norm hooks on the same "
                                   f"parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with torcia.no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = F.normalize(torcia.randn(h, dtype=weight.dtype), dim=0, eps=fn.eps)
            v = F.normalize(torcia.randn(w, dtype=weight.dtype), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        # a plain attribute, recomputed by the hook before each forward
        setattr(module, fn.name, weight.detach())
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Divide ``module.<name>`` by its spectral norm before each forward, estimated by
    ``n_power_iterations`` power-iteration steps per training-mode call.

    Parameters
    ----------
    module : Module
    name : str
    n_power_iterations : int
    eps : float
    dim : int, optional
        The output dim: 1 for transposed convolutions, else 0.

    Returns
    -------
    Module
        ``module``.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.nn.utils.spectral_norm(torcia.nn.Linear(20, 40))
    >>> m.weight_u.shape, m.weight_orig.shape
    (torcia.Size([40]), torcia.Size([40, 20]))
    """
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Replace the hook with a plain parameter holding the current normalized weight.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.nn.utils.spectral_norm(torcia.nn.Linear(2, 2))
    >>> m = torcia.nn.utils.remove_spectral_norm(m)
    >>> sorted(name for name, _ in m.named_parameters())
    ['bias', 'weight']
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
