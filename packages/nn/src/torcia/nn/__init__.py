"""torcia.nn: modules, layers, functional ops, initialisation and losses.

Layers are :class:`Module` subclasses with PyTorch's names, constructor arguments,
defaults, initialisation and ``state_dict`` keys; :mod:`torcia.nn.functional` holds the
stateless ops they call and :mod:`torcia.nn.init` the initialisers.

Losses are also found by name in a registry that plugins fill through the
``torcia_register_losses`` hook (:mod:`torcia.nn.hookspecs`); a loss that a separately
installed plugin registers is reachable as ``torcia.nn.losses.get(name)`` and as an
attribute of this package, by its class name.

Examples
--------
>>> import torcia
>>> from torcia import nn
>>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
>>> loss = nn.CrossEntropyLoss()(model(torcia.randn(5, 4)), torcia.tensor([0, 1, 2, 0, 1]))
>>> loss.backward()
>>> model[0].weight.grad.shape
torcia.Size([8, 4])
"""

from __future__ import annotations

from torcia import plugins as _plugins
from torcia.nn import hookspecs as _hookspecs

_plugins.add_hookspecs(_hookspecs)

from torcia.nn import exporters, functional, init, losses, parallel, utils  # noqa: E402
from torcia.nn.exporters import export  # noqa: E402
from torcia.nn.modules import *  # noqa: E402,F401,F403
from torcia.nn.modules import __all__ as _modules_all  # noqa: E402
from torcia.nn.modules.module import (  # noqa: E402
    register_module_forward_hook,
    register_module_forward_pre_hook,
)
from torcia.nn.parallel import DataParallel  # noqa: E402
from torcia.nn.parameter import (  # noqa: E402
    Buffer,
    Parameter,
    UninitializedBuffer,
    UninitializedParameter,
)

__all__ = [
    "Buffer", "DataParallel", "Parameter", "UninitializedBuffer", "UninitializedParameter",
    "export", "exporters", "factory_kwargs", "functional", "init", "losses",
    "register_module_forward_hook", "register_module_forward_pre_hook", "parallel", "utils",
    *_modules_all,
]


def factory_kwargs(kwargs):
    """The ``device``, ``dtype`` and ``memory_format`` of a layer's ``**kwargs``, merged
    with a nested ``factory_kwargs`` dict, as ``torch.nn.factory_kwargs`` (for writing
    layers that pass them on to tensor constructors).

    Examples
    --------
    >>> import torcia
    >>> torcia.nn.factory_kwargs({"device": "cpu", "factory_kwargs": {"dtype": torcia.float64}})
    {'dtype': torcia.float64, 'device': 'cpu'}
    """
    if kwargs is None:
        return {}
    simple = ("device", "dtype", "memory_format")
    unexpected = set(kwargs) - {*simple, "factory_kwargs"}
    if unexpected:
        raise TypeError(f"unexpected kwargs {unexpected}")
    merged = dict(kwargs.get("factory_kwargs", {}))
    for key in simple:
        if key in kwargs:
            if key in merged:
                raise TypeError(f"{key} specified twice, in **kwargs and in factory_kwargs")
            merged[key] = kwargs[key]
    return merged


def __getattr__(name: str):
    # losses that plugins register appear here by class name, with no change to torcia-nn
    if name.startswith("_") or not name[:1].isupper():
        raise AttributeError(f"module 'torcia.nn' has no attribute {name!r}")
    try:
        return losses.REGISTRY.lookup(name)
    except KeyError as exc:
        raise AttributeError(f"module 'torcia.nn' has no attribute {name!r}; "
                             f"{exc.args[0]}") from None
