"""``torcia.nn.parallel``: :class:`DataParallel` and :func:`data_parallel` on one device,
and ``DistributedDataParallel`` from torcia-distributed when that part is installed.

torcia runs a module on one device per process; for several devices, use
``DistributedDataParallel`` with one process per device. ``DataParallel`` keeps single-device
programs written for it working unchanged: it moves the inputs to its device and calls the
module, and its ``state_dict`` keys carry the ``module.`` prefix as PyTorch's do.

Examples
--------
>>> import torcia
>>> from torcia import nn
>>> model = nn.DataParallel(nn.Linear(3, 2))
>>> model(torcia.ones(4, 3)).shape
torcia.Size([4, 2])
>>> sorted(model.state_dict())
['module.bias', 'module.weight']
"""

from __future__ import annotations

from torcia import backend as _backend
from torcia import library
from torcia.nn.modules.module import Module

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]


def _devices(device_ids):
    if device_ids is None:
        from torcia import cuda

        return [_backend.device("cuda", 0)] if cuda.is_available() else []
    return [_backend.device("cuda", d) if isinstance(d, int) else _backend.canonical(d)
            for d in device_ids]


def _to(obj, device):
    if device is None:
        return obj
    if hasattr(obj, "to") and hasattr(obj, "device"):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    return obj


def _one_device(device_ids, what):
    devices = _devices(device_ids)
    if len(devices) > 1:
        raise NotImplementedError(
            f"{what} over {len(devices)} devices: torcia runs a module on one device per "
            "process; use torcia.nn.parallel.DistributedDataParallel with one process per "
            "device instead"
        )
    return devices[0] if devices else None


class DataParallel(Module):
    """Run ``module`` on one device, with PyTorch's ``DataParallel`` interface.

    Parameters
    ----------
    module : Module
        The module to run; reachable as ``self.module``.
    device_ids : list of int or device, optional
        At most one device (default: CUDA device 0 when CUDA is available, else the
        module's own device). More than one raises NotImplementedError.
    output_device : int or device, optional
        Where outputs go (default: the device that ran the module).
    dim : int
        The batch dimension (kept for the interface; one device splits nothing).

    Examples
    --------
    >>> import torcia
    >>> net = torcia.nn.DataParallel(torcia.nn.Linear(2, 1))
    >>> net.module.in_features
    2
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device = _one_device(device_ids, "DataParallel")
        self.device_ids = [] if self.device is None else [self.device.index or 0]
        self.output_device = None if output_device is None else (
            _backend.device("cuda", output_device) if isinstance(output_device, int)
            else _backend.canonical(output_device))
        self.dim = dim
        if self.device is not None:
            module.to(self.device)

    def forward(self, *inputs, **kwargs):
        out = self.module(*_to(inputs, self.device), **_to(kwargs, self.device))
        return _to(out, self.output_device)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """Call ``module(*inputs, **module_kwargs)`` on one device, as ``DataParallel`` does.

    Examples
    --------
    >>> import torcia
    >>> from torcia.nn.parallel import data_parallel
    >>> data_parallel(torcia.nn.Identity(), torcia.ones(2)).tolist()
    [1.0, 1.0]
    """
    device = _one_device(device_ids, "data_parallel")
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    out = module(*_to(inputs, device), **_to(module_kwargs or {}, device))
    if output_device is not None:
        out = _to(out, _backend.device("cuda", output_device) if isinstance(output_device, int)
                  else _backend.canonical(output_device))
    return out


def __getattr__(name):
    # DDP lives in torcia-distributed, which depends on torcia-nn and lends it here
    if name == "DistributedDataParallel":
        return library.lent("torcia.nn.parallel.DistributedDataParallel", "torcia-distributed")
    raise AttributeError(f"module 'torcia.nn.parallel' has no attribute {name!r}")
