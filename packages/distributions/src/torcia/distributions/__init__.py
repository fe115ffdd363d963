"""torcia.distributions: probability distributions, transforms and KL divergences.

The API follows ``torch.distributions``: a :class:`Distribution` has ``batch_shape`` and
``event_shape``, ``sample``/``rsample`` (reparameterised, with pathwise gradients),
``log_prob``, ``cdf``/``icdf``, ``entropy``, ``mean``, ``mode``, ``variance`` and
``support``; parameters are checked against ``arg_constraints`` (on by default, see
:meth:`Distribution.set_default_validate_args`). Randomness comes from torcia's default
generator, so ``torcia.manual_seed`` makes draws reproducible.

Distributions and KL divergences are registered through this package's hook
(:mod:`torcia.distributions.hookspecs`); a distribution that a plugin distribution
registers is reachable as an attribute, e.g. ``torcia.distributions.Kumaraswamy2``.

Examples
--------
>>> import torcia
>>> from torcia.distributions import Categorical, Normal, kl_divergence
>>> _ = torcia.manual_seed(0)
>>> policy = Categorical(logits=torcia.tensor([0.0, 1.0, 2.0]))
>>> action = policy.sample()
>>> policy.log_prob(action).shape
torcia.Size([])
>>> round(kl_divergence(Normal(0.0, 1.0), Normal(0.0, 2.0)).item(), 4)
0.3181
"""

from __future__ import annotations

from torcia import plugins
from torcia.distributions import hookspecs
from torcia.plugins import hookimpl

plugins.add_hookspecs(hookspecs)

from torcia.distributions import constraint_registry, constraints, transforms  # noqa: E402
from torcia.distributions._more import (  # noqa: E402
    Cauchy,
    ContinuousBernoulli,
    FisherSnedecor,
    GeneralizedPareto,
    Geometric,
    Gumbel,
    HalfCauchy,
    HalfNormal,
    InverseGamma,
    Kumaraswamy,
    NegativeBinomial,
    Pareto,
    StudentT,
    VonMises,
    Weibull,
)
from torcia.distributions._multivariate import (  # noqa: E402
    LKJCholesky,
    LogisticNormal,
    LowRankMultivariateNormal,
    MixtureSameFamily,
    Multinomial,
    RelaxedBernoulli,
    RelaxedOneHotCategorical,
    Wishart,
)
from torcia.distributions.bernoulli import Bernoulli  # noqa: E402
from torcia.distributions.binomial import Binomial  # noqa: E402
from torcia.distributions.categorical import (  # noqa: E402
    Categorical,
    OneHotCategorical,
    OneHotCategoricalStraightThrough,
)
from torcia.distributions.constraint_registry import biject_to, transform_to  # noqa: E402
from torcia.distributions.dirichlet import Beta, Dirichlet  # noqa: E402
from torcia.distributions.distribution import Distribution  # noqa: E402
from torcia.distributions.exp_family import ExponentialFamily  # noqa: E402
from torcia.distributions.gamma import Chi2, Exponential, Gamma  # noqa: E402
from torcia.distributions.independent import Independent  # noqa: E402
from torcia.distributions.kl import kl_divergence, register_kl  # noqa: E402
from torcia.distributions.laplace import Laplace  # noqa: E402
from torcia.distributions.log_normal import LogNormal  # noqa: E402
from torcia.distributions.multivariate_normal import MultivariateNormal  # noqa: E402
from torcia.distributions.normal import Normal  # noqa: E402
from torcia.distributions.poisson import Poisson  # noqa: E402
from torcia.distributions.transformed_distribution import (  # noqa: E402
    TransformedDistribution,
)
from torcia.distributions.transforms import *  # noqa: E402, F403
from torcia.distributions.uniform import Uniform  # noqa: E402

