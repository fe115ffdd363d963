"""Model and optimizer state dicts of any parallelism (DDP, FSDP, fully_shard, one
process), in one form, as ``torch.distributed.checkpoint.state_dict``.

Keys are the model's own parameter names (wrappers' prefixes removed). A sharded model's
entries are DTensors (what :func:`torcia.distributed.checkpoint.save` writes per rank);
with ``StateDictOptions(full_state_dict=True)`` they are whole tensors. The optimizer's
state is keyed by parameter name too, its per-parameter tensors sharded like their
parameters, so a checkpoint of both reshards as one.
"""

from __future__ import annotations

import dataclasses

import torcia
from torcia import Tensor
from torcia.distributed.fsdp.fully_sharded_data_parallel import IncompatibleKeys
from torcia.distributed.tensor import DTensor
from torcia.distributed.tensor._api import _wrap, local_shape_and_offset
from torcia.nn import Module

__all__ = ["StateDictOptions", "get_model_state_dict", "get_optimizer_state_dict",
           "get_state_dict", "set_model_state_dict", "set_optimizer_state_dict",
           "set_state_dict"]

_PREFIXES = ("_fsdp_wrapped_module.", "module.", "_orig_mod.", "_checkpoint_wrapped_module.")


@dataclasses.dataclass
class StateDictOptions:
    """How the state dicts are made and loaded: ``full_state_dict`` (whole tensors
    rather than DTensor shards), ``cpu_offload`` (host tensors: they are),
    ``ignore_frozen_params`` (leave out parameters that do not require grad),
    ``strict`` (the keys must match on load), ``broadcast_from_rank0`` (load a full state
    dict that only rank 0 has).

    Examples
    --------
    >>> from torcia.distributed.checkpoint.state_dict import StateDictOptions
    >>> StateDictOptions(full_state_dict=True).strict
    True
    """

    full_state_dict: bool = False
    cpu_offload: bool = False
    ignore_frozen_params: bool = False
    keep_submodule_prefixes: bool = True
    strict: bool = True
    broadcast_from_rank0: bool = False
    flatten_optimizer_state_dict: bool = False
    dsd_fqn_modifiers: str = "_fqn_modifiers"


def _clean(name: str) -> str:
    for prefix in _PREFIXES:
        name = name.replace(prefix, "")
    return name


def _entries(model: Module) -> dict:
    """``{name: tensor}`` of the model's parameters and persistent buffers, as they are
    registered (shards for a sharded model), under the model's own names."""
    raw = {}
    Module.state_dict(model, destination=raw, keep_vars=True)
    return {_clean(k): v for k, v in raw.items()}


def _full(value):
    return value.full_tensor() if isinstance(value, DTensor) else value.detach()


def get_model_state_dict(model, *, submodules=None, options=None) -> dict:
    """The model's state dict: DTensor shards for sharded parameters (whole tensors with
    ``full_state_dict``), keyed by the model's own names.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.checkpoint.state_dict import get_model_state_dict
    >>> list(get_model_state_dict(torcia.nn.Linear(2, 1)))
    ['weight', 'bias']
    """
    options = options or StateDictOptions()
    out = {}
    for name, value in _entries(model).items():
        if options.ignore_frozen_params and getattr(value, "requires_grad", True) is False \
                and isinstance(value, torcia.nn.Parameter):
            continue
        out[name] = _full(value) if options.full_state_dict else value.detach()
    return out


