"""Constraints: the values a parameter or a sample may take (``torch.distributions.constraints``).

A constraint's :meth:`Constraint.check` returns a boolean tensor of shape
``value.shape[:value.dim() - event_dim]``; a distribution's argument validation raises a
``ValueError`` naming the constraint where any entry is False.

Examples
--------
>>> import torcia
>>> from torcia.distributions import constraints
>>> constraints.positive.check(torcia.tensor([1.0, -1.0])).tolist()
[True, False]
"""

from __future__ import annotations

import numpy as np

import torcia

__all__ = [
    "Constraint", "boolean", "cat", "corr_cholesky", "dependent", "dependent_property",
    "greater_than", "greater_than_eq", "independent", "integer_interval", "interval",
    "half_open_interval", "is_dependent", "less_than", "lower_cholesky", "lower_triangular",
    "multinomial", "nonnegative", "nonnegative_integer", "one_hot", "positive",
    "positive_semidefinite", "positive_definite", "positive_integer", "real", "real_vector",
    "simplex", "square", "stack", "symmetric", "unit_interval",
]


class Constraint:
    """A region over which a variable is valid.

    ``is_discrete`` says whether the region is discrete; ``event_dim`` how many rightmost
    dimensions together form one event.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> class Even(constraints.Constraint):
    ...     def check(self, value):
    ...         return value % 2 == 0
    >>> Even().check(torcia.tensor([2, 3]))
    tensor([ True, False])
    """

    is_discrete = False
    event_dim = 0

    def check(self, value):
        """A boolean tensor saying, per event, whether ``value`` satisfies the constraint."""
        raise NotImplementedError

    def __repr__(self):
        return self.__class__.__name__[1:] + "()"


