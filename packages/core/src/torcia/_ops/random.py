"""The random ops, each declared once: schema, reference kernel, meta shape, decomposition,
and ``random=True``: the kernel draws from the NumPy generator it is given (``rng``), so
the op is not pure and running it again draws other numbers. What must know reads the
record's :attr:`~torcia.library.OpDef.random` (or :data:`torcia.ops.RANDOM`), not a list
of names: the check of a plugin's overriding kernels, which runs the kernel below it once
more, leaves them out, and the conformance kit checks their values by what they may be.

The primitives draw: ``rand`` (NumPy's ``Generator.random``), ``randn``
(``standard_normal``), ``randint``, ``randperm``, ``multinomial``. The others are
composites whose decompositions draw the same numbers from the same generator, step for
step: NumPy computes ``uniform`` as ``low + (high - low) * random()`` in float64 and
``normal`` as ``mean + std * standard_normal()``, ``bernoulli`` and ``dropout_mask``
compare ``random()``'s float64 draws, and each rounds to the dtype once; their
decompositions compute the same float64 operations on ``rand``'s and ``randn``'s float64
draws, so a device with the primitives only gives the reference's values bit for bit.

Their public functions are in :mod:`torcia._creation` (``dropout_mask``'s in
:mod:`torcia._oplib.nn`), which run them through :func:`torcia._creation.draw`. The
samplers with no op of their own are written at the end of this module: ``poisson`` and
``binomial`` (which ``torcia`` exports, ``__all__``) and the in-place fills ``cauchy_``,
``geometric_`` and ``log_normal_`` (Tensor methods), which draw on the host from the
generator's NumPy generator (``torcia.random.rng_of``) and reach the public functions
late-bound (:data:`torcia._opdef.PUBLIC`).
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import keyword_samples, on_host
from torcia._ops.creation import created

# samples drawn per block for a float32/float16 tensor (8 MiB of float64 at a time)
_DRAW_BLOCK = 1 << 20

# ----- reference kernels -----------------------------------------------------------------


def _drawn(xp, shape, dtype, draw):
    """``draw(n)``'s float64 samples as an array of ``shape`` in ``dtype``, drawn in
    blocks: a float32 tensor never has a float64 copy of its whole size beside it (a
    GPT-2-sized model's initialisation peaked at twice its size in such copies). The
    values are those of one call, as NumPy's Generator draws element by element."""
    n = math.prod(shape)
    if n <= _DRAW_BLOCK or dtype == np.float64:
        return xp.asarray(draw(shape).astype(dtype, copy=False))
    out = np.empty(n, dtype)
    for start in range(0, n, _DRAW_BLOCK):
        out[start:start + _DRAW_BLOCK] = draw(min(_DRAW_BLOCK, n - start))
    return xp.asarray(out.reshape(shape))


class Kernels:
    """The reference kernels: the generator ``rng`` draws on the host, the result is
    copied to the array module's memory (``self.xp``, NumPy or CuPy)."""

    def rand(self, shape, dtype, rng):
        return _drawn(self.xp, shape, dtype, lambda n: rng.random(n, dtype=np.float64))

    def uniform(self, shape, low, high, dtype, rng):
        return _drawn(self.xp, shape, dtype, lambda n: rng.uniform(low, high, n))

    def randn(self, shape, dtype, rng):
        return _drawn(self.xp, shape, dtype, rng.standard_normal)

    def normal(self, shape, mean, std, dtype, rng):
        return _drawn(self.xp, shape, dtype, lambda n: rng.normal(mean, std, n))

    def randint(self, shape, low, high, dtype, rng):
        return self.xp.asarray(rng.integers(low, high, shape, dtype=np.int64).astype(dtype))

    def randperm(self, n, dtype, rng):
        return self.xp.asarray(rng.permutation(n).astype(dtype))

    def bernoulli(self, p, rng):
        host = on_host(self.xp, p)
        draw = rng.random(host.shape) < host
        return self.xp.asarray(draw.astype(host.dtype))

    def dropout_mask(self, shape, p, dtype, rng):
        """Inverted-dropout multiplier: 0 with probability p, 1/(1-p) elsewhere."""
        keep = rng.random(shape) >= p
        return self.xp.asarray((keep / (1.0 - p)).astype(dtype))

    def multinomial(self, w, num_samples, replacement, rng):
        host = on_host(self.xp, w).astype(np.float64, copy=False)
        # the values are checked here, where they are, as PyTorch's kernel checks them:
        # under vmap the public function sees one sample's shape, not the batch's values
        if (host < 0).any() or not np.isfinite(host).all():
            raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
        if (host.sum(axis=-1) == 0).any():
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        rows = host.reshape(-1, host.shape[-1])
        out = np.empty((rows.shape[0], num_samples), dtype=np.int64)
        for i, row in enumerate(rows):
            out[i] = rng.choice(row.shape[0], size=num_samples, replace=replacement,
                                p=row / row.sum())
        return self.xp.asarray(out.reshape(host.shape[:-1] + (num_samples,)))


# ----- meta shapes -----------------------------------------------------------------------


def _normal_shape(shape, mean, std, dtype, rng=None, **params):
    return tuple(shape), np.dtype(dtype)


def _randperm_shape(n, dtype, rng=None, **params):
    return (n,), np.dtype(dtype)


def _bernoulli_shape(p, rng=None, **params):
    return p.shape, p.dtype


def _dropout_mask_shape(shape, p, dtype, rng=None, **params):
    return tuple(shape), np.dtype(dtype)


def _multinomial_shape(w, num_samples, replacement=False, rng=None, **params):
    return w.shape[:-1] + (num_samples,), np.dtype(np.int64)


# ----- decompositions: the same draws of the same generator (see the module's doc) -------

_FLOAT64 = np.dtype(np.float64)


def _draws(op, shape, rng, device):
    """``op``'s (``rand``'s or ``randn``'s) float64 draws of ``shape`` on ``device``."""
    return _opdef.DRAW(op, device, {"shape": tuple(shape), "dtype": _FLOAT64, "rng": rng})


def uniform(shape, low, high, dtype, rng, device=None):
    return (_draws("rand", shape, rng, device) * (high - low) + low).to(
        D.FROM_NUMPY[np.dtype(dtype)])


def normal(shape, mean, std, dtype, rng, device=None):
    return (_draws("randn", shape, rng, device) * std + mean).to(D.FROM_NUMPY[np.dtype(dtype)])


def bernoulli(p, rng, device=None):
    return (_draws("rand", p.shape, rng, p.device) < p).to(p.dtype)


def dropout_mask(shape, p, dtype, rng, device=None):
    keep = _draws("rand", shape, rng, device) >= p
    return (keep.to(D.float64) / (1.0 - p)).to(D.FROM_NUMPY[np.dtype(dtype)])


# ----- the declarations ------------------------------------------------------------------


_F32, _I64 = np.dtype(np.float32), np.dtype(np.int64)


def _probabilities(rng):
    return rng.uniform(0, 1, (3, 4)).astype(np.float32)


def _random(schema, kernel, shape, group="creation", **fields):
    """A random op: it draws from its ``rng``, and carries no gradient."""
    return define(schema, kernel, shape=shape, differentiable=False, random=True, group=group,
                  **fields)


#: in the order of :data:`torcia.ops.CREATION` after :mod:`torcia._ops.creation`'s ops;
#: ``dropout_mask`` is one of :data:`torcia.ops.NN`
DECLARED = (
    _random("rand(int[] shape, ScalarType dtype, Generator rng) -> Tensor", Kernels.rand,
            created("shape", "dtype", "rng"),
            samples=keyword_samples({"shape": (3, 4), "dtype": _F32, "rng": None})),
    _random("randn(int[] shape, ScalarType dtype, Generator rng) -> Tensor", Kernels.randn,
            created("shape", "dtype", "rng"),
            samples=keyword_samples({"shape": (3, 4), "dtype": _F32, "rng": None})),
    _random("randint(int[] shape, int low, int high, ScalarType dtype, Generator rng) -> Tensor",
            Kernels.randint, created("shape", "low", "high", "dtype", "rng"),
            samples=keyword_samples({"shape": (3, 4), "low": -3, "high": 5, "dtype": _I64,
                                     "rng": None})),
    _random("randperm(int n, ScalarType dtype, Generator rng) -> Tensor", Kernels.randperm,
            _randperm_shape, samples=keyword_samples({"n": 7, "dtype": _I64, "rng": None})),
    _random("normal(int[] shape, float mean, float std, ScalarType dtype, Generator rng) -> "
            "Tensor", Kernels.normal, _normal_shape,
            decomposition=normal,
            samples=keyword_samples({"shape": (3, 4), "mean": 1.0, "std": 2.0, "dtype": _F32,
                                     "rng": None})),
    _random("bernoulli(Tensor p, Generator rng) -> Tensor", Kernels.bernoulli,
            _bernoulli_shape, decomposition=bernoulli,
            samples=lambda rng: [((_probabilities(rng),), {"rng": None})]),
    _random("multinomial(Tensor w, int num_samples, bool replacement, Generator rng) -> Tensor",
            Kernels.multinomial, _multinomial_shape,
            samples=lambda rng: [((_probabilities(rng) + 0.1,),
                                  {"num_samples": 3, "replacement": False, "rng": None})]),
    _random("uniform(int[] shape, float low, float high, ScalarType dtype, Generator rng) -> "
            "Tensor", Kernels.uniform, created("shape", "low", "high", "dtype", "rng"),
            decomposition=uniform,
            samples=keyword_samples({"shape": (3, 4), "low": -2.0, "high": 3.0, "dtype": _F32,
                                     "rng": None})),
    _random("dropout_mask(int[] shape, float p, ScalarType dtype, Generator rng) -> Tensor",
            Kernels.dropout_mask, _dropout_mask_shape, group="nn", decomposition=dropout_mask,
            samples=keyword_samples({"shape": (3, 4), "p": 0.5, "dtype": _F32, "rng": None})),
)


# ----- public functions (torcia.poisson, Tensor.cauchy_...): drawn on the host ----------


def _rng_of(generator):
    """:func:`torcia.random.rng_of`, the NumPy generator behind ``generator`` (that module
    is above this one)."""
    return _opdef.PUBLIC.random.rng_of(generator)


def poisson(input, generator=None):
    """Samples of Poisson distributions with rates ``input``.

    Examples
    --------
    >>> import torcia
    >>> torcia.poisson(torcia.zeros(3))
    tensor([0., 0., 0.])
    """
    draws = _rng_of(generator).poisson(input.detach().cpu().numpy())
    return _opdef.PUBLIC.tensor(draws.astype(input.detach().cpu().numpy().dtype),
                                device=input.device)


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
    draws = _rng_of(generator).binomial(n.astype(np.int64), prob.detach().cpu().numpy())
    return _opdef.PUBLIC.tensor(draws.astype(n.dtype), device=count.device)


def _random_fill(sample, doc):
    def fill(self, *args, generator=None, **kwargs):
        values = sample(_rng_of(generator), tuple(self.shape), *args, **kwargs)
        with_grad = self.requires_grad
        if with_grad and self.is_leaf:
            raise RuntimeError("a leaf Variable that requires grad is being used in an "
                               "in-place operation.")
        self.copy_(_opdef.PUBLIC.tensor(values.astype(self.detach().cpu().numpy().dtype),
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
