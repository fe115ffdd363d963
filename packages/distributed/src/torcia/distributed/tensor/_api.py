"""DTensor: a tensor spread over a :class:`~torcia.distributed.DeviceMesh`, as
``torch.distributed.tensor.DTensor``.

A DTensor is a torcia tensor whose elements are **this rank's part** (its *local tensor*)
of a *global* tensor, with the mesh, the placements (one per mesh dimension:
:class:`Shard`, :class:`Replicate`, :class:`Partial`) and the global shape and stride.
Tensor operations on a DTensor run on its local part and return plain tensors: the
element-wise updates of optimizers are therefore exact on sharded parameters (FSDP's
use). Unlike PyTorch, ``shape``, ``size()`` and reductions are those of the local part;
the global tensor is :meth:`DTensor.full_tensor`, its shape :attr:`DTensor.global_shape`,
and :meth:`DTensor.redistribute` moves between placements. A shard is
``torch.chunk``'s: ceil(n / ranks) rows each, the last ones shorter or empty.
"""

from __future__ import annotations

import math

import torcia
from torcia import Tensor
from torcia.distributed import collectives as C
from torcia.distributed.device_mesh import DeviceMesh
from torcia.distributed.group import ReduceOp
from torcia.distributed.tensor.placement_types import (
    Placement,
    Replicate,
    Shard,
    _StridedShard,
)
from torcia.library import alias, disabled_torch_function_impl
from torcia.nn import Module, Parameter

__all__ = ["DTensor", "distribute_module", "distribute_tensor", "empty", "full", "ones",
           "rand", "randn", "zeros"]


class _Spec:
    __slots__ = ("mesh", "placements", "shape", "stride")

    def __init__(self, mesh, placements, shape, stride):
        self.mesh = mesh
        self.placements = tuple(placements)
        self.shape = torcia.Size(shape)
        self.stride = tuple(stride)


def _contiguous_stride(shape) -> tuple:
    stride, step = [], 1
    for n in reversed(tuple(shape)):
        stride.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(stride))


def _chunk(length: int, parts: int, index: int) -> tuple[int, int]:
    """(size, start) of chunk ``index`` when ``length`` is split in ``parts`` as
    ``torch.chunk`` does."""
    step = math.ceil(length / parts) if length else 0
    start = min(index * step, length)
    return max(0, min(length, start + step) - start), start


def _check_placements(mesh, placements, ndim):
    placements = tuple(placements)
    if len(placements) != mesh.ndim:
        raise ValueError(f"placements {placements} has {len(placements)} entries for a "
                         f"{mesh.ndim}-D mesh")
    for p in placements:
        if not isinstance(p, Placement):
            raise TypeError(f"placements must be Shard/Replicate/Partial, got {p!r}")
        if p.is_shard() and not -ndim <= p.dim < max(ndim, 1):
            raise IndexError(f"{p!r} is out of range for a {ndim}-D tensor")
    return tuple(Shard(p.dim % ndim) if type(p) is Shard and p.dim < 0 else p
                 for p in placements)


def local_shape_and_offset(global_shape, mesh, placements, coordinate=None):
    """(local shape, global offset) of the part at mesh ``coordinate`` (this rank's by
    default)."""
    coordinate = mesh.get_coordinate() if coordinate is None else coordinate
    shape, offset = list(global_shape), [0] * len(global_shape)
    if coordinate is None:
        return (0,) * len(shape), tuple(offset)
    for m, p in enumerate(placements):
        if isinstance(p, _StridedShard):
            raise NotImplementedError("_StridedShard placements are recognised but not "
                                      "laid out by torcia's DTensor")
        if p.is_shard():
            size, start = _chunk(shape[p.dim], mesh.size(m), coordinate[m])
            shape[p.dim] = size
            offset[p.dim] += start
    return tuple(shape), tuple(offset)


def _local_part(full: Tensor, mesh, placements) -> Tensor:
    """This rank's part of the global tensor ``full`` (same on every rank)."""
    shape, offset = local_shape_and_offset(full.shape, mesh, placements)
    index = tuple(slice(o, o + n) for o, n in zip(offset, shape))
    part = full[index] if index else full
    coordinate = mesh.get_coordinate()
    for m, p in enumerate(placements):
        if p.is_partial() and coordinate[m] != 0 and p.reduce_op in ("sum", "avg"):
            part = torcia.zeros_like(part)  # the parts must reduce to the tensor
    return part.contiguous().clone()


def _wrap(local: Tensor, spec: _Spec, cls=None) -> DTensor:
    """A DTensor over ``local``'s memory."""
    t = alias(local)
    t.__class__ = cls or DTensor
    t._dtensor_spec = spec
    return t


