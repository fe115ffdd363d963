"""DataPipes, as ``torch.utils.data``: datasets that chain into pipelines through
functional forms (``pipe.map(f).filter(g).batch(4)``), with optional element types that
can be checked at construction (:func:`argument_validation`) and while iterating
(:func:`runtime_validation`).

``IterDataPipe`` is a stream (an :class:`~torcia.data.IterableDataset`), ``MapDataPipe``
an indexable dataset (a :class:`~torcia.data.Dataset`); either works with the
``DataLoader``. A class becomes a functional form of its kind with
``@functional_datapipe("name")``. The built-in forms are ``map``, ``filter`` and ``batch``
on ``IterDataPipe`` and ``map`` and ``batch`` on ``MapDataPipe``; :class:`IterableWrapper`
and :class:`SequenceWrapper` start a pipeline from a Python iterable or sequence.

Examples
--------
>>> from torcia.data.datapipes import IterableWrapper
>>> list(IterableWrapper(range(10)).map(lambda x: x * x).filter(lambda x: x % 2 == 1).batch(2))
[[1, 9], [25, 49], [81]]
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from typing import Any, Generic, TypeVar, get_args, get_origin, get_type_hints

from torcia.data.dataset import Dataset, IterableDataset

__all__ = [
    "DFIterDataPipe", "DataChunk", "IterDataPipe", "IterableWrapper", "MapDataPipe",
    "SequenceWrapper", "argument_validation", "functional_datapipe",
    "guaranteed_datapipes_determinism", "non_deterministic", "runtime_validation",
    "runtime_validation_disabled",
]

_T_co = TypeVar("_T_co", covariant=True)


_UNIONS = (typing.Union, types.UnionType)


class _Flags:
    runtime_validation = True
    determinism = False


# ---------------------------------------------------------------------------------------
# element types
# ---------------------------------------------------------------------------------------


def _issubtype(left, right) -> bool:
    """Whether type hint ``left`` is a subtype of ``right`` (classes, ``Any``, ``Union``
    and parametrised generics such as ``list[int]``)."""
    if right is Any or left == right:
        return True
    if left is Any:
        return False
    if get_origin(right) in _UNIONS:
        return any(_issubtype(left, r) for r in get_args(right))
    if get_origin(left) in _UNIONS:
        return all(_issubtype(t, right) for t in get_args(left))
    l_origin, r_origin = get_origin(left) or left, get_origin(right) or right
    if not (isinstance(l_origin, type) and isinstance(r_origin, type)
            and issubclass(l_origin, r_origin)):
        return False
    r_args, l_args = get_args(right), get_args(left)
    if not r_args:
        return True
    return len(l_args) == len(r_args) and all(_issubtype(a, b) for a, b in zip(l_args, r_args))


def _is_instance(value, hint) -> bool:
    """Whether ``value`` is of type hint ``hint`` (element types of containers checked)."""
    if hint is Any:
        return True
    origin = get_origin(hint)
    if origin in _UNIONS:
        return any(_is_instance(value, h) for h in get_args(hint))
    if origin is None:
        return isinstance(value, hint) if isinstance(hint, type) else True
    if not isinstance(value, origin):
        return False
    args = get_args(hint)
    if not args:
        return True
    if issubclass(origin, dict):
        return all(_is_instance(k, args[0]) and _is_instance(v, args[1])
                   for k, v in value.items())
    if issubclass(origin, tuple):
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_is_instance(v, args[0]) for v in value)
        return len(value) == len(args) and all(map(_is_instance, value, args))
    if issubclass(origin, (list, set, frozenset)):
        return all(_is_instance(v, args[0]) for v in value)
    return True


class _DataPipeType:
    """The element type of a DataPipe class (``Any`` when it names none)."""

    def __init__(self, param):
        self.param = param

    def issubtype(self, other: _DataPipeType) -> bool:
        return _issubtype(self.param, other.param)

    def issubtype_of_instance(self, value) -> bool:
        return _is_instance(value, self.param)

    def __eq__(self, other):
        return isinstance(other, _DataPipeType) and self.param == other.param

    def __hash__(self):
        return hash(self.param)

    def __repr__(self):
        return getattr(self.param, "__name__", None) or repr(self.param)


def _element_type(cls) -> Any:
    for klass in cls.__mro__:
        for base in klass.__dict__.get("__orig_bases__", ()):
            origin = get_origin(base)
            if isinstance(origin, type) and issubclass(origin, (IterDataPipe, MapDataPipe)):
                (arg,) = get_args(base)
                return Any if isinstance(arg, TypeVar) else arg
    return Any


class _Functional:
    """The functional forms of one kind of DataPipe, and their lookup as attributes."""

    functions: dict

    @classmethod
    def register_function(cls, function_name, function) -> None:
        """Make ``pipe.function_name(*args)`` call ``function(pipe, *args)``."""
        cls.functions[function_name] = function

    @classmethod
    def register_datapipe_as_function(cls, function_name, cls_to_register, **_unused):
        """Make ``pipe.function_name(*args)`` build ``cls_to_register(pipe, *args)``."""
        if function_name in cls.functions:
            raise Exception(f"Unable to add DataPipe function name {function_name} as it "
                            "is already taken")

        def function(source_dp, *args, **kwargs):
            return cls_to_register(source_dp, *args, **kwargs)

        function.__doc__ = cls_to_register.__doc__
        cls.functions[function_name] = function

    def __getattr__(self, name):
        functions = type(self).functions
        if name in functions:
            return functools.partial(functions[name], self)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    @property
    def type(self) -> _DataPipeType:
        """The pipe's element type, from its class (``IterDataPipe[int]``...)."""
        return _DataPipeType(_element_type(type(self)))


