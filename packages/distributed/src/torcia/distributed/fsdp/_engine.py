"""The sharding engine under both ``FullyShardedDataParallel`` and ``fully_shard``.

A *unit* is a module whose parameters (those not managed by a unit nested in it) are
sharded together. Each parameter is split along its first dimension as ``torch.chunk``
splits it, and rank r keeps chunk r as a DTensor parameter (``Shard(0)``) registered in
place of the original: ``parameters()``, the optimizer and ``state_dict()`` see shards, so
parameters, gradients and optimizer state take 1/N of the memory per rank.

Around the unit's forward:

- before it (a forward pre-hook), the shards are all-gathered, in one collective for the
  whole unit, into full parameters that require grad, registered for the forward;
- after it (a forward hook), the shards are registered again; with
  ``reshard_after_forward`` (FULL_SHARD) the full parameters' memory is freed (their
  arrays dropped: autograd keeps the tensors, not the arrays), and the unit's outputs pass
  through an identity autograd function whose backward gathers them again before the
  unit's own backward needs them;
- once backward has accumulated a gradient into each full parameter (hooks on their
  AccumulateGrad nodes, or at the end of backward for unused ones), the full gradients
  are reduce-scattered (one collective for the unit) and averaged into the shards'
  gradients, and the full parameters and gradients are dropped.

NO_SHARD keeps whole parameters and all-reduces their gradients instead. Mixed precision
gathers and computes in ``param_dtype`` and reduces in ``reduce_dtype``; the shards and
their gradients stay in the parameters' own dtype.
"""

from __future__ import annotations

import math

import numpy as np

import torcia
from torcia import Tensor
from torcia.autograd import Function, engine
from torcia.autograd.graph import accumulator_of
from torcia.distributed import collectives as C
from torcia.distributed.group import ReduceOp
from torcia.distributed.parallel import _tensors
from torcia.distributed.tensor import DTensor, Replicate, Shard
from torcia.distributed.tensor._api import _contiguous_stride, _Spec, _wrap, as_parameter
from torcia.library import bump_version, wrap
from torcia.nn import Parameter


class _Param:
    """One original parameter of a unit: where it is registered, its full shape, and its
    shard."""

    __slots__ = ("owner", "name", "shape", "requires_grad", "sharded", "rows", "width",
                 "chunk", "local_rows", "full")

    def __init__(self, owner, name, param, mesh, world, rank, shard):
        self.owner, self.name = owner, name
        self.shape = tuple(param.shape)
        self.requires_grad = param.requires_grad
        flat_shape = self.shape or (1,)  # a 0-d parameter is sharded as one element
        self.rows = flat_shape[0]
        self.width = int(np.prod(flat_shape[1:])) if len(flat_shape) > 1 else 1
        self.chunk = math.ceil(self.rows / world) if shard else self.rows
        start = min(rank * self.chunk, self.rows) if shard else 0
        self.local_rows = max(0, min(self.rows, start + self.chunk) - start)
        data = param.detach().reshape(flat_shape)
        local = data[start:start + self.local_rows].clone()
        spec = _Spec(mesh, [Shard(0)] if shard else [Replicate()], flat_shape,
                     _contiguous_stride(flat_shape))
        self.sharded = as_parameter(_wrap(local, spec), self.requires_grad)
        self.full = None


