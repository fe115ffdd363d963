"""Random sampling ops at ``torcia.*``: ``poisson``, ``binomial`` and the in-place
fills ``cauchy_``, ``geometric_``, ``log_normal_``.
"""

from __future__ import annotations

import numpy as np

from torcia import _creation as C
from torcia.random import rng_of


def poisson(input, generator=None):
    """Samples of Poisson distributions with rates ``input``.

    Examples
    --------
    >>> import torcia
    >>> torcia.poisson(torcia.zeros(3))
    tensor([0., 0., 0.])
    """
    draws = rng_of(generator).poisson(input.detach().cpu().numpy())
    return C.tensor(draws.astype(input.detach().cpu().numpy().dtype), device=input.device)


def binomial(count, prob, generator=None):
    """Samples of binomial distributions with ``count`` trials of probability ``prob``.

    Examples
    --------
    >>> import torcia
    >>> g = torcia.Generator().manual_seed(0)
    >>> torcia.binomial(torcia.tensor([10.0, 10.0]), torcia.tensor([0.0, 1.0]), generator=g)
    tensor([ 0., 10.])
    """
    n = count.detach().cpu().numpy()
    draws = rng_of(generator).binomial(n.astype(np.int64), prob.detach().cpu().numpy())
    return C.tensor(draws.astype(n.dtype), device=count.device)


def _random_fill(sample, doc):
    def fill(self, *args, generator=None, **kwargs):
        values = sample(rng_of(generator), tuple(self.shape), *args, **kwargs)
        with_grad = self._requires_grad
        if with_grad and self.is_leaf:
            raise RuntimeError("a leaf Variable that requires grad is being used in an "
                               "in-place operation.")
        self.copy_(C.tensor(values.astype(self.detach().cpu().numpy().dtype),
                            device=self.device))
        return self

    fill.__doc__ = doc
    return fill


cauchy_ = _random_fill(lambda rng, shape, median=0.0, sigma=1.0:
                       median + sigma * rng.standard_cauchy(shape), """\
Fill in place with samples of the Cauchy distribution of ``median`` and scale ``sigma``.

Examples
--------
>>> import torcia
>>> x = torcia.empty(3).cauchy_(median=0.0, sigma=1.0)
>>> x.shape, bool(torcia.isfinite(x).all())
(torcia.Size([3]), True)
""")


geometric_ = _random_fill(lambda rng, shape, p: rng.geometric(p, shape), """\
Fill in place with the number of Bernoulli(``p``) trials up to the first success (1, 2, ...).

Examples
--------
>>> import torcia
>>> x = torcia.empty(1000).geometric_(0.5)
>>> bool((x >= 1).all()), bool((x == x.round()).all())
(True, True)
""")


log_normal_ = _random_fill(lambda rng, shape, mean=1.0, std=2.0:
                           rng.lognormal(mean, std, shape), """\
Fill in place with samples whose logarithm is normal with ``mean`` and ``std``.

Examples
--------
>>> import torcia
>>> x = torcia.empty(100).log_normal_(mean=0.0, std=0.5)
>>> bool((x > 0).all())
True
""")


#: the names ``torcia`` exports from here
__all__ = [
    "binomial", "poisson",
]
