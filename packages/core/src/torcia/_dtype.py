"""dtypes and PyTorch's type-promotion rules."""

from __future__ import annotations

import math

import numpy as np


class dtype:
    """A tensor element type, e.g. ``torcia.float32``.

    Examples
    --------
    >>> import torcia
    >>> torcia.float32.is_floating_point, torcia.float32.itemsize
    (True, 4)
    """

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_signed", "category")

    def __init__(self, name, np_dtype, category):
        self.name = name
        self.np = np_dtype
        self.itemsize = np_dtype.itemsize if np_dtype is not None else 2
        self.category = category  # 0 bool, 1 integer, 2 floating, 3 complex
        self.is_floating_point = category == 2
        self.is_signed = category >= 2 or (category == 1 and np_dtype.kind == "i")

    @property
    def is_complex(self) -> bool:
        return self.category == 3

    def to_real(self) -> dtype:
        """The real dtype of a complex one's parts (itself for a real dtype)."""
        return _REAL_OF.get(self, self)

    def to_complex(self) -> dtype:
        """The complex dtype whose parts are this float dtype (itself when complex)."""
        if self.category == 3:
            return self
        return complex128 if self is float64 else complex64

    def __repr__(self):
        return f"torcia.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))

    def to_numpy(self) -> np.dtype:
        """The NumPy dtype of arrays holding this dtype (raises for bfloat16 without ml_dtypes)."""
        if self.np is None:
            raise RuntimeError(
                f"torcia.{self.name} needs the ml_dtypes package: pip install "
                "'torcia-core[bfloat16]'"
            )
        return self.np


def _ml_dtype(name: str):
    """A loader of ml_dtypes' NumPy dtype ``name`` (None without ml_dtypes)."""

    def load():
        # ml_dtypes is optional so that core depends on numpy and pluggy alone.
        try:
            import ml_dtypes
        except ImportError:
            return None
        return np.dtype(getattr(ml_dtypes, name))

    return load


_bfloat16_np = _ml_dtype("bfloat16")


class _LazyDtype(dtype):
    """A dtype whose NumPy dtype comes from an optional library, imported on first use:
    ml_dtypes takes most of a second to import, which every ``import torcia`` (each
    DataLoader worker, each ``torcia-run`` rank) would otherwise pay."""

    __slots__ = ("_load", "_np")

    def __init__(self, name, load, itemsize):
        # a floating dtype (the only kind an optional library provides here)
        self.name = name
        self.itemsize = itemsize
        self.category = 2
        self.is_floating_point = self.is_signed = True
        self._load = load

    @property
    def np(self):
        try:
            return self._np
        except AttributeError:
            self._np = self._load()
            if self._np is not None:
                FROM_NUMPY[self._np] = self
            return self._np


class _FromNumpy(dict):
    """NumPy dtype -> torcia dtype; a lazy dtype's entry is added when first asked for."""

    def __missing__(self, key):
        for d in ALL:
            if isinstance(d, _LazyDtype) and d.name == getattr(key, "name", None) and (
                    d.np == key):
                return d
        raise KeyError(key)


bool_ = dtype("bool", np.dtype(np.bool_), 0)
uint8 = dtype("uint8", np.dtype(np.uint8), 1)
int8 = dtype("int8", np.dtype(np.int8), 1)
int16 = dtype("int16", np.dtype(np.int16), 1)
int32 = dtype("int32", np.dtype(np.int32), 1)
int64 = dtype("int64", np.dtype(np.int64), 1)
# PyTorch's wider unsigned integers: they promote with themselves and with floating dtypes
# only, as in PyTorch
uint16 = dtype("uint16", np.dtype(np.uint16), 1)
uint32 = dtype("uint32", np.dtype(np.uint32), 1)
uint64 = dtype("uint64", np.dtype(np.uint64), 1)
WIDE_UNSIGNED = (uint16, uint32, uint64)
float16 = dtype("float16", np.dtype(np.float16), 2)
bfloat16 = _LazyDtype("bfloat16", _bfloat16_np, 2)
# PyTorch's 8-bit floats: storage and conversion only, as in PyTorch (no arithmetic
# promotes with them)
float8_e4m3fn = _LazyDtype("float8_e4m3fn", _ml_dtype("float8_e4m3fn"), 1)
float8_e4m3fnuz = _LazyDtype("float8_e4m3fnuz", _ml_dtype("float8_e4m3fnuz"), 1)
float8_e5m2 = _LazyDtype("float8_e5m2", _ml_dtype("float8_e5m2"), 1)
float8_e5m2fnuz = _LazyDtype("float8_e5m2fnuz", _ml_dtype("float8_e5m2fnuz"), 1)
float8_e8m0fnu = _LazyDtype("float8_e8m0fnu", _ml_dtype("float8_e8m0fnu"), 1)
FLOAT8 = (float8_e4m3fn, float8_e4m3fnuz, float8_e5m2, float8_e5m2fnuz, float8_e8m0fnu)
float32 = dtype("float32", np.dtype(np.float32), 2)
float64 = dtype("float64", np.dtype(np.float64), 2)
complex64 = dtype("complex64", np.dtype(np.complex64), 3)
complex128 = dtype("complex128", np.dtype(np.complex128), 3)
_REAL_OF = {complex64: float32, complex128: float64}

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64,
       complex64, complex128, *FLOAT8, *WIDE_UNSIGNED)
