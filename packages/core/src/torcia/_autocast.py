"""Autocast's policy as the ops use it: PyTorch's lists of what autocast casts, per device
type (:func:`op_policy`), and :func:`autocast_as`, which makes a function built from other
ops one op for the dispatch modes.

The op families (``torcia._oplib``) declare their composite ops' policy with
:func:`autocast_as` when they load, so this module sits below them, next to the dispatcher
it works with; :mod:`torcia.amp`, the service above (``autocast``, ``GradScaler``), casts by
these lists and publishes them.
"""

from __future__ import annotations

import functools

from torcia import _opdef
from torcia._ops import DECLARED as _DECLARED
from torcia._tensor import AUTOCAST, Tensor, active_modes

# The lists follow PyTorch 2.13's autocast_mode.cpp, as observed op by op on the CPU and as
# its CUDA test lists name them (packages/nn/tests/test_autocast_lists.py compares both).
# Names are torcia's op names (``conv`` for conv1d/2d/3d); composite functions take part
# through :func:`autocast_as` under PyTorch's name for them (``mse_loss``, ``addmv``...).

_LOSSES = frozenset({
    "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "soft_margin_loss",
    "poisson_nll_loss", "cosine_embedding_loss", "hinge_embedding_loss",
    "margin_ranking_loss", "triplet_margin_loss", "multi_margin_loss",
    "multilabel_margin_loss",
})

#: Ops run in the low-precision dtype, per device type (and the declared ops whose policy
#: says so: matmul, mm, einsum..., see :mod:`torcia._ops.linalg`; linear, conv and
#: conv_transpose, :mod:`torcia._ops.nn_conv`).
LOWER_PRECISION = {
    "cpu": frozenset({
        "baddbmm", "addbmm", "prelu", "scaled_dot_product_attention", "conv_tbc",
    }),
    "cuda": frozenset({
        "baddbmm", "addbmm", "addmv", "addr", "mv", "prelu", "scaled_dot_product_attention",
        "chain_matmul", "linalg_multi_dot", "linalg_vecdot", "conv_tbc",
        "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
    }),
}
#: Ops run in float32, per device type (and the declared ops whose policy says so: exp,
#: log, pow... on CUDA, see :mod:`torcia._ops.unary` and ``binary``; prod, sum, cumsum...,
#: :mod:`torcia._ops.reduce`; softmax, layer_norm..., :mod:`torcia._ops.nn_norm`; the
#: solvers, factorizations and norms, :mod:`torcia._ops.linalg_solves` and its siblings).
FLOAT32 = {
    "cpu": _LOSSES | {
        "cdist", "avg_pool3d", "max_pool3d", "adaptive_avg_pool3d",
        "adaptive_max_pool3d", "reflection_pad", "replication_pad", "grid_sample",
    },
    "cuda": _LOSSES | {
        "group_norm", "dist", "cdist", "pdist", "cosine_similarity", "renorm",
    },
}
#: Ops that raise inside autocast, per device type (PyTorch's reason: unsafe in float16).
BANNED = {
    "cuda": {
        "binary_cross_entropy": (
            "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
            "autocast.\nMany models use a sigmoid layer right before the binary cross entropy "
            "layer.\nIn this case, combine the two layers using "
            "torch.nn.functional.binary_cross_entropy_with_logits\nor "
            "torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and "
            "BCEWithLogits are\nsafe to autocast."),
    },
}
#: Ops run in the widest floating dtype among their inputs, per device type (and the
#: declared ops whose policy says so: cat, stack, index_put, scatter_add, dot, tensordot).
PROMOTE = {
    "cuda": frozenset({
        "bilinear", "grid_sample", "cross", "vdot",
    }),
}


def _add_declared():
    """Put the ops declared in :mod:`torcia._ops` on the lists their policies name."""
    tables = {"lower": LOWER_PRECISION, "float32": FLOAT32, "promote": PROMOTE}
    for name, op in _DECLARED.items():
        for device_type, policy in op.autocast.items():
            table = tables[policy]
            table[device_type] = table.get(device_type, frozenset()) | {name}


