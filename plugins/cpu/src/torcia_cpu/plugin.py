"""torcia-cpu's plugin: native kernels for "cpu", registered at priority 10 through the
same hook as any plugin, so that blocking it (``TORCIA_DISABLE_PLUGINS=cpu``) leaves
core's NumPy kernels in place."""

from __future__ import annotations

import torcia
from torcia.plugins import hookimpl
from torcia_cpu import _blas, _memory, _native
from torcia_cpu.kernels import OPTIMIZER_STEPS, OVERRIDES, NativeKernels

PRIORITY = 10

# only an explicit torcia.set_num_threads sets OpenMP's thread count: the runtime may be
# shared with other libraries in the process (PyTorch's), whose defaults stay untouched
torcia._thread_callbacks.append(_native.set_num_threads)
# products start on one BLAS thread; large ones ask for more (see _blas)
_blas.set_threads(1)
# freed buffers stay mapped for the next step's (see _memory)
_memory.keep_freed_memory()


@hookimpl
def torcia_register_kernels(registry):
    kernels = NativeKernels()
    for op in OVERRIDES:
        registry.add(op, "cpu", getattr(kernels, op), priority=PRIORITY)
    for op, fn in OPTIMIZER_STEPS.items():
        registry.add(op, "cpu", fn, priority=PRIORITY)
