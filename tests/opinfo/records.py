"""The op records: one per public op of torcia (functions, Tensor methods, nn.functional,
linalg, fft, special), and the public callables that are not ops, with why.

Records sample every dtype torcia has: where PyTorch has no kernel for a dtype, the
check wants torcia to refuse it too (or the difference listed in :mod:`opinfo.known`).
The dtypes PyTorch accepts are measured (``tools/opinfo.py --probe``) and shown in
``docs/opinfo.rst``.
"""

from __future__ import annotations

import numpy as np

from .core import ALL, COMPLEX, FLOAT_COMPLEX, FLOATING, OpInfo

RECORDS: dict[str, OpInfo] = {}

#: public callables that are not ops, by why: the coverage test accepts them
NOT_OPS: dict[str, str] = {}

#: properties that need differentiable floating outputs, or a batch dim to map over
_NO_GRAD = ("torch", "vmap", "meta", "native", "no_write")
_VALUES = ("torch", "native", "no_write")
_WRITES = {"setitem", "Tensor.scatter_", "batch_norm_gather_stats",
           "batch_norm_gather_stats_with_counts", "batch_norm_update_stats"}


def op(name, samples, *, aliases=(), dtypes=ALL, props=None, grad=True, torch_name="",
       tol=1.0, note="", **args):
    """Record ``name``; ``grad=False`` drops the gradient properties (an op PyTorch does not
    differentiate, or one with integer or bool results)."""
    if props is None:
        props = ("torch", "grad", "gradgrad", "forward_ad", "vmap", "meta", "native",
                 "no_write") if grad else _NO_GRAD
    if name.endswith("_") or name in _WRITES:
        # in place: writes by design, and a leaf cannot be written in place under grad
        props = tuple(p for p in props if p in ("torch", "meta", "native"))
    if name in RECORDS:
        raise ValueError(f"{name} is recorded twice")
    RECORDS[name] = OpInfo(name, samples, tuple(dtypes), tuple(sorted(args.items())),
                           tuple(aliases), tuple(props), torch_name, tol, note)


def not_op(reason, *names):
    for name in names:
        NOT_OPS[name] = reason


# the spellings of samples.calls: a tensor of the sample's dtype, a non-contiguous one, a
# tensor of another dtype, int64 values, a dtype argument
def X(*shape):
    return ("x", shape)


def NC(*shape):
    return ("nc", shape)


def OF(dtype, *shape):
    return ("t", shape, dtype)


def IDX(*values):
    return ("i", values if len(values) != 1 or not isinstance(values[0], list) else values[0])


def DT(name="same"):
    return ("dtype", name)


def BOOLS(*shape):
    return ("t", shape, "bool")


def CONST(*shape):
    """A tensor of the sample's dtype that the gradient checks leave alone (a buffer)."""
    return ("c", shape)


# ---------------------------------------------------------------------------------------
# elementwise, one input
# ---------------------------------------------------------------------------------------

_UNARY = {
    # name: (domain, differentiable, aliases)
    "abs": ("real", True, ("absolute",)), "neg": ("real", True, ("negative",)),
    "sign": ("real", True, ()), "sgn": ("real", True, ()), "square": ("real", True, ()),
    "floor": ("real", True, ()), "ceil": ("real", True, ()), "trunc": ("real", True, ("fix",)),
    "frac": ("real", True, ()), "round": ("real", True, ()), "exp": ("real", True, ()),
    "exp2": ("real", True, ()), "expm1": ("real", True, ()), "log": ("positive", True, ()),
    "log2": ("positive", True, ()), "log10": ("positive", True, ()),
    "log1p": ("nonneg", True, ()), "sqrt": ("positive", True, ()),
    "rsqrt": ("positive", True, ()), "reciprocal": ("positive", True, ()),
    "sin": ("real", True, ()), "cos": ("real", True, ()), "tan": ("small", True, ()),
    "asin": ("unit", True, ("arcsin",)), "acos": ("unit", True, ("arccos",)),
    "atan": ("real", True, ("arctan",)), "sinh": ("real", True, ()),
    "cosh": ("real", True, ()), "tanh": ("real", True, ()),
    "asinh": ("real", True, ("arcsinh",)), "acosh": ("ge1", True, ("arccosh",)),
    "atanh": ("unit", True, ("arctanh",)), "sigmoid": ("real", True, ()),
    "erf": ("real", True, ()), "erfc": ("real", True, ()), "erfinv": ("unit", True, ()),
    "lgamma": ("positive", True, ()), "digamma": ("positive", True, ()),
    "i0": ("real", True, ()), "sinc": ("real", True, ()), "relu": ("real", True, ()),
    "deg2rad": ("real", True, ()), "rad2deg": ("real", True, ()),
    "logit": ("prob", True, ()), "angle": ("real", True, ()), "positive": ("real", True, ()),
    "conj_physical": ("real", True, ()), "nan_to_num": ("real", True, ()),
    "bitwise_not": ("real", False, ()), "logical_not": ("real", False, ()),
    "isnan": ("real", False, ()), "isinf": ("real", False, ()),
    "isfinite": ("real", False, ()), "isposinf": ("real", False, ()),
    "isneginf": ("real", False, ()), "isreal": ("real", False, ()),
    "signbit": ("real", False, ()),
}
for _name, (_domain, _grad, _aliases) in _UNARY.items():
    op(_name, "unary", domain=_domain, grad=_grad,
       aliases=tuple(_aliases) + tuple(f"Tensor.{a}" for a in (_name,) + _aliases)
       + tuple(f"Tensor.{a}_" for a in (_name,) + _aliases)
       + tuple(f"{a}_" for a in (_name,) + _aliases))


# ---------------------------------------------------------------------------------------
# elementwise, two inputs (and more)
# ---------------------------------------------------------------------------------------

_BINARY = {
    # name: (options, differentiable, aliases)
    "add": ({"scalar_first": True}, True, ()),
    "sub": ({"scalar_first": True}, True, ("subtract",)),
    "mul": ({"scalar_first": True}, True, ("multiply",)),
    "div": ({"scalar_first": True, "other_domain": "positive"}, True,
            ("divide", "true_divide")),
    "floor_divide": ({"other_domain": "positive"}, False, ()),
    "remainder": ({"scalar_first": True, "other_domain": "positive"}, True, ()),
    "fmod": ({"other_domain": "positive"}, True, ()),
    "pow": ({"scalar_first": True, "domain": "positive", "other_domain": "small"}, True, ()),
    "float_power": ({"scalar_first": True, "domain": "positive", "other_domain": "small"},
                    True, ()),
    "maximum": ({"scalars": False}, True, ()), "minimum": ({"scalars": False}, True, ()),
    "fmax": ({"scalars": False}, True, ()), "fmin": ({"scalars": False}, True, ()),
    "atan2": ({}, True, ("arctan2",)), "hypot": ({}, True, ()),
    "xlogy": ({"scalar_first": True, "other_domain": "positive"}, True, ()),
    "copysign": ({}, True, ()), "ldexp": ({"other_domain": "small"}, True, ()),
    "nextafter": ({}, False, ()), "heaviside": ({"scalars": False}, False, ()),
    "logaddexp": ({"scalars": False}, True, ()), "logaddexp2": ({"scalars": False}, True, ()),
    "bitwise_and": ({}, False, ()), "bitwise_or": ({}, False, ()),
    "bitwise_xor": ({}, False, ()),
    "bitwise_left_shift": ({}, False, ()), "bitwise_right_shift": ({}, False, ()),
    "gcd": ({"scalars": False}, False, ()), "lcm": ({"scalars": False}, False, ()),
    "eq": ({}, False, ()), "ne": ({}, False, ("not_equal",)), "lt": ({}, False, ("less",)),
    "le": ({}, False, ("less_equal",)), "gt": ({}, False, ("greater",)),
    "ge": ({}, False, ("greater_equal",)), "logical_and": ({}, False, ()),
    "logical_or": ({}, False, ()), "logical_xor": ({}, False, ()),
    # PyTorch differentiates these in their second argument only
    "igamma": ({"scalars": False, "domain": "positive", "other_domain": "positive"}, False,
               ()),
    "igammac": ({"scalars": False, "domain": "positive", "other_domain": "positive"}, False,
                ()),
}
for _name, (_options, _grad, _aliases) in _BINARY.items():
    op(_name, "binary", grad=_grad,
       aliases=tuple(_aliases) + tuple(f"Tensor.{a}" for a in (_name,) + _aliases)
       + tuple(f"Tensor.{a}_" for a in (_name,) + _aliases) + (f"{_name}_",), **_options)
op("rsub", "binary", scalars=False)
op("isclose", "binary", grad=False, scalars=False, aliases=("Tensor.isclose",))
op("complex", "binary", dtypes=FLOATING, scalars=False, mixed=())
op("polar", "binary", dtypes=FLOATING, scalars=False, mixed=(), other_domain="real",
   domain="positive")

# ----- operators: the same ops through Python's syntax --------------------------------------
_OPERATORS = {
    "add": ("add", "radd", "iadd"), "sub": ("sub", "rsub", "isub"), "mul": ("mul", "rmul", "imul"),
    "truediv": ("truediv", "rtruediv", "itruediv"), "floordiv": ("floordiv", "rfloordiv",
                                                                  "ifloordiv"),
    "mod": ("mod", "rmod", "imod"), "pow": ("pow", "rpow", "ipow"),
    "and_": ("and", "rand", "iand"), "or_": ("or", "ror", "ior"), "xor": ("xor", "rxor", "ixor"),
    "lshift": ("lshift", "rlshift", "ilshift"), "rshift": ("rshift", "rrshift", "irshift"),
    "eq": ("eq",), "ne": ("ne",), "lt": ("lt",), "le": ("le",), "gt": ("gt",), "ge": ("ge",),
}
for _fn, _dunders in _OPERATORS.items():
    domain = "positive" if _fn == "pow" else "real"
    other = "positive" if _fn in ("truediv", "floordiv", "mod") else domain
    op(f"op:{_fn}", "binary", grad=_fn in ("add", "sub", "mul", "truediv", "pow"),
       aliases=tuple(f"Tensor.__{d}__" for d in _dunders), scalar_first=True, domain=domain,
       other_domain=other)
op("op:neg", "unary", aliases=("Tensor.__neg__",))
op("op:pos", "unary", aliases=("Tensor.__pos__",))
op("op:abs", "unary", aliases=("Tensor.__abs__",))
op("op:invert", "unary", grad=False, aliases=("Tensor.__invert__",))
op("op:matmul", "calls", dtypes=FLOAT_COMPLEX, aliases=("Tensor.__matmul__",
                                                        "Tensor.__rmatmul__",
                                                        "Tensor.__imatmul__"),
   calls=(((X(3, 4), X(4, 2)),), ((X(2, 3, 4), X(4)),), ((X(4), X(4)),),
          ((X(3, 4), X(3, 4)), {}, "refuse")))

# ----- three inputs ----------------------------------------------------------------------------
op("where", "calls", aliases=("Tensor.where",),
   calls=(((BOOLS(3, 4), X(3, 4), X(3, 4)),), ((BOOLS(3, 1), X(4), X(3, 4)), {}, "broadcast"),
          ((BOOLS(3), X(3), 2.5), {}, "scalar"), ((BOOLS(3), 1, X(3)), {}, "scalar"),
          ((BOOLS(3), X(3), OF("float64", 3)), {}, "promote"),
          ((OF("int64", 3), X(3), X(3)), {}, "refuse")))
op("clamp", "calls", aliases=("clip", "Tensor.clamp", "Tensor.clip", "clamp_", "clip_",
                               "Tensor.clamp_", "Tensor.clip_"),
   calls=(((X(3, 4), -0.5, 0.5),), ((X(3, 4),), {"min": 0.1}), ((X(3, 4),), {"max": 0}),
          ((X(3, 4), X(4), X(3, 1)), {}, "broadcast"),
          ((X(3), OF("float64"), None), {}, "promote"), ((X(3), 2, 1),),
          ((X(3),), {}, "refuse")))
