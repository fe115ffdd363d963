"""Core's op library: the public functions of the built-in ops (``torcia.add``,
``torcia.sum``, ``torcia.conv2d``...), one module per family of ops.

It is ``_oplib`` and not ``ops`` because :mod:`torcia.ops` is PyTorch's ``torch.ops``, the
namespace of registered custom ops (``torcia.ops.myns.myop``); these functions reach
``torcia``'s namespace through each family's ``__all__``, and Tensor's methods through its
``METHODS`` and ``INPLACE`` (attached by :mod:`torcia._methods`).

The families import each other in one direction, at their tops: ``_common`` imports no
family; ``elementwise`` follows, importing only it (and :mod:`torcia._ops`, below them all,
where the views, ``cat``, ``tensor[key]``, ``conj``, ``matmul`` and the other functions
written beside their declarations are), and the other families import these. None
imports :mod:`torcia.linalg` or :mod:`torcia.fft`, which import from here (what they call of
those, the transforms' op calls, the norms, ``inv``, ``det``..., are written next to their
ops' declarations in :mod:`torcia._ops`), nor a service such as :mod:`torcia.amp` (the
autocast policy is ``torcia._autocast``'s).

===================  =====================================================================
``elementwise``      unary, binary and comparison ops, ``add``/``div``/``isclose``/``gcd``...
``pointwise``        ``clamp``, ``where``, ``lerp``, ``addcmul``, ``nan_to_num``, ``round``: in
                     :mod:`torcia._ops.pointwise`, beside their declarations
``views``            views: ``view``, ``reshape``, ``permute``, ``expand``, ``t_``,
                     ``resize_``...: in :mod:`torcia._ops.views`, beside their declarations
``movement``         ``cat``, ``stack``, ``split``, ``flip``, ``repeat``, ``tril``: in
                     :mod:`torcia._ops.movement`, beside their declarations
``indexing``         ``tensor[key]``, ``select``, ``tensor_split``, gathers and scatters,
                     ``index_*``, masked ops: in :mod:`torcia._ops.indexing`, beside their
                     declarations
``sorting``          ``sort``, ``topk``, ``unique``, ``searchsorted``, histograms: in
                     :mod:`torcia._ops.sorting`, beside their declarations
``linalg``           ``matmul``, ``mm``, ``einsum``, ``addmm``..., ``det``, ``cov``, ``vdot``: in
                     :mod:`torcia._ops.linalg`, beside the products' declarations
``complex_numbers``  ``real``/``imag``, ``view_as_real``, ``conj``, ``angle``, ``polar``: in
                     :mod:`torcia._ops.complex_numbers`, beside their declarations
``spectral``         windows, ``stft``/``istft``: in :mod:`torcia._ops.spectral`, beside the
                     transforms' declarations
``nn``               dropout
``aliases``          PyTorch's other names (``arccos``, ``greater``) and ``torch.abs_``...
``runtime``          ``finfo``/``iinfo``, constants, global switches, layouts, streams
``properties``       tensor queries kept as functions (``is_signed``, ``dim_order``...)
===================  =====================================================================

``_common``          holds the helpers several families share.

The reductions and scans, the activations and softmax, the convolutions and pooling, the
normalisations (batch, layer, group, instance and RMS norm, the synchronised batch-norm
pieces), the embedding and the losses at ``torch.*``, the RNN/LSTM/GRU cells and
sequences, the random ops (``rand``, ``normal``...), ``poisson``, ``binomial`` and the
in-place random fills, and the factories (``zeros``, ``arange``..., index grids, strided
``empty``, ``frombuffer``, ``torch.range``) have no module here: their public functions
are all written beside their declarations, in :mod:`torcia._ops.reduce`, :mod:`torcia._ops.scan`,
:mod:`torcia._ops.nn_activation`, :mod:`torcia._ops.nn_conv`, :mod:`torcia._ops.nn_pool`,
:mod:`torcia._ops.nn_norm`, :mod:`torcia._ops.nn_loss`, :mod:`torcia._ops.nn_rnn`,
:mod:`torcia._ops.random` and :mod:`torcia._ops.creation`, which stand among the
families in their place.
"""

from torcia._oplib import (  # noqa: I001 - the load order of the families
    _common,
    elementwise,
    nn,
    aliases,
    runtime,
    properties,
)
from torcia._ops import creation, nn_activation, nn_conv, nn_loss, nn_norm, nn_pool, nn_rnn
from torcia._ops import indexing, movement, pointwise, random, reduce, scan, views
from torcia._ops import complex_numbers, linalg, sorting, spectral

from torcia._oplib.elementwise import *  # noqa: F403
from torcia._ops.pointwise import *  # noqa: F403
from torcia._ops.reduce import *  # noqa: F403
from torcia._ops.scan import *  # noqa: F403
from torcia._ops.views import *  # noqa: F403
from torcia._ops.movement import *  # noqa: F403
from torcia._ops.indexing import *  # noqa: F403
from torcia._ops.sorting import *  # noqa: F403
from torcia._ops.linalg import *  # noqa: F403
from torcia._ops.complex_numbers import *  # noqa: F403
from torcia._ops.creation import *  # noqa: F403
from torcia._ops.random import *  # noqa: F403
from torcia._ops.spectral import *  # noqa: F403
from torcia._ops.nn_activation import *  # noqa: F403
from torcia._ops.nn_conv import *  # noqa: F403
from torcia._ops.nn_pool import *  # noqa: F403
from torcia._ops.nn_norm import *  # noqa: F403
from torcia._ops.nn_loss import *  # noqa: F403
from torcia._oplib.nn import *  # noqa: F403
from torcia._ops.nn_rnn import *  # noqa: F403
from torcia._oplib.aliases import *  # noqa: F403
from torcia._oplib.runtime import *  # noqa: F403
from torcia._oplib.properties import *  # noqa: F403

#: the op families, in load order
FAMILIES = (elementwise, pointwise, reduce, scan, views, movement, indexing, sorting, linalg,
            complex_numbers, creation, random,
            spectral, nn_activation, nn_conv, nn_pool, nn_norm, nn_loss, nn, nn_rnn, aliases,
            runtime, properties)


#: the names ``torcia`` exports from the op library
__all__ = [name for family in FAMILIES for name in family.__all__]

#: PyTorch's top-level names whose signatures differ from ``torch.nn.functional``'s
#: (``torch.batch_norm``, ``torch.embedding``...): name -> function, from the families
TOP_LEVEL = {name: fn for family in FAMILIES
             for name, fn in getattr(family, "TOP_LEVEL", {}).items()}
