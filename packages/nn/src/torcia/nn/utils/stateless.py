"""Calling a module with other parameters and buffers than its own."""

from __future__ import annotations

import contextlib

import torcia
from torcia.nn.modules.module import Module

__all__ = ["functional_call"]


def _tied_names(module: Module) -> dict:
    """For each tensor reachable under several names, every name -> the set of its names."""
    by_id: dict = {}
    for name, t in module.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(t), set()).add(name)
    for name, t in module.named_buffers(remove_duplicate=False):
        by_id.setdefault(id(t), set()).add(name)
    return {name: names for names in by_id.values() if len(names) > 1 for name in names}


def _expand_tied(module: Module, tensors: dict) -> dict:
    tied = _tied_names(module)
    out = dict(tensors)
    for name, value in tensors.items():
        for other in tied.get(name, ()):
            if other in tensors and tensors[other] is not value:
                raise ValueError(f"functional_call got multiple values for keys "
                                 f"{sorted(tied[name])}, which are tied. Consider using "
                                 "tie_weights=False")
            out[other] = value
    return out


@contextlib.contextmanager
def _swapped(module: Module, tensors: dict, strict: bool):
    if strict:
        expected = {n for n, _ in module.named_parameters(remove_duplicate=False)}
        expected |= {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing = sorted(expected - set(tensors))
        unexpected = sorted(set(tensors) - expected)
        if missing or unexpected:
            parts = []
            if unexpected:
                parts.append("Unexpected key(s): " + ", ".join(repr(k) for k in unexpected))
            if missing:
                parts.append("Missing key(s): " + ", ".join(repr(k) for k in missing))
            raise RuntimeError("Error(s) in reparametrizing for "
                               f"{module._get_name()}:\n\t" + "\n\t".join(parts) + ".")
    undo = []
    try:
        for name, value in tensors.items():
            path, _, leaf = name.rpartition(".")
            owner = module.get_submodule(path)
            d = owner.__dict__
            for store in ("_parameters", "_buffers"):
                if leaf in d[store]:
                    undo.append((d[store], leaf, d[store][leaf]))
                    d[store][leaf] = value
                    break
            else:
                if isinstance(getattr(type(owner), leaf, None), property):
                    raise ValueError(f"functional_call cannot replace the parametrized tensor "
                                     f"{name!r}; pass the parametrization's originals instead")
                # a plain attribute, such as the weight a weight_norm hook computes
                undo.append((d, leaf, d.get(leaf, _ABSENT)))
                d[leaf] = value
        yield
    finally:
        for table, key, old in reversed(undo):
            if old is _ABSENT:
                table.pop(key, None)
            else:
                table[key] = old


_ABSENT = object()


def functional_call(module: Module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):
    """Call ``module(*args, **kwargs)`` with the given tensors in place of its parameters
    and buffers (by their ``named_parameters`` names), putting its own back afterwards.

    Parameters
    ----------
    module : Module
    parameter_and_buffer_dicts : dict or sequence of dict
        Name -> tensor; several dicts are merged (a name in two of them is an error).
    args : tuple or object, optional
        Positional arguments (a single non-tuple is one argument).
    kwargs : dict, optional
    tie_weights : bool
        A value given for one of several tied names is used for all of them.
    strict : bool
        Every parameter and buffer must be given, and nothing else.

    Returns
    -------
    object
        What the module returns.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.utils.stateless import functional_call
    >>> m = torcia.nn.Linear(2, 1)
    >>> params = {"weight": torcia.ones(1, 2), "bias": torcia.zeros(1)}
    >>> functional_call(m, params, (torcia.tensor([[1.0, 2.0]]),))
    tensor([[3.]])
    """
    if isinstance(parameter_and_buffer_dicts, dict):
        tensors = dict(parameter_and_buffer_dicts)
    else:
        tensors = {}
        for d in parameter_and_buffer_dicts:
            repeated = set(tensors) & set(d)
            if repeated:
                raise ValueError(f"{sorted(repeated)} appeared in multiple dictionaries; "
                                 "behavior of functional call is ambiguous")
            tensors.update(d)
    for name, value in tensors.items():
        if not isinstance(value, torcia.Tensor):
            raise TypeError(f"functional_call expects tensors; {name!r} is "
                            f"{type(value).__name__}")
    if tie_weights:
        tensors = _expand_tied(module, tensors)
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, tensors, strict):
        return module(*args, **(kwargs or {}))
