"""The remaining univariate distributions of ``torch.distributions``: Cauchy, HalfCauchy,
HalfNormal, Geometric, Gumbel, InverseGamma, Kumaraswamy, Pareto, Weibull, StudentT,
FisherSnedecor, ContinuousBernoulli, NegativeBinomial, VonMises and GeneralizedPareto."""

from __future__ import annotations

import math
import numbers

import torcia
from torcia.distributions import _special, constraints
from torcia.distributions.bernoulli import _bce_with_logits
from torcia.distributions.distribution import Distribution
from torcia.distributions.exp_family import ExponentialFamily
from torcia.distributions.gamma import Chi2, Exponential, Gamma
from torcia.distributions.normal import Normal
from torcia.distributions.transformed_distribution import TransformedDistribution
from torcia.distributions.transforms import (
    AbsTransform,
    AffineTransform,
    ExpTransform,
    PowerTransform,
)
from torcia.distributions.uniform import Uniform
from torcia.distributions.utils import (
    broadcast_all,
    clamp_probs,
    finfo,
    lazy_property,
    logits_to_probs,
    probs_to_logits,
)

__all__ = [
    "Cauchy", "ContinuousBernoulli", "FisherSnedecor", "GeneralizedPareto", "Geometric",
    "Gumbel", "HalfCauchy", "HalfNormal", "InverseGamma", "Kumaraswamy", "NegativeBinomial",
    "Pareto", "StudentT", "VonMises", "Weibull",
]

EULER_GAMMA = 0.57721566490153286060


def _softplus(x):
    return x.clamp(min=0) + torcia.log1p(torcia.exp(-x.abs()))


def _logsigmoid(x):
    return -_softplus(-x)


def _batch_shape_of(tensor, *args):
    return torcia.Size() if all(isinstance(a, numbers.Number) for a in args) else tensor.shape


def _expand_params(self, cls, _instance, batch_shape, names):
    new = self._get_checked_instance(cls, _instance)
    batch_shape = torcia.Size(batch_shape)
    for name in names:
        setattr(new, name, getattr(self, name).expand(batch_shape))
    Distribution.__init__(new, batch_shape, validate_args=False)
    new._validate_args = self._validate_args
    return new


class Cauchy(Distribution):
    """The Cauchy (Lorentz) distribution with median ``loc`` and half width ``scale``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Cauchy
    >>> Cauchy(0.0, 1.0).cdf(torcia.tensor(1.0)).item()
    0.75
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(_batch_shape_of(self.loc, loc, scale), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Cauchy, _instance, batch_shape, ("loc", "scale"))

    @property
    def mean(self):
        return torcia.full(self._extended_shape(), math.nan, dtype=self.loc.dtype,
                           device=self.loc.device)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return torcia.full(self._extended_shape(), math.inf, dtype=self.loc.dtype,
                           device=self.loc.device)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = torcia.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        eps = torcia.tan(math.pi * (u - 0.5))
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (-math.log(math.pi) - self.scale.log()
                - (((value - self.loc) / self.scale) ** 2).log1p())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return torcia.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return torcia.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class _Folded(TransformedDistribution):
    """The absolute value of a draw from ``_base(0, scale)``, a distribution symmetric about
    0: its density is twice the base's on [0, inf)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _base = None

    def __init__(self, scale, validate_args=None):
        base_dist = self._base(0, scale, validate_args=False)
        super().__init__(base_dist, AbsTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self), _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mode(self):
        return torcia.zeros_like(self.scale)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return torcia.where(value >= 0, log_prob, torcia.full_like(log_prob, -math.inf))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class HalfCauchy(_Folded):
    """The absolute value of x ~ Cauchy(0, scale).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import HalfCauchy
    >>> HalfCauchy(1.0).cdf(torcia.tensor(1.0)).item()
    0.5
    """

    _base = Cauchy

    @property
    def mean(self):
        return torcia.full(self._extended_shape(), math.inf, dtype=self.scale.dtype,
                           device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance

    def log_prob(self, value):
        value = torcia.as_tensor(value, dtype=self.base_dist.scale.dtype,
                                 device=self.base_dist.scale.device)
        return super().log_prob(value)


class HalfNormal(_Folded):
    """The absolute value of x ~ Normal(0, scale).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import HalfNormal
    >>> round(HalfNormal(1.0).mean.item(), 6)
    0.797885
    """

    _base = Normal

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)


