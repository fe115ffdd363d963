"""Dirichlet and Beta distributions."""

from __future__ import annotations

import numbers

import torcia
from torcia.distributions import _special, constraints
from torcia.distributions.exp_family import ExponentialFamily
from torcia.distributions.utils import broadcast_all, finfo

__all__ = ["Beta", "Dirichlet"]


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution on the simplex, with ``concentration`` along the last
    dimension.

    ``rsample`` normalises Gamma samples, whose implicit reparameterisation gradients
    make it differentiable in ``concentration``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Dirichlet
    >>> Dirichlet(torcia.tensor([1.0, 3.0])).mean.tolist()
    [0.25, 0.75]
    """

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        batch_shape, event_shape = concentration.shape[:-1], concentration.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = torcia.Size(batch_shape)
        new.concentration = self.concentration.expand(tuple(batch_shape)
                                                      + tuple(self.event_shape))
        super(Dirichlet, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        concentration = self.concentration.expand(shape)
        gammas = _special.standard_gamma(concentration)
        x = gammas / gammas.sum(-1, keepdim=True)
        return x.clamp(min=finfo(x.dtype).tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return (torcia.xlogy(self.concentration - 1.0, value).sum(-1)
                + torcia.lgamma(self.concentration.sum(-1))
                - torcia.lgamma(self.concentration).sum(-1))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        concentrationm1 = (self.concentration - 1).clamp(min=0.0)
        mode = concentrationm1 / concentrationm1.sum(-1, True)
        # every concentration below one: the mode is the vertex of the largest
        mask = (self.concentration < 1).all(-1, keepdim=True)
        n = self.concentration.shape[-1]
        vertex = (concentrationm1.argmax(-1, keepdim=True)
                  == torcia.arange(n, device=mode.device)).to(mode.dtype)
        return torcia.where(mask, vertex, mode)

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, True)
        return (self.concentration * (con0 - self.concentration)
                / (con0.pow(2) * (con0 + 1)))

    def entropy(self):
        k = self.concentration.shape[-1]
        a0 = self.concentration.sum(-1)
        return (torcia.lgamma(self.concentration).sum(-1) - torcia.lgamma(a0)
                - (k - a0) * torcia.digamma(a0)
                - ((self.concentration - 1.0) * torcia.digamma(self.concentration)).sum(-1))

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - torcia.lgamma(x.sum(-1))


class Beta(ExponentialFamily):
    """The beta distribution on [0, 1] with ``concentration1`` (alpha) and
    ``concentration0`` (beta).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Beta
    >>> Beta(torcia.tensor(2.0), torcia.tensor(2.0)).mean.item()
    0.5
    """

    arg_constraints = {"concentration1": constraints.positive,
                       "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        if isinstance(concentration1, numbers.Real) and isinstance(concentration0,
                                                                   numbers.Real):
            concentration1_concentration0 = torcia.tensor(
                [float(concentration1), float(concentration0)])
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            concentration1_concentration0 = torcia.stack([concentration1, concentration0],
                                                         -1)
        self._dirichlet = Dirichlet(concentration1_concentration0,
                                    validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Beta, _instance)
        batch_shape = torcia.Size(batch_shape)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        super(Beta, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        heads_tails = torcia.stack([value, 1.0 - value], -1)
        return self._dirichlet.log_prob(heads_tails)

    def entropy(self):
        return self._dirichlet.entropy()

    @property
    def concentration1(self):
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self):
        return self._dirichlet.concentration[..., 1]

    @property
    def _natural_params(self):
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x, y):
        return torcia.lgamma(x) + torcia.lgamma(y) - torcia.lgamma(x + y)
