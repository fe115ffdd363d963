"""PyTorch's alternative names (``arccos``, ``greater``, ``absolute``...) and its
top-level in-place functions (``torch.abs_``, ``torch.addmv_``...), each generated from a
table.
"""

from __future__ import annotations

from torcia import ops as _oplist
from torcia._oplib import elementwise
from torcia._oplib._common import _example, _inplace_example
from torcia._ops import movement, views

#: the declared ops' other names (torcia.ops.ALIASES) and a view's
ALIASES = {**_oplist.ALIASES, "row_stack": "vstack"}


# the examples of the aliases of ops that are not declared with one
_ALIAS_EXAMPLES = {
    "row_stack": """

Examples
--------
>>> import torcia
>>> torcia.row_stack([torcia.tensor([1, 2]), torcia.tensor([3, 4])])
tensor([[1, 2],
        [3, 4]])
""",
}


def _alias(new, old):
    fn = getattr(elementwise, old, None) or getattr(views, old, None) or getattr(movement, old)

    def alias(*args, **kwargs):
        return fn(*args, **kwargs)

    alias.__name__ = new
    alias.__doc__ = f"Alias of :func:`torcia.{old}` (PyTorch's ``torch.{new}``)." + (
        _example(old).replace(f"torcia.{old}(", f"torcia.{new}(")
        or _ALIAS_EXAMPLES.get(new, ""))
    return alias


for _new, _old in ALIASES.items():
    globals()[_new] = _alias(_new, _old)


_TOP_INPLACE = (
    "abs_", "acos_", "acosh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_",
    "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "erf_", "erfc_", "exp2_", "exp_",
    "expm1_", "floor_", "frac_", "log10_", "log1p_", "log2_", "log_", "neg_", "reciprocal_",
    "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinh_", "sqrt_", "square_", "tan_",
    "tanh_", "trunc_", "zero_", "detach_", "fill_", "index_put_", "resize_as_",
    "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "negative_",
    "fix_", "deg2rad_", "rad2deg_", "gcd_", "lcm_", "ldexp_", "addmv_", "i0_", "logit_",
    "sinc_", "xlogy_",
)


def _top_inplace(name):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)

    fn.__name__ = name
    fn.__doc__ = (f"``input.{name}(...)``, as PyTorch's ``torch.{name}``."
                  + _inplace_example(name[:-1], function=True))
    return fn


for _name in _TOP_INPLACE:
    globals()[_name] = _top_inplace(_name)


#: Tensor methods set only where ``torcia.linalg``'s, ``torcia.special``'s or the class's
#: own have not set them
FALLBACK_METHODS = tuple(ALIASES)

#: ... and the in-place ``name_`` methods set the same way
FALLBACK_INPLACE = tuple(n for n in ALIASES if n != "row_stack")

#: the names ``torcia`` exports from here
__all__ = [*ALIASES, *_TOP_INPLACE]