def set_model_state_dict(model, model_state_dict, *, options=None):
    """Load a state dict made by :func:`get_model_state_dict` (either form) into the
    model: whole tensors are cut to this rank's shards, DTensors copied (or resharded).
    Returns ``(missing_keys, unexpected_keys)``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.checkpoint.state_dict import set_model_state_dict
    >>> layer = torcia.nn.Linear(2, 1)
    >>> set_model_state_dict(layer, {"weight": torcia.ones(1, 2), "bias": torcia.zeros(1)})
    IncompatibleKeys(missing_keys=[], unexpected_keys=[])
    >>> layer.weight
    Parameter containing:
    tensor([[1., 1.]], requires_grad=True)
    """
    options = options or StateDictOptions()
    if options.broadcast_from_rank0:
        model_state_dict = _broadcast_full(model, model_state_dict)
    entries = _entries(model)
    missing = [k for k in entries if k not in model_state_dict]
    unexpected = [k for k in model_state_dict if k not in entries]
    if options.strict and (missing or unexpected):
        raise RuntimeError(f"Error(s) in loading state_dict for {type(model).__name__}: "
                           f"missing keys {missing}, unexpected keys {unexpected}")
    for name, current in entries.items():
        if name in model_state_dict:
            _copy_into(current, model_state_dict[name], name)
    return IncompatibleKeys(missing, unexpected)


def _copy_into(current, value, name) -> None:
    """Copy ``value`` (whole, or a DTensor) into ``current`` (a tensor, or a shard)."""
    with torcia.no_grad():
        if isinstance(current, DTensor):
            if isinstance(value, DTensor):
                if (value.placements, tuple(value.global_shape)) != (
                        current.placements, tuple(current.global_shape)):
                    value = value.full_tensor()
                else:
                    Tensor.copy_(current, Tensor.detach(value))
                    return
            if tuple(value.shape) != tuple(current.global_shape):
                raise RuntimeError(f"size mismatch for {name}: copying a param with shape "
                                   f"{list(value.shape)}, the shape in current model is "
                                   f"{list(current.global_shape)}")
            sizes, offsets = local_shape_and_offset(tuple(current.global_shape),
                                                    current.device_mesh, current.placements)
            index = tuple(slice(o, o + n) for o, n in zip(offsets, sizes))
            Tensor.copy_(current, value.detach()[index] if index else value.detach())
        else:
            Tensor.copy_(current, _full(value))


def _broadcast_full(model, state_dict):
    """Every rank's copy of the full state dict rank 0 has (the others pass {})."""
    from torcia.distributed import collectives as C

    items = [state_dict if C.get_rank() == 0 else None]
    C.broadcast_object_list(items, src=0)
    return items[0]


def _optimizers(optimizers):
    return [optimizers] if hasattr(optimizers, "param_groups") else list(optimizers)


def _names_by_id(model) -> dict:
    return {id(v): k for k, v in _entries(model).items()}


def _init_state(optimizer) -> None:
    """Create the optimizer's state (as a step would) without changing the parameters:
    a state dict to load into must have every entry."""
    if optimizer.state:
        return
    saved = [g["lr"] for g in optimizer.param_groups]
    cleared = []
    for g in optimizer.param_groups:
        g["lr"] = 0.0
        for p in g["params"]:
            if p.requires_grad and p.grad is None:
                p.grad = torcia.zeros_like(p)
                cleared.append(p)
    optimizer.step()
    for g, lr in zip(optimizer.param_groups, saved):
        g["lr"] = lr
    for p in cleared:
        p.grad = None


def get_optimizer_state_dict(model, optimizers, *, submodules=None, options=None) -> dict:
    """The optimizers' state keyed by parameter names: ``{"state": {name: {...}},
    "param_groups": [{..., "params": [names]}]}``; per-parameter tensors of sharded
    parameters are DTensors placed like them (whole with ``full_state_dict``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.checkpoint.state_dict import get_optimizer_state_dict
    >>> layer = torcia.nn.Linear(2, 1)
    >>> opt = torcia.optim.Adam(layer.parameters())
    >>> sd = get_optimizer_state_dict(layer, opt)
    >>> sorted(sd["state"]), sd["param_groups"][0]["params"]
    (['bias', 'weight'], ['weight', 'bias'])
    """
    options = options or StateDictOptions()
    names = _names_by_id(model)
    state, groups = {}, []
    for optimizer in _optimizers(optimizers):
        _init_state(optimizer)
        for g in optimizer.param_groups:
            groups.append({**{k: v for k, v in g.items() if k != "params"},
                           "params": [names[id(p)] for p in g["params"]]})
            for p in g["params"]:
                entry = {}
                for key, value in optimizer.state.get(p, {}).items():
                    if isinstance(p, DTensor) and isinstance(value, Tensor) and \
                            tuple(value.shape) == tuple(p.shape) and value.ndim:
                        value = _wrap(Tensor.detach(value), p._spec)
                        value = value.full_tensor() if options.full_state_dict else value
                    entry[key] = value
                state[names[id(p)]] = entry
    return {"state": state, "param_groups": groups}


