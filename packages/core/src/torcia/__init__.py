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

import importlib
import sys
import warnings

# Parts ship as separate distributions into this package: let Python find ``torcia.<part>``
# in every directory that holds a ``torcia`` folder (editable installs put each part's
# ``src`` on sys.path separately).
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

# First of all, the plugin policy: in a locked deployment its guard checks every module of
# torcia imported from here on against the lock, before that module runs.
from torcia import _policy  # noqa: E402

_policy.at_import()

# NumPy warns where IEEE arithmetic gives an inf or a nan (x / 0, log(0), exp(1000), a nan
# cast to an integer); PyTorch's kernels give the same values without a word. Only the
# warnings raised in torcia's own modules (its parts' and plugins' kernels) are silenced:
# NumPy code elsewhere in the program keeps its own.
warnings.filterwarnings(
    "ignore", r"(divide by zero|overflow|underflow|invalid value) encountered",
    RuntimeWarning, r"torcia")

__version__ = "0.1.0"

from torcia import _dtype  # noqa: E402
from torcia._dtype import (  # noqa: E402
    bfloat16,
    can_cast,
    complex64,
    complex128,
    dtype,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    float8_e8m0fnu,
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
    uint16,
    uint32,
    uint64,
)
from torcia._dtype import bool_ as bool  # noqa: E402,A001

float = float32  # noqa: A001
double = float64
half = float16
long = int64
int = int32  # noqa: A001
short = int16
cfloat = complex64
cdouble = complex128

from torcia import (  # noqa: E402
    _autograd_mode,  # gives load_autograd its registration
    _decompositions,  # fill the dispatcher's table of decompositions
    _methods,  # attaches the Tensor methods
    _opdef,
    _oprecords,  # the op records, which add to the tables below them
    linalg,
    plugins,
    special,
)
from torcia import _tensor as _tensor_module  # noqa: E402


# The module above the Tensor that it hands a Tensor subclass's calls to, loaded with its
# first use rather than with import torcia (its import time); wired here, the one module
# above both sides.
def _load_overrides():
    from torcia import overrides  # the __torch_function__ protocol, with a Tensor subclass

    return overrides


_tensor_module.OVERRIDES.load = _load_overrides
_opdef.PUBLIC = sys.modules[__name__]  # the public functions that document the op records
from torcia._creation import (  # noqa: E402
    as_tensor,
    asarray,
    from_dlpack,
    from_numpy,
    tensor,
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
from torcia._oplib import *  # noqa: E402,F401,F403
from torcia._oplib import TOP_LEVEL as _NN_TOP_LEVEL  # noqa: E402
from torcia._oplib import (  # noqa: E402
    abs,  # noqa: A004 - PyTorch's names
    all,
    any,
    complex,
    max,
    min,
    pow,
    round,
    sum,
)
from torcia._ops.creation import inclusive_range as _inclusive_range  # noqa: E402
from torcia._print import set_printoptions  # noqa: E402
from torcia._tensor import Size, Tensor  # noqa: E402
from torcia._tensor import result_type as _result_type  # noqa: E402
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
    thread_safe_generator,
)

globals().update(_NN_TOP_LEVEL)
globals().update({_n: getattr(special, _n) for _n in special.TOP_LEVEL})
globals().update(linalg.TOP_LEVEL)
# PyTorch's deprecated inclusive ``torch.range``; bound here, where no code calls the
# builtin, so that no module of torcia shadows Python's ``range``
range = _inclusive_range  # noqa: A001

plugins.register_builtin("core", _NumpyPlugin())
plugins.register_builtin("meta", _MetaPlugin())

from torcia import _foreach, _sparse, sparse  # noqa: E402
from torcia._legacy import CPU_TYPES as _LEGACY_TYPES  # noqa: E402
from torcia._sparse import (  # noqa: E402,F401
    dsmm,
    hsmm,
    hspmm,
    saddmm,
    smm,
    sparse_compressed_tensor,
    sparse_coo_tensor,
    sparse_csc_tensor,
    sparse_csr_tensor,
    sspaddmm,
)
from torcia._storage import LEGACY_CLASSES as _LEGACY_STORAGES  # noqa: E402
from torcia._storage import TypedStorage, UntypedStorage, is_storage  # noqa: E402,F401

