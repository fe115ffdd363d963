"""Parametrizations: a parameter or buffer seen through a function of other tensors.

``register_parametrization(module, "weight", P)`` moves the tensor to
``module.parametrizations.weight.original`` and makes ``module.weight`` a property that
returns ``P(original)``, recomputed on each access (or once inside :func:`cached`). As in
PyTorch, the module's class is swapped for a generated subclass that carries the property,
so other instances of the class are untouched.
"""

from __future__ import annotations

import contextlib
import copy

import torcia
from torcia.nn.modules.container import ModuleDict, ModuleList
from torcia.nn.modules.module import Module
from torcia.nn.parameter import Parameter

__all__ = ["ParametrizationList", "cached", "is_parametrized", "register_parametrization",
           "remove_parametrizations", "transfer_parametrizations_and_params",
           "type_before_parametrizations"]

_cache_enabled = 0
_cache: dict = {}


@contextlib.contextmanager
def cached():
    """Inside the block, each parametrized tensor is computed once, on first access, and
    reused (useful when a weight is read many times, as in an RNN loop).

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import parametrize
    >>> class Symmetric(torcia.nn.Module):
    ...     def forward(self, X):
    ...         return X.triu() + X.triu(1).transpose(0, 1)
    >>> m = parametrize.register_parametrization(torcia.nn.Linear(3, 3), "weight", Symmetric())
    >>> with parametrize.cached():
    ...     m.weight is m.weight
    True
    """
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _register_parameter_or_buffer(module, name, value):
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _set_in_place(original, value):
    """Give ``original`` the value (and shape) of ``value`` while keeping the object, so an
    optimizer holding it keeps working."""
    with torcia.no_grad():
        original.data = value.detach().to(dtype=original.dtype)


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in registration order, with the
    unparametrized tensor as ``original`` (or ``original0``, ``original1``... when the first
    parametrization's ``right_inverse`` returns several tensors).

    Not built by hand: :func:`register_parametrization` makes it.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.nn.utils import parametrize
    >>> class Symmetric(nn.Module):
    ...     def forward(self, x):
    ...         return x.triu() + x.triu(1).T
    >>> layer = nn.Linear(2, 2)
    >>> parametrize.register_parametrization(layer, "weight", Symmetric())
    ParametrizedLinear(
      in_features=2, out_features=2, bias=True
      (parametrizations): ModuleDict(
        (weight): ParametrizationList(
          (0): Symmetric()
        )
      )
    )
    >>> type(layer.parametrizations.weight).__name__, len(layer.parametrizations.weight)
    ('ParametrizationList', 1)
    >>> torcia.equal(layer.weight, layer.weight.T)
    True
    """

    def __init__(self, modules, original, unsafe: bool = False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = original.shape, original.dtype
        with torcia.no_grad():
            new = original
            for module in reversed(self):
                if hasattr(module, "right_inverse"):
                    try:
                        new = module.right_inverse(new)
                    except NotImplementedError:
                        pass
        self.is_tensor = isinstance(new, torcia.Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError(
                    "When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                    f"original.dtype: {original.dtype}\nright_inverse(original).dtype: "
                    f"{new.dtype}")
            _set_in_place(original, new)
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, value in enumerate(new):
                if not isinstance(value, torcia.Tensor):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of "
                                     f"tensors (list, tuple...). Got element {i} of type "
                                     f"{type(value).__name__}")
                value = value.detach()
                if isinstance(original, Parameter):
                    value = Parameter(value, original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", value)
        if not self.unsafe:
            z = self()
            if not isinstance(z, torcia.Tensor):
                raise ValueError("A parametrization must return a tensor. Got "
                                 f"{type(z).__name__}.")
            if z.dtype != dtype:
                raise ValueError(
                    "Registering a parametrization may not change the dtype of the tensor, "
                    "unless `unsafe` flag is enabled.\n"
                    f"unparametrized dtype: {dtype}\nparametrized dtype: {z.dtype}")
            if z.shape != shape:
                raise ValueError(
                    "Registering a parametrization may not change the shape of the tensor, "
                    "unless `unsafe` flag is enabled.\n"
                    f"unparametrized shape: {shape}\nparametrized shape: {z.shape}")

    def right_inverse(self, value) -> None:
        """Set the originals so that the parametrized tensor becomes ``value``: each
        parametrization's ``right_inverse``, last to first."""
        with torcia.no_grad():
            for module in reversed(self):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(module).__name__} does not "
                                       "implement right_inverse.")
                value = module.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, torcia.Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(
                        f"The tensor returned by `right_inverse` has dtype {value.dtype} "
                        f"while `original` has dtype {self.original.dtype}")
                _set_in_place(self.original, value)
            else:
                if len(value) != self.ntensors:
                    raise ValueError("'right_inverse' must return a sequence of tensors of "
                                     f"length {self.ntensors}. Got a sequence of length "
                                     f"{len(value)}")
                for i, v in enumerate(value):
                    _set_in_place(getattr(self, f"original{i}"), v)

    def forward(self):
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in list(self)[1:]:
            x = module(x)
        return x


