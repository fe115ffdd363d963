"""Invertible transforms with log-abs-det-Jacobians, as ``torch.distributions.transforms``.

A :class:`Transform` maps ``x`` to ``y = t(x)``; ``t.inv(y)`` maps back and
``t.log_abs_det_jacobian(x, y)`` is log|dy/dx|, summed over the transform's event
dimensions. They build :class:`~torcia.distributions.TransformedDistribution` and the
bijections of :mod:`~torcia.distributions.constraint_registry`.

Examples
--------
>>> import torcia
>>> from torcia.distributions.transforms import ExpTransform
>>> t = ExpTransform()
>>> x = torcia.tensor([0.0, 1.0])
>>> y = t(x)
>>> [round(v, 6) for v in t.inv(y).tolist()], t.log_abs_det_jacobian(x, y).tolist()
([0.0, 1.0], [0.0, 1.0])
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
import weakref

import torcia
from torcia.distributions import constraints
from torcia.distributions.utils import (
    _sum_rightmost,
    finfo,
    tril_matrix_to_vec,
    vec_to_tril_matrix,
)

__all__ = [
    "AbsTransform", "AffineTransform", "CatTransform", "ComposeTransform",
    "CorrCholeskyTransform", "CumulativeDistributionTransform", "ExpTransform",
    "IndependentTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform",
    "PowerTransform", "ReshapeTransform", "SigmoidTransform", "SoftplusTransform",
    "TanhTransform", "SoftmaxTransform", "StackTransform", "StickBreakingTransform",
    "Transform", "identity_transform",
]


def _softplus(x):
    return x.clamp(min=0) + torcia.log1p(torcia.exp(-x.abs()))


def _pad_left(x, value):
    """One ``value`` prepended along the last dimension (``F.pad(x, [1, 0], value=...)``)."""
    return torcia.cat([x.new_full(tuple(x.shape[:-1]) + (1,), value), x], -1)


def _pad_right(x, value):
    """One ``value`` appended along the last dimension (``F.pad(x, [0, 1], value=...)``)."""
    return torcia.cat([x, x.new_full(tuple(x.shape[:-1]) + (1,), value)], -1)


class Transform:
    """The abstract class of invertible transforms.

    Subclasses implement ``_call``, ``_inverse`` and ``log_abs_det_jacobian``.
    ``cache_size=1`` remembers the latest pair, so ``t.inv(t(x))`` returns ``x`` itself.

    Examples
    --------
    >>> import torcia
    >>> t = torcia.distributions.ExpTransform()
    >>> isinstance(t, torcia.distributions.Transform)
    True
    >>> y = t(torcia.tensor([0.0, 1.0]))
    >>> y, t.inv(y), t.log_abs_det_jacobian(torcia.tensor([0.0, 1.0]), y)
    (tensor([1.0000, 2.7183]), tensor([0.0000, 1.0000]), tensor([0., 1.]))
    """

    bijective = False
    domain = constraints.real
    codomain = constraints.real

    def __init__(self, cache_size: int = 0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._inv = None
        if cache_size == 1:
            self._cached_x_y = None, None
        super().__init__()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_inv"] = None
        return state

    @property
    def event_dim(self):
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self):
        """The inverse transform, such that ``t.inv(t(x)) == x``."""
        inv = None
        if self._inv is not None:
            inv = self._inv()
        if inv is None:
            inv = _InverseTransform(self)
            self._inv = weakref.ref(inv)
        return inv

    @property
    def sign(self):
        """The sign of the Jacobian's determinant, where it is defined."""
        raise NotImplementedError

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return id(self)

    def __call__(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        """log|det dy/dx| at ``(x, y)``."""
        raise NotImplementedError

    def __repr__(self):
        return self.__class__.__name__ + "()"

    def forward_shape(self, shape):
        """The output shape for an input of ``shape``."""
        return shape

    def inverse_shape(self, shape):
        """The input shape for an output of ``shape``."""
        return shape


class _InverseTransform(Transform):
    def __init__(self, transform: Transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return self._inv.codomain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return self._inv.domain

    @property
    def bijective(self):
        return self._inv.bijective

    @property
    def sign(self):
        return self._inv.sign

    @property
    def inv(self):
        return self._inv

    def with_cache(self, cache_size=1):
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other):
        if not isinstance(other, _InverseTransform):
            return False
        return self._inv == other._inv

    def __hash__(self):
        return hash(("inv", self._inv))

    def __repr__(self):
        return f"{self.__class__.__name__}({repr(self._inv)})"

    def __call__(self, x):
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape):
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape):
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """Applies ``parts`` in order: ``ComposeTransform([f, g])(x) == g(f(x))``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import ComposeTransform, ExpTransform, AffineTransform
    >>> t = ComposeTransform([AffineTransform(0.0, 2.0), ExpTransform()])
    >>> t(torcia.tensor([0.0, 0.5]))
    tensor([1.0000, 2.7183])
    """

    def __init__(self, parts, cache_size=0):
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def __eq__(self, other):
        if not isinstance(other, ComposeTransform):
            return False
        return self.parts == other.parts

    def __hash__(self):
        return hash(tuple(self.parts))

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        assert event_dim >= domain.event_dim
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        assert event_dim >= codomain.event_dim
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @functools.cached_property
    def bijective(self):
        return all(p.bijective for p in self.parts)

    @functools.cached_property
    def sign(self):
        sign = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self):
        inv = None
        if self._inv is not None:
            inv = self._inv()
        if inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv = weakref.ref(inv)
            inv._inv = weakref.ref(self)
        return inv

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x):
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return torcia.zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        terms = []
        event_dim = self.domain.event_dim
        for part, x, y in zip(self.parts, xs[:-1], xs[1:]):
            terms.append(_sum_rightmost(part.log_abs_det_jacobian(x, y),
                                        event_dim - part.domain.event_dim))
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return functools.reduce(operator.add, terms)

    def forward_shape(self, shape):
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape):
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self):
        fmt_string = self.__class__.__name__ + "(\n    "
        fmt_string += ",\n    ".join([p.__repr__() for p in self.parts])
        fmt_string += "\n)"
        return fmt_string


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """Treats ``reinterpreted_batch_ndims`` batch dimensions of ``base_transform`` as event
    dimensions (its log-det-Jacobian sums over them).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import IndependentTransform, ExpTransform
    >>> t = IndependentTransform(ExpTransform(), 1)
    >>> x = torcia.tensor([[0.0, 1.0]])
    >>> t.log_abs_det_jacobian(x, t(x))
    tensor([1.])
    """

    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims,
                                    cache_size=cache_size)

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        return constraints.independent(self.base_transform.domain,
                                       self.reinterpreted_batch_ndims)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        return constraints.independent(self.base_transform.codomain,
                                       self.reinterpreted_batch_ndims)

    @property
    def bijective(self):
        return self.base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        if x.dim() < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        result = self.base_transform.log_abs_det_jacobian(x, y)
        return _sum_rightmost(result, self.reinterpreted_batch_ndims)

    def __repr__(self):
        return (f"{self.__class__.__name__}({repr(self.base_transform)}, "
                f"{self.reinterpreted_batch_ndims})")

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    """Reshapes the rightmost ``in_shape`` dimensions to ``out_shape`` (unit Jacobian).

    Examples
    --------
    >>> import torcia
    >>> t = torcia.distributions.ReshapeTransform((4,), (2, 2))
    >>> t(torcia.arange(4.0)).shape
    torcia.Size([2, 2])
    """

    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape = torcia.Size(in_shape)
        self.out_shape = torcia.Size(out_shape)
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @constraints.dependent_property
    def domain(self):
        return constraints.independent(constraints.real, len(self.in_shape))

    @constraints.dependent_property
    def codomain(self):
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x):
        batch_shape = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return x.reshape(batch_shape + tuple(self.out_shape))

    def _inverse(self, y):
        batch_shape = tuple(y.shape[:y.dim() - len(self.out_shape)])
        return y.reshape(batch_shape + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x, y):
        batch_shape = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return x.new_zeros(batch_shape)

    def forward_shape(self, shape):
        if len(shape) < len(self.in_shape):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(self.in_shape)
        if tuple(shape[cut:]) != tuple(self.in_shape):
            raise ValueError(f"Shape mismatch: expected {tuple(shape[cut:])} "
                             f"but got {tuple(self.in_shape)}")
        return torcia.Size(tuple(shape[:cut]) + tuple(self.out_shape))

    def inverse_shape(self, shape):
        if len(shape) < len(self.out_shape):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(self.out_shape)
        if tuple(shape[cut:]) != tuple(self.out_shape):
            raise ValueError(f"Shape mismatch: expected {tuple(shape[cut:])} "
                             f"but got {tuple(self.out_shape)}")
        return torcia.Size(tuple(shape[:cut]) + tuple(self.in_shape))


