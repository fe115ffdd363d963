"""The remaining multivariate distributions of ``torch.distributions``: Multinomial,
LowRankMultivariateNormal, MixtureSameFamily, RelaxedBernoulli, RelaxedOneHotCategorical,
LogisticNormal, LKJCholesky and Wishart."""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

import torcia
from torcia.distributions import _special, constraints
from torcia.distributions.binomial import Binomial
from torcia.distributions.categorical import Categorical
from torcia.distributions.dirichlet import Beta
from torcia.distributions.distribution import Distribution
from torcia.distributions.exp_family import ExponentialFamily
from torcia.distributions.gamma import Chi2
from torcia.distributions.multivariate_normal import (
    _batch_mahalanobis,
    _batch_mv,
    _precision_to_scale_tril,
)
from torcia.distributions.normal import Normal
from torcia.distributions.transformed_distribution import TransformedDistribution
from torcia.distributions.transforms import (
    ExpTransform,
    SigmoidTransform,
    StickBreakingTransform,
)
from torcia.distributions.utils import (
    broadcast_all,
    clamp_probs,
    finfo,
    lazy_property,
    logits_to_probs,
    probs_to_logits,
)

__all__ = [
    "LKJCholesky", "LogisticNormal", "LowRankMultivariateNormal", "MixtureSameFamily",
    "Multinomial", "RelaxedBernoulli", "RelaxedOneHotCategorical", "Wishart",
]

_LOG_2 = math.log(2)


class Multinomial(Distribution):
    """Counts of ``total_count`` draws from a categorical distribution.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Multinomial
    >>> Multinomial(4, torcia.tensor([0.25, 0.75])).mean.tolist()
    [1.0, 3.0]
    """

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.independent(constraints.real, 1)}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, numbers.Integral):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = torcia.Size(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs)
        super(Multinomial, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.multinomial(self.total_count)

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def param_shape(self):
        return self._categorical.param_shape

    def sample(self, sample_shape=()):
        sample_shape = torcia.Size(sample_shape)
        with torcia.no_grad():
            samples = self._categorical.sample(torcia.Size((self.total_count,))
                                               + tuple(sample_shape))
            # the draws' dimension last, then count them per category
            samples = samples.permute(*range(1, samples.dim()), 0)
            n = self._categorical._num_events
            counts = (samples.unsqueeze(-1) == torcia.arange(n, device=samples.device)).sum(-2)
            return counts.to(self.probs.dtype)

    def entropy(self):
        n = torcia.tensor(float(self.total_count), dtype=self.probs.dtype)
        cat_entropy = self._categorical.entropy()
        term1 = n * cat_entropy - torcia.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = torcia.exp(self._binomial.log_prob(support))
        weights = torcia.lgamma(support + 1)
        term2 = (binomial_probs * weights).sum(0).sum(-1)
        return term1 + term2

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_factorial_n = torcia.lgamma(value.sum(-1) + 1)
        log_factorial_xs = torcia.lgamma(value + 1).sum(-1)
        logits = torcia.where((value == 0) & (logits == -math.inf), torcia.zeros_like(logits),
                              logits)
        log_powers = (logits * value).sum(-1)
        return log_factorial_n - log_factorial_xs + log_powers


def _batch_capacitance_tril(W, D):
    """The Cholesky factor of the capacitance ``I + W.T @ inv(D) @ W``."""
    m = W.shape[-1]
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    K = torcia.matmul(Wt_Dinv, W) + torcia.eye(m, dtype=W.dtype, device=W.device)
    return torcia.linalg.cholesky(K)


def _batch_lowrank_logdet(W, D, capacitance_tril):
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def _batch_lowrank_mahalanobis(W, D, x, capacitance_tril):
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = _batch_mv(Wt_Dinv, x)
    mahalanobis_term1 = (x.pow(2) / D).sum(-1)
    mahalanobis_term2 = _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)
    return mahalanobis_term1 - mahalanobis_term2