class IterDataPipe(_Functional, IterableDataset, Generic[_T_co]):
    """An iterable-style DataPipe: a stream whose functional forms chain into a pipeline.

    Subclasses implement ``__iter__``; ``IterDataPipe[T]`` states the element type.

    Examples
    --------
    >>> from torcia.data import IterDataPipe
    >>> class Countdown(IterDataPipe[int]):
    ...     def __init__(self, n):
    ...         self.n = n
    ...     def __iter__(self):
    ...         yield from range(self.n, 0, -1)
    >>> list(Countdown(3).map(str))
    ['3', '2', '1']
    >>> Countdown(3).type
    int
    """

    functions: dict = {}


class DFIterDataPipe(IterDataPipe):
    """An ``IterDataPipe`` whose elements are DataFrames (the marker PyTorch's DataFrame
    pipelines test for).

    Examples
    --------
    >>> from torcia.data import DFIterDataPipe
    >>> class Frames(DFIterDataPipe):
    ...     def __iter__(self):
    ...         yield {"a": [1, 2]}
    >>> Frames()._is_dfpipe()
    True
    """

    def _is_dfpipe(self) -> bool:
        return True


class MapDataPipe(_Functional, Dataset, Generic[_T_co]):
    """A map-style DataPipe: indexable, with functional forms.

    Subclasses implement ``__getitem__`` and ``__len__``.

    Examples
    --------
    >>> from torcia.data.datapipes import SequenceWrapper
    >>> dp = SequenceWrapper([1, 2, 3]).map(lambda x: 10 * x)
    >>> len(dp), dp[2]
    (3, 30)
    """

    functions: dict = {}


class DataChunk(list):
    """A list of samples that a pipe hands on as one element (what ``batch`` yields).

    Examples
    --------
    >>> from torcia.data import DataChunk
    >>> chunk = DataChunk([1, 2, 3])
    >>> chunk.as_str(), list(chunk.raw_iterator())
    ('[1, 2, 3]', [1, 2, 3])
    """

    def __init__(self, items=()):
        items = list(items)
        super().__init__(items)
        self.items = items

    def as_str(self, indent: str = "") -> str:
        """The chunk as text: ``[a, b, ...]`` after ``indent``."""
        return indent + "[" + ", ".join(str(i) for i in iter(self)) + "]"

    def raw_iterator(self):
        """The items as the chunk was made with them."""
        yield from self.items


# ---------------------------------------------------------------------------------------
# decorators
# ---------------------------------------------------------------------------------------


