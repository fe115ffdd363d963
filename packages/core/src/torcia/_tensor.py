"""The Tensor and the dispatch path.

The hot path of an operation is: promote dtypes (cached), look the kernel up in the
device's plain dict, run it on the arrays, wrap the result, and, only when a tensor that
requires grad took part and grad mode is on, hand the op to the autograd engine. No plugin
hook is called here.
"""

from __future__ import annotations

import copy
import os
import sys
import threading
import types

import numpy as np

from torcia import _dtype as D
from torcia import _opdef, _ops, _print, plugins
from torcia._grad_mode import STATE as _GRAD
from torcia._mode_order import ModeOrder
from torcia._ops import _common as _ops_common
from torcia._size import Size
from torcia.backend import CPU, DEFAULT_DEVICE, canonical, device, takes_param

_ndarray = np.ndarray
_NUMBERS = (int, float, bool, complex)
_generic = np.generic
_FROM_NP = D.FROM_NUMPY


class _AutogradSlot:
    """The registered autograd mode (see :class:`AutogradMode`), read by every op that
    records: ``engine`` is the mode, ``record`` its bound ``record`` (one attribute lookup
    on the hot path)."""

    def __init__(self):
        self.engine = None
        self.record = None
        self.modes = []  # registered, the last one active
        # torcia._autograd_mode's register_autograd_mode: that module, built on this one,
        # sets it as it loads (torcia imports it), and load_autograd registers with it
        self.register = None


AUTOGRAD = _AutogradSlot()


class _AutocastState(threading.local):
    """Set by :mod:`torcia.amp` inside ``autocast``: whether it casts, and its region."""

    enabled = False
    region = None


AUTOCAST = _AutocastState()


# Filled in from above as those modules load, so that this one imports none of them.
#: ``tensor``, ``empty`` and ``rebuild`` (the unpickler), what Tensor's methods make tensors
#: with: torcia._creation sets them (torcia imports it before any tensor exists); ``legacy``,
#: ``torcia.Tensor(*sizes or data)``'s constructor, torcia._legacy sets
FACTORIES = types.SimpleNamespace(tensor=None, empty=None, rebuild=None, legacy=None)
#: ``load()`` imports and returns torcia.overrides, PyTorch's __torch_function__ protocol,
#: which loads with the first Tensor subclass, not with import torcia (torcia's __init__,
#: above both modules, sets it)
OVERRIDES = types.SimpleNamespace(load=None)
#: An op's decomposition into other ops, which ``call`` runs where a device has no kernel
#: of its own: torcia._decompositions(_nn), above the ops it composes, fill it in
DECOMPOSITIONS: dict = {}


def load_autograd():
    """Return the autograd mode, registering the one the ``torcia_autograd_engine`` hook
    provides on first use, or raise an error naming the distribution to install."""
    if AUTOGRAD.engine is None:
        engine = plugins.manager().hook.torcia_autograd_engine()
        if engine is None:
            blocked = [i for i in plugins.blocked_plugins() if i.name == "autograd"]
            why = f" (the 'autograd' plugin is {blocked[0].reason})" if blocked else ""
            raise RuntimeError(
                "gradients need the torcia-autograd distribution, which is not available"
                f"{why}: {plugins.install_hint('torcia-autograd')}"
            )
        AUTOGRAD.register(engine)
    return AUTOGRAD.engine


def _device_error(a, b):
    return RuntimeError(
        "Expected all tensors to be on the same device, but found at least two devices, "
        f"{a} and {b}!"
    )


def _check_grad(t, g) -> None:
    """PyTorch's checks on ``t.grad = g``, with its messages."""
    if not isinstance(g, Tensor):
        raise TypeError(
            f"assigned grad expected to be a Tensor or None but got grad of type "
            f"{type(g).__name__}"
        )
    if g.dtype is not t.dtype:
        raise RuntimeError(
            f"attempting to assign a gradient with dtype '{_cpp_name(g.dtype)}' to a "
            f"tensor with grad_dtype '{_torch_name(t.dtype)}'. The gradient must match the "
            "tensor's grad_dtype (defaults to the tensor's dtype)."
        )
    if g._device.type != t._device.type:
        raise RuntimeError(
            f"attempting to assign a gradient with device type '{g._device.type}' to a "
            f"tensor with device type '{t._device.type}'. Please ensure that the gradient "
            "and the tensor are on the same device"
        )
    if g._device != t._device:
        raise RuntimeError(
            f"attempting to assign a gradient located on device with index "
            f"'{g._device.index}' to a tensor located on device with index "
            f"'{t._device.index}'. Please ensure that the gradient and the tensor are on the "
            "same device"
        )
    # a sparse gradient (no dense data) has its size all the same
    g_shape = g._data.shape if g._layout_binary is None else tuple(g.shape)
    if g_shape != t._data.shape:
        raise RuntimeError(
            f"attempting to assign a gradient of size '{list(g_shape)}' to a tensor of "
            f"size '{list(t._data.shape)}'. Please ensure that the gradient and the tensor are "
            "the same size"
        )


