"""Every core op, named once.

Backends key their kernel tables on these names, the derivative table in torcia-autograd
keys on them too, and tests iterate over them (an op without a reference kernel, or a
differentiable op without a derivative and a gradcheck, fails the suite).

The ops of a family declared in :mod:`torcia._ops` (the elementwise ops, the reductions
and scans, sorting, linear algebra, the neural-network ops, the views and movement, the
special functions, the Fourier transforms, the sparse product, the creation and random ops)
are read from their declarations, in order; the others are listed here.

A kernel receives the arrays of its tensor arguments positionally (``None`` for an absent
optional tensor, Python scalars as they are) and the op's parameters as keywords.
"""

from torcia import _ops

# --- elementwise, one input, declared in torcia._ops.unary: integer inputs promote
# to the default float dtype; dtype preserved; bool output ---------------------------------
UNARY_FLOAT = _ops.names("unary_float")
UNARY_SAME = _ops.names("unary_same")
UNARY_BOOL = _ops.names("unary_bool")

# --- elementwise, two inputs with broadcasting and type promotion, declared in
# torcia._ops.binary: results in the promoted dtype; promoted to floating point; bool
BINARY = _ops.names("binary")
BINARY_FLOAT = _ops.names("binary_float")
COMPARE = _ops.names("compare")

#: PyTorch's other names of the declared ops (``arcsin`` for ``asin``) -> the op
ALIASES = {alias: name for name, op in _ops.DECLARED.items() for alias in op.aliases}
#: Python's operators (their special methods' names without the underscores: ``"truediv"``)
#: -> the declared op each runs
OPERATORS = {op.operator: name for name, op in _ops.DECLARED.items() if op.operator}
#: the declared ops a subsystem carries (``tagged("masked")``), see :func:`torcia._ops.tagged`
tagged = _ops.tagged

# --- special functions (torcia.special); most run on SciPy, the torcia-core[scipy] extra ---
# declared in torcia._ops.special: one input; two, broadcast (zeta, the orthogonal
# polynomials of (x, n)); polygamma (n=: the order, an int >= 1)
SPECIAL_UNARY = _ops.names("special_unary")
SPECIAL_BINARY = _ops.names("special_binary")
SPECIAL_OTHER = _ops.names("special_other")
#: Special functions PyTorch gives no derivative: their results never require grad.
SPECIAL_NOT_DIFFERENTIABLE = tuple(
    name for name in SPECIAL_UNARY + SPECIAL_BINARY if not _ops.DECLARED[name].differentiable)

# --- complex numbers, declared in torcia._ops.complex_numbers: real/imag/view_as_real/
# view_as_complex are views; conj a copy
COMPLEX = _ops.names("complex")

# --- discrete Fourier transforms, declared in torcia._ops.spectral: over dims= with norm=
# ("backward", "ortho", "forward"): complex-to-complex (forward= the direction),
# real-to-complex (onesided=), complex-to-real (last_dim_size= the real length)
FFT = _ops.names("fft")

# --- elementwise with parameters or three inputs, declared in torcia._ops.pointwise -------
ELEMENTWISE_OTHER = _ops.names("elementwise_other")

# --- reductions, declared in torcia._ops.reduce: dim is a tuple of non-negative ints or
# None (all), keepdim a bool; along one dim returning (values, indices), or indices alone;
# scans along one dim ----------------------------------------------------------------------
REDUCE = _ops.names("reduce")
REDUCE_INDEX = _ops.names("reduce_index")
SCAN = _ops.names("scan")

# --- shape and movement, declared in torcia._ops.views and .movement; VIEW return views --
VIEW = _ops.names("view")  # declared in torcia._ops.views, MOVEMENT in .movement
MOVEMENT = _ops.names("movement")

# --- sorting, selection and counting, declared in torcia._ops.sorting ----------------------
SORTING = _ops.names("sorting")

# --- linear algebra, declared in torcia._ops.linalg (the products), linalg_solves (the
# solves, inverses and determinants), linalg_factorizations and linalg_functions (the norms
# and the matrix exponential)
LINALG = _ops.names("linalg")

# --- neural-network primitives (the layers of torcia-nn call these) ------------------------
# every one declared: the activations in torcia._ops.nn_activation, linear and the
# convolutions in nn_conv, pooling in nn_pool, softmax and the normalisations in nn_norm, the
# embedding and the losses in nn_loss, dropout_mask in random, the LSTM ops in nn_rnn and
# flash_attention in nn_attention; their *_backward ops are fused first derivatives (higher
# orders go through differentiable ops, so they have no derivative row)
NN = _ops.names("nn")

# --- sparse matrices, declared in torcia._ops.sparse: sparse_mm, the compressed-row matrix
# times a dense one (torcia.sparse's products use it)
SPARSE = _ops.names("sparse")

# --- creation and randomness (no tensor inputs but bernoulli's and multinomial's
# probabilities, not differentiable), declared in torcia._ops.creation and torcia._ops.random
CREATION = _ops.names("creation")

ALL = (
    UNARY_FLOAT + UNARY_SAME + UNARY_BOOL + BINARY + BINARY_FLOAT + COMPARE
    + SPECIAL_UNARY + SPECIAL_BINARY + SPECIAL_OTHER + COMPLEX + FFT + ELEMENTWISE_OTHER
    + REDUCE
    + REDUCE_INDEX + SCAN + VIEW + MOVEMENT + SORTING + LINALG
    + NN + SPARSE + CREATION
)

#: Ops whose kernels are given floating-point (or complex) inputs only: their public
#: functions promote integer and bool inputs to the default float dtype or refuse them,
#: as PyTorch does, before dispatch. What NumPy's reference kernel makes of an integer
#: array there is no contract: a decomposition or a device kernel need not agree with it.
FLOATING_INPUTS = frozenset(name for name, op in _ops.DECLARED.items() if op.floating_inputs)

#: Ops whose outputs never carry a gradient (integer or bool results, creation).
NOT_DIFFERENTIABLE = frozenset(
    name for name, op in _ops.DECLARED.items() if not op.differentiable)

#: Ops that draw from a random generator (their kernels' ``rng``), declared ``random=True``
#: in :mod:`torcia._ops.random`: running one again gives other values.
RANDOM = frozenset(name for name, op in _ops.DECLARED.items() if op.random)
