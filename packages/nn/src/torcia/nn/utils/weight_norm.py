"""The hook-based weight normalization (PyTorch's older ``nn.utils.weight_norm``); the
parametrization :func:`torcia.nn.utils.parametrizations.weight_norm` is the newer form."""

from __future__ import annotations

import warnings

from torcia.nn.modules.module import Module
from torcia.nn.parameter import Parameter
from torcia.nn.utils.parametrizations import _weight_norm, norm_except_dim

__all__ = ["WeightNorm", "remove_weight_norm", "weight_norm"]


class WeightNorm:
    """The forward pre-hook that recomputes ``<name>`` from ``<name>_g`` and ``<name>_v``."""

    def __init__(self, name: str, dim: int):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module: Module, name: str, dim: int) -> WeightNorm:
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError("Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g",
                                  Parameter(norm_except_dim(weight, 2, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Split ``module.<name>`` into a magnitude ``<name>_g`` and a direction ``<name>_v``;
    a forward pre-hook rebuilds the weight before each call.

    Parameters
    ----------
    module : Module
    name : str
    dim : int or None
        The dim the magnitude is kept per; ``None`` for one magnitude overall.

    Returns
    -------
    Module
        ``module``.

    Examples
    --------
    >>> import torcia
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", FutureWarning)
    ...     m = torcia.nn.utils.weight_norm(torcia.nn.Linear(20, 40), name="weight")
    >>> m.weight_g.shape, m.weight_v.shape
    (torcia.Size([40, 1]), torcia.Size([40, 20]))
    """
    warnings.warn("`torcia.nn.utils.weight_norm` is deprecated in favor of "
                  "`torcia.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Fold ``<name>_g`` and ``<name>_v`` back into one parameter ``<name>``.

    Examples
    --------
    >>> import torcia
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", FutureWarning)
    ...     m = torcia.nn.utils.weight_norm(torcia.nn.Linear(2, 2))
    >>> m = torcia.nn.utils.remove_weight_norm(m)
    >>> sorted(name for name, _ in m.named_parameters())
    ['bias', 'weight']
    """
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
