"""The database's vocabulary: op records, sample inputs and how they become tensors.

A record is plain data (names, dtype names, numbers): where sample inputs come from is a
family name looked up in :mod:`opinfo.samples`, how an op is called is a dotted public
name resolved in each library, so that records can later move into core's op records.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

# ----- dtypes -----------------------------------------------------------------------------

BOOL = ("bool",)
INTS = ("uint8", "int8", "int16", "int32", "int64")
HALF = ("float16", "bfloat16")
FLOATS = ("float32", "float64")
COMPLEX = ("complex64", "complex128")
ALL = BOOL + INTS + HALF + FLOATS + COMPLEX
REAL = BOOL + INTS + HALF + FLOATS
FLOATING = HALF + FLOATS
FLOAT_COMPLEX = FLOATING + COMPLEX
NUMBERS = INTS + HALF + FLOATS + COMPLEX

#: the properties a record can be checked for (see :mod:`opinfo.checks`)
PROPERTIES = ("torch", "grad", "gradgrad", "forward_ad", "vmap", "meta", "native",
              "no_write")


@dataclasses.dataclass(frozen=True)
class OpInfo:
    """One public op and what is known of it.

    ``name`` is the dotted public name (``"add"``, ``"nn.functional.relu"``,
    ``"linalg.solve"``, ``"Tensor.t"``); ``aliases`` are the other public names that are
    the same op (``Tensor.add``, ``Tensor.add_``, ``arctan``), which the coverage test
    counts as covered. ``samples`` names a generator family of :mod:`opinfo.samples` and
    ``args`` its options. ``dtypes`` are the dtypes sampled: PyTorch's on the CPU where
    torch has the op. ``props`` are the properties checked; ``torch_name`` is the op's
    name in torch when it differs (``None``: no torch counterpart); ``tol`` multiplies
    the dtype's default tolerance; ``note`` says why a record departs from its family.
    """

    name: str
    samples: str
    dtypes: tuple = FLOATS
    args: tuple = ()
    aliases: tuple = ()
    props: tuple = PROPERTIES
    torch_name: str | None = ""
    tol: float = 1.0
    note: str = ""

    def arg(self, key, default=None):
        return dict(self.args).get(key, default)

    @property
    def path(self) -> str:
        """The callable in torcia: the name, or ``args["path"]`` for a second record of
        one op (other samples of it)."""
        return self.arg("path", self.name)

    @property
    def torch_path(self) -> str | None:
        return self.path if self.torch_name == "" else self.torch_name


# ----- sample inputs ----------------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class T:
    """A tensor in a sample: its values (a NumPy array), dtype name and layout."""

    values: np.ndarray
    dtype: str
    noncontig: bool = False
    grad: bool = True  # may require grad when the sample is differentiated

    @property
    def shape(self):
        return self.values.shape


@dataclasses.dataclass
class Dtype:
    """A dtype argument (``dtype=torch.float64``), by name."""

    name: str


@dataclasses.dataclass(eq=False)
class Derived:
    """An argument each library computes itself: ``path(*args)``, entry ``item`` of it."""

    path: str
    args: tuple
    item: int | None = None
    kwargs: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(eq=False)
class Sample:
    """The arguments of one call; ``kind`` says what it probes ("value", "edge", "empty",
    "zero-dim", "noncontig", "broadcast", "refuse": input PyTorch refuses)."""

    args: tuple
    kwargs: dict = dataclasses.field(default_factory=dict)
    kind: str = "value"

    def tensors(self):
        return [t for t in _walk((self.args, self.kwargs)) if isinstance(t, T)]


def _walk(x):
    if isinstance(x, (list, tuple)):
        for v in x:
            yield from _walk(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _walk(v)
    else:
        yield x


# ----- materialising a sample in a library ------------------------------------------------


def to_lib(lib, value: Any, *, device=None, requires_grad=False, float64=False):
    """``value`` (a sample argument) with its tensors made by ``lib`` (torcia or torch).

    ``requires_grad`` makes floating tensors that allow it leaves requiring grad;
    ``float64`` gives them float64 (complex128) for finite differences.
    """
    if isinstance(value, T):
        return _tensor(lib, value, device, requires_grad, float64)
    if isinstance(value, Dtype):
        return getattr(lib, value.name)
    if isinstance(value, Derived):
        out = resolve(lib, value.path)(*to_lib(lib, value.args, device=device),
                                       **value.kwargs)
        return out if value.item is None else out[value.item]
    if isinstance(value, list):
        return [to_lib(lib, v, device=device, requires_grad=requires_grad, float64=float64)
                for v in value]
    if isinstance(value, tuple):
        return tuple(to_lib(lib, v, device=device, requires_grad=requires_grad,
                            float64=float64) for v in value)
    if isinstance(value, dict):
        return {k: to_lib(lib, v, device=device, requires_grad=requires_grad, float64=float64)
                for k, v in value.items()}
    return value


def _tensor(lib, spec: T, device, requires_grad, float64):
    with np.errstate(over="ignore", invalid="ignore"):  # edges beyond float16's range: inf
        return _make_tensor(lib, spec, device, requires_grad, float64)


def _make_tensor(lib, spec: T, device, requires_grad, float64):
    name = spec.dtype
    floating = name in FLOAT_COMPLEX
    if float64 and floating:
        name = "complex128" if name in COMPLEX else "float64"
    dtype = getattr(lib, name)
    if name == "bfloat16":
        # NumPy has no bfloat16 (torch) or holds it through ml_dtypes (torcia): go via f32
        t = lib.tensor(spec.values.astype(np.float32)).to(dtype)
    else:
        t = lib.tensor(np.asarray(spec.values).astype(np.dtype(name)), dtype=dtype)
    if device == "meta":
        return lib.empty(tuple(spec.shape), dtype=dtype, device="meta")
    if spec.noncontig and t.ndim:
        # the same values with a stride of 2 in the last dim
        big = lib.zeros(tuple(t.shape[:-1]) + (2 * t.shape[-1],), dtype=dtype)
        t = big[..., ::2]
        t.copy_(lib.tensor(spec.values.astype(np.float32)).to(dtype) if name == "bfloat16"
                else lib.tensor(np.asarray(spec.values).astype(np.dtype(name)), dtype=dtype))
    if requires_grad and floating and spec.grad:
        t = t.detach().requires_grad_(True)
    return t


def resolve(lib, path: str):
    """The callable ``path`` names in ``lib``: ``"add"``, ``"linalg.solve"`` (attributes),
    ``"Tensor.t"`` (a method, called with the tensor first) or ``"op:name"`` (an operator
    of :mod:`operator`)."""
    if path.startswith("op:"):
        import operator

        return getattr(operator, path[3:])
    if path.startswith("Tensor."):
        method = path[len("Tensor."):]
        return lambda self, *a, **k: getattr(self, method)(*a, **k)
    obj = lib
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj
