"""Weight normalisation and spectral normalisation as forward pre-hooks, in PyTorch's
original (``nn.utils.weight_norm``/``spectral_norm``) form: the parameter is replaced by
its factors and rebuilt before each forward."""

from __future__ import annotations

import torcia
from torcia import no_grad
from torcia.nn.parameter import Parameter


def norm_except_dim(v, pow: float = 2, dim: int = 0):  # noqa: A002 - PyTorch's name
    """The ``pow``-norm of ``v`` over every dimension but ``dim`` (all of them for
    ``dim=-1``), shaped to broadcast against ``v``."""
    if dim == -1:
        return v.norm(pow)
    dims = tuple(d for d in range(v.dim()) if d != dim)
    return v.abs().pow(pow).sum(dim=dims, keepdim=True).pow(1.0 / pow)


class _WeightNorm:
    def __init__(self, name: str, dim: int):
        self.name, self.dim = name, dim

    def compute(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / norm_except_dim(v, 2, self.dim))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute(module))


def weight_norm(module, name: str = "weight", dim: int | None = 0):
    """Reparameterise ``module.<name>`` as ``g * v / ||v||`` (Salimans & Kingma, 2016):
    parameters ``<name>_g`` (the norms, over every dimension but ``dim``) and ``<name>_v``
    (the direction) replace it, and a forward pre-hook rebuilds it.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.nn.utils.weight_norm(torcia.nn.Linear(3, 2))
    >>> sorted(n for n, _ in m.named_parameters())
    ['bias', 'weight_g', 'weight_v']
    >>> m(torcia.ones(4, 3)).shape
    torcia.Size([4, 2])
    """
    hooks = module.__dict__.setdefault("_weight_norm_hooks", {})
    if name in hooks:
        raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter "
                           f"{name}")
    dim = -1 if dim is None else dim
    weight = getattr(module, name)
    fn = _WeightNorm(name, dim)
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, dim).detach()))
    module.register_parameter(name + "_v", Parameter(weight.detach()))
    setattr(module, name, fn.compute(module))
    hooks[name] = (module.register_forward_pre_hook(fn), fn)
    return module


def remove_weight_norm(module, name: str = "weight"):
    """Undo :func:`weight_norm`: ``<name>`` is a plain parameter again (its current value)."""
    hooks = module.__dict__.get("_weight_norm_hooks", {})
    if name not in hooks:
        raise ValueError(f"weight_norm of '{name}' not found in {module}")
    handle, fn = hooks.pop(name)
    with no_grad():
        weight = fn.compute(module)
    handle.remove()
    del module._parameters[name + "_g"], module._parameters[name + "_v"]
    module.__dict__.pop(name, None)
    module.register_parameter(name, Parameter(weight))
    return module


class _SpectralNorm:
    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float):
        self.name, self.n_power_iterations, self.dim, self.eps = (
            name, n_power_iterations, dim, eps)

    def _matrix(self, weight):
        if self.dim != 0:
            weight = weight.movedim(self.dim, 0)
        return weight.reshape(weight.shape[0], -1)

    def compute(self, module, do_power_iteration: bool):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        mat = self._matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(_normalize(mat.t() @ u, self.eps))
                    u.copy_(_normalize(mat @ v, self.eps))
                u, v = u.clone(), v.clone()
        sigma = torcia.dot(u, mat @ v)
        return weight / sigma

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute(module, module.training))


def _normalize(x, eps):
    return x / x.norm().clamp(min=eps)


def spectral_norm(module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None):
    """Divide ``module.<name>`` by its largest singular value, estimated by power
    iteration (Miyato et al., 2018): ``<name>_orig`` is the parameter, buffers
    ``<name>_u``/``<name>_v`` the iteration's vectors, updated before each training
    forward.

    Examples
    --------
    >>> import torcia
    >>> m = torcia.nn.utils.spectral_norm(torcia.nn.Linear(4, 3))
    >>> sorted(n for n, _ in m.named_parameters())
    ['bias', 'weight_orig']
    >>> m(torcia.ones(2, 4)).shape
    torcia.Size([2, 3])
    """
    hooks = module.__dict__.setdefault("_spectral_norm_hooks", {})
    if name in hooks:
        raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter "
                           f"{name}")
    if n_power_iterations <= 0:
        raise ValueError("Expected n_power_iterations to be positive, but got "
                         f"n_power_iterations={n_power_iterations}")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    fn = _SpectralNorm(name, n_power_iterations, dim, eps)
    weight = getattr(module, name)
    with no_grad():
        mat = fn._matrix(weight)
        u = _normalize(torcia.randn(mat.shape[0], dtype=weight.dtype), eps)
        v = _normalize(torcia.randn(mat.shape[1], dtype=weight.dtype), eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    hooks[name] = (module.register_forward_pre_hook(fn), fn)
    return module


def remove_spectral_norm(module, name: str = "weight"):
    """Undo :func:`spectral_norm`: ``<name>`` becomes a plain parameter holding the current
    normalised weight."""
    hooks = module.__dict__.get("_spectral_norm_hooks", {})
    if name not in hooks:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    handle, fn = hooks.pop(name)
    with no_grad():
        weight = fn.compute(module, do_power_iteration=False)
    handle.remove()
    del module._parameters[name + "_orig"]
    del module._buffers[name + "_u"], module._buffers[name + "_v"]
    module.__dict__.pop(name, None)
    module.register_parameter(name, Parameter(weight.detach()))
    return module
