"""Random benchmark inputs, as ``torch.utils.benchmark``'s fuzzers: a :class:`Fuzzer`
draws parameter sets (:class:`FuzzedParameter`, :class:`ParameterAlias`), rejects those
that break its constraints, and builds the tensors (:class:`FuzzedTensor`,
:class:`FuzzedSparseTensor`) the parameters describe. A seed makes the draws repeatable;
the NumPy ``RandomState`` draws are PyTorch's, so a seed gives the same parameters."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

import torcia

__all__ = ["FuzzedParameter", "FuzzedSparseTensor", "FuzzedTensor", "Fuzzer",
           "ParameterAlias"]

_DISTRIBUTIONS = ("loguniform", "uniform")


class FuzzedParameter:
    """A parameter drawn from ``"uniform"`` (ints when both bounds are ints),
    ``"loguniform"`` (ints) or a dict ``{value: probability}``; ``strict`` keeps one draw
    across the retries of a rejected set.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.utils.benchmark import FuzzedParameter
    >>> p = FuzzedParameter("k", minval=1, maxval=1024, distribution="loguniform")
    >>> 1 <= p.sample(np.random.RandomState(0)) <= 1024
    True
    """

    def __init__(self, name, minval=None, maxval=None, distribution=None, strict=False):
        self._name = name
        self._minval = minval
        self._maxval = maxval
        self._distribution = self._check_distribution(distribution)
        self.strict = strict

    @property
    def name(self):
        return self._name

    def sample(self, state):
        if self._distribution == "loguniform":
            return self._loguniform(state)
        if self._distribution == "uniform":
            return self._uniform(state)
        return self._custom_distribution(state)

    def _check_distribution(self, distribution):
        if not isinstance(distribution, dict):
            if distribution not in _DISTRIBUTIONS:
                raise AssertionError(f"Unknown distribution: {distribution}")
            return distribution
        if any(p < 0 for p in distribution.values()):
            raise AssertionError("Probabilities cannot be negative")
        if abs(sum(distribution.values()) - 1) > 1e-5:
            raise AssertionError("Distribution is not normalized")
        if self._minval is not None or self._maxval is not None:
            raise AssertionError("When passing a custom distribution, 'minval' and 'maxval' "
                                 "must be None")
        return distribution

    def _loguniform(self, state):
        out = int(2 ** state.uniform(
            low=np.log2(self._minval) if self._minval is not None else None,
            high=np.log2(self._maxval) if self._maxval is not None else None))
        if self._minval is not None and out < self._minval:
            return self._minval
        if self._maxval is not None and out > self._maxval:
            return self._maxval
        return out

    def _uniform(self, state):
        if isinstance(self._minval, int) and isinstance(self._maxval, int):
            return int(state.randint(low=self._minval, high=self._maxval + 1))
        return state.uniform(low=self._minval, high=self._maxval)

    def _custom_distribution(self, state):
        index = state.choice(np.arange(len(self._distribution)),
                             p=tuple(self._distribution.values()))
        return list(self._distribution)[index]


class ParameterAlias:
    """A parameter that takes another's value (``alias_to`` names it).

    Examples
    --------
    >>> from torcia.utils.benchmark import ParameterAlias
    >>> ParameterAlias("n")
    ParameterAlias[alias_to: n]
    """

    def __init__(self, alias_to):
        self.alias_to = alias_to

    def __repr__(self):
        return f"ParameterAlias[alias_to: {self.alias_to}]"


def _dtype_size(dtype) -> int:
    return dtype.itemsize


def _prod(values, base=1):
    return functools.reduce(lambda x, y: int(x) * int(y), values, base)


class FuzzedTensor:
    """A tensor whose ``size`` (and ``steps``, the strides of a sliced larger tensor)
    name parameters or are ints; with probability ``1 - probability_contiguous`` its
    memory order is a random permutation. ``min_elements``, ``max_elements`` and
    ``max_allocation_bytes`` reject parameter sets.

    Examples
    --------
    >>> import numpy as np
    >>> import torcia
    >>> from torcia.utils.benchmark import FuzzedTensor
    >>> t, props = FuzzedTensor("x", size=("n", 3), probability_contiguous=1.0)._make_tensor(
    ...     {"n": 4}, np.random.RandomState(0))
    >>> t.shape, props["numel"], props["is_contiguous"]
    (torcia.Size([4, 3]), 12, True)
    """

    def __init__(self, name, size, steps=None, probability_contiguous=0.5, min_elements=None,
                 max_elements=None, max_allocation_bytes=None, dim_parameter=None,
                 roll_parameter=None, dtype=torcia.float32, cuda=False,
                 tensor_constructor=None):
        self._name = name
        self._size = size
        self._steps = steps
        self._probability_contiguous = probability_contiguous
        self._min_elements = min_elements
        self._max_elements = max_elements
        self._max_allocation_bytes = max_allocation_bytes
        self._dim_parameter = dim_parameter
        self._dtype = dtype
        self._cuda = cuda
        self._tensor_constructor = tensor_constructor

    @property
    def name(self):
        return self._name

    @staticmethod
    def default_tensor_constructor(size, dtype, **kwargs):
        if dtype.is_floating_point or dtype.is_complex:
            return torcia.rand(tuple(size), dtype=dtype)
        return torcia.randint(1, 127, tuple(size), dtype=dtype)

    def _make_tensor(self, params, state):
        size, steps, allocation = self._get_size_and_steps(params)
        constructor = self._tensor_constructor or self.default_tensor_constructor
        raw = constructor(size=allocation, dtype=self._dtype, **params)
        if self._cuda:
            raw = raw.cuda()
        dim = len(size)
        order = np.arange(dim)
        if state.rand() > self._probability_contiguous:
            while dim > 1 and np.all(order == np.arange(dim)):
                order = state.permutation(raw.dim())
            raw = raw.permute(tuple(int(o) for o in order)).contiguous()
            raw = raw.permute(tuple(int(o) for o in np.argsort(order)))
        tensor = raw[tuple(slice(0, n * s, s) for n, s in zip(size, steps))]
        properties = {"numel": int(tensor.numel()), "order": order, "steps": steps,
                      "is_contiguous": tensor.is_contiguous(), "dtype": str(self._dtype)}
        return tensor, properties

    def _get_size_and_steps(self, params):
        dim = params[self._dim_parameter] if self._dim_parameter is not None \
            else len(self._size)

        def resolve(values):
            values = tuple(params.get(v, v) for v in values)[:dim]
            return values + (1,) * (dim - len(values))

        size, steps = resolve(self._size), resolve(self._steps or ())
        return size, steps, tuple(n * s for n, s in zip(size, steps))

    def satisfies_constraints(self, params) -> bool:
        size, _, allocation = self._get_size_and_steps(params)
        elements = _prod(size)
        if elements < 0:
            raise AssertionError("Computed number of elements is negative")
        allocated = _prod(allocation, base=_dtype_size(self._dtype))

        def over(left, right):
            return left is not None and right is not None and left > right

        return not (over(elements, self._max_elements) or over(self._min_elements, elements)
                    or over(allocated, self._max_allocation_bytes))


class FuzzedSparseTensor(FuzzedTensor):
    """A sparse COO tensor: its ``size`` as :class:`FuzzedTensor`'s, and parameters named
    by ``density`` (nnz is ``ceil(sum(size) * density)``), ``coalesced`` and
    ``sparse_dim``.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.utils.benchmark import FuzzedSparseTensor
    >>> t, props = FuzzedSparseTensor("s", size=(8, 8), density="density",
    ...                               coalesced="coalesced")._make_tensor(
    ...     {"density": 0.5, "coalesced": True}, np.random.RandomState(0))
    >>> t.is_sparse, props["sparse_dim"], props["is_coalesced"]
    (True, 2, True)
    """

    def __init__(self, name, size, min_elements=None, max_elements=None, dim_parameter=None,
                 sparse_dim=None, nnz=None, density=None, coalesced=None,
                 dtype=torcia.float32, cuda=False):
        super().__init__(name=name, size=size, min_elements=min_elements,
                         max_elements=max_elements, dim_parameter=dim_parameter, dtype=dtype,
                         cuda=cuda)
        self._density = density
        self._coalesced = coalesced
        self._sparse_dim = sparse_dim

    @staticmethod
    def sparse_tensor_constructor(size, dtype, sparse_dim, nnz, is_coalesced):
        """``nnz`` random entries (duplicated, with other values, when not coalesced)."""
        if isinstance(size, (int, float)):
            size = [size] * sparse_dim
        if all(size[d] <= 0 for d in range(sparse_dim)) and nnz != 0:
            raise AssertionError("invalid arguments")
        v_size = [nnz, *size[sparse_dim:]]
        if dtype.is_floating_point:
            v = torcia.rand(tuple(v_size), dtype=dtype)
        else:
            v = torcia.randint(1, 127, tuple(v_size), dtype=dtype)
        i = (torcia.rand(sparse_dim, nnz) * torcia.tensor(
            [float(s) for s in size[:sparse_dim]]).unsqueeze(1)).long()
        if not is_coalesced:
            v = torcia.cat([v, torcia.randn_like(v)], 0)
            i = torcia.cat([i, i], 1)
        x = torcia.sparse_coo_tensor(i, v, tuple(size))
        return x.coalesce() if is_coalesced else x

    def _make_tensor(self, params, state):
        size, _, _ = self._get_size_and_steps(params)
        density = params["density"]
        nnz = math.ceil(sum(size) * density)
        if nnz > sum(size):
            raise AssertionError("nnz cannot exceed total number of elements")
        is_coalesced = params["coalesced"]
        sparse_dim = min(params["sparse_dim"] if self._sparse_dim else len(size), len(size))
        tensor = self.sparse_tensor_constructor(size, self._dtype, sparse_dim, nnz,
                                                is_coalesced)
        if self._cuda:
            tensor = tensor.cuda()
        properties = {"numel": int(tensor.numel()), "shape": tensor.size(),
                      "is_coalesced": tensor.is_coalesced(), "density": density,
                      "sparsity": 1.0 - density, "sparse_dim": tensor.sparse_dim(),
                      "dense_dim": tensor.dense_dim(),
                      "is_hybrid": len(size[tensor.sparse_dim():]) > 0,
                      "dtype": str(self._dtype)}
        return tensor, properties


class Fuzzer:
    """Draw parameter sets and build tensors from them: :meth:`take` yields ``(tensors,
    tensor_properties, params)`` dicts keyed by name.

    Parameters
    ----------
    parameters : list of FuzzedParameter (or lists of them)
    tensors : list of FuzzedTensor (or lists of them)
    constraints : list of callable, optional
        ``constraint(params) -> bool``; a set failing one is drawn again.
    seed : int, optional

    Examples
    --------
    >>> from torcia.utils.benchmark import Fuzzer, FuzzedParameter, FuzzedTensor
    >>> fuzzer = Fuzzer(
    ...     parameters=[FuzzedParameter("n", minval=4, maxval=16, distribution="uniform")],
    ...     tensors=[FuzzedTensor("x", size=("n", 2), probability_contiguous=0.5)],
    ...     constraints=[lambda p: p["n"] % 2 == 0], seed=0)
    >>> [tensors["x"].shape[0] % 2 for tensors, _, _ in fuzzer.take(3)]
    [0, 0, 0]
    """

    def __init__(self, parameters, tensors, constraints=None, seed=None):
        if seed is None:
            seed = int(np.random.RandomState().randint(0, 2 ** 32 - 1, dtype=np.int64))
        self._seed = seed
        self._parameters = self._unpack(parameters, FuzzedParameter)
        self._tensors = self._unpack(tensors, FuzzedTensor)
        self._constraints = constraints or ()
        overlap = {p.name for p in self._parameters} & {t.name for t in self._tensors}
        if overlap:
            raise ValueError(f"Duplicate names in parameters and tensors: {overlap}")
        self._rejections = 0
        self._total_generated = 0

    @staticmethod
    def _unpack(values, cls):
        return tuple(itertools.chain.from_iterable(
            [v] if isinstance(v, cls) else v for v in values))

    def take(self, n):
        """``n`` draws; the same seed gives the same draws."""
        state = np.random.RandomState(self._seed)
        torcia.manual_seed(int(state.randint(low=0, high=2 ** 63, dtype=np.int64)))
        for _ in range(n):
            params = self._generate(state)
            tensors, properties = {}, {}
            for t in self._tensors:
                tensors[t.name], properties[t.name] = t._make_tensor(params, state)
            yield tensors, properties, params

    @property
    def rejection_rate(self):
        """The share of drawn parameter sets rejected so far."""
        return self._rejections / self._total_generated if self._total_generated else 0.0

    def _generate(self, state):
        strict: dict = {}
        for _ in range(1000):
            candidate = {}
            for p in self._parameters:
                if p.strict and p.name in strict:
                    candidate[p.name] = strict[p.name]
                else:
                    candidate[p.name] = p.sample(state)
                    if p.strict:
                        strict[p.name] = candidate[p.name]
            candidate = self._resolve_aliases(candidate)
            self._total_generated += 1
            if not all(f(candidate) for f in self._constraints) or not all(
                    t.satisfies_constraints(candidate) for t in self._tensors):
                self._rejections += 1
                continue
            return candidate
        raise ValueError("Failed to generate a set of valid parameters.")

    @staticmethod
    def _resolve_aliases(params):
        params = dict(params)
        pending = sum(isinstance(v, ParameterAlias) for v in params.values())
        while pending:
            for k, v in list(params.items()):
                if isinstance(v, ParameterAlias):
                    params[k] = params[v.alias_to]
            now = sum(isinstance(v, ParameterAlias) for v in params.values())
            if now == pending:
                raise ValueError(f"ParameterAlias cycle detected\n{params}")
            pending = now
        return params