class Tensor:
    """A multi-dimensional array on a device, with optional gradient recording.

    Create tensors with :func:`torcia.tensor`, :func:`torcia.zeros` and friends; the
    constructor ``Tensor(data)`` is kept for PyTorch compatibility and copies ``data``.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> (x @ x).sum().item()
    54.0
    """

    # __dict__: Python attributes set on a tensor (``param._is_hf_initialized = True``), as
    # PyTorch allows; it is made only when one is set
    __slots__ = (
        "_data", "_device", "_requires_grad", "_grad", "grad_fn", "_vc", "_base",
        "_out_nr", "_hooks", "_retains_grad", "__weakref__", "__dict__",
    )
    __array_priority__ = 1000  # numpy defers to Tensor's reflected operators
    #: the elementwise arithmetic of a layout without dense data (torcia._sparse sets it
    #: on the sparse layouts): binary() hands it ops with such an operand
    _layout_binary = None

    def __new__(cls, *args, **kwargs):
        if cls is Tensor and not kwargs.get("_internal"):
            return FACTORIES.legacy(D.get_default_dtype(), args, kwargs.get("device"))
        return object.__new__(cls)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # a subclass keeps its type through ops by PyTorch's __torch_function__ protocol,
        # which torcia.overrides switches on for every op the first time it matters (it
        # loads then, not with import torcia)
        if _torch_function_of(cls) is not disabled_torch_function_impl:
            OVERRIDES.load().switch_on()

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """PyTorch's default: run ``func`` and give its tensor results this subclass's type
        (see :mod:`torcia.overrides`)."""
        # loaded by the subclass's definition (__init_subclass__ above)
        return OVERRIDES.load().default_torch_function(cls, func, types, args, kwargs)

    def __init__(self, *args, **kwargs):
        pass

    # ----- construction -------------------------------------------------------------
    @staticmethod
    def _make(arr, dev, base=None):
        t = _new(Tensor)
        if arr.__class__ is not _ndarray and isinstance(arr, _generic):
            arr = np.asarray(arr)
        t._data = arr
        t._device = dev
        t._requires_grad = False
        t._grad = None
        t.grad_fn = None
        if base is None:
            t._vc = [0]
            t._base = None
        else:
            t._vc = base._vc
            t._base = base._base if base._base is not None else base
        t._out_nr = 0
        t._hooks = None
        t._retains_grad = False
        return t

    # ----- basic attributes ---------------------------------------------------------
    @property
    def dtype(self):
        """The data type of the elements.

        Examples
        --------
        >>> import torcia
        >>> torcia.tensor([1, 2]).dtype, torcia.tensor([1.0]).dtype
        (torcia.int64, torcia.float32)
        """
        return _FROM_NP[self._data.dtype]

    @property
    def device(self) -> device:
        """The device the data lives on.

        Examples
        --------
        >>> import torcia
        >>> torcia.zeros(2).device
        device(type='cpu')
        """
        return self._device

    @property
    def shape(self) -> Size:
        """The size of each dimension, as a :class:`torcia.Size` (a tuple).

        Examples
        --------
        >>> import torcia
        >>> torcia.zeros(2, 3).shape
        torcia.Size([2, 3])
        """
        return Size(self._data.shape)

    def size(self, dim=None):
        """The shape, or the length of one dimension.

        Examples
        --------
        >>> import torcia
        >>> x = torcia.zeros(2, 3)
        >>> x.size()
        torcia.Size([2, 3])
        >>> x.size(1)
        3
        """
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim)]

    @property
    def ndim(self) -> int:
        """The number of dimensions.

        Examples
        --------
        >>> import torcia
        >>> torcia.zeros(2, 3).ndim
        2
        """
        return self._data.ndim

    def dim(self) -> int:
        """The number of dimensions (as :attr:`ndim`).

        Examples
        --------
        >>> import torcia
        >>> torcia.tensor(1.0).dim()
        0
        """
        return self._data.ndim

    def numel(self) -> int:
        """The number of elements.

        Examples
        --------
        >>> import torcia
        >>> torcia.zeros(2, 3).numel()
        6
        """
        return int(self._data.size)

    nelement = numel

    def element_size(self) -> int:
        """The size of one element in bytes.

        Examples
        --------
        >>> import torcia
        >>> torcia.zeros(2, dtype=torcia.float64).element_size()
        8
        """
        return self._data.itemsize

    @property
    def itemsize(self) -> int:
        """The size of one element in bytes (as :meth:`element_size`).

        Examples
        --------
        >>> import torcia
        >>> torcia.zeros(2, dtype=torcia.int16).itemsize
        2
        """
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        """The size of the elements in bytes.

        Examples
        --------
        >>> import torcia
        >>> torcia.zeros(2, 3).nbytes
        24
        """
        return int(self._data.nbytes)

    @property
    def data(self) -> Tensor:
        """A tensor sharing storage but detached from the graph, with a version counter of
        its own: as in PyTorch, writes through ``.data`` are hidden from autograd (they do
        not invalidate what backward saved).

        Examples
        --------
        >>> import torcia
        >>> w = torcia.ones(2, requires_grad=True)
        >>> w.data.requires_grad
        False
        >>> w.data.mul_(3); w._version
        tensor([3., 3.])
        0
        """
        return Tensor._make(self._data, self._device)

    @data.setter
    def data(self, value: Tensor):
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be a Tensor, got {type(value).__name__}")
        self._data = value._data
        self._device = value._device

    @property
    def is_cuda(self) -> bool:
        """Whether the tensor is on a "cuda" device.

        Examples
        --------
        >>> import torcia
        >>> torcia.zeros(1).is_cuda
        False
        """
        return self._device.type == "cuda"

    @property
    def is_leaf(self) -> bool:
        """Whether no recorded operation made this tensor (its ``grad_fn`` is None).

        Only leaves that require grad get ``.grad`` filled by backward.

        Examples
        --------
        >>> import torcia
        >>> w = torcia.ones(2, requires_grad=True)
        >>> w.is_leaf, (w * 2).is_leaf
        (True, False)
        """
        return self.grad_fn is None

    @property
    def _version(self) -> int:
        return self._vc[0]

    @property
    def grad(self) -> Tensor | None:
        """The gradient accumulated by ``backward``, or None.

        Assigning checks what PyTorch checks: a Tensor (or None) of this tensor's dtype,
        device type and size; a gradient of another shape would otherwise reach an
        optimizer's native update, which trusts the sizes it is given.

        Examples
        --------
        >>> import torcia
        >>> w = torcia.zeros(3, requires_grad=True)
        >>> w.grad = torcia.ones(3)
        >>> w.grad
        tensor([1., 1., 1.])
        """
        return self._grad

    @grad.setter
    def grad(self, value):
        if value is not None:
            _check_grad(self, value)
        self._grad = value

    @property
    def requires_grad(self) -> bool:
        """Whether autograd records operations on this tensor; settable on leaves.

        Examples
        --------
        >>> import torcia
        >>> w = torcia.zeros(2)
        >>> w.requires_grad = True
        >>> (w + 1).requires_grad
        True
        """
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set whether autograd records operations on this tensor (leaves only).

        Examples
        --------
        >>> import torcia
        >>> x = torcia.ones(2)
        >>> x.requires_grad_().requires_grad
        True
        """
        if not requires_grad:
            if self.grad_fn is not None:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want "
                    "to use a computed variable in a subgraph that doesn't require "
                    "differentiation use var_no_grad = var.detach()."
                )
            self._requires_grad = False
            return self
        if self.dtype.category < 2:
            raise RuntimeError(
                "only Tensors of floating point and complex dtype can require gradients, "
                f"got {self.dtype}"
            )
        load_autograd()
        self._requires_grad = True
        return self

    def is_floating_point(self) -> bool:
        """Whether the dtype is a floating point one.

        Examples
        --------
        >>> import torcia
        >>> torcia.tensor([1.0]).is_floating_point(), torcia.tensor([1]).is_floating_point()
        (True, False)
        """
        return self._data.dtype.kind == "f" or self.dtype.category == 2

    def is_complex(self) -> bool:
        """Whether the dtype is a complex one.

        Examples
        --------
        >>> import torcia
        >>> torcia.tensor([1j]).is_complex()
        True
        """
        return self._data.dtype.kind == "c"

    def is_conj(self) -> bool:
        """Always False: :meth:`conj` returns a conjugated copy, never a lazy view."""
        return False

    def is_contiguous(self, memory_format=None) -> bool:
        """Whether the elements are laid out in C (row-major) order without gaps.

        Examples
        --------
        >>> import torcia
        >>> x = torcia.zeros(2, 3)
        >>> x.is_contiguous(), x.t().is_contiguous()
        (True, False)
        """
        return bool(self._data.flags.c_contiguous)

    def stride(self, dim=None):
        """Strides in elements, as PyTorch reports them.

        Examples
        --------
        >>> import torcia
        >>> x = torcia.zeros(2, 3)
        >>> x.stride()
        (3, 1)
        >>> x.t().stride()
        (1, 3)
        """
        st = tuple(s // self._data.itemsize for s in self._data.strides)
        return st if dim is None else st[_wrap_dim(dim, self._data.ndim)]

    def data_ptr(self) -> int:
        return self._data.__array_interface__["data"][0] if self._device is CPU else 0

    def untyped_storage_ptr(self):
        return self.data_ptr()

    # ----- conversion ---------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The data as a NumPy array, sharing memory on the CPU.

        Examples
        --------
        >>> import torcia
        >>> torcia.tensor([1.0, 2.0]).numpy()
        array([1., 2.], dtype=float32)
        """
        if _modes_on:
            for mode in MODES.modes:
                mode.on_read(self, "numpy")
        if self._requires_grad and not force:
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead."
            )
        if self._device is not CPU:
            if not force:
                raise TypeError(
                    f"can't convert {self._device} device type tensor to numpy. Use "
                    "Tensor.cpu() to copy the tensor to host memory first."
                )
            return self._device.backend.to_host(self._data)
        return self._data

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy(force=True) if self._device is CPU else self.cpu()._data
        if self._requires_grad:
            arr = self._data
        return arr.astype(dtype) if dtype is not None else arr

    def item(self):
        """The value of a one-element tensor as a Python number.

        Examples
        --------
        >>> import torcia
        >>> torcia.tensor([2.5]).item()
        2.5
        """
        if self._data.size != 1:
            raise RuntimeError(
                f"a Tensor with {self._data.size} elements cannot be converted to Scalar"
            )
        if _modes_on:
            for mode in MODES.modes:
                mode.on_read(self, "item")
        arr = self._data if self._device is CPU else self._device.backend.to_host(self._data)
        return arr.reshape(()).item()

    def tolist(self):
        """The elements as (nested) Python lists of numbers.

        Examples
        --------
        >>> import torcia
        >>> torcia.tensor([[1, 2], [3, 4]]).tolist()
        [[1, 2], [3, 4]]
        """
        if _modes_on:
            for mode in MODES.modes:
                mode.on_read(self, "tolist")
        arr = self._data if self._device is CPU else self._device.backend.to_host(self._data)
        if arr.dtype.kind == "V" or self.dtype is D.bfloat16:
            arr = arr.astype(np.float32)
        return arr.tolist()

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __contains__(self, element):
        # PyTorch's: any element equal (iteration would compare whole rows)
        if isinstance(element, (Tensor, int, float, bool, complex, np.generic)):
            return bool((element == self).any().item())
        raise RuntimeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed "
                           f"in a {type(element)}.")

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(
                f"Boolean value of Tensor with {self._data.size} elements is ambiguous"
            )
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __hash__(self):
        return id(self)

    def __repr__(self):
        return _print.tensor_repr(self)

    def __format__(self, spec):
        if self._data.ndim == 0 and spec:
            return format(self.item(), spec)
        return object.__format__(self, spec) if spec else repr(self)

    def __reduce_ex__(self, protocol):
        return (FACTORIES.rebuild, (self.cpu().detach().numpy().copy(), str(self._device),
                                     self._requires_grad))

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule over this tensor's memory (no copy), for another library's
        ``from_dlpack``; the keywords are the protocol's. A tensor that requires grad is
        refused, as in PyTorch: the other library would not see its gradient.

        Examples
        --------
        >>> import numpy as np
        >>> import torcia
        >>> t = torcia.arange(3.0)
        >>> a = np.from_dlpack(t)
        >>> a[0] = 9.0
        >>> t
        tensor([9., 1., 2.])
        """
        if self._requires_grad:
            raise BufferError("Can't export tensors that require gradient, use "
                              "tensor.detach()")
        kwargs = {"max_version": max_version, "dl_device": dl_device, "copy": copy}
        if stream is not None:
            kwargs["stream"] = stream
        return self._data.__dlpack__(**{k: v for k, v in kwargs.items() if v is not None})

    def __dlpack_device__(self):
        """``(device type, index)`` in DLPack's codes (1: CPU, 2: CUDA).

        Examples
        --------
        >>> import torcia
        >>> torcia.ones(1).__dlpack_device__()
        (1, 0)
        """
        kind, index = self._data.__dlpack_device__()
        return int(kind), int(index)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        new = Tensor._make(self._data.copy(), self._device)
        new.__class__ = self.__class__
        new._requires_grad = self._requires_grad
        memo[id(self)] = new
        if self.grad is not None:
            new.grad = self.grad.__deepcopy__(memo)
        attrs = getattr(self, "__dict__", None)
        if attrs:
            new.__dict__.update(copy.deepcopy(attrs, memo))
        return new


_new = object.__new__

# The fields of a Tensor other parts may read and write on their per-op paths (autograd's
# recording and backward, the compiler's replay, the optimizers' steps), published as a
# contract of torcia.library (see docs/architecture.rst). Each name is a second name of a
# slot, so reading or writing it costs what ``t._data`` costs, and core may rename its
# slots while the published names stay.
PUBLISHED_FIELDS = {
    "__torcia_data__": ("_data", "the array holding the elements (of the device's array "
                        "module); shared by views of the same storage"),
    "__torcia_device__": ("_device", "the torcia.device"),
    "__torcia_version__": ("_vc", "the version counter: a one-element list, shared by the "
                           "views of one storage and bumped by every write"),
    "__torcia_base__": ("_base", "the tensor a view was made from (None for a non-view)"),
    "__torcia_requires_grad__": ("_requires_grad", "whether autograd records ops on it"),
    "__torcia_grad__": ("_grad", "the accumulated gradient, set without the checks of "
                        "``Tensor.grad``'s setter"),
    "__torcia_output_nr__": ("_out_nr", "which output of its grad_fn the tensor is"),
    "__torcia_autograd_meta__": ("_hooks", "the autograd engine's own per-tensor state "
                                 "(hooks, retain_grad...); core never reads it"),
    "__torcia_retains_grad__": ("_retains_grad", "whether retain_grad() was called"),
}
for _name, (_slot, _) in PUBLISHED_FIELDS.items():
    setattr(Tensor, _name, vars(Tensor)[_slot])
del _name, _slot


try:
    from torcia import _speedups
except ImportError:  # built only where setuptools found a C compiler
    _speedups = None
if os.environ.get("TORCIA_PURE_PYTHON", "0") != "0":
    _speedups = None  # the Python path, which the tests compare the native one with

#: the Python ``Tensor._make``: the reference the native one is tested against
python_make = Tensor._make
_NATIVE_MAKE = None if _speedups is None else _speedups.make
if _NATIVE_MAKE is not None:
    _speedups.setup(Tensor, np.ndarray, np.generic, np.asarray)
    Tensor._make = staticmethod(_NATIVE_MAKE)
_make = Tensor._make


def disabled_torch_function_impl(func, types, args=(), kwargs=None):
    """A ``__torch_function__`` that takes no part in dispatch: ops on instances of a class
    that sets it (``nn.Parameter``) return plain tensors, as PyTorch's
    ``torch._C._disabled_torch_function_impl``."""
    return func(*args, **(kwargs or {}))


def _torch_function_of(cls):
    fn = getattr(cls, "__torch_function__", None)
    return getattr(fn, "__func__", fn)


# written below the Tensor, for the public functions of torcia._ops too
_wrap_dim = _ops_common.wrap_dim


# ---------------------------------------------------------------------------------------
# dispatch
# ---------------------------------------------------------------------------------------


# ----- modes ----------------------------------------------------------------------------
#
# A mode is a feature that joins every op's dispatch while it is entered, in the thread
# that entered it. Modes run in a fixed order, lowest first (see DispatchMode.order):
# AUTOCAST rewrites an op's inputs, then PROFILE and TRACE wrap its kernel (PROFILE
# outermost), the kernel runs, and autograd records the op last. No mode replaces entries
# of the shared kernel tables or functions of the engine; without an entered mode in any
# thread an op pays one test of a module global.

#: The built-in modes' orders by their earlier names.
AUTOCAST_ORDER, PROFILE_ORDER, TRACE_ORDER, AUTOGRAD_ORDER = (
    ModeOrder.AUTOCAST, ModeOrder.PROFILE, ModeOrder.TRACE, ModeOrder.AUTOGRAD)


class _ModeStack(threading.local):
    modes = ()  # the modes entered in this thread, sorted by order


MODES = _ModeStack()
_modes_on = 0  # modes entered in all threads together: 0 keeps every op on the fast path
_modes_lock = threading.Lock()


class DispatchMode:
    """Base class of a dispatch mode (PyTorch's ``TorchDispatchMode``).

    Subclasses set ``order`` (see :data:`AUTOCAST_ORDER`, :data:`PROFILE_ORDER`,
    :data:`TRACE_ORDER`) and override what they need; ``with mode:`` enters it for the
    current thread only. Other threads keep dispatching without it.
    """

    order = 1000

    def on_inputs(self, op: str, inputs: tuple) -> tuple:
        """The inputs ``op`` runs on (autocast casts them); the default keeps them."""
        return inputs

    def around_kernel(self, op: str, kernel, device):
        """The kernel to run for ``op`` on ``device`` (a wrapper of ``kernel``)."""
        return kernel

    def on_inplace(self, target, out) -> None:
        """``target`` was overwritten in place with the value of ``out``."""
        return None

    def on_result(self, op: str, inputs: tuple, params: dict, result) -> None:
        """``op`` ran on ``inputs`` and made ``result`` (a tensor or a tuple of them),
        before autograd records it; called whatever the grad mode (forward-mode AD
        gives the result its tangent here)."""
        return None

    def around_backward(self, node, run):
        """Run the backward of graph node ``node``: ``run()`` computes it."""
        return run()

    def on_read(self, tensor, how: str) -> None:
        """Python reads the values of ``tensor`` (``how``: "item", "tolist" or "numpy");
        a tracer breaks its graph here, since what follows may depend on them."""
        return None

    def __enter__(self):
        global _modes_on
        modes = MODES.modes
        if self in modes:
            raise RuntimeError(f"{type(self).__name__} is already entered in this thread")
        MODES.modes = tuple(sorted(modes + (self,), key=lambda m: m.order))
        with _modes_lock:
            _modes_on += 1
        return self

    def __exit__(self, *exc):
        global _modes_on
        MODES.modes = tuple(m for m in MODES.modes if m is not self)
        with _modes_lock:
            _modes_on -= 1
        return False


class AutogradMode(DispatchMode):
    """The mode that records ops for gradients (PyTorch's Autograd dispatch key).

    Unlike a mode entered with ``with``, it is registered once for every thread with
    :func:`torcia.library.register_autograd_mode` (torcia-autograd's arrives through the
    ``torcia_autograd_engine`` hook), and it joins only the ops where a tensor input
    requires grad while grad mode is on: after the kernel and every entered mode have
    run (``order`` :data:`AUTOGRAD_ORDER`, last), the dispatcher calls
    ``record(op, inputs, params, out)`` with the inputs the op ran on (as autocast cast
    them). An op no tensor that requires grad takes part in pays nothing for it.

    A subclass implements the rest of :class:`torcia.library.AutogradEngine` too:
    ``record_transfer``, ``check_inplace``, ``rebase_inplace``, ``backward``, ``grad``,
    ``register_hook``, ``register_post_accumulate_grad_hook``, ``retain_grad``,
    ``derivative`` and ``define_derivative``.
    """

    order = AUTOGRAD_ORDER

    def __enter__(self):
        raise RuntimeError(
            f"{type(self).__name__} is an autograd mode: it records in every thread once "
            "registered with torcia.library.register_autograd_mode, and is not entered; "
            "torcia.no_grad() turns recording off in one thread"
        )


def active_modes() -> tuple:
    """The dispatch modes entered in the current thread, in dispatch order."""
    return MODES.modes if _modes_on else ()


def _in_modes(modes, op, kernel, dev):
    for mode in reversed(modes):
        kernel = mode.around_kernel(op, kernel, dev)
    return kernel


def call(op: str, inputs: tuple, params: dict, view_of=None):
    """Run ``op`` on ``inputs`` (tensors, Python scalars or None) with keyword ``params``.

    The first tensor input decides the device; every tensor must be on it. ``view_of``
    marks the result as a view sharing that tensor's storage and version counter.
    """
    modes = None
    if _modes_on:
        modes = MODES.modes
        for mode in modes:
            inputs = mode.on_inputs(op, inputs)
    if not modes and len(inputs) == 1 and inputs[0].__class__ is Tensor:
        # one plain tensor (most ops): no device agreement to check
        x = inputs[0]
        dev = x._device
        kernel = dev.kernels.get(op) if dev.kernels is not None else None
        if kernel is not None:
            try:
                out = kernel(x._data, **params)
            except (TypeError, ValueError) as exc:
                raise _no_kernel(op, (x._data,), exc) from None
            if out.__class__ is tuple:
                result = tuple(_make(o, dev) for o in out)
            else:
                result = _make(out, dev, view_of)
            if x._requires_grad and _GRAD.enabled:
                AUTOGRAD.record(op, inputs, params, result)
            return result
    if not modes and len(inputs) == 2:
        # two plain tensors on one device (products, cat, losses): the loop below, unrolled
        x, y = inputs
        if x.__class__ is Tensor and y.__class__ is Tensor and y._device is x._device and (
                x._device.kernels is not None):
            dev = x._device
            kernel = dev.kernels.get(op)
            if kernel is not None:
                xd, yd = x._data, y._data
                try:
                    out = kernel(xd, yd, **params)
                except (TypeError, ValueError) as exc:
                    raise _no_kernel(op, (xd, yd), exc) from None
                if out.__class__ is tuple:
                    result = tuple(_make(o, dev) for o in out)
                else:
                    result = _make(out, dev, view_of)
                if (x._requires_grad or y._requires_grad) and _GRAD.enabled:
                    AUTOGRAD.record(op, inputs, params, result)
                return result
    dev = None
    arrays = []
    needs_grad = False
    for x in inputs:
        if isinstance(x, Tensor):
            if dev is None:
                dev = x._device
            elif x._device is not dev:
                raise _device_error(dev, x._device)
            arrays.append(x._data)
            if x._requires_grad:
                needs_grad = True
        else:
            arrays.append(x)
    kernels = dev.kernels
    if kernels is None:
        kernels = dev.backend.kernels  # builds the tables on first use
    try:
        kernel = kernels[op]
    except (KeyError, NotImplementedError):  # a KernelTable raises the latter
        decomposition = DECOMPOSITIONS.get(op)
        if decomposition is None:
            raise NotImplementedError(
                f"op {op!r} has no kernel for device type {dev.type!r} "
                f"(backend from plugin {dev.backend.plugin!r}) and no decomposition"
            ) from None
        if needs_grad and _GRAD.enabled and view_of is None and (
                AUTOGRAD.engine.derivative(op) is not None):
            return _decomposed_with_formula(op, decomposition, inputs, params)
        # a composite op the device lacks, with no formula of its own: its ops run (and
        # are recorded) one by one
        return decomposition(*inputs, **params)
    if modes:
        kernel = _in_modes(modes, op, kernel, dev)
    try:
        out = kernel(*arrays, **params)
    except (TypeError, ValueError) as exc:
        raise _no_kernel(op, arrays, exc) from None
    if out.__class__ is tuple:
        result = tuple(Tensor._make(o, dev) for o in out)
    else:
        result = Tensor._make(out, dev, view_of)
    if modes:
        for mode in modes:
            mode.on_result(op, inputs, params, result)
    if needs_grad and _GRAD.enabled:
        AUTOGRAD.record(op, inputs, params, result)
    return result


def _decomposed_with_formula(op, decomposition, inputs, params):
    """A composite op the device lacks, whose gradient is its own formula's, as on a device
    with its kernel (entr's infinite slope at 0, hypot's NaN at the origin): the
    decomposition runs unrecorded, the op is recorded once."""
    _GRAD.enabled = False
    try:
        result = decomposition(*inputs, **params)
    finally:
        _GRAD.enabled = True
    AUTOGRAD.record(op, inputs, params, result)
    return result


def _in_float32(op, a, b, dt, float_op):
    """``op`` of a float16 or bfloat16 tensor ``a`` and a number ``b`` (D.scalar_operand):
    computed in float32, the number a float32, and rounded back to ``dt``, as PyTorch; one
    node, as its (MulBackward0, not a float32 product between two casts)."""
    if a._requires_grad and _GRAD.enabled:
        return _decomposed_with_formula(
            op, lambda x, y: _in_float32(op, x, y, dt, float_op), (a, b), {})
    return binary(op, a.float(), b, float_op).to(dt)


def binary(op: str, a, b, float_op: bool = False):
    """An elementwise op of two operands with PyTorch's promotion (the hottest path)."""
    if a.__class__ is not Tensor:
        if not isinstance(a, Tensor):
            a = _as_operand(a, b)
        elif a._layout_binary is not None:
            return a._layout_binary(op, a, b, float_op)
    if _modes_on and MODES.modes:
        return _binary_in_modes(MODES.modes, op, a, b, float_op)
    ad = a._data
    dev = a._device
    if b.__class__ is Tensor and b._data.dtype is ad.dtype and b._device is dev and (
        not float_op or ad.dtype.kind == "f"
    ):
        # fast path: same dtype and device, nothing to promote
        kernels = dev.kernels
        if kernels is not None:
            try:
                out = _make(kernels[op](ad, b._data), dev)
            except (TypeError, ValueError):  # reworded by _run2
                out = _make(_run2(kernels[op], ad, b._data, op), dev)
            except NotImplementedError:
                return _decomposed(op, (a, b), _FROM_NP[ad.dtype])
            if (a._requires_grad or b._requires_grad) and _GRAD.enabled:
                AUTOGRAD.record(op, (a, b), {}, out)
            return out
    # NOTE: _promoted repeats these lines for the modes' path; calling it from here would
    # cost every promoting op (a * 2.0) one more Python call
    dt = _FROM_NP[ad.dtype]
    if isinstance(b, Tensor):
        if b.__class__ is not Tensor and b._layout_binary is not None:
            return b._layout_binary(op, a, b, float_op)
        bd = b._data
        if bd.dtype is not a._data.dtype:
            bt = _FROM_NP[bd.dtype]
            dt = D.result_type_of(
                [x for x, t in ((dt, a), (bt, b)) if t._data.ndim],
                [x for x, t in ((dt, a), (bt, b)) if not t._data.ndim],
                (),
            )
            # an integer result of a float op: b goes straight to float (below), not
            # through the integer dtype, where -1 would wrap to 255 for uint8
            if bt is not dt and not (float_op and dt.category < 2):
                bd = bd.astype(dt.np)
        if b._device is not a._device:
            raise _device_error(a._device, b._device)
        b_grad = b._requires_grad
    elif b.__class__ in (float, int, bool, complex):
        dt, bd = D.scalar_operand(dt, b, op)
        if bd is None:
            return _in_float32(op, a, b, dt, float_op)
        b_grad = False
    else:
        return binary(op, a, _as_operand(b, a), float_op)
    if float_op and dt.category < 2:
        dt = D._default[0]
        # a Python number too: NumPy takes log(3) to float64, PyTorch's scalar stays float32
        bd = dt.np.type(bd) if bd.__class__ in _NUMBERS else bd.astype(dt.np)
    if ad.dtype is not dt.np:
        ad = ad.astype(dt.np)
    kernels = dev.kernels
    if kernels is None:
        kernels = dev.backend.kernels  # builds the tables on first use
    if op not in kernels:
        return _decomposed(op, (a, b), dt)
    out = _make(_run2(kernels[op], ad, bd, op), dev)
    if (a._requires_grad or b_grad) and _GRAD.enabled:
        AUTOGRAD.record(op, (a, b), {}, out)
    return out


def _decomposed(op, operands, dt):
    """An elementwise ``op`` the device has no kernel for (a composite): its decomposition
    on ``operands`` (tensors, or Python numbers beside the first) in ``dt``, the dtype its
    kernel would have been given."""
    first = operands[0]
    return call(op, tuple((x if isinstance(x, Tensor) else _as_operand(x, first)).to(dt)
                          for x in operands), {})


def _binary_in_modes(modes, op, a, b, float_op):
    if not isinstance(b, Tensor) and b.__class__ not in (float, int, bool, complex):
        b = _as_operand(b, a)
    for mode in modes:
        a, b = mode.on_inputs(op, (a, b))
    if not isinstance(a, Tensor):
        a = _as_operand(a, b)
    ad, bd, b_grad = _promoted(op, a, b, float_op)
    if bd is None:
        return _in_float32(op, a, b, _FROM_NP[ad.dtype], float_op)
    dev = a._device
    kernels = dev.kernels
    if kernels is None:
        kernels = dev.backend.kernels  # builds the tables on first use
    if op not in kernels:
        return _decomposed(op, (a, b), _FROM_NP[ad.dtype])
    out = _make(_run2(_in_modes(modes, op, kernels[op], dev), ad, bd, op), dev)
    for mode in modes:
        mode.on_result(op, (a, b), {}, out)
    if (a._requires_grad or b_grad) and _GRAD.enabled:
        AUTOGRAD.record(op, (a, b), {}, out)
    return out


def _promoted(op, a, b, float_op):
    """The arrays of ``a`` and ``b`` (a tensor or a Python number; None: ``op`` computes in
    float32) promoted, and whether ``b`` requires grad: ``binary``'s, for the modes' path."""
    ad = a._data
    dt = _FROM_NP[ad.dtype]
    if isinstance(b, Tensor):
        bd = b._data
        if bd.dtype is not ad.dtype:
            bt = _FROM_NP[bd.dtype]
            dt = D.result_type_of(
                [x for x, t in ((dt, a), (bt, b)) if t._data.ndim],
                [x for x, t in ((dt, a), (bt, b)) if not t._data.ndim],
                (),
            )
            if bt is not dt and not (float_op and dt.category < 2):
                bd = bd.astype(dt.np)  # as binary's: a float op's b straight to float
        if b._device is not a._device:
            raise _device_error(a._device, b._device)
        b_grad = b._requires_grad
    else:
        dt, bd = D.scalar_operand(dt, b, op)
        b_grad = False
    if float_op and dt.category < 2:
        dt = D._default[0]
        # a Python number too: NumPy takes log(3) to float64, PyTorch's scalar stays float32
        bd = dt.np.type(bd) if bd.__class__ in _NUMBERS else bd.astype(dt.np)
    if ad.dtype is not dt.np:
        ad = ad.astype(dt.np)
    return ad, bd, b_grad


def result_type(*operands) -> D.dtype:
    """The dtype PyTorch computes an op of ``operands`` in (tensors and Python numbers;
    None is skipped): within a category, dimensioned tensors outrank 0-dim ones, which
    outrank numbers (see :func:`torcia._dtype.result_type_of`)."""
    dims, zeros, scalars = [], [], []
    for x in operands:
        if isinstance(x, Tensor):
            # its dtype and ndim, not its array's: a sparse tensor has none to read
            (dims if x.ndim else zeros).append(x.dtype)
        elif x is not None:
            scalars.append(D.scalar_dtype(x))
    return D.result_type_of(dims, zeros, scalars)


_opdef.RESULT_TYPE = result_type


#: NumPy's words for a dtype it has no loop or routine for
_NO_LOOP = ("not supported for the input types", "did not contain a loop with signature",
            "unsupported in linalg", "Invalid integer data type", "data type not inexact")


def _no_kernel(op, arrays, exc):
    """``exc`` (raised by a kernel) in PyTorch's words: its error for a dtype without a
    kernel when NumPy refused the dtype, or for shapes that do not broadcast; otherwise
    ``exc`` itself."""
    if str(exc).startswith("shape mismatch: value array"):
        # an index_put of values that do not fit the indexed region
        return RuntimeError(str(exc).replace("value array", "value tensor").replace(
            "could not be", "cannot be"))
    if "could not be broadcast" in str(exc):
        shapes = [np.shape(a) for a in arrays if hasattr(a, "shape")]
        return (_ops_common.broadcast_error(*shapes[:2]) if len(shapes) > 1 else None) or exc
    if not any(s in str(exc) for s in _NO_LOOP):
        return exc
    dt = next((a.dtype for a in arrays if hasattr(a, "dtype")), None)
    name = _torch_name(_FROM_NP[dt]) if dt is not None and dt in _FROM_NP else str(dt)
    return NotImplementedError(f'"{op}_cpu" not implemented for \'{name}\'')


def _run2(kernel, ad, bd, op):
    if bd.__class__ is int and op in _COMPARE_OPS and ad.dtype.kind in "iu":
        # NumPy compares a Python int by its value; PyTorch casts it to the tensor's dtype
        # first, so (uint8 255 == -1) is True
        bd = _wrapped(bd, ad.dtype)
    try:
        return kernel(ad, bd)
    except OverflowError:
        # a Python int out of the tensor's integer range wraps around, as in PyTorch
        if bd.__class__ is not int:
            raise
        return kernel(ad, _wrapped(bd, ad.dtype))
    except TypeError as exc:
        raise _no_kernel(op, (ad, bd), exc) from None
    except ValueError as exc:
        if any(s in str(exc) for s in _NO_LOOP):
            raise _no_kernel(op, (ad, bd), exc) from None
        error = _ops_common.broadcast_error(np.shape(ad), np.shape(bd))
        if error is None:
            raise
        raise error from None


#: the comparisons of Python's operators (the declared ops of ``COMPARE`` with an
#: ``operator``; the logical ops take no number in PyTorch)
_COMPARE_OPS = frozenset(name for name, op in _ops.DECLARED.items()
                         if op.group == "compare" and op.operator)


def _wrapped(value: int, dtype):
    """The Python int ``value`` cast to the integer ``dtype`` with wrap-around, as PyTorch's
    scalars (which hold any int64 or uint64) do."""
    if value < -(2 ** 63):
        raise OverflowError(f"value cannot be converted to type {dtype} without overflow")
    return np.array(value & 0xFFFF_FFFF_FFFF_FFFF, dtype=np.uint64).astype(dtype)[()]


def _as_operand(x, like):
    """``x``, the operand of an op beside the tensor ``like``, as a tensor on its device.

    A Python number becomes a 0-dim tensor of the dtype it promotes to with ``like``
    (``-0.5 ** uint8_tensor`` is float, ``300 - uint8_tensor`` wraps in uint8): the one
    place a number in first position takes PyTorch's wrapped-number rule.
    """
    dev = like._device if isinstance(like, Tensor) else None
    if x.__class__ in (int, float, bool, complex):
        if dev is None:
            return FACTORIES.tensor(x)
        dt = D.tensor_scalar_dtype(_FROM_NP[like._data.dtype], x.__class__)
        if dev is CPU and dt.np in _FLOAT_OPERANDS and -9e18 < x < 9e18:
            # a real number in int64's range taken to float32/float64 (1 - x in a formula):
            # the array tensor() makes, without its inference (which refuses larger ints)
            return _make(np.array(x, dt.np), dev)
        return FACTORIES.tensor(x, dtype=dt, device=dev)
    if isinstance(x, (np.ndarray, np.generic, list, tuple, int, float)):
        return FACTORIES.tensor(x, device=dev)
    raise TypeError(f"unsupported operand type: {type(x).__name__}")


def unary(op: str, a, to_float: bool = False):
    """An elementwise op of one tensor; ``to_float`` promotes integer inputs."""
    if _modes_on and MODES.modes:
        return _unary_in_modes(MODES.modes, op, a, to_float)
    if not isinstance(a, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(a).__name__}")
    ad = a._data
    if to_float and ad.dtype.kind in "biu":
        ad = ad.astype(D._default[0].np)
    dev = a._device
    kernels = dev.kernels
    if kernels is None:
        kernels = dev.backend.kernels  # builds the tables on first use
    try:
        out = Tensor._make(kernels[op](ad), dev)
    except (TypeError, ValueError) as exc:
        raise _no_kernel(op, (ad,), exc) from None
    except NotImplementedError:
        return _decomposed(op, (a,), _FROM_NP[ad.dtype])
    if a._requires_grad and _GRAD.enabled:
        AUTOGRAD.record(op, (a,), {}, out)
    return out


def _unary_in_modes(modes, op, a, to_float):
    for mode in modes:
        (a,) = mode.on_inputs(op, (a,))
    if not isinstance(a, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(a).__name__}")
    ad = a._data
    if to_float and ad.dtype.kind in "biu":
        ad = ad.astype(D._default[0].np)
    dev = a._device
    kernels = dev.kernels
    if kernels is None:
        kernels = dev.backend.kernels  # builds the tables on first use
    if op not in kernels:
        return _decomposed(op, (a,), _FROM_NP[ad.dtype])
    try:
        out = Tensor._make(_in_modes(modes, op, kernels[op], dev)(ad), dev)
    except (TypeError, ValueError) as exc:
        raise _no_kernel(op, (ad,), exc) from None
    for mode in modes:
        mode.on_result(op, (a,), {}, out)
    if a._requires_grad and _GRAD.enabled:
        AUTOGRAD.record(op, (a,), {}, out)
    return out


def inplace(op_fn, self: Tensor, *args, **kwargs) -> Tensor:
    """Run an out-of-place op and write its result into ``self``, as PyTorch's ``op_``.

    The result is computed out of place, cast back to ``self``'s dtype where PyTorch's
    rules allow, and copied into ``self``'s storage (so views see it); its version
    counter is bumped, and autograd rebases ``self`` onto the op's node. A write that
    PyTorch refuses for overlapping memory raises first (``check_overlap``).
    """
    return write_inplace(op_fn, self, args, kwargs, args)


_opdef.INPLACE = inplace
_opdef.TENSOR = sys.modules[__name__]


#: float dtypes whose tensors take a Python float operand in their own dtype, as PyTorch's
#: kernels do (not float16 and bfloat16: see D.scalar_operand)
_FLOAT_OPERANDS = frozenset(np.dtype(t) for t in (np.float32, np.float64))


def binary_inplace(op: str, op_fn, self: Tensor, other, float_op: bool = False) -> Tensor:
    """``self op= other`` (``a += b``, ``a.add_(b)``): :func:`inplace` of ``op_fn``, the
    out-of-place function, which computes as :func:`binary` does for ``op`` (``float_op``
    as its).

    Where nothing records, converts or watches (no grad, no mode, a plain tensor of
    ``self``'s dtype, or a Python float beside a float tensor), the kernel writes the
    result into ``self``'s array in one pass (its ``out=``, see
    :func:`torcia.hookspecs.torcia_register_kernels`); anything else takes ``inplace``."""
    if not _modes_on and self.__class__ is Tensor and not self._requires_grad:
        sd = self._data
        if other.__class__ is Tensor:
            od = other._data
            fast = (not other._requires_grad and od.dtype is sd.dtype
                    and other._device is self._device and (not float_op or sd.dtype.kind == "f"))
        else:
            od = other
            fast = other.__class__ is float and sd.dtype in _FLOAT_OPERANDS
        kernels = self._device.kernels
        if fast and kernels is not None and op in kernels:
            check_overlap(self, (other,))
            if written(kernels[op], sd, od):
                self._vc[0] += 1
                return self
    return inplace(op_fn, self, other)


def scaled_inplace(op: str, op_fn, self: Tensor, other, alpha) -> Tensor:
    """``self.add_(other, alpha=alpha)`` (``sub_``: ``op``): as :func:`binary_inplace`, for a
    plain ``other`` of ``self``'s float dtype and a Python int or float ``alpha``: by the
    kernel's ``alpha=`` where its signature names it, else ``mul``'s kernel first (as
    ``op_fn`` computes ``other * alpha``); else :func:`inplace`."""
    kernels = self._device.kernels
    if (not _modes_on and self.__class__ is Tensor and other.__class__ is Tensor
            and not self._requires_grad and not other._requires_grad and kernels is not None
            and alpha.__class__ in (int, float) and other._data.dtype is self._data.dtype
            and self._data.dtype in _FLOAT_OPERANDS and other._device is self._device
            and op in kernels):
        sd, od, kernel = self._data, other._data, kernels[op]
        check_overlap(self, (other,))
        params = {} if alpha == 1 else {"alpha": alpha}  # add's: no product where alpha is 1
        if params and not takes_param(kernel, "alpha"):
            params, od = {}, _scaled(kernels, od, alpha)
        if od is not None and written(kernel, sd, od, **params):
            self._vc[0] += 1
            return self
    return inplace(op_fn, self, other, alpha=alpha)


def _scaled(kernels, od, alpha):
    """``od * alpha`` by ``mul``'s kernel, or None where it has none or refuses."""
    try:
        return kernels["mul"](od, alpha)
    except (KeyError, TypeError, ValueError, OverflowError, NotImplementedError):
        return None


def written(kernel, sd, od, **params) -> bool:
    """Whether ``kernel(sd, od, **params)`` went into ``sd`` (its ``out=``, or copied from an
    array of its own); False where it refused or ``sd`` is read-only (``inplace`` raises)."""
    try:
        out = kernel(sd, od, out=sd, **params)
        if out is not sd and out.dtype is sd.dtype and out.shape == sd.shape:
            sd[...] = out  # a kernel without out=: its own array copied in
            return True
    except (TypeError, ValueError, OverflowError, NotImplementedError):
        return False
    return out is sd


def write_inplace(op_fn, self: Tensor, args: tuple, kwargs: dict, overlap_args) -> Tensor:
    """:func:`inplace`, with the overlap of ``self`` checked against ``overlap_args`` only
    (a basic-indexing assignment writes a region of ``self``, checked by the caller)."""
    recording = self._requires_grad
    if not recording:
        for x in args:
            if isinstance(x, Tensor) and x._requires_grad:
                recording = True
                break
    recording = recording and _GRAD.enabled
    if recording:
        AUTOGRAD.engine.check_inplace(self)
    check_overlap(self, overlap_args)
    out = op_fn(self, *args, **kwargs)
    sd, od = self._data, out._data
    if od.dtype is not sd.dtype or od.shape != sd.shape:
        _check_writable(self, out)
    if recording and out._requires_grad:
        # before the write: the engine snapshots any saved reference to the old value
        AUTOGRAD.engine.rebase_inplace(self, out)
    try:
        self._data[...] = od
    except ValueError:  # NumPy's read-only destination: an array given to from_numpy
        raise RuntimeError("the tensor's memory is read-only (a read-only NumPy array "
                           "given to from_numpy); call .clone() before writing to it") from None
    self._vc[0] += 1
    if _modes_on:
        for mode in MODES.modes:
            mode.on_inplace(self, out)
    return self


def check_overlap(self: Tensor, args=()) -> None:
    """PyTorch's refusals of an in-place write into ``self``: two of its elements in one
    memory location (a dim of size > 1 and stride 0: an expanded view), or a tensor among
    ``args`` that covers part of the same memory (``x[1:].copy_(x[:-1])``), whose result
    would depend on the order the elements are written in. Full overlap (``x.add_(x)``)
    and layouts PyTorch does not analyse (overlapping or non-dense ones) pass."""
    sd = self._data
    if self._device.type == "meta":
        return  # no memory: each meta array is one element seen through zero strides
    if sd.size == 0:
        return  # nothing is written (NumPy gives empty arrays' dims any stride, often 0)
    strides = sd.strides
    for n, st in zip(sd.shape, strides) if 0 in strides else ():
        if st == 0 and n > 1:
            raise RuntimeError(
                "unsupported operation: more than one element of the written-to tensor refers "
                "to a single memory location. Please clone() the tensor before performing the "
                "operation.")
    root = self._base if self._base is not None else self
    for x in args:
        if x.__class__ is Tensor or isinstance(x, Tensor):
            # another storage first: a sparse tensor has no dense array to look at
            if (x._base if x._base is not None else x) is not root:
                continue
            xd = x._data
            if xd is not sd and _partial_overlap(sd, xd):
                raise RuntimeError(
                    "unsupported operation: some elements of the input tensor and the "
                    "written-to tensor refer to a single memory location in memory. Please "
                    "clone() the tensor before performing the operation.")


_opdef.WRITE_INPLACE, _opdef.CHECK_OVERLAP = write_inplace, check_overlap


def _address(arr) -> int:
    """The address of an array's first element (NumPy's or CuPy's)."""
    iface = getattr(arr, "__array_interface__", None)
    return iface["data"][0] if iface is not None else arr.data.ptr


def _dense(arr) -> bool:
    """Whether ``arr``'s elements fill a block of memory once each, in some dim order (a
    reversed dim too)."""
    return _ops_common.dense(arr.shape, [abs(s) for s in arr.strides], arr.itemsize)


def _partial_overlap(a, b) -> bool:
    """PyTorch's ``get_overlap_status(a, b) == Partial`` for two arrays over one storage."""
    if not a.size or not b.size or not _dense(a) or not _dense(b):
        return False
    a0, b0 = _address(a), _address(b)
    a1, b1 = a0 + a.size * a.itemsize, b0 + b.size * b.itemsize
    if (a0, a1) == (b0, b1):
        return a.strides != b.strides
    return a0 < b1 and b0 < a1


def _check_writable(self: Tensor, out: Tensor) -> None:
    sd, od = self._data, out._data
    if od.dtype is not sd.dtype:
        src, dst = _FROM_NP[od.dtype], _FROM_NP[sd.dtype]
        if not D.can_cast(src, dst):
            raise RuntimeError(f"result type {_torch_name(src)} can't be cast to the desired "
                               f"output type {_torch_name(dst)}")
    if od.shape != sd.shape:
        try:
            shape = np.broadcast_shapes(od.shape, sd.shape)
        except ValueError:
            shape = None
        if shape != sd.shape:
            raise RuntimeError(
                f"output with shape {list(sd.shape)} doesn't match the broadcast shape "
                f"{list(od.shape)}"
            )


_torch_name = D.torch_type_name
_cpp_name = D.cpp_type_name


def canonical_device(dev):
    return DEFAULT_DEVICE[0] if dev is None else canonical(dev)


#: the Python dispatch functions: the reference the native ones are tested against
python_call, python_binary, python_unary, python_binary_inplace = (
    call, binary, unary, binary_inplace)
#: torcia._speedups' call, binary, unary and binary_inplace, which replace those (or False)
NATIVE_DISPATCH = _speedups is not None and _speedups.setup_dispatch(
    globals(), device, _GRAD, AUTOGRAD, call, binary, unary, binary_inplace, _no_kernel,
    np.zeros(3, np.float32))
if NATIVE_DISPATCH:
    call, binary, unary, binary_inplace = NATIVE_DISPATCH
_opdef.UNARY, _opdef.BINARY = unary, binary