_NAMES = {d.name: d for d in ALL}
_NAMES.update(
    {"float": float32, "double": float64, "half": float16, "long": int64, "int": int32,
     "short": int16, "cfloat": complex64, "cdouble": complex128}
)
FROM_NUMPY = _FromNumpy(
    (d.np, d) for d in ALL if not isinstance(d, _LazyDtype))


def np_floating(np_dtype) -> bool:
    """Whether a NumPy dtype holds floats: kind "f", or ml_dtypes' bfloat16 (a NumPy dtype
    of kind "V", void, a float all the same)."""
    return np_dtype.kind == "f" or np_dtype.name == "bfloat16"


def convert(arr, np_dtype, copy=True):
    """``arr.astype(np_dtype)`` as PyTorch converts: to float16 or bfloat16 from float64
    or a 32/64-bit integer through float32, since c10::Half and c10::BFloat16 are built
    from a float. A value near a midpoint then rounds twice, where NumPy rounds once.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([1 + 2 ** -11 + 2 ** -30])  # just above float16's midpoint
    >>> float(x.astype(np.float16)[0]), float(convert(x, np.float16)[0])
    (1.0009765625, 1.0)
    """
    np_dtype = np.dtype(np_dtype)
    source = arr.dtype
    wider = source.itemsize == 8 if source.kind == "f" else (
        source.kind in "iu" and source.itemsize >= 4)
    if wider and np_dtype.itemsize == 2 and np_floating(np_dtype):
        arr = arr.astype(np.float32)
    return arr.astype(np_dtype, copy=copy)


def _by_name(name: str) -> dtype:
    return _NAMES[name]


def from_numpy_dtype(np_dtype) -> dtype:
    try:
        return FROM_NUMPY[np.dtype(np_dtype)]
    except KeyError:
        raise TypeError(
            f"can't convert np.ndarray of type {np.dtype(np_dtype)}. The only supported types "
            "are: float64, float32, float16, complex64, complex128, bfloat16, int64, int32, "
            "int16, int8, uint64, uint32, uint16, uint8, and bool."
        ) from None


def native_array(arr):
    """``arr`` seen through NumPy's own dtype object (unchanged where torcia has no dtype
    for it).

    An array that went through pickle (a DataLoader worker, a pickled dataset) carries a
    dtype object equal to ``np.dtype(np.float32)`` but not the same one, and NumPy hands it
    on to what is computed from it; torcia's fast paths and native kernels compare dtypes
    by identity where they can, so arrays that enter a tensor are given the canonical one
    (a view: no copy)."""
    d = FROM_NUMPY.get(arr.dtype)
    return arr if d is None or arr.dtype is d.np else arr.view(d.np)


_default = [float32]


def get_default_dtype() -> dtype:
    """Return the default floating point dtype (``torcia.float32`` unless changed).

    Examples
    --------
    >>> import torcia
    >>> torcia.get_default_dtype()
    torcia.float32
    """
    return _default[0]


def set_default_dtype(d: dtype) -> None:
    """Set the default floating point dtype: what Python floats and ``torcia.tensor`` use.

    Examples
    --------
    >>> import torcia
    >>> torcia.set_default_dtype(torcia.float64); torcia.tensor([1.0]).dtype
    torcia.float64
    >>> torcia.set_default_dtype(torcia.float32)
    """
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default[0] = d
    _SCALAR_CACHE.clear()


# ---------------------------------------------------------------------------------------
# Promotion
# ---------------------------------------------------------------------------------------


def _promote_pair(a: dtype, b: dtype) -> dtype:
    if a is b:
        return a
    if a.category == 3 or b.category == 3:
        # complex with anything: complex, with parts as wide as the widest float involved
        parts = [d.to_real() for d in (a, b) if d.category >= 2]
        wide = parts[0] if len(parts) == 1 else _promote_pair(*parts)
        return complex128 if wide is float64 else complex64
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == 0:
        return a
    if a.category == 2:
        if {a, b} == {float16, bfloat16}:
            return float32
        return a if a.itemsize >= b.itemsize else b
    return FROM_NUMPY[np.promote_types(a.np, b.np)]