def _inject_new_class(module: Module) -> None:
    cls = module.__class__

    def getstate(self):
        raise RuntimeError("Serialization of parametrized modules is only supported through "
                           "state_dict().")

    def deepcopy(self, memo):
        replica = self.__new__(self.__class__)
        memo[id(self)] = replica
        replica.__dict__ = copy.deepcopy(self.__dict__, memo)
        return replica

    namespace = {"__getstate__": getstate}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def _inject_property(module: Module, tensor_name: str) -> None:
    def get_parametrized(self):
        parametrization = self.parametrizations[tensor_name]
        if not _cache_enabled:
            return parametrization()
        key = (id(self), tensor_name)
        value = _cache.get(key)
        if value is None:
            value = _cache[key] = parametrization()
        return value

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def _check_consistent(parametrization, y):
    x = parametrization(y)
    if not isinstance(x, torcia.Tensor):
        raise ValueError(f"A parametrization must return a tensor. Got {type(x).__name__}.")
    if x.dtype != y.dtype or x.shape != y.shape:
        raise ValueError(
            "Registering a parametrization may not change the shape or dtype of the tensor, "
            "unless the `unsafe` flag is enabled.\n"
            f"unparametrized dtype: {y.dtype}\nparametrized dtype: {x.dtype}\n"
            f"unparametrized shape: {y.shape}\nparametrized shape: {x.shape}")
    if hasattr(parametrization, "right_inverse"):
        try:
            z = parametrization.right_inverse(x)
        except NotImplementedError:
            return
        if not isinstance(z, torcia.Tensor):
            raise ValueError(f"parametrization.right_inverse must return a tensor. Got: "
                             f"{type(z).__name__}")
        if z.dtype != y.dtype or z.shape != y.shape:
            raise ValueError(
                "The tensor returned by parametrization.right_inverse must have the same "
                f"shape and dtype as the input.\ninput: {y.shape}, {y.dtype}\n"
                f"right_inverse output: {z.shape}, {z.dtype}")


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Make ``module.<tensor_name>`` the output of ``parametrization`` applied to the
    tensor that was there (moved to ``module.parametrizations[tensor_name].original``).

    Parameters
    ----------
    module : Module
        The module holding the parameter or buffer.
    tensor_name : str
        Its name; registering on an already parametrized name appends to the chain.
    parametrization : Module
        ``forward(X) -> Tensor``; an optional ``right_inverse(Y)`` maps a value back to an
        original (or a tuple of originals) and is what assigning to the attribute uses.
    unsafe : bool
        Skip the checks that the parametrization keeps shape and dtype.

    Returns
    -------
    Module
        ``module``, now parametrized.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import parametrize
    >>> class Symmetric(torcia.nn.Module):
    ...     def forward(self, X):
    ...         return X.triu() + X.triu(1).transpose(0, 1)
    >>> m = parametrize.register_parametrization(torcia.nn.Linear(3, 3), "weight", Symmetric())
    >>> bool((m.weight == m.weight.T).all())
    True
    >>> type(m).__name__, parametrize.is_parametrized(m, "weight")
    ('ParametrizedLinear', True)
    """
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_consistent(parametrization, getattr(module, tensor_name))
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = parametrizations
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (on ``tensor_name``, when given).

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import parametrize
    >>> parametrize.is_parametrized(torcia.nn.Linear(2, 2))
    False
    """
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Undo :func:`register_parametrization` on ``tensor_name``.

    Parameters
    ----------
    module : Module
    tensor_name : str
    leave_parametrized : bool
        Keep the current parametrized value (default) rather than the original.

    Returns
    -------
    Module
        ``module``; its class is restored when no parametrization is left.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import parametrize
    >>> class Double(torcia.nn.Module):
    ...     def forward(self, X):
    ...         return 2 * X
    >>> m = torcia.nn.Linear(2, 2)
    >>> w = m.weight.detach().clone()
    >>> _ = parametrize.register_parametrization(m, "weight", Double())
    >>> _ = parametrize.remove_parametrizations(m, "weight")
    >>> type(m).__name__, bool((m.weight == 2 * w).all())
    ('Linear', True)
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with torcia.no_grad():
                value = getattr(module, tensor_name)
            _set_in_place(original, value)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor "
                             "that is parametrized in terms of a sequence of tensors.")
        with torcia.no_grad():
            value = getattr(module, tensor_name).detach()
        original = (Parameter(value, parametrizations.original0.requires_grad)
                    if isinstance(parametrizations.original0, Parameter) else value)
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """The class of ``module`` without the generated ``Parametrized...`` subclass.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.nn.utils import parametrize
    >>> class Double(nn.Module):
    ...     def forward(self, x):
    ...         return x * 2
    >>> layer = nn.Linear(2, 2)
    >>> parametrize.register_parametrization(layer, "weight", Double())
    ParametrizedLinear(
      in_features=2, out_features=2, bias=True
      (parametrizations): ModuleDict(
        (weight): ParametrizationList(
          (0): Double()
        )
      )
    )
    >>> type(layer).__name__, parametrize.type_before_parametrizations(layer).__name__
    ('ParametrizedLinear', 'Linear')
    """
    if is_parametrized(module):
        return module.__class__.__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(from_module: Module, to_module: Module,
                                         tensor_name: str | None = None) -> Module:
    """Copy the parametrizations (and their originals) of ``from_module`` onto
    ``to_module``, for all parametrized tensors or only ``tensor_name``.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.nn.utils import parametrize
    >>> class Double(nn.Module):
    ...     def forward(self, x):
    ...         return x * 2
    >>> source, target = nn.Linear(2, 2), nn.Linear(2, 2)
    >>> parametrize.register_parametrization(source, "weight", Double())
    ParametrizedLinear(
      in_features=2, out_features=2, bias=True
      (parametrizations): ModuleDict(
        (weight): ParametrizationList(
          (0): Double()
        )
      )
    )
    >>> parametrize.transfer_parametrizations_and_params(source, target, "weight")
    ParametrizedLinear(
      in_features=2, out_features=2, bias=True
      (parametrizations): ModuleDict(
        (weight): ParametrizationList(
          (0): Double()
        )
      )
    )
    >>> parametrize.is_parametrized(target, "weight"), torcia.equal(target.weight, source.weight)
    (True, True)
    """
    if not is_parametrized(from_module):
        return to_module
    if not is_parametrized(to_module):
        _inject_new_class(to_module)
        to_module.parametrizations = ModuleDict()
    names = [tensor_name] if tensor_name is not None else list(from_module.parametrizations)
    for name in names:
        if name not in to_module.parametrizations:
            source = from_module.parametrizations[name]
            if name in to_module._parameters or name in to_module._buffers:
                delattr(to_module, name)
            to_module.parametrizations[name] = copy.deepcopy(source)
            _inject_property(to_module, name)
    return to_module