#: the distributions torcia-distributions' own plugin registers, by lowercase name
BUILTIN = {
    cls.__name__.lower(): cls
    for cls in (
        Bernoulli, Beta, Binomial, Categorical, Cauchy, Chi2, ContinuousBernoulli, Dirichlet,
        Exponential, FisherSnedecor, Gamma, GeneralizedPareto, Geometric, Gumbel, HalfCauchy,
        HalfNormal, Independent, InverseGamma, Kumaraswamy, Laplace, LKJCholesky, LogNormal,
        LogisticNormal, LowRankMultivariateNormal, MixtureSameFamily, Multinomial,
        MultivariateNormal, NegativeBinomial, Normal, OneHotCategorical,
        OneHotCategoricalStraightThrough, Pareto, Poisson, RelaxedBernoulli,
        RelaxedOneHotCategorical, StudentT, TransformedDistribution, Uniform, VonMises,
        Weibull, Wishart,
    )
}

__all__ = [cls.__name__ for cls in BUILTIN.values()] + [
    "Distribution", "DistributionRegistry", "ExponentialFamily", "biject_to",
    "constraint_registry", "constraints", "create", "transform_to",
    "distributions", "hookimpl", "kl_divergence", "register_kl", "transforms",
] + transforms.__all__


class DistributionRegistry(plugins.Registry):
    """The table that ``torcia_register_distributions`` fills: distribution classes by
    name (``add``) and closed-form KL divergences by pair of classes (``add_kl``).

    Examples
    --------
    >>> from torcia.distributions import distributions
    >>> distributions.get("normal").__name__
    'Normal'
    """

    _KL_KIND = "kl divergence"

    def __init__(self):
        super().__init__("distribution", "torcia_register_distributions")
        self._kl_names: set[str] = set()
        self._kl_pairs: dict = {}

    def add_kl(self, type_p, type_q, fn) -> None:
        """Register ``fn(p, q)`` as KL(p || q) for ``p`` of ``type_p`` and ``q`` of
        ``type_q`` (subclasses included; the most specific pair wins)."""
        from torcia.distributions import kl

        if not (isinstance(type_p, type) and issubclass(type_p, Distribution)
                and isinstance(type_q, type) and issubclass(type_q, Distribution)):
            raise TypeError(f"add_kl expects two Distribution subclasses, got {type_p!r} and "
                            f"{type_q!r}")
        name = f"{type_p.__name__}||{type_q.__name__}"
        kind, self.kind = self.kind, self._KL_KIND
        try:
            super().add(name, fn)
        finally:
            self.kind = kind
        self._kl_names.add(name)
        self._kl_pairs[type_p, type_q] = fn
        kl._add(type_p, type_q, fn)

    def reset(self) -> None:
        from torcia.distributions import kl

        for pair, fn in getattr(self, "_kl_pairs", {}).items():
            if kl._KL_REGISTRY.get(pair) is fn:
                del kl._KL_REGISTRY[pair]
        kl._KL_MEMOIZE.clear()
        self._kl_names = set()
        self._kl_pairs = {}
        super().reset()

    def classes(self) -> dict:
        """The registered distribution classes by name (KL entries left out)."""
        return {k: v for k, v in self.build().items() if k not in self._kl_names}

    def names(self) -> list[str]:
        return sorted(self.classes())

    def kl_pairs(self) -> list[tuple[type, type]]:
        """The (type_p, type_q) pairs registered through the hook."""
        self.build()
        return list(self._kl_pairs)


distributions = DistributionRegistry()


def create(name: str, *args, **kwargs) -> Distribution:
    """Build the distribution registered as ``name`` (lowercase, or the class name).

    Examples
    --------
    >>> from torcia.distributions import create
    >>> create("Normal", 0.0, 1.0).mean.item()
    0.0
    """
    entries = distributions.classes()
    if name in entries:
        return entries[name](*args, **kwargs)
    if name.lower() in entries:
        return entries[name.lower()](*args, **kwargs)
    raise KeyError(plugins.missing_message("distribution", name, sorted(entries)))


def __getattr__(name: str):
    # a distribution class from a plugin distribution: torcia.distributions.Kumaraswamy2
    if not name.startswith("_"):
        for cls in distributions.classes().values():
            if getattr(cls, "__name__", None) == name:
                return cls
        msg = plugins.missing_message("distribution", name, distributions.names())
        if "blocked" in msg:
            # Python's own message first (what code matching on it expects), then which
            # blocked plugin may provide the name
            raise AttributeError(f"module 'torcia.distributions' has no attribute {name!r}: {msg}")
    raise AttributeError(f"module 'torcia.distributions' has no attribute {name!r}")