op("clamp_min", "calls", aliases=("Tensor.clamp_min", "Tensor.clamp_min_", "clamp_min_"),
   calls=(((X(3, 4), 0.5),), ((X(3, 4), X(4)), {}, "broadcast")))
op("clamp_max", "calls", aliases=("Tensor.clamp_max", "Tensor.clamp_max_", "clamp_max_"),
   calls=(((X(3, 4), 0.5),), ((X(3, 4), X(4)), {}, "broadcast")))
op("lerp", "calls", dtypes=FLOAT_COMPLEX, aliases=("Tensor.lerp", "Tensor.lerp_"),
   calls=(((X(3, 4), X(3, 4), 0.3),), ((X(3, 4), X(3, 4), X(3, 4)),),
          ((X(3, 4), X(4), 0.7), {}, "broadcast"),
          ((X(3), OF("float64", 3), 0.5), {}, "refuse")))
op("addcmul", "calls", aliases=("Tensor.addcmul", "Tensor.addcmul_"),
   calls=(((X(3, 4), X(3, 4), X(3, 4)), {"value": 0.5}),
          ((X(3, 4), X(4), X(3, 1)), {}, "broadcast"),
          ((X(3), X(3), OF("float64", 3)), {}, "promote")))
op("addcdiv", "calls", aliases=("Tensor.addcdiv", "Tensor.addcdiv_"), domain="positive",
   calls=(((X(3, 4), X(3, 4), X(3, 4)), {"value": 0.5}),
          ((X(3, 4), X(4), X(3, 1)), {}, "broadcast"),
          ((X(3), X(3), OF("float64", 3)), {}, "promote")))
op("masked_fill", "calls", aliases=("Tensor.masked_fill", "Tensor.masked_fill_"),
   calls=(((X(3, 4), BOOLS(3, 4), 1.5),), ((X(3, 4), BOOLS(4), -1), {}, "broadcast"),
          ((X(3, 4), BOOLS(3, 4), OF("float64")),),
          ((X(3, 4), OF("int64", 3, 4), 1), {}, "refuse")))


# ---------------------------------------------------------------------------------------
# reductions and scans
# ---------------------------------------------------------------------------------------

_REDUCE = {
    # name: (options, differentiable)
    "sum": ({"dtype_arg": ("float64", "int64")}, True), "nansum": ({}, True),
    "mean": ({"dtype_arg": ("float64",)}, True), "nanmean": ({}, True),
    "prod": ({"dims": (None, 0, -1), "dtype_arg": ("float64",)}, True),
    "amax": ({}, True), "amin": ({}, True),
    "var": ({}, True), "std": ({}, True), "var_mean": ({}, True), "std_mean": ({}, True),
    "logsumexp": ({"dims": (0, -1, (0, 1)), "dim_required": True}, True),
    "all": ({}, False), "any": ({}, False), "count_nonzero": ({"keepdim": False}, False),
    "norm": ({}, True), "aminmax": ({"dims": (None, 0, -1)}, True),
    "argmax": ({"dims": (None, 0, -1)}, False), "argmin": ({"dims": (None, 0, -1)}, False),
    "max": ({"dims": (None, 0, -1)}, True), "min": ({"dims": (None, 0, -1)}, True),
    "median": ({"dims": (None, 0, -1)}, True), "nanmedian": ({"dims": (None, 0, -1)}, True),
    "mode": ({"dims": (0, -1)}, True),
}
#: reductions that pick an element: distinct values, so that the index is unambiguous
_PICKING = {"amax", "amin", "aminmax", "argmax", "argmin", "max", "min", "median", "nanmedian",
            "mode"}
for _name, (_options, _grad) in _REDUCE.items():
    op(_name, "reduce", grad=_grad, aliases=(f"Tensor.{_name}",),
       domain="distinct" if _name in _PICKING else "real", **_options)

_SCAN = {"cumsum": {"dtype_arg": ("float64",)}, "cumprod": {"dtype_arg": ("float64",)},
         "cummax": {}, "cummin": {}, "logcumsumexp": {}}
for _name, _options in _SCAN.items():
    op(_name, "scan", aliases=(f"Tensor.{_name}", f"Tensor.{_name}_"),
       domain="distinct" if _name in ("cummax", "cummin") else "real", **_options)


# ---------------------------------------------------------------------------------------
# shapes, views and movement
# ---------------------------------------------------------------------------------------

_VIEWS = {
    # name: (calls, differentiable); each call (args, kwargs, kind) as samples.calls reads
    "reshape": ((((X(3, 4), (2, 6)),), ((X(3, 4), (-1,)),), ((X(3, 4), (5, -1)), {}, "refuse"),
                 ((NC(3, 4), (12,)), {}, "noncontig"), ((X(), ()),)), True),
    "view": ((((X(3, 4), 2, 6),), ((X(3, 4), -1),), ((NC(3, 4), 12), {}, "refuse")), True),
    "flatten": ((((X(2, 3, 4),),), ((X(2, 3, 4), 1),), ((X(2, 3, 4), 0, 1),), ((X(),),),
                 ((X(2, 3, 4), 2, 1), {}, "refuse")), True),
    "unflatten": ((((X(3, 4), 1, (2, 2)),), ((X(3, 4), -1, (2, -1)),),
                   ((X(3, 4), 1, (3, 3)), {}, "refuse")), True),
    "squeeze": ((((X(3, 1, 4),),), ((X(3, 1, 4), 1),), ((X(3, 1, 4), (0, 1)),),
                 ((X(3, 1, 4), 3), {}, "refuse")), True),
    "unsqueeze": ((((X(3, 4), 0),), ((X(3, 4), -1),), ((X(), 0),),
                   ((X(3, 4), 3), {}, "refuse")), True),
    "permute": ((((X(2, 3, 4), (2, 0, 1)),), ((X(2, 3, 4), 1, 0, 2),),
                 ((X(2, 3, 4), (0, 0, 1)), {}, "refuse")), True),
    "transpose": ((((X(2, 3, 4), 0, 2),), ((X(3, 4), -1, 0),),
                   ((X(3, 4), 0, 2), {}, "refuse")), True),
    "t": ((((X(3, 4),),), ((X(4),),), ((X(),),), ((X(2, 3, 4),), {}, "refuse")), True),
    "adjoint": ((((X(3, 4),),), ((X(2, 3, 4),),)), True),
    "movedim": ((((X(2, 3, 4), 0, 2),), ((X(2, 3, 4), (0, 1), (2, 0)),)), True),
    "narrow": ((((X(3, 4), 1, 1, 2),), ((X(3, 4), 0, -2, 2),),
                ((X(3, 4), 1, 3, 2), {}, "refuse")), True),
    "select": ((((X(3, 4), 1, 2),), ((X(3, 4), 0, -1),), ((X(3, 4), 1, 4), {}, "refuse")),
               True),
    "expand": ((((X(3, 1), 3, 4),), ((X(4), 2, 4),), ((X(4), -1),),
                ((X(3, 2), 3, 4), {}, "refuse")), True),
    "expand_as": ((((X(3, 1), X(3, 4)),),), True),
    "broadcast_to": ((((X(3, 1), (2, 3, 4)),), ((X(3, 2), (3, 4)), {}, "refuse")), True),
    "tile": ((((X(3, 4), (2, 1)),), ((X(4), (2, 2)),)), True),
    "repeat": ((((X(3, 4), 2, 1),), ((X(4), 2, 2),), ((X(3, 4), 2), {}, "refuse")), True),
    "flip": ((((X(3, 4), (0,)),), ((X(3, 4), (0, 1)),), ((X(), (0,)),)), True),
    "fliplr": ((((X(3, 4),),),), True), "flipud": ((((X(3, 4),),),), True),
    "roll": ((((X(3, 4), 1),), ((X(3, 4), (1, -1), (0, 1)),), ((X(3, 4), 2, 1),)), True),
    "rot90": ((((X(3, 4),),), ((X(3, 4), 2),), ((X(2, 3, 4), -1, (1, 2)),)), True),
    "diag": ((((X(4),),), ((X(3, 4),),), ((X(3, 4), 1),), ((X(4), -1),)), True),
    "diagonal": ((((X(3, 4),),), ((X(3, 4), 1),), ((X(2, 3, 4), 0, 1, 2),)), True),
    "diag_embed": ((((X(2, 3),),), ((X(2, 3), 1),)), True),
    "diagflat": ((((X(2, 3),),), ((X(3), -1),)), True),
    "tril": ((((X(3, 4),),), ((X(3, 4), 1),), ((X(2, 3, 4), -1),)), True),
    "triu": ((((X(3, 4),),), ((X(3, 4), 1),), ((X(2, 3, 4), -1),)), True),
    "chunk": ((((X(5, 4), 2),), ((X(5, 4), 3, 1),)), True),
    "split": ((((X(5, 4), 2),), ((X(5, 4), (1, 4)),), ((X(5, 4), (1, 1), 1), {}, "refuse")),
              True),
    "split_with_sizes": ((((X(5, 4), (1, 4)),),), True),
    "tensor_split": ((((X(7, 2), 3),), ((X(7, 2), (1, 5)),), ((X(7, 2), (-2, 5)),)), True),
    "unbind": ((((X(3, 4),),), ((X(3, 4), 1),)), True),
    "hsplit": ((((X(3, 4), 2),), ((X(3, 4), (1, 3)),)), True),
    "vsplit": ((((X(4, 3), 2),),), True), "dsplit": ((((X(2, 3, 4), 2),),), True),
    "ravel": ((((X(3, 4),),), ((NC(3, 4),),)), True),
    "atleast_1d": ((((X(),),), ((X(3),),)), True),
    "atleast_2d": ((((X(),),), ((X(3),),)), True),
    "atleast_3d": ((((X(),),), ((X(3, 4),),)), True),
    "clone": ((((X(3, 4),),), ((NC(3, 4),),)), True),
    "contiguous": ((((X(3, 4),),), ((NC(3, 4),),)), True),
    "detach": ((((X(3, 4),),),), False),
    "resolve_conj": ((((X(3, 4),),),), True), "resolve_neg": ((((X(3, 4),),),), True),
    "view_as_real": ((((X(3, 4),),),), True),
    "real": ((((X(3, 4),),),), True), "imag": ((((X(3, 4),),),), True),
    "conj": ((((X(3, 4),),),), True),
}
# torcia's functions of these take what PyTorch's methods take (sizes as separate
# arguments); torch.view and friends do not exist, torch.permute wants one tuple
_METHOD_FORMS = {"view", "expand", "expand_as", "repeat", "contiguous", "permute"}
for _name, (_calls, _grad) in _VIEWS.items():
    op(_name, "calls", calls=_calls, grad=_grad, aliases=(f"Tensor.{_name}",),
       torch_name=f"Tensor.{_name}" if _name in _METHOD_FORMS else "")
op("view_dtype", "calls", grad=False, path="view", torch_name="Tensor.view",
   calls=(((X(3, 4), DT()),),), note="view(dtype): not differentiable, in torch either")
op("view_as_complex", "calls", dtypes=FLOATING, calls=(((X(3, 2),),), ((X(3, 4),), {},
                                                                        "refuse")))
op("moveaxis", "calls", calls=(((X(2, 3, 4), 0, 2),),), aliases=("Tensor.moveaxis",))
op("swapaxes", "calls", calls=(((X(2, 3, 4), 0, 2),),),
   aliases=("swapdims", "Tensor.swapaxes", "Tensor.swapdims"))
op("Tensor.transpose_", "calls", calls=(((X(2, 3, 4), 0, 2),),),
   aliases=("Tensor.swapaxes_", "Tensor.swapdims_"))