class _PromotionTable(dict):
    """dtype pair -> promoted dtype; a float8 dtype promotes with itself only, a wide
    unsigned one with itself and floating dtypes."""

    def __missing__(self, key):
        a, b = key
        if isinstance(a, dtype) and isinstance(b, dtype) and (
                a in WIDE_UNSIGNED or b in WIDE_UNSIGNED) and not (a in FLOAT8 or b in FLOAT8):
            raise RuntimeError(
                "Promotion for uint16, uint32, uint64 types is not supported, attempted to "
                f"promote {torch_type_name(a)} and {torch_type_name(b)}")
        if isinstance(a, dtype) and isinstance(b, dtype):
            raise RuntimeError(
                "Promotion for Float8 Types is not supported, attempted to promote "
                f"{torch_type_name(a)} and {torch_type_name(b)}")
        raise KeyError(key)


_PROMOTE = _PromotionTable(
    ((a, b), a if a is b else _promote_pair(a, b)) for a in ALL for b in ALL
    if a is b or not (a in FLOAT8 or b in FLOAT8 or (
        (a in WIDE_UNSIGNED or b in WIDE_UNSIGNED) and 2 not in (a.category, b.category))))

_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half",
               "bfloat16": "BFloat16", "int64": "Long", "int32": "Int", "int16": "Short",
               "int8": "Char", "uint8": "Byte", "bool": "Bool", "complex64": "ComplexFloat",
               "complex128": "ComplexDouble", "uint16": "UInt16", "uint32": "UInt32",
               "uint64": "UInt64"}


def torch_type_name(d: dtype) -> str:
    """PyTorch's scalar type name of ``d`` ("Float", "Float8_e4m3fn")."""
    return _TYPE_NAMES.get(d.name) or d.name[0].upper() + d.name[1:]


def dtype_arg(arg) -> dtype:
    """A ``dtype=`` argument as a torcia dtype: a torcia dtype as it is, Python's ``float``,
    ``int`` and ``bool`` as PyTorch reads them, else a NumPy dtype's match."""
    if isinstance(arg, dtype):
        return arg
    if arg in (float,):
        return float64
    if arg in (int,):
        return int64
    if arg in (bool,):
        return bool_
    try:
        return from_numpy_dtype(arg)
    except TypeError:
        raise TypeError(f"expected a torcia.dtype, got {arg!r}") from None


# the C++ type names PyTorch's messages show ("expected dtype float", a gradient's dtype)
_CPP_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half",
              "bfloat16": "c10::BFloat16", "int64": "long int", "int32": "int",
              "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
              "bool": "bool", "complex64": "c10::complex<float>",
              "complex128": "c10::complex<double>"}


def cpp_type_name(d: dtype) -> str:
    """The C++ name of a dtype in PyTorch's messages ("float", "double", "c10::Half"...)."""
    return _CPP_NAMES[d.name]


def promote_types(type1: dtype, type2: dtype) -> dtype:
    """The smallest dtype both arguments can be cast to, as ``torch.promote_types``.

    Examples
    --------
    >>> import torcia
    >>> torcia.promote_types(torcia.uint8, torcia.int8)
    torcia.int16
    """
    try:
        return _PROMOTE[type1, type2]
    except (KeyError, TypeError):  # a float8 pair raises PyTorch's RuntimeError instead
        name, pos, bad = ("type1", 1, type1) if not isinstance(type1, dtype) else (
            "type2", 2, type2)
        raise TypeError(f"promote_types(): argument '{name}' (position {pos}) must be "
                        f"torcia.dtype, not {type(bad).__name__}") from None


def _combine(higher, lower):
    if higher is None:
        return lower
    if lower is None or higher.category == 3:
        return higher
    if lower.category == 3:
        # a complex operand of lower priority: complex, at the float precision of the other
        # (float64 tensor * 1j is complex128; int tensor * 1j the default complex)
        return higher.to_complex() if higher.category == 2 else lower
    if higher.category == 2:
        return higher
    if higher.category == 0 or lower.category == 2:
        return _PROMOTE[higher, lower]
    return higher


