"""torcia-cuda's plugin: registers the "cuda" backend and its kernels, and the "nccl"
process-group backend of torcia.distributed.

Without CuPy, or without a GPU, the backend is still registered but reports itself
unavailable with the reason, so ``torcia.cuda.is_available()`` is False and a "cuda"
tensor raises an error that says why (rather than "no such device"); likewise "nccl"
(``torcia.distributed.is_nccl_available()`` is False, ``init_process_group("nccl")`` says
why).
"""

from __future__ import annotations

import numpy as np

import torcia
from torcia.library import Backend, add_seed_callback, hookimpl
from torcia_cuda.fused import fused_kernels, optimizer_steps
from torcia_cuda.kernels import cupy_kernels


def make_backend(xp, runtime, to_host, from_host, name="cuda") -> Backend:
    """A device backend over array module ``xp`` and a runtime (also used by the tests,
    which run this plugin's logic on NumPy as a stand-in for CuPy). The ops without a
    kernel of the plugin run the reference kernels on ``xp`` (``fallback="reference"``)."""
    return Backend(
        name, xp, to_host=to_host, from_host=from_host,
        is_available=lambda: True, device_count=runtime.device_count,
        device_context=runtime.device_context, runtime=runtime, fallback="reference",
    )


def _probe():
    """(cupy module, None) when a GPU can be used, else (None, why not)."""
    try:
        import cupy
    except ImportError:
        return None, ("CuPy is not installed: pip install 'torcia-cuda[cuda12]' (or [cuda13]) "
                      "to match your NVIDIA driver")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDA reports a missing driver in many ways
        return None, f"CuPy found no usable CUDA driver or GPU ({type(exc).__name__}: {exc})"
    if count == 0:
        return None, "no CUDA GPU was found"
    return cupy, None


_STATE = {}


def _cupy_backend(cupy) -> Backend:
    from torcia_cuda.runtime import CupyRuntime

    runtime = CupyRuntime(cupy)

    def from_host(arr, index=None):
        with runtime.device_context(index):
            return cupy.asarray(arr)

    if "matmul_hook" in _STATE:  # the registries were rebuilt: the new runtime follows
        _STATE["matmul_hook"].remove()
        _STATE["seed_hook"].remove()
    _STATE["seed_hook"] = add_seed_callback(runtime.manual_seed_all)
    _STATE["matmul_hook"] = torcia.backends.cuda.register_matmul_hook(
        runtime.apply_matmul_flags)
    return make_backend(cupy, runtime, runtime.to_host, from_host)


@hookimpl
def torcia_register_backends(registry):
    cupy, why = _probe()
    _STATE["cupy"] = cupy
    if cupy is None:
        registry.add(Backend("cuda", np, is_available=lambda: False,
                             device_count=lambda: 0, unavailable_reason=why))
        return
    registry.add(_cupy_backend(cupy))


@hookimpl
def torcia_register_kernels(registry):
    cupy = _STATE.get("cupy")
    if cupy is None:
        return
    for op, fn in cupy_kernels(cupy).items():
        registry.add(op, "cuda", fn)
    # the NumPy stand-in of the tests has no ElementwiseKernel: the reference kernels only
    if hasattr(cupy, "ElementwiseKernel"):
        for op, fn in {**fused_kernels(cupy), **optimizer_steps(cupy)}.items():
            registry.add(op, "cuda", fn, priority=10)


@hookimpl
def torcia_register_process_group_backends(registry):
    # only torcia-distributed calls this hook, so it is installed whenever this runs;
    # torcia-cuda itself works without it
    from torcia_cuda.nccl import backend_factory

    registry.add("nccl", backend_factory(_probe))