class ExpTransform(Transform):
    """``y = exp(x)``.

    Examples
    --------
    >>> import torcia
    >>> t = torcia.distributions.ExpTransform()
    >>> t(torcia.tensor([0.0, 1.0]))
    tensor([1.0000, 2.7183])
    >>> t.inv(torcia.tensor([1.0]))
    tensor([0.])
    """

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, ExpTransform)

    def __hash__(self):
        return hash(type(self))

    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class PowerTransform(Transform):
    """``y = x ** exponent``.

    Examples
    --------
    >>> import torcia
    >>> torcia.distributions.PowerTransform(2.0)(torcia.tensor([3.0]))
    tensor([9.])
    """

    domain = constraints.positive
    codomain = constraints.positive
    bijective = True

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        (self.exponent,) = _broadcast_all_tensors(exponent)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

    @functools.cached_property
    def sign(self):
        return self.exponent.sign()

    def __eq__(self, other):
        if not isinstance(other, PowerTransform):
            return False
        return bool(self.exponent.eq(other.exponent).all())

    def __hash__(self):
        return id(self)

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return torcia.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))

    def inverse_shape(self, shape):
        return torcia.broadcast_shapes(shape, getattr(self.exponent, "shape", ()))


def _broadcast_all_tensors(*values):
    return [v if isinstance(v, torcia.Tensor) else torcia.tensor(float(v)) for v in values]


