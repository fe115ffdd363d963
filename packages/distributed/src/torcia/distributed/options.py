"""Backend names and configurations, collective options, the debug level and the other
small vocabulary of ``torch.distributed``."""

from __future__ import annotations

import datetime
import enum
import os
import typing
import warnings

from torcia.distributed.group import ReduceOp

__all__ = [
    "AllToAllOptions", "AllreduceCoalescedOptions", "AllreduceOptions", "Backend",
    "BackendConfig", "BarrierOptions", "BroadcastOptions", "DebugLevel", "GatherOptions",
    "GroupName", "ReduceOptions", "ReduceScatterOptions", "ScatterOptions",
    "get_debug_level", "reduce_op", "set_debug_level", "set_debug_level_from_env",
    "supports_complex",
]

#: A process group's name, as ``torch.distributed.GroupName`` (a ``str``).
GroupName = typing.NewType("GroupName", str)


# ---------------------------------------------------------------------------------------
# backends
# ---------------------------------------------------------------------------------------


class Backend(str):
    """Backend names, as ``torch.distributed.Backend``: ``Backend("MPI")`` is ``"mpi"``.

    torcia's engines are "mpi" (torcia-mpi, CPU tensors; it also answers to "gloo",
    PyTorch's CPU backend) and "nccl" (torcia-cuda, CUDA tensors); the other names PyTorch
    knows are here so that code comparing against them runs.
    ``default_device_backend_map`` names the backend each device type gets by default.
    :meth:`register_backend` adds a backend made by a function, as PyTorch's.

    Examples
    --------
    >>> from torcia.distributed import Backend
    >>> Backend("MPI"), Backend.NCCL, Backend("custom")
    ('mpi', 'nccl', 'custom')
    """

    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"
    MPI = "mpi"
    XCCL = "xccl"
    FAKE = "fake"

    backend_list = [UNDEFINED, GLOO, NCCL, XCCL, UCC, MPI, FAKE]
    default_device_backend_map: dict[str, str] = {"cpu": GLOO, "cuda": NCCL}
    backend_capability: dict[str, list[str]] = {GLOO: ["cpu"], MPI: ["cpu"], NCCL: ["cuda"]}

    def __new__(cls, name: str):
        if not isinstance(name, str):
            raise ValueError("Backend constructor parameter must be string-ish")
        value = getattr(Backend, name.upper(), Backend.UNDEFINED)
        return name.lower() if value == Backend.UNDEFINED else value

    @classmethod
    def register_backend(cls, name, func, extended_api=False, devices=None) -> None:
        """Make ``init_process_group(name)`` build its group with
        ``func(store, rank, world_size, timeout)`` (PyTorch's creator signature; with
        ``extended_api``, ``func(store_prefix, rank, world_size, timeout)`` alike).

        ``func`` returns a :class:`~torcia.distributed.ProcessGroup`. ``devices`` names
        the device types it serves (default: "cpu" and "cuda").

        Examples
        --------
        >>> from torcia.distributed import Backend, ProcessGroup
        >>> Backend.register_backend("solo", lambda store, rank, size, timeout:
        ...                          ProcessGroup(rank, size, timeout), devices=["cpu"])
        >>> Backend.SOLO, Backend.backend_capability["solo"]
        ('solo', ['cpu'])
        """
        from torcia.distributed.collectives import backends

        if not hasattr(Backend, name.upper()):
            setattr(Backend, name.upper(), name.lower())
        if name.lower() not in Backend.backend_list:
            Backend.backend_list.append(name.lower())
        devices = [devices] if isinstance(devices, str) else list(devices or ["cpu", "cuda"])
        Backend.backend_capability[name.lower()] = devices
        for device in devices:
            Backend.default_device_backend_map.setdefault(device, name.lower())

        def factory(rank, world_size, timeout, init_method=None, store=None):
            return func(store, rank, world_size, timeout)

        # registered as a plugin would be: a name a plugin holds stays with it (warning)
        backends.build()
        previous, backends.current_plugin = backends.current_plugin, "register_backend"
        try:
            backends.add(name.lower(), factory)
        finally:
            backends.current_plugin = previous


class BackendConfig:
    """Which backend serves which device type, as ``torch.distributed.BackendConfig``:
    built from a backend name (its devices) or a ``"cpu:mpi,cuda:nccl"`` string.

    Examples
    --------
    >>> from torcia.distributed import BackendConfig
    >>> str(BackendConfig("cpu:mpi,cuda:nccl")), str(BackendConfig("nccl"))
    ('cpu:mpi,cuda:nccl', 'cuda:nccl')
    """

    def __init__(self, backend: str):
        backend = str(backend)
        if backend.lower() == Backend.UNDEFINED:
            self.device_backend_map = dict(Backend.default_device_backend_map)
        elif ":" not in backend:
            name = Backend(backend)
            devices = Backend.backend_capability.get(name, ["cpu", "cuda"])
            self.device_backend_map = {d: name for d in devices}
        else:
            self.device_backend_map = {}
            for pair in backend.lower().split(","):
                device, sep, name = pair.partition(":")
                if not sep or not device.strip() or not name.strip():
                    raise ValueError(f"Invalid backend string {backend!r}: expected "
                                     "'<device>:<backend>,<device>:<backend>'")
                self.device_backend_map[device.strip()] = Backend(name.strip())

    def get_device_backend_map(self) -> dict[str, str]:
        """Device type -> backend name."""
        return dict(self.device_backend_map)

    def __repr__(self):
        return ",".join(f"{d}:{b}" for d, b in self.device_backend_map.items())