op("Tensor.t_", "calls", calls=(((X(3, 4),),), ((X(2, 3, 4),), {}, "refuse")))
op("Tensor.squeeze_", "calls", calls=(((X(3, 1, 4),),), ((X(3, 1, 4), 1),)))
op("Tensor.unsqueeze_", "calls", calls=(((X(3, 4), 1),),))
op("Tensor.view_as", "calls", calls=(((X(3, 4), X(2, 6)),),), aliases=("Tensor.reshape_as",))
op("Tensor.unfold", "calls", calls=(((X(3, 7), 1, 3, 2),), ((X(3, 7), 1, 8, 1), {}, "refuse")),
   aliases=("unfold",))
for _name in ("cat", "concat", "concatenate"):
    op(_name, "calls", calls=((([X(3, 4), X(2, 4)],),), (([X(3, 4), X(3, 2)], 1),),
                              (([X(3, 4), OF("float64", 3, 4)],), {}, "promote"),
                              (([X(3, 4), X(3)],), {}, "refuse"),
                              (([X(0), X(3, 4)],), {}, "empty")))
for _name in ("stack", "hstack", "vstack", "dstack", "column_stack", "row_stack"):
    op(_name, "calls", calls=((([X(3, 4), X(3, 4)],),), (([X(4), X(4)],),),
                              (([X(3, 4), OF("float64", 3, 4)],), {}, "promote")))
op("block_diag", "calls", calls=(((X(2, 3), X(1, 2)),), ((X(3), X()),)))
op("cartesian_prod", "calls", calls=(((X(3), X(2)),),))
op("combinations", "calls", calls=(((X(4),),), ((X(4), 3),),
                                   ((X(4),), {"with_replacement": True})))
op("meshgrid", "calls", calls=(((X(3), X(2)), {"indexing": "ij"}),
                               ((X(3), X(2)), {"indexing": "xy"})))
op("broadcast_tensors", "calls", calls=(((X(3, 1), X(4)),),))
op("as_strided", "calls", aliases=("Tensor.as_strided", "Tensor.as_strided_", "as_strided_"),
   calls=(((X(3, 4), (2, 2), (1, 2)),), ((X(3, 4), (2,), (1,), 5),),
          ((X(3, 4), (4,), (4,)), {}, "refuse")))
op("as_strided_scatter", "calls", calls=(((X(3, 4), X(2, 2), (2, 2), (4, 1), 1),),))
op("diagonal_scatter", "calls", calls=(((X(3, 4), X(3)),), ((X(3, 4), X(3), 1),)))
op("select_scatter", "calls", calls=(((X(3, 4), X(4), 0, 1),),))
op("slice_scatter", "calls", calls=(((X(3, 4), X(3, 2)), {"dim": 1, "start": 1, "end": 3}),))
op("index_select", "calls", aliases=("Tensor.index_select",),
   calls=(((X(3, 4), 0, IDX(2, 0)),), ((X(3, 4), 1, IDX(1, 1, 3)),),
          ((X(3, 4), 0, IDX(3)), {}, "refuse")))
op("gather", "calls", aliases=("Tensor.gather",),
   calls=(((X(3, 4), 1, IDX([[0, 2], [1, 1], [3, 0]])),),
          ((X(3, 4), 0, IDX([[2], [2], [0]])),), ((X(3, 4), 0, IDX([[3]])), {}, "refuse")))
op("take_along_dim", "calls", aliases=("Tensor.take_along_dim",),
   calls=(((X(3, 4), IDX([[0], [2], [1]]), 1),), ((X(3, 4), IDX(5, 0)),)))
op("take", "calls", aliases=("Tensor.take",),
   calls=(((X(3, 4), IDX(0, 11, -1)),), ((X(3, 4), IDX(12)), {}, "refuse")))
op("masked_select", "calls", aliases=("Tensor.masked_select",),
   calls=(((X(3, 4), BOOLS(3, 4)),), ((X(3, 4), BOOLS(4)), {}, "broadcast")))
op("masked_scatter", "calls", aliases=("Tensor.masked_scatter", "Tensor.masked_scatter_"),
   calls=(((X(3, 4), BOOLS(3, 4), X(12)),),))
for _name in ("scatter", "scatter_add"):
    op(_name, "calls", aliases=(f"Tensor.{_name}", f"Tensor.{_name}_"),
       calls=(((X(3, 4), 1, IDX([[0, 2], [1, 3], [3, 0]]), X(3, 2)),),
              ((X(3, 4), 0, IDX([[2, 0, 1, 2]]), X(1, 4)),),
              ((X(3, 4), 0, IDX([[3, 0, 1, 2]]), X(1, 4)), {}, "refuse")))
op("Tensor.scatter_", "calls",
   calls=(((X(3, 4), 1, IDX([[0, 2], [1, 1], [3, 0]]), 2.0),),
          ((X(3, 4), 1, IDX([[0, 2], [1, 1], [3, 0]]), 2.0), {"reduce": "add"}),
          ((X(3, 4), 1, IDX([[0, 2], [1, 1], [3, 0]]), X(3, 2)), {"reduce": "multiply"})))
op("scatter_reduce", "calls", aliases=("Tensor.scatter_reduce", "Tensor.scatter_reduce_"),
   calls=tuple(((X(3, 4), 1, IDX([[0, 0], [1, 1], [3, 0]]), X(3, 2), r), {"include_self": s})
               for r in ("sum", "prod", "mean", "amax", "amin") for s in (True, False)))
op("index_add", "calls", aliases=("Tensor.index_add", "Tensor.index_add_"),
   calls=(((X(3, 4), 0, IDX(2, 0, 2), X(3, 4)),),
          ((X(3, 4), 1, IDX(1), X(3, 1)), {"alpha": 2}),
          ((X(3, 4), 0, IDX(3), X(1, 4)), {}, "refuse")))
op("index_copy", "calls", aliases=("Tensor.index_copy", "Tensor.index_copy_"),
   calls=(((X(3, 4), 0, IDX(2, 0), X(2, 4)),), ((X(3, 4), 0, IDX(4), X(1, 4)), {}, "refuse")))
op("index_fill", "calls", aliases=("Tensor.index_fill", "Tensor.index_fill_"),
   calls=(((X(3, 4), 1, IDX(0, 2), -1.0),), ((X(3, 4), 0, IDX(1), OF("float64")),)))
op("index_reduce", "calls", aliases=("Tensor.index_reduce", "Tensor.index_reduce_"),
   calls=tuple(((X(3, 4), 0, IDX(0, 0, 2), X(3, 4), r), {"include_self": s})
               for r in ("prod", "mean", "amax", "amin") for s in (True, False)))
op("index_put", "calls", aliases=("Tensor.index_put", "Tensor.index_put_", "index_put_"),
   calls=(((X(3, 4), (IDX(0, 2),), X(2, 4)),),
          ((X(3, 4), (IDX(0, 0), IDX(1, 1)), X(2)), {"accumulate": True}),
          ((X(3, 4), (IDX(0, 2),), X(3, 4)), {}, "refuse")))
op("put", "calls", aliases=("Tensor.put", "Tensor.put_"),
   calls=(((X(3, 4), IDX(0, -1), X(2)),), ((X(3, 4), IDX(1, 1), X(2)), {"accumulate": True})))
op("getitem", "calls", torch_name="op:getitem", aliases=("Tensor.__getitem__",),
   calls=(((X(3, 4), 1),), ((X(3, 4), (slice(None), True)),), ((X(3, 4), (Ellipsis, None)),),
          ((X(3, 4), (slice(1, None), slice(None, None, 2))),), ((X(3, 4), IDX(2, 0)),),
          ((X(3, 4), (IDX(0, 2), IDX(1, 3))),), ((X(3, 4), BOOLS(3, 4)),),
          ((X(3, 4), 3), {}, "refuse")))
op("setitem", "calls", torch_name="op:setitem", grad=False, aliases=("Tensor.__setitem__",),
   calls=(((X(3, 4), 1, 2.0),), ((X(3, 4), IDX(0, 2), X(4)),),
          ((X(3, 4), BOOLS(3, 4), 0.5),)))


# ---------------------------------------------------------------------------------------
# sorting, selection, counting
# ---------------------------------------------------------------------------------------

op("sort", "calls", domain="distinct", aliases=("Tensor.sort",),
   calls=(((X(3, 4),),), ((X(3, 4), 0),), ((X(3, 4),), {"descending": True}),
          ((X(3, 4),), {"stable": True}), ((X(),),), ((X(3, 4), 2), {}, "refuse")))
op("argsort", "calls", domain="distinct", grad=False, aliases=("Tensor.argsort",),
   calls=(((X(3, 4),), {"stable": True}), ((X(3, 4), 0), {"descending": True, "stable": True})))
op("msort", "calls", domain="distinct", aliases=("Tensor.msort",), calls=(((X(3, 4),),),))
op("topk", "calls", domain="distinct", aliases=("Tensor.topk",),
   calls=(((X(3, 4), 2),), ((X(3, 4), 2, 0),), ((X(3, 4), 1), {"largest": False}),
          ((X(3, 4), 5), {}, "refuse")))
op("kthvalue", "calls", domain="distinct", aliases=("Tensor.kthvalue",),
   calls=(((X(3, 4), 2),), ((X(3, 4), 1, 0),), ((X(3, 4), 2, 1, True),),
          ((X(3, 4), 5), {}, "refuse")))
op("unique", "calls", grad=False, aliases=("Tensor.unique",),
   calls=(((X(5, 4),),), ((X(5, 4),), {"return_inverse": True, "return_counts": True}),
          ((X(5, 4),), {"dim": 0}), ((X(0),),)))
op("unique_consecutive", "calls", grad=False, aliases=("Tensor.unique_consecutive",),
   calls=(((("v", [1, 1, 2, 2, 3, 1]),),),
          ((("v", [1, 1, 2, 2, 3, 1]),), {"return_inverse": True, "return_counts": True})))
op("nonzero", "calls", grad=False, aliases=("Tensor.nonzero", "argwhere", "Tensor.argwhere"),
   calls=(((X(3, 4),),), ((X(3, 4),), {"as_tuple": True}), ((X(),),)))
op("nonzero_static", "calls", grad=False, aliases=("Tensor.nonzero_static",),
   calls=(((X(3, 4),), {"size": 5}), ((X(3, 4),), {"size": 20, "fill_value": -7})))
op("searchsorted", "calls", grad=False,
   calls=(((("v", [1, 3, 5, 7]), X(5)),), ((("v", [1, 3, 5, 7]), X(5)), {"right": True}),
          ((("v", [[1, 3], [2, 4]]), X(2, 3)),), ((("v", [1, 3, 5, 7]), 4),),
          ((("v", [1, 3, 5, 7]), X(5)), {"side": "up"}, "refuse")))
op("bucketize", "calls", grad=False,
   calls=(((X(5), ("v", [1, 3, 5, 7])),), ((X(5), ("v", [1, 3, 5, 7])), {"right": True})))
op("bincount", "calls", grad=False, dtypes=("int64", "int32", "uint8", "float32"),
   calls=(((("v", [0, 2, 2, 5]),),), ((("v", [0, 2, 2]), OF("float32", 3)),),
          ((("v", [0, 1]),), {"minlength": 4}), ((("v", [-1, 1]),), {}, "refuse")),
   aliases=("Tensor.bincount",))
op("histc", "calls", grad=False, aliases=("Tensor.histc",),
   calls=(((X(20),), {"bins": 5, "min": -2, "max": 2}), ((X(20),), {"bins": 4})))
op("histogram", "calls", grad=False, dtypes=FLOATING, aliases=("Tensor.histogram",),
   calls=(((X(20), 4),), ((X(20), 3), {"range": (-1.0, 1.0), "density": True})))
op("histogramdd", "calls", grad=False, dtypes=FLOATING,
   calls=(((X(20, 2), (2, 3)),),))
op("isin", "calls", grad=False, aliases=("Tensor.isin",),
   calls=(((X(3, 4), X(5)),), ((X(3, 4), X(5)), {"invert": True}), ((X(3, 4), 1),)))
