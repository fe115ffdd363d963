"""torcia.optim: optimizers and learning-rate schedulers.

The optimizers follow PyTorch's update rules, defaults and state-dict layout. Each group's
update runs as one multi-tensor kernel of the parameters' device (see
:mod:`torcia.optim.kernels`) where the device has one, and parameter by parameter with
Tensor ops otherwise (``foreach=False``).

Optimizers and schedulers are registered by name through this package's hooks
(:mod:`torcia.optim.hookspecs`); an optimizer that a plugin distribution registers is
reachable as an attribute, e.g. ``torcia.optim.Lion`` once torcia-lion is installed.

Examples
--------
>>> import torcia
>>> w = torcia.tensor([1.0, -2.0], requires_grad=True)
>>> opt = torcia.optim.create("adamw", [w], lr=0.1)
>>> sched = torcia.optim.lr_scheduler.create("cosine_annealing", opt, T_max=10)
>>> for _ in range(3):
...     opt.zero_grad()
...     (w ** 2).sum().backward()
...     opt.step()
...     sched.step()
>>> [round(v, 3) for v in w.tolist()]
[0.711, -1.707]
"""

from __future__ import annotations

from torcia import plugins
from torcia.optim import hookspecs
from torcia.plugins import hookimpl

plugins.add_hookspecs(hookspecs)

from torcia.optim import lr_scheduler  # noqa: E402
from torcia.optim.adadelta import Adadelta  # noqa: E402
from torcia.optim.adafactor import Adafactor  # noqa: E402
from torcia.optim.adagrad import Adagrad  # noqa: E402
from torcia.optim.adam import Adam, AdamW  # noqa: E402
from torcia.optim.adamax import Adamax  # noqa: E402
from torcia.optim.asgd import ASGD  # noqa: E402
from torcia.optim.elementwise import ElementwiseOptimizer  # noqa: E402
from torcia.optim.lbfgs import LBFGS  # noqa: E402
from torcia.optim.muon import Muon  # noqa: E402
from torcia.optim.nadam import NAdam  # noqa: E402
from torcia.optim.optimizer import Optimizer  # noqa: E402
from torcia.optim.radam import RAdam  # noqa: E402
from torcia.optim.rmsprop import RMSprop  # noqa: E402
from torcia.optim.rprop import Rprop  # noqa: E402
from torcia.optim.sgd import SGD  # noqa: E402
from torcia.optim.sparse_adam import SparseAdam  # noqa: E402
from torcia.optim.stateless import swap_in_optimizer_params_and_state  # noqa: E402

__all__ = [
    "ASGD", "SGD", "Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax",
    "ElementwiseOptimizer", "LBFGS", "Muon", "NAdam", "Optimizer", "RAdam", "RMSprop", "Rprop",
    "SparseAdam",
    "create", "hookimpl", "lr_scheduler", "optimizers", "swap_in_optimizer_params_and_state",
]

#: the names torcia-optim's own plugin registers
BUILTIN = {
    "sgd": SGD, "adam": Adam, "adamw": AdamW, "adamax": Adamax, "nadam": NAdam,
    "radam": RAdam, "rmsprop": RMSprop, "adagrad": Adagrad, "adadelta": Adadelta,
    "lbfgs": LBFGS, "asgd": ASGD, "rprop": Rprop, "adafactor": Adafactor, "muon": Muon,
    "sparse_adam": SparseAdam,
}

optimizers = plugins.Registry("optimizer", "torcia_register_optimizers")


def create(name: str, params, *args, **kwargs) -> Optimizer:
    """Build the optimizer registered as ``name`` (lowercase, or the class name).

    Examples
    --------
    >>> import torcia
    >>> w = torcia.tensor([1.0], requires_grad=True)
    >>> torcia.optim.create("SGD", [w], lr=0.1).defaults["lr"]
    0.1
    """
    return _lookup(optimizers, name)(params, *args, **kwargs)


def _lookup(registry, name: str):
    entries = registry.build()
    if name in entries:
        return entries[name]
    for cls in entries.values():
        if getattr(cls, "__name__", None) == name:
            return cls
    if name.lower() in entries:
        return entries[name.lower()]
    return registry.get(name)  # raises, naming a blocked plugin that would provide it


def __getattr__(name: str):
    # an optimizer class from a plugin distribution: torcia.optim.Lion
    if not name.startswith("_"):
        for cls in optimizers.build().values():
            if getattr(cls, "__name__", None) == name:
                return cls
        msg = plugins.missing_message("optimizer", name, optimizers.names())
        if "blocked" in msg:
            # Python's own message first (what code matching on it expects), then which
            # blocked plugin may provide the name
            raise AttributeError(f"module 'torcia.optim' has no attribute {name!r}: {msg}")
    raise AttributeError(f"module 'torcia.optim' has no attribute {name!r}")
