"""``fully_shard`` (FSDP2), as ``torch.distributed.fsdp.fully_shard``: shard a module in
place over a 1-D device mesh; its parameters become DTensor shards (``Shard(0)``) and its
class a subclass of :class:`FSDPModule` (``FSDPLinear``...) with the FSDP controls. Apply
it to the blocks of a model first, then to the model, so that each block is a unit."""

from __future__ import annotations

from torcia.distributed import collectives as C
from torcia.distributed.device_mesh import init_device_mesh
from torcia.distributed.fsdp import _engine
from torcia.distributed.fsdp.api import MixedPrecisionPolicy, OffloadPolicy
from torcia.distributed.tensor import Shard
from torcia.nn import Module

__all__ = ["FSDPModule", "UnshardHandle", "fully_shard", "register_fsdp_forward_method"]


class UnshardHandle:
    """What ``FSDPModule.unshard(async_op=True)`` returns: the gather is done when
    :meth:`wait` returns.

    Examples
    --------
    >>> from torcia.distributed.fsdp import UnshardHandle
    >>> UnshardHandle().wait()
    """

    def wait(self) -> None:
        """Wait for the gather (torcia's completes before ``unshard`` returns)."""


class FSDPModule:
    """The methods ``fully_shard`` adds to a module (its class becomes ``FSDP<Class>``, a
    subclass of this and of the original class).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed.fsdp import FSDPModule, fully_shard
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> layer = fully_shard(torcia.nn.Linear(2, 2))
    >>> isinstance(layer, FSDPModule), type(layer).__name__
    (True, 'FSDPLinear')
    >>> dist.destroy_process_group()
    """

    def _units(self, recurse=True):
        mods = self.modules() if recurse else [self]
        return [m._fsdp_unit for m in mods if isinstance(m, FSDPModule)]

    def unshard(self, async_op: bool = False):
        """Gather the full parameters now (they stay until :meth:`reshard` or the next
        backward)."""
        self._fsdp_unit.unshard()
        return UnshardHandle() if async_op else None

    def reshard(self) -> None:
        """Free the full parameters and register the shards again."""
        unit = self._fsdp_unit
        unit.reshard(free=True)
        unit._drop_full()

    def set_requires_gradient_sync(self, requires_gradient_sync: bool, *,
                                   recurse: bool = True) -> None:
        """False: backward keeps full gradients locally (gradient accumulation without
        communication); the next backward with True reduces their sum."""
        for unit in self._units(recurse):
            unit.requires_grad_sync = bool(requires_gradient_sync)

    def set_reshard_after_forward(self, reshard_after_forward: bool, recurse: bool = True):
        """Whether the full parameters are freed after forward (and gathered again for
        backward)."""
        for unit in self._units(recurse):
            unit.reshard_after_forward = bool(reshard_after_forward)

    def set_gradient_divide_factor(self, factor: float) -> None:
        """Divide the reduced gradients by ``factor`` instead of the number of ranks."""
        for unit in self._units(True):
            unit.divide_factor = float(factor)


_CLASSES: dict = {}


def _fsdp_class(cls):
    if issubclass(cls, FSDPModule):
        return cls
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {})
    return _CLASSES[cls]


_NO_MIXED_PRECISION = MixedPrecisionPolicy()
_NO_OFFLOAD = OffloadPolicy()