Tensor.to_sparse = _sparse.to_sparse
Tensor.to_sparse_coo = _sparse.to_sparse
Tensor.to_sparse_csr = _sparse.to_sparse_csr
Tensor.to_sparse_csc = _sparse.to_sparse_csc
Tensor.sparse_mask = _sparse.sparse_mask
for _n, _what in _sparse.DENSE_REFUSALS.items():
    setattr(Tensor, _n, _sparse._dense_refusal(_n, _what))
Tensor.to_dense = lambda self, dtype=None, masked_grad=None: (
    self if dtype is None else self.to(dtype))
spmm = sparse.spmm

# torch._foreach_add, ...: one op over lists of tensors, each run by its public function
globals().update(_foreach.namespace(sys.modules[__name__]))

# FloatTensor, LongTensor, ...: PyTorch's legacy typed constructors
globals().update(_LEGACY_TYPES)
# FloatStorage, LongStorage, ...: the legacy typed storages
globals().update(_LEGACY_STORAGES)


def is_tensor(obj) -> bool:
    """Whether ``obj`` is a torcia Tensor.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_tensor(torcia.zeros(1)), torcia.is_tensor([0.0])
    (True, False)
    """
    return isinstance(obj, Tensor)


def numel(input) -> int:
    """The number of elements of ``input``.

    Examples
    --------
    >>> import torcia
    >>> torcia.numel(torcia.zeros(2, 3))
    6
    """
    return input.numel()


def is_floating_point(input) -> bool:
    """Whether ``input``'s dtype is a floating point one.

    Examples
    --------
    >>> import torcia
    >>> torcia.is_floating_point(torcia.tensor([1.0]))
    True
    >>> torcia.is_floating_point(torcia.tensor([1]))
    False
    """
    return input.is_floating_point()


def result_type(tensor1, tensor2) -> dtype:
    """The dtype an arithmetic op of the two arguments (tensors or numbers) gives.

    Examples
    --------
    >>> import torcia
    >>> torcia.result_type(torcia.tensor([1, 2]), 1.0)
    torcia.float32
    """
    return _result_type(tensor1, tensor2)


def set_float32_matmul_precision(precision: str) -> None:
    """``"highest"``, ``"high"`` or ``"medium"``: sets
    ``torcia.backends.cuda.matmul.allow_tf32`` as PyTorch does (torcia's kernels compute
    float32 matmuls in float32 at every setting).

    Examples
    --------
    >>> import torcia
    >>> torcia.set_float32_matmul_precision("high")
    >>> torcia.get_float32_matmul_precision()
    'high'
    >>> torcia.set_float32_matmul_precision("highest")
    """
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision!r}: expected 'highest', 'high' or "
                           "'medium'")
    # torcia.backends loads with its first use, not with import torcia
    from torcia.backends import cuda

    cuda.matmul.allow_tf32 = precision != "highest"
    _matmul_precision[0] = precision


def get_float32_matmul_precision() -> str:
    """The value last given to :func:`set_float32_matmul_precision` (``"highest"``).

    Examples
    --------
    >>> import torcia
    >>> torcia.get_float32_matmul_precision()
    'highest'
    """
    return _matmul_precision[0]


_matmul_precision = ["highest"]


# ---------------------------------------------------------------------------------------
# parts that are separate distributions
# ---------------------------------------------------------------------------------------

_PARTS = {
    "autograd": "torcia-autograd", "nn": "torcia-nn", "optim": "torcia-optim",
    "data": "torcia-data", "distributed": "torcia-distributed", "vision": "torcia-vision",
    "text": "torcia-text", "onnx": "torcia-onnx", "distributions": "torcia-distributions",
    "compiler": "torcia-compiler", "jit": "torcia-jit", "export": "torcia-export",
    "ao": "torcia-ao",
}
_ALIASES = {
    "torcia.utils.data": "torcia.data",
    # checkpointing needs the autograd engine, so torcia-autograd owns it
    "torcia.utils.checkpoint": "torcia.autograd.checkpoint",
    # function transforms need modules (functional_call), so torcia-nn owns them
    "torcia.func": "torcia.nn._func",
    # torch.fx's names that libraries use at import; the compiler part owns tracing
    "torcia.fx": "torcia.compiler.fx",
}