op("count_nonzero_dims", "calls", grad=False, path="count_nonzero",
   calls=(((X(3, 4), (0, 1)),),), note="count_nonzero over a tuple of dims")


# ---------------------------------------------------------------------------------------
# mathematics beyond elementwise
# ---------------------------------------------------------------------------------------

op("diff", "calls", aliases=("Tensor.diff",),
   calls=(((X(3, 5),),), ((X(3, 5), 2, 0),), ((X(3, 5),), {"prepend": X(3, 1)}),
          ((X(3), 5),), ((X(),), {}, "refuse")))
op("cumulative_trapezoid", "calls", calls=(((X(3, 5),),), ((X(3, 5), X(5)),),
                                           ((X(3, 5),), {"dx": 0.5, "dim": 0})))
for _name in ("trapezoid", "trapz"):
    op(_name, "calls", calls=(((X(3, 5),),), ((X(3, 5), X(5)),), ((X(3, 5),), {"dim": 0})))
op("gradient", "calls", dtypes=FLOAT_COMPLEX,
   calls=(((X(4, 5),),), ((X(4, 5),), {"dim": 1}), ((X(4, 5),), {"spacing": 2.0}),
          ((X(4, 5),), {"edge_order": 2})))
op("vander", "calls", calls=(((X(4),),), ((X(4), 3),), ((X(4),), {"increasing": True})))
op("kron", "calls", aliases=("Tensor.kron",), calls=(((X(2, 3), X(3, 2)),), ((X(2), X(3)),)))
op("cross", "calls", aliases=("Tensor.cross",),
   calls=(((X(4, 3), X(4, 3)),), ((X(3, 4), X(3, 4), 0),), ((X(4, 2), X(4, 2)), {}, "refuse")))
op("renorm", "calls", dtypes=FLOAT_COMPLEX, aliases=("Tensor.renorm", "Tensor.renorm_"),
   calls=(((X(3, 4), 2, 0, 1.0),), ((X(3, 4), 1, 1, 0.5),)))
op("dist", "calls", aliases=("Tensor.dist",), calls=(((X(3, 4), X(3, 4)),), ((X(3, 4), X(4), 1),),
                                                    ((X(3, 4), X(3, 4), float("inf")),)))
op("cdist", "calls", dtypes=FLOATING, calls=(((X(3, 4), X(5, 4)),), ((X(2, 3, 4), X(2, 5, 4), 1),),
                                             ((X(3, 4), X(5, 4), float("inf")),)))
op("pdist", "calls", dtypes=FLOATING, calls=(((X(4, 3),),), ((X(4, 3), 1),)))
op("cov", "calls", aliases=("Tensor.cov",),
   calls=(((X(3, 5),),), ((X(3, 5),), {"correction": 0}), ((X(5),),)))
op("corrcoef", "calls", aliases=("Tensor.corrcoef",), calls=(((X(3, 5),),),))
op("frexp", "calls", grad=False, aliases=("Tensor.frexp",), calls=(((X(3, 4),),),))
op("mvlgamma", "calls", domain="ge1", aliases=("Tensor.mvlgamma", "Tensor.mvlgamma_"),
   calls=(((X(3, 4), 1),), ((X(3, 4),), {"p": 2})))
op("polygamma", "calls", domain="positive", aliases=("Tensor.polygamma", "Tensor.polygamma_"),
   calls=(((1, X(3, 4)),), ((2, X(3, 4)),), ((-1, X(3, 4)), {}, "refuse")))
op("trace", "calls", aliases=("Tensor.trace",), calls=(((X(3, 4),),), ((X(3),), {}, "refuse")))
op("chain_matmul", "calls", dtypes=FLOAT_COMPLEX, calls=(((X(3, 4), X(4, 2), X(2, 5)),),))
op("einsum", "calls", dtypes=FLOAT_COMPLEX,
   calls=((("ij,jk->ik", X(3, 4), X(4, 2)),), (("ii->i", X(3, 3)),), (("bij->bji", X(2, 3, 4)),),
          (("i,i->", X(4), X(4)),)))
op("tensordot", "calls", dtypes=FLOAT_COMPLEX, aliases=("Tensor.tensordot",),
   calls=(((X(3, 4, 2), X(4, 2, 5)),), ((X(3, 4), X(4, 5), 1),),
          ((X(3, 4), X(5, 3), ([0], [1])),)))
op("unravel_index", "calls", grad=False, dtypes=("int64",),
   calls=(((IDX(0, 5, 11), (3, 4)),),))
for _name in ("matmul", "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger"):
    _c = {"matmul": ((X(3, 4), X(4, 2)), (X(2, 3, 4), X(4)), (X(4), X(4))),
          "mm": ((X(3, 4), X(4, 2)),), "bmm": ((X(2, 3, 4), X(2, 4, 2)),),
          "mv": ((X(3, 4), X(4)),), "dot": ((X(4), X(4)),), "vdot": ((X(4), X(4)),),
          "inner": ((X(4), X(4)), (X(3, 4), X(2, 4))), "outer": ((X(4), X(3)),),
          "ger": ((X(4), X(3)),)}[_name]
    op(_name, "calls", aliases=(f"Tensor.{_name}",),
       calls=tuple((a,) for a in _c) + (((_c[0][0], OF("float64", *_c[0][1][1])), {},
                                          "promote"),))
for _name, _shapes in (("addmm", (X(3, 2), X(3, 4), X(4, 2))), ("addmv", (X(3), X(3, 4), X(4))),
                       ("addr", (X(3, 4), X(3), X(4))),
                       ("baddbmm", (X(2, 3, 2), X(2, 3, 4), X(2, 4, 2))),
                       ("addbmm", (X(3, 2), X(2, 3, 4), X(2, 4, 2)))):
    op(_name, "calls", aliases=(f"Tensor.{_name}", f"Tensor.{_name}_", f"{_name}_"),
       calls=((_shapes,), (_shapes, {"beta": 0.5, "alpha": 2.0}), (_shapes, {"beta": 0}),
              ((X(2),) + _shapes[1:], {}, "refuse")))


# ---------------------------------------------------------------------------------------
# linear algebra
# ---------------------------------------------------------------------------------------


def SQ(*shape):
    return ("sq", shape)


def DERIVED_C(path, *args):
    """An argument computed in each library by ``path`` from sample arguments (a
    spectrogram of a random signal for istft), complex."""
    return ("derive-c", path, args)


def DERIVED(path, values, item=None, *args):
    """An argument computed in each library by ``path`` from fixed ``values`` (and
    ``args``): an LU factorisation for lu_solve, entry ``item`` of its result."""
    return ("derive", path, (("v", values),) + args, item)


# fixed matrices for the factorisations others consume: invertible, and symmetric; and an
# invertible 4 x 4 for tensorinv
_A3 = [[4.0, 1.0, -2.0], [1.0, 5.0, 0.5], [2.0, -1.0, 6.0]]
_S3 = [[4.0, 1.0, -2.0], [1.0, 5.0, 0.5], [-2.0, 0.5, 6.0]]
_A4 = np.eye(4) * 4 + np.arange(16.0).reshape(4, 4) / 10


def SPD(*shape):
    return ("spd", shape)


def TRIL(*shape):
    return ("tril", shape)


def TRIU(*shape):
    return ("triu", shape)


_LINALG = {
    # name: calls; every sample is a float or complex matrix (batches, empty, refusals)
    "linalg.inv": ((SQ(3, 3),), (SQ(2, 3, 3),), (SQ(0, 0),), ((X(3, 4),), {}, "refuse")),
    "linalg.inv_ex": ((SQ(3, 3),),),
    "linalg.det": ((SQ(3, 3),), (SQ(2, 3, 3),), (SQ(0, 0),), ((X(3, 4),), {}, "refuse")),
    "linalg.slogdet": ((SQ(3, 3),), (SQ(2, 3, 3),)),
    "linalg.solve": ((SQ(3, 3), X(3, 2)), (SQ(2, 3, 3), X(3)), ((SQ(3, 3), X(3, 2)),
                                                                 {"left": False}, "refuse"),
                     ((SQ(3, 3), X(2, 3)), {"left": False})),
    "linalg.solve_ex": ((SQ(3, 3), X(3, 2)),),
    "linalg.solve_triangular": (((TRIU(3, 3), X(3, 2)), {"upper": True}),
                                ((TRIL(3, 3), X(3, 2)), {"upper": False}),
                                ((TRIL(3, 3), X(2, 3)), {"upper": False, "left": False}),
                                ((TRIU(3, 3), X(3, 2)), {"upper": True,
                                                         "unitriangular": True})),
    "linalg.cholesky": ((SPD(3, 3),), (SPD(2, 3, 3),), ((SPD(3, 3),), {"upper": True})),
    "linalg.cholesky_ex": ((SPD(3, 3),),),
    "linalg.qr": ((X(4, 3),), (X(3, 4),), (X(4, 3), "complete"), (X(4, 3), "r")),
    "linalg.eigh": ((SPD(3, 3),), (SPD(3, 3), "U")),
    "linalg.eigvalsh": ((SPD(3, 3),), (SPD(2, 3, 3),)),
    "linalg.eig": ((SQ(3, 3),),), "linalg.eigvals": ((SQ(3, 3),),),
    "linalg.svd": ((X(4, 3),), ((X(3, 4),), {"full_matrices": False})),
    "linalg.svdvals": ((X(4, 3),), (X(2, 3, 4),)),
    "linalg.pinv": ((X(4, 3),), ((X(3, 3),), {"hermitian": False})),
    "linalg.lstsq": ((SQ(4, 3), X(4, 2)),),
    "linalg.matrix_rank": ((X(4, 3),), ((X(4, 3),), {"hermitian": False})),
    "linalg.matrix_norm": ((X(3, 4),), (X(3, 4), "nuc"), (X(3, 4), 1), (X(3, 4), -2),
                           (X(2, 3, 4), float("inf"))),
    "linalg.vector_norm": ((X(3, 4),), (X(3, 4), 1), (X(3, 4), 3, 0), (X(3, 4), float("inf")),
                           (X(3, 4), 0), (X(),)),
    "linalg.norm": ((X(3, 4),), (X(3, 4), "fro"), (X(4),), (X(3, 4), 2, (0, 1))),
    "linalg.cond": ((SQ(3, 3),), (SQ(3, 3), 1)),
    "linalg.matrix_power": ((SQ(3, 3), 3), (SQ(3, 3), -2), (SQ(3, 3), 0)),
    "linalg.matrix_exp": ((X(3, 3),), (X(2, 3, 3),)),
    "linalg.multi_dot": (([X(3, 4), X(4, 2), X(2, 5)],),),
    "linalg.cross": ((X(4, 3), X(4, 3)),), "linalg.vecdot": ((X(3, 4), X(3, 4)),),
    "linalg.matmul": ((X(3, 4), X(4, 2)),), "linalg.diagonal": ((X(3, 4),),),
    "linalg.vander": ((X(4),), ((X(4),), {"N": 3})),
    "linalg.lu_factor": ((SQ(3, 3),),), "linalg.lu_factor_ex": ((SQ(3, 3),),),
    "linalg.lu": ((X(3, 4),), (SQ(3, 3),)),
    "linalg.householder_product": ((X(4, 3), X(3)),),
    "linalg.tensorinv": (((("v", _A4.reshape(4, 2, 2)),), {"ind": 1}),),
    "linalg.tensorsolve": ((SQ(6, 6), X(6)),),
    "linalg.ldl_factor": ((SPD(3, 3),),), "linalg.ldl_factor_ex": ((SPD(3, 3),),),
}
#: factorisations whose vectors are unique up to a sign (a phase): torch agreement on their
#: magnitudes; finite differences of the vectors themselves are ill-posed (the derivative
#: table's tests differentiate gauge-invariant functions of them)
_GAUGE = {"linalg.qr", "linalg.eigh", "linalg.eig", "linalg.svd", "linalg.lu",
          "linalg.householder_product", "linalg.ldl_factor", "linalg.ldl_factor_ex",
          "linalg.pinv"}