def fully_shard(module, *, mesh=None, reshard_after_forward=None, shard_placement_fn=None,
                mp_policy=_NO_MIXED_PRECISION, offload_policy=_NO_OFFLOAD,
                ignored_params=None):
    """Shard ``module`` (or each module of a list) over ``mesh`` (a 1-D mesh of every
    rank by default); returns it, its class now ``FSDP<Class>``.

    Its parameters, except those of modules sharded before and ``ignored_params``, become
    one unit: ``Shard(0)`` DTensor parameters, gathered for forward and backward,
    gradients reduce-scattered into the shards. ``reshard_after_forward`` (True unless
    False) frees the gathered parameters between forward and backward.

    Examples
    --------
    Under ``torcia-run --nproc-per-node 2``::

        for block in model.blocks:
            fully_shard(block)
        fully_shard(model)
        opt = torcia.optim.AdamW(model.parameters())

    Run in one process:

    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed.fsdp import fully_shard
    >>> from torcia.distributed.tensor import DTensor
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> model = fully_shard(torcia.nn.Sequential(torcia.nn.Linear(3, 4), torcia.nn.ReLU()))
    >>> isinstance(model[0].weight, DTensor), model[0].weight.placements
    (True, (Shard(dim=0),))
    >>> model(torcia.ones(2, 3)).sum().backward()
    >>> model[0].weight.grad.shape
    torcia.Size([4, 3])
    >>> dist.destroy_process_group()
    """
    if isinstance(module, (list, tuple)):
        return [fully_shard(m, mesh=mesh, reshard_after_forward=reshard_after_forward,
                            shard_placement_fn=shard_placement_fn, mp_policy=mp_policy,
                            offload_policy=offload_policy, ignored_params=ignored_params)
                for m in module]
    if not isinstance(module, Module):
        raise TypeError(f"fully_shard expects an nn.Module, got {type(module).__name__}")
    if isinstance(module, FSDPModule):
        raise ValueError(f"{type(module).__name__} is sharded already")
    mesh = mesh or init_device_mesh("cpu", (C.get_world_size(),))
    if mesh.ndim != 1:
        raise NotImplementedError("fully_shard takes a 1-D mesh (HSDP over 2-D meshes is "
                                  "not supported)")
    ignored = {id(p) for p in (ignored_params or ())}
    nested = {m for m in module.modules() if isinstance(m, FSDPModule)}
    params = [(o, n, p) for o, n, p in _engine.managed_parameters(module, nested)
              if id(p) not in ignored]
    if shard_placement_fn is not None:
        for _, name, p in params:
            placement = shard_placement_fn(p)
            if placement is not None and placement != Shard(0):
                raise NotImplementedError(f"shard_placement_fn gave {placement!r} for "
                                          f"{name}: torcia shards parameters on dim 0")
    unit = _engine.Unit(module, params, mesh, shard=True,
                        reshard_after_forward=reshard_after_forward is not False,
                        param_dtype=mp_policy.param_dtype, reduce_dtype=mp_policy.reduce_dtype,
                        output_dtype=mp_policy.output_dtype,
                        cast_forward_inputs=mp_policy.cast_forward_inputs)
    module._fsdp_unit = unit
    module.__class__ = _fsdp_class(type(module))
    return module


def register_fsdp_forward_method(module, method_name: str) -> None:
    """Make ``module.<method_name>(...)`` gather and reshard as ``forward`` does (for a
    module called through another method, such as ``generate``).

    Examples
    --------
    >>> import torcia
    >>> import torcia.distributed as dist
    >>> from torcia.distributed.fsdp import fully_shard, register_fsdp_forward_method
    >>> dist.init_process_group("mpi", rank=0, world_size=1)  # a group of this process alone
    >>> layer = fully_shard(torcia.nn.Linear(2, 1))
    >>> layer.double_forward = lambda x: 2 * torcia.nn.functional.linear(x, layer.weight,
    ...                                                                     layer.bias)
    >>> register_fsdp_forward_method(layer, "double_forward")
    >>> layer.double_forward(torcia.ones(1, 2)).shape
    torcia.Size([1, 1])
    >>> dist.destroy_process_group()
    """
    if not isinstance(module, FSDPModule):
        raise ValueError(f"{type(module).__name__} is not sharded by fully_shard")
    unit = module._fsdp_unit
    method = getattr(module, method_name)

    def wrapped(*args, **kwargs):
        changed = unit._pre_forward(module, args, kwargs)
        if changed is not None:
            args, kwargs = changed
        return unit._post_forward(module, args, method(*args, **kwargs))

    object.__setattr__(module, method_name, wrapped)
