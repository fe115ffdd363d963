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

Their public functions (``rand``, ``randn``, ``randint``, ``randperm``, ``normal``,
``bernoulli``, ``multinomial`` and the ``*_like`` forms) are written after the declarations
(``dropout_mask``'s is in :mod:`torcia._oplib.nn`); they run the ops through :func:`draw`,
which passes them through :mod:`torcia._tensor`'s dispatch modes, reached late-bound
(:data:`torcia._opdef.TENSOR`). The samplers with no op of their own are written at the end
of this module: ``poisson`` and ``binomial`` and the in-place fills ``cauchy_``,
``geometric_`` and ``log_normal_`` (Tensor methods), which draw on the host from the
generator's NumPy generator (``torcia.random.rng_of``) and reach the public functions
late-bound (:data:`torcia._opdef.PUBLIC`). ``torcia`` exports ``__all__``.
"""

from __future__ import annotations

import math

import numpy as np

from torcia import _dtype as D
from torcia import _opdef
from torcia._opdef import define
from torcia._ops._common import FLOAT32, INT64, keyword_samples, on_host
from torcia._ops.creation import _dtype_arg, _size, created, full_like

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
    return _draw_on(op, device, {"shape": tuple(shape), "dtype": _FLOAT64, "rng": rng})


def uniform(shape, low, high, dtype, rng, device=None):
    return (_draws("rand", shape, rng, device) * (high - low) + low).to(
        D.FROM_NUMPY[np.dtype(dtype)])


def scaled_randn(shape, mean, std, dtype, rng, device=None):
    return (_draws("randn", shape, rng, device) * std + mean).to(D.FROM_NUMPY[np.dtype(dtype)])


def rand_below(p, rng, device=None):
    return (_draws("rand", p.shape, rng, p.device) < p).to(p.dtype)


def dropout_mask(shape, p, dtype, rng, device=None):
    keep = _draws("rand", shape, rng, device) >= p
    return (keep.to(D.float64) / (1.0 - p)).to(D.FROM_NUMPY[np.dtype(dtype)])


# ----- the declarations ------------------------------------------------------------------



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
            samples=keyword_samples({"shape": (3, 4), "dtype": FLOAT32, "rng": None})),
    _random("randn(int[] shape, ScalarType dtype, Generator rng) -> Tensor", Kernels.randn,
            created("shape", "dtype", "rng"),
            samples=keyword_samples({"shape": (3, 4), "dtype": FLOAT32, "rng": None})),
    _random("randint(int[] shape, int low, int high, ScalarType dtype, Generator rng) -> Tensor",
            Kernels.randint, created("shape", "low", "high", "dtype", "rng"),
            samples=keyword_samples({"shape": (3, 4), "low": -3, "high": 5, "dtype": INT64,
                                     "rng": None})),
    _random("randperm(int n, ScalarType dtype, Generator rng) -> Tensor", Kernels.randperm,
            _randperm_shape, samples=keyword_samples({"n": 7, "dtype": INT64, "rng": None})),
    _random("normal(int[] shape, float mean, float std, ScalarType dtype, Generator rng) -> "
            "Tensor", Kernels.normal, _normal_shape,
            decomposition=scaled_randn,
            samples=keyword_samples({"shape": (3, 4), "mean": 1.0, "std": 2.0, "dtype": FLOAT32,
                                     "rng": None})),
    _random("bernoulli(Tensor p, Generator rng) -> Tensor", Kernels.bernoulli,
            _bernoulli_shape, decomposition=rand_below,
            samples=lambda rng: [((_probabilities(rng),), {"rng": None})]),
    _random("multinomial(Tensor w, int num_samples, bool replacement, Generator rng) -> Tensor",
            Kernels.multinomial, _multinomial_shape,
            samples=lambda rng: [((_probabilities(rng) + 0.1,),
                                  {"num_samples": 3, "replacement": False, "rng": None})]),
    _random("uniform(int[] shape, float low, float high, ScalarType dtype, Generator rng) -> "
            "Tensor", Kernels.uniform, created("shape", "low", "high", "dtype", "rng"),
            decomposition=uniform,
            samples=keyword_samples({"shape": (3, 4), "low": -2.0, "high": 3.0, "dtype": FLOAT32,
                                     "rng": None})),
    _random("dropout_mask(int[] shape, float p, ScalarType dtype, Generator rng) -> Tensor",
            Kernels.dropout_mask, _dropout_mask_shape, group="nn", decomposition=dropout_mask,
            samples=keyword_samples({"shape": (3, 4), "p": 0.5, "dtype": FLOAT32, "rng": None})),
)


def _rng_of(generator):
    """:func:`torcia.random.rng_of`, the NumPy generator behind ``generator`` (that module
    is above this one)."""
    return _opdef.PUBLIC.random.rng_of(generator)


# ----- public functions (torcia.rand, torcia.normal...): drawn through the dispatch modes


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform samples on [0, 1) (for a complex dtype, real and imaginary parts each).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.rand(2, 3); bool(((x >= 0) & (x < 1)).all())
    True
    """
    return _sample("rand", size, generator, dtype, device, requires_grad, 1.0)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal samples (mean 0, variance 1); for a complex dtype, real and imaginary
    parts each of variance 1/2 (so that ``E[|z|**2] = 1``, as PyTorch).

    Examples
    --------
    >>> import torcia
    >>> _ = torcia.manual_seed(0)
    >>> x = torcia.randn(10_000)
    >>> abs(x.mean().item()) < 0.05, abs(x.std().item() - 1) < 0.05
    (True, True)
    """
    return _sample("randn", size, generator, dtype, device, requires_grad, 0.5 ** 0.5)


def _sample(op, size, generator, dtype, device, requires_grad, complex_scale):
    d = _dtype_arg(dtype) if dtype is not None else None
    if d is not None and d.is_complex:
        parts = [_draw_new(op, d.to_real(), device, shape=_size(size), rng=_rng_of(generator))
                 * complex_scale for _ in range(2)]
        out = _opdef.CALL("complex", tuple(parts), {})  # torcia.complex of two float parts
        return out.requires_grad_() if requires_grad else out
    return _draw_new(op, _float_dtype(dtype, op), device, requires_grad, shape=_size(size),
                     rng=_rng_of(generator))


def draw(op, dev, inputs, params):
    """Run random op ``op`` (a record with a kernel that takes ``rng``) on the tensors
    ``inputs`` with the keyword ``params`` through the dispatch modes, so that vmap
    batches its draws and a tracer records it as a node that draws again on each replay.
    Not differentiable: autograd does not record it. Without a mode it is the kernel call
    it always was, on the same generator, so a seed gives the same numbers."""
    tensors = _opdef.TENSOR
    kernels = dev.kernels if dev.kernels is not None else dev.backend.kernels
    try:
        kernel = kernels[op]
    except (KeyError, NotImplementedError):  # a KernelTable raises the latter
        decomposition = tensors.DECOMPOSITIONS.get(op)
        if decomposition is None:
            raise
        # a composite the device lacks (uniform...): the draws it is made of, each through
        # here; an op without a tensor input is told the device
        return decomposition(*inputs, **params) if inputs else decomposition(device=dev,
                                                                             **params)
    make = tensors.Tensor._make
    if not tensors._modes_on or not tensors.MODES.modes:
        if inputs:
            return make(kernel(*[x._data for x in inputs], **params), dev)
        return make(kernel(**params), dev)
    modes = tensors.MODES.modes
    for mode in modes:
        inputs = mode.on_inputs(op, inputs)
    kernel = tensors._in_modes(modes, op, kernel, dev)
    result = make(kernel(*[x._data for x in inputs], **params), dev)
    for mode in modes:
        mode.on_result(op, inputs, params, result)
    return result


def _draw_on(op, device, params):
    """:func:`draw` of an op without tensor inputs on ``device`` (a device or its name,
    its index implied)."""
    return draw(op, _opdef.TENSOR.canonical_device(device), (), params)


def drawing(dev, op):
    """The kernel of random op ``op`` without a tensor input on device ``dev``, called
    outside the dispatch modes (``Tensor.uniform_``...); on a device without one, a
    function of the same arguments that draws through the op's decomposition there and
    returns the array."""
    kernels = dev.kernels if dev.kernels is not None else dev.backend.kernels
    kernel = kernels.get(op)
    decompositions = _opdef.TENSOR.DECOMPOSITIONS
    if kernel is not None or op not in decompositions:
        return kernels[op]  # the device's own, or its error for a missing primitive

    def run(*args, **params):
        return decompositions[op](*args, device=dev, **params)._data

    return run


def _draw_new(op, dtype, device, requires_grad=False, **params):
    """A random creation op (no tensor inputs) through :func:`draw`."""
    params["dtype"] = dtype.to_numpy()
    out = _draw_on(op, device, params)
    return out.requires_grad_() if requires_grad else out


def _float_dtype(dtype, name):
    d = _dtype_arg(dtype) if dtype is not None else D.get_default_dtype()
    if not d.is_floating_point:
        raise RuntimeError(f"{name}(): expected a floating point dtype, got {d}")
    return d


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad=False):
    """Integers drawn uniformly from [low, high); int64 unless ``dtype`` says otherwise.

    Examples
    --------
    >>> import torcia
    >>> torcia.randint(3, 5, (4,)).dtype
    torcia.int64
    """
    if size is None:
        if high is None or not isinstance(high, (tuple, list)):
            raise TypeError("randint() missing required argument 'size'")
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    return _draw_new("randint", _dtype_arg(dtype) if dtype else D.int64, device, requires_grad,
                     shape=_size((size,)), low=int(low), high=int(high), rng=_rng_of(generator))


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of ``0 .. n-1``.

    Examples
    --------
    >>> import torcia
    >>> torcia.randperm(5).sort().values
    tensor([0, 1, 2, 3, 4])
    """
    return _draw_new("randperm", _dtype_arg(dtype) if dtype else D.int64, device,
                     requires_grad, n=int(n), rng=_rng_of(generator))


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Normal samples; ``mean`` and ``std`` may be tensors (broadcast) or numbers.

    Examples
    --------
    >>> import torcia
    >>> torcia.normal(torcia.tensor([0.0, 100.0]), 0.01).round().abs()
    tensor([  0., 100.])
    >>> torcia.normal(2.0, 3.0, size=(2, 2)).shape
    torcia.Size([2, 2])
    """
    tensor = _opdef.TENSOR.Tensor
    if isinstance(std, tensor):
        sa = std.detach()._data
        if sa.size and sa.min() < 0:
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    if isinstance(mean, tensor) or isinstance(std, tensor):
        ref = mean if isinstance(mean, tensor) else std
        shape = np.broadcast_shapes(*(tuple(x.shape) if isinstance(x, tensor) else ()
                                      for x in (mean, std)))
        z = randn(shape, generator=generator, dtype=ref.dtype, device=ref.device)
        return z * std + mean
    if size is None:
        raise TypeError("normal() with scalar mean and std needs a size")
    return _draw_new("normal", _float_dtype(dtype, "normal"), device, requires_grad,
                     shape=_size((size,)), mean=float(mean), std=float(std),
                     rng=_rng_of(generator))


def bernoulli(input, p=None, *, generator=None):
    """Draw 0 or 1 with probability ``input`` (or ``p``), elementwise, in input's dtype.

    Examples
    --------
    >>> import torcia
    >>> torcia.bernoulli(torcia.tensor([0.0, 1.0, 1.0]))
    tensor([0., 1., 1.])
    """
    probs = input if p is None else full_like(input, p)
    pa = probs.detach()._data
    if pa.size and (pa.min() < 0 or pa.max() > 1):
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    return draw("bernoulli", input.device, (probs.detach(),), {"rng": _rng_of(generator)})


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """Sample category indices from rows of (unnormalised) non-negative weights.

    Examples
    --------
    >>> import torcia
    >>> torcia.multinomial(torcia.tensor([0.0, 0.0, 1.0]), 2, replacement=True)
    tensor([2, 2])
    """
    if input.ndim not in (1, 2):
        raise RuntimeError(f"prob_dist must be 1 or 2 dim, got {input.ndim}")
    if not replacement and num_samples > input.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    return draw("multinomial", input.device, (input.detach(),),
                {"num_samples": int(num_samples), "replacement": bool(replacement),
                 "rng": _rng_of(generator)})


def rand_like(input, dtype=None, device=None, requires_grad=False, generator=None):
    """:func:`rand` samples in ``input``'s shape, dtype and device (unless given).

    Examples
    --------
    >>> import torcia
    >>> x = torcia.rand_like(torcia.zeros(4, dtype=torcia.float64))
    >>> x.dtype, bool(((x >= 0) & (x < 1)).all())
    (torcia.float64, True)
    """
    return rand(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                requires_grad=requires_grad, generator=generator)


def randn_like(input, dtype=None, device=None, requires_grad=False, generator=None):
    """:func:`randn` samples in ``input``'s shape, dtype and device (unless given).

    Examples
    --------
    >>> import torcia
    >>> torcia.randn_like(torcia.zeros(2, 3)).shape
    torcia.Size([2, 3])
    """
    return randn(input.shape, dtype=dtype or input.dtype, device=device or input.device,
                 requires_grad=requires_grad, generator=generator)


def randint_like(input, low=0, high=None, dtype=None, device=None, generator=None):
    """:func:`randint` samples from [low, high) in ``input``'s shape, dtype and device
    (unless given); with one bound, it is ``high`` and ``low`` is 0.

    Examples
    --------
    >>> import torcia
    >>> x = torcia.randint_like(torcia.zeros(6), 3)
    >>> x.dtype, bool(((x >= 0) & (x < 3)).all())
    (torcia.float32, True)
    """
    if high is None:
        low, high = 0, low
    return randint(low, high, input.shape, dtype=dtype or input.dtype,
                   device=device or input.device, generator=generator)


# ----- public functions (torcia.poisson, Tensor.cauchy_...): drawn on the host ----------


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
    "bernoulli", "multinomial", "normal", "rand", "rand_like", "randint", "randint_like", "randn",
    "randn_like", "randperm",
    "binomial", "poisson",
]
