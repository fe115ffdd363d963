"""The Poisson distribution."""

from __future__ import annotations

import numbers

import torcia
from torcia.distributions import _special, constraints
from torcia.distributions.exp_family import ExponentialFamily
from torcia.distributions.utils import broadcast_all

__all__ = ["Poisson"]


class Poisson(ExponentialFamily):
    """The Poisson distribution with ``rate`` (its mean).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Poisson
    >>> round(Poisson(torcia.tensor(2.0)).log_prob(torcia.tensor(0.0)).item(), 4)
    -2.0
    """

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = torcia.Size() if isinstance(rate, numbers.Number) else self.rate.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        batch_shape = torcia.Size(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        super(Poisson, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with torcia.no_grad():
            return _special.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - (value + 1).lgamma()

    @property
    def _natural_params(self):
        return (torcia.log(self.rate),)

    def _log_normalizer(self, x):
        return torcia.exp(x)
