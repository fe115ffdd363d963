"""FullyShardedDataParallel (FSDP), as ``torch.distributed.fsdp.FullyShardedDataParallel``:
a module wrapper that shards parameters, gradients and optimizer state across the ranks
(see ``fsdp/_engine.py`` for how)."""

from __future__ import annotations

import collections
import contextlib
import math
from collections import OrderedDict

import numpy as np

import torcia
from torcia import Tensor
from torcia.distributed import collectives as C
from torcia.distributed.device_mesh import DeviceMesh
from torcia.distributed.fsdp import _engine
from torcia.distributed.fsdp.api import (
    BackwardPrefetch,
    FullOptimStateDictConfig,
    FullStateDictConfig,
    LocalOptimStateDictConfig,
    LocalStateDictConfig,
    MixedPrecision,
    ShardedOptimStateDictConfig,
    ShardedStateDictConfig,
    ShardingStrategy,
    StateDictSettings,
    StateDictType,
)
from torcia.distributed.fsdp.wrap import decide
from torcia.distributed.group import ReduceOp
from torcia.distributed.tensor import DTensor
from torcia.library import bump_version, wrap
from torcia.nn import Module

__all__ = ["FullyShardedDataParallel"]

_WRAPPED = "_fsdp_wrapped_module"
IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])
_CONFIGS = {StateDictType.FULL_STATE_DICT: (FullStateDictConfig, FullOptimStateDictConfig),
            StateDictType.SHARDED_STATE_DICT: (ShardedStateDictConfig,
                                               ShardedOptimStateDictConfig),
            StateDictType.LOCAL_STATE_DICT: (LocalStateDictConfig, LocalOptimStateDictConfig)}


def _mesh_of(process_group, device_mesh):
    if device_mesh is not None:
        if device_mesh.ndim != 1:
            raise NotImplementedError("FullyShardedDataParallel takes a 1-D device_mesh "
                                      "(hybrid sharding over 2-D meshes is not supported)")
        return device_mesh
    ranks = C.get_process_group_ranks(process_group)
    return DeviceMesh("cpu", ranks, _groups=[process_group])


def _clean(key: str) -> str:
    return key.replace(_WRAPPED + ".", "")