def _clipped_sigmoid(x):
    eps = finfo(x.dtype)
    return torcia.clamp(torcia.sigmoid(x), min=eps.tiny, max=1.0 - eps.eps)


class SigmoidTransform(Transform):
    """``y = 1 / (1 + exp(-x))``.

    Examples
    --------
    >>> import torcia
    >>> t = torcia.distributions.SigmoidTransform()
    >>> t(torcia.tensor([0.0]))
    tensor([0.5000])
    >>> t.inv(torcia.tensor([0.5]))
    tensor([0.])
    """

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SigmoidTransform)

    def __hash__(self):
        return hash(type(self))

    def _call(self, x):
        return _clipped_sigmoid(x)

    def _inverse(self, y):
        eps = finfo(y.dtype)
        y = y.clamp(min=eps.tiny, max=1.0 - eps.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x) - _softplus(x)


class SoftplusTransform(Transform):
    """``y = log(1 + exp(x))``.

    Examples
    --------
    >>> import torcia
    >>> torcia.distributions.SoftplusTransform()(torcia.tensor([0.0]))
    tensor([0.6931])
    """

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, SoftplusTransform)

    def __hash__(self):
        return hash(type(self))

    def _call(self, x):
        return _softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x)


class TanhTransform(Transform):
    """``y = tanh(x)``; its log-det-Jacobian uses the stable form
    ``2 * (log 2 - x - softplus(-2x))``.

    Examples
    --------
    >>> import torcia
    >>> t = torcia.distributions.TanhTransform()
    >>> t(torcia.tensor([0.0]))
    tensor([0.])
    >>> t.inv(torcia.tensor([0.5]))
    tensor([0.5493])
    """

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other):
        return isinstance(other, TanhTransform)

    def __hash__(self):
        return hash(type(self))

    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return torcia.atanh(y)

    def log_abs_det_jacobian(self, x, y):
        return 2.0 * (math.log(2.0) - x - _softplus(-2.0 * x))