#: functions of a Hermitian matrix, which read half of it; and ops PyTorch does not
#: differentiate, or whose results are integers
_HERMITIAN = {"linalg.cholesky", "linalg.cholesky_ex", "linalg.eigvalsh"}
_LINALG_NO_GRAD = {"linalg.matrix_rank", "linalg.ldl_solve", "linalg.lu_factor",
                   "linalg.lu_factor_ex"}
for _name, _calls in _LINALG.items():
    op(_name, "calls", dtypes=FLOAT_COMPLEX, gauge=_name in _GAUGE, hermitian=_name in _HERMITIAN,
       props=_NO_GRAD if _name in _GAUGE | _LINALG_NO_GRAD else None,
       calls=tuple(c if isinstance(c[-1], str) and len(c) == 3 or (len(c) == 2 and
                                                                   isinstance(c[1], dict))
                   else (c,) for c in _calls))
op("linalg.lu_solve", "calls", dtypes=FLOAT_COMPLEX,
   calls=(((DERIVED("linalg.lu_factor", _A3, 0), DERIVED("linalg.lu_factor", _A3, 1), X(3, 2)),),
          ((DERIVED("linalg.lu_factor", _A3, 0), DERIVED("linalg.lu_factor", _A3, 1), X(3, 2)),
           {"adjoint": True})))
op("linalg.ldl_solve", "calls", dtypes=FLOATING, grad=False,
   calls=(((DERIVED("linalg.ldl_factor", _S3, 0), DERIVED("linalg.ldl_factor", _S3, 1),
            X(3, 2)),),))
# the legacy names (torch.det, torch.inverse, ...) over the same kernels
_LEGACY_LINALG = {
    "det": ((SQ(3, 3),),), "logdet": ((SPD(3, 3),),), "slogdet": ((SQ(3, 3),),),
    "inverse": ((SQ(3, 3),),), "cholesky": ((SPD(3, 3),), ((SPD(3, 3), True),)),
    "cholesky_solve": ((X(3, 2), TRIL(3, 3)),), "cholesky_inverse": ((TRIL(3, 3),),),
    "qr": ((X(4, 3),), ((X(4, 3), False),)), "svd": ((X(4, 3),), ((X(4, 3), False),)),
    "pinverse": ((X(4, 3),),), "matrix_power": ((SQ(3, 3), 2),), "matrix_exp": ((X(3, 3),),),
    "triangular_solve": ((X(3, 2), TRIU(3, 3)), (X(3, 2), TRIL(3, 3), False)),
    "lu": ((SQ(3, 3),),), "geqrf": ((X(4, 3),),), "nuclear_norm": ((X(3, 4),),),
    "frobenius_norm": ((X(3, 4), (0, 1)),), "orgqr": ((X(4, 3), X(3)),),
    "ormqr": ((X(4, 3), X(3), X(4, 2)),),
}
for _name, _calls in _LEGACY_LINALG.items():
    _gauge = _name in ("qr", "svd", "lu", "geqrf", "orgqr", "ormqr")
    op(_name, "calls", dtypes=FLOAT_COMPLEX, aliases=(f"Tensor.{_name}",), gauge=_gauge,
       props=_NO_GRAD if _gauge else None, hermitian=_name in ("cholesky", "logdet"),
       calls=tuple((c,) for c in _calls))
op("lu_solve", "calls", dtypes=FLOATING, aliases=("Tensor.lu_solve",),
   calls=(((X(3, 2), DERIVED("linalg.lu_factor", _A3, 0), DERIVED("linalg.lu_factor", _A3, 1)),),))
op("lu_unpack", "calls", dtypes=FLOATING,
   calls=(((DERIVED("linalg.lu_factor", _A3, 0), DERIVED("linalg.lu_factor", _A3, 1)),),))


# ---------------------------------------------------------------------------------------
# Fourier transforms
# ---------------------------------------------------------------------------------------

_NORMS = ({}, {"norm": "ortho"}, {"norm": "forward"})
for _name in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    op(f"fft.{_name}", "calls",
       calls=tuple(((X(3, 8),), n) for n in _NORMS) + (((X(3, 8), 5),), ((X(3, 8), 10, 0),),
                                                       ((X(8),), {"dim": 0}),
                                                       ((X(3, 8), 0), {}, "refuse")))
for _name in ("fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2", "fftn", "ifftn", "rfftn",
              "irfftn", "hfftn", "ihfftn"):
    op(f"fft.{_name}", "calls",
       calls=tuple(((X(2, 4, 6),), n) for n in _NORMS) + (((X(2, 4, 6), (3, 4)),),
                                                          ((X(2, 4, 6),), {"dim": (0, 2)})))
for _name in ("fftshift", "ifftshift"):
    op(f"fft.{_name}", "calls", calls=(((X(4, 5),),), ((X(4, 5), 0),)))
for _name in ("fftfreq", "rfftfreq"):
    op(f"fft.{_name}", "calls", grad=False, dtypes=("float32",),
       calls=(((8,),), ((7, 0.5),), ((8,), {"dtype": DT("float64")})))
op("stft", "calls", dtypes=FLOAT_COMPLEX, aliases=("Tensor.stft",),
   calls=(((X(64), 16), {"return_complex": True}),
          ((X(2, 64), 16, 4), {"window": ("t", (16,), "float32", "positive"),
                               "return_complex": True}),
          ((X(64), 16), {"return_complex": True, "center": False})))
op("istft", "calls", dtypes=COMPLEX, aliases=("Tensor.istft",),
   calls=(((DERIVED_C("stft", X(64), 16), 16),), ((DERIVED_C("stft", X(64), 16), 16),
                                                 {"length": 64})))


# ---------------------------------------------------------------------------------------
# torcia.special
# ---------------------------------------------------------------------------------------

_SPECIAL_UNARY = {
    "airy_ai": "real", "bessel_j0": "real", "bessel_j1": "real", "bessel_y0": "positive",
    "bessel_y1": "positive", "modified_bessel_i0": "real", "modified_bessel_i1": "real",
    "modified_bessel_k0": "positive", "modified_bessel_k1": "positive",
    "scaled_modified_bessel_k0": "positive", "scaled_modified_bessel_k1": "positive",
    "spherical_bessel_j0": "real", "entr": "nonneg", "erfcx": "real", "i0e": "real",
    "i1": "real", "i1e": "real", "log_ndtr": "real", "ndtr": "real", "ndtri": "prob",
    "digamma": "positive", "erf": "real", "erfc": "real", "erfinv": "unit", "exp2": "real",
    "expit": "real", "expm1": "real", "gammaln": "positive", "i0": "real", "log1p": "nonneg",
    "logit": "prob", "psi": "positive", "round": "real", "sinc": "real",
}
# PyTorch gives these no derivative: their results never require grad
_SPECIAL_NO_GRAD = {"airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
                    "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
                    "modified_bessel_k1", "scaled_modified_bessel_k0",
                    "scaled_modified_bessel_k1", "spherical_bessel_j0"}
for _name, _domain in _SPECIAL_UNARY.items():
    op(f"special.{_name}", "unary", domain=_domain, grad=_name not in _SPECIAL_NO_GRAD)
for _name in ("xlog1py", "xlogy", "zeta", "gammainc", "gammaincc"):
    op(f"special.{_name}", "binary", scalars=False,
       domain="positive" if _name != "xlog1py" else "real",
       other_domain="nonneg" if _name == "xlog1py" else "positive",
       grad=_name in ("xlog1py", "xlogy"),
       note="PyTorch differentiates zeta and gammainc in their second argument only")
for _name in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
              "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
              "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
              "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
              "laguerre_polynomial_l", "legendre_polynomial_p"):
    op(f"special.{_name}", "calls", grad=False, domain="unit",
       calls=(((X(3, 4), 3),), ((X(3, 4), ("v", [0, 1, 2, 5], "int64")),), ((X(3), -1),),
              ((X(3), X(3)),)))
op("special.polygamma", "calls", domain="positive", calls=(((1, X(3, 4)),), ((3, X(3, 4)),)))
op("special.multigammaln", "calls", domain="ge1", calls=(((X(3, 4), 1),), ((X(3, 4), 2),)))
for _name in ("softmax", "log_softmax"):
    op(f"special.{_name}", "calls", calls=(((X(3, 4), 1),), ((X(3, 4), 0),),
                                           ((X(3, 4), 1), {"dtype": DT("float64")})))
op("special.logsumexp", "calls", calls=(((X(3, 4), 1),), ((X(3, 4), (0, 1), True),)))


# ---------------------------------------------------------------------------------------
# creation and randomness
# ---------------------------------------------------------------------------------------

_CREATE = {
    # name: calls (a dtype= of the sample's dtype added to each), differentiable
    "zeros": (((2, 3),), ((0,),), (((2, 3),),)), "ones": (((2, 3),), (((),),)),
    "full": (((2, 3), 1.5), (((), True),), (((2,), -1),)),
    "arange": ((5,), (1, 7, 2), (0, 1, 0.25), (5, 1, -1)),
    # (a fractional step in an integer dtype kills torch 2.13 with SIGFPE: not sampled)
    "range": ((0, 5), (1, 9, 2)),
    "linspace": ((0, 1, 5), (-2, 2, 1), (3, 3, 4)),
    "logspace": ((0, 2, 5), (0, 1, 4, 2)),
    "eye": ((3,), (2, 4)),
    "scalar_tensor": ((2.5,), (3,)),
    "tril_indices": ((3, 4), (4, 3, 1)), "triu_indices": ((3, 4), (4, 3, -1)),
}
for _name, _calls in _CREATE.items():
    _index = _name in ("tril_indices", "triu_indices")
    op(_name, "calls", grad=False, dtypes=("int64", "int32") if _index else ALL,
       calls=tuple((c, {"dtype": DT()}) for c in _calls))
for _name in ("bartlett_window", "blackman_window", "hamming_window", "hann_window"):
    op(_name, "calls", grad=False, dtypes=FLOATING,
       calls=(((8,), {"dtype": DT()}), ((7, False), {"dtype": DT()}), ((1,), {"dtype": DT()})))
op("kaiser_window", "calls", grad=False, dtypes=FLOATING,
   calls=(((8,), {"dtype": DT()}), ((8, True, 5.0), {"dtype": DT()})))
for _name in ("zeros_like", "ones_like"):
    op(_name, "calls", grad=False, calls=(((X(2, 3),),), ((X(2, 3),), {"dtype": DT("float64")})))
op("full_like", "calls", grad=False, calls=(((X(2, 3), 7),), ((X(2, 3), 0.5),)))
op("tensor", "calls", grad=False,
   calls=((([1, 2, 3],), {"dtype": DT()}), ((2.5,), {"dtype": DT()}), (([[1, 0], [0, 1]],),),
          (([[1, 2], [3]],), {}, "refuse")))
for _name in ("as_tensor", "asarray"):
    op(_name, "calls", grad=False, calls=(((X(2, 3),),), ((X(2, 3),), {"dtype": DT("float64")}),
                                          (([1.5, 2.0],),)))
