"""The built-in ops, declared once each, one module per family.

A family module calls :func:`torcia._opdef.define` for each of its ops with everything
core needs of it: the schema, the reference kernel, the meta shape, the decomposition,
the autocast policy, whether it takes floating inputs only, the dtypes it refuses and
whether it draws random numbers.
The tables the rest of torcia reads by op name are filled from these declarations where
they are built:

==============================================  ==========================================
:mod:`torcia.ops` (``UNARY_FLOAT``, ``NN``...)  the names, in the family's order
``torcia._numpy_backend.Reference``             the kernels, as methods (``self.xp``)
``torcia._numpy_backend.refusal``               the dtypes refused, with PyTorch's errors
``torcia._meta.SHAPES``                         the shape functions
``torcia._tensor.DECOMPOSITIONS``               the decompositions (composites)
``torcia.amp`` (``FLOAT32``...)                 the autocast policies
``torcia.library.op_records()``                 the inputs and parameters, from the schema
==============================================  ==========================================

An op's public function is made from its declaration (the elementwise and special
functions: :mod:`torcia._oplib` builds them; the nn activations' functional forms, made in
``nn_activation``) or written next to it where the schema cannot say it (the
linear-algebra families, which :mod:`torcia.linalg` publishes, with what they share in
``_linalg``; the complex-number ops and sorting in their module's ``PUBLIC``; indexing
(``gather``, ``masked_fill``, and ``take``, ``select``, ``tensor[key]``... built on them),
``clamp``, ``where``, ``lerp``... in ``pointwise``, the reductions and the scans, the views
(``view``, ``permute``, the in-place ``t_``...) and the movement ops (``cat``, ``split``,
``flip``...), the convolutions and pooling, the other activations at ``torcia.*`` in
``nn_activation``, softmax and the normalisations, with group and instance norm, in
``nn_norm``, the embedding and ``torch.*``'s losses in ``nn_loss``, the RNN cells and
sequences at ``torcia.*`` in ``nn_rnn``, ``poisson``, ``binomial``, the in-place random
fills and the random ops' own (``rand``, ``normal``...) in ``random`` and the factories
(``zeros``, ``arange``..., ``meshgrid``, ``empty_strided``...) in ``creation``, which
:mod:`torcia._oplib` registers as families); the other families' stay in
:mod:`torcia._oplib`.
Backward formulas are torcia-autograd's.
This package imports nothing above :mod:`torcia._dtype`: :mod:`torcia.ops` reads it.

=========================  ==================================================================
``unary``                  the elementwise ops of one input (``exp``, ``abs``, ``isnan``...)
``binary``                 the elementwise ops of two inputs (``add``, ``div``, ``eq``...)
``reduce``                 the reductions (``sum``, ``amax``, ``var``, ``max_dim``,
                           ``argmax``, ``median_dim``...), with their public functions
``scan``                   the scans (``cumsum``, ``cumprod``, ``cummax``,
                           ``logcumsumexp``...), with their public functions and ``diff``,
                           ``trapezoid``, ``gradient``
``sorting``                sorting, selection and counting (``sort``, ``topk``, ``kthvalue``,
                           ``unique``, ``nonzero``, ``searchsorted``, ``bincount``,
                           ``histc``)
``pointwise``              the elementwise ops with parameters or three inputs (``clamp``,
                           ``where``, ``lerp``, ``addcmul``, ``cast``, ``nan_to_num``...),
                           with their public functions
``nn_activation``          the elementwise activations (``gelu``, ``softplus``...) and their
                           fused backward ops
``nn_conv``                ``linear`` and the convolutions (``conv``, ``conv_transpose``,
                           ``im2col``...) and their adjoints, with their public functions
``nn_pool``                pooling (``max_pool``, ``avg_pool``, ``adaptive_max_pool``) and
                           its adjoints, with their public functions
``nn_rnn``                 the LSTM step and layer (``lstm_cell``, ``lstm_layer``) and their
                           fused backward ops
``nn_attention``           ``flash_attention`` (scaled-dot-product attention) and its fused
                           backward op
``nn_norm``                the softmax family (``softmax``, ``log_softmax``) and the
                           normalisations (``batch_norm``, ``layer_norm``, ``rms_norm``)
                           with their fused backward ops
``nn_loss``                the embedding lookup and the losses (``nll_loss``,
                           ``cross_entropy``, ``ctc_loss``) with their fused backward ops
``complex_numbers``        ``real``, ``imag``, ``view_as_real``, ``view_as_complex``,
                           ``conj``, ``angle``, ``complex``
``special``                the special functions of :mod:`torcia.special` (``i0``, ``ndtr``,
                           ``zeta``, the orthogonal polynomials, ``polygamma``...)
``spectral``               the discrete Fourier transforms (``fft_c2c``, ``fft_r2c``,
                           ``fft_c2r``)
``linalg``                 the matrix products (``matmul``, ``mm``, ``dot``, ``einsum``,
                           ``addmm``...)
``linalg_solves``          the solves, inverses and determinants of :mod:`torcia.linalg`
                           (``linalg_solve``, ``linalg_solve_triangular``,
                           ``linalg_lstsq``, ``linalg_inv``, ``linalg_det``...), with their
                           public functions
``linalg_factorizations``  the factorizations of :mod:`torcia.linalg` (``linalg_svd``,
                           ``linalg_qr``, ``linalg_cholesky``, ``linalg_eigh``,
                           ``linalg_lu_factor``, ``linalg_geqrf``...), with their public
                           functions
``linalg_functions``       the norms and the matrix exponential of :mod:`torcia.linalg`
                           (``linalg_vector_norm``, ``linalg_matrix_norm``,
                           ``linalg_matrix_exp``...), with their public functions
``views``                  the views (``view``, ``permute``, ``expand``, ``as_strided``,
                           ``getitem``, ``unfold``...), with their public functions, the
                           in-place views and ``resize_``
``movement``               the copies and joins (``contiguous``, ``clone``, ``cat``,
                           ``split``, ``flip``, ``repeat``, ``tril``, ``pad``, ``diag``...),
                           with their public functions
``indexing``               the gathers and scatters (``gather``, ``scatter``,
                           ``scatter_reduce``...), the ``index_*`` ops (``index_select``,
                           ``index_put``...) and the masked ops (``masked_select``,
                           ``masked_fill``), with their public functions and those built on
                           them (``take``, ``put``, ``select``, ``tensor_split``...)
``creation``               the tensors made from their arguments alone (``zeros``,
                           ``arange``, ``eye``...)
``random``                 the ops that draw from a random generator (``rand``, ``normal``,
                           ``bernoulli``, ``dropout_mask``...), declared ``random=True``
``sparse``                 ``sparse_mm``, a compressed-row sparse matrix times a dense one
=========================  ==================================================================
"""

