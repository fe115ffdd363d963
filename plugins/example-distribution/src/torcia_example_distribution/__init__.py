"""torcia-example-distribution: the Rayleigh distribution as a torcia-distributions plugin.

A plugin distribution registers its classes and KL pairs in one hook; torcia finds the
module through the ``torcia`` entry point in ``pyproject.toml``.

Examples
--------
>>> import torcia
>>> from torcia.distributions import kl_divergence
>>> from torcia_example_distribution import Rayleigh
>>> round(Rayleigh(torcia.tensor(1.0)).cdf(torcia.tensor(1.0)).item(), 6)
0.393469
>>> round(kl_divergence(Rayleigh(torcia.tensor(1.0)), Rayleigh(torcia.tensor(2.0))).item(), 6)
0.636294
"""

from __future__ import annotations

import math
import numbers

import torcia
from torcia.distributions import Distribution, constraints
from torcia.distributions.utils import broadcast_all

__all__ = ["Rayleigh", "kl_rayleigh_rayleigh"]

EULER_GAMMA = 0.57721566490153286060


class Rayleigh(Distribution):
    """The Rayleigh distribution with ``scale`` sigma: the length of a 2-D vector of
    independent Normal(0, sigma) coordinates. Density ``x / sigma^2 exp(-x^2 / 2 sigma^2)``.

    Examples
    --------
    >>> import torcia
    >>> from torcia_example_distribution import Rayleigh
    >>> round(Rayleigh(torcia.tensor(2.0)).mean.item(), 6)
    2.506628
    """

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        (self.scale,) = broadcast_all(scale)
        batch_shape = torcia.Size() if isinstance(scale, numbers.Number) else self.scale.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Rayleigh, _instance)
        batch_shape = torcia.Size(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        super(Rayleigh, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.scale * math.sqrt(math.pi / 2)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        return (4 - math.pi) / 2 * self.scale.pow(2)

    def rsample(self, sample_shape=()):
        # by inversion: the gradient to scale is the pathwise one, x / scale
        shape = self._extended_shape(sample_shape)
        u = torcia.rand(shape, dtype=self.scale.dtype, device=self.scale.device)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return torcia.log(value) - 2 * self.scale.log() - value.pow(2) / (2 * self.scale.pow(2))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -torcia.expm1(-value.pow(2) / (2 * self.scale.pow(2)))

    def icdf(self, value):
        return self.scale * torcia.sqrt(-2 * torcia.log1p(-value))

    def entropy(self):
        return 1 + torcia.log(self.scale / math.sqrt(2)) + EULER_GAMMA / 2


def kl_rayleigh_rayleigh(p, q):
    """KL(Rayleigh(s1) || Rayleigh(s2)) = 2 log(s2 / s1) + s1^2 / s2^2 - 1."""
    ratio = (p.scale / q.scale).pow(2)
    return ratio - 1 - ratio.log()


@torcia.hookimpl
def torcia_register_distributions(registry):
    registry.add("rayleigh", Rayleigh)
    registry.add_kl(Rayleigh, Rayleigh, kl_rayleigh_rayleigh)