def set_optimizer_state_dict(model, optimizers, optim_state_dict, *, options=None) -> None:
    """Load a state dict made by :func:`get_optimizer_state_dict` (either form) into the
    optimizers.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.checkpoint.state_dict import (get_optimizer_state_dict,
    ...     set_optimizer_state_dict)
    >>> layer = torcia.nn.Linear(2, 1)
    >>> opt = torcia.optim.Adam(layer.parameters(), lr=0.5)
    >>> sd = get_optimizer_state_dict(layer, opt); sd["param_groups"][0]["lr"] = 0.1
    >>> set_optimizer_state_dict(layer, opt, sd); opt.param_groups[0]["lr"]
    0.1
    """
    options = options or StateDictOptions()
    if options.broadcast_from_rank0:
        optim_state_dict = _broadcast_full(model, optim_state_dict)
    names = _names_by_id(model)
    groups = iter(optim_state_dict["param_groups"])
    for optimizer in _optimizers(optimizers):
        _init_state(optimizer)
        for g in optimizer.param_groups:
            saved = next(groups)
            g.update({k: v for k, v in saved.items() if k != "params"})
            for p in g["params"]:
                loaded = optim_state_dict["state"].get(names[id(p)])
                if loaded is None:
                    continue
                current = optimizer.state[p]
                for key, value in loaded.items():
                    if key in current and isinstance(current[key], Tensor) and \
                            isinstance(value, Tensor):
                        target = current[key]
                        if isinstance(p, DTensor) and tuple(target.shape) == tuple(p.shape) \
                                and target.ndim:
                            target = _wrap(Tensor.detach(target), p._spec)
                        _copy_into(target, value, f"{names[id(p)]}.{key}")
                    else:
                        current[key] = value


def get_state_dict(model, optimizers, *, submodules=None, options=None) -> tuple:
    """``(get_model_state_dict(model), get_optimizer_state_dict(model, optimizers))``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.checkpoint.state_dict import get_state_dict
    >>> layer = torcia.nn.Linear(2, 1)
    >>> model_sd, optim_sd = get_state_dict(layer, torcia.optim.SGD(layer.parameters(), 0.1))
    >>> list(model_sd), list(optim_sd)
    (['weight', 'bias'], ['state', 'param_groups'])
    """
    return (get_model_state_dict(model, submodules=submodules, options=options),
            get_optimizer_state_dict(model, optimizers, submodules=submodules,
                                     options=options))


def set_state_dict(model, optimizers, *, model_state_dict, optim_state_dict, options=None):
    """Load both state dicts of :func:`get_state_dict`; returns the model's
    ``(missing_keys, unexpected_keys)``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    >>> layer = torcia.nn.Linear(2, 1)
    >>> opt = torcia.optim.SGD(layer.parameters(), 0.1)
    >>> model_sd, optim_sd = get_state_dict(layer, opt)
    >>> set_state_dict(layer, opt, model_state_dict=model_sd, optim_state_dict=optim_sd)
    IncompatibleKeys(missing_keys=[], unexpected_keys=[])
    """
    keys = set_model_state_dict(model, model_state_dict, options=options)
    set_optimizer_state_dict(model, optimizers, optim_state_dict, options=options)
    return keys
