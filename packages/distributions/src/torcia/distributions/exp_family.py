"""Exponential families: entropy and KL from the log-normaliser by automatic differentiation."""

from __future__ import annotations

import torcia
from torcia.distributions.distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    """The base class of exponential-family distributions, whose density is
    ``exp(<t(x), theta> - F(theta) + k(x))``.

    Subclasses give ``_natural_params`` (theta), ``_log_normalizer`` (F) and
    ``_mean_carrier_measure`` (E[k(x)]); the entropy then follows from the Bregman
    divergence of F, computed with :func:`torcia.autograd.grad`.

    Examples
    --------
    >>> import torcia
    >>> d = torcia.distributions.Normal(torcia.tensor(0.0), torcia.tensor(1.0))
    >>> isinstance(d, torcia.distributions.ExponentialFamily), d.entropy()
    (True, tensor(1.4189))
    """

    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with torcia.enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = torcia.autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for np_, g in zip(nparams, gradients):
            result = result - (np_ * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