class FullyShardedDataParallel(Module):
    """Shard ``module``'s parameters, gradients and optimizer state over the ranks of
    ``process_group`` (the default group when None).

    With an ``auto_wrap_policy`` (see :mod:`torcia.distributed.fsdp.wrap`), submodules
    the policy picks become units of their own (nested FullyShardedDataParallel), so that
    only one unit's full parameters exist at a time. ``parameters()`` are the shards
    (DTensors); pass them to the optimizer after wrapping. ``sharding_strategy``:
    FULL_SHARD (default), SHARD_GRAD_OP or NO_SHARD; ``mixed_precision``: a
    :class:`~torcia.distributed.fsdp.MixedPrecision`; ``sync_module_states`` copies rank
    0's parameters and buffers to every rank first; ``ignored_modules`` and
    ``ignored_states`` stay unsharded and unsynchronised.

    Examples
    --------
    Under ``torcia-run --nproc-per-node 2``::

        model = FSDP(net, auto_wrap_policy=ModuleWrapPolicy({Block}))
        opt = torcia.optim.Adam(model.parameters())
        model(x).sum().backward(); opt.step()

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed.fsdp import FullyShardedDataParallel as FSDP
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> model = FSDP(torcia.nn.Linear(3, 2))
    >>> model(torcia.ones(4, 3)).sum().backward()
    >>> [tuple(p.grad.shape) for p in model.parameters()]
    [(2, 3), (2,)]
    >>> dist.destroy_process_group()
    """

    _settings = StateDictSettings(StateDictType.FULL_STATE_DICT, FullStateDictConfig(),
                                  FullOptimStateDictConfig())

    def __init__(self, module, process_group=None, sharding_strategy=None, cpu_offload=None,
                 auto_wrap_policy=None, backward_prefetch=BackwardPrefetch.BACKWARD_PRE,
                 mixed_precision=None, ignored_modules=None, param_init_fn=None,
                 device_id=None, sync_module_states=False, forward_prefetch=False,
                 limit_all_gathers=True, use_orig_params=False, ignored_states=None,
                 device_mesh=None):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"FullyShardedDataParallel expects an nn.Module, got "
                            f"{type(module).__name__}")
        strategy = sharding_strategy or ShardingStrategy.FULL_SHARD
        if strategy in (ShardingStrategy.HYBRID_SHARD, ShardingStrategy._HYBRID_SHARD_ZERO2):
            raise NotImplementedError(f"{strategy.name} (sharding within nodes, replicas "
                                      "across them) is not supported; use FULL_SHARD, "
                                      "SHARD_GRAD_OP or NO_SHARD")
        mp = mixed_precision or MixedPrecision()
        mesh = _mesh_of(process_group, device_mesh)
        ignored = {id(p) for m in (ignored_modules or ()) for p in m.parameters()}
        ignored |= {id(p) for s in (ignored_states or ()) if isinstance(s, Tensor)
                    for p in [s]}
        ignored |= {id(p) for s in (ignored_states or ()) if isinstance(s, Module)
                    for p in s.parameters()}
        if param_init_fn is not None:
            param_init_fn(module)
        if sync_module_states and C.get_world_size(process_group) > 1:
            with torcia.no_grad():
                for t in list(module.parameters()) + list(module.buffers()):
                    C.broadcast(t, C._global_rank(process_group, 0), group=process_group)
        kwargs = dict(process_group=process_group, sharding_strategy=strategy,
                      mixed_precision=mixed_precision, ignored_states=ignored_states,
                      device_mesh=device_mesh)
        if auto_wrap_policy is not None:
            _auto_wrap(module, auto_wrap_policy, kwargs, ignored)
        if mp.buffer_dtype is not None:
            for owner in module.modules():
                for name, buf in list(owner._buffers.items()):
                    if buf is not None and buf.is_floating_point():
                        owner._buffers[name] = buf.to(mp.buffer_dtype)
        self.sharding_strategy = strategy
        self.mixed_precision = mixed_precision
        self._is_root = True
        self._cast_root_inputs = mp.cast_root_forward_inputs and mp.param_dtype is not None
        setattr(self, _WRAPPED, module)
        nested = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        for child in nested:
            child._is_root = False
        params = [(o, n, p) for o, n, p in _engine.managed_parameters(module, set(nested))
                  if id(p) not in ignored]
        self._unit = _engine.Unit(
            self, params, mesh, shard=strategy != ShardingStrategy.NO_SHARD,
            reshard_after_forward=strategy == ShardingStrategy.FULL_SHARD,
            param_dtype=mp.param_dtype, reduce_dtype=mp.reduce_dtype,
            cast_forward_inputs=mp.cast_forward_inputs,
            keep_low_precision_grads=mp.keep_low_precision_grads)

    # ----- the wrapped module -----------------------------------------------------------
    @property
    def module(self) -> Module:
        """The wrapped module."""
        return getattr(self, _WRAPPED)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__(_WRAPPED), name)

    def __getitem__(self, index):
        return self.module[index]

    def forward(self, *args, **kwargs):
        if self._is_root and self._cast_root_inputs:
            cast = _engine._caster(self._unit.param_dtype)
            args, kwargs = _engine._map(cast, args), _engine._map(cast, kwargs)
        return self.module(*args, **kwargs)

    def check_is_root(self) -> bool:
        """Whether this instance is not nested in another."""
        return self._is_root

    @staticmethod
    def fsdp_modules(module, root_only: bool = False) -> list:
        """The FullyShardedDataParallel instances in ``module`` (itself included)."""
        found = [m for m in module.modules() if isinstance(m, FullyShardedDataParallel)]
        return [m for m in found if m._is_root] if root_only else found

    def _units(self):
        return [m._unit for m in FullyShardedDataParallel.fsdp_modules(self)]

    # ----- gradients ----------------------------------------------------------------------
    @contextlib.contextmanager
    def no_sync(self):
        """Inside, backward keeps full gradients locally without communicating; the
        first backward after it reduces their sum."""
        units = self._units()
        before = [u.requires_grad_sync for u in units]
        for u in units:
            u.requires_grad_sync = False
        try:
            yield
        finally:
            for u, b in zip(units, before):
                u.requires_grad_sync = b

    def clip_grad_norm_(self, max_norm, norm_type=2.0):
        """Scale the (sharded) gradients so that their norm over all ranks is at most
        ``max_norm``; returns that total norm."""
        norm_type = float(norm_type)
        local, replicated = [], []
        for unit in self._units():
            for e in unit.params:
                g = e.sharded.grad
                if g is not None:
                    (local if unit.shard else replicated).append(
                        np.abs(g.__torcia_data__.astype(np.float64)))
        if math.isinf(norm_type):
            mine = max([a.max(initial=0.0) for a in local + replicated], default=0.0)
            total = torcia.tensor([mine], dtype=torcia.float64)
            C.all_reduce(total, ReduceOp.MAX, group=self._unit.group)
            norm = total.item()
        else:
            shard_part = sum(float((a ** norm_type).sum()) for a in local)
            total = torcia.tensor([shard_part], dtype=torcia.float64)
            C.all_reduce(total, ReduceOp.SUM, group=self._unit.group)
            rest = sum(float((a ** norm_type).sum()) for a in replicated)
            norm = (total.item() + rest) ** (1.0 / norm_type)
        coef = float(max_norm) / (norm + 1e-6)
        if coef < 1:
            for unit in self._units():
                for e in unit.params:
                    if e.sharded.grad is not None:
                        e.sharded.grad.__torcia_data__ *= coef
                        bump_version(e.sharded.grad)
        return torcia.tensor(norm)

    # ----- full parameters ----------------------------------------------------------------
    @staticmethod
    @contextlib.contextmanager
    def summon_full_params(module, recurse=True, writeback=True, rank0_only=False,
                           offload_to_cpu=False, with_grads=False):
        """Inside, the modules hold their full parameters (every rank gathers them);
        with ``writeback``, changes made to them are kept."""
        instances = FullyShardedDataParallel.fsdp_modules(module)
        units = [m._unit for m in (instances if recurse else instances[:1])]
        for unit in units:
            unit.unshard()
        try:
            yield
        finally:
            for unit in units:
                if writeback:
                    _engine.load_full(unit, {id(e.sharded): e.full for e in unit.params})
                unit.reshard(free=True)
                unit._drop_full()

    # ----- state dicts --------------------------------------------------------------------
    @staticmethod
    def set_state_dict_type(module, state_dict_type, state_dict_config=None,
                            optim_state_dict_config=None) -> StateDictSettings:
        """Set what ``state_dict()`` returns for every instance in ``module``; returns
        the previous settings."""
        model_cls, optim_cls = _CONFIGS[state_dict_type]
        settings = StateDictSettings(state_dict_type, state_dict_config or model_cls(),
                                     optim_state_dict_config or optim_cls())
        previous = None
        for m in FullyShardedDataParallel.fsdp_modules(module):
            previous = previous or m._settings
            m._settings = settings
        return previous or FullyShardedDataParallel._settings

    @staticmethod
    def get_state_dict_type(module) -> StateDictSettings:
        """The state dict settings of the instances in ``module``."""
        found = FullyShardedDataParallel.fsdp_modules(module)
        if not found:
            raise ValueError("no FullyShardedDataParallel instance in the module")
        return found[0]._settings

    @staticmethod
    @contextlib.contextmanager
    def state_dict_type(module, state_dict_type, state_dict_config=None,
                        optim_state_dict_config=None):
        """Within the block, ``state_dict()``/``load_state_dict()`` of the instances in
        ``module`` use ``state_dict_type``."""
        instances = FullyShardedDataParallel.fsdp_modules(module)
        saved = [m._settings for m in instances]
        FullyShardedDataParallel.set_state_dict_type(module, state_dict_type,
                                                     state_dict_config,
                                                     optim_state_dict_config)
        try:
            yield
        finally:
            for m, s in zip(instances, saved):
                m._settings = s

    def _raw_state_dict(self):
        raw = OrderedDict()
        Module.state_dict(self, destination=raw, keep_vars=True)
        return raw

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        if destination is not None or args:
            # reached from an enclosing module's state_dict: its root converts
            return Module.state_dict(self, *args, destination=destination, prefix=prefix,
                                     keep_vars=True)
        kind = self._settings.state_dict_type
        raw = self._raw_state_dict()
        out = OrderedDict()
        if kind is StateDictType.FULL_STATE_DICT:
            fulls = {}
            for unit in self._units():
                fulls.update(_engine.full_state(unit))
            if self._settings.state_dict_config.rank0_only and self._unit.rank != 0:
                return out
            for key, value in raw.items():
                value = fulls.get(id(value), value)
                out[prefix + _clean(key)] = value if keep_vars else value.detach()
        elif kind is StateDictType.SHARDED_STATE_DICT:
            for key, value in raw.items():
                out[prefix + _clean(key)] = value if keep_vars else value.detach()
        else:
            for key, value in raw.items():
                local = Tensor.detach(value) if isinstance(value, DTensor) else value.detach()
                out[prefix + _clean(key)] = local
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        kind = self._settings.state_dict_type
        raw = self._raw_state_dict()
        by_clean = {_clean(k): (k, v) for k, v in raw.items()}
        missing = [k for k in by_clean if k not in state_dict]
        unexpected = [k for k in state_dict if k not in by_clean]
        if strict and (missing or unexpected):
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}: "
                               f"missing keys {missing}, unexpected keys {unexpected}")
        owners = {id(e.sharded): unit for unit in self._units() for e in unit.params}
        fulls: dict = {}
        for key, (_, current) in by_clean.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            unit = owners.get(id(current))
            if unit is not None and kind is StateDictType.FULL_STATE_DICT:
                fulls.setdefault(id(unit), (unit, {}))[1][id(current)] = value
                continue
            if isinstance(value, DTensor):
                value = Tensor.detach(value)
            if isinstance(current, DTensor) and kind is not StateDictType.FULL_STATE_DICT:
                if tuple(value.shape) != tuple(current.__torcia_data__.shape):
                    raise RuntimeError(f"size mismatch for {key}: a shard of shape "
                                       f"{list(value.shape)}, this rank's is "
                                       f"{list(current.__torcia_data__.shape)}")
            with torcia.no_grad():
                Tensor.copy_(current, value)
        for unit, values in fulls.values():
            _engine.load_full(unit, values)
        return IncompatibleKeys(missing, unexpected)

    # ----- optimizer state ----------------------------------------------------------------
    def _names(self) -> dict:
        """id(shard) -> the parameter's name as the wrapped model calls it."""
        return {id(v): _clean(k) for k, v in self._raw_state_dict().items()}

    @staticmethod
    def optim_state_dict(model, optim, optim_state_dict=None, group=None) -> dict:
        """``optim``'s state keyed by parameter names, with each per-parameter tensor
        gathered whole (FULL_STATE_DICT) or left as this rank's shard (other types)."""
        optim_state_dict = optim_state_dict or optim.state_dict()
        names = model._names()
        entries = {id(e.sharded): (unit, e) for unit in model._units() for e in unit.params}
        full = model._settings.state_dict_type is StateDictType.FULL_STATE_DICT
        params = [p for g in optim.param_groups for p in g["params"]]
        state, groups = {}, []
        for index, p in enumerate(params):
            saved = optim_state_dict["state"].get(index)
            if saved is None:
                continue
            unit, e = entries.get(id(p), (None, None))
            state[names[id(p)]] = {
                k: (_gather_state(unit, e, v) if full and unit is not None
                    and isinstance(v, Tensor) and tuple(v.shape) == tuple(p.__torcia_data__.shape)
                    else v) for k, v in saved.items()}
        offset = 0
        for g, saved in zip(optim.param_groups, optim_state_dict["param_groups"]):
            group_copy = dict(saved)
            group_copy["params"] = [names[id(p)] for p in g["params"]]
            offset += len(g["params"])
            groups.append(group_copy)
        return {"state": state, "param_groups": groups}

    @staticmethod
    def optim_state_dict_to_load(model, optim, optim_state_dict, is_named_optimizer=False,
                                 load_directly=False, group=None) -> dict:
        """The state dict ``optim.load_state_dict`` takes on this rank, from one made by
        :meth:`optim_state_dict` (whole tensors are cut to this rank's shards)."""
        names = model._names()
        entries = {id(e.sharded): (unit, e) for unit in model._units() for e in unit.params}
        params = [p for g in optim.param_groups for p in g["params"]]
        state = {}
        for index, p in enumerate(params):
            saved = optim_state_dict["state"].get(names[id(p)])
            if saved is None:
                continue
            unit, e = entries.get(id(p), (None, None))
            state[index] = {k: (_shard_state(unit, e, v) if unit is not None
                                and isinstance(v, Tensor) and tuple(v.shape) == e.shape
                                else v) for k, v in saved.items()}
        groups, index = [], 0
        for g, saved in zip(optim.param_groups, optim_state_dict["param_groups"]):
            group_copy = dict(saved)
            group_copy["params"] = list(range(index, index + len(g["params"])))
            index += len(g["params"])
            groups.append(group_copy)
        result = {"state": state, "param_groups": groups}
        if load_directly:
            optim.load_state_dict(result)
        return result


