"""torcia: eager tensors, autograd, modules and optimizers in the spirit of PyTorch, built
from separately installed parts that meet through pluggy hooks.

``import torcia`` gives tensors on the NumPy reference backend. The other parts
(``torcia.autograd``, ``torcia.nn``, ``torcia.optim``, ``torcia.data``, ...) are separate
distributions installed into this same package; importing one that is not installed
raises an error naming the distribution.

A plugin is a module with ``@torcia.hookimpl`` functions, named in the ``torcia``
entry-point group of its distribution's ``pyproject.toml``::

    [project.entry-points.torcia]
    myplugin = "myplugin"

    # myplugin.py
    import torcia

    @torcia.hookimpl
    def torcia_register_kernels(registry):
        registry.add("relu", "cpu", lambda a: a.clip(0), priority=5)

See :mod:`torcia.hookspecs` for the hooks and :mod:`torcia.plugins` for allow/block lists.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

# Parts ship as separate distributions into this package: let Python find ``torcia.<part>``
# in every directory that holds a ``torcia`` folder (editable installs put each part's
# ``src`` on sys.path separately).
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

__version__ = "0.1.0"

from torcia import _dtype  # noqa: E402
from torcia._dtype import (  # noqa: E402
    bfloat16,
    can_cast,
    dtype,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    promote_types,
    set_default_dtype,
    uint8,
)
from torcia._dtype import bool_ as bool  # noqa: E402,A001

float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16

from torcia import (  # noqa: E402
    _methods,  # attaches the Tensor methods
    _ops,
    plugins,
)
from torcia._creation import (  # noqa: E402
    arange,
    as_tensor,
    asarray,
    bernoulli,
    empty,
    empty_like,
    eye,
    from_dlpack,
    from_numpy,
    full,
    full_like,
    linspace,
    logspace,
    multinomial,
    normal,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)
from torcia._grad_mode import (  # noqa: E402
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from torcia._meta import MetaPlugin as _MetaPlugin  # noqa: E402
from torcia._numpy_backend import NumpyPlugin as _NumpyPlugin  # noqa: E402
from torcia._ops import *  # noqa: E402,F401,F403
from torcia._ops import (  # noqa: E402
    abs,  # noqa: A004 - PyTorch's names
    all,
    any,
    max,
    min,
    pow,
    round,
    sum,
)
from torcia._ops_extra import *  # noqa: E402,F401,F403
from torcia._ops_nn import *  # noqa: E402,F401,F403
from torcia._ops_nn import TOP_LEVEL as _NN_TOP_LEVEL  # noqa: E402
from torcia._print import set_printoptions  # noqa: E402
from torcia._tensor import Size, Tensor  # noqa: E402
from torcia.amp import autocast  # noqa: E402
from torcia.backend import device  # noqa: E402
from torcia.plugins import hookimpl  # noqa: E402
from torcia.random import (  # noqa: E402
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from torcia.serialization import load, save  # noqa: E402

globals().update(_NN_TOP_LEVEL)

plugins.register_builtin("core", _NumpyPlugin())
plugins.register_builtin("meta", _MetaPlugin())

FloatTensor = DoubleTensor = LongTensor = IntTensor = BoolTensor = Tensor


def is_tensor(obj) -> bool:
    """Whether ``obj`` is a torcia Tensor."""
    return isinstance(obj, Tensor)


def numel(input) -> int:
    return input.numel()


def is_floating_point(input) -> bool:
    return input.is_floating_point()


def result_type(tensor1, tensor2) -> dtype:
    """The dtype an arithmetic op of the two arguments (tensors or numbers) gives.

    Examples
    --------
    >>> import torcia
    >>> torcia.result_type(torcia.tensor([1, 2]), 1.0)
    torcia.float32
    """
    dims, zeros_, scalars = [], [], []
    for x in (tensor1, tensor2):
        if isinstance(x, Tensor):
            (dims if x.ndim else zeros_).append(x.dtype)
        else:
            scalars.append(_dtype.scalar_dtype(x))
    return _dtype.result_type_of(dims, zeros_, scalars)


def get_num_threads() -> int:
    """Threads the CPU kernels use (set by ``set_num_threads``; backends read it)."""
    return _threads[0]


def set_num_threads(n: int) -> None:
    """Set the threads CPU kernels use; plugins with native kernels follow it."""
    if n < 1:
        raise ValueError(f"set_num_threads expects a positive integer, got {n}")
    _threads[0] = n
    for callback in _thread_callbacks:
        callback(n)


_threads = [__import__("os").cpu_count() or 1]
_thread_callbacks: list = []


# ---------------------------------------------------------------------------------------
# parts that are separate distributions
# ---------------------------------------------------------------------------------------

_PARTS = {
    "autograd": "torcia-autograd", "nn": "torcia-nn", "optim": "torcia-optim",
    "data": "torcia-data", "distributed": "torcia-distributed", "vision": "torcia-vision",
    "text": "torcia-text", "onnx": "torcia-onnx", "compiler": "torcia-compiler",
}
_ALIASES = {"torcia.utils.data": "torcia.data"}


class _PartFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on ``sys.meta_path``: reached only when no installed distribution provides a
    part. It serves aliases (``torcia.utils.data``) and turns a missing part into an error
    that names the distribution to install."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in _ALIASES:
            return importlib.util.spec_from_loader(fullname, self)
        head = fullname.split(".")
        # only the part itself: a missing submodule of an installed part is a plain error
        if len(head) == 2 and head[0] == "torcia" and head[1] in _PARTS:
            dist = _PARTS[head[1]]
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: it is part of the {dist} distribution, which "
                f"is not installed (pip install {dist})",
                name=fullname,
            )
        return None

    def create_module(self, spec):
        return importlib.import_module(_ALIASES[spec.name])

    def exec_module(self, module):
        return None


if not __import__("builtins").any(isinstance(f, _PartFinder) for f in sys.meta_path):
    sys.meta_path.append(_PartFinder())


def __getattr__(name):
    if name == "compile":  # torch.compile's place; torcia-compiler provides it
        return importlib.import_module("torcia.compiler").compile
    # ``torcia.nn`` etc. without an explicit import, as with PyTorch
    if name in _PARTS or name in ("linalg", "testing", "cuda", "utils", "backends", "amp",
                                  "profiler"):
        return importlib.import_module(f"torcia.{name}")
    raise AttributeError(f"module 'torcia' has no attribute {name!r}")
