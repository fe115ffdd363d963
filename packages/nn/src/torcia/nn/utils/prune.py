"""Pruning: zeroing parts of a parameter through a mask.

Pruning ``module.<name>`` moves the parameter to ``<name>_orig``, keeps the mask as the
buffer ``<name>_mask`` and makes ``<name>`` a plain attribute ``<name>_orig * <name>_mask``
that a forward pre-hook recomputes before each call. Pruning the same tensor again combines
the masks (a :class:`PruningContainer`); :func:`remove` makes the pruning permanent.
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

import torcia
from torcia.nn.utils.convert_parameters import parameters_to_vector

__all__ = ["BasePruningMethod", "CustomFromMask", "Identity", "L1Unstructured",
           "LnStructured", "PruningContainer", "RandomStructured", "RandomUnstructured",
           "custom_from_mask", "global_unstructured", "identity", "is_pruned",
           "l1_unstructured", "ln_structured", "random_structured", "random_unstructured",
           "remove"]


class BasePruningMethod(ABC):
    """A way to compute a pruning mask; also the forward pre-hook that applies it.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.nn.utils import prune
    >>> layer = nn.Linear(3, 2)
    >>> with torcia.no_grad():
    ...     _ = layer.weight.copy_(torcia.tensor([[1.0, -5.0, 2.0], [0.5, 3.0, -4.0]]))
    >>> method = prune.L1Unstructured.apply(layer, 'weight', amount=2)
    >>> isinstance(method, prune.BasePruningMethod), layer.weight_mask
    (True, tensor([[0., 1., 1.],
            [0., 1., 1.]]))
    """

    _tensor_name: str | None = None
    PRUNING_TYPE: str = "unstructured"

    def __call__(self, module, inputs) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask for ``t``, on top of ``default_mask`` (the current one)."""

    def apply_mask(self, module):
        """``<name>_orig * <name>_mask`` of ``module``."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned")
        orig = getattr(module, self._tensor_name + "_orig")
        mask = getattr(module, self._tensor_name + "_mask")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune ``module.<name>`` with a new ``cls(*args, **kwargs)`` (combined with any
        pruning already there) and return the method now acting on it."""
        method = _composite_method(cls, module, name, *args, **kwargs)
        orig = getattr(module, name)
        if importance_scores is not None:
            if importance_scores.shape != orig.shape:
                raise AssertionError(f"importance_scores should have the same shape as "
                                     f"parameter {name} of {module}")
        else:
            importance_scores = orig
        if not isinstance(method, PruningContainer):
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = torcia.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            with torcia.no_grad():
                mask = method.compute_mask(importance_scores.detach(), default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            if not isinstance(method, PruningContainer):
                orig = getattr(module, name + "_orig")
                del module._parameters[name + "_orig"]
                module.register_parameter(name, orig)
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """``t`` with this method's mask applied (no module involved)."""
        if importance_scores is not None and importance_scores.shape != t.shape:
            raise AssertionError("importance_scores should have the same shape as tensor t")
        scores = importance_scores if importance_scores is not None else t
        default_mask = default_mask if default_mask is not None else torcia.ones_like(t)
        return t * self.compute_mask(scores, default_mask=default_mask)

    def remove(self, module) -> None:
        """Make the pruning permanent: ``<name>`` becomes a parameter again, holding the
        masked values; ``<name>_orig`` and ``<name>_mask`` go."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be "
                                 "removed")
        weight = self.apply_mask(module)
        if self._tensor_name in module.__dict__:
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        with torcia.no_grad():
            orig.data = weight.detach()
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        module.register_parameter(self._tensor_name, orig)


def _composite_method(cls, module, name, *args, **kwargs):
    old = None
    found = [k for k, hook in module._forward_pre_hooks.items()
             if isinstance(hook, BasePruningMethod) and hook._tensor_name == name]
    if len(found) > 1:
        raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} "
                             f"of module {module}. Use a PruningContainer.")
    for k in found:
        old = module._forward_pre_hooks.pop(k)
    method = cls(*args, **kwargs)
    method._tensor_name = name
    if old is None:
        return method
    if isinstance(old, PruningContainer):
        old.add_pruning_method(method)
        return old
    container = PruningContainer(old)
    container.add_pruning_method(method)
    return container


class PruningContainer(BasePruningMethod):
    """Successive pruning methods on one tensor: each new one acts on what the earlier
    ones left (the unpruned entries, or the channels not yet all zero).

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.nn.utils import prune
    >>> layer = nn.Linear(3, 2)
    >>> with torcia.no_grad():
    ...     _ = layer.weight.copy_(torcia.tensor([[1.0, -5.0, 2.0], [0.5, 3.0, -4.0]]))
    >>> _ = prune.L1Unstructured.apply(layer, 'weight', amount=2)
    >>> method = prune.L1Unstructured.apply(layer, 'weight', amount=1)
    >>> type(method).__name__
    'PruningContainer'
    >>> layer.weight_mask
    tensor([[0., 1., 0.],
            [0., 1., 1.]])
    """

    def __init__(self, *args):
        self._pruning_methods: tuple = ()
        if len(args) == 1 and not isinstance(args[0], Iterable):
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            methods = args[0] if len(args) == 1 else args
            for method in methods:
                self.add_pruning_method(method)

    def add_pruning_method(self, method) -> None:
        if method is not None and not isinstance(method, BasePruningMethod):
            raise TypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError("Can only add pruning methods acting on the parameter named "
                             f"'{self._tensor_name}' to PruningContainer {self}. Found "
                             f"'{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype).clone()
        if method.PRUNING_TYPE == "unstructured":
            keep = mask == 1
            partial = method.compute_mask(t[keep], default_mask=mask[keep])
            mask[keep] = partial.to(dtype=mask.dtype)
            return mask
        if method.PRUNING_TYPE == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError('Pruning methods of PRUNING_TYPE "structured" need to '
                                     "have the attribute `dim` defined.")
            n_dims = t.ndim
            dim = method.dim + n_dims if method.dim < 0 else method.dim
            if dim < 0:
                raise IndexError(f"Index is out of bounds for tensor of size {n_dims}")
            others = [d for d in range(n_dims) if d != dim]
            channels = (mask.sum(dim=others) != 0).nonzero().flatten()
            partial = method.compute_mask(t.index_select(dim, channels),
                                          default_mask=mask.index_select(dim, channels))
            mask.index_copy_(dim, channels, partial.to(dtype=mask.dtype))
            return mask
        if method.PRUNING_TYPE == "global":
            return method.compute_mask(t, default_mask=mask)
        raise ValueError(f"Unrecognized PRUNING_TYPE {method.PRUNING_TYPE}")


class Identity(BasePruningMethod):
    """Prunes nothing: the mask stays all ones.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.nn.utils import prune
    >>> layer = nn.Linear(2, 2)
    >>> _ = prune.Identity.apply(layer, 'weight')
    >>> layer.weight_mask
    tensor([[1., 1.],
            [1., 1.]])
    """

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _validate_amount_init(amount) -> None:
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0):
        raise ValueError(f"amount={amount} should either be a float in the range [0, 1] or a "
                         "non-negative integer")


def _validate_amount(amount, tensor_size: int) -> None:
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"amount={amount} should be smaller than the number of parameters to "
                         f"prune={tensor_size}")


def _validate_structured(t) -> None:
    if t.ndim <= 1:
        raise ValueError("Structured pruning can only be applied to multidimensional tensors. "
                         f"Found tensor of shape {t.shape} with {t.ndim} dims")


def _validate_dim(t, dim: int) -> None:
    if dim >= t.ndim:
        raise IndexError(f"Invalid index {dim} for tensor of size {t.shape}")


def _nparams_toprune(amount, tensor_size: int) -> int:
    if isinstance(amount, numbers.Integral):
        return int(amount)
    return round(amount * tensor_size)


def _channel_mask(t, dim: int, channels):
    """Ones on the given channels along ``dim``, zeros elsewhere."""
    mask = torcia.zeros_like(t)
    ones = torcia.ones(*[len(channels) if d == dim % t.ndim else s
                         for d, s in enumerate(t.shape)], dtype=t.dtype)
    mask.index_copy_(dim % t.ndim, channels, ones)
    return mask


class _ByEntryScore(BasePruningMethod):
    """Prunes the ``amount`` entries (a fraction or a count) of lowest score."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        size = t.numel()
        k = _nparams_toprune(self.amount, size)
        _validate_amount(k, size)
        mask = default_mask.clone()
        if k:
            picked = torcia.topk(self._scores(t).reshape(-1), k, largest=False).indices
            mask.view(-1)[picked] = 0
        return mask


class RandomUnstructured(_ByEntryScore):
    """Prunes ``amount`` entries (a fraction or a count) chosen at random.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.nn.utils import prune
    >>> layer = nn.Linear(4, 5)
    >>> _ = prune.RandomUnstructured.apply(layer, 'weight', amount=0.25)
    >>> int((layer.weight_mask == 0).sum())
    5
    """

    def _scores(self, t):
        return torcia.rand_like(t)

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(_ByEntryScore):
    """Prunes the ``amount`` entries (a fraction or a count) of smallest magnitude.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.nn.utils import prune
    >>> layer = nn.Linear(3, 2)
    >>> with torcia.no_grad():
    ...     _ = layer.weight.copy_(torcia.tensor([[1.0, -5.0, 2.0], [0.5, 3.0, -4.0]]))
    >>> _ = prune.L1Unstructured.apply(layer, 'weight', amount=0.5)
    >>> layer.weight
    tensor([[ 0., -5.,  0.],
            [ 0.,  3., -4.]], grad_fn=<MulBackward0>)
    """

    def _scores(self, t):
        return t.abs()

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class _ByChannelScore(BasePruningMethod):
    """Prunes the ``amount`` channels along ``dim`` of lowest score."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim: int = -1):
        _validate_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t, default_mask):
        _validate_structured(t)
        _validate_dim(t, self.dim)
        size = t.shape[self.dim]
        k = _nparams_toprune(self.amount, size)
        _validate_amount(k, size)
        if k == 0:
            return default_mask
        kept = torcia.topk(self._scores(t), size - k, largest=True).indices
        return _channel_mask(t, self.dim, kept) * default_mask.to(dtype=t.dtype)


class RandomStructured(_ByChannelScore):
    """Prunes ``amount`` whole channels along ``dim``, chosen at random.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.nn.utils import prune
    >>> layer = nn.Linear(3, 4)
    >>> _ = prune.RandomStructured.apply(layer, 'weight', amount=1, dim=0)
    >>> layer.weight_mask.sum(dim=1).tolist().count(0.0)
    1
    """

    def _scores(self, t):
        return torcia.rand(t.shape[self.dim])

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_ByChannelScore):
    """Prunes the ``amount`` channels along ``dim`` of smallest ``n``-norm.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.nn.utils import prune
    >>> layer = nn.Linear(3, 2)
    >>> with torcia.no_grad():
    ...     _ = layer.weight.copy_(torcia.tensor([[1.0, -5.0, 2.0], [0.5, 3.0, -4.0]]))
    >>> _ = prune.LnStructured.apply(layer, 'weight', amount=1, n=2, dim=0)
    >>> layer.weight_mask
    tensor([[1., 1., 1.],
            [0., 0., 0.]])
    """

    def __init__(self, amount, n, dim: int = -1):
        super().__init__(amount, dim)
        self.n = n

    def _scores(self, t):
        others = tuple(d for d in range(t.ndim) if d != self.dim % t.ndim)
        return torcia.linalg.vector_norm(t, 2 if self.n == "fro" else self.n, dim=others)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where a given mask is zero.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> from torcia.nn.utils import prune
    >>> layer = nn.Linear(2, 2)
    >>> mask = torcia.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> _ = prune.CustomFromMask.apply(layer, 'weight', mask=mask)
    >>> bool((layer.weight == layer.weight_orig * mask).all())
    True
    """

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        if default_mask.shape != self.mask.shape:
            raise AssertionError(f"the mask has shape {self.mask.shape}, the tensor "
                                 f"{default_mask.shape}")
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    """Prune nothing, but set up ``<name>_orig`` and an all-ones ``<name>_mask``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import prune
    >>> m = prune.identity(torcia.nn.Linear(2, 3), "bias")
    >>> m.bias_mask
    tensor([1., 1., 1.])
    """
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune ``amount`` random entries of ``module.<name>`` (a fraction in [0, 1] or a count).

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import prune
    >>> m = prune.random_unstructured(torcia.nn.Linear(2, 3), "weight", amount=1)
    >>> int((m.weight_mask == 0).sum())
    1
    """
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the ``amount`` entries of ``module.<name>`` of smallest absolute value (or
    smallest ``importance_scores``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import prune
    >>> m = torcia.nn.Linear(2, 1, bias=False)
    >>> m.weight.data = torcia.tensor([[0.1, -2.0]])
    >>> prune.l1_unstructured(m, "weight", amount=0.5).weight
    tensor([[ 0., -2.]], grad_fn=<MulBackward0>)
    """
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune ``amount`` random channels of ``module.<name>`` along ``dim``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import prune
    >>> m = prune.random_structured(torcia.nn.Linear(5, 3), "weight", amount=1, dim=0)
    >>> int((m.weight_mask.sum(1) == 0).sum())
    1
    """
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the ``amount`` channels of ``module.<name>`` along ``dim`` with the smallest
    ``n``-norm.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import prune
    >>> m = torcia.nn.Linear(2, 2, bias=False)
    >>> m.weight.data = torcia.tensor([[1.0, 1.0], [0.1, 0.1]])
    >>> prune.ln_structured(m, "weight", amount=1, n=2, dim=0).weight_mask
    tensor([[1., 1.],
            [0., 0.]])
    """
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the ``(module, name)`` pairs of ``parameters`` together, as one vector: with
    ``L1Unstructured`` the smallest entries across all of them go.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import prune
    >>> a, b = torcia.nn.Linear(2, 2), torcia.nn.Linear(2, 2)
    >>> prune.global_unstructured([(a, "weight"), (b, "weight")],
    ...                           pruning_method=prune.L1Unstructured, amount=4)
    >>> int((a.weight_mask == 0).sum() + (b.weight_mask == 0).sum())
    4
    """
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict")
    scores = parameters_to_vector([
        importance_scores.get((m, n), getattr(m, n)).detach() for m, n in parameters])
    default_mask = parameters_to_vector([
        getattr(m, n + "_mask", torcia.ones_like(getattr(m, n))) for m, n in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. '
                        f"Found method {pruning_method} of type {method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    with torcia.no_grad():
        final = container.compute_mask(scores, default_mask)
    pointer = 0
    for m, n in parameters:
        param = getattr(m, n)
        count = param.numel()
        custom_from_mask(m, n, mask=final[pointer:pointer + count].view_as(param))
        pointer += count


def custom_from_mask(module, name, mask):
    """Prune ``module.<name>`` where ``mask`` is zero.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import prune
    >>> m = prune.custom_from_mask(torcia.nn.Linear(5, 3), "bias",
    ...                            mask=torcia.tensor([0, 1, 0]))
    >>> m.bias_mask
    tensor([0., 1., 0.])
    """
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    """Make the pruning of ``module.<name>`` permanent and drop the mask and the hook.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import prune
    >>> m = prune.random_unstructured(torcia.nn.Linear(5, 7), "weight", amount=0.2)
    >>> m = prune.remove(m, "weight")
    >>> sorted(name for name, _ in m.named_parameters()), prune.is_pruned(m)
    (['bias', 'weight'], False)
    """
    for k, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"Parameter '{name}' of module {module} has to be pruned before pruning "
                     "can be removed")


def is_pruned(module) -> bool:
    """Whether any submodule of ``module`` has a pruning hook.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils import prune
    >>> prune.is_pruned(torcia.nn.Linear(2, 2))
    False
    """
    return any(isinstance(hook, BasePruningMethod)
               for _, m in module.named_modules() for hook in m._forward_pre_hooks.values())