class LowRankMultivariateNormal(Distribution):
    """A multivariate normal with covariance ``cov_factor @ cov_factor.T + diag(cov_diag)``,
    evaluated through the Woodbury identity.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import LowRankMultivariateNormal
    >>> d = LowRankMultivariateNormal(torcia.zeros(2), torcia.zeros(2, 1), torcia.ones(2))
    >>> round(d.log_prob(torcia.zeros(2)).item(), 4)
    -1.8379
    """

    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != tuple(event_shape):
            raise ValueError(f"cov_factor must be a batch of matrices with shape "
                             f"{event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != tuple(event_shape):
            raise ValueError(f"cov_diag must be a batch of vectors with shape "
                             f"{tuple(event_shape)}")
        loc_ = loc.unsqueeze(-1)
        cov_diag_ = cov_diag.unsqueeze(-1)
        loc_, self.cov_factor, cov_diag_ = torcia.broadcast_tensors(loc_, cov_factor, cov_diag_)
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        batch_shape = self.loc.shape[:-1]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = torcia.Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        super(LowRankMultivariateNormal, new).__init__(batch_shape, self.event_shape,
                                                       validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1)
                + self._unbroadcasted_cov_diag).expand(tuple(self._batch_shape)
                                                      + tuple(self._event_shape))

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self):
        n = self._event_shape[0]
        cov_diag_sqrt_unsqueeze = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        Dinvsqrt_W = self._unbroadcasted_cov_factor / cov_diag_sqrt_unsqueeze
        K = torcia.matmul(Dinvsqrt_W, Dinvsqrt_W.mT) + torcia.eye(
            n, dtype=Dinvsqrt_W.dtype, device=Dinvsqrt_W.device)
        scale_tril = cov_diag_sqrt_unsqueeze * torcia.linalg.cholesky(K)
        return scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        W = self._unbroadcasted_cov_factor
        covariance_matrix = torcia.matmul(W, W.mT) + torcia.diag_embed(
            self._unbroadcasted_cov_diag)
        return covariance_matrix.expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        Wt_Dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        L = self._capacitance_tril
        shape = torcia.broadcast_shapes(tuple(L.shape[:-2]), tuple(Wt_Dinv.shape[:-2]))
        A = torcia.linalg.solve_triangular(
            L.expand(tuple(shape) + tuple(L.shape[-2:])),
            Wt_Dinv.expand(tuple(shape) + tuple(Wt_Dinv.shape[-2:])), upper=False)
        precision_matrix = torcia.diag_embed(self._unbroadcasted_cov_diag.reciprocal()) \
            - A.mT @ A
        return precision_matrix.expand(self._matrix_shape())

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        W_shape = tuple(shape[:-1]) + tuple(self.cov_factor.shape[-1:])
        eps_W = torcia.randn(W_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_D = torcia.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_W)
                + self._unbroadcasted_cov_diag.sqrt() * eps_D)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor,
                                       self._unbroadcasted_cov_diag, diff,
                                       self._capacitance_tril)
        log_det = _batch_lowrank_logdet(self._unbroadcasted_cov_factor,
                                        self._unbroadcasted_cov_diag, self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + log_det + M)

    def entropy(self):
        log_det = _batch_lowrank_logdet(self._unbroadcasted_cov_factor,
                                        self._unbroadcasted_cov_diag, self._capacitance_tril)
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + log_det)
        if len(self._batch_shape) == 0:
            return H
        return H.expand(self._batch_shape)