class AbsTransform(Transform):
    """``y = |x|`` (not bijective; the inverse picks the positive root).

    Examples
    --------
    >>> import torcia
    >>> t = torcia.distributions.AbsTransform()
    >>> t(torcia.tensor([-2.0, 3.0]))
    tensor([2., 3.])
    """

    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other):
        return isinstance(other, AbsTransform)

    def __hash__(self):
        return hash(type(self))

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class AffineTransform(Transform):
    """``y = loc + scale * x`` over ``event_dim`` rightmost dimensions.

    Examples
    --------
    >>> import torcia
    >>> t = torcia.distributions.AffineTransform(loc=1.0, scale=2.0)
    >>> t(torcia.tensor([0.0, 1.0]))
    tensor([1., 3.])
    >>> t.inv(torcia.tensor([3.0]))
    tensor([1.])
    >>> t.log_abs_det_jacobian(torcia.tensor([0.0]), torcia.tensor([1.0]))
    tensor([0.6931])
    """

    bijective = True

    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc = loc
        self.scale = scale
        self._event_dim = event_dim

    @property
    def event_dim(self):
        return self._event_dim

    @constraints.dependent_property(is_discrete=False)
    def domain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    @constraints.dependent_property(is_discrete=False)
    def codomain(self):
        if self.event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self.event_dim)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self.event_dim, cache_size=cache_size)

    def __eq__(self, other):
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
                if a != b:
                    return False
            elif not bool((torcia.as_tensor(a) == torcia.as_tensor(b)).all()):
                return False
        return True

    def __hash__(self):
        return id(self)

    @property
    def sign(self):
        if isinstance(self.scale, numbers.Real):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        shape = x.shape
        scale = self.scale
        if isinstance(scale, numbers.Real):
            result = torcia.full_like(x, math.log(abs(scale)))
        else:
            result = torcia.abs(scale).log()
        if self.event_dim:
            result_size = tuple(result.shape[:result.dim() - self.event_dim]) + (-1,)
            result = result.reshape(result_size).sum(-1)
            shape = shape[:len(shape) - self.event_dim]
        return result.expand(shape)

    def forward_shape(self, shape):
        return torcia.broadcast_shapes(shape, getattr(self.loc, "shape", ()),
                                       getattr(self.scale, "shape", ()))

    def inverse_shape(self, shape):
        return torcia.broadcast_shapes(shape, getattr(self.loc, "shape", ()),
                                       getattr(self.scale, "shape", ()))


class CorrCholeskyTransform(Transform):
    """Unconstrained vectors of length D(D-1)/2 to Cholesky factors of D x D correlation
    matrices (lower triangular, unit-norm rows, positive diagonal), as PyTorch: tanh to
    (-1, 1), then a stick-breaking of each row's squared norm.

    Examples
    --------
    >>> import torcia
    >>> L = torcia.distributions.CorrCholeskyTransform()(torcia.zeros(3))
    >>> torcia.allclose((L @ L.T).diagonal(), torcia.ones(3))
    True
    """

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        x = torcia.tanh(x)
        eps = finfo(x.dtype).eps
        x = x.clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        z = r ** 2
        z1m_cumprod_sqrt = (1 - z).sqrt().cumprod(-1)
        n = r.shape[-1]
        eye = torcia.eye(n, dtype=x.dtype, device=x.device)
        r = r + eye
        y = r * _pad_left(z1m_cumprod_sqrt[..., :-1], 1)
        return y

    def _inverse(self, y):
        y_cumsum = 1 - torcia.cumsum(y * y, dim=-1)
        y_cumsum_shifted = _pad_left(y_cumsum[..., :-1], 1)
        y_vec = tril_matrix_to_vec(y, diag=-1)
        y_cumsum_vec = tril_matrix_to_vec(y_cumsum_shifted, diag=-1)
        t = y_vec / y_cumsum_vec.sqrt()
        x = (t.log1p() - t.neg().log1p()) / 2
        return x

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        y1m_cumsum = 1 - (y * y).cumsum(dim=-1)
        y1m_cumsum_tril = tril_matrix_to_vec(y1m_cumsum, diag=-2)
        stick_breaking_logdet = 0.5 * (y1m_cumsum_tril).log().sum(-1)
        tanh_logdet = -2 * (x + _softplus(-2 * x) - math.log(2.0)).sum(dim=-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattend lower-diagonal number")
        return torcia.Size(tuple(shape[:-1]) + (d, d))

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        n = d * (d - 1) // 2
        return torcia.Size(tuple(shape[:-2]) + (n,))


class SoftmaxTransform(Transform):
    """Unconstrained space to the simplex by ``exp`` and normalisation (not bijective: the
    inverse is a log, defined up to a constant; for MCMC, not for densities).

    Examples
    --------
    >>> import torcia
    >>> torcia.distributions.SoftmaxTransform()(torcia.tensor([0.0, 0.0]))
    tensor([0.5000, 0.5000])
    """

    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other):
        return isinstance(other, SoftmaxTransform)

    def __hash__(self):
        return hash(type(self))

    def _call(self, x):
        logprobs = x
        probs = (logprobs - logprobs.max(-1, True).values).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y):
        return y.log()

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return shape