class DTensor(Tensor):
    """A tensor spread over a device mesh; see the module's documentation.

    Build one with :func:`distribute_tensor` (from a global tensor every rank holds),
    :meth:`from_local` (from each rank's part) or the factories (:func:`zeros`...).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed.tensor import DTensor, Shard, distribute_tensor
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> mesh = dist.init_device_mesh("cpu", (1,))
    >>> d = distribute_tensor(torcia.arange(6.0).reshape(3, 2), mesh, [Shard(0)])
    >>> d.placements, d.global_shape, d.to_local().shape
    ((Shard(dim=0),), torcia.Size([3, 2]), torcia.Size([3, 2]))
    >>> isinstance(d, DTensor), d.full_tensor().sum().item()
    (True, 15.0)
    >>> dist.destroy_process_group()
    """

    __slots__ = ()
    # as PyTorch's DTensor: no __torch_function__ dispatch, so that operations on one give
    # plain tensors (of the local part) rather than DTensors without a placement
    __torch_function__ = disabled_torch_function_impl

    @property
    def _spec(self) -> _Spec:
        return self._dtensor_spec

    @property
    def device_mesh(self) -> DeviceMesh:
        """The mesh the tensor is spread over."""
        return self._spec.mesh

    @property
    def placements(self) -> tuple:
        """One placement per mesh dimension."""
        return self._spec.placements

    @property
    def global_shape(self):
        """The shape of the global tensor (``shape`` is the local part's)."""
        return self._spec.shape

    def global_stride(self) -> tuple:
        """The strides of the global tensor."""
        return self._spec.stride

    def to_local(self, *, grad_placements=None) -> Tensor:
        """This rank's part, as a plain tensor over the same memory (differentiable)."""
        return Tensor.view(self, tuple(self.__torcia_data__.shape))

    def full_tensor(self, *, grad_placements=None) -> Tensor:
        """The global tensor, on every rank: shards gathered, partial values reduced."""
        return _replicate(self)

    def redistribute(self, device_mesh=None, placements=None, *, async_op=False,
                     forward_dtype=None, backward_dtype=None) -> DTensor:
        """The same global tensor with other placements (on the same mesh)."""
        mesh = device_mesh or self.device_mesh
        if mesh != self.device_mesh:
            raise NotImplementedError("redistribute to another mesh is not supported")
        placements = _check_placements(mesh, placements or self.placements,
                                       len(self.global_shape))
        full = self.full_tensor()
        if forward_dtype is not None:
            full = full.to(forward_dtype)
        return _wrap(_local_part(full, mesh, placements),
                     _Spec(mesh, placements, full.shape, _contiguous_stride(full.shape)))

    @staticmethod
    def from_local(local_tensor, device_mesh=None, placements=None, *, run_check=False,
                   shape=None, stride=None, grad_placements=None) -> DTensor:
        """A DTensor from each rank's part ``local_tensor``. Without ``shape``, the parts
        are taken to be equal (the global size of a sharded dimension is the local one
        times the mesh dimension's size). ``run_check`` verifies that replicas agree."""
        mesh = device_mesh or _default_mesh()
        placements = _check_placements(mesh, placements or [Replicate()] * mesh.ndim,
                                       local_tensor.ndim)
        if shape is None:
            dims = list(local_tensor.shape)
            for m, p in enumerate(placements):
                if p.is_shard():
                    dims[p.dim] *= mesh.size(m)
            shape = tuple(dims)
        if run_check:
            for m, p in enumerate(placements):
                if p.is_replicate() and mesh.size(m) > 1:
                    reference = local_tensor.detach().clone()
                    C.broadcast(reference, C._global_rank(mesh.get_group(m), 0),
                                group=mesh.get_group(m))
                    if not torcia.equal(reference, local_tensor.detach()):
                        raise ValueError("from_local(run_check=True): the Replicate parts "
                                         f"differ along mesh dimension {m}")
        return _wrap(local_tensor, _Spec(mesh, placements, shape,
                                         stride or _contiguous_stride(shape)))

    def detach(self) -> DTensor:
        """The DTensor without its history (same memory, mesh and placements)."""
        return _wrap(Tensor.detach(self), self._spec)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        copy = _wrap(Tensor.__deepcopy__(Tensor.detach(self), {}), self._spec, type(self))
        copy.requires_grad_(self.requires_grad)
        memo[id(self)] = copy
        return copy

    def __repr__(self):
        return (f"DTensor(local_tensor={Tensor.__repr__(self)}, device_mesh={self.device_mesh}"
                f", placements={self.placements})")

    def __reduce_ex__(self, protocol):
        raise TypeError("a DTensor is one rank's part of a tensor: save it with "
                        "torcia.distributed.checkpoint, or save dt.full_tensor()")


