"""KL divergences between distributions: :func:`kl_divergence` and :func:`register_kl`.

The closed forms are PyTorch's (``torch.distributions.kl``). A pair is dispatched to the
most specific registered implementation by the two classes' MROs, as PyTorch does. Pairs
from plugins arrive through the ``torcia_register_distributions`` hook
(``registry.add_kl``); the built-in pairs are registered through that hook too, by
torcia-distributions' own plugin.
"""

from __future__ import annotations

import functools
import math
import warnings

import torcia
from torcia import plugins
from torcia.distributions._more import (
    EULER_GAMMA,
    Cauchy,
    ContinuousBernoulli,
    Geometric,
    Gumbel,
    HalfNormal,
    Pareto,
)
from torcia.distributions._multivariate import (
    LowRankMultivariateNormal,
    _batch_lowrank_logdet,
    _batch_lowrank_mahalanobis,
)
from torcia.distributions.bernoulli import Bernoulli
from torcia.distributions.binomial import Binomial
from torcia.distributions.categorical import Categorical, OneHotCategorical
from torcia.distributions.dirichlet import Beta, Dirichlet
from torcia.distributions.distribution import Distribution
from torcia.distributions.exp_family import ExponentialFamily
from torcia.distributions.gamma import Exponential, Gamma
from torcia.distributions.independent import Independent
from torcia.distributions.laplace import Laplace
from torcia.distributions.multivariate_normal import (
    MultivariateNormal,
    _batch_mahalanobis,
)
from torcia.distributions.normal import Normal
from torcia.distributions.poisson import Poisson
from torcia.distributions.transformed_distribution import TransformedDistribution
from torcia.distributions.uniform import Uniform
from torcia.distributions.utils import _sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict = {}
_KL_MEMOIZE: dict = {}
#: the closed forms torcia-distributions' own plugin registers: (type_p, type_q) -> fn
BUILTIN: dict = {}


def register_kl(type_p, type_q):
    """A decorator registering a pairwise KL implementation, as ``torch``'s.

    Examples
    --------
    >>> from torcia.distributions import Normal, kl_divergence, register_kl
    >>> class MyNormal(Normal):
    ...     "A Normal with its own KL."
    >>> @register_kl(MyNormal, MyNormal)
    ... def kl_my(p, q):
    ...     return (p.loc - q.loc) ** 2 / 2
    >>> kl_divergence(MyNormal(0.0, 1.0), MyNormal(2.0, 1.0)).item()
    2.0
    """
    if not isinstance(type_p, type) or not issubclass(type_p, Distribution):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not isinstance(type_q, type) or not issubclass(type_q, Distribution):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _add(type_p, type_q, fun)
        return fun

    return decorator


def _add(type_p, type_q, fun):
    _KL_REGISTRY[type_p, type_q] = fun
    _KL_MEMOIZE.clear()


def _builtin(type_p, type_q):
    def decorator(fun):
        BUILTIN[type_p, type_q] = fun
        return fun

    return decorator


@functools.total_ordering
class _Match:
    __slots__ = ["types"]

    def __init__(self, *types):
        self.types = types

    def __eq__(self, other):
        return self.types == other.types

    def __le__(self, other):
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p, type_q):
    matches = [(super_p, super_q) for super_p, super_q in _KL_REGISTRY
               if issubclass(type_p, super_p) and issubclass(type_q, super_q)]
    if not matches:
        return NotImplemented
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun = _KL_REGISTRY[left_p, left_q]
    right_fun = _KL_REGISTRY[right_p, right_q]
    if left_fun is not right_fun:
        warnings.warn(
            f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please register_kl"
            f"({left_p.__name__}, {right_q.__name__})", RuntimeWarning, stacklevel=3)
    return left_fun


def _infinite_like(tensor):
    return torcia.full_like(tensor, math.inf)


def _x_log_x(tensor):
    return tensor * tensor.log()


