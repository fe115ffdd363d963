"""torcia-optim's built-in plugin: its optimizers, schedulers and multi-tensor kernels,
registered through the same hooks a third-party plugin uses."""

from __future__ import annotations

from torcia.optim import BUILTIN, hookimpl
from torcia.optim import lr_scheduler as _lr_scheduler
from torcia.optim.kernels import KERNELS


@hookimpl
def torcia_register_optimizers(registry):
    for name, cls in BUILTIN.items():
        registry.add(name, cls)


@hookimpl
def torcia_register_lr_schedulers(registry):
    for name, cls in _lr_scheduler.BUILTIN.items():
        registry.add(name, cls)


@hookimpl
def torcia_register_kernels(registry):
    for op, fn in KERNELS.items():
        registry.add(op, "cpu", fn, priority=0)