class _DTensorParameter(DTensor, Parameter):
    """A module parameter that is a DTensor (what ``fully_shard`` registers)."""

    __slots__ = ()

    def __repr__(self):
        return "Parameter containing:\n" + DTensor.__repr__(self)


def as_parameter(dt: DTensor, requires_grad: bool = True) -> DTensor:
    """``dt`` as a module parameter that is both a :class:`~torcia.nn.Parameter` and a
    DTensor (``nn.Parameter(dtensor)`` in PyTorch)."""
    p = _wrap(dt.detach() if dt.requires_grad else dt, dt._spec, _DTensorParameter)
    if requires_grad:
        p.requires_grad_(True)
    return p


def _replicate(dt: DTensor) -> Tensor:
    """The global tensor of ``dt``: its mesh dimensions undone, the last first (each
    Shard gathered, each Partial reduced)."""
    spec = dt._spec
    mesh = spec.mesh
    coordinate = mesh.get_coordinate()
    current = Tensor.detach(dt)
    for m in reversed(range(mesh.ndim)):
        p = spec.placements[m]
        group = mesh.get_group(m)
        if p.is_partial():
            current = current.clone()
            op = {"sum": ReduceOp.SUM, "avg": ReduceOp.AVG, "max": ReduceOp.MAX,
                  "min": ReduceOp.MIN}[p.reduce_op]
            C.all_reduce(current, op=op, group=group)
        elif p.is_shard():
            # the dimension's length before mesh dimension m split it: what the earlier
            # mesh dimensions left of the global length
            whole = spec.shape[p.dim]
            for earlier in range(m):
                if spec.placements[earlier].is_shard(p.dim):
                    whole = _chunk(whole, mesh.size(earlier), coordinate[earlier])[0]
            current = _gather_dim(current, p.dim, whole, mesh.size(m), group)
    return current


def _gather_dim(part, dim, whole, n, group):
    """The parts of ``n`` ranks along tensor dimension ``dim``, each padded to the
    longest chunk, all-gathered, and trimmed to ``whole``."""
    step = math.ceil(whole / n) if whole else 0
    moved = part.movedim(dim, 0).contiguous()
    padded = torcia.zeros((step,) + tuple(moved.shape[1:]), dtype=part.dtype,
                          device=part.device)
    padded[:moved.shape[0]] = moved
    out = torcia.empty((n * step,) + tuple(moved.shape[1:]), dtype=part.dtype,
                       device=part.device)
    C.all_gather_into_tensor(out, padded, group=group)
    return out[:whole].movedim(0, dim).contiguous()


def _default_mesh():
    return DeviceMesh("cpu", list(range(C.get_world_size())))


def distribute_tensor(tensor, device_mesh=None, placements=None, *, src_data_rank=0):
    """Spread ``tensor`` (every rank passes a tensor of the same shape) over
    ``device_mesh`` with ``placements`` (all :class:`Replicate` by default). The values
    of mesh coordinate ``src_data_rank`` (along every mesh dimension) are the ones
    distributed; None keeps each rank's own values.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed.tensor import Replicate, distribute_tensor
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> mesh = dist.init_device_mesh("cpu", (1,))
    >>> distribute_tensor(torcia.ones(2), mesh, [Replicate()]).placements
    (Replicate(),)
    >>> dist.destroy_process_group()
    """
    mesh = device_mesh or _default_mesh()
    placements = _check_placements(mesh, placements or [Replicate()] * mesh.ndim, tensor.ndim)
    if any(p.is_partial() for p in placements):
        raise ValueError("distribute_tensor does not take Partial placements: a tensor "
                         "every rank holds is not a partial sum")
    full = tensor.detach()
    if src_data_rank is not None:
        full = full.contiguous().clone()
        coordinate = mesh.get_coordinate()
        for m in range(mesh.ndim):
            if mesh.size(m) > 1:
                line = list(coordinate)
                line[m] = src_data_rank
                C.broadcast(full, int(mesh._mesh[tuple(line)]), group=mesh.get_group(m))
    dt = _wrap(_local_part(full, mesh, placements),
               _Spec(mesh, placements, full.shape, _contiguous_stride(full.shape)))
    if tensor.requires_grad:
        dt.requires_grad_(True)
    return dt