class functional_datapipe:
    """Class decorator: register a DataPipe class as the functional form ``name`` of its
    kind (``IterDataPipe`` or ``MapDataPipe``).

    Examples
    --------
    >>> from torcia.data import IterDataPipe, functional_datapipe
    >>> from torcia.data.datapipes import IterableWrapper
    >>> @functional_datapipe("times_two_demo")
    ... class TimesTwo(IterDataPipe):
    ...     def __init__(self, source):
    ...         self.source = source
    ...     def __iter__(self):
    ...         return (2 * x for x in self.source)
    >>> list(IterableWrapper([1, 2]).times_two_demo())
    [2, 4]
    >>> del IterDataPipe.functions["times_two_demo"]  # a name can be registered once
    """

    def __init__(self, name: str, enable_df_api_tracing: bool = False) -> None:
        self.name = name
        self.enable_df_api_tracing = enable_df_api_tracing

    def __call__(self, cls):
        target = cls.cls if isinstance(cls, non_deterministic) else cls
        if isinstance(target, type) and issubclass(target, IterDataPipe):
            IterDataPipe.register_datapipe_as_function(self.name, cls)
        elif isinstance(target, type) and issubclass(target, MapDataPipe):
            MapDataPipe.register_datapipe_as_function(self.name, cls)
        else:
            raise TypeError("`functional_datapipe` can only decorate IterDataPipe or "
                            f"MapDataPipe, got {cls!r}")
        return cls


class guaranteed_datapipes_determinism:
    """While active (a call or a ``with`` block), constructing a DataPipe marked
    :class:`non_deterministic` raises.

    Examples
    --------
    >>> from torcia.data import guaranteed_datapipes_determinism
    >>> with guaranteed_datapipes_determinism():
    ...     pass
    """

    def __init__(self) -> None:
        self.prev = _Flags.determinism
        _Flags.determinism = True

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        _Flags.determinism = self.prev


class non_deterministic:
    """Mark an ``IterDataPipe`` class as non-deterministic (or, given a function of the
    constructor's arguments, the instances for which it returns True), so that it cannot
    be built under :class:`guaranteed_datapipes_determinism`.

    Examples
    --------
    >>> from torcia.data import IterDataPipe, non_deterministic
    >>> from torcia.data import guaranteed_datapipes_determinism
    >>> @non_deterministic
    ... class Racy(IterDataPipe):
    ...     def __iter__(self):
    ...         yield 1
    >>> list(Racy())
    [1]
    >>> with guaranteed_datapipes_determinism():
    ...     Racy()
    Traceback (most recent call last):
    ...
    TypeError: Racy is non-deterministic, but you set 'guaranteed_datapipes_determinism'...
    """

    cls = None

    def __init__(self, arg) -> None:
        if isinstance(arg, type):
            if not issubclass(arg, IterDataPipe):
                raise TypeError("Only `IterDataPipe` can be decorated with "
                                f"`non_deterministic`, but {arg.__name__} is found")
            self.cls = arg
        elif callable(arg):
            self.deterministic_fn = arg
        else:
            raise TypeError(f"{arg} can not be decorated by non_deterministic")

    def _refuse(self):
        raise TypeError(
            f"{self.cls.__name__} is non-deterministic, but you set "
            "'guaranteed_datapipes_determinism'. You can turn off determinism for this "
            "DataPipe if that is acceptable for your application")

    def __call__(self, *args, **kwargs):
        if self.cls is not None:
            if _Flags.determinism:
                self._refuse()
            return self.cls(*args, **kwargs)
        # decorated with a function: this call decorates the class
        if not (isinstance(args[0], type) and issubclass(args[0], IterDataPipe)):
            raise TypeError(f"Only `IterDataPipe` can be decorated, but "
                            f"{getattr(args[0], '__name__', args[0])} is found")
        self.cls = args[0]
        return self._deterministic_wrapper

    def _deterministic_wrapper(self, *args, **kwargs):
        res = self.deterministic_fn(*args, **kwargs)
        if not isinstance(res, bool):
            raise TypeError("deterministic_fn of `non_deterministic` decorator is required "
                            f"to return a boolean value, but {type(res)} is found")
        if _Flags.determinism and res:
            self._refuse()
        return self.cls(*args, **kwargs)


