"""``torch.ops`` as the compat runner presents it: ``torch.ops.<namespace>.<op>`` is the
custom op ``namespace::op`` defined with ``torch.library.custom_op``
(``torcia.library.OpNamespace``); ``torch.ops.quantized``, the operators PyTorch's
quantized modules call, is torcia-ao's ``torcia.ao.ops.quantized``. torcia's own ops are
its functions (``torch.add``): ``torch.ops.aten`` is not there.

Examples
--------
>>> import torcia
>>> from torcia.compat import ops
>>> @torcia.library.custom_op("demo_compat::twice", mutates_args=())
... def twice(x: torcia.Tensor) -> torcia.Tensor:
...     return x * 2
>>> ops.demo_compat.twice(torcia.ones(1))
tensor([2.])
"""

from __future__ import annotations

from torcia import _custom_ops, plugins
from torcia._custom_ops import OpNamespace

#: torch's operator namespaces a part serves (lent through torcia_register_names)
LENT = {"quantized": "torcia-ao"}


def __getattr__(name: str) -> OpNamespace:
    # only namespaces that hold an op: tools probe modules for names (pytest_plugins)
    if any(qualname.startswith(f"{name}::") for qualname in _custom_ops._OPS):
        return OpNamespace(name)
    if name in LENT:  # absent, hasattr answers False
        try:
            return plugins.lent(f"torcia.compat.ops.{name}", LENT[name])
        except ModuleNotFoundError as exc:
            raise AttributeError(str(exc)) from None
    raise AttributeError(f"module 'torch.ops' has no attribute {name!r}: no custom op is "
                         f"defined in the namespace {name!r}")