# values drawn at random: only the layout (shape and dtype) can agree with torch
_RANDOM = {
    "empty": (((2, 3),), ((0,),)), "empty_like": ((X(2, 3),),),
    "empty_strided": (((2, 3), (3, 1)),), "empty_permuted": (((2, 3), (1, 0)),),
    "rand": (((2, 3),),), "randn": (((2, 3),),), "randint": ((5, (2, 3)), (2, 9, (4,))),
    "randperm": ((5,),), "rand_like": ((X(2, 3),),), "randn_like": ((X(2, 3),),),
    "randint_like": ((X(2, 3), 5),), "normal": ((X(3), X(3)), (0.0, 1.0, (2, 3))),
    "bernoulli": ((("t", (2, 3), "float32", "prob"),),),
    "multinomial": ((("t", (5,), "float32", "positive"), 3),
                    (("t", (2, 5), "float32", "positive"), 7, True)),
    "poisson": ((("t", (2, 3), "float32", "positive"),),),
    "binomial": ((("t", (3,), "float32", "positive"), ("t", (3,), "float32", "prob")),),
}
for _name, _calls in _RANDOM.items():
    op(_name, "calls", grad=False, dtypes=("float32",), random=True, props=("torch", "meta"),
       calls=tuple((c,) for c in _calls))
for _name in ("uniform_", "normal_", "bernoulli_", "random_", "exponential_", "cauchy_",
              "geometric_", "log_normal_"):
    _args = {"random_": (X(2, 3), 0, 5), "geometric_": (X(2, 3), 0.5),
             "bernoulli_": (X(2, 3), 0.5)}.get(_name, (X(2, 3),))
    op(f"Tensor.{_name}", "calls", grad=False, dtypes=("float32", "float64"), random=True,
       props=("torch",), calls=((_args,),))
op("Tensor.bernoulli", "calls", grad=False, dtypes=("float32",), random=True, props=("torch",),
   domain="prob", calls=(((X(2, 3),),),))
op("Tensor.multinomial", "calls", grad=False, dtypes=("float32",), random=True,
   props=("torch",), domain="positive", calls=(((X(5), 3),),))


# ---------------------------------------------------------------------------------------
# torcia.nn.functional
# ---------------------------------------------------------------------------------------

_F = "nn.functional."
_ACTIVATIONS = {
    # name: (kwargs variants, domain); elementwise on a float tensor
    "relu": ((), "real"), "relu6": ((), "real"), "elu": (({"alpha": 0.5},), "real"),
    "selu": ((), "real"), "celu": (({"alpha": 2.0},), "real"), "gelu": (({"approximate":
                                                                         "tanh"},), "real"),
    "silu": ((), "real"), "mish": ((), "real"), "softplus": (({"beta": 2.0, "threshold": 1.0},),
                                                             "real"),
    "hardtanh": (({"min_val": -0.5, "max_val": 2.0},), "real"), "hardswish": ((), "real"),
    "hardsigmoid": ((), "real"), "logsigmoid": ((), "real"), "softsign": ((), "real"),
    "tanhshrink": ((), "real"), "hardshrink": (({"lambd": 1.0},), "real"),
    "softshrink": (({"lambd": 1.0},), "real"), "leaky_relu": (({"negative_slope": 0.2},), "real"),
    "sigmoid": ((), "real"), "tanh": ((), "real"),
}
for _name, (_variants, _domain) in _ACTIVATIONS.items():
    op(_F + _name, "unary", domain=_domain, variants=_variants,
       aliases=(f"{_F}{_name}_",) + ((_name, f"{_name}_", f"Tensor.{_name}")
                                     if _name not in ("sigmoid", "tanh", "relu") else ()))
op(_F + "threshold", "calls", aliases=(_F + "threshold_", "threshold", "threshold_"),
   calls=(((X(3, 4), 0.5, -1.0),), ((X(3, 4), 0.0, 2),)))
op(_F + "rrelu", "calls", random=True, dtypes=FLOATING, props=("torch",),
   aliases=(_F + "rrelu_", "rrelu", "rrelu_"), calls=(((X(3, 4),),), ((X(3, 4), 0.1, 0.3, True),)))
op(_F + "glu", "calls", calls=(((X(3, 4),),), ((X(4, 3), 0),), ((X(3, 3),), {}, "refuse")))
op(_F + "prelu", "calls", aliases=("prelu", "Tensor.prelu"),
   calls=(((X(2, 3, 4), X(3)),), ((X(2, 3), X(1)),)))
for _name in ("softmax", "softmin", "log_softmax"):
    op(_F + _name, "calls", aliases=((_name, f"Tensor.{_name}") if _name != "softmin" else ()),
       calls=(((X(3, 4), 1),), ((X(3, 4), 0),), ((X(3, 4), -1), {"dtype": DT("float64")}),
              ((X(), 0),), ((X(3, 4), 2), {}, "refuse")))
op(_F + "gumbel_softmax", "calls", random=True, dtypes=FLOATING, props=("torch",),
   calls=(((X(3, 4),),), ((X(3, 4),), {"hard": True})))
op(_F + "normalize", "calls", calls=(((X(3, 4),),), ((X(3, 4), 1.0, 0),), ((X(),), {"dim": 0})))
op(_F + "cosine_similarity", "calls", aliases=("cosine_similarity",),
   calls=(((X(3, 4), X(3, 4)),), ((X(3, 4), X(4), 0),), ((X(3, 4), X(3, 4), 1, 0.5),)))
op(_F + "pairwise_distance", "calls", aliases=("pairwise_distance",),
   calls=(((X(3, 4), X(3, 4)),), ((X(3, 4), X(4), 1.0),), ((X(3, 4), X(3, 4)),
                                                          {"keepdim": True})))
op(_F + "pdist", "calls", dtypes=FLOATING, calls=(((X(4, 3),),), ((X(4, 3), 1),)))
op(_F + "linear", "calls", calls=(((X(3, 4), X(2, 4)),), ((X(3, 4), X(2, 4), X(2)),),
                                  ((X(2, 3, 4), X(2, 4)),), ((X(3, 4), X(2, 3)), {}, "refuse")))
op(_F + "bilinear", "calls", aliases=("bilinear",),
   calls=(((X(3, 4), X(3, 2), X(5, 4, 2)),), ((X(3, 4), X(3, 2), X(5, 4, 2), X(5)),)))
op(_F + "embedding", "calls", dtypes=FLOATING, aliases=("embedding",),
   calls=(((IDX([0, 2, 1]), X(4, 3)),), ((IDX([5]), X(4, 3)), {}, "refuse")))
op(_F + "embedding_padding", "calls", dtypes=FLOATING, grad=False, path=_F + "embedding",
   calls=(((IDX([[0, 3]]), X(4, 3)), {"padding_idx": 0}),),
   note="padding_idx's row gets no gradient by definition: finite differences disagree")
op(_F + "embedding_bag", "calls", dtypes=FLOATING,
   calls=(((IDX([0, 2, 1, 3]), X(4, 3), IDX([0, 2])),),
          ((IDX([0, 2, 1, 3]), X(4, 3), IDX([0, 2])), {"mode": "sum"}),
          ((IDX([0, 2, 1, 3]), X(4, 3), IDX([0, 2])), {"mode": "max"})))
op(_F + "one_hot", "calls", grad=False, dtypes=("int64",),
   calls=(((IDX([0, 2, 1]),),), ((IDX([0, 2]), 4),), ((IDX([-1]),), {}, "refuse")))
op(_F + "pad", "calls", aliases=("constant_pad_nd",),
   calls=(((X(2, 3), (1, 2)),), ((X(2, 3), (1, 1, 0, 2), "constant", 0.5),),
          ((X(1, 2, 4), (2, 1), "reflect"),), ((X(1, 2, 4), (2, 1), "replicate"),),
          ((X(1, 2, 4), (2, 1), "circular"),), ((X(2, 3), (-1, 1)),),
          ((X(2, 3), (-2, -2)), {}, "refuse")))
for _nd in (1, 2, 3):
    # small: gradcheck perturbs each element in turn
    _in = (2, 3) + ((5,), (4, 5), (3, 3, 4))[_nd - 1]
    _w = (4, 3) + (2,) * _nd
    op(f"{_F}conv{_nd}d", "calls", aliases=(f"conv{_nd}d",),
       calls=(((X(*_in), X(*_w)),), ((X(*_in), X(*_w), X(4)), {"stride": 2, "padding": 1}),
              ((X(*_in), ("x", (6, 1) + (2,) * _nd)), {"groups": 3, "dilation": 2}),
              ((X(*_in), X(*_w)), {"padding": "same"}),
              ((X(*_in[1:]), X(*_w)),), ((X(*_in), X(4, 2, *_w[2:])), {}, "refuse")))
    _wt = (3, 4) + (2,) * _nd
    op(f"{_F}conv_transpose{_nd}d", "calls", aliases=(f"conv_transpose{_nd}d",),
       calls=(((X(*_in), X(*_wt)),), ((X(*_in), X(*_wt), X(4)),
                                       {"stride": 2, "padding": 1, "output_padding": 1}),
              ((X(*_in), ("x", (3, 2) + (2,) * _nd)), {"groups": 3})))
    for _kind in ("max", "avg"):
        op(f"{_F}{_kind}_pool{_nd}d", "calls", aliases=(f"{_kind}_pool{_nd}d",),
           calls=(((X(*_in), 2),), ((X(*_in), 3, 2, 1),), ((X(*_in), 2), {"ceil_mode": True}),
                  ((X(*_in), 7), {}, "refuse")))
    op(f"{_F}max_pool{_nd}d_with_indices", "calls",
       calls=(((X(*_in), 2),), ((X(*_in), 3, 2, 1),)))
    op(f"{_F}adaptive_avg_pool{_nd}d", "calls", aliases=(f"adaptive_avg_pool{_nd}d",),
       calls=(((X(*_in), 3),), ((X(*_in), 1),), ((X(*_in[1:]), 2),)))
    op(f"{_F}adaptive_max_pool{_nd}d", "calls", aliases=(f"adaptive_max_pool{_nd}d",),
       calls=(((X(*_in), 3),), ((X(*_in), 1),), ((X(*_in), 2), {"return_indices": True})))
    op(f"{_F}adaptive_max_pool{_nd}d_with_indices", "calls", calls=(((X(*_in), 3),),))
    op(f"{_F}lp_pool{_nd}d", "calls", domain="positive",
       calls=(((X(*_in), 2.0, 2),), ((X(*_in), 1.5, 3, 2),)))
    _pooled = np.arange(np.prod(_in), dtype=float).reshape(_in) % 7
    op(f"{_F}max_unpool{_nd}d", "calls",
       calls=(((DERIVED(f"nn.functional.max_pool{_nd}d_with_indices", _pooled, 0, 2),
                DERIVED(f"nn.functional.max_pool{_nd}d_with_indices", _pooled, 1, 2), 2),),))
op("max_pool1d_with_indices", "calls", calls=(((X(2, 3, 5), 2),),))
for _nd in (2, 3):
    _in = (2, 3) + (6,) * _nd
    op(f"{_F}fractional_max_pool{_nd}d", "calls", random=True, props=("torch",),
       dtypes=FLOATING, calls=(((X(*_in), 2), {"output_size": 3}),
                               ((X(*_in), 2), {"output_ratio": 0.5})),
       aliases=(f"{_F}fractional_max_pool{_nd}d_with_indices",))
op(_F + "batch_norm", "calls", aliases=("batch_norm",),
   calls=(((X(4, 3), CONST(3), ("c", (3,), "float32", "positive")),),
          ((X(4, 3, 5), None, None, X(3), X(3)), {"training": True}),
          ((X(4, 3), X(3), ("t", (3,), "float32", "positive")), {"eps": -1.0}, "refuse")))
op(_F + "instance_norm", "calls", aliases=("instance_norm",),
   calls=(((X(2, 3, 5),),), ((X(2, 3, 5),), {"weight": X(3), "bias": X(3)})))
op(_F + "layer_norm", "calls", aliases=("layer_norm",),
   calls=(((X(2, 3, 4), (4,)),), ((X(2, 3, 4), (3, 4), X(3, 4), X(3, 4)),),
          ((X(2, 3, 4), (3,)), {}, "refuse")))
op(_F + "group_norm", "calls", aliases=("group_norm",),
   calls=(((X(2, 4, 5), 2),), ((X(2, 4, 5), 4, X(4), X(4)),), ((X(2, 4, 5), 3), {}, "refuse")))