class _Dependent(Constraint):
    """A placeholder for variables whose support depends on other variables."""

    def __init__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        self._is_discrete = is_discrete
        self._event_dim = event_dim
        super().__init__()

    @property
    def is_discrete(self):
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self):
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        if is_discrete is NotImplemented:
            is_discrete = self._is_discrete
        if event_dim is NotImplemented:
            event_dim = self._event_dim
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, x):
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint) -> bool:
    """Whether ``constraint`` is a :data:`dependent` placeholder.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> constraints.is_dependent(constraints.dependent), constraints.is_dependent(constraints.real)
    (True, False)
    """
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property that is also a dependent constraint (``support`` of Uniform, etc.).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> class Box(torcia.distributions.Distribution):
    ...     arg_constraints = {}
    ...     @constraints.dependent_property(is_discrete=False, event_dim=0)
    ...     def support(self):
    ...         return constraints.interval(0.0, 1.0)
    >>> constraints.is_dependent(Box.support)
    True
    >>> Box(validate_args=False).support.check(torcia.tensor([0.5, 2.0]))
    tensor([ True, False])
    """

    def __init__(self, fn=None, *, is_discrete=NotImplemented, event_dim=NotImplemented):
        property.__init__(self, fn)
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    def __call__(self, fn):
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


class _IndependentConstraint(Constraint):
    """Treats ``reinterpreted_batch_ndims`` batch dimensions of a constraint as event dims.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> c = constraints.independent(constraints.positive, 1)
    >>> c.check(torcia.tensor([[1.0, 2.0], [1.0, -2.0]])), c.event_dim
    (tensor([ True, False]), 1)
    """

    def __init__(self, base_constraint, reinterpreted_batch_ndims):
        assert isinstance(base_constraint, Constraint)
        assert isinstance(reinterpreted_batch_ndims, int) and reinterpreted_batch_ndims >= 0
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__()

    @property
    def is_discrete(self):
        return self.base_constraint.is_discrete

    @property
    def event_dim(self):
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value):
        result = self.base_constraint.check(value)
        if result.dim() < self.reinterpreted_batch_ndims:
            expected = self.base_constraint.event_dim + self.reinterpreted_batch_ndims
            raise ValueError(f"Expected value.dim() >= {expected} but got {value.dim()}")
        result = result.reshape(
            tuple(result.shape[:result.dim() - self.reinterpreted_batch_ndims]) + (-1,))
        return result.all(-1)

    def __repr__(self):
        return (f"{self.__class__.__name__[1:]}({self.base_constraint!r}, "
                f"{self.reinterpreted_batch_ndims})")


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value):
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value):
        is_boolean = (value == 0) | (value == 1)
        is_normalized = value.sum(-1).eq(1)
        return is_boolean.all(-1) & is_normalized


class _IntegerInterval(Constraint):
    """Integers in ``[lower_bound, upper_bound]``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> constraints.integer_interval(0, 3).check(torcia.tensor([0.0, 2.0, 2.5, 4.0]))
    tensor([ True,  True, False, False])
    """

    is_discrete = True

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return (value % 1 == 0) & (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return (f"{self.__class__.__name__[1:]}(lower_bound={self.lower_bound}, "
                f"upper_bound={self.upper_bound})")


class _IntegerLessThan(Constraint):
    is_discrete = True

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return (value % 1 == 0) & (value <= self.upper_bound)

    def __repr__(self):
        return f"{self.__class__.__name__[1:]}(upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__()

    def check(self, value):
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self):
        return f"{self.__class__.__name__[1:]}(lower_bound={self.lower_bound})"


class _Real(Constraint):
    def check(self, value):
        return value == value  # False only for NaN


class _GreaterThan(Constraint):
    """Real values above ``lower_bound``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> constraints.greater_than(0.0).check(torcia.tensor([-1.0, 0.0, 1.0]))
    tensor([False, False,  True])
    """

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__()

    def check(self, value):
        return self.lower_bound < value

    def __repr__(self):
        return f"{self.__class__.__name__[1:]}(lower_bound={self.lower_bound})"


class _GreaterThanEq(Constraint):
    """Real values at or above ``lower_bound``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> constraints.greater_than_eq(0.0).check(torcia.tensor([-1.0, 0.0, 1.0]))
    tensor([False,  True,  True])
    """

    def __init__(self, lower_bound):
        self.lower_bound = lower_bound
        super().__init__()

    def check(self, value):
        return self.lower_bound <= value

    def __repr__(self):
        return f"{self.__class__.__name__[1:]}(lower_bound={self.lower_bound})"


class _LessThan(Constraint):
    """Real values below ``upper_bound``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> constraints.less_than(0.0).check(torcia.tensor([-1.0, 0.0, 1.0]))
    tensor([ True, False, False])
    """

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return value < self.upper_bound

    def __repr__(self):
        return f"{self.__class__.__name__[1:]}(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    """Real values in ``[lower_bound, upper_bound]``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> constraints.interval(0.0, 1.0).check(torcia.tensor([-0.5, 0.0, 1.0, 1.5]))
    tensor([False,  True,  True, False])
    """

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self):
        return (f"{self.__class__.__name__[1:]}(lower_bound={self.lower_bound}, "
                f"upper_bound={self.upper_bound})")


class _HalfOpenInterval(Constraint):
    """Real values in ``[lower_bound, upper_bound)``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> constraints.half_open_interval(0.0, 1.0).check(torcia.tensor([0.0, 0.5, 1.0]))
    tensor([ True,  True, False])
    """

    def __init__(self, lower_bound, upper_bound):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        super().__init__()

    def check(self, value):
        return (self.lower_bound <= value) & (value < self.upper_bound)

    def __repr__(self):
        return (f"{self.__class__.__name__[1:]}(lower_bound={self.lower_bound}, "
                f"upper_bound={self.upper_bound})")


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value):
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _Multinomial(Constraint):
    """Nonnegative integer vectors summing to at most ``upper_bound``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> constraints.multinomial(3).check(torcia.tensor([[1.0, 2.0], [2.0, 2.0]]))
    tensor([ True, False])
    """

    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, x):
        return (x >= 0).all(-1) & (x.sum(-1) <= self.upper_bound)


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        value_tril = value.tril()
        return (value_tril == value).reshape(tuple(value.shape[:-2]) + (-1,)).min(-1).values


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value):
        value_tril = value.tril()
        lower = (value_tril == value).reshape(tuple(value.shape[:-2]) + (-1,)).min(-1).values
        positive_diagonal = (value.diagonal(dim1=-2, dim2=-1) > 0).min(-1).values
        return lower & positive_diagonal


class _CorrCholesky(Constraint):
    """Lower Cholesky factors of correlation matrices: rows of unit Euclidean norm."""

    event_dim = 2

    def check(self, value):
        tol = 10 * float(_eps(value.dtype)) * value.shape[-1]
        row_norm = torcia.linalg.norm(value.detach(), dim=-1)
        unit_row_norm = ((row_norm - 1.0).abs() <= tol).all(-1)
        return _LowerCholesky().check(value) & unit_row_norm


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        return torcia.full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1],
                           dtype=torcia.bool, device=value.device)


class _Symmetric(_Square):
    def check(self, value):
        square_check = super().check(value)
        if not bool(square_check.all()):
            return square_check
        return torcia.isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        sym_check = super().check(value)
        if not bool(sym_check.all()):
            return sym_check
        return torcia.linalg.eigvalsh(value).ge(0).all(-1)


class _PositiveDefinite(_Symmetric):
    def check(self, value):
        sym_check = super().check(value)
        if not bool(sym_check.all()):
            return sym_check
        return torcia.linalg.eigvalsh(value).gt(0).all(-1)


class _Cat(Constraint):
    """Applies ``cseq`` to submatrices of ``dim`` of sizes ``lengths``, like ``torcia.cat``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> c = constraints.cat([constraints.positive, constraints.real], dim=0, lengths=[1, 2])
    >>> c.check(torcia.tensor([1.0, -2.0, 3.0])), c.check(torcia.tensor([-1.0, 0.0, 0.0]))
    (tensor([True, True, True]), tensor([False,  True,  True]))
    """

    def __init__(self, cseq, dim=0, lengths=None):
        assert all(isinstance(c, Constraint) for c in cseq)
        self.cseq = list(cseq)
        if lengths is None:
            lengths = [1] * len(self.cseq)
        self.lengths = list(lengths)
        assert len(self.lengths) == len(self.cseq)
        self.dim = dim
        super().__init__()

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        return max(c.event_dim for c in self.cseq)

    def check(self, value):
        assert -value.dim() <= self.dim < value.dim()
        checks = []
        start = 0
        for constr, length in zip(self.cseq, self.lengths):
            v = value.narrow(self.dim, start, length)
            checks.append(constr.check(v))
            start = start + length
        return torcia.cat(checks, self.dim)


class _Stack(Constraint):
    """Applies ``cseq`` to the slices of ``dim``, like ``torcia.stack``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import constraints
    >>> c = constraints.stack([constraints.positive, constraints.real], dim=0)
    >>> c.check(torcia.tensor([1.0, -2.0]))
    tensor([True, True])
    """

    def __init__(self, cseq, dim=0):
        assert all(isinstance(c, Constraint) for c in cseq)
        self.cseq = list(cseq)
        self.dim = dim
        super().__init__()

    @property
    def is_discrete(self):
        return any(c.is_discrete for c in self.cseq)

    @property
    def event_dim(self):
        dim = max(c.event_dim for c in self.cseq)
        if self.dim + dim < 0:
            dim += 1
        return dim

    def check(self, value):
        assert -value.dim() <= self.dim < value.dim()
        vs = [value.select(self.dim, i) for i in range(value.shape[self.dim])]
        return torcia.stack([constr.check(v) for v, constr in zip(vs, self.cseq)], self.dim)


def _eps(dtype):
    return np.finfo(dtype.to_numpy()).eps


dependent = _Dependent()
dependent_property = _DependentProperty
independent = _IndependentConstraint
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
positive_integer = _IntegerGreaterThan(1)
integer_interval = _IntegerInterval
real = _Real()
real_vector = independent(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
multinomial = _Multinomial
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
lower_triangular = _LowerTriangular()
lower_cholesky = _LowerCholesky()
corr_cholesky = _CorrCholesky()
square = _Square()
symmetric = _Symmetric()
positive_semidefinite = _PositiveSemidefinite()
positive_definite = _PositiveDefinite()
cat = _Cat
stack = _Stack
