"""torcia-cpu's plugin: native kernels for "cpu", registered at priority 10 through the
same hook as any plugin, so that blocking it (``TORCIA_DISABLE_PLUGINS=cpu``) leaves
core's NumPy kernels in place.

The plugin's process-wide settings (:func:`apply_policy`) are made when one of its kernels
first runs, not when the plugin is discovered: ``python -m torcia plugins`` changes
nothing. Setting ``TORCIA_CPU_KEEP_DEFAULTS=1`` leaves BLAS threads, malloc and NumPy's
allocator alone.
"""

from __future__ import annotations

import os

import torcia
from torcia.library import add_thread_callback, hookimpl
from torcia_cpu import _blas, _memory, _native, _provider, kernels
from torcia_cpu.kernels import ELEMENTWISE, HELPERS, OPTIMIZER_STEPS, OVERRIDES, NativeKernels
from torcia_cpu.quant import QUANT_OPS, QuantKernels

PRIORITY = 10
_applied = []


def policy_applied() -> bool:
    """Whether :func:`apply_policy` has run (a kernel of the plugin was used)."""
    return bool(_applied)


def apply_policy() -> None:
    """Choose the BLAS library of the extension's products (``_provider``) and the
    convolution algorithm (``TORCIA_CPU_WINOGRAD``), then follow torcia's thread count,
    start products on one BLAS thread, keep freed memory mapped and start large arrays on a
    page (each explained in ``_blas`` and ``_memory``), unless ``TORCIA_CPU_KEEP_DEFAULTS``
    is set to a non-empty value other than ``0``."""
    _provider.choose()
    # 3x3 convolutions of stride 1 by Winograd's algorithm (csrc/winograd.h) unless turned
    # off: its results differ from im2col's in the last bits
    _native.set_winograd(os.environ.get("TORCIA_CPU_WINOGRAD", "1") != "0")
    # only an explicit torcia.set_num_threads sets OpenMP's thread count: the runtime may
    # be shared with other libraries in the process (PyTorch's), whose defaults stay
    # untouched
    add_thread_callback(_native.set_num_threads)
    if torcia.get_num_threads() != (os.cpu_count() or 1):
        _native.set_num_threads(torcia.get_num_threads())  # set before the first kernel ran
    add_thread_callback(kernels.follow_threads)
    kernels.follow_threads(torcia.get_num_threads())
    _applied.append(True)
    if os.environ.get("TORCIA_CPU_KEEP_DEFAULTS", "0") not in ("", "0"):
        return
    _blas.set_threads(1)
    _memory.keep_freed_memory()
    _memory.align_arrays()


@hookimpl
def torcia_register_kernels(registry):
    kernels = NativeKernels()
    for op in OVERRIDES + HELPERS:
        registry.add(op, "cpu", getattr(kernels, op), priority=PRIORITY, setup=apply_policy)
    for op, fn in {**ELEMENTWISE, **OPTIMIZER_STEPS}.items():
        registry.add(op, "cpu", fn, priority=PRIORITY, setup=apply_policy)
    quant = QuantKernels()
    for op in QUANT_OPS:
        registry.add(op, "cpu", getattr(quant, op), priority=PRIORITY, setup=apply_policy)
