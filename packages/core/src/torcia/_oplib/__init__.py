"""torcia's namespace of ops, assembled: the public functions of the built-in ops
(``torcia.add``, ``torcia.sum``, ``torcia.conv2d``...), each written beside its
declaration in its family module of :mod:`torcia._ops` (``unary``, ``binary``,
``pointwise``, ``reduce``, ``scan``, ``views``, ``movement``, ``indexing``, ``sorting``,
``linalg``, ``complex_numbers``, ``creation``, ``random``, ``spectral`` and the ``nn_*``
families), gathered here with the modules of this package, which hold no op's function:

===================  =====================================================================
``aliases``          PyTorch's other names (``arccos``, ``greater``) and ``torch.abs_``...,
                     made from the declarations
``runtime``          ``finfo``/``iinfo``, constants, global switches, layouts, streams
``properties``       tensor queries kept as functions (``is_signed``, ``dim_order``...)
``_common``          the Examples sections of the in-place methods and aliases
===================  =====================================================================

``torcia``'s namespace takes each family's ``__all__``, Tensor's methods its ``METHODS``
and ``INPLACE`` (attached by :mod:`torcia._methods`). It is ``_oplib`` and not ``ops``
because :mod:`torcia.ops` is PyTorch's ``torch.ops``, the namespace of registered custom
ops (``torcia.ops.myns.myop``).
"""

from torcia._oplib import (  # noqa: I001 - the load order of the families
    _common,
    aliases,
    runtime,
    properties,
)
from torcia._ops import creation, nn_activation, nn_conv, nn_loss, nn_norm, nn_pool, nn_rnn
from torcia._ops import indexing, movement, pointwise, random, reduce, scan, views
from torcia._ops import binary, unary
from torcia._ops import complex_numbers, linalg, sorting, spectral

from torcia._ops.unary import *  # noqa: F403
from torcia._ops.binary import *  # noqa: F403
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
from torcia._ops.nn_rnn import *  # noqa: F403
from torcia._oplib.aliases import *  # noqa: F403
from torcia._oplib.runtime import *  # noqa: F403
from torcia._oplib.properties import *  # noqa: F403

#: the op families, in load order
FAMILIES = (unary, binary, pointwise, reduce, scan, views, movement, indexing, sorting, linalg,
            complex_numbers, creation, random,
            spectral, nn_activation, nn_conv, nn_pool, nn_norm, nn_loss, nn_rnn, aliases,
            runtime, properties)


#: the names ``torcia`` exports from the op library
__all__ = [name for family in FAMILIES for name in family.__all__]

#: PyTorch's top-level names whose signatures differ from ``torch.nn.functional``'s
#: (``torch.batch_norm``, ``torch.embedding``...): name -> function, from the families
TOP_LEVEL = {name: fn for family in FAMILIES
             for name, fn in getattr(family, "TOP_LEVEL", {}).items()}