class _PreBackward(Function):
    """Identity on a unit's outputs; its backward regathers the unit's parameters before
    the unit's own backward runs."""

    @staticmethod
    def forward(ctx, unit, *tensors):
        ctx.unit = unit
        return tuple(t.view(t.shape) for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        ctx.unit.pre_backward()
        return (None, *grads)


class Unit:
    """The sharded parameters of one module and the hooks that gather and reduce them."""

    def __init__(self, module, params, mesh, *, shard=True, reshard_after_forward=True,
                 param_dtype=None, reduce_dtype=None, output_dtype=None,
                 cast_forward_inputs=False, keep_low_precision_grads=False):
        self.module = module
        self.mesh = mesh
        self.group = mesh.get_group(0)
        self.world = C.get_world_size(self.group)
        self.rank = C.get_rank(self.group)
        self.shard = shard
        self.reshard_after_forward = reshard_after_forward
        self.param_dtype, self.reduce_dtype = param_dtype, reduce_dtype
        self.output_dtype = output_dtype
        self.cast_forward_inputs = cast_forward_inputs
        self.keep_low_precision_grads = keep_low_precision_grads
        self.requires_grad_sync = True
        self.divide_factor = None  # what averaged gradients are divided by (the ranks)
        for _owner, name, p in params:
            if p.device.type != "cpu":
                raise NotImplementedError(f"FSDP shards CPU parameters; {name} is on "
                                          f"{p.device}")
        dtypes = sorted({str(p.dtype) for _, _, p in params})
        if len(dtypes) > 1:
            # one collective moves the unit: its parameters share a dtype (as FSDP's flat
            # parameters must); wrap the differing ones as units of their own
            raise NotImplementedError(f"the parameters of one FSDP unit must share a dtype; "
                                      f"{type(module).__name__}'s have {', '.join(dtypes)}")
        self.params = [_Param(owner, name, p, mesh, self.world, self.rank, self.shard)
                       for owner, name, p in params]
        for entry in self.params:
            entry.owner._parameters[entry.name] = entry.sharded
        self._data_present = False
        self._ready = 0
        self._callback_queued = False
        self._accumulators = []
        self._pending = None  # full gradients kept across no_sync() steps
        self.handles = [module.register_forward_pre_hook(self._pre_forward, with_kwargs=True),
                        module.register_forward_hook(self._post_forward)]

    # ----- gathering ------------------------------------------------------------------
    def gather(self, dtype=None) -> list:
        """The full arrays of the unit's parameters, in ``dtype`` (the shards' when None),
        all-gathered in one collective."""
        cast = None if dtype is None else dtype.to_numpy()
        if not self.params:
            return []
        if not self.shard:
            arrays = [e.sharded.__torcia_data__ for e in self.params]
            return [(a if cast is None else a.astype(cast)).reshape(e.shape)
                    for a, e in zip(arrays, self.params)]
        buffer = np.zeros(sum(e.chunk * e.width for e in self.params),
                          self.params[0].sharded.__torcia_data__.dtype if cast is None else cast)
        offset = 0
        for e in self.params:
            local = e.sharded.__torcia_data__.reshape(-1)
            buffer[offset:offset + local.size] = local
            offset += e.chunk * e.width
        send = torcia.from_numpy(buffer)
        out = torcia.from_numpy(np.empty(self.world * send.numel(), dtype=buffer.dtype))
        C.all_gather_into_tensor(out, send, group=self.group)
        table = out.__torcia_data__.reshape(self.world, -1)
        fulls, offset = [], 0
        for e in self.params:
            n = e.chunk * e.width
            rows = table[:, offset:offset + n].reshape(self.world * e.chunk, e.width)
            fulls.append(np.ascontiguousarray(rows[:e.rows]).reshape(e.shape))
            offset += n
        return fulls

    def unshard(self) -> None:
        """Register the full parameters (gathered if their memory was freed)."""
        if not self._data_present:
            arrays = self.gather(self.param_dtype)
            for e, arr in zip(self.params, arrays):
                if e.full is None:
                    e.full = Parameter(wrap(arr, e.sharded.device),
                                       requires_grad=e.requires_grad)
                    if e.requires_grad:
                        acc = accumulator_of(e.full)
                        acc.register_hook(self._grad_ready)
                        self._accumulators.append(acc)
                else:
                    e.full.__torcia_data__ = arr
            self._data_present = True
        for e in self.params:
            e.owner._parameters[e.name] = e.full

    def reshard(self, free: bool = True) -> None:
        """Register the shards again; with ``free``, drop the full parameters' memory."""
        for e in self.params:
            e.owner._parameters[e.name] = e.sharded
        if free and self._data_present and self.shard:
            for e in self.params:
                if e.full is not None:
                    # a new empty array: a view of the old one would keep its memory
                    old = e.full.__torcia_data__
                    e.full.__torcia_data__ = np.empty((0,) * old.ndim, old.dtype)
            self._data_present = False

    def _drop_full(self) -> None:
        for e in self.params:
            e.full = None
        self._accumulators = []
        self._data_present = False
        self._ready = 0

    # ----- forward --------------------------------------------------------------------
    def _pre_forward(self, module, args, kwargs):
        self.unshard()
        if self.cast_forward_inputs and self.param_dtype is not None:
            cast = _caster(self.param_dtype)
            return _map(cast, args), _map(cast, kwargs)
        return None

    def _post_forward(self, module, args, output):
        training = torcia.is_grad_enabled() and any(e.requires_grad for e in self.params)
        self.reshard(free=self.reshard_after_forward or not training)
        if not training:
            self._drop_full()
        if self.output_dtype is not None:
            output = _map(_caster(self.output_dtype), output)
        if training:
            flat = [t for t in _tensors(output) if t.requires_grad]
            if flat:
                wrapped = _PreBackward.apply(self, *flat)
                wrapped = iter((wrapped,) if isinstance(wrapped, Tensor) else wrapped)
                output = _map(lambda t: next(wrapped) if t.requires_grad else t, output)
        return output

    # ----- backward -------------------------------------------------------------------
    def pre_backward(self) -> None:
        self._queue_finish()
        if not self._data_present:
            self.unshard()
            self.reshard(free=False)  # keep the shards registered: the data is in `full`

    def _queue_finish(self):
        if not self._callback_queued:
            engine.queue_callback(self._finish_backward)
            self._callback_queued = True

    def _grad_ready(self, variable):
        self._queue_finish()
        self._ready += 1
        if self._ready == sum(e.requires_grad for e in self.params):
            self.post_backward()

    def _finish_backward(self):
        self._callback_queued = False
        if any(e.full is not None for e in self.params):
            self.post_backward()

    def post_backward(self) -> None:
        """Reduce the full gradients into the shards' gradients and free the full
        parameters (keep the gradients for later under no_sync)."""
        entries = [e for e in self.params if e.requires_grad and e.full is not None]
        grads = [e.full.grad.__torcia_data__ if e.full.grad is not None
                 else np.zeros(e.shape, dtype=e.full.__torcia_data__.dtype) for e in entries]
        if self._pending is not None:
            grads = [g + p for g, p in zip(grads, self._pending)]
            self._pending = None
        if not self.requires_grad_sync:
            self._pending = grads
        elif entries:
            for e, g in zip(entries, self._reduce(entries, grads)):
                self._accumulate(e, g)
        self.reshard(free=True)
        self._drop_full()

    def _reduce(self, entries, grads) -> list:
        """The shards of the averaged gradients (reduce-scatter; all-reduce unsharded)."""
        dtype = (self.reduce_dtype or self.param_dtype)
        np_dtype = dtype.to_numpy() if dtype is not None else grads[0].dtype
        if not self.shard:
            flat = torcia.from_numpy(np.concatenate([g.astype(np_dtype).reshape(-1)
                                                     for g in grads]))
            if self.world > 1:
                C.all_reduce(flat, ReduceOp.SUM, group=self.group)
            flat = flat.__torcia_data__ / (self.divide_factor or self.world)
            out, offset = [], 0
            for e in entries:
                n = int(np.prod(e.shape)) if e.shape else 1
                out.append(flat[offset:offset + n].reshape(e.sharded.__torcia_data__.shape))
                offset += n
            return out
        # row r of the table: what rank r keeps, every parameter's chunk r (zero-padded)
        table = np.zeros((self.world, sum(e.chunk * e.width for e in entries)), np_dtype)
        offset = 0
        for e, g in zip(entries, grads):
            g = g.reshape(e.rows, e.width)
            for r in range(self.world):
                rows = g[r * e.chunk:(r + 1) * e.chunk]
                table[r, offset:offset + rows.size] = rows.reshape(-1)
            offset += e.chunk * e.width
        out = torcia.from_numpy(np.empty(table.shape[1], dtype=table.dtype))
        C.reduce_scatter_tensor(out, torcia.from_numpy(table.reshape(-1)), ReduceOp.SUM,
                                group=self.group)
        mine = out.__torcia_data__ / (self.divide_factor or self.world)
        shards, offset = [], 0
        for e in entries:
            n = e.chunk * e.width
            piece = mine[offset:offset + e.local_rows * e.width]
            shards.append(piece.reshape(e.sharded.__torcia_data__.shape))
            offset += n
        return shards

    def _accumulate(self, e, grad) -> None:
        sharded = e.sharded
        if not self.keep_low_precision_grads:
            grad = grad.astype(sharded.__torcia_data__.dtype, copy=False)
        if sharded.grad is None:
            sharded.grad = _wrap(wrap(np.ascontiguousarray(grad), sharded.device),
                                 sharded._spec)
        else:
            sharded.grad.__torcia_data__ += grad
            bump_version(sharded.grad)


def _caster(dtype):
    def cast(t):
        return t.to(dtype) if t.is_floating_point() and t.dtype != dtype else t

    return cast


def _map(fn, obj):
    """``obj`` with ``fn`` applied to each tensor in it (tuples, lists, dicts kept)."""
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map(fn, x) for x in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(fn, x) for x in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _map(fn, v)) for k, v in obj.items())
    return obj