class StickBreakingTransform(Transform):
    """Unconstrained vectors of length K-1 to the K-simplex by stick breaking (bijective).

    Examples
    --------
    >>> import torcia
    >>> y = torcia.distributions.StickBreakingTransform()(torcia.zeros(2))
    >>> y
    tensor([0.3333, 0.3333, 0.3333])
    """

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other):
        return isinstance(other, StickBreakingTransform)

    def __hash__(self):
        return hash(type(self))

    def _call(self, x):
        offset = x.shape[-1] + 1 - torcia.ones(x.shape[-1], dtype=x.dtype,
                                               device=x.device).cumsum(-1)
        z = _clipped_sigmoid(x - offset.log())
        z_cumprod = (1 - z).cumprod(-1)
        y = _pad_right(z, 1) * _pad_left(z_cumprod, 1)
        return y

    def _inverse(self, y):
        y_crop = y[..., :-1]
        offset = y.shape[-1] - torcia.ones(y_crop.shape[-1], dtype=y.dtype,
                                           device=y.device).cumsum(-1)
        sf = 1 - y_crop.cumsum(-1)
        sf = torcia.clamp(sf, min=finfo(y.dtype).tiny)
        x = y_crop.log() - sf.log() + offset.log()
        return x

    def log_abs_det_jacobian(self, x, y):
        offset = x.shape[-1] + 1 - torcia.ones(x.shape[-1], dtype=x.dtype,
                                               device=x.device).cumsum(-1)
        x = x - offset.log()
        # log sigmoid(x) = -softplus(-x)
        return (-x - _softplus(-x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return torcia.Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return torcia.Size(tuple(shape[:-1]) + (shape[-1] - 1,))


class LowerCholeskyTransform(Transform):
    """Unconstrained square matrices to lower-triangular matrices with a positive diagonal
    (exp of the diagonal; not bijective as a map of square matrices).

    Examples
    --------
    >>> import torcia
    >>> t = torcia.distributions.LowerCholeskyTransform()
    >>> t(torcia.tensor([[0.0, 5.0], [2.0, 0.0]]))
    tensor([[1., 0.],
            [2., 1.]])
    """

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other):
        return isinstance(other, LowerCholeskyTransform)

    def __hash__(self):
        return hash(type(self))

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """Unconstrained square matrices to positive-definite ones: ``L @ L.mT`` with ``L`` from
    :class:`LowerCholeskyTransform`.

    Examples
    --------
    >>> import torcia
    >>> t = torcia.distributions.PositiveDefiniteTransform()
    >>> t(torcia.tensor([[0.0, 5.0], [2.0, 0.0]]))
    tensor([[1., 2.],
            [2., 5.]])
    """

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other):
        return isinstance(other, PositiveDefiniteTransform)

    def __hash__(self):
        return hash(type(self))

    def _call(self, x):
        x = LowerCholeskyTransform()(x)
        return x @ x.mT

    def _inverse(self, y):
        y = torcia.linalg.cholesky(y)
        return LowerCholeskyTransform().inv(y)


