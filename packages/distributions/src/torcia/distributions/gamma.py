"""Gamma, Chi2 and Exponential distributions."""

from __future__ import annotations

import numbers

import torcia
from torcia.distributions import _special, constraints
from torcia.distributions.exp_family import ExponentialFamily
from torcia.distributions.utils import broadcast_all

__all__ = ["Chi2", "Exponential", "Gamma"]


class Gamma(ExponentialFamily):
    """The gamma distribution with shape ``concentration`` and inverse scale ``rate``.

    ``rsample`` has implicit reparameterisation gradients (Figurnov et al., 2018) in both
    parameters, so Gamma, Beta, Dirichlet, Chi2 and StudentT samples are differentiable.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Gamma
    >>> d = Gamma(torcia.tensor(2.0), torcia.tensor(1.0))
    >>> round(d.cdf(torcia.tensor(1.0)).item(), 6)
    0.264241
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        if isinstance(concentration, numbers.Number) and isinstance(rate, numbers.Number):
            batch_shape = torcia.Size()
        else:
            batch_shape = self.concentration.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Gamma, _instance)
        batch_shape = torcia.Size(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Gamma, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return _special.standard_gamma(self.concentration.expand(shape)) / self.rate.expand(
            shape)

    def log_prob(self, value):
        value = torcia.as_tensor(value, dtype=self.rate.dtype, device=self.rate.device)
        if self._validate_args:
            self._validate_sample(value)
        return (torcia.xlogy(self.concentration, self.rate)
                + torcia.xlogy(self.concentration - 1, value)
                - self.rate * value - torcia.lgamma(self.concentration))

    def entropy(self):
        return (self.concentration - torcia.log(self.rate) + torcia.lgamma(self.concentration)
                + (1.0 - self.concentration) * torcia.digamma(self.concentration))

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return torcia.lgamma(x + 1) + (x + 1) * torcia.log(-y.reciprocal())

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return _special.gammainc(self.concentration, self.rate * value)


class Chi2(Gamma):
    """The chi-squared distribution with ``df`` degrees of freedom: ``Gamma(df / 2, 1 / 2)``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Chi2
    >>> Chi2(torcia.tensor(3.0)).mean.item()
    3.0
    """

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        if isinstance(df, numbers.Number):
            df = torcia.tensor(float(df))
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2


class Exponential(ExponentialFamily):
    """The exponential distribution with ``rate`` (inverse mean).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Exponential
    >>> round(Exponential(torcia.tensor(2.0)).icdf(torcia.tensor(0.5)).item(), 6)
    0.346574
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return torcia.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = torcia.Size() if isinstance(rate, numbers.Number) else self.rate.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Exponential, _instance)
        batch_shape = torcia.Size(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Exponential, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with torcia.no_grad():
            e = torcia.empty(shape, dtype=self.rate.dtype, device=self.rate.device)
            e.exponential_()
        return e / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - torcia.exp(-self.rate * value)

    def icdf(self, value):
        return -torcia.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - torcia.log(self.rate)

    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -torcia.log(-x)
