"""Categorical, OneHotCategorical and OneHotCategoricalStraightThrough."""

from __future__ import annotations

import math

import torcia
from torcia.distributions import constraints
from torcia.distributions.distribution import Distribution
from torcia.distributions.utils import finfo, lazy_property, logits_to_probs, probs_to_logits

__all__ = ["Categorical", "OneHotCategorical", "OneHotCategoricalStraightThrough"]


def _one_hot(indices, num_classes, dtype):
    classes = torcia.arange(num_classes, device=indices.device)
    return (indices.unsqueeze(-1) == classes).to(dtype)


class Categorical(Distribution):
    """A categorical distribution over ``{0, ..., K-1}`` from ``probs`` (normalised along
    the last dimension) or ``logits`` (unnormalised log-probabilities); give one.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Categorical
    >>> d = Categorical(logits=torcia.zeros(4))
    >>> round(d.entropy().item(), 4)
    1.3863
    """

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        batch_shape = (self._param.shape[:-1] if self._param.dim() > 1 else torcia.Size())
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Categorical, _instance)
        batch_shape = torcia.Size(batch_shape)
        param_shape = tuple(batch_shape) + (self._num_events,)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(param_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(param_shape)
            new._param = new.logits
        new._num_events = self._num_events
        super(Categorical, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mean(self):
        return torcia.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype,
                           device=self.probs.device)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return torcia.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype,
                           device=self.probs.device)

    def sample(self, sample_shape=()):
        sample_shape = torcia.Size(sample_shape)
        with torcia.no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            samples_2d = torcia.multinomial(probs_2d, max(math.prod(sample_shape), 1),
                                            True).T
            if math.prod(sample_shape) == 0:
                samples_2d = samples_2d[:0]
            return samples_2d.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = torcia.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        min_real = finfo(self.logits.dtype).min
        logits = torcia.clamp(self.logits, min=min_real)
        p_log_p = logits * self.probs
        return -p_log_p.sum(-1)

    def enumerate_support(self, expand=True):
        num_events = self._num_events
        values = torcia.arange(num_events, dtype=torcia.int64, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1,) + tuple(self._batch_shape))
        return values


class OneHotCategorical(Distribution):
    """A categorical distribution whose samples are one-hot vectors of length K.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import OneHotCategorical
    >>> d = OneHotCategorical(probs=torcia.tensor([0.0, 1.0, 0.0]))
    >>> d.sample().tolist()
    [0.0, 1.0, 0.0]
    """

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        batch_shape = torcia.Size(batch_shape)
        new._categorical = self._categorical.expand(batch_shape)
        super(OneHotCategorical, new).__init__(batch_shape, self.event_shape,
                                               validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self):
        return self._categorical._param

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def mean(self):
        return self._categorical.probs

    @property
    def mode(self):
        probs = self._categorical.probs
        return _one_hot(probs.argmax(-1), probs.shape[-1], probs.dtype)

    @property
    def variance(self):
        return self._categorical.probs * (1 - self._categorical.probs)

    @property
    def param_shape(self):
        return self._categorical.param_shape

    def sample(self, sample_shape=()):
        probs = self._categorical.probs
        num_events = self._categorical._num_events
        indices = self._categorical.sample(sample_shape)
        return _one_hot(indices, num_events, probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        indices = value.max(-1).indices
        return self._categorical.log_prob(indices)

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self.event_shape[0]
        values = torcia.eye(n, dtype=self._param.dtype, device=self._param.device)
        values = values.view((n,) + (1,) * len(self.batch_shape) + (n,))
        if expand:
            values = values.expand((n,) + tuple(self.batch_shape) + (n,))
        return values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """:class:`OneHotCategorical` whose ``rsample`` passes gradients straight through to the
    probabilities (Bengio et al., 2013): the forward value is the one-hot sample, the
    gradient that of ``probs``.

    Examples
    --------
    >>> import torcia
    >>> _ = torcia.manual_seed(0)
    >>> d = torcia.distributions.OneHotCategoricalStraightThrough(probs=torcia.tensor([0.0, 1.0]))
    >>> d.rsample()
    tensor([0., 1.])
    """

    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