from torcia._ops import (
    binary,
    complex_numbers,
    creation,
    indexing,
    linalg,
    linalg_factorizations,
    linalg_functions,
    linalg_solves,
    movement,
    nn_activation,
    nn_attention,
    nn_conv,
    nn_loss,
    nn_norm,
    nn_pool,
    nn_rnn,
    pointwise,
    random,
    reduce,
    scan,
    sorting,
    sparse,
    special,
    spectral,
    unary,
    views,
)

#: op name -> its :class:`torcia._opdef.Declaration`, in the families' order
DECLARED = {d.name: d for family in (unary, binary, pointwise, reduce, scan, sorting,
                                     nn_activation, nn_conv, nn_pool, nn_norm, nn_loss, views,
                                     movement, indexing, complex_numbers, special, spectral,
                                     linalg, linalg_solves, linalg_factorizations,
                                     linalg_functions, creation, random, nn_rnn, nn_attention,
                                     sparse)
            for d in family.DECLARED}


def names(group: str) -> tuple[str, ...]:
    """The declared ops of ``group`` (a list of :mod:`torcia.ops`), in declaration order."""
    return tuple(name for name, d in DECLARED.items() if d.group == group)


def tagged(tag: str, *groups: str) -> tuple[str, ...]:
    """The declared ops carrying ``tag`` (:data:`torcia._opdef.TAGS`), in declaration
    order; only those of ``groups`` where some are given."""
    return tuple(name for name, d in DECLARED.items()
                 if tag in d.tags and (not groups or d.group in groups))