class Geometric(Distribution):
    """The number of failures before the first success in Bernoulli trials of ``probs``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Geometric
    >>> Geometric(torcia.tensor(0.25)).mean.item()
    3.0
    """

    arg_constraints = {"probs": constraints.interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            param, arg = self.probs, probs
        else:
            (self.logits,) = broadcast_all(logits)
            param, arg = self.logits, logits
        super().__init__(_batch_shape_of(param, arg), validate_args=validate_args)
        if self._validate_args and probs is not None:
            value = self.probs
            if not bool((value > 0).all()):
                raise ValueError(
                    f"Expected parameter probs ({type(value).__name__} of shape "
                    f"{tuple(value.shape)}) of distribution {repr(self)} to be positive but "
                    f"found invalid values:\n{value}")

    def expand(self, batch_shape, _instance=None):
        names = [n for n in ("probs", "logits") if n in self.__dict__]
        return _expand_params(self, Geometric, _instance, batch_shape, names)

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return torcia.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        tiny = finfo(self.probs.dtype).tiny
        with torcia.no_grad():
            u = torcia.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
            u = u.clamp(min=tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = torcia.where((probs == 1) & (value == 0), torcia.zeros_like(probs), probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        return _bce_with_logits(self.logits, self.probs) / self.probs


class Gumbel(TransformedDistribution):
    """The Gumbel (type-I extreme value) distribution.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Gumbel
    >>> round(Gumbel(0.0, 1.0).mean.item(), 6)
    0.577216
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        fi = finfo(self.loc.dtype)
        if isinstance(loc, numbers.Number) and isinstance(scale, numbers.Number):
            base_dist = Uniform(fi.tiny, 1 - fi.eps, validate_args=validate_args)
        else:
            base_dist = Uniform(torcia.full_like(self.loc, fi.tiny),
                                torcia.full_like(self.loc, 1 - fi.eps),
                                validate_args=validate_args)
        transforms = [ExpTransform().inv, AffineTransform(loc=0, scale=-torcia.ones_like(
            self.scale)), ExpTransform().inv, AffineTransform(loc=self.loc, scale=-self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gumbel, _instance)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    @property
    def mean(self):
        return self.loc + self.scale * EULER_GAMMA

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + EULER_GAMMA)


class InverseGamma(TransformedDistribution):
    """The distribution of 1/x for x ~ Gamma(concentration, rate).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import InverseGamma
    >>> InverseGamma(torcia.tensor(3.0), torcia.tensor(4.0)).mean.item()
    2.0
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        base_dist = Gamma(concentration, rate, validate_args=validate_args)
        neg_one = -base_dist.rate.new_ones(())
        super().__init__(base_dist, PowerTransform(neg_one), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(InverseGamma, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self):
        return self.base_dist.concentration

    @property
    def rate(self):
        return self.base_dist.rate

    @property
    def mean(self):
        result = self.rate / (self.concentration - 1)
        return torcia.where(self.concentration > 1, result, torcia.full_like(result, math.inf))

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        result = self.rate.square() / ((self.concentration - 1).square()
                                       * (self.concentration - 2))
        return torcia.where(self.concentration > 2, result, torcia.full_like(result, math.inf))

    def entropy(self):
        return (self.concentration + self.rate.log() + self.concentration.lgamma()
                - (1 + self.concentration) * self.concentration.digamma())


def _moments(a, b, n):
    """The n-th moment of Kumaraswamy(a, b)."""
    arg1 = 1 + n / a
    log_value = torcia.lgamma(arg1) + torcia.lgamma(b) - torcia.lgamma(arg1 + b)
    return b * torcia.exp(log_value)


class Kumaraswamy(TransformedDistribution):
    """The Kumaraswamy distribution on (0, 1): ``(1 - (1 - u)^(1/b))^(1/a)`` for uniform u.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Kumaraswamy
    >>> Kumaraswamy(torcia.tensor(1.0), torcia.tensor(1.0)).mean.item()
    0.5
    """

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1,
                                                                 concentration0)
        base_dist = Uniform(torcia.full_like(self.concentration0, 0),
                            torcia.full_like(self.concentration0, 1),
                            validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()),
                      AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(batch_shape)
        new.concentration0 = self.concentration0.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        return _moments(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        # ((a - 1) / (a b - 1)) ** (1 / a); PyTorch's log-space form takes log1p(-b) and is
        # NaN for every b > 1, so this one differs from it there
        a, b = self.concentration1, self.concentration0
        log_mode = (torcia.log(a - 1) - torcia.log(a * b - 1)) / a
        bad = (b < 1) | (a < 1)
        return torcia.where(bad, torcia.full_like(log_mode, math.nan), log_mode).exp()

    @property
    def variance(self):
        return (_moments(self.concentration1, self.concentration0, 2)
                - torcia.pow(self.mean, 2))

    def entropy(self):
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        H0 = torcia.digamma(self.concentration0 + 1) + EULER_GAMMA
        return (t0 + t1 * H0 - torcia.log(self.concentration1)
                - torcia.log(self.concentration0))


class Pareto(TransformedDistribution):
    """The Pareto type-I distribution with minimum ``scale`` and tail index ``alpha``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Pareto
    >>> Pareto(torcia.tensor(1.0), torcia.tensor(2.0)).mean.item()
    2.0
    """

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base_dist = Exponential(self.alpha, validate_args=validate_args)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Pareto, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.alpha = self.alpha.expand(batch_shape)
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        return constraints.greater_than_eq(self.scale)

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


class Weibull(TransformedDistribution):
    """The two-parameter Weibull distribution.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Weibull
    >>> Weibull(torcia.tensor(2.0), torcia.tensor(1.0)).mean.item()
    2.0
    """

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base_dist = Exponential(torcia.ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration_reciprocal),
                      AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base_dist, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Weibull, _instance)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        base_dist = self.base_dist.expand(batch_shape)
        transforms = [PowerTransform(exponent=new.concentration_reciprocal),
                      AffineTransform(loc=0, scale=new.scale)]
        TransformedDistribution.__init__(new, base_dist, transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.scale * torcia.exp(torcia.lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self):
        return (self.scale * ((self.concentration - 1) / self.concentration)
                ** self.concentration.reciprocal())

    @property
    def variance(self):
        return self.scale.pow(2) * (
            torcia.exp(torcia.lgamma(1 + 2 * self.concentration_reciprocal))
            - torcia.exp(2 * torcia.lgamma(1 + self.concentration_reciprocal)))

    def entropy(self):
        return (EULER_GAMMA * (1 - self.concentration_reciprocal)
                + torcia.log(self.scale * self.concentration_reciprocal) + 1)


class StudentT(Distribution):
    """Student's t distribution with ``df`` degrees of freedom, location and scale.

    ``rsample`` is ``loc + scale * z / sqrt(chi2 / df)``, differentiable in ``df``
    through Gamma's implicit reparameterisation.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import StudentT
    >>> StudentT(torcia.tensor(4.0)).variance.item()
    2.0
    """

    arg_constraints = {"df": constraints.positive, "loc": constraints.real,
                       "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(StudentT, _instance)
        batch_shape = torcia.Size(batch_shape)
        new.df = self.df.expand(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new._chi2 = self._chi2.expand(batch_shape)
        super(StudentT, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return torcia.where(self.df <= 1, torcia.full_like(self.loc, math.nan), self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        finite = self.scale.pow(2) * self.df / (self.df - 2)
        m = torcia.where(self.df > 2, finite, torcia.full_like(finite, math.inf))
        return torcia.where(self.df <= 1, torcia.full_like(m, math.nan), m)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        X = torcia.randn(shape, dtype=self.df.dtype, device=self.df.device)
        Z = self._chi2.rsample(sample_shape)
        Y = X * torcia.rsqrt(Z / self.df)
        return self.loc + self.scale * Y

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        Z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi)
             + torcia.lgamma(0.5 * self.df) - torcia.lgamma(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * torcia.log1p(y ** 2.0 / self.df) - Z

    def entropy(self):
        lbeta = (torcia.lgamma(0.5 * self.df) + math.lgamma(0.5)
                 - torcia.lgamma(0.5 * (self.df + 1)))
        return (self.scale.log()
                + 0.5 * (self.df + 1) * (torcia.digamma(0.5 * (self.df + 1))
                                         - torcia.digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)


class FisherSnedecor(Distribution):
    """The F distribution with ``df1`` and ``df2`` degrees of freedom.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import FisherSnedecor
    >>> FisherSnedecor(torcia.tensor(3.0), torcia.tensor(6.0)).mean.item()
    1.5
    """

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        super().__init__(_batch_shape_of(self.df1, df1, df2), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(FisherSnedecor, _instance)
        batch_shape = torcia.Size(batch_shape)
        new.df1 = self.df1.expand(batch_shape)
        new.df2 = self.df2.expand(batch_shape)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        super(FisherSnedecor, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        df2 = torcia.where(self.df2 <= 2, torcia.full_like(self.df2, math.nan), self.df2)
        return df2 / (df2 - 2)

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return torcia.where(self.df1 <= 2, torcia.full_like(mode, math.nan), mode)

    @property
    def variance(self):
        df2 = torcia.where(self.df2 <= 4, torcia.full_like(self.df2, math.nan), self.df2)
        return (2 * df2.pow(2) * (self.df1 + df2 - 2)
                / (self.df1 * (df2 - 2).pow(2) * (df2 - 4)))

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        X1 = self._gamma1.rsample(sample_shape).view(shape)
        X2 = self._gamma2.rsample(sample_shape).view(shape)
        tiny = finfo(X2.dtype).tiny
        X2 = X2.clamp(min=tiny)
        return (X1 / X2).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        ct1 = self.df1 * 0.5
        ct2 = self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = (ct1 + ct2).lgamma() - ct1.lgamma() - ct2.lgamma()
        t2 = ct1 * ct3.log() + (ct1 - 1) * torcia.log(value)
        t3 = (ct1 + ct2) * torcia.log1p(ct3 * value)
        return t1 + t2 - t3


class ContinuousBernoulli(ExponentialFamily):
    """The continuous Bernoulli distribution on [0, 1] (Loaiza-Ganem and Cunningham, 2019),
    with PyTorch's Taylor expansions near ``probs = 0.5`` (``lims``).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import ContinuousBernoulli
    >>> ContinuousBernoulli(torcia.tensor(0.5)).mean.item()
    0.5
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, numbers.Number)
            (self.probs,) = broadcast_all(probs)
            if validate_args is not None and not bool(
                    self.arg_constraints["probs"].check(self.probs).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            is_scalar = isinstance(logits, numbers.Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = torcia.Size() if is_scalar else self._param.shape
        self._lims = lims
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = torcia.Size(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        super(ContinuousBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _outside_unstable_region(self):
        return torcia.le(self.probs, self._lims[0]) | torcia.gt(self.probs, self._lims[1])

    def _cut_probs(self):
        return torcia.where(self._outside_unstable_region(), self.probs,
                            self._lims[0] * torcia.ones_like(self.probs))

    def _cont_bern_log_norm(self):
        cut_probs = self._cut_probs()
        cut_probs_below_half = torcia.where(torcia.le(cut_probs, 0.5), cut_probs,
                                            torcia.zeros_like(cut_probs))
        cut_probs_above_half = torcia.where(torcia.ge(cut_probs, 0.5), cut_probs,
                                            torcia.ones_like(cut_probs))
        log_norm = torcia.log(torcia.abs(torcia.log1p(-cut_probs) - torcia.log(cut_probs))) \
            - torcia.where(torcia.le(cut_probs, 0.5), torcia.log1p(-2.0 * cut_probs_below_half),
                           torcia.log(2.0 * cut_probs_above_half - 1.0))
        x = torcia.pow(self.probs - 0.5, 2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return torcia.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut_probs = self._cut_probs()
        mus = cut_probs / (2.0 * cut_probs - 1.0) + 1.0 / (torcia.log1p(-cut_probs)
                                                           - torcia.log(cut_probs))
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * torcia.pow(x, 2)) * x
        return torcia.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return torcia.sqrt(self.variance)

    @property
    def variance(self):
        cut_probs = self._cut_probs()
        var = cut_probs * (cut_probs - 1.0) / torcia.pow(1.0 - 2.0 * cut_probs, 2) + 1.0 / (
            torcia.pow(torcia.log1p(-cut_probs) - torcia.log(cut_probs), 2))
        x = torcia.pow(self.probs - 0.5, 2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return torcia.where(self._outside_unstable_region(), var, taylor)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self):
        return self._param.shape

    def sample(self, sample_shape=()):
        with torcia.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = torcia.rand(shape, dtype=self.probs.dtype, device=self.probs.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -_bce_with_logits(logits, value) + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        cut_probs = self._cut_probs()
        cdfs = (torcia.pow(cut_probs, value) * torcia.pow(1.0 - cut_probs, 1.0 - value)
                + cut_probs - 1.0) / (2.0 * cut_probs - 1.0)
        unbounded_cdfs = torcia.where(self._outside_unstable_region(), cdfs, value)
        return torcia.where(torcia.le(value, 0.0), torcia.zeros_like(value),
                            torcia.where(torcia.ge(value, 1.0), torcia.ones_like(value),
                                         unbounded_cdfs))

    def icdf(self, value):
        cut_probs = self._cut_probs()
        return torcia.where(
            self._outside_unstable_region(),
            (torcia.log1p(-cut_probs + value * (2.0 * cut_probs - 1.0))
             - torcia.log1p(-cut_probs)) / (torcia.log(cut_probs) - torcia.log1p(-cut_probs)),
            value)

    def entropy(self):
        log_probs0 = torcia.log1p(-self.probs)
        log_probs1 = torcia.log(self.probs)
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self):
        return (self.logits,)

    def _log_normalizer(self, x):
        out_unst_reg = torcia.le(x, self._lims[0] - 0.5) | torcia.gt(x, self._lims[1] - 0.5)
        cut_nat_params = torcia.where(out_unst_reg, x,
                                      (self._lims[0] - 0.5) * torcia.ones_like(x))
        log_norm = (torcia.log(torcia.abs(torcia.expm1(cut_nat_params)))
                    - torcia.log(torcia.abs(cut_nat_params)))
        taylor = 0.5 * x + torcia.pow(x, 2) / 24.0 - torcia.pow(x, 4) / 2880.0
        return torcia.where(out_unst_reg, log_norm, taylor)


class NegativeBinomial(Distribution):
    """The number of successes before ``total_count`` failures in Bernoulli trials of
    success probability ``probs``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import NegativeBinomial
    >>> NegativeBinomial(torcia.tensor(4.0), torcia.tensor(0.5)).mean.item()
    4.0
    """

    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.type_as(self.probs)
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.type_as(self.logits)
        self._param = self.probs if probs is not None else self.logits
        super().__init__(self._param.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(NegativeBinomial, _instance)
        batch_shape = torcia.Size(batch_shape)
        new.total_count = self.total_count.expand(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        super(NegativeBinomial, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.total_count * torcia.exp(self.logits)

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / torcia.sigmoid(-self.logits)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.shape

    @lazy_property
    def _gamma(self):
        return Gamma(concentration=self.total_count, rate=torcia.exp(-self.logits),
                     validate_args=False)

    def sample(self, sample_shape=()):
        with torcia.no_grad():
            rate = self._gamma.sample(sample_shape=sample_shape)
            return _special.poisson(rate)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_unnormalized_prob = (self.total_count * _logsigmoid(-self.logits)
                                 + value * _logsigmoid(self.logits))
        log_normalization = (-torcia.lgamma(self.total_count + value)
                             + torcia.lgamma(1.0 + value) + torcia.lgamma(self.total_count))
        log_normalization = torcia.where(self.total_count + value == 0.0,
                                         torcia.zeros_like(log_normalization),
                                         log_normalization)
        return log_unnormalized_prob - log_normalization


class VonMises(Distribution):
    """The von Mises distribution on the circle, with mean direction ``loc`` and
    ``concentration``. Samples lie in [-pi, pi).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import VonMises
    >>> round(VonMises(torcia.tensor(0.0), torcia.tensor(1.0)).variance.item(), 6)
    0.55361
    """

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real
    has_rsample = False

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(self.loc.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, VonMises, _instance, batch_shape,
                              ("loc", "concentration"))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.concentration * torcia.cos(value - self.loc)
        return (log_prob - math.log(2 * math.pi)
                - _special.log_modified_bessel_fn(self.concentration, order=0))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with torcia.no_grad():
            x = _special.von_mises(self.loc.expand(shape), self.concentration.expand(shape))
            return (x + math.pi) % (2 * math.pi) - math.pi

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return 1 - (_special.log_modified_bessel_fn(self.concentration, order=1)
                    - _special.log_modified_bessel_fn(self.concentration, order=0)).exp()


class GeneralizedPareto(Distribution):
    """The generalized Pareto distribution with ``loc``, ``scale`` and ``concentration``
    (the shape xi; xi = 0 is the exponential tail).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import GeneralizedPareto
    >>> GeneralizedPareto(0.0, 1.0, 0.0).mean.item()
    1.0
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive,
                       "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        super().__init__(_batch_shape_of(self.loc, loc, scale, concentration),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, GeneralizedPareto, _instance, batch_shape,
                              ("loc", "scale", "concentration"))

    def _safe(self):
        eq_zero = torcia.isclose(self.concentration, torcia.zeros_like(self.concentration))
        return eq_zero, torcia.where(eq_zero, torcia.ones_like(self.concentration),
                                     self.concentration)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = torcia.rand(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe_conc = self._safe()
        y = 1 / safe_conc + torcia.ones_like(z)
        where_nonzero = torcia.where(y == 0, y, y * torcia.log1p(safe_conc * z))
        return -self.scale.log() - torcia.where(eq_zero, z, where_nonzero)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        eq_zero, safe_conc = self._safe()
        where_nonzero = -torcia.log1p(safe_conc * z) / safe_conc
        return torcia.where(eq_zero, -z, where_nonzero)

    def log_cdf(self, value):
        return torcia.log1p(-torcia.exp(self.log_survival_function(value)))

    def cdf(self, value):
        return torcia.exp(self.log_cdf(value))

    def icdf(self, value):
        eq_zero, safe_conc = self._safe()
        logu = torcia.log1p(-value)
        where_nonzero = self.loc + self.scale / safe_conc * torcia.expm1(-safe_conc * logu)
        where_zero = self.loc - self.scale * logu
        return torcia.where(eq_zero, where_zero, where_nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        safe_conc = torcia.where(valid, self.concentration,
                                 torcia.full_like(self.concentration, 0.5))
        result = self.loc + self.scale / (1 - safe_conc)
        return torcia.where(valid, result, torcia.full_like(result, math.nan))

    @property
    def variance(self):
        valid = self.concentration < 0.5
        safe_conc = torcia.where(valid, self.concentration,
                                 torcia.full_like(self.concentration, 0.25))
        result = self.scale ** 2 / ((1 - safe_conc) ** 2 * (1 - 2 * safe_conc))
        return torcia.where(valid, result, torcia.full_like(result, math.nan))

    def entropy(self):
        ans = torcia.log(self.scale) + self.concentration + 1
        return torcia.broadcast_to(ans, self._batch_shape)

    @property
    def mode(self):
        return self.loc

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self):
        lower = self.loc
        upper = torcia.where(self.concentration < 0, lower - self.scale / self.concentration,
                             torcia.full_like(lower, math.inf))
        return constraints.interval(lower, upper)