def _gather_state(unit, e, value):
    """A per-parameter optimizer tensor shaped as the shard, gathered whole."""
    if not unit.shard:
        return value.detach().clone()
    pad = np.zeros((e.chunk, e.width), dtype=value.__torcia_data__.dtype)
    pad[:e.local_rows] = value.__torcia_data__.reshape(e.local_rows, e.width)
    out = torcia.from_numpy(np.empty(unit.world * pad.size, dtype=pad.dtype))
    C.all_gather_into_tensor(out, torcia.from_numpy(pad.reshape(-1)), group=unit.group)
    rows = out.__torcia_data__.reshape(unit.world * e.chunk, e.width)[:e.rows]
    return wrap(np.ascontiguousarray(rows).reshape(e.shape), value.device)


def _shard_state(unit, e, value):
    """This rank's rows of a whole per-parameter optimizer tensor."""
    data = value.detach().reshape(e.shape or (1,))
    if not unit.shard:
        return data.clone().reshape(e.sharded.__torcia_data__.shape)
    start = min(unit.rank * e.chunk, e.rows)
    return data[start:start + e.local_rows].clone().reshape(e.sharded.__torcia_data__.shape)


def _auto_wrap(module, policy, kwargs, ignored) -> None:
    """Wrap, bottom-up, the submodules ``policy`` picks in FullyShardedDataParallel."""
    for name, child in list(module._modules.items()):
        if child is None or isinstance(child, FullyShardedDataParallel):
            continue
        numel = sum(p.numel() for p in child.parameters() if id(p) not in ignored)
        if decide(policy, child, numel, recurse=True):
            _auto_wrap(child, policy, kwargs, ignored)
        numel = sum(p.numel() for p in child.parameters() if id(p) not in ignored
                    and not isinstance(p, DTensor))
        chosen = decide(policy, child, numel, recurse=False)
        if chosen:
            extra = chosen if isinstance(chosen, dict) else {}
            module._modules[name] = FullyShardedDataParallel(child, **{**kwargs, **extra})