_add_declared()


def op_policy(device_type, op):
    """What :class:`autocast` does with the op named ``op`` on ``device_type``.

    Returns
    -------
    str or None
        "lower" (run in the region's low-precision dtype), "float32", "promote" (run in
        the widest floating dtype of the inputs), "banned" (an error inside autocast), or
        None (run in the inputs' dtypes).

    Examples
    --------
    >>> import torcia
    >>> torcia.amp.op_policy("cpu", "mm"), torcia.amp.op_policy("cuda", "softmax")
    ('lower', 'float32')
    """
    if op in BANNED.get(device_type, ()):
        return "banned"
    if op in LOWER_PRECISION.get(device_type, ()):
        return "lower"
    if op in FLOAT32.get(device_type, ()):
        return "float32"
    if op in PROMOTE.get(device_type, ()):
        return "promote"
    return None


def autocast_as(name):
    """Make a function built from other ops one op ``name`` for the dispatch modes: each
    entered mode sees its tensor arguments as the inputs of ``name`` (autocast casts them
    as its lists say for ``name``), then its body runs with autocast off, so the ops inside
    keep that dtype (as PyTorch's autocast kernels run the op below autocast).

    Parameters
    ----------
    name : str
        The op's name in the autocast lists (``"mse_loss"``, ``"addmv"``...).

    Examples
    --------
    >>> import torcia
    >>> @torcia.amp.autocast_as("mse_loss")
    ... def my_mse(a, b):
    ...     return ((a - b) ** 2).mean()
    >>> x = torcia.ones(2, dtype=torcia.bfloat16)
    >>> with torcia.autocast("cpu"):
    ...     my_mse(x, x).dtype
    torcia.float32
    """

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            # autocast on implies its mode is entered in this thread (the outermost region
            # enters it), so the other modes alone never pay for the wrapper
            if not AUTOCAST.enabled:
                return fn(*args, **kwargs)
            flat, spec = _flatten(args)
            for mode in active_modes():
                flat = mode.on_inputs(name, flat)
                if kwargs:
                    kwargs = dict(zip(kwargs, mode.on_inputs(name, tuple(kwargs.values()))))
            args = _unflatten(flat, spec)
            # PyTorch excludes its Autocast key within an op it handled
            AUTOCAST.enabled = False
            try:
                return fn(*args, **kwargs)
            finally:
                AUTOCAST.enabled = True

        return wrapper

    return decorate


def autocast_where_listed(name):
    """Autocast for a composite op that PyTorch lists on some devices only: where the
    region's device lists ``name``, the op is one op for autocast (:func:`autocast_as`);
    elsewhere its inner ops meet autocast one by one, as PyTorch's composite kernels."""
    def decorate(fn):
        listed = autocast_as(name)(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            region = AUTOCAST.region
            if AUTOCAST.enabled and region is not None and op_policy(region.device_type, name):
                return listed(*args, **kwargs)
            return fn(*args, **kwargs)

        return wrapper

    return decorate


_opdef.AUTOCAST_AS, _opdef.AUTOCAST_WHERE_LISTED = autocast_as, autocast_where_listed


def _flatten(args):
    """``args`` with lists and tuples of tensors (``multi_dot([a, b])``) spread out, so that
    the casts see every tensor together, and how to put them back."""
    flat, spec = [], []
    for a in args:
        if isinstance(a, (list, tuple)) and a and all(isinstance(x, Tensor) for x in a):
            spec.append((type(a), len(a)))
            flat.extend(a)
        else:
            spec.append(None)
            flat.append(a)
    return tuple(flat), spec


def _unflatten(flat, spec):
    out, i = [], 0
    for s in spec:
        if s is None:
            out.append(flat[i])
            i += 1
        else:
            out.append(s[0](flat[i:i + s[1]]))
            i += s[1]
    return tuple(out)