def supports_complex(reduceOp) -> bool:
    """Whether ``reduceOp`` is defined for complex tensors (MAX, MIN and PRODUCT are not).

    Examples
    --------
    >>> from torcia.distributed import ReduceOp, supports_complex
    >>> supports_complex(ReduceOp.SUM), supports_complex(ReduceOp.MAX)
    (True, False)
    """
    return reduceOp not in (ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT)


class _DeprecatedReduceOp:
    """``reduce_op``: PyTorch's old name of :class:`ReduceOp`; using it warns."""

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        warnings.warn("`torch.distributed.reduce_op` is deprecated, please use "
                      "`torch.distributed.ReduceOp` instead", FutureWarning, stacklevel=2)
        return getattr(ReduceOp, name)


reduce_op = _DeprecatedReduceOp()


# ---------------------------------------------------------------------------------------
# options of the collectives, as PyTorch's ProcessGroup methods take them
# ---------------------------------------------------------------------------------------

#: "not set": the group's own timeout applies (PyTorch's sentinel, -1 ms)
_UNSET = datetime.timedelta(milliseconds=-1)


class _Options:
    _fields: dict = {}

    def __init__(self, **kwargs):
        for name, default in self._fields.items():
            setattr(self, name, kwargs.pop(name, default() if callable(default) else default))
        if kwargs:
            raise TypeError(f"{type(self).__name__} has no option "
                            f"{', '.join(map(repr, kwargs))}")

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields)
        return f"{type(self).__name__}({fields})"


def _options(name, doc, **fields):
    fields = {"timeout": _UNSET, "asyncOp": True, **fields}
    return type(name, (_Options,), {"_fields": fields, "__doc__": doc,
                                    "__module__": __name__})


_DOC = """Options of a process group's ``{op}``, as ``torch.distributed.{name}``: {fields}
(``timeout`` of -1 ms means the group's).

Examples
--------
>>> from torcia.distributed import {name}
>>> {name}().asyncOp
True
"""


def _make(name, op, **fields):
    listed = ", ".join(f"``{k}``" for k in ("timeout", "asyncOp", *fields))
    return _options(name, _DOC.format(op=op, name=name, fields=listed), **fields)


AllreduceOptions = _make("AllreduceOptions", "allreduce", reduceOp=ReduceOp.SUM)
AllreduceCoalescedOptions = type(
    "AllreduceCoalescedOptions", (AllreduceOptions,),
    {"__doc__": _DOC.format(op="allreduce_coalesced", name="AllreduceCoalescedOptions",
                            fields="``timeout``, ``asyncOp``, ``reduceOp``"),
     "__module__": __name__})
BroadcastOptions = _make("BroadcastOptions", "broadcast", rootRank=0, rootTensor=0)
ReduceOptions = _make("ReduceOptions", "reduce", reduceOp=ReduceOp.SUM, rootRank=0,
                      rootTensor=0)
GatherOptions = _make("GatherOptions", "gather", rootRank=0)
ScatterOptions = _make("ScatterOptions", "scatter", rootRank=0)
ReduceScatterOptions = _make("ReduceScatterOptions", "reduce_scatter", reduceOp=ReduceOp.SUM)
BarrierOptions = _make("BarrierOptions", "barrier", device_ids=list, device=None)
AllToAllOptions = _make("AllToAllOptions", "alltoall")


# ---------------------------------------------------------------------------------------
# the debug level
# ---------------------------------------------------------------------------------------


class DebugLevel(enum.Enum):
    """How much torcia.distributed checks and reports, as ``torch.distributed.DebugLevel``.

    torcia checks in every collective that the ranks agree on shapes, dtypes and
    reductions (what PyTorch's DETAIL level adds); at INFO and DETAIL it also writes each
    collective of the default group's rank to standard error as it starts.

    Examples
    --------
    >>> from torcia.distributed import DebugLevel
    >>> DebugLevel["DETAIL"].value
    2
    """

    OFF = 0
    INFO = 1
    DETAIL = 2


class _Debug:
    level = None


def set_debug_level(level: DebugLevel) -> None:
    """Set the debug level.

    Examples
    --------
    >>> from torcia.distributed import DebugLevel, get_debug_level, set_debug_level
    >>> set_debug_level(DebugLevel.INFO); get_debug_level()
    <DebugLevel.INFO: 1>
    >>> set_debug_level(DebugLevel.OFF)
    """
    if not isinstance(level, DebugLevel):
        raise TypeError(f"set_debug_level expects a DebugLevel, got {type(level).__name__}")
    _Debug.level = level


def set_debug_level_from_env() -> None:
    """Set the debug level from ``TORCH_DISTRIBUTED_DEBUG`` (``OFF``, ``INFO`` or
    ``DETAIL``; unset means OFF), as PyTorch reads it.

    Examples
    --------
    >>> import os
    >>> from torcia.distributed import get_debug_level, set_debug_level_from_env
    >>> os.environ.pop("TORCH_DISTRIBUTED_DEBUG", None) and None
    >>> set_debug_level_from_env(); get_debug_level()
    <DebugLevel.OFF: 0>
    """
    value = os.environ.get("TORCH_DISTRIBUTED_DEBUG", "OFF").strip().upper() or "OFF"
    if value not in DebugLevel.__members__:
        raise ValueError(f"The value of TORCH_DISTRIBUTED_DEBUG must be OFF, INFO or "
                         f"DETAIL, but is {value!r}.")
    _Debug.level = DebugLevel[value]


def get_debug_level() -> DebugLevel:
    """The debug level (read from ``TORCH_DISTRIBUTED_DEBUG`` the first time).

    Examples
    --------
    >>> from torcia.distributed import get_debug_level
    >>> isinstance(get_debug_level().value, int)
    True
    """
    if _Debug.level is None:
        set_debug_level_from_env()
    return _Debug.level
