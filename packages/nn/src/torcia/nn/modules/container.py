"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``,
``ParameterDict``."""

from __future__ import annotations

import operator
import warnings
from collections import OrderedDict

from torcia import Tensor
from torcia.nn.modules.module import Module, _addindent
from torcia.nn.parameter import Parameter

__all__ = ["Container", "ModuleDict", "ModuleList", "ParameterDict", "ParameterList", "Sequential"]


def _index(idx, n: int) -> int:
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range")
    return idx % n


def _renumber(modules: OrderedDict, index=None, new=None) -> None:
    """Key the modules "0".."n-1" again (after a deletion, or inserting ``new`` at
    ``index``), as PyTorch keeps them."""
    values = list(modules.values())
    if index is not None:
        values.insert(index, new)
    modules.clear()
    for i, module in enumerate(values):
        modules[str(i)] = module


class Container(Module):
    """PyTorch's old container, deprecated (it warns): the keyword arguments become named
    submodules. Subclass :class:`Module` instead.

    Examples
    --------
    >>> import warnings
    >>> import torcia
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     c = torcia.nn.Container(fc=torcia.nn.Linear(2, 2))
    >>> [name for name, _ in c.named_children()]
    ['fc']
    """

    def __init__(self, **kwargs):
        super().__init__()
        warnings.warn("nn.Container is deprecated. All of it's functionality is now "
                      "implemented in nn.Module. Subclass that instead.", FutureWarning,
                      stacklevel=2)
        for key, value in kwargs.items():
            self.add_module(key, value)


class Sequential(Module):
    """Modules called one after the other, each on the previous one's output.

    Build it from modules (named ``"0"``, ``"1"``...) or from an ordered dict of named
    modules. It indexes, slices (a slice is a new ``Sequential`` sharing the modules),
    appends and has a length.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
    >>> len(net), type(net[1]).__name__
    (3, 'ReLU')
    >>> net(torcia.ones(2, 4)).shape
    torcia.Size([2, 1])
    >>> net[:2]
    Sequential(
      (0): Linear(in_features=4, out_features=3, bias=True)
      (1): ReLU()
    )
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        keys = list(self._modules)
        return self._modules[keys[_index(idx, len(keys))]]

    def __setitem__(self, idx, module: Module) -> None:
        keys = list(self._modules)
        setattr(self, keys[_index(idx, len(keys))], module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        if isinstance(idx, slice):
            for key in keys[idx]:
                delattr(self, key)
        else:
            delattr(self, keys[_index(idx, len(keys))])
        _renumber(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other: Sequential) -> Sequential:
        if not isinstance(other, Sequential):
            raise ValueError(
                "add operator supports only objects of Sequential class, but "
                f"{type(other)} is given."
            )
        return Sequential(*self, *other)

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Sequential:
        """Insert ``module`` before position ``index``."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        _renumber(self._modules, index + n if index < 0 else index, module)
        return self

    def extend(self, sequential) -> Sequential:
        for module in sequential:
            self.append(module)
        return self

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered as submodules (so their parameters are found).

    Examples
    --------
    >>> from torcia import nn
    >>> layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    >>> layers.append(nn.ReLU())
    ModuleList(
      (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)
      (3): ReLU()
    )
    >>> len(list(layers.parameters()))
    6
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self)))]

    def __setitem__(self, idx, module: Module) -> None:
        setattr(self, str(_index(idx, len(self))), module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)
        targets = keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(keys))]]
        for key in targets:
            del self._modules[key]
        _renumber(self._modules)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules) -> ModuleList:
        return self.extend(modules)

    def __add__(self, other) -> ModuleList:
        return ModuleList([*self, *other])

    def append(self, module: Module) -> ModuleList:
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules) -> ModuleList:
        if isinstance(modules, (Module, Tensor)) or not hasattr(modules, "__iter__"):
            raise TypeError(
                "ModuleList.extend should be called with an iterable, but got "
                + type(modules).__name__
            )
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _renumber(self._modules, index, module)

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def __repr__(self):
        # runs of equal modules print once, as "(0-2): 3 x Linear(...)"
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        lines = []
        start = 0
        for end in range(1, len(reprs) + 1):
            if end < len(reprs) and reprs[end] == reprs[start]:
                continue
            text = _addindent(reprs[start], 2)
            if end - start == 1:
                lines.append(f"({start}): {text}")
            else:
                lines.append(f"({start}-{end - 1}): {end - start} x {text}")
            start = end
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """An ordered dict of modules, registered as submodules.

    Examples
    --------
    >>> from torcia import nn
    >>> heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "box": nn.Linear(4, 4)})
    >>> list(heads.keys())
    ['cls', 'box']
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        items = modules.items() if hasattr(modules, "items") else modules
        for j, item in enumerate(items):
            if not hasattr(modules, "items") and len(item) != 2:
                raise ValueError(
                    f"ModuleDict update sequence element #{j} has length {len(item)}; 2 is "
                    "required"
                )
            key, module = item
            self[key] = module


class ParameterList(Module):
    """A list of parameters, registered on the module (tensors are made Parameters).

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> ps = nn.ParameterList([nn.Parameter(torcia.zeros(2)), torcia.ones(3)])
    >>> [tuple(p.shape) for p in ps.parameters()]
    [(2,), (3,)]
    """

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(len(self))[idx]])
        return getattr(self, str(_index(idx, len(self))))

    def __setitem__(self, idx, param) -> None:
        idx = _index(idx, len(self))
        if isinstance(param, Tensor) and not isinstance(param, Parameter):
            param = Parameter(param)
        setattr(self, str(idx), param)

    def __len__(self) -> int:
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self, parameters) -> ParameterList:
        return self.extend(parameters)

    def append(self, value) -> ParameterList:
        new_idx = len(self)
        self._size += 1
        self[new_idx] = value
        return self

    def extend(self, values) -> ParameterList:
        if isinstance(values, Tensor) or not hasattr(values, "__iter__"):
            raise TypeError(
                "ParameterList.extend should be called with an iterable, but got "
                + type(values).__name__
            )
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): {_param_line(p, repr(p.dtype))}"
                         for k, p in enumerate(self))


class ParameterDict(Module):
    """An ordered dict of parameters, registered on the module.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> pd = nn.ParameterDict({"scale": torcia.ones(1)})
    >>> [name for name, _ in pd.named_parameters()]
    ['scale']
    """

    def __init__(self, parameters=None):
        super().__init__()
        self._keys: dict = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        self._keys[key] = None
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, key, value)

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def pop(self, key: str):
        value = self[key]
        del self[key]
        return value

    def get(self, key: str, default=None):
        return self[key] if key in self else default

    def update(self, parameters) -> None:
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for key, value in items:
            self[key] = value

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): {_param_line(p, _type_name(p))}" for k, p in self.items())


def _type_name(p) -> str:
    """The legacy type name PyTorch prints for a tensor: ``torcia.FloatTensor``."""
    return p.type() if isinstance(p, Tensor) else type(p).__name__


def _param_line(p, type_name: str) -> str:
    # PyTorch prints ParameterList entries with their dtype and ParameterDict entries with
    # their legacy type name; both are kept so that printed models match
    if not isinstance(p, Tensor):
        return f"Object of type: {type(p).__name__}"
    kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
    device = "" if p.device.type == "cpu" else f" ({p.device})"
    size = "x".join(str(s) for s in p.shape)
    return f"{kind} containing: [{type_name} of size {size}{device}]"