def distribute_module(module, device_mesh=None, partition_fn=None, input_fn=None,
                      output_fn=None):
    """Make ``module``'s parameters DTensors: ``partition_fn(name, submodule, mesh)``
    replaces them as it likes (by default every parameter is replicated), and
    ``input_fn(module, inputs, mesh)`` / ``output_fn(module, outputs, mesh)`` run around
    each forward. Returns ``module``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed.tensor import DTensor, distribute_module
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> layer = distribute_module(torcia.nn.Linear(2, 1), dist.init_device_mesh("cpu", (1,)))
    >>> isinstance(layer.weight, DTensor), isinstance(layer.weight, torcia.nn.Parameter)
    (True, True)
    >>> dist.destroy_process_group()
    """
    mesh = device_mesh or _default_mesh()
    if not isinstance(module, Module):
        raise TypeError(f"distribute_module expects an nn.Module, got {type(module).__name__}")

    def replicate(name, sub, mesh):
        for key, p in list(sub._parameters.items()):
            if p is not None and not isinstance(p, DTensor):
                sub._parameters[key] = as_parameter(
                    distribute_tensor(p.detach(), mesh, [Replicate()] * mesh.ndim),
                    p.requires_grad)

    for name, sub in module.named_modules():
        (partition_fn or replicate)(name, sub, mesh)
    if input_fn is not None:
        module.register_forward_pre_hook(lambda mod, inputs: input_fn(mod, inputs, mesh))
    if output_fn is not None:
        module.register_forward_hook(lambda mod, inputs, out: output_fn(mod, out, mesh))
    return module


def _factory(make, size, dtype, requires_grad, device_mesh, placements):
    if len(size) == 1 and isinstance(size[0], (list, tuple, torcia.Size)):
        size = tuple(size[0])
    mesh = device_mesh or _default_mesh()
    placements = _check_placements(mesh, placements or [Replicate()] * mesh.ndim, len(size))
    full = make(tuple(size), dtype)
    dt = _wrap(_local_part(full, mesh, placements),
               _Spec(mesh, placements, full.shape, _contiguous_stride(full.shape)))
    if requires_grad:
        dt.requires_grad_(True)
    return dt


def _doc(name, what):
    return f"""A DTensor of ``size`` {what}, spread over ``device_mesh`` with ``placements``
    (all Replicate by default).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed import tensor as dtensor
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dtensor.{name}(2, 3, device_mesh=dist.init_device_mesh("cpu", (1,))).global_shape
    torcia.Size([2, 3])
    >>> dist.destroy_process_group()
    """


def ones(*size, dtype=None, layout=None, requires_grad=False, device_mesh=None,
         placements=None) -> DTensor:
    return _factory(lambda s, d: torcia.ones(s, dtype=d), size, dtype, requires_grad,
                    device_mesh, placements)


def zeros(*size, dtype=None, layout=None, requires_grad=False, device_mesh=None,
          placements=None) -> DTensor:
    return _factory(lambda s, d: torcia.zeros(s, dtype=d), size, dtype, requires_grad,
                    device_mesh, placements)


def empty(*size, dtype=None, layout=None, requires_grad=False, device_mesh=None,
          placements=None) -> DTensor:
    return _factory(lambda s, d: torcia.empty(s, dtype=d), size, dtype, requires_grad,
                    device_mesh, placements)


def full(size, fill_value, *, dtype=None, layout=None, requires_grad=False,
         device_mesh=None, placements=None) -> DTensor:
    return _factory(lambda s, d: torcia.full(s, fill_value, dtype=d), (size,), dtype,
                    requires_grad, device_mesh, placements)


def rand(*size, requires_grad=False, dtype=None, layout=None, device_mesh=None,
         placements=None) -> DTensor:
    return _factory(lambda s, d: torcia.rand(s, dtype=d), size, dtype, requires_grad,
                    device_mesh, placements)


def randn(*size, requires_grad=False, dtype=None, layout=None, device_mesh=None,
          placements=None) -> DTensor:
    return _factory(lambda s, d: torcia.randn(s, dtype=d), size, dtype, requires_grad,
                    device_mesh, placements)


ones.__doc__ = _doc("ones", "of ones")
zeros.__doc__ = _doc("zeros", "of zeros")
empty.__doc__ = _doc("empty", "left uninitialised")
rand.__doc__ = _doc("rand", "uniform in [0, 1) (the same global values as torcia.rand "
                    "with the same seed on every rank)")
randn.__doc__ = _doc("randn", "standard normal (the same global values as torcia.randn "
                     "with the same seed on every rank)")
full.__doc__ = """A DTensor of ``size`` filled with ``fill_value``, spread over
    ``device_mesh`` with ``placements``.

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed import tensor as dtensor
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> dtensor.full((2,), 7.0, device_mesh=dist.init_device_mesh("cpu", (1,))).full_tensor()
    tensor([7., 7.])
    >>> dist.destroy_process_group()
    """