op(_F + "rms_norm", "calls", aliases=("rms_norm",),
   calls=(((X(2, 3, 4), (4,)),), ((X(2, 3, 4), (3, 4), X(3, 4)),), ((X(2, 4), (4,), None, 0.1),)))
op(_F + "local_response_norm", "calls", calls=(((X(2, 5, 4), 3),), ((X(2, 5, 4, 4), 2),)))
op(_F + "interpolate", "calls", aliases=(_F + "upsample",),
   calls=(((X(1, 2, 5),), {"scale_factor": 2}), ((X(1, 2, 5),), {"size": 7, "mode": "linear"}),
          ((X(1, 2, 4, 5),), {"scale_factor": 1.5, "mode": "bilinear", "align_corners": True}),
          ((X(1, 2, 4, 5),), {"size": (3, 7), "mode": "bicubic"}),
          ((X(1, 2, 3, 4, 5),), {"scale_factor": 1.2, "mode": "trilinear"}),
          ((X(1, 2, 4, 5),), {"size": (3, 2), "mode": "area"}),
          ((X(1, 2, 4, 5),), {"scale_factor": 1.3, "mode": "nearest-exact"})))
op(_F + "upsample_nearest", "calls", calls=(((X(1, 2, 3, 4),), {"scale_factor": 2}),))
op(_F + "upsample_bilinear", "calls", calls=(((X(1, 2, 3, 4),), {"size": (5, 6)}),))
op(_F + "grid_sample", "calls",
   calls=tuple(((X(1, 2, 4, 5), ("t", (1, 3, 2, 2), "float32", "small")),
                {"mode": m, "padding_mode": p, "align_corners": a})
               for m in ("bilinear", "nearest", "bicubic") for p in ("zeros", "border",
                                                                    "reflection")
               for a in (False, True)))
op(_F + "affine_grid", "calls", calls=(((X(2, 2, 3), (2, 3, 4, 5)),),
                                       ((X(2, 2, 3), (2, 3, 4, 5)), {"align_corners": True})))
op(_F + "pixel_shuffle", "calls", aliases=("pixel_shuffle",), calls=(((X(1, 8, 2, 3), 2),),))
op(_F + "pixel_unshuffle", "calls", aliases=("pixel_unshuffle",), calls=(((X(1, 2, 4, 6), 2),),))
op(_F + "channel_shuffle", "calls", aliases=("channel_shuffle",), calls=(((X(1, 6, 2, 2), 3),),))
op(_F + "unfold", "calls", calls=(((X(1, 2, 4, 5), 2),), ((X(1, 2, 4, 5), (2, 3), 1, 1, 2),)))
op(_F + "fold", "calls", calls=(((X(1, 8, 12), (4, 5), 2),),))
op(_F + "scaled_dot_product_attention", "calls",
   calls=(((X(2, 3, 4), X(2, 5, 4), X(2, 5, 6)),), ((X(2, 3, 4), X(2, 3, 4), X(2, 3, 4)),
                                                     {"is_causal": True}),
          ((X(2, 3, 4), X(2, 5, 4), X(2, 5, 6)), {"attn_mask": BOOLS(3, 5)}),
          ((X(2, 3, 4), X(2, 5, 4), X(2, 5, 6)), {"attn_mask": X(3, 5), "scale": 0.3})))
op(_F + "multi_head_attention_forward", "calls", dtypes=FLOATING,
   calls=(((X(3, 2, 4), X(3, 2, 4), X(3, 2, 4), 4, 2, X(12, 4), X(12), None, None, False, 0.0,
            X(4, 4), X(4)),),))
op("conv_tbc", "calls", calls=(((X(5, 2, 3), X(2, 3, 4), X(4)),), ((X(5, 2, 3), X(2, 3, 4), X(4),
                                                                   1),)))
op("convolution", "calls", calls=(((X(2, 3, 5, 5), X(4, 3, 2, 2), None, (1, 1), (0, 0), (1, 1),
                                    False, (0, 0), 1),),))
# losses: (input, target) pairs of the same shape, reductions
_LOSSES = {
    "mse_loss": (X(3, 4), X(3, 4)), "l1_loss": (X(3, 4), X(3, 4)),
    "smooth_l1_loss": (X(3, 4), X(3, 4)), "huber_loss": (X(3, 4), X(3, 4)),
    "soft_margin_loss": (X(3, 4), X(3, 4)),
    "binary_cross_entropy": (("t", (3, 4), "float32", "prob"), ("t", (3, 4), "float32",
                                                                 "prob")),
    "binary_cross_entropy_with_logits": (X(3, 4), ("t", (3, 4), "float32", "prob")),
    "kl_div": (X(3, 4), ("t", (3, 4), "float32", "prob")),
    "poisson_nll_loss": (X(3, 4), ("t", (3, 4), "float32", "positive")),
    "gaussian_nll_loss": (X(3, 4), X(3, 4), ("t", (3, 4), "float32", "positive")),
    "hinge_embedding_loss": (X(3, 4), ("v", [[1, -1, 1, 1]] * 3)),
    "margin_ranking_loss": (X(3), X(3), ("v", [1, -1, 1])),
    "cosine_embedding_loss": (X(3, 4), X(3, 4), ("v", [1, -1, 1])),
    "multilabel_soft_margin_loss": (X(3, 4), ("v", [[1, 0, 1, 0]] * 3)),
    "triplet_margin_loss": (X(3, 4), X(3, 4), X(3, 4)),
    "triplet_margin_with_distance_loss": (X(3, 4), X(3, 4), X(3, 4)),
    "cross_entropy": (X(3, 4), IDX(0, 3, 1)), "nll_loss": (X(3, 4), IDX(0, 3, 1)),
    "multi_margin_loss": (X(3, 4), IDX(0, 3, 1)),
    "multilabel_margin_loss": (X(3, 4), IDX([[3, 0, -1, 1], [1, -1, 0, 0], [0, 1, 2, 3]])),
}
for _name, _args in _LOSSES.items():
    _top = _name in ("binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss",
                     "hinge_embedding_loss", "margin_ranking_loss", "cosine_embedding_loss",
                     "triplet_margin_loss", "ctc_loss")
    op(_F + _name, "calls", aliases=(_name,) if _top else (),
       calls=((_args,), (_args, {"reduction": "sum"}), (_args, {"reduction": "none"}),
              (_args, {"reduction": "average"}, "refuse")))
op(_F + "cross_entropy_soft", "calls", path=_F + "cross_entropy",
   calls=(((X(3, 4), ("t", (3, 4), "float32", "prob")),), ((X(3, 4), IDX(0, 3, 1)),
                                                           {"label_smoothing": 0.1}),
          ((X(2, 4, 5), IDX([[0, 1, 2, 3, 0], [1, 1, 1, 1, 1]])),),
          ((X(3, 4), IDX(0, -100, 1)), {"ignore_index": -100})),
   note="cross_entropy with probabilities, smoothing, a K-dim target, an ignored class")
op(_F + "ctc_loss", "calls", dtypes=FLOATING, aliases=("ctc_loss",),
   calls=(((("logsm", (6, 2, 4)), IDX([[1, 2], [3, 1]]), IDX(6, 5), IDX(2, 1)),),
          ((("logsm", (6, 2, 4)), IDX([[1, 2], [3, 1]]), IDX(6, 5), IDX(2, 2)),
           {"reduction": "sum"})), note="log-probabilities: log_softmax of random logits")
op(_F + "linear_cross_entropy", "calls", torch_name=None,
   calls=(((X(3, 4), X(5, 4), IDX(0, 4, 2)),),),
   note="torcia's fused linear + cross_entropy: F.cross_entropy(F.linear(x, w), t)")
for _name in ("dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d",
              "dropout3d"):
    _shape = {"dropout1d": (2, 3, 4), "dropout2d": (2, 3, 4, 4), "dropout3d": (2, 3, 2, 2, 2)}
    op(_F + _name, "calls", random=True, dtypes=FLOATING, props=("torch",),
       aliases=(_name, f"{_name}_") if _name in ("dropout", "alpha_dropout",
                                                  "feature_alpha_dropout") else (),
       calls=(((X(*_shape.get(_name, (3, 4))),), {"p": 0.5, "training": True}),
              ((X(*_shape.get(_name, (3, 4))),), {"p": 0.5, "training": False})))
op("feature_dropout", "calls", random=True, dtypes=FLOATING, props=("torch",),
   aliases=("feature_dropout_",), calls=(((X(2, 3, 4), 0.5, True),),))
op(_F + "conv_tbc", "calls", calls=(((X(5, 2, 3), X(2, 3, 4), X(4)),),))

# ----- recurrent layers, one step and whole sequences --------------------------------------
# hidden size 2, input size 3: gates of 8 (LSTM), 6 (GRU), 2 (plain RNN) rows
_RNN_W = {"lstm": 8, "gru": 6, "rnn_tanh": 2, "rnn_relu": 2}
for _name, _gates in _RNN_W.items():
    _hx = (X(2, 2), X(2, 2)) if _name == "lstm" else X(2, 2)
    op(f"{_name}_cell", "calls", dtypes=FLOATING,
       calls=(((X(2, 3), _hx, X(_gates, 3), X(_gates, 2)),),
              ((X(2, 3), _hx, X(_gates, 3), X(_gates, 2), X(_gates), X(_gates)),)))
    _h0 = [X(1, 2, 2), X(1, 2, 2)] if _name == "lstm" else X(1, 2, 2)
    op(_name, "calls", dtypes=FLOATING,
       calls=(((X(3, 2, 3), _h0, [X(_gates, 3), X(_gates, 2), X(_gates), X(_gates)], True, 1,
                0.0, False, False, False),),
              ((X(2, 3, 3), _h0, [X(_gates, 3), X(_gates, 2)], False, 1, 0.0, False, False,
                True),)))

# ----- tensor queries and conversions: Python values and casts --------------------------
_QUERIES = {
    # name: calls on the tensor (a method, or a function of torcia)
    "numel": ((X(3, 4),), (X(),)), "is_complex": ((X(3),),), "is_floating_point": ((X(3),),),
    "is_signed": ((X(3),),), "is_nonzero": ((X(),), ((X(3),), {}, "refuse")),
    "is_same_size": ((X(3, 4), X(3, 4)), (X(3, 4), X(4))), "is_conj": ((X(3),),),
    "is_neg": ((X(3),),), "is_inference": ((X(3),),), "equal": ((X(3, 4), X(3, 4)),),
    "allclose": ((X(3, 4), X(3, 4)),), "is_tensor": ((X(3),), (3,)),
    "result_type": ((X(3), 2.5), (X(3), OF("float64"))),
    "typename": ((X(3),),),
}
for _name, _calls in _QUERIES.items():
    op(_name, "calls", grad=False, props=("torch",), aliases=(f"Tensor.{_name}",),
       calls=tuple(c if len(c) == 3 else (c,) for c in _calls))
_METHOD_QUERIES = {
    "dim": ((X(3, 4),),), "ndimension": ((X(3, 4),),), "nelement": ((X(3, 4),),),
    "size": ((X(3, 4),), (X(3, 4), -1)), "stride": ((X(3, 4),), (NC(3, 4), 1)),
    "storage_offset": ((X(3, 4),),), "is_contiguous": ((X(3, 4),), (NC(3, 4),)),
    "element_size": ((X(3),),), "get_device": ((X(3),),), "item": ((X(),),
                                                                   ((X(3),), {}, "refuse")),
    "tolist": ((X(3, 2),), (X(),)), "dense_dim": ((X(3),),), "sparse_dim": ((X(3),),),
    "is_pinned": ((X(3),),), "is_shared": ((X(3),),), "is_distributed": ((X(3),),),
    "dim_order": ((X(2, 3, 4),),), "is_set_to": ((X(3), X(3)),),
}
for _name, _calls in _METHOD_QUERIES.items():
    op(f"Tensor.{_name}", "calls", grad=False, props=("torch",),
       calls=tuple(c if len(c) == 3 else (c,) for c in _calls))