def _batch_trace_XXT(bmat):
    """The trace of ``X @ X.mT`` over batch dimensions."""
    n = bmat.shape[-1]
    m = bmat.shape[-2]
    flat_trace = bmat.reshape(tuple(bmat.shape[:-2]) + (n * m,)).pow(2).sum(-1)
    return flat_trace


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)], batched over the two batch shapes.

    Raises ``NotImplementedError`` when no closed form is registered for the pair.

    Examples
    --------
    >>> import torcia
    >>> from torcia.distributions import Normal, kl_divergence
    >>> kl_divergence(Normal(0.0, 1.0), Normal(1.0, 1.0)).item()
    0.5
    """
    from torcia.distributions import distributions

    distributions.build()  # plugins' (and the built-in) pairs arrive with the registry
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        msg = (f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type "
               f"{q.__class__.__name__}")
        blocked = plugins.blocked_plugins()
        if blocked:
            msg += ". Blocked plugins that may provide it: " + ", ".join(
                f"{i.name} ({i.distribution}, {i.reason})" for i in blocked)
        raise NotImplementedError(msg)
    return fun(p, q)


# ---------------------------------------------------------------------------------------
# Same family
# ---------------------------------------------------------------------------------------


@_builtin(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (_softplus(-q.logits) - _softplus(-p.logits))
    t1 = torcia.where(q.probs == 0, _infinite_like(t1), t1)
    t1 = torcia.where(p.probs == 0, torcia.zeros_like(t1), t1)
    t2 = (1 - p.probs) * (_softplus(q.logits) - _softplus(p.logits))
    t2 = torcia.where(q.probs == 1, _infinite_like(t2), t2)
    t2 = torcia.where(p.probs == 1, torcia.zeros_like(t2), t2)
    return t1 + t2


def _softplus(x):
    return x.clamp(min=0) + torcia.log1p(torcia.exp(-x.abs()))


@_builtin(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_params_p = p.concentration1 + p.concentration0
    sum_params_q = q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sum_params_p.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sum_params_q.lgamma()
    t3 = (p.concentration1 - q.concentration1) * torcia.digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * torcia.digamma(p.concentration0)
    t5 = (sum_params_q - sum_params_p) * torcia.digamma(sum_params_p)
    return t1 - t2 + t3 + t4 + t5


@_builtin(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError(
            "KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p()
                          - (-q.probs).log1p())
    inf_idxs = p.total_count > q.total_count
    return torcia.where(inf_idxs, _infinite_like(kl), kl)


@_builtin(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = torcia.where((q.probs == 0).expand_as(t), torcia.full_like(t, math.inf), t)
    t = torcia.where((p.probs == 0).expand_as(t), torcia.zeros_like(t), t)
    return t.sum(-1)


@_builtin(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p_concentration = p.concentration.sum(-1)
    sum_q_concentration = q.concentration.sum(-1)
    t1 = sum_p_concentration.lgamma() - sum_q_concentration.lgamma()
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = p.concentration.digamma() - sum_p_concentration.digamma().unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@_builtin(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    t1 = -rate_ratio.log()
    return t1 + rate_ratio - 1


@_builtin(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential "
                                  "families cannot be computed using Bregman divergences")
    p_nparams = [np_.detach().requires_grad_() for np_ in p._natural_params]
    q_nparams = q._natural_params
    with torcia.enable_grad():
        lg_normal = p._log_normalizer(*p_nparams)
        gradients = torcia.autograd.grad(lg_normal.sum(), p_nparams, create_graph=True)
    result = q._log_normalizer(*q_nparams) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q_nparams, gradients):
        term = (qnp - pnp) * g
        result = result - _sum_rightmost(term, len(q.event_shape))
    return result


@_builtin(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * torcia.log(p.rate / q.rate)
    t2 = torcia.lgamma(q.concentration) - torcia.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * torcia.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@_builtin(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)


@_builtin(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * torcia.exp(-loc_abs_diff / p.scale)
    return t1 + t2 + t3 - 1


@_builtin(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different "
                         "event shapes cannot be computed")
    half_term1 = (q._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                  - p._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    combined_batch_shape = torcia.broadcast_shapes(
        tuple(q._unbroadcasted_scale_tril.shape[:-2]),
        tuple(p._unbroadcasted_scale_tril.shape[:-2]))
    n = p.event_shape[0]
    q_scale_tril = q._unbroadcasted_scale_tril.expand(tuple(combined_batch_shape) + (n, n))
    p_scale_tril = p._unbroadcasted_scale_tril.expand(tuple(combined_batch_shape) + (n, n))
    term2 = _batch_trace_XXT(torcia.linalg.solve_triangular(q_scale_tril, p_scale_tril,
                                                            upper=False))
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, (q.loc - p.loc))
    return half_term1 + 0.5 * (term2 + term3 - n)


@_builtin(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@_builtin(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@_builtin(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (torcia.log(p.rate) - torcia.log(q.rate)) - (p.rate - q.rate)


@_builtin(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError
    if p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


@_builtin(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return torcia.where((q.low > p.low) | (q.high < p.high), _infinite_like(result), result)


# ---------------------------------------------------------------------------------------
# Across families
# ---------------------------------------------------------------------------------------


@_builtin(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@_builtin(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return (-p.entropy() - q.rate.log()
            + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0)))


@_builtin(Beta, Gamma)
def _kl_beta_gamma(p, q):
    t1 = -p.entropy()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (p.concentration1.digamma()
                                  - (p.concentration1 + p.concentration0).digamma())
    t4 = q.rate * p.concentration1 / (p.concentration1 + p.concentration0)
    return t1 + t2 - t3 + t4


@_builtin(Beta, Normal)
def _kl_beta_normal(p, q):
    E_beta = p.concentration1 / (p.concentration1 + p.concentration0)
    var_normal = q.scale.pow(2)
    t1 = -p.entropy()
    t2 = 0.5 * (var_normal * 2 * math.pi).log()
    t3 = (E_beta * (1 - E_beta) / (p.concentration1 + p.concentration0 + 1)
          + E_beta.pow(2)) * 0.5
    t4 = q.loc * E_beta
    t5 = q.loc.pow(2) * 0.5
    return t1 + t2 + (t3 - t4 + t5) / var_normal


@_builtin(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return torcia.where((q.low > p.support.lower_bound) | (q.high < p.support.upper_bound),
                        _infinite_like(result), result)


@_builtin(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * torcia.log(ratio)
    return (t1 + ratio + q.concentration.lgamma() + q.concentration * EULER_GAMMA
            - (1 + EULER_GAMMA))



@_builtin(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * torcia.log(rate_sqr * var_normal * 2 * math.pi)
    t2 = rate_sqr.reciprocal()
    t3 = q.loc / p.rate
    t4 = q.loc.pow(2) * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var_normal


@_builtin(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration / p.rate)


@_builtin(Gamma, Normal)
def _kl_gamma_normal(p, q):
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = (0.5 * torcia.log(beta_sqr * var_normal * 2 * math.pi) - p.concentration
          - p.concentration.lgamma())
    t2 = 0.5 * (p.concentration.pow(2) + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return (t1 + (p.concentration - 1) * p.concentration.digamma()
            + (t2 - t3 + t4) / var_normal)


@_builtin(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * torcia.log(2 * scale_sqr_var_ratio / math.pi)
    t2 = 0.5 * p.loc.pow(2)
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1


@_builtin(Normal, Laplace)
def _kl_normal_laplace(p, q):
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = torcia.log(scale_ratio)
    t2 = math.sqrt(2 / math.pi) * p.scale * torcia.exp(-0.5 * loc_diff_scale_ratio.pow(2))
    t3 = loc_diff * torcia.erf(math.sqrt(0.5) * loc_diff_scale_ratio)
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


@_builtin(Uniform, Beta)
def _kl_uniform_beta(p, q):
    common_term = p.high - p.low
    t1 = torcia.log(common_term)
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) \
        / common_term
    t3 = (q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low)
                                   + common_term) / common_term
    t4 = (q.concentration1.lgamma() + q.concentration0.lgamma()
          - (q.concentration1 + q.concentration0).lgamma())
    result = t3 + t4 - t1 - t2
    return torcia.where((p.high > q.support.upper_bound) | (p.low < q.support.lower_bound),
                        _infinite_like(result), result)


@_builtin(Uniform, Exponential)
def _kl_uniform_exponetial(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return torcia.where(p.low < q.support.lower_bound, _infinite_like(result), result)


@_builtin(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) \
        / common_term
    t4 = q.rate * (p.high + p.low) / 2
    result = -t1 + t2 + t3 + t4
    return torcia.where(p.low < q.support.lower_bound, _infinite_like(result), result)


@_builtin(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = (common_term).pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)



# ---------------------------------------------------------------------------------------
# The remaining families
# ---------------------------------------------------------------------------------------


def _inf_where(mask, result):
    return torcia.where(mask, _infinite_like(result), result)


def _solve_tril(L, B):
    shape = torcia.broadcast_shapes(tuple(L.shape[:-2]), tuple(B.shape[:-2]))
    return torcia.linalg.solve_triangular(L.expand(tuple(shape) + tuple(L.shape[-2:])),
                                          B.expand(tuple(shape) + tuple(B.shape[-2:])),
                                          upper=False)


@_builtin(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


@_builtin(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + torcia.log1p(-p.probs)
    t3 = -q._cont_bern_log_norm() - torcia.log1p(-q.probs)
    return t1 + t2 + t3


@_builtin(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * EULER_GAMMA
    t3 = torcia.exp(ct2 + (1 + ct1).lgamma() - ct3)
    return t1 + t2 + t3 - (1 + EULER_GAMMA)


@_builtin(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - torcia.log1p(-q.probs) / p.probs - q.logits


@_builtin(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@_builtin(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrankmultivariatenormal_lowrankmultivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Low Rank Multivariate Normals with "
                         "different event shapes cannot be computed")
    term1 = (_batch_lowrank_logdet(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag,
                                   q._capacitance_tril)
             - _batch_lowrank_logdet(p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag,
                                     p._capacitance_tril))
    term3 = _batch_lowrank_mahalanobis(q._unbroadcasted_cov_factor,
                                       q._unbroadcasted_cov_diag, q.loc - p.loc,
                                       q._capacitance_tril)
    qWt_qDinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    A = _solve_tril(q._capacitance_tril, qWt_qDinv)
    term21 = (p._unbroadcasted_cov_diag / q._unbroadcasted_cov_diag).sum(-1)
    term22 = _batch_trace_XXT(p._unbroadcasted_cov_factor
                              * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term23 = _batch_trace_XXT(A * p._unbroadcasted_cov_diag.sqrt().unsqueeze(-2))
    term24 = _batch_trace_XXT(A.matmul(p._unbroadcasted_cov_factor))
    term2 = term21 + term22 - term23 - term24
    return 0.5 * (term1 + term2 + term3 - p.event_shape[0])


@_builtin(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrankmultivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with "
                         "different event shapes cannot be computed")
    term1 = (_batch_lowrank_logdet(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag,
                                   q._capacitance_tril)
             - 2 * p._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
    term3 = _batch_lowrank_mahalanobis(q._unbroadcasted_cov_factor,
                                       q._unbroadcasted_cov_diag, q.loc - p.loc,
                                       q._capacitance_tril)
    qWt_qDinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    A = _solve_tril(q._capacitance_tril, qWt_qDinv)
    term21 = _batch_trace_XXT(p._unbroadcasted_scale_tril
                              * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term22 = _batch_trace_XXT(A.matmul(p._unbroadcasted_scale_tril))
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


@_builtin(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrankmultivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with "
                         "different event shapes cannot be computed")
    term1 = (2 * q._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
             - _batch_lowrank_logdet(p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag,
                                     p._capacitance_tril))
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, (q.loc - p.loc))
    p_cov_diag = torcia.diag_embed(p._unbroadcasted_cov_diag.sqrt())
    term21 = _batch_trace_XXT(_solve_tril(q._unbroadcasted_scale_tril,
                                          p._unbroadcasted_cov_factor))
    term22 = _batch_trace_XXT(_solve_tril(q._unbroadcasted_scale_tril, p_cov_diag))
    return 0.5 * (term1 + term21 + term22 + term3 - p.event_shape[0])


@_builtin(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    t1 = q.alpha * scale_ratio.log()
    t2 = -alpha_ratio.log()
    result = t1 + t2 + alpha_ratio - 1
    return _inf_where(p.support.lower_bound < q.support.lower_bound, result)


@_builtin(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() - p.mean * q.logits - torcia.log1p(-q.probs) - q._cont_bern_log_norm()


@_builtin(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() - torcia.log(q.rate) + q.rate * p.mean


@_builtin(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    t1 = -p.entropy()
    t2 = 0.5 * (math.log(2.0 * math.pi) + torcia.square(q.loc / q.scale)) + torcia.log(q.scale)
    t3 = (p.variance + torcia.square(p.mean) - 2.0 * q.loc * p.mean) / (
        2.0 * torcia.square(q.scale))
    return t1 + t2 + t3


@_builtin(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return _inf_where(torcia.ge(q.low, p.support.lower_bound)
                      | torcia.le(q.high, p.support.upper_bound), result)


@_builtin(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = torcia.exp(loc_scale_ratio) * scale_rate_prod / (scale_rate_prod + 1)
    t3 = scale_rate_prod.reciprocal()
    return t1 - loc_scale_ratio + t2 + t3


@_builtin(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = ((p.concentration - 1) * p.concentration.digamma() - p.concentration.lgamma()
          - p.concentration)
    t2 = beta_scale_prod.log() + p.concentration / beta_scale_prod
    t3 = (torcia.exp(loc_scale_ratio)
          * (1 + beta_scale_prod.reciprocal()).pow(-p.concentration) - loc_scale_ratio)
    return t1 + t2 + t3


@_builtin(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * EULER_GAMMA - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (EULER_GAMMA + 1)


@_builtin(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = torcia.exp(-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio)
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))


@_builtin(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    scale_rate_prod = p.scale * q.rate
    t1 = (p.alpha / scale_rate_prod).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * scale_rate_prod / (p.alpha - 1)
    return _inf_where(p.alpha <= 1, t1 - t2 + t3 - 1)


@_builtin(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common_term = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common_term
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common_term
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return _inf_where(p.alpha <= 1, t1 + t2 + t3 + t4 - 1)


@_builtin(Pareto, Normal)
def _kl_pareto_normal(p, q):
    var_normal = 2 * q.scale.pow(2)
    common_term = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * common_term.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common_term - q.loc).pow(2)
    return _inf_where(p.alpha <= 2, t1 - t2 + (t3 + t4) / var_normal - 1)


@_builtin(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() - p.mean * q.logits - torcia.log1p(-q.probs) - q._cont_bern_log_norm()
    return _inf_where(torcia.ge(p.high, q.support.upper_bound)
                      | torcia.le(p.low, q.support.lower_bound), result)


@_builtin(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * (torcia.exp(-high_loc_diff) - torcia.exp(-low_loc_diff))
    return t1 - t2


@_builtin(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    support_uniform = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * support_uniform).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - support_uniform) / support_uniform
    return _inf_where(p.low < q.support.lower_bound, t2 * (q.alpha + 1) - t1)


# pairs whose KL is infinite: p's support reaches where q has no density
def _kl_infinity(p, q):
    return _infinite_like(p.mean if not isinstance(p, (Gumbel, Laplace, Normal)) else p.loc)


for _p, _qs in (
    (Beta, (Pareto,)),
    (ContinuousBernoulli, (Pareto,)),
    (Exponential, (Beta, ContinuousBernoulli, Pareto, Uniform)),
    (Gamma, (Beta, ContinuousBernoulli, Pareto, Uniform)),
    (Gumbel, (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)),
    (Laplace, (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)),
    (Normal, (Beta, ContinuousBernoulli, Exponential, Gamma, Pareto, Uniform)),
    (Pareto, (Beta, ContinuousBernoulli, Uniform)),
    (Poisson, (Bernoulli, Binomial)),
):
    for _q in _qs:
        BUILTIN[_p, _q] = _kl_infinity
