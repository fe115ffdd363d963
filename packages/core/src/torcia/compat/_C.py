"""The few ``torch._C`` functions that libraries call as probes, answered for torcia.

``torch._C`` is PyTorch's C++ extension; libraries reach into it for a handful of queries and
switches (API usage logging, JIT fuser settings, the tracing state, the current
accelerator). The compat runner serves ``torch._C`` from this module: each answer is what
PyTorch gives on a machine without CUDA, and switches of a JIT torcia does not have are
accepted and report their previous value. Anything else of ``torch._C`` is missing, and
reading it names the PyTorch API.

Examples
--------
>>> from torcia.compat import _C
>>> _C._get_tracing_state() is None, _C._get_accelerator()
(True, device(type='cpu'))
"""

from __future__ import annotations

import torcia


def _log_api_usage_once(event: str) -> None:
    """PyTorch logs API usage to its telemetry here; torcia logs nothing."""


def _get_tracing_state():
    """The JIT tracer's state: None, torcia.jit.trace does not run through here."""
    return None


def _get_accelerator(check: bool = False):
    """The accelerator's device type, ``cpu`` where none has a device here (PyTorch's
    answer on a build without an accelerator)."""
    acc = torcia.accelerator.current_accelerator(check_available=True)
    return acc if acc is not None else torcia.device("cpu")


def _get_privateuse1_backend_name() -> str:
    return "privateuseone"


# PyTorch's TorchScript fuser switches: torcia has no TorchScript fuser, so each setting is
# kept (and the previous one returned, as PyTorch does) with no other effect
_JIT_FLAGS = {"profiling_executor": True, "profiling_mode": True, "texpr_fuser": True,
              "nvfuser": False, "can_fuse_on_cpu": True, "can_fuse_on_gpu": True,
              "nvfuser_guard_mode": False}


def _jit_flag(name):
    def set_flag(value: bool) -> bool:
        old = _JIT_FLAGS[name]
        _JIT_FLAGS[name] = bool(value)
        return old
    set_flag.__name__ = name
    return set_flag


_jit_set_profiling_executor = _jit_flag("profiling_executor")
_jit_set_profiling_mode = _jit_flag("profiling_mode")
_jit_set_texpr_fuser_enabled = _jit_flag("texpr_fuser")
_jit_set_nvfuser_enabled = _jit_flag("nvfuser")
_jit_set_nvfuser_guard_mode = _jit_flag("nvfuser_guard_mode")
_jit_override_can_fuse_on_cpu = _jit_flag("can_fuse_on_cpu")
_jit_override_can_fuse_on_gpu = _jit_flag("can_fuse_on_gpu")


def _jit_can_fuse_on_cpu() -> bool:
    return _JIT_FLAGS["can_fuse_on_cpu"]


def _jit_can_fuse_on_gpu() -> bool:
    return _JIT_FLAGS["can_fuse_on_gpu"]


def _jit_texpr_fuser_enabled() -> bool:
    return _JIT_FLAGS["texpr_fuser"]