def scalar_dtype(value) -> dtype:
    """The dtype a Python scalar takes when it stands alone."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    if isinstance(value, float):
        return _default[0]
    if isinstance(value, complex):
        return default_complex()
    raise TypeError(f"expected a Python bool, int, float or complex, got "
                    f"{type(value).__name__}")


def default_complex() -> dtype:
    """The complex dtype Python complex numbers take: complex128 when the default float
    dtype is float64, else complex64."""
    return complex128 if _default[0] is float64 else complex64


def result_type_of(dims, zeros, scalars) -> dtype:
    """Promotion over three priority levels: dimensioned tensors, 0-dim tensors, scalars."""
    dim = zero = wrapped = None
    for d in dims:
        dim = d if dim is None else _PROMOTE[dim, d]
    for d in zeros:
        zero = d if zero is None else _PROMOTE[zero, d]
    for d in scalars:
        wrapped = d if wrapped is None else _PROMOTE[wrapped, d]
    return _combine(dim, _combine(zero, wrapped))


_SCALAR_CACHE: dict = {}


def tensor_scalar_dtype(t: dtype, scalar_type: type) -> dtype:
    """Result dtype of a tensor of dtype ``t`` combined with a Python scalar (cached)."""
    key = (t, scalar_type)
    r = _SCALAR_CACHE.get(key)
    if r is None:
        s = {bool: bool_, int: int64, float: _default[0],
             complex: default_complex()}.get(scalar_type)
        if s is None:
            raise TypeError(f"unsupported operand type {scalar_type.__name__}")
        r = _SCALAR_CACHE[key] = _combine(t, s)
    return r


#: The ops that PyTorch's kernels run on a float16 or bfloat16 tensor and a Python number in
#: float32, the number taken as a float32 (its "opmath" type), where NumPy would round the
#: number to the tensor's dtype first: ``x * 0.1`` in float16 had a third of its elements
#: a unit in the last place from PyTorch's, ``x / 0.37`` nearly half.
WIDE_SCALAR_OPS = frozenset(("mul", "div", "floor_divide"))


def scalar_operand(t: dtype, b, op: str) -> tuple[dtype, object]:
    """``(dtype, operand)`` for a tensor of dtype ``t`` and a Python number ``b`` in
    ``op``: the result's dtype, and ``b`` as the kernel takes it (a bfloat16 scalar beside
    bfloat16, which NumPy would take to float32 with a Python float), or None where ``op``
    computes in float32 (:data:`WIDE_SCALAR_OPS`)."""
    r = tensor_scalar_dtype(t, b.__class__)
    if r is not float16 and r is not bfloat16:
        return r, b
    if op in WIDE_SCALAR_OPS:
        return r, None
    return r, (b if r is float16 else r.np.type(b))


def can_cast(from_: dtype, to: dtype) -> bool:
    """Whether PyTorch's in-place and ``out=`` rules allow casting ``from_`` to ``to``.

    Examples
    --------
    >>> import torcia
    >>> torcia.can_cast(torcia.float32, torcia.int32)
    False
    """
    return from_.category <= to.category


# ---------------------------------------------------------------------------------------
# Scalars converted to a dtype
# ---------------------------------------------------------------------------------------

#: The C++ type PyTorch's overflow message names for each dtype.
_SCALAR_TYPE = {"uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int",
                "int64": "int64_t", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
                "float32": "float", "float64": "double", "complex64": "c10::complex<float>",
                "complex128": "c10::complex<double>", "bool": "bool"}
_FLOAT_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
              "float32": 3.4028234663852886e38}


def checked_scalar(value, d: dtype):
    """``value`` (a Python number) as PyTorch converts a fill value to ``d``: integers wrap
    into an unsigned dtype from as far below zero as its maximum (-1 is 255 in uint8),
    floats truncate toward zero; anything else out of ``d``'s range, a NaN or infinity
    for an integer dtype, or an imaginary part for a real one raises PyTorch's
    ``value cannot be converted to type ... without overflow``.

    Examples
    --------
    >>> import torcia
    >>> from torcia._dtype import checked_scalar
    >>> checked_scalar(-1, torcia.uint8), checked_scalar(2.7, torcia.int8)
    (255, 2)
    """
    if d.category == 0 or d.category == 3:
        return value
    if isinstance(value, complex):
        if value.imag:
            _overflow(d)
        value = value.real
    if d.category == 2:
        top = _FLOAT_MAX.get(d.name)
        if top is not None and math.isfinite(value) and abs(value) > top:
            _overflow(d)
        return value
    info = np.iinfo(d.np)
    if isinstance(value, float):
        if not math.isfinite(value) or not info.min <= value <= info.max:
            _overflow(d)
        return int(value)
    value = int(value)
    if value > info.max or value < (info.min if info.min else -int(info.max)):
        _overflow(d)
    return value % (int(info.max) + 1) if value < 0 and not info.min else value


def _overflow(d: dtype):
    raise RuntimeError(f"value cannot be converted to type {_SCALAR_TYPE[d.name]} without "
                       "overflow")