def argument_validation(f):
    """Decorator (of a DataPipe's ``__init__``): arguments annotated ``IterDataPipe[T]``
    must be IterDataPipes whose element type is a subtype of ``T``.

    Examples
    --------
    >>> from torcia.data import IterDataPipe, argument_validation
    >>> class Ints(IterDataPipe[int]):
    ...     def __iter__(self):
    ...         yield 1
    >>> class Strs(IterDataPipe[str]):
    ...     def __iter__(self):
    ...         yield "a"
    >>> class Doubler(IterDataPipe[int]):
    ...     @argument_validation
    ...     def __init__(self, source: IterDataPipe[int]):
    ...         self.source = source
    >>> _ = Doubler(Ints())
    >>> Doubler(Strs())
    Traceback (most recent call last):
    ...
    TypeError: Expected type of argument 'source' as a subtype of hint int, but found str
    """
    signature = inspect.signature(f)
    hints = get_type_hints(f)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        for name, value in bound.arguments.items():
            hint = hints.get(name)
            origin = get_origin(hint) or hint
            if not (isinstance(origin, type) and issubclass(origin, IterDataPipe)):
                continue
            if not isinstance(value, IterDataPipe):
                raise TypeError(f"Expected argument '{name}' as a IterDataPipe, but found "
                                f"{type(value)}")
            wanted = _DataPipeType(get_args(hint)[0] if get_args(hint) else Any)
            if not value.type.issubtype(wanted):
                raise TypeError(f"Expected type of argument '{name}' as a subtype of hint "
                                f"{wanted}, but found {value.type}")
        return f(*args, **kwargs)

    return wrapper


def runtime_validation(f):
    """Decorator of a DataPipe's ``__iter__``: every element it yields must be of the
    pipe's element type (unless inside :class:`runtime_validation_disabled`).

    Examples
    --------
    >>> from torcia.data import IterDataPipe, runtime_validation
    >>> class Liar(IterDataPipe[int]):
    ...     @runtime_validation
    ...     def __iter__(self):
    ...         yield 1
    ...         yield "two"
    >>> list(Liar())
    Traceback (most recent call last):
    ...
    RuntimeError: Expected an instance as subtype of int, but found two(<class 'str'>)
    """
    if f.__name__ != "__iter__":
        raise TypeError(f"Can not decorate function {f.__name__} with 'runtime_validation'")

    @functools.wraps(f)
    def wrapper(self):
        if not _Flags.runtime_validation:
            yield from f(self)
            return
        for d in f(self):
            if not self.type.issubtype_of_instance(d):
                raise RuntimeError(f"Expected an instance as subtype of {self.type}, but "
                                   f"found {d}({type(d)})")
            yield d

    return wrapper


class runtime_validation_disabled:
    """While active (a call or a ``with`` block), :func:`runtime_validation` checks nothing.

    Examples
    --------
    >>> from torcia.data import runtime_validation_disabled
    >>> with runtime_validation_disabled():
    ...     pass
    """

    def __init__(self) -> None:
        self.prev = _Flags.runtime_validation
        _Flags.runtime_validation = False

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        _Flags.runtime_validation = self.prev


# ---------------------------------------------------------------------------------------
# sources and the built-in functional forms
# ---------------------------------------------------------------------------------------


class IterableWrapper(IterDataPipe):
    """A pipe over a Python iterable (iterated afresh each time).

    Examples
    --------
    >>> from torcia.data.datapipes import IterableWrapper
    >>> list(IterableWrapper("ab"))
    ['a', 'b']
    """

    def __init__(self, iterable):
        self.iterable = iterable

    def __iter__(self):
        yield from self.iterable

    def __len__(self):
        return len(self.iterable)


