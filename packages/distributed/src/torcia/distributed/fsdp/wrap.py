"""Which submodules FullyShardedDataParallel wraps as units of their own, as
``torch.distributed.fsdp.wrap``.

A policy is called as ``policy(module=m, recurse=True, nonwrapped_numel=n)`` to ask
whether to look inside ``m``, and with ``recurse=False`` whether to wrap ``m`` (``n``:
the number of parameter elements of ``m`` not wrapped yet).
"""

from __future__ import annotations

import contextlib
import functools

__all__ = ["CustomPolicy", "ModuleWrapPolicy", "always_wrap_policy", "enable_wrap",
           "lambda_auto_wrap_policy", "size_based_auto_wrap_policy",
           "transformer_auto_wrap_policy", "wrap"]


def always_wrap_policy(*args, **kwargs) -> bool:
    """Wrap every submodule.

    Examples
    --------
    >>> from torcia.distributed.fsdp.wrap import always_wrap_policy
    >>> always_wrap_policy(module=None, recurse=False, nonwrapped_numel=0)
    True
    """
    return True


def lambda_auto_wrap_policy(module, recurse, nonwrapped_numel, lambda_fn) -> bool:
    """Wrap the modules for which ``lambda_fn(module)`` is true (bind it with
    ``functools.partial``).

    Examples
    --------
    >>> import functools, torcia
    >>> from torcia.distributed.fsdp.wrap import lambda_auto_wrap_policy
    >>> policy = functools.partial(lambda_auto_wrap_policy,
    ...                            lambda_fn=lambda m: isinstance(m, torcia.nn.Linear))
    >>> policy(module=torcia.nn.Linear(2, 2), recurse=False, nonwrapped_numel=6)
    True
    """
    return True if recurse else bool(lambda_fn(module))


def transformer_auto_wrap_policy(module, recurse, nonwrapped_numel,
                                 transformer_layer_cls) -> bool:
    """Wrap the modules of the classes in ``transformer_layer_cls`` (a transformer's
    blocks).

    Examples
    --------
    >>> import functools, torcia
    >>> from torcia.distributed.fsdp.wrap import transformer_auto_wrap_policy
    >>> policy = functools.partial(transformer_auto_wrap_policy,
    ...                            transformer_layer_cls={torcia.nn.TransformerEncoderLayer})
    >>> policy(module=torcia.nn.Linear(2, 2), recurse=False, nonwrapped_numel=6)
    False
    """
    return True if recurse else isinstance(module, tuple(transformer_layer_cls))


def size_based_auto_wrap_policy(module, recurse, nonwrapped_numel,
                                min_num_params: int = int(1e8), force_leaf_modules=None,
                                exclude_wrap_modules=None) -> bool:
    """Wrap a module once it holds at least ``min_num_params`` parameter elements not
    wrapped yet.

    Examples
    --------
    >>> import functools, torcia
    >>> from torcia.distributed.fsdp.wrap import size_based_auto_wrap_policy
    >>> policy = functools.partial(size_based_auto_wrap_policy, min_num_params=100)
    >>> policy(module=torcia.nn.Linear(2, 2), recurse=False, nonwrapped_numel=6)
    False
    """
    leaves = tuple(force_leaf_modules or ())
    excluded = tuple(exclude_wrap_modules or ())
    if recurse:
        return not isinstance(module, leaves)
    return nonwrapped_numel >= min_num_params and not isinstance(module, excluded)


class ModuleWrapPolicy:
    """Wrap the modules of the given classes.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.fsdp.wrap import ModuleWrapPolicy
    >>> ModuleWrapPolicy({torcia.nn.Linear})(torcia.nn.Linear(2, 2), False, 6)
    True
    """

    def __init__(self, module_classes):
        self._classes = tuple(module_classes)

    def __call__(self, module, recurse, nonwrapped_numel=0, *args, **kwargs) -> bool:
        return True if recurse else isinstance(module, self._classes)


class CustomPolicy:
    """Wrap the modules for which ``lambda_fn(module)`` is true (or returns a dict of
    keyword arguments for that unit's wrapper).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.fsdp.wrap import CustomPolicy
    >>> CustomPolicy(lambda m: isinstance(m, torcia.nn.Linear))(torcia.nn.Linear(1, 1),
    ...                                                          False, 2)
    True
    """

    def __init__(self, lambda_fn):
        self._fn = lambda_fn

    def __call__(self, module, recurse, nonwrapped_numel=0, *args, **kwargs):
        return True if recurse else self._fn(module)


_WRAP_CONTEXT: list = []


@contextlib.contextmanager
def enable_wrap(*, wrapper_cls, **wrapper_kwargs):
    """Inside the block, :func:`wrap` wraps with ``wrapper_cls(module, **wrapper_kwargs)``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.fsdp.wrap import enable_wrap, wrap
    >>> class Tag(torcia.nn.Module):
    ...     def __init__(self, module, note):
    ...         super().__init__(); self.module, self.note = module, note
    >>> with enable_wrap(wrapper_cls=Tag, note="x"):
    ...     wrapped = wrap(torcia.nn.Linear(1, 1))
    >>> type(wrapped).__name__, wrapped.note
    ('Tag', 'x')
    """
    _WRAP_CONTEXT.append((wrapper_cls, wrapper_kwargs))
    try:
        yield
    finally:
        _WRAP_CONTEXT.pop()


def wrap(module, **wrap_overrides):
    """``module`` wrapped as :func:`enable_wrap` says (itself outside such a block).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.fsdp.wrap import wrap
    >>> layer = torcia.nn.Linear(1, 1)
    >>> wrap(layer) is layer
    True
    """
    if not _WRAP_CONTEXT:
        return module
    wrapper_cls, kwargs = _WRAP_CONTEXT[-1]
    return wrapper_cls(module, **{**kwargs, **wrap_overrides})


def decide(policy, module, nonwrapped_numel, recurse) -> bool | dict:
    """Ask ``policy`` (a function or a policy object) about ``module``."""
    if isinstance(policy, functools.partial) or callable(policy):
        return policy(module=module, recurse=recurse, nonwrapped_numel=nonwrapped_numel)
    raise TypeError(f"auto_wrap_policy must be callable, got {type(policy).__name__}")