class _PartFinder:
    """Last on ``sys.meta_path``: reached only when no installed distribution provides a
    part. It serves aliases (``torcia.utils.data``) and turns the import of a missing part
    into an error that says how to install it; asked by ``importlib.util.find_spec`` it
    answers None, as for any module that is not there. (A finder and loader by protocol:
    subclassing ``importlib.abc``'s would import ``importlib.resources`` with every
    ``import torcia``.)"""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in _ALIASES:
            import importlib.util

            return importlib.util.spec_from_loader(fullname, self)
        head = fullname.split(".")
        # only the part itself: a missing submodule of an installed part is a plain error
        if len(head) == 2 and head[0] == "torcia" and head[1] in _PARTS and _importing():
            raise ModuleNotFoundError(_missing_part(fullname), name=fullname)
        return None

    def create_module(self, spec):
        return importlib.import_module(_ALIASES[spec.name])

    def exec_module(self, module):
        return None


def _importing() -> bool:
    # importlib.util.find_spec and pkgutil ask the same finders as an import statement
    # does; only an import should raise, a query answers None
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if (code.co_name == "find_spec" and "importlib" in code.co_filename
                and "util" in code.co_filename) or code.co_filename.endswith("pkgutil.py"):
            return False
        frame = frame.f_back
    return True


def _missing_part(fullname) -> str:
    dist = _PARTS[fullname.split(".")[1]]
    return (f"No module named {fullname!r}: it is part of the {dist} distribution, which is "
            f"not installed; {plugins.install_hint(dist)}")


if not __import__("builtins").any(isinstance(f, _PartFinder) for f in sys.meta_path):
    sys.meta_path.append(_PartFinder())


#: Public names whose modules load with their first use rather than with ``import torcia``
#: (their import time): the name is bound here when first asked for, to the same object.
_LAZY = {
    **dict.fromkeys(("load", "save"), "torcia.serialization"),
    **dict.fromkeys((
        "GradScaler", "autocast", "autocast_decrement_nesting", "autocast_increment_nesting",
        "clear_autocast_cache", "get_autocast_cpu_dtype", "get_autocast_dtype",
        "get_autocast_gpu_dtype", "is_autocast_cache_enabled", "is_autocast_cpu_enabled",
        "is_autocast_enabled", "set_autocast_cache_enabled", "set_autocast_cpu_dtype",
        "set_autocast_cpu_enabled", "set_autocast_dtype", "set_autocast_enabled",
        "set_autocast_gpu_dtype",
    ), "torcia.amp"),
}


#: torch's quantized tensors, dtypes and schemes at the top level; torcia-ao provides them
_QUANTIZATION = frozenset({
    "quantize_per_tensor", "quantize_per_channel", "quantize_per_tensor_dynamic",
    "dequantize", "qint8", "quint8", "qint32", "quint4x2", "per_tensor_affine",
    "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric",
    "per_channel_affine_float_qparams", "qscheme"})


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        overrides = sys.modules.get("torcia.overrides")
        if overrides is not None:  # as its other functions, where dispatch is already on
            value = overrides.routed(value)
        globals()[name] = value
        return value
    if name in ("compile", "vmap"):  # torch's names, lent by torcia-compiler and torcia-nn
        return plugins.lent(f"torcia.{name}",
                            "torcia-compiler" if name == "compile" else "torcia-nn")
    if name in _QUANTIZATION:  # lent by torcia-ao; absent, hasattr answers False
        try:
            return plugins.lent(f"torcia.{name}", "torcia-ao")
        except ModuleNotFoundError as exc:
            raise AttributeError(str(exc)) from None
    # ``torcia.nn`` etc. without an explicit import, as with PyTorch
    if name in _PARTS or name in ("linalg", "fft", "testing", "cuda", "utils", "backends", "amp",
                                  "profiler", "hub", "accelerator", "compat", "cpu",
                                  "func", "fx", "overrides", "version", "masked", "nested",
                                  "signal", "multiprocessing", "futures", "library"):
        try:
            return importlib.import_module(f"torcia.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"torcia.{name}":
                raise  # a part that is there but misses something of its own
            # an AttributeError, so that hasattr(torcia, "optim") answers False
            raise AttributeError(_missing_part(f"torcia.{name}")) from None
    raise AttributeError(f"module 'torcia' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