_CASTS = ("bfloat16", "bool", "byte", "cdouble", "cfloat", "char", "double", "float", "half",
          "int", "long", "short")
for _name in _CASTS:
    # differentiable, but finite differences through a cast to a lower precision are not
    op(f"Tensor.{_name}", "calls", grad=_name in ("cdouble", "double"),
       calls=(((X(3, 4),),),))
op("Tensor.to", "calls", calls=(((X(3, 4), DT("float64")),), ((X(3, 4), "cpu"),),
                                ((X(3, 4), "cpu", DT("int32")),), ((X(3, 4), OF("float16", 2)),),
                                ((X(3, 4),), {"dtype": DT("complex64"), "copy": True})))
op("Tensor.type", "calls", grad=False, props=("torch", "native", "no_write"),
   calls=(((X(3, 4),),), ((X(3, 4), DT("float64")),)))
op("Tensor.type_as", "calls", grad=False, calls=(((X(3, 4), OF("int32", 2)),),))
op("to_dtype", "calls", torch_name="Tensor.to", calls=(((X(3, 4), DT("float64")),),),
   note="torcia's function form of Tensor.to(dtype)")
op("Tensor.cpu", "calls", props=("torch", "grad", "gradgrad", "forward_ad", "vmap", "native",
                                 "no_write"), calls=(((X(3, 4),),),),
   note="a meta tensor has no values to copy to the host: no meta property")
op("Tensor.numpy", "calls", grad=False, props=("torch",), calls=(((X(3, 4),),),))
op("Tensor.new_tensor", "calls", grad=False, calls=(((X(2), [1, 2, 3]),),))
for _name in ("new_zeros", "new_ones", "new_empty"):
    op(f"Tensor.{_name}", "calls", grad=False, random=_name == "new_empty",
       props=("torch",), calls=(((X(2), (2, 3)),), ((X(2), 4), {"dtype": DT("float64")})))
op("Tensor.new_full", "calls", grad=False, calls=(((X(2), (2, 3), 1.5),),))
op("Tensor.new_empty_strided", "calls", grad=False, random=True, props=("torch",),
   calls=(((X(2), (2, 3), (3, 1)),),))
op("Tensor.new", "calls", grad=False, random=True, props=("torch",), calls=(((X(2), 2, 3),),))
op("Tensor.sum_to_size", "calls", calls=(((X(3, 4), 1, 4),), ((X(3, 4), (3, 1)),)))
op("Tensor.fill_", "calls", grad=False, aliases=("fill_", "fill"),
   calls=(((X(3, 4), 2.5),), ((X(3, 4), -1),), ((X(3, 4), OF("float64")),)))
op("Tensor.zero_", "calls", grad=False, aliases=("zero_",), calls=(((X(3, 4),),),))
op("Tensor.copy_", "calls", grad=False,
   calls=(((X(3, 4), X(3, 4)),), ((X(3, 4), X(4)), {}, "broadcast"),
          ((X(3, 4), OF("float64", 3, 4)),), ((X(3, 4), X(3, 5)), {}, "refuse")))
op("Tensor.fill_diagonal_", "calls", grad=False, aliases=("Tensor.fill_diagonal",),
   calls=(((X(3, 4), 2.0),), ((X(5, 2), 1.0, True),)))
op("Tensor.tril_", "calls", grad=False, calls=(((X(3, 4),),), ((X(3, 4), 1),)))
op("Tensor.triu_", "calls", grad=False, calls=(((X(3, 4),),), ((X(3, 4), -1),)))
op("Tensor.detach_", "calls", grad=False, aliases=("detach_",), calls=(((X(3, 4),),),))
op("Tensor.requires_grad_", "calls", grad=False, dtypes=FLOAT_COMPLEX, props=("torch",),
   calls=(((X(3),),),))
for _name in ("resize_", "resize_as_"):
    op(f"Tensor.{_name}", "calls", grad=False, props=("torch",), random=True,
       aliases=("resize_as_",) if _name == "resize_as_" else (),
       calls=(((X(3, 4), (2, 6) if _name == "resize_" else X(2, 6)),),))
op("Tensor.resize", "calls", grad=False, props=("torch",), random=True,
   calls=(((X(3, 4), 2, 6),),), aliases=("Tensor.resize_as",))
op("Tensor.apply_", "calls", grad=False, dtypes=("float64",), props=("torch",), torch_name=None,
   calls=(((X(3), float),),), note="applies a Python function: compared by hand elsewhere")
op("repeat_interleave", "calls", aliases=("Tensor.repeat_interleave",),
   calls=(((X(3, 4), 2),), ((X(3, 4), 2, 0),), ((X(3, 4), IDX(1, 0, 2), 0),),
          ((IDX(2, 0, 1),),)))
op("quantile", "calls", dtypes=FLOATING, aliases=("Tensor.quantile",),
   calls=(((X(3, 5), 0.3),), ((X(3, 5), 0.5, 1),), ((X(3, 5), ("t", (3,), "float32", "prob"),
                                                     0, True),),
          ((X(3, 5), 0.5), {"interpolation": "lower"}),
          ((X(3, 5), 0.5), {"interpolation": "midpoint"}), ((X(3, 5), 1.5), {}, "refuse")))
op("nanquantile", "calls", dtypes=FLOATING, aliases=("Tensor.nanquantile",),
   calls=(((X(3, 5), 0.3),), ((X(3, 5), 0.5, 1),)))
op("broadcast_shapes", "calls", grad=False, props=("torch",), dtypes=("float32",),
   calls=((((3, 1), (4,)),), (((2, 1, 4), (3, 1), ()),), (((3,), (4,)), {}, "refuse")))
op("promote_types", "calls", grad=False, props=("torch",), dtypes=ALL,
   calls=tuple(((DT(), DT(o)),) for o in ("bool", "uint8", "int8", "float16", "bfloat16",
                                          "float32", "complex64")))
op("can_cast", "calls", grad=False, props=("torch",), dtypes=ALL,
   calls=tuple(((DT(), DT(o)),) for o in ("bool", "int8", "float32", "complex64")))
op("cond", "calls", grad=False, props=("torch",), torch_name=None, dtypes=("float32",),
   calls=(((True, abs, abs, (X(3),)),),), note="torch.cond, control flow: run eagerly")
op("embedding_renorm_", "calls", grad=False, dtypes=FLOATING,
   calls=(((X(5, 3), IDX(0, 2), 1.0, 2.0),),))
op("norm_except_dim", "calls", dtypes=FLOATING, calls=(((X(3, 4), 2, 0),), ((X(3, 4), 2, 1),)))
op("batch_norm_stats", "calls", dtypes=FLOATING, calls=(((X(4, 3, 5), 1e-5),),))
op("batch_norm_elemt", "calls", dtypes=FLOATING,
   calls=(((X(4, 3, 5), X(3), X(3), X(3), ("t", (3,), "float32", "positive"), 1e-5),),))
op("batch_norm_gather_stats_with_counts", "calls", dtypes=FLOATING,
   calls=(((X(4, 3), X(2, 3), ("t", (2, 3), "float32", "positive"), X(3),
            ("t", (3,), "float32", "positive"), 0.1, 1e-5, ("v", [20.0, 20.0])),),))
op("batch_norm_gather_stats", "calls", dtypes=FLOATING,
   calls=(((X(4, 3), X(2, 3), ("t", (2, 3), "float32", "positive"), X(3),
            ("t", (3,), "float32", "positive"), 0.1, 1e-5, 20),),))
op("batch_norm_update_stats", "calls", dtypes=FLOATING, calls=(((X(4, 3), X(3), X(3), 0.1),),))
op("batch_norm_backward_reduce", "calls", dtypes=FLOATING,
   calls=(((X(4, 3), X(4, 3), X(3), ("t", (3,), "float32", "positive"), X(3), True, True,
            True),),))
op("batch_norm_backward_elemt", "calls", dtypes=FLOATING,
   calls=(((X(4, 3), X(4, 3), X(3), ("t", (3,), "float32", "positive"), X(3), X(3), X(3),
            ("v", [20, 20], "int32")),),))


# ---------------------------------------------------------------------------------------
# public callables that are not ops
# ---------------------------------------------------------------------------------------

not_op("process-wide settings and their queries (tested with the feature they set)",
       "are_deterministic_algorithms_enabled", "autocast_decrement_nesting",
       "autocast_increment_nesting", "clear_autocast_cache", "get_autocast_cpu_dtype",
       "get_autocast_dtype", "get_autocast_gpu_dtype", "get_default_device",
       "get_default_dtype", "get_deterministic_debug_mode", "get_float32_matmul_precision",
       "get_num_interop_threads", "get_num_threads", "init_num_threads",
       "is_anomaly_check_nan_enabled", "is_anomaly_enabled", "is_autocast_cache_enabled",
       "is_autocast_cpu_enabled", "is_autocast_enabled",
       "is_deterministic_algorithms_warn_only_enabled", "is_grad_enabled",
       "is_inference_mode_enabled", "is_warn_always_enabled", "set_anomaly_enabled",
       "set_autocast_cache_enabled", "set_autocast_cpu_dtype", "set_autocast_cpu_enabled",
       "set_autocast_dtype", "set_autocast_enabled", "set_autocast_gpu_dtype",
       "set_default_device", "set_default_dtype", "set_default_tensor_type",
       "set_deterministic_debug_mode", "set_float32_matmul_precision", "set_flush_denormal",
       "set_num_interop_threads", "set_num_threads", "set_printoptions", "set_warn_always",
       "use_deterministic_algorithms")
not_op("random-number generator state (packages/core/tests/test_random_dispatch.py)",
       "get_rng_state", "set_rng_state", "initial_seed", "manual_seed", "seed",
       "thread_safe_generator")
not_op("devices and memory: where a tensor lives, not what it computes",
       "get_device", "get_device_module", "Tensor.cuda", "Tensor.pin_memory",
       "Tensor.share_memory_", "Tensor.data_ptr", "Tensor.const_data_ptr",
       "Tensor.untyped_storage_ptr", "Tensor.storage", "Tensor.untyped_storage",
       "Tensor.storage_type", "Tensor.set_", "is_storage")
not_op("interop and files (packages/core/tests/test_interop.py, test_serialization*.py)",
       "from_numpy", "from_dlpack", "frombuffer", "from_file", "load", "save")
not_op("autograd machinery (packages/autograd/tests)", "Tensor.backward",
       "Tensor.register_hook", "Tensor.register_post_accumulate_grad_hook",
       "Tensor.retain_grad")
not_op("sparse layouts (packages/core/tests/test_sparse.py, test_sparse_layouts.py): the "
       "database samples strided tensors", "sparse_coo_tensor", "Tensor.to_sparse",
       "Tensor.to_sparse_coo", "Tensor.to_dense", "Tensor.sparse_mask", "smm", "spmm", "dsmm",
       "hsmm", "hspmm", "saddmm", "sspaddmm", "sparse_compressed_tensor", "sparse_csr_tensor",
       "sparse_csc_tensor", "Tensor.to_sparse_csr", "Tensor.to_sparse_csc", "Tensor.coalesce",
       "Tensor.is_coalesced", "Tensor.indices", "Tensor.values", "Tensor.crow_indices",
       "Tensor.col_indices", "Tensor.ccol_indices", "Tensor.row_indices")
not_op("Python-level helpers: subclassing, module state, element-wise Python callbacks "
       "(issue #40's __torch_function__ tests)", "Tensor.as_subclass", "Tensor.module_load",
       "Tensor.map_", "Tensor.map2_")
not_op("plugin and autocast plumbing of torcia, not PyTorch ops", "hookimpl",
       "nn.functional.autocast_as", "nn.functional.boolean_dispatch",
       "nn.functional.assert_int_or_pair", "nn.functional.check_viable")
