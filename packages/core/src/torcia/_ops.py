"""The names :mod:`torcia.linalg` and :mod:`torcia.special` import from their old home.

Core's ops live in :mod:`torcia._oplib` now, by family. Those two modules were being
changed elsewhere while the ops moved, so they still import from here; once they import
from :mod:`torcia._oplib`, this file goes. Nothing else may import it.
"""

from torcia._oplib._common import _dims as _dims
from torcia._oplib._common import _return_type as _return_type
from torcia._oplib._common import _to_float as _to_float
from torcia._oplib.elementwise import (
    digamma as digamma,
)
from torcia._oplib.elementwise import erf as erf
from torcia._oplib.elementwise import erfc as erfc
from torcia._oplib.elementwise import erfinv as erfinv
from torcia._oplib.elementwise import exp2 as exp2
from torcia._oplib.elementwise import expm1 as expm1
from torcia._oplib.elementwise import lgamma as lgamma
from torcia._oplib.elementwise import log1p as log1p
from torcia._oplib.elementwise import round as round  # noqa: A004 - PyTorch's name
from torcia._oplib.elementwise import sigmoid as sigmoid
from torcia._oplib.elementwise import to_dtype as to_dtype
from torcia._oplib.elementwise import xlogy as xlogy
from torcia._oplib.linalg import matmul as matmul
from torcia._oplib.reduce import logsumexp as logsumexp
from torcia._oplib.views import cat as cat