def managed_parameters(module, skip) -> list:
    """``(owner, name, parameter)`` of ``module``'s parameters, except those of the
    submodules in ``skip`` (other units), each parameter once."""
    seen, out = set(), []

    def walk(mod):
        if mod is not module and mod in skip:
            return
        for name, p in mod._parameters.items():
            if p is not None and id(p) not in seen and not isinstance(p, DTensor):
                seen.add(id(p))
                out.append((mod, name, p))
        for child in mod._modules.values():
            if child is not None:
                walk(child)

    walk(module)
    return out


def full_state(unit: Unit) -> dict:
    """``{id(sharded parameter): full tensor}`` of a unit, gathered."""
    out = {}
    for e, arr in zip(unit.params, unit.gather()):
        out[id(e.sharded)] = wrap(np.array(arr, copy=True), e.sharded.device)
    return out


def load_full(unit: Unit, values: dict) -> None:
    """Copy full tensors (``{id(sharded parameter): tensor}``) into the shards."""
    for e in unit.params:
        value = values.get(id(e.sharded))
        if value is None:
            continue
        if tuple(value.shape) != e.shape:
            raise RuntimeError(f"size mismatch for {e.name}: copying a param with shape "
                               f"{list(value.shape)}, the shape in current model is "
                               f"{list(e.shape)}")
        data = value.detach().reshape(e.shape or (1,))
        start = min(unit.rank * e.chunk, e.rows) if unit.shard else 0
        part = data[start:start + e.local_rows] if unit.shard else data
        with torcia.no_grad():
            Tensor.copy_(e.sharded, part.reshape(e.sharded.__torcia_data__.shape))