class MixtureSameFamily(Distribution):
    """A mixture whose components are the batch entries (along the last batch dimension)
    of one ``component_distribution``, weighted by a ``Categorical``.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Categorical, MixtureSameFamily, Normal
    >>> mix = Categorical(torcia.tensor([0.5, 0.5]))
    >>> d = MixtureSameFamily(mix, Normal(torcia.tensor([-1.0, 1.0]), torcia.ones(2)))
    >>> d.mean.item()
    0.0
    """

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        self._mixture_distribution = mixture_distribution
        self._component_distribution = component_distribution
        if not isinstance(self._mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an "
                             " instance of torcia.distributions.Categorical")
        if not isinstance(self._component_distribution, Distribution):
            raise ValueError("The Component distribution need to be an "
                             "instance of torcia.distributions.Distribution")
        mdbs = self._mixture_distribution.batch_shape
        cdbs = self._component_distribution.batch_shape[:-1]
        for size1, size2 in zip(reversed(mdbs), reversed(cdbs)):
            if size1 != 1 and size2 != 1 and size1 != size2:
                raise ValueError(f"`mixture_distribution.batch_shape` ({mdbs}) is not "
                                 "compatible with `component_distribution.batch_shape`"
                                 f"({cdbs})")
        km = self._mixture_distribution.logits.shape[-1]
        kc = self._component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._num_component = km
        event_shape = self._component_distribution.event_shape
        self._event_ndims = len(event_shape)
        super().__init__(batch_shape=cdbs, event_shape=event_shape,
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = torcia.Size(batch_shape)
        batch_shape_comp = tuple(batch_shape) + (self._num_component,)
        new = self._get_checked_instance(MixtureSameFamily, _instance)
        new._component_distribution = self._component_distribution.expand(batch_shape_comp)
        new._mixture_distribution = self._mixture_distribution.expand(batch_shape)
        new._num_component = self._num_component
        new._event_ndims = self._event_ndims
        event_shape = new._component_distribution.event_shape
        super(MixtureSameFamily, new).__init__(batch_shape=batch_shape,
                                               event_shape=event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property
    def support(self):
        return self._component_distribution.support

    @property
    def mixture_distribution(self):
        return self._mixture_distribution

    @property
    def component_distribution(self):
        return self._component_distribution

    @property
    def mean(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        return torcia.sum(probs * self.component_distribution.mean,
                          dim=-1 - self._event_ndims)

    @property
    def variance(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        mean_cond_var = torcia.sum(probs * self.component_distribution.variance,
                                   dim=-1 - self._event_ndims)
        var_cond_mean = torcia.sum(
            probs * (self.component_distribution.mean - self._pad(self.mean)).pow(2.0),
            dim=-1 - self._event_ndims)
        return mean_cond_var + var_cond_mean

    def cdf(self, x):
        x = self._pad(x)
        cdf_x = self.component_distribution.cdf(x)
        mix_prob = self.mixture_distribution.probs
        return torcia.sum(cdf_x * mix_prob, dim=-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        x = self._pad(x)
        log_prob_x = self.component_distribution.log_prob(x)
        log_mix_prob = torcia.log_softmax(self.mixture_distribution.logits, dim=-1)
        return torcia.logsumexp(log_prob_x + log_mix_prob, dim=-1)

    def sample(self, sample_shape=()):
        with torcia.no_grad():
            sample_len = len(sample_shape)
            batch_len = len(self.batch_shape)
            gather_dim = sample_len + batch_len
            es = tuple(self.event_shape)
            mix_sample = self.mixture_distribution.sample(sample_shape)
            mix_shape = tuple(mix_sample.shape)
            comp_samples = self.component_distribution.sample(sample_shape)
            mix_sample_r = mix_sample.reshape(mix_shape + (1,) * (len(es) + 1))
            mix_sample_r = mix_sample_r.repeat((1,) * len(mix_shape) + (1,) + es)
            samples = torcia.gather(comp_samples, gather_dim, mix_sample_r)
            return samples.squeeze(gather_dim)

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x):
        dist_batch_ndims = len(self.batch_shape)
        cat_batch_ndims = len(self.mixture_distribution.batch_shape)
        pad_ndims = 0 if cat_batch_ndims == 1 else dist_batch_ndims - cat_batch_ndims
        xs = tuple(x.shape)
        return x.reshape(xs[:-1] + (1,) * pad_ndims + xs[-1:] + (1,) * self._event_ndims)

    def __repr__(self):
        return (f"MixtureSameFamily(\n  {self.mixture_distribution},\n  "
                f"{self.component_distribution})")


class LogitRelaxedBernoulli(Distribution):
    """The logit of a :class:`RelaxedBernoulli` sample (Maddison et al., 2017)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            is_scalar = isinstance(probs, numbers.Number)
            (self.probs,) = broadcast_all(probs)
        else:
            is_scalar = isinstance(logits, numbers.Number)
            (self.logits,) = broadcast_all(logits)
        self._param = self.probs if probs is not None else self.logits
        batch_shape = torcia.Size() if is_scalar else self._param.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogitRelaxedBernoulli, _instance)
        batch_shape = torcia.Size(batch_shape)
        new.temperature = self.temperature
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(batch_shape)
            new._param = new.logits
        super(LogitRelaxedBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.shape

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(torcia.rand(shape, dtype=probs.dtype, device=probs.device))
        return (uniforms.log() - (-uniforms).log1p() + probs.log()
                - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        temperature = torcia.as_tensor(self.temperature, dtype=diff.dtype)
        return temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    """The Concrete / relaxed Bernoulli distribution on (0, 1) at ``temperature``, with
    reparameterised samples.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import RelaxedBernoulli
    >>> d = RelaxedBernoulli(torcia.tensor(0.5), probs=torcia.tensor([0.3, 0.9]))
    >>> tuple(d.rsample((4,)).shape)
    (4, 2)
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base_dist, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class ExpRelaxedCategorical(Distribution):
    """The log of a :class:`RelaxedOneHotCategorical` sample (Maddison et al., 2017)."""

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        batch_shape = self._categorical.batch_shape
        event_shape = self._categorical.param_shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        batch_shape = torcia.Size(batch_shape)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        super(ExpRelaxedCategorical, new).__init__(batch_shape, self.event_shape,
                                                   validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        uniforms = clamp_probs(torcia.rand(shape, dtype=self.logits.dtype,
                                           device=self.logits.device))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        K = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        temperature = torcia.as_tensor(self.temperature, dtype=value.dtype)
        log_scale = (torcia.full_like(temperature, float(K)).lgamma()
                     - temperature.log() * (-(K - 1)))
        score = self.logits - value * temperature
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """The Concrete / Gumbel-softmax distribution on the simplex at ``temperature``, with
    reparameterised samples.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import RelaxedOneHotCategorical
    >>> d = RelaxedOneHotCategorical(torcia.tensor(0.5), logits=torcia.zeros(3))
    >>> round(d.rsample().sum().item(), 6)
    1.0
    """

    arg_constraints = {"probs": constraints.simplex,
                       "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base_dist = ExpRelaxedCategorical(temperature, probs, logits,
                                          validate_args=validate_args)
        super().__init__(base_dist, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class LogisticNormal(TransformedDistribution):
    """The distribution on the simplex of ``stick_breaking(x)`` for ``x ~ Normal(loc, scale)``
    (K - 1 dimensions map to K).

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import LogisticNormal
    >>> d = LogisticNormal(torcia.zeros(2), torcia.ones(2))
    >>> tuple(d.sample().shape)
    (3,)
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base_dist = Normal(loc, scale, validate_args=validate_args)
        if not base_dist.batch_shape:
            base_dist = base_dist.expand([1])
        super().__init__(base_dist, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        return self.base_dist.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.base_dist.scale


class LKJCholesky(Distribution):
    """The LKJ distribution over Cholesky factors of ``dim`` x ``dim`` correlation matrices
    (Lewandowski, Kurowicka and Joe, 2009), sampled by the onion method.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import LKJCholesky
    >>> L = LKJCholesky(3, 0.5).sample()
    >>> [round(v, 6) for v in (L @ L.T).diagonal().tolist()]
    [1.0, 1.0, 1.0]
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ValueError(f"Expected dim to be an integer greater than or equal to 2. "
                             f"Found dim={dim}.")
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        batch_shape = self.concentration.shape
        event_shape = torcia.Size((dim, dim))
        marginal_conc = self.concentration + 0.5 * (self.dim - 2)
        offset = torcia.arange(self.dim - 1, dtype=self.concentration.dtype,
                               device=self.concentration.device)
        offset = torcia.cat([offset.new_zeros((1,)), offset])
        beta_conc1 = offset + 0.5
        beta_conc0 = marginal_conc.unsqueeze(-1) - 0.5 * offset
        self._beta = Beta(beta_conc1, beta_conc0)
        super().__init__(batch_shape, event_shape, validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = torcia.Size(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(batch_shape)
        new._beta = self._beta.expand(tuple(batch_shape) + (self.dim,))
        super(LKJCholesky, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        with torcia.no_grad():
            y = self._beta.sample(sample_shape).unsqueeze(-1)
            u_normal = torcia.randn(self._extended_shape(sample_shape), dtype=y.dtype,
                                    device=y.device).tril(-1)
            norm = torcia.linalg.vector_norm(u_normal, dim=-1, keepdim=True)
            u_hypersphere = u_normal / torcia.where(norm == 0, torcia.ones_like(norm), norm)
            w = torcia.sqrt(y) * u_hypersphere
            eps = finfo(w.dtype).tiny
            diag_elems = torcia.clamp(1 - torcia.sum(w ** 2, dim=-1), min=eps).sqrt()
            return w + torcia.diag_embed(diag_elems)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diag_elems = value.diagonal(dim1=-1, dim2=-2)[..., 1:]
        order = torcia.arange(2, self.dim + 1, dtype=self.concentration.dtype,
                              device=self.concentration.device)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized_log_pdf = torcia.sum(order * diag_elems.log(), dim=-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = torcia.lgamma(alpha) * dm1
        numerator = _special.mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        normalize_term = pi_constant + numerator - denominator
        return unnormalized_log_pdf - normalize_term


class Wishart(ExponentialFamily):
    """The Wishart distribution over positive-definite matrices, with ``df`` degrees of
    freedom and one of ``covariance_matrix``, ``precision_matrix`` or ``scale_tril``;
    sampled by the Bartlett decomposition, with pathwise gradients.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Wishart
    >>> Wishart(torcia.tensor(4.0), torcia.eye(2)).mean.tolist()
    [[4.0, 0.0], [0.0, 4.0]]
    """

    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        if (covariance_matrix is not None) + (scale_tril is not None) + (
                precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        param = next(p for p in (covariance_matrix, precision_matrix, scale_tril)
                     if p is not None)
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        if isinstance(df, numbers.Number):
            batch_shape = torcia.Size(param.shape[:-2])
            self.df = torcia.tensor(float(df), dtype=param.dtype, device=param.device)
        else:
            batch_shape = torcia.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape))
            self.df = df.expand(batch_shape)
        event_shape = param.shape[-2:]
        if bool(self.df.le(event_shape[-1] - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = "
                             f"{event_shape[-1] - 1}.")
        if scale_tril is not None:
            self.scale_tril = param.expand(tuple(batch_shape) + (-1, -1))
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(tuple(batch_shape) + (-1, -1))
        else:
            self.precision_matrix = param.expand(tuple(batch_shape) + (-1, -1))
        if bool(self.df.lt(event_shape[-1]).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur "
                          "for ndim - 1 < df < ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = torcia.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._chi2(self.df, batch_shape)

    def _chi2(self, df, batch_shape):
        p = self._event_shape[-1]
        offsets = torcia.arange(p, dtype=self._unbroadcasted_scale_tril.dtype,
                                device=self._unbroadcasted_scale_tril.device)
        return Chi2(df=df.unsqueeze(-1) - offsets.expand(tuple(batch_shape) + (-1,)))

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = torcia.Size(batch_shape)
        cov_shape = tuple(batch_shape) + tuple(self.event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(cov_shape)
        new.df = self.df.expand(batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, getattr(self, name).expand(cov_shape))
        super(Wishart, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._dist_chi2 = new._chi2(new.df, batch_shape)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        return torcia.linalg.inv(L @ L.mT).expand(self._matrix_shape())

    @property
    def mean(self):
        return self.df.view(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = torcia.where(factor <= 0, torcia.full_like(factor, math.nan), factor)
        return factor.view(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self):
        V = self.covariance_matrix
        diag_V = V.diagonal(dim1=-2, dim2=-1)
        return self.df.view(tuple(self._batch_shape) + (1, 1)) * (
            V.pow(2) + diag_V.unsqueeze(-1) * diag_V.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape):
        p = self._event_shape[-1]
        chi = self._dist_chi2.rsample(sample_shape).sqrt()
        chi = chi.clamp(min=finfo(chi.dtype).eps)
        rows, cols = np.tril_indices(p, k=-1)
        below = torcia.randn(tuple(sample_shape) + tuple(self._batch_shape) + (len(rows),),
                             dtype=chi.dtype, device=chi.device)
        flat = torcia.tensor(rows * p + cols, device=chi.device)
        lower = below.new_zeros(tuple(below.shape[:-1]) + (p * p,)).scatter(
            -1, flat.expand(tuple(below.shape[:-1]) + (len(rows),)), below)
        noise = torcia.diag_embed(chi) + lower.reshape(tuple(below.shape[:-1]) + (p, p))
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.mT

    def rsample(self, sample_shape=(), max_try_correction=None):
        """Draw by the Bartlett decomposition; a singular draw (likely when df is close to
        the dimension) is redrawn up to ``max_try_correction`` times (10 by default)."""
        sample_shape = torcia.Size(sample_shape)
        if max_try_correction is None:
            max_try_correction = 10
        sample = self._bartlett_sampling(sample_shape)
        is_singular = ~self.support.check(sample)
        for _ in range(max_try_correction):
            if not bool(is_singular.any()):
                break
            sample = torcia.where(is_singular.unsqueeze(-1).unsqueeze(-1),
                                  self._bartlett_sampling(sample_shape), sample)
            is_singular = ~self.support.check(sample)
        else:
            if bool(is_singular.any()):
                warnings.warn(f"Singular sample detected: {int(is_singular.sum())} of "
                              f"{is_singular.numel()} draws are not positive definite after "
                              f"{max_try_correction} redraws.", stacklevel=2)
        return sample

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        L = self._unbroadcasted_scale_tril
        precision = torcia.linalg.inv(L @ L.mT)
        return (-nu * (p * _LOG_2 / 2 + L.diagonal(dim1=-2, dim2=-1).log().sum(-1))
                - _special.mvlgamma(nu / 2, p)
                + (nu - p - 1) / 2 * torcia.linalg.slogdet(value)[1]
                - (precision @ value).diagonal(dim1=-2, dim2=-1).sum(-1) / 2)

    def entropy(self):
        nu = self.df
        p = self._event_shape[-1]
        return ((p + 1) * (p * _LOG_2 / 2 + self._unbroadcasted_scale_tril.diagonal(
            dim1=-2, dim2=-1).log().sum(-1))
            + _special.mvlgamma(nu / 2, p)
            - (nu - p - 1) / 2 * _special.mvdigamma(nu / 2, p) + nu * p / 2)

    @property
    def _natural_params(self):
        nu = self.df
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (nu - p - 1) / 2

    def _log_normalizer(self, x, y):
        p = self._event_shape[-1]
        return ((y + (p + 1) / 2) * (-torcia.linalg.slogdet(-2 * x)[1] + _LOG_2 * p)
                + _special.mvlgamma(y + (p + 1) / 2, p))