class CatTransform(Transform):
    """Applies ``tseq[i]`` to the ``lengths[i]`` slices of ``dim`` starting where the
    previous one ended, like ``torcia.cat``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import CatTransform, ExpTransform, AffineTransform
    >>> t = CatTransform([ExpTransform(), AffineTransform(0.0, 10.0)], dim=0, lengths=[1, 1])
    >>> t(torcia.tensor([0.0, 1.0]))
    tensor([ 1., 10.])
    """

    def __init__(self, tseq, dim=0, lengths=None, cache_size=0):
        assert all(isinstance(t, Transform) for t in tseq)
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        if lengths is None:
            lengths = [1] * len(self.transforms)
        self.lengths = list(lengths)
        assert len(self.lengths) == len(self.transforms)
        self.dim = dim

    @functools.cached_property
    def event_dim(self):
        return max(t.event_dim for t in self.transforms)

    @functools.cached_property
    def length(self):
        return sum(self.lengths)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _slices(self, x):
        assert -x.dim() <= self.dim < x.dim()
        assert x.shape[self.dim] == self.length
        start = 0
        for trans, length in zip(self.transforms, self.lengths):
            yield trans, x.narrow(self.dim, start, length)
            start = start + length

    def _call(self, x):
        return torcia.cat([trans(xs) for trans, xs in self._slices(x)], dim=self.dim)

    def _inverse(self, y):
        return torcia.cat([trans.inv(ys) for trans, ys in self._slices(y)], dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        assert -x.dim() <= self.dim < x.dim()
        assert x.shape[self.dim] == self.length
        assert -y.dim() <= self.dim < y.dim()
        assert y.shape[self.dim] == self.length
        logdetjacs = []
        start = 0
        for trans, length in zip(self.transforms, self.lengths):
            xslice = x.narrow(self.dim, start, length)
            yslice = y.narrow(self.dim, start, length)
            logdetjac = trans.log_abs_det_jacobian(xslice, yslice)
            if trans.event_dim < self.event_dim:
                logdetjac = _sum_rightmost(logdetjac, self.event_dim - trans.event_dim)
            logdetjacs.append(logdetjac)
            start = start + length
        dim = self.dim
        if dim >= 0:
            dim = dim - x.dim()
        dim = dim + self.event_dim
        if dim < 0:
            return torcia.cat(logdetjacs, dim=dim)
        return sum(logdetjacs)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @constraints.dependent_property
    def codomain(self):
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """Applies ``tseq[i]`` to the ``i``-th slice of ``dim``, like ``torcia.stack``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import StackTransform, ExpTransform, AffineTransform
    >>> t = StackTransform([ExpTransform(), AffineTransform(0.0, 10.0)], dim=0)
    >>> t(torcia.tensor([0.0, 1.0]))
    tensor([ 1., 10.])
    """

    def __init__(self, tseq, dim=0, cache_size=0):
        assert all(isinstance(t, Transform) for t in tseq)
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slice(self, z):
        return [z.select(self.dim, i) for i in range(z.shape[self.dim])]

    def _call(self, x):
        assert -x.dim() <= self.dim < x.dim()
        assert x.shape[self.dim] == len(self.transforms)
        return torcia.stack([t(xs) for xs, t in zip(self._slice(x), self.transforms)],
                            dim=self.dim)

    def _inverse(self, y):
        assert -y.dim() <= self.dim < y.dim()
        assert y.shape[self.dim] == len(self.transforms)
        return torcia.stack([t.inv(ys) for ys, t in zip(self._slice(y), self.transforms)],
                            dim=self.dim)

    def log_abs_det_jacobian(self, x, y):
        assert -x.dim() <= self.dim < x.dim()
        assert x.shape[self.dim] == len(self.transforms)
        assert -y.dim() <= self.dim < y.dim()
        assert y.shape[self.dim] == len(self.transforms)
        logdetjacs = [t.log_abs_det_jacobian(xs, ys) for xs, ys, t in
                      zip(self._slice(x), self._slice(y), self.transforms)]
        return torcia.stack(logdetjacs, dim=self.dim)

    @property
    def bijective(self):
        return all(t.bijective for t in self.transforms)

    @constraints.dependent_property
    def domain(self):
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @constraints.dependent_property
    def codomain(self):
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """``y = distribution.cdf(x)``: from the distribution's support to the unit interval
    (with ``distribution.icdf`` as the inverse).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import CumulativeDistributionTransform, Normal
    >>> t = CumulativeDistributionTransform(Normal(0.0, 1.0))
    >>> t(torcia.tensor([0.0]))
    tensor([0.5000])
    """

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self):
        return self.distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)

    def with_cache(self, cache_size=1):
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)