class SequenceWrapper(MapDataPipe):
    """A map pipe over a Python sequence.

    Examples
    --------
    >>> from torcia.data.datapipes import SequenceWrapper
    >>> SequenceWrapper("abc")[1]
    'b'
    """

    def __init__(self, sequence):
        self.sequence = sequence

    def __getitem__(self, index):
        return self.sequence[index]

    def __len__(self):
        return len(self.sequence)


@functional_datapipe("map")
class Mapper(IterDataPipe):
    """``pipe.map(fn)``: ``fn`` applied to each element.

    Examples
    --------
    >>> from torcia.data.datapipes import IterableWrapper
    >>> list(IterableWrapper([1, 2]).map(lambda x: -x))
    [-1, -2]
    """

    def __init__(self, datapipe, fn):
        self.datapipe = datapipe
        self.fn = fn

    def __iter__(self):
        for d in self.datapipe:
            yield self.fn(d)

    def __len__(self):
        return len(self.datapipe)


@functional_datapipe("filter")
class Filter(IterDataPipe):
    """``pipe.filter(fn)``: the elements for which ``fn`` is true.

    Examples
    --------
    >>> from torcia.data.datapipes import IterableWrapper
    >>> list(IterableWrapper(range(5)).filter(lambda x: x > 2))
    [3, 4]
    """

    def __init__(self, datapipe, filter_fn):
        self.datapipe = datapipe
        self.filter_fn = filter_fn

    def __iter__(self):
        for d in self.datapipe:
            keep = self.filter_fn(d)
            if not isinstance(keep, bool):
                raise ValueError(f"Boolean output is required for `filter_fn` of "
                                 f"FilterIterDataPipe, got {type(keep)}")
            if keep:
                yield d


def _check_batch_size(batch_size):
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
        raise AssertionError("Batch size is required to be larger than 0!")


@functional_datapipe("batch")
class Batcher(IterDataPipe):
    """``pipe.batch(batch_size, drop_last=False)``: consecutive elements in
    :class:`DataChunk` s of ``batch_size``.

    Examples
    --------
    >>> from torcia.data.datapipes import IterableWrapper
    >>> list(IterableWrapper(range(5)).batch(2, drop_last=True))
    [[0, 1], [2, 3]]
    """

    def __init__(self, datapipe, batch_size, drop_last=False, wrapper_class=DataChunk):
        _check_batch_size(batch_size)
        self.datapipe = datapipe
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.wrapper_class = wrapper_class

    def __iter__(self):
        batch = []
        for d in self.datapipe:
            batch.append(d)
            if len(batch) == self.batch_size:
                yield self.wrapper_class(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.wrapper_class(batch)

    def __len__(self):
        n = len(self.datapipe)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


@functional_datapipe("map")
class MapMapper(MapDataPipe):
    """``map_pipe.map(fn)``: ``fn`` applied to each item on access.

    Examples
    --------
    >>> from torcia.data.datapipes import SequenceWrapper
    >>> SequenceWrapper([1, 2]).map(str)[0]
    '1'
    """

    def __init__(self, datapipe, fn):
        self.datapipe = datapipe
        self.fn = fn

    def __getitem__(self, index):
        return self.fn(self.datapipe[index])

    def __len__(self):
        return len(self.datapipe)


@functional_datapipe("batch")
class MapBatcher(MapDataPipe):
    """``map_pipe.batch(batch_size, drop_last=False)``: item ``i`` is the
    :class:`DataChunk` of items ``i * batch_size`` onwards.

    Examples
    --------
    >>> from torcia.data.datapipes import SequenceWrapper
    >>> dp = SequenceWrapper(range(5)).batch(2)
    >>> len(dp), dp[2]
    (3, [4])
    """

    def __init__(self, datapipe, batch_size, drop_last=False, wrapper_class=DataChunk):
        _check_batch_size(batch_size)
        self.datapipe = datapipe
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.wrapper_class = wrapper_class

    def __getitem__(self, index):
        if not 0 <= index < len(self):
            raise IndexError(f"Index {index} is out of bound.")
        start = index * self.batch_size
        stop = min(start + self.batch_size, len(self.datapipe))
        return self.wrapper_class([self.datapipe[i] for i in range(start, stop)])

    def __len__(self):
        n = len(self.datapipe)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
