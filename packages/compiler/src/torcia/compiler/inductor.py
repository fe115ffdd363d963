"""The "inductor" backend: graph passes and generated C++ kernels.

Passes, in order: common subexpressions (a pure op on the same arguments as an earlier one
reuses its result), constant folding (a pure op whose arguments are all constants runs at
compile time), dead-code elimination (results nothing reads; random and in-place ops
stay), and fusion: chains of elementwise ops over arrays of one float dtype (operands
broadcast into the chain's shape), ending where a sum, mean, amax or amin over the trailing
or leading dims reads them, become one generated C++ loop (OpenMP threads, ``omp simd``
vectorisation) compiled by the system compiler (``$CXX``, else ``g++``) and cached on
disk under the hash of its code, the flags and the compiler's version
(``$TORCIA_CACHE_DIR``, else ``~/.cache/torcia/compile``).
Without a compiler, fusion is skipped and the graph replays unfused.

A graph captured on another device than the CPU ("cuda") gets the same passes, and its
elementwise chains become ``ElementwiseKernel`` objects of that device's array module (CuPy's:
the same expressions in CUDA C++, operands broadcast by CuPy), compiled by CuPy at their
first call and kept per process by their source (:func:`device_kernel`); reductions,
pooling and cross-entropy stay the device's own kernels there.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from torcia.compiler.graph import Graph, Node
from torcia.library import op_records, op_table


class FusionOps(NamedTuple):
    """The ops fusion writes, by op: C++ expressions over ``a`` (and ``b``)."""

    unary: dict
    binary: dict
    #: comparisons, by their C++ operator (their bool is a mask of a backward)
    compare: dict
    #: the reductions, each as (its accumulator's initial value, how it takes an element)
    reduce: dict
    #: first derivatives of activations, ``activation_backward(g, y, activation=...)``,
    #: by activation: C++ over the gradient ``a`` and the saved tensor ``b``
    activation_backward: dict


@functools.cache
def fusion_ops() -> FusionOps:
    """The tables of :class:`FusionOps`, built at the first fusion with each op name resolved
    to its record (``library.op_table``): a name that is no op is an error naming its table,
    rather than an op that silently never fuses.

    Examples
    --------
    >>> from torcia.compiler import inductor
    >>> inductor.fusion_ops().binary["mul"]
    '({a} * {b})'
    """
    written = _written_fusion_ops()
    return FusionOps(*(op_table(f"torcia.compiler.inductor.fusion_ops().{field}", table)
                       for field, table in zip(written._fields, written)))


def _written_fusion_ops() -> FusionOps:
    unary = {
        "neg": "(-{a})", "exp": "std::exp({a})", "log": "std::log({a})",
        "sqrt": "std::sqrt({a})", "rsqrt": "(T(1) / std::sqrt({a}))",
        "tanh": "std::tanh({a})", "sin": "std::sin({a})", "cos": "std::cos({a})",
        "abs": "std::abs({a})", "reciprocal": "(T(1) / {a})",
        # relu: a NaN stays NaN, as in eager (``a > 0 ? a : 0`` would make it 0)
        "sigmoid": "(T(1) / (T(1) + std::exp(-{a})))", "relu": "(!({a} <= T(0)) ? {a} : T(0))",
        "square": "({a} * {a})", "exp2": "std::exp2({a})", "log1p": "std::log1p({a})",
        "expm1": "std::expm1({a})", "erf": "std::erf({a})",
        "sign": "T(({a} > T(0)) - ({a} < T(0)))",
    }
    binary = {
        "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})",
        "maximum": "std::max<T>({a}, {b})", "minimum": "std::min<T>({a}, {b})",
        "pow": "std::pow({a}, {b})",
    }
    compare = {"gt": ">", "lt": "<", "ge": ">=", "le": "<=", "eq": "==", "ne": "!="}
    reduce = {
        "sum": ("0", "acc + {x}"), "mean": ("0", "acc + {x}"),
        "amax": ("-INFINITY", "(({x}) > acc || ({x}) != ({x})) ? ({x}) : acc"),
        "amin": ("INFINITY", "(({x}) < acc || ({x}) != ({x})) ? ({x}) : acc"),
    }
    # relu's output: zero where it is <= 0, NaN passing the gradient, as PyTorch's
    # threshold_backward; sigmoid's and tanh's output, in the eager kernels' order
    activation_backward = {"relu": "({b} <= T(0) ? T(0) : {a})",
                           "sigmoid": "({a} * ({b} * (T(1) - {b})))",
                           "tanh": "({a} * (T(1) - {b} * {b}))"}
    return FusionOps(unary, binary, compare, reduce, activation_backward)


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17", "-fno-math-errno"]
# glibc declares the SIMD variants of exp, tanh, log... (libmvec, within 4 ulp) only under
# __FAST_MATH__; defining it alone, without -ffast-math's other rewrites, lets the loops
# call them (a scalar tanhf is 30x slower than NumPy's). Where libmvec is missing the plain
# source is built instead.
VECTOR_MATH = ("#define __FAST_MATH__ 1  // only for glibc's SIMD math declarations\n",
               ["-lmvec"])


def inductor(graph: Graph, example_inputs, **options) -> Graph:
    """The "inductor" backend: CSE, constant folding, DCE, then elementwise fusion.

    Examples
    --------
    >>> import torcia
    >>> from torcia.compiler import inductor
    >>> graphs = []
    >>> def keep(graph, example_inputs):
    ...     graphs.append(graph)
    ...     return graph
    >>> f = torcia.compile(lambda x: (x + 1) * (x + 1) + 0 * x, backend=keep)
    >>> f(torcia.tensor([1.0, 2.0]))
    tensor([4., 9.])
    >>> graph = graphs[0]
    >>> optimized = inductor.inductor(graph, [torcia.tensor([1.0, 2.0])])
    >>> len(optimized.nodes) < 5
    True
    """
    cse(graph)
    fold_constants(graph)
    eliminate_dead_code(graph)
    xp = device_module(graph)
    if xp is not None:
        if options.get("fusion", True) and hasattr(xp, "ElementwiseKernel"):
            fuse(graph, reductions=False, xp=xp)
        return graph
    if options.get("fusion", True) and compiler() is not None:
        fuse_relu_pooling(graph)
        fuse_cross_entropy(graph)
        fuse(graph)
        specialize_pooling(graph)
        specialize_middle_sums(graph)
    return graph


def draws(node: Node) -> bool:
    """Whether ``node`` runs an op whose record says it draws from a random generator
    (``OpDef.random``, a plugin's op included): each replay must draw again, so it is
    never folded, merged or reused."""
    record = op_records().get(node.op) if node.kind == "call" else None
    return record is not None and record.random


def _pure(node: Node) -> bool:
    return node.kind in ("call", "cast") and not draws(node)


def _rename(graph: Graph, subst: dict) -> None:
    def fix(ref):
        if ref[0] == "v" and ref[1] in subst:
            new = subst[ref[1]]
            return new if isinstance(new, tuple) else ("v", new)
        if ref[0] == "l":
            return ("l", [fix(r) for r in ref[1]])
        return ref

    for node in graph.nodes:
        node.args = [fix(r) for r in node.args]
        node.params = {k: fix(r) for k, r in node.params.items()}


def _const_key(ref):
    if ref[0] == "v":
        return ref
    if ref[0] == "l":
        return ("l", tuple(_const_key(r) for r in ref[1]))
    c = ref[1]
    try:
        hash(c)
        return ("c", type(c), c)
    except TypeError:
        return ("c", id(c))


def cse(graph: Graph) -> None:
    """Common-subexpression elimination over pure nodes.

    Examples
    --------
    >>> import torcia
    >>> from torcia.compiler import inductor
    >>> graphs = []
    >>> def keep(graph, example_inputs):
    ...     graphs.append(graph)
    ...     return graph
    >>> f = torcia.compile(lambda x: (x + 1) * (x + 1) + 0 * x, backend=keep)
    >>> f(torcia.tensor([1.0, 2.0]))
    tensor([4., 9.])
    >>> graph = graphs[0]
    >>> inductor.cse(graph)  # the two x + 1 become one
    >>> [node.op for node in graph.nodes]
    ['add', 'mul', 'mul', 'add']
    """
    seen: dict = {}
    subst: dict = {}
    kept = []
    protected = graph.output_values()
    for node in graph.nodes:
        if subst:
            _rename(graph_one(node), subst)
        if _pure(node):
            key = (node.kind, node.op, id(node.fn), tuple(_const_key(r) for r in node.args),
                   tuple((k, _const_key(r)) for k, r in sorted(node.params.items())))
            prev = seen.get(key)
            if prev is not None and not any(o in protected for o in node.outs):
                for o, p in zip(node.outs, prev.outs):
                    subst[o] = p
                continue
            seen[key] = node
        kept.append(node)
    graph.nodes = kept


def graph_one(node: Node) -> Graph:
    g = Graph()
    g.nodes = [node]
    return g


def fold_constants(graph: Graph) -> None:
    """Run pure nodes whose arguments are all constants now."""
    protected = graph.output_values()
    subst: dict = {}
    kept = []
    for node in graph.nodes:
        if subst:
            _rename(graph_one(node), subst)
        if (_pure(node) and node.kind == "call" and not node.value_args()
                and not any(o in protected for o in node.outs)
                and all(r[0] == "c" for r in node.args)):
            out = node.fn(*[r[1] for r in node.args],
                          **{k: r[1] for k, r in node.params.items()})
            for o, arr in zip(node.outs, out if node.tuple_out else (out,)):
                subst[o] = ("c", arr)
            continue
        kept.append(node)
    graph.nodes = kept


def eliminate_dead_code(graph: Graph) -> None:
    """Drop pure nodes whose results nothing reads.

    Examples
    --------
    >>> import torcia
    >>> from torcia.compiler import inductor
    >>> graphs = []
    >>> def keep(graph, example_inputs):
    ...     graphs.append(graph)
    ...     return graph
    >>> f = torcia.compile(lambda x: (x + 1) * (x + 1) + 0 * x, backend=keep)
    >>> f(torcia.tensor([1.0, 2.0]))
    tensor([4., 9.])
    >>> graph = graphs[0]
    >>> inductor.eliminate_dead_code(graph)  # every node here feeds the output: all stay
    >>> [node.op for node in graph.nodes]
    ['add', 'add', 'mul', 'mul', 'add']
    """
    live = set(graph.output_values())
    kept = []
    for node in reversed(graph.nodes):
        if not _pure(node) or any(o in live for o in node.outs):
            kept.append(node)
            live.update(node.value_args())
    graph.nodes = kept[::-1]


# ---------------------------------------------------------------------------------------
# fusion
# ---------------------------------------------------------------------------------------


_BOOL = np.dtype(bool)


def _scalar_const(c) -> bool:
    if isinstance(c, bool):
        return False
    return isinstance(c, (int, float)) or (
        hasattr(c, "ndim") and c.ndim == 0 and c.dtype.kind in "fiu")


def _fusible(graph: Graph, node: Node, known: FusionOps) -> bool:
    """Whether ``node`` is an elementwise op fusion can write: float inputs of its output's
    shape (0-d ones broadcast), Python or 0-d constants; comparisons (to bool) and casts
    (bool or float to float) join as the masks of a backward, and relu's fused backward
    (``activation_backward``) as a select."""
    if len(node.outs) != 1:
        return False
    shape, dtype = graph.meta[node.outs[0]]
    values = [r for r in node.args if r[0] == "v"]
    if node.kind == "cast" or (node.kind == "call" and node.op == "cast"):
        if node.kind == "call" and (set(node.params) != {"dtype"} or len(node.args) != 1):
            return False
        return (len(values) == 1 and dtype in _FLOATS
                and graph.meta[values[0][1]][1] in (*_FLOATS, _BOOL)
                and graph.meta[values[0][1]][0] == shape)
    backward = _activation_backward(node, known)
    if node.kind != "call" or (node.params and backward is None):
        return False
    if node.op in known.compare:
        n_args, want = 2, _BOOL
    elif node.op in known.unary:
        n_args, want = 1, None
    elif node.op in known.binary or backward is not None:
        n_args, want = 2, None
    else:
        return False
    if len(node.args) != n_args:
        return False
    if want is None and dtype not in _FLOATS or want is not None and dtype != want:
        return False
    operand_dtype = None
    for r in node.args:
        if r[0] == "v":
            vshape, vdtype = graph.meta[r[1]]
            if vdtype not in _FLOATS or not _broadcasts(vshape, shape):
                return False
            if operand_dtype not in (None, vdtype) or (want is None and vdtype != dtype):
                return False
            operand_dtype = vdtype
        elif r[0] != "c" or not _scalar_const(r[1]):
            return False
    return operand_dtype is not None


def _activation_backward(node: Node, known: FusionOps):
    """The activation of an ``activation_backward`` node fusion can write, or None."""
    if node.kind != "call" or node.op != "activation_backward" \
            or set(node.params) != {"activation"}:
        return None
    kind, name = node.params["activation"]
    return name if kind == "c" and name in known.activation_backward else None


def _broadcasts(vshape, shape) -> bool:
    """Whether an operand of ``vshape`` broadcasts to ``shape`` without growing it."""
    if len(vshape) > len(shape):
        return False
    return all(v in (s, 1) for v, s in zip(vshape[::-1], shape[::-1]))


def _reduction(graph: Graph, node: Node, known: FusionOps):
    """``(R, K, rows)`` where ``node`` is a sum, mean, amax or amin of a float array fusion
    can write: it reduces R elements into each of K outputs, over the trailing dims
    (``rows``: the elements of one output are adjacent) or the leading dims; None
    otherwise."""
    if node.kind != "call" or node.op not in known.reduce or len(node.args) != 1 \
            or node.args[0][0] != "v" or len(node.outs) != 1:
        return None
    if set(node.params) - {"dim", "keepdim", "dtype"} or \
            any(r[0] != "c" for r in node.params.values()) or \
            node.params.get("dtype", ("c", None))[1] is not None:
        return None
    ishape, idtype = graph.meta[node.args[0][1]]
    if idtype not in _FLOATS or graph.meta[node.outs[0]][1] != idtype or not ishape:
        return None
    dim = node.params.get("dim", ("c", None))[1]
    n = len(ishape)
    if dim is None:
        dims = set(range(n))
    elif dim == () or dim == []:
        return None  # the kernel's axis=(): no reduction at all
    else:
        try:
            dims = {d % n for d in ((dim,) if isinstance(dim, int) else dim)}
        except TypeError:
            return None
    reduced = [ishape[d] for d in sorted(dims)]
    kept = [ishape[d] for d in range(n) if d not in dims]
    size_r, size_k = int(np.prod(reduced, dtype=np.int64)), int(np.prod(kept, dtype=np.int64))
    if size_r == 0:
        return None  # an empty reduction: NumPy's rules for it (nan mean, amax error)
    if dims == set(range(n - len(dims), n)):
        return size_r, size_k, True
    if dims == set(range(len(dims))):
        return size_r, size_k, False
    return None


def fuse(graph: Graph, reductions: bool = True, xp=None) -> None:
    """Merge chains of fusible elementwise nodes into ``"fused"`` nodes: C++ loops, or
    with ``xp`` (a device's array module) its ``ElementwiseKernel``s; ``reductions``:
    a sum, mean, amax or amin a chain feeds joins it (C++ only)."""
    known = fusion_ops()
    users: dict[int, int] = {}
    for node in graph.nodes:
        for v in set(node.value_args()):  # consumers, not reads: a * a is one consumer
            users[v] = users.get(v, 0) + 1
    outputs = graph.output_values()
    producer: dict[int, Node] = {}
    group_of: dict[int, list] = {}  # id(node) -> the group (list of nodes) it ends
    absorbed: set[int] = set()
    keeps: set[int] = set()  # reductions whose chain's result is also written out
    for node in graph.nodes:
        if node.kind == "copy_":
            # an in-place write (ReLU(inplace=True)) changes the value after its chain
            # ran: a later reader must read the written array, not recompute the chain
            producer.pop(node.args[0][1], None)
            continue
        if reductions and _reduction(graph, node, known) is not None:
            # a reduction ends the chain that computes its input; where something else
            # reads that input too, the kernel writes it as well (a second output)
            v = node.args[0][1]
            p = producer.get(v)
            if p is not None and id(p) not in absorbed:
                absorbed.add(id(p))
                group_of[id(node)] = group_of[id(p)] + [node]
                if users.get(v) != 1 or v in outputs:
                    keeps.add(id(node))
            continue
        if not _fusible(graph, node, known):
            continue
        group = []
        for r in node.args:
            if r[0] != "v":
                continue
            p = producer.get(r[1])
            if p is not None and users.get(r[1]) == 1 and r[1] not in outputs \
                    and id(p) not in absorbed \
                    and graph.meta[r[1]][0] == graph.meta[node.outs[0]][0]:
                group += group_of[id(p)]
                absorbed.add(id(p))
        group.append(node)
        group_of[id(node)] = group
        producer[node.outs[0]] = node
    fused_at: dict[int, tuple] = {}  # id(node it replaces) -> (group, keep)
    skip: set[int] = set()
    for node in graph.nodes:
        group = group_of.get(id(node))
        if id(node) in absorbed or group is None or len(group) < 2:
            continue
        dtype = graph.meta[node.outs[0]][1]
        inside = {n.outs[0] for n in group}
        if dtype not in _FLOATS or any(graph.meta[v][1] != dtype for n in group
                                       for v in n.value_args() if v not in inside):
            continue  # a group ending in a mask, or reading another dtype: runs unfused
        keep = id(node) in keeps
        # a kernel with two outputs runs where the chain ended: others read it from there
        at = group[-2] if keep else node
        fused_at[id(at)] = (group, keep)
        skip.update(id(n) for n in group if n is not at)
    graph.nodes = [_fused_node(graph, *fused_at[id(n)], xp=xp) if id(n) in fused_at else n
                   for n in graph.nodes if id(n) not in skip]


def _index(vshape, shape) -> str:
    """The flat index into a C-contiguous operand of ``vshape`` broadcast to ``shape``, at
    flat index ``i`` of ``shape`` (constants the compiler folds)."""
    vshape = (1,) * (len(shape) - len(vshape)) + tuple(vshape)
    terms = []
    stride_out, stride_v = 1, 1
    for d in range(len(shape) - 1, -1, -1):
        if vshape[d] != 1:
            at = "i" if stride_out == 1 else f"(i / {stride_out})"
            if d > 0:
                at = f"({at} % {shape[d]})"
            terms.append(at if stride_v == 1 else f"{at} * {stride_v}")
            stride_v *= vshape[d]
        stride_out *= shape[d]
    return " + ".join(terms[::-1]) or "0"


def _chain(graph: Graph, group: list, operand, known: FusionOps) -> tuple[list, list]:
    """``(inputs, lines)``: the value ids a fused chain reads and its C++ statements, one
    ``const T tN = ...;`` per node; ``operand(k, vid)`` spells input ``k``'s element."""
    inside = {n.outs[0] for n in group}
    inputs: list[int] = []
    lines = []
    for n in group:
        operands = []
        for r in n.args:
            if r[0] == "v":
                if r[1] in inside:
                    operands.append(f"t{r[1]}")
                else:
                    if r[1] not in inputs:
                        inputs.append(r[1])
                    operands.append(operand(inputs.index(r[1]), r[1]))
            else:
                operands.append(f"T({float(r[1])!r})")
        if n.kind == "cast" or n.op == "cast":
            # a mask (a comparison's bool) as a select: GCC leaves a loop converting
            # bool to float unvectorised
            mask = graph.meta[n.args[0][1]][1] == _BOOL if n.args[0][0] == "v" else False
            expr = f"({operands[0]} ? T(1) : T(0))" if mask else f"T({operands[0]})"
            ctype = "T"
        elif n.op in known.compare:
            expr, ctype = f"({operands[0]} {known.compare[n.op]} {operands[1]})", "bool"
        elif _activation_backward(n, known) is not None:
            template = known.activation_backward[_activation_backward(n, known)]
            expr, ctype = template.format(a=operands[0], b=operands[1]), "T"
        else:
            table = known.unary if n.op in known.unary else known.binary
            expr, ctype = table[n.op].format(a=operands[0], b=operands[-1]), "T"
        lines.append(f"        const {ctype} t{n.outs[0]} = {expr};  // {n.op}")
    return inputs, lines


def _fused_node(graph: Graph, group: list, keep: bool = False, xp=None) -> Node:
    out = group[-1].outs[0]
    known = fusion_ops()
    reduce = _reduction(graph, group[-1], known) if xp is None else None
    if reduce is not None:
        shape, dtype = graph.meta[group[-1].args[0][1]]  # the elements the chain makes
        reducer, group = group[-1], group[:-1]
    else:
        shape, dtype = graph.meta[out]
    ops = "+".join(n.op for n in group)
    if xp is not None:  # the device broadcasts the operands itself
        inputs, lines = _chain(graph, group, lambda k, vid: f"x{k}", known)
        fn = DeviceFusedKernel(xp, lines, out, [graph.meta[v][0] for v in inputs], shape,
                               dtype, ops)
        from torcia.compiler import log

        log("fusion", f"fused {ops} -> {fn.name}:\n{fn.source}")
        return Node("fused", ops, fn, [("v", v) for v in inputs], {}, [out], source=fn.source)

    def operand(k, vid):
        vshape = graph.meta[vid][0]
        return f"x{k}[i]" if vshape == shape else f"x{k}[{_index(vshape, shape)}]"

    inputs, lines = _chain(graph, group, operand, known)
    ctype = _CTYPE[dtype]
    params = "".join(f"const T* __restrict x{i}, " for i in range(len(inputs)))
    if reduce is not None:
        last = group[-1].outs[0]
        ops += f"->{reducer.op}" + ("+out" if keep else "")
        if keep:
            params += "T* __restrict kept, "
        source = _reduction_source(ctype, params, lines, last, reducer.op,
                                   known.reduce[reducer.op], *reduce, keep)
        fn = FusedKernel(source, [graph.meta[v][0] for v in inputs], graph.meta[out][0],
                         dtype, ops, kept_shape=shape if keep else None)
        from torcia.compiler import log

        log("fusion", f"fused {ops} -> {fn.path.name}:\n{source}")
        return Node("fused", ops, fn, [("v", v) for v in inputs], {},
                    [last, out] if keep else [out], tuple_out=keep, source=source)
    source = (
        # threads only for big arrays: on few shared cores a team spinning beside the
        # BLAS threads costs more than it gains. Threads over blocks, SIMD within one:
        # GCC leaves the combined "parallel for simd" loop scalar (with branches, or
        # scalar tanhf) where these two nested loops vectorise (5-15x faster)
        "#include <cmath>\n#include <cstdint>\n#include <algorithm>\n"
        f"typedef {ctype} T;\n"
        f'extern "C" void kernel({params}T* __restrict out, int64_t n) {{\n'
        "    #pragma omp parallel for schedule(static) if(n > 1048576)\n"
        "    for (int64_t b = 0; b < n; b += 4096) {\n"
        "    const int64_t e = std::min<int64_t>(n, b + 4096);\n"
        "    #pragma omp simd\n"
        "    for (int64_t i = b; i < e; ++i) {\n"
        + "\n".join(lines) + "\n"
        f"        out[i] = t{out};\n"
        "    }\n    }\n}\n")
    fn = FusedKernel(source, [graph.meta[v][0] for v in inputs], shape, dtype, ops)
    from torcia.compiler import log

    log("fusion", f"fused {ops} -> {fn.path.name}:\n{source}")
    return Node("fused", ops, fn, [("v", v) for v in inputs], {}, [out], source=source)


def _reduction_source(ctype, params, lines, last, op, accumulate, size_r, size_k, rows,
                      keep) -> str:
    """A fused chain feeding a reduction: over rows, one accumulator per output (float
    sums in double, as the chain's last value is summed R times); over columns, the
    outputs accumulate a row at a time, each row vectorised. ``accumulate``: the
    reduction's accumulator (its initial value, how it takes an element); ``keep``: the
    chain's values are written to ``kept`` too."""
    init, take = accumulate
    if keep:
        lines = [*lines, f"        kept[i] = t{last};"]
    finish = f" / T({size_r})" if op == "mean" else ""
    body = "\n".join("    " + line for line in lines)
    head = ("#include <cmath>\n#include <cstdint>\n#include <algorithm>\n"
            f"typedef {ctype} T;\n"
            f'extern "C" void kernel({params}T* __restrict out, int64_t n) {{\n')
    if rows:
        acc_type = "double" if op in ("sum", "mean") else "T"
        simd = "    #pragma omp simd reduction(+:acc)\n" if op in ("sum", "mean") else ""
        return head + (
            f"    #pragma omp parallel for schedule(static) if({size_r * size_k} > 1048576)\n"
            f"    for (int64_t o = 0; o < {size_k}; ++o) {{\n"
            f"        {acc_type} acc = {init};\n"
            f"    {simd}"
            f"        for (int64_t r = 0; r < {size_r}; ++r) {{\n"
            f"            const int64_t i = o * {size_r} + r;\n"
            f"{body}\n"
            f"            acc = {take.format(x=f't{last}')};\n"
            "        }\n"
            f"        out[o] = T(acc){finish};\n"
            "    }\n}\n")
    return head + (
        f"    for (int64_t o = 0; o < {size_k}; ++o) out[o] = T({init});\n"
        f"    for (int64_t r = 0; r < {size_r}; ++r) {{\n"
        "        #pragma omp simd\n"
        f"        for (int64_t o = 0; o < {size_k}; ++o) {{\n"
        f"            const int64_t i = r * {size_k} + o;\n"
        f"            const T acc = out[o];\n"
        f"{body}\n"
        f"            out[o] = {take.format(x=f't{last}')};\n"
        "        }\n    }\n"
        + (f"    for (int64_t o = 0; o < {size_k}; ++o) out[o] /= T({size_r});\n"
           if op == "mean" else "")
        + "}\n")


def _middle_sum(graph: Graph, node: Node):
    """``(A, K, B)`` where ``node`` sums a float array of shape (A..., K..., B...) over its
    leading and trailing dims, keeping the middle ones (a convolution's bias gradient:
    dims (0, 2, 3)); None otherwise (fusion takes leading-only and trailing-only sums)."""
    if node.kind != "call" or node.op != "sum" or len(node.args) != 1 \
            or node.args[0][0] != "v" or len(node.outs) != 1 \
            or set(node.params) - {"dim", "keepdim", "dtype"} \
            or any(r[0] != "c" for r in node.params.values()) \
            or node.params.get("dtype", ("c", None))[1] is not None:
        return None
    shape, dtype = graph.meta[node.args[0][1]]
    dim = node.params.get("dim", ("c", None))[1]
    if dtype not in _FLOATS or graph.meta[node.outs[0]][1] != dtype or not shape \
            or not isinstance(dim, (tuple, list)) or not dim \
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in dim):
        return None
    n = len(shape)
    dims = {d % n for d in dim}
    kept = [d for d in range(n) if d not in dims]
    if not kept or kept != list(range(kept[0], kept[-1] + 1)) or kept[0] == 0 \
            or kept[-1] == n - 1 or 0 in shape:
        return None
    size = [int(np.prod(shape[a:b], dtype=np.int64))
            for a, b in ((0, kept[0]), (kept[0], kept[-1] + 1), (kept[-1] + 1, n))]
    return tuple(size)


def specialize_middle_sums(graph: Graph) -> None:
    """Sums over the leading and trailing dims (keeping middle ones) as generated loops:
    a row at a time, vectorised, accumulated in double (NumPy strides across the kept
    dim instead).

    Examples
    --------
    >>> import torcia
    >>> f = torcia.compile(lambda x: x.sum((0, 2, 3)))
    >>> f(torcia.ones(2, 3, 4, 5))
    tensor([40., 40., 40.])
    >>> type(f._entries[0].graph.nodes[0].fn).__name__
    'FusedKernel'
    """
    for i, node in enumerate(graph.nodes):
        sizes = _middle_sum(graph, node)
        if sizes is None:
            continue
        a, k, b = sizes
        shape, dtype = graph.meta[node.args[0][1]]
        source = ("#include <cstdint>\n"
                  f"typedef {_CTYPE[dtype]} T;\n"
                  'extern "C" void kernel(const T* __restrict x, T* __restrict out, '
                  "int64_t n) {\n"
                  f"    #pragma omp parallel for schedule(static) if({a * k * b} > 4194304)\n"
                  f"    for (int64_t c = 0; c < {k}; ++c) {{\n"
                  "        double acc = 0;\n"
                  f"        for (int64_t r = 0; r < {a}; ++r) {{\n"
                  f"            const T* __restrict row = x + (r * {k} + c) * {b};\n"
                  "            #pragma omp simd reduction(+:acc)\n"
                  f"            for (int64_t j = 0; j < {b}; ++j) acc += row[j];\n"
                  "        }\n        out[c] = T(acc);\n    }\n}\n")
        fn = FusedKernel(source, [shape], graph.meta[node.outs[0]][0], dtype, "sum")
        graph.nodes[i] = Node("call", "sum", fn, list(node.args), {}, list(node.outs),
                              source=source)


# ---------------------------------------------------------------------------------------
# cross-entropy and its backward sharing one softmax
# ---------------------------------------------------------------------------------------


def _ce_params(node: Node):
    """``(reduction, ignore_index)`` where ``node``'s parameters are ones the generated
    cross-entropy takes (no class weights, no label smoothing, a mean or a sum)."""
    p = node.params
    if set(p) != {"reduction", "ignore_index", "label_smoothing"} \
            or any(r[0] != "c" for r in p.values()):
        return None
    reduction, ignore, eps = (p[k][1] for k in ("reduction", "ignore_index",
                                                 "label_smoothing"))
    if reduction not in ("mean", "sum") or eps != 0 or isinstance(ignore, bool) \
            or not isinstance(ignore, (int, np.integer)):
        return None
    return reduction, int(ignore)


def fuse_cross_entropy(graph: Graph) -> None:
    """``cross_entropy(x, t)`` and ``cross_entropy_backward(g, x, t)`` of one graph as two
    generated kernels: the forward writes the softmax it computes anyway (one pass of
    ``exp`` over the logits instead of two), the backward only subtracts the targets and
    scales, in place of that softmax (nothing else reads it). Where the gradient's sum
    over its rows is taken (a Linear's bias gradient, through reshapes), the backward
    adds it up as it writes the rows, and the separate ``sum`` (one more pass over the
    (N, C) gradient) goes.

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> lin = nn.Linear(4, 3)
    >>> def step(x, y):
    ...     loss = nn.functional.cross_entropy(lin(x), y)
    ...     loss.backward()
    ...     return loss
    >>> f = torcia.compile(step)
    >>> _ = f(torcia.randn(5, 4), torcia.tensor([0, 1, 2, 0, 1]))
    >>> "cross_entropy+softmax" in [n.op for n in f._entries[0].graph.nodes]
    True
    """
    users = _consumers(graph)
    replace: dict[int, Node] = {}
    for fwd in graph.nodes:
        if fwd.kind != "call" or fwd.op != "cross_entropy" or len(fwd.args) != 3 \
                or fwd.args[2] != ("c", None) or fwd.args[0][0] != "v" \
                or fwd.args[1][0] != "v" or len(fwd.outs) != 1:
            continue
        params = _ce_params(fwd)
        (xshape, dtype), (tshape, tdtype) = (graph.meta[r[1]] for r in fwd.args[:2])
        if params is None or dtype not in _FLOATS or len(xshape) != 2 or 0 in xshape \
                or tdtype != np.dtype(np.int64) or tuple(tshape) != tuple(xshape[:1]) \
                or graph.meta[fwd.outs[0]] != ((), dtype):
            continue
        back = [n for n in users.get(fwd.args[0][1], []) if n.kind == "call"
                and n.op == "cross_entropy_backward" and n.args[1:] == fwd.args
                and n.params == fwd.params and len(n.outs) == 1 and n.args[0][0] == "v"
                and graph.meta[n.args[0][1]] == ((), dtype)]
        if len(back) != 1:
            continue
        n, c = xshape
        probs = graph.n_values
        graph.n_values += 1
        graph.meta[probs] = (tuple(xshape), dtype)
        column_sum = _rows_summed(graph, users, back[0].outs[0], (n, c))
        fk = CrossEntropyKernel(n, c, dtype, *params)
        bk = CrossEntropyKernel(n, c, dtype, *params, backward=True,
                                column_sum=column_sum is not None)
        replace[id(fwd)] = Node("call", "cross_entropy+softmax", fk, list(fwd.args[:2]), {},
                                [fwd.outs[0], probs], tuple_out=True, source=fk.source)
        outs = list(back[0].outs)
        if column_sum is not None:
            outs.append(column_sum.outs[0])
            replace[id(column_sum)] = None
        replace[id(back[0])] = Node(
            "call", "cross_entropy_backward(softmax)" + ("+sum" if column_sum else ""), bk,
            [back[0].args[0], ("v", probs), fwd.args[1]], {}, outs,
            tuple_out=column_sum is not None, source=bk.source)
    graph.nodes = [replace.get(id(node), node) for node in graph.nodes
                   if replace.get(id(node), node) is not None]


def _rows_summed(graph: Graph, users: dict, vid: int, shape: tuple):
    """The node summing value ``vid`` (an (N, C) array) over its rows into C values of its
    dtype, reached through reshapes (views) that give it that shape back, or None. The
    only one: two would each need the kernel's output."""
    found, seen, todo = [], set(), [vid]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        for node in users.get(v, ()):
            if node.kind != "call" or len(node.outs) != 1 or node.args[0] != ("v", v):
                continue
            if node.op in ("reshape", "view") and len(node.args) == 1:
                todo.append(node.outs[0])
            elif node.op == "sum" and len(node.args) == 1 \
                    and graph.meta[v] == (shape, graph.meta[vid][1]) \
                    and _reduction(graph, node, fusion_ops()) == (shape[0], shape[1], False) \
                    and graph.meta[node.outs[0]] == ((shape[1],), graph.meta[vid][1]):
                found.append(node)
    return found[0] if len(found) == 1 else None


class CrossEntropyKernel:
    """The generated cross-entropy of (N, C) logits and (N,) int64 targets (no class
    weights, no label smoothing): ``(x, t) -> (loss, softmax)``, or with ``backward``
    ``(g, softmax, t) -> gradient``, written over ``softmax`` (its buffer), and with
    ``column_sum`` also the gradient's sum over its rows: ``(gradient, sums)``. A target
    outside ``[0, C)`` other than ``ignore_index`` raises ``IndexError`` as PyTorch's
    ``Target ... is out of bounds``.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.compiler import inductor
    >>> ce = inductor.CrossEntropyKernel(1, 2, np.dtype(np.float32), "mean", -100)
    >>> loss, probs = ce(np.zeros((1, 2), np.float32), np.array([1]))
    >>> round(float(loss), 4), probs.tolist()
    (0.6931, [[0.5, 0.5]])
    """

    def __init__(self, n, c, dtype, reduction, ignore_index, backward=False,
                 column_sum=False):
        self.n, self.c, self.dtype, self.backward = n, c, dtype, backward
        self.reduction, self.ignore_index = reduction, ignore_index
        self.column_sum = column_sum
        ctype = _CTYPE[dtype]
        head = ("#include <algorithm>\n#include <cmath>\n#include <cstdint>\n"
                f"typedef {ctype} T;\n")
        if backward:
            # the mean's divisor counts the rows kept (not ignore_index), as eager's
            count = (f"    int64_t kept = 0;\n"
                     f"    for (int64_t r = 0; r < {n}; ++r) kept += t[r] != {ignore_index};\n"
                     "    const T scale = g[0] / T(kept);\n" if reduction == "mean"
                     else "    const T scale = g[0];\n")
            # the gradient overwrites the probabilities (out is p); with column_sum
            # the rows are added up in double as they are written (the bias gradient)
            sums = (f"    double acc[{c}] = {{}};\n" if column_sum else "")
            add = ("        #pragma omp simd\n"
                   f"        for (int64_t j = 0; j < {c}; ++j) acc[j] += double(o[j]);\n"
                   if column_sum else "")
            finish = (f"    for (int64_t j = 0; j < {c}; ++j) colsum[j] = T(acc[j]);\n"
                      if column_sum else "")
            self.source = head + (
                'extern "C" void kernel(const T* __restrict g, T* __restrict out, '
                "const int64_t* __restrict t, T* __restrict colsum) {\n" + count + sums +
                f"    for (int64_t r = 0; r < {n}; ++r) {{\n"
                f"        T* __restrict o = out + r * {c};\n"
                f"        const T s = t[r] == {ignore_index} ? T(0) : scale;\n"
                "        #pragma omp simd\n"
                f"        for (int64_t j = 0; j < {c}; ++j) o[j] *= s;\n"
                f"        if (t[r] != {ignore_index}) o[t[r]] -= s;\n" + add +
                "    }\n" + finish + "}\n")
        else:
            # per row: the maximum, exp(x - max) written out and summed (in SIMD lanes),
            # then the loss of the target from log(sum); the losses added in double
            finish = "total / double(kept)" if reduction == "mean" else "total"
            self.source = head + (
                'extern "C" int64_t kernel(const T* __restrict x, '
                "const int64_t* __restrict t, T* __restrict loss, T* __restrict p) {\n"
                "    double total = 0;\n    int64_t kept = 0;\n"
                f"    for (int64_t r = 0; r < {n}; ++r) {{\n"
                f"        const T* __restrict xr = x + r * {c};\n"
                f"        T* __restrict pr = p + r * {c};\n"
                f"        if (t[r] != {ignore_index} && (t[r] < 0 || t[r] >= {c})) return r;\n"
                # 16 running maxima (lanes: a max reduction with NaN's rules is not
                # vectorised); a NaN the maximum skips still reaches exp below: NaN row
                "        T lane[16];\n"
                "        for (int l = 0; l < 16; ++l) lane[l] = -INFINITY;\n"
                f"        for (int64_t j = 0; j + 16 <= {c}; j += 16) {{\n"
                "            #pragma omp simd\n"
                "            for (int l = 0; l < 16; ++l) "
                "lane[l] = xr[j + l] > lane[l] ? xr[j + l] : lane[l];\n"
                "        }\n"
                f"        for (int64_t j = {c - c % 16}; j < {c}; ++j) "
                "lane[0] = xr[j] > lane[0] ? xr[j] : lane[0];\n"
                "        T m = lane[0];\n"
                "        for (int l = 1; l < 16; ++l) m = lane[l] > m ? lane[l] : m;\n"
                "        if (m == -INFINITY) m = 0;  // all -inf: exp(-inf) sums to 0\n"
                "        T s = 0;\n"
                "        #pragma omp simd reduction(+:s)\n"
                f"        for (int64_t j = 0; j < {c}; ++j) {{\n"
                "            const T e = std::exp(xr[j] - m);\n"
                "            pr[j] = e;\n"
                "            s += e;\n"
                "        }\n"
                "        const T inv = T(1) / T(s);\n"
                "        #pragma omp simd\n"
                f"        for (int64_t j = 0; j < {c}; ++j) pr[j] *= inv;\n"
                f"        if (t[r] != {ignore_index}) {{\n"
                "            total += double(m) + std::log(s) - double(xr[t[r]]);\n"
                "            ++kept;\n"
                "        }\n"
                "    }\n"
                f"    loss[0] = T({finish});\n"
                "    return -1;\n}\n")
        self.path, self.fn = load(self.source)
        self.fn.restype = None if backward else ctypes.c_int64
        self.fn.argtypes = [ctypes.c_void_p] * 4
        from torcia.compiler import log

        log("fusion", f"cross_entropy{'_backward' if backward else ''} -> "
                      f"{self.path.name}:\n{self.source}")

    def _ready(self, a, shape, dtype, what):
        a = np.asarray(a)
        if a.shape != shape or a.dtype != dtype:
            raise ValueError(f"generated cross_entropy expects {what} of shape {shape} "
                             f"{dtype}, got {a.shape} {a.dtype}")
        return a if a.flags.c_contiguous else np.ascontiguousarray(a)

    def __call__(self, *arrays):
        n, c = self.n, self.c
        if self.backward:
            g = self._ready(arrays[0], (), self.dtype, "a loss gradient")
            p = self._ready(arrays[1], (n, c), self.dtype, "probabilities")
            t = self._ready(arrays[2], (n,), np.dtype(np.int64), "targets")
            # the forward's softmax, read by this kernel alone: its buffer becomes the
            # gradient (a copy where the caller's array is not that buffer)
            out = p if p is not arrays[1] or (p.base is None and p.flags.owndata) \
                else p.copy()
            colsum = np.empty((c,), self.dtype) if self.column_sum else None
            self.fn(g.ctypes.data, out.ctypes.data, t.ctypes.data,
                    None if colsum is None else colsum.ctypes.data)
            return out if colsum is None else (out, colsum)
        x = self._ready(arrays[0], (n, c), self.dtype, "logits")
        t = self._ready(arrays[1], (n,), np.dtype(np.int64), "targets")
        loss, p = np.empty((), self.dtype), np.empty((n, c), self.dtype)
        bad = self.fn(x.ctypes.data, t.ctypes.data, loss.ctypes.data, p.ctypes.data)
        if bad >= 0:
            raise IndexError(f"Target {int(t[bad])} is out of bounds.")
        return loss, p


# ---------------------------------------------------------------------------------------
# max pooling specialised to its shapes
# ---------------------------------------------------------------------------------------


def _pool_2d(graph: Graph, node: Node):
    """``(n*c, h, w, oh, ow, geometry)`` where ``node`` is a 2-D max pooling (or its
    backward, from the pooling's record) of a float array a generated loop can take."""
    if node.kind != "call" or node.op != "max_pool" or len(node.args) != 1 \
            or node.args[0][0] != "v" or len(node.outs) != 2 \
            or set(node.params) != {"kernel_size", "stride", "padding", "dilation",
                                    "ceil_mode"} \
            or any(r[0] != "c" for r in node.params.values()):
        return None
    shape, dtype = graph.meta[node.args[0][1]]
    oshape = graph.meta[node.outs[0]][0]
    if dtype not in _FLOATS or len(shape) != 4 or len(oshape) != 4 \
            or graph.meta[node.outs[1]][1] != np.dtype(np.int64) or 0 in shape:
        return None
    geometry = []
    for key in ("kernel_size", "stride", "padding", "dilation"):
        value = node.params[key][1]
        if not (isinstance(value, (tuple, list)) and len(value) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
            return None
        geometry.append(tuple(value))
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = geometry
    if min(kh, kw, sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        return None
    return (shape[0] * shape[1], shape[2], shape[3], oshape[2], oshape[3],
            (kh, kw, sh, sw, ph, pw, dh, dw))


def _consumers(graph: Graph) -> dict:
    """value id -> the nodes reading it (once per node)."""
    users: dict = {}
    for node in graph.nodes:
        for v in set(node.value_args()):
            users.setdefault(v, []).append(node)
    return users


def fuse_relu_pooling(graph: Graph) -> None:
    """``max_pool(relu(x))`` as one kernel, and its backward with relu's mask.

    ``relu(x)`` is read only by the pooling and by its backward's mask, ``gt(relu(x), 0)``
    cast and multiplied into the pooling's gradient: the pooled maximum of ``x`` passed
    through relu is the same value (relu is monotone; NaN stays NaN), and the mask at the
    element a gradient goes to is that value's sign, so neither relu's output nor the mask
    is ever written out. A window with no positive element sends a zero gradient, whichever
    element it names (its index may differ from eager's: the indices must not be read
    elsewhere).

    Examples
    --------
    >>> import torcia
    >>> from torcia import nn
    >>> conv = nn.Conv2d(1, 2, 3, padding=1)
    >>> def step(x):
    ...     loss = nn.functional.max_pool2d(torcia.relu(conv(x)), 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> f = torcia.compile(step)
    >>> _ = f(torcia.randn(2, 1, 8, 8))
    >>> ops = [n.op for n in f._entries[0].graph.nodes]
    >>> "relu+max_pool" in ops and "max_pool_backward*relu_mask" in ops
    True
    """
    users = _consumers(graph)
    outputs = graph.output_values()
    producer = {o: n for n in graph.nodes for o in n.outs}
    replace: dict[int, Node] = {}
    drop: set[int] = set()
    for pool in graph.nodes:
        spec = _pool_2d(graph, pool)
        if spec is None:
            continue
        r = pool.args[0][1]
        relu = producer.get(r)
        values, indices = pool.outs
        if relu is None or relu.kind != "call" or relu.op != "relu" or relu.params \
                or len(relu.args) != 1 or relu.args[0][0] != "v" \
                or graph.meta[relu.args[0][1]] != graph.meta[r] \
                or r in outputs or indices in outputs:
            continue
        readers = users.get(r, [])
        back = users.get(indices, [])
        if len(readers) != 2 or len(back) != 1 or back[0].op != "max_pool_backward" \
                or back[0].kind != "call" or len(back[0].args) != 2 \
                or back[0].args[1] != ("v", indices):
            continue
        mul = _relu_backward(graph, users, outputs, next(n for n in readers if n is not pool),
                             back[0], r)
        if mul is None:
            continue
        dtype = graph.meta[r][1]
        fwd = PoolKernel(_pool_source(_CTYPE[dtype], *spec, relu=True), spec, dtype)
        bspec = spec[:5] + (None,)
        bwd = PoolKernel(_pool_backward_source(_CTYPE[dtype], *bspec, masked=True), bspec,
                         dtype, backward=True, masked=True)
        replace[id(pool)] = Node("call", "relu+max_pool", fwd, list(relu.args), {},
                                 pool.outs, tuple_out=True, source=fwd.source)
        replace[id(mul)] = Node("call", "max_pool_backward*relu_mask", bwd,
                                [back[0].args[0], ("v", indices), ("v", values)], {},
                                mul.outs, source=bwd.source)
        # the backward stands where relu's backward stood: after the gradient it reads
        drop.update({id(relu), id(back[0])})
    graph.nodes = [replace.get(id(n), n) for n in graph.nodes if id(n) not in drop]


def _relu_backward(graph, users, outputs, node, back, r):
    """``node`` when it is relu's fused backward, ``activation_backward(g, r,
    activation="relu")``, of ``back``'s result (read by it alone) and relu's output ``r``;
    None otherwise."""
    b = back.outs[0]
    if node.kind != "call" or node.op != "activation_backward" \
            or node.params != {"activation": ("c", "relu")} or len(node.args) != 2 \
            or node.args[0] != ("v", b) or node.args[1] != ("v", r) \
            or users.get(b, []) != [node] or b in outputs \
            or graph.meta[node.outs[0]] != graph.meta[b]:
        return None
    return node


def specialize_pooling(graph: Graph) -> None:
    """Replace 2-D max pooling and its backward by loops generated for their shapes.

    The values and indices are PyTorch's (the first maximum in window order, NaN winning,
    indices flat in the input plane); the forward takes a window element at a time across
    a plane's outputs, through a table of their positions, so that its selects vectorise.

    Examples
    --------
    >>> import torcia
    >>> f = torcia.compile(lambda x: torcia.nn.functional.max_pool2d(x, 2))
    >>> f(torcia.arange(16.0).reshape(1, 1, 4, 4))
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    >>> type(f._entries[0].graph.nodes[0].fn).__name__
    'PoolKernel'
    """
    for i, node in enumerate(graph.nodes):
        spec = _pool_2d(graph, node)
        if spec is not None:
            dtype = graph.meta[node.args[0][1]][1]
            fn = PoolKernel(_pool_source(_CTYPE[dtype], *spec), spec, dtype)
            graph.nodes[i] = Node("call", "max_pool", fn, node.args, {}, node.outs,
                                  tuple_out=True, source=fn.source)
            continue
        if node.kind == "call" and node.op == "max_pool_backward" and len(node.args) == 2 \
                and all(r[0] == "v" for r in node.args) and len(node.outs) == 1 \
                and set(node.params) == {"input_shape"}:
            # the indices may come from this graph's pooling or, in a backward program,
            # from the forward's: the generated loop needs only the shapes
            (gshape, dtype), (ishape, idtype) = (graph.meta[r[1]] for r in node.args)
            oshape, odtype = graph.meta[node.outs[0]]
            if dtype not in _FLOATS or odtype != dtype or idtype != np.dtype(np.int64) \
                    or len(gshape) != 4 or tuple(ishape) != tuple(gshape) \
                    or len(oshape) != 4 or tuple(oshape[:2]) != tuple(gshape[:2]):
                continue
            spec = (gshape[0] * gshape[1], oshape[2], oshape[3], gshape[2], gshape[3], None)
            fn = PoolKernel(_pool_backward_source(_CTYPE[dtype], *spec), spec, dtype,
                            backward=True)
            graph.nodes[i] = Node("call", "max_pool_backward", fn, node.args, {}, node.outs,
                                  source=fn.source)


_POOL_TABLE = """\
// table[k * OHW + o]: the in-plane index of window element k (row-major window order) of
// output o, or -1 where it falls in the padding; built once
static const int64_t* table() {{
    static const std::vector<int64_t> t = [] {{
        std::vector<int64_t> v({kh} * {kw} * {ohw});
        for (int64_t ki = 0; ki < {kh}; ++ki)
            for (int64_t kj = 0; kj < {kw}; ++kj)
                for (int64_t o = 0; o < {ohw}; ++o) {{
                    const int64_t y = (o / {ow}) * {sh} - {ph} + ki * {dh};
                    const int64_t c = (o % {ow}) * {sw} - {pw} + kj * {dw};
                    v[(ki * {kw} + kj) * {ohw} + o] =
                        y < 0 || y >= {h} || c < 0 || c >= {w} ? -1 : y * {w} + c;
                }}
        return v;
    }}();
    return t.data();
}}
"""


#: the geometry (kernel, stride, padding, dilation) of the usual 2x2 pooling, whose
#: windows tile the plane: loops of their own read the two rows of each window in place
_TILES = (2, 2, 2, 2, 0, 0, 1, 1)


def _tiles(h, w, oh, ow, geometry) -> bool:
    """Whether the windows are 2x2 tiles inside the plane (no padding, no ceil overhang)
    in rows of at least 8 outputs. Measured on one thread against the table's loop (the
    CNN benchmark's float32 planes): 1.8x faster at 14 outputs a row, 1.4-3.5x at 8-28,
    1.4x slower at 7, whose vectors are mostly tail."""
    return tuple(geometry or ()) == _TILES and 2 * oh <= h and 2 * ow <= w and ow >= 8


def _tiled_pool_source(ctype, planes, h, w, oh, ow, relu) -> str:
    # each output's window is rows 2i and 2i+1, columns 2j and 2j+1: the four elements in
    # window order through the same selects as the table's loop, across a row of outputs
    steps = "".join(
        f"                {{ const T v = {src}; const bool t = v > b || (v != v && b == b); "
        f"b = t ? v : b; at = t ? {pos} : at; }}\n"
        for src, pos in (("r0[2 * j + 1]", "base + 2 * j + 1"),
                         ("r1[2 * j]", f"base + {w} + 2 * j"),
                         ("r1[2 * j + 1]", f"base + {w} + 2 * j + 1")))
    return (
        "#include <cmath>\n#include <cstdint>\n"
        f"typedef {ctype} T;\n"
        'extern "C" void kernel(const T* __restrict x, T* __restrict out, '
        "int64_t* __restrict idx) {\n"
        f"    #pragma omp parallel for schedule(static) if({planes * h * w} > 4194304)\n"
        f"    for (int64_t p = 0; p < {planes}; ++p) {{\n"
        f"        for (int64_t i = 0; i < {oh}; ++i) {{\n"
        f"            const int64_t base = 2 * i * {w};\n"
        f"            const T* __restrict r0 = x + p * {h * w} + base;\n"
        f"            const T* __restrict r1 = r0 + {w};\n"
        f"            T* __restrict best = out + p * {oh * ow} + i * {ow};\n"
        f"            int64_t* __restrict where = idx + p * {oh * ow} + i * {ow};\n"
        "            #pragma omp simd\n"
        f"            for (int64_t j = 0; j < {ow}; ++j) {{\n"
        "                T b = r0[2 * j];\n"
        "                int64_t at = base + 2 * j;\n"
        + steps
        + ("                b = b > T(0) || b != b ? b : T(0);  // relu (NaN stays NaN)\n"
           if relu else "")
        + "                best[j] = b;\n                where[j] = at;\n"
        "            }\n        }\n    }\n}\n")


def _pool_source(ctype, planes, h, w, oh, ow, geometry, relu=False) -> str:
    # a window element at a time across a chunk of a plane's outputs: a gather into a
    # buffer, then selects over contiguous lanes that vectorise (a window at a time is a
    # chain of data-dependent branches, mispredicted half the time on real data)
    if _tiles(h, w, oh, ow, geometry):
        return _tiled_pool_source(ctype, planes, h, w, oh, ow, relu)
    kh, kw, sh, sw, ph, pw, dh, dw = geometry
    ohw = oh * ow
    return (
        "#include <cmath>\n#include <cstdint>\n#include <vector>\n"
        f"typedef {ctype} T;\n"
        + _POOL_TABLE.format(kh=kh, kw=kw, ohw=ohw, ow=ow, sh=sh, sw=sw, ph=ph, pw=pw,
                             dh=dh, dw=dw, h=h, w=w) +
        'extern "C" void kernel(const T* __restrict x, T* __restrict out, '
        "int64_t* __restrict idx) {\n"
        "    const int64_t* __restrict tab = table();\n"
        f"    #pragma omp parallel for schedule(static) if({planes * ohw * kh * kw}"
        " > 4194304)\n"
        f"    for (int64_t p = 0; p < {planes}; ++p) {{\n"
        f"        const T* __restrict plane = x + p * {h * w};\n"
        f"        for (int64_t o0 = 0; o0 < {ohw}; o0 += 1024) {{\n"
        f"            const int64_t n = std::min<int64_t>(1024, {ohw} - o0);\n"
        f"            T* __restrict best = out + p * {ohw} + o0;\n"
        f"            int64_t* __restrict where = idx + p * {ohw} + o0;\n"
        "            T tmp[1024];\n"
        "            for (int64_t o = 0; o < n; ++o) { best[o] = -INFINITY; where[o] = -1; }\n"
        f"            for (int64_t k = 0; k < {kh * kw}; ++k) {{\n"
        f"                const int64_t* __restrict at = tab + k * {ohw} + o0;\n"
        "                for (int64_t o = 0; o < n; ++o)\n"
        "                    tmp[o] = at[o] >= 0 ? plane[at[o]] : T(0);\n"
        "                #pragma omp simd\n"
        "                for (int64_t o = 0; o < n; ++o) {\n"
        "                    const T v = tmp[o], b = best[o];\n"
        "                    // the first element, then a larger one; NaN wins, then stays\n"
        "                    const bool take = (at[o] >= 0) & ((where[o] < 0) | (v > b) | "
        "((v != v) & (b == b)));\n"
        "                    best[o] = take ? v : b;\n"
        "                    where[o] = take ? at[o] : where[o];\n"
        "                }\n            }\n"
        + ("            // relu of the maximum: the maximum of relu (NaN stays NaN)\n"
           "            for (int64_t o = 0; o < n; ++o)\n"
           "                best[o] = best[o] > T(0) || best[o] != best[o] ? best[o] : T(0);\n"
           if relu else "")
        + "        }\n    }\n}\n")


def _pool_backward_source(ctype, planes, h, w, oh, ow, geometry=None, masked=False) -> str:
    # each gradient added at its index (windows may overlap); an index outside the plane
    # is counted, not written, and the call raises. ``masked``: relu's mask too, from the
    # pooled values (zero where the maximum was not positive)
    grad = f"(val[p * {oh * ow} + k] > T(0) ? gp[k] : T(0))" if masked else "gp[k]"
    return ("#include <cstdint>\n#include <cstring>\n"
            f"typedef {ctype} T;\n"
            'extern "C" int64_t kernel(const T* __restrict g, const int64_t* __restrict idx, '
            + ("const T* __restrict val, " if masked else "") +
            "T* __restrict out) {\n"
            "    int64_t bad = 0;\n"
            f"    #pragma omp parallel for schedule(static) reduction(+:bad) "
            f"if({planes * h * w} > 4194304)\n"
            f"    for (int64_t p = 0; p < {planes}; ++p) {{\n"
            f"        T* __restrict plane = out + p * {h * w};\n"
            f"        const T* __restrict gp = g + p * {oh * ow};\n"
            f"        const int64_t* __restrict ip = idx + p * {oh * ow};\n"
            f"        std::memset(plane, 0, sizeof(T) * {h * w});\n"
            f"        for (int64_t k = 0; k < {oh * ow}; ++k) {{\n"
            f"            if (static_cast<uint64_t>(ip[k]) < {h * w}) plane[ip[k]] += {grad};\n"
            "            else ++bad;\n"
            "        }\n    }\n    return bad;\n}\n")


class PoolKernel:
    """A generated max pooling (``x -> (values, indices)``) or its backward
    (``(g, indices) -> grad``, with ``masked`` ``(g, indices, values) -> grad``) for one
    shape; arrays are checked before each call.

    Examples
    --------
    >>> import numpy as np
    >>> from torcia.compiler import inductor
    >>> spec = (1, 2, 2, 1, 1, (2, 2, 2, 2, 0, 0, 1, 1))  # planes, h, w, oh, ow, geometry
    >>> pool = inductor.PoolKernel(inductor._pool_source("float", *spec), spec,
    ...                            np.dtype(np.float32))
    >>> values, indices = pool(np.array([[[[1, 4], [3, 2]]]], np.float32))
    >>> values.ravel().tolist(), indices.ravel().tolist()
    ([4.0], [1])
    """

    def __init__(self, source, spec, dtype, backward=False, masked=False):
        self.source = source
        planes, h, w, oh, ow, _ = spec
        self.spec, self.dtype, self.backward, self.masked = spec, dtype, backward, masked
        self.path, self.fn = load(source)
        self.fn.restype = ctypes.c_int64 if backward else None
        self.fn.argtypes = [ctypes.c_void_p] * (4 if masked else 3)
        self.in_size, self.out_size = planes * h * w, planes * oh * ow
        from torcia.compiler import log

        log("fusion", f"max_pool{'_backward' if backward else ''} -> {self.path.name}:\n"
                      f"{source}")

    def _ready(self, a, size, dtype, what):
        if not isinstance(a, np.ndarray) or a.dtype != dtype or a.size != size \
                or a.ndim != 4:
            raise ValueError(f"generated max_pool{'_backward' if self.backward else ''} "
                             f"expects {what} of {size} {dtype} elements, got "
                             f"{getattr(a, 'shape', a)} {getattr(a, 'dtype', '')}")
        return a if a.flags.c_contiguous else np.ascontiguousarray(a)

    def __call__(self, *arrays):
        planes, h, w, oh, ow, _ = self.spec
        if self.backward:
            g = self._ready(arrays[0], self.out_size, self.dtype, "a gradient")
            idx = self._ready(arrays[1], self.out_size, np.dtype(np.int64), "indices")
            val = self._ready(arrays[2], self.out_size, self.dtype, "pooled values") \
                if self.masked else None
            out = np.empty(g.shape[:2] + (h, w), self.dtype)
            ptrs = [g.ctypes.data, idx.ctypes.data] + ([val.ctypes.data] if self.masked else [])
            if self.fn(*ptrs, out.ctypes.data):
                raise ValueError(f"max_pool_backward: indices outside a plane of {h * w} "
                                 "elements")
            return out
        x = self._ready(arrays[0], self.in_size, self.dtype, "an input")
        values = np.empty(x.shape[:2] + (oh, ow), self.dtype)
        indices = np.empty(x.shape[:2] + (oh, ow), np.int64)
        self.fn(x.ctypes.data, values.ctypes.data, indices.ctypes.data)
        return values, indices


def device_module(graph: Graph):
    """The array module of the device ``graph`` was captured on, or None for the CPU
    (whose kernels are this module's C++)."""
    device = getattr(graph, "device", None)
    if device is None or device.type == "cpu":
        return None
    from torcia.library import get_backend

    return get_backend(device.type).xp


#: C++'s spellings in the fused lines -> CUDA's (device math is overloaded for float and
#: double without ``std::``; ``torcia_max`` keeps std::max's NaN behaviour, fmax's differs)
DEVICE_SPELLINGS = (("std::max<T>(", "torcia_max("), ("std::min<T>(", "torcia_min("),
                    ("std::abs(", "fabs("), ("std::", ""))
DEVICE_PREAMBLE = (
    "template <typename U> __device__ inline U torcia_max(U a, U b) { return a < b ? b : a; }\n"
    "template <typename U> __device__ inline U torcia_min(U a, U b) { return b < a ? b : a; }\n")

_device_kernels: dict = {}


def device_kernel(xp, params: str, body: str, name: str):
    """``xp.ElementwiseKernel(params, "T out", body)``, made once per process for a source
    (CuPy compiles it at the first call for the dtype it meets, and caches the binary on
    disk)."""
    key = (id(xp), params, body)
    kernel = _device_kernels.get(key)
    if kernel is None:
        kernel = _device_kernels[key] = xp.ElementwiseKernel(
            params, "T out", body, name=name, preamble=DEVICE_PREAMBLE)
    return kernel


class DeviceFusedKernel:
    """A fused elementwise chain on a device: one ``ElementwiseKernel`` of the device's
    array module (CuPy's), called with the chain's input arrays (which it broadcasts to
    the result's shape); returns the result, written into ``out`` when given."""

    def __init__(self, xp, lines, out_vid, shapes, shape, dtype, ops):
        body = "\n".join(line.strip().split("  //")[0] for line in lines) \
            + f"\nout = t{out_vid};"
        for cpp, cuda in DEVICE_SPELLINGS:
            body = body.replace(cpp, cuda)
        params = ", ".join(f"T x{k}" for k in range(len(shapes)))
        self.name = "torcia_fused_" + hashlib.sha256((params + body).encode()).hexdigest()[:16]
        self.source = f"ElementwiseKernel({params!r}, 'T out', name={self.name!r}):\n{body}"
        self.kernel = device_kernel(xp, params, body, self.name)
        self.xp = xp
        self.shapes = [tuple(s) for s in shapes]
        self.shape, self.dtype, self.ops = tuple(shape), dtype, ops

    def __call__(self, *arrays, out=None):
        if len(arrays) != len(self.shapes):
            raise ValueError(f"fused kernel {self.ops} takes {len(self.shapes)} arrays, got "
                             f"{len(arrays)}")
        for a, shape in zip(arrays, self.shapes):
            if a.shape != shape or a.dtype != self.dtype:
                raise ValueError(f"fused kernel {self.ops} expects a {shape} {self.dtype} "
                                 f"array, got {a.shape} {a.dtype}")
        if out is None:
            out = self.xp.empty(self.shape, self.dtype)
        self.kernel(*arrays, out)
        return out


# ---------------------------------------------------------------------------------------
# building and loading
# ---------------------------------------------------------------------------------------


def compiler() -> str | None:
    """The C++ compiler fusion uses (``$CXX``, else ``g++``), or None.

    Examples
    --------
    >>> from torcia.compiler import inductor
    >>> cxx = inductor.compiler()
    >>> cxx is None or isinstance(cxx, str)
    True
    """
    return shutil.which(os.environ.get("CXX", "g++"))


_versions: dict[str, str] = {}


def _version(cxx: str) -> str:
    if cxx not in _versions:
        _versions[cxx] = subprocess.run([cxx, "--version"], capture_output=True,
                                        text=True).stdout
    return _versions[cxx]


def cache_dir() -> Path:
    """Where built kernels are kept: ``$TORCIA_CACHE_DIR``, else ``~/.cache/torcia/compile``."""
    env = os.environ.get("TORCIA_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "torcia" / "compile"


_loaded: dict[str, ctypes.CDLL] = {}


def build(source: str) -> Path:
    """The shared library of ``source``, built unless the cache has it."""
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("torcia.compile's inductor backend needs a C++ compiler (set CXX)")
    digest = hashlib.sha256("\0".join([source, " ".join(FLAGS), str(VECTOR_MATH),
                                        _version(cxx)]).encode())
    path = cache_dir() / f"k{digest.hexdigest()[:24]}.so"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    errors = ""
    for prefix, libs in (VECTOR_MATH, ("", [])):
        with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
            src = Path(tmp) / "kernel.cpp"
            src.write_text(prefix + source)
            obj = Path(tmp) / "kernel.so"
            done = subprocess.run([cxx, *FLAGS, str(src), "-o", str(obj), *libs],
                                  capture_output=True, text=True)
            if done.returncode == 0:
                os.replace(obj, path)  # atomic: a concurrent build sees a whole file or none
                return path
            errors = done.stderr
    raise RuntimeError(f"compiling a fused kernel failed:\n{errors}")


def load(source: str):
    """``(path, kernel)``: the shared library of ``source`` (built unless the cache has it)
    and its ``kernel`` function, the library loaded once per process."""
    path = build(source)
    key = str(path)
    if key not in _loaded:
        _loaded[key] = ctypes.CDLL(key)
    return path, _loaded[key].kernel


class FusedKernel:
    """A generated elementwise kernel: called with its input arrays, returns the result
    (with ``kept_shape``, the chain's values before the reduction too, as a pair)."""

    def __init__(self, source, shapes, shape, dtype, ops, kept_shape=None):
        n_inputs = len(shapes)
        self.shapes = [tuple(s) for s in shapes]
        self.path, self.fn = load(source)
        self.fn.restype = None
        self.kept_shape = kept_shape
        n_out = 1 if kept_shape is None else 2
        self.fn.argtypes = [ctypes.c_void_p] * (n_inputs + n_out) + [ctypes.c_int64]
        self.n_inputs = n_inputs
        self.shape = shape
        self.dtype = dtype
        self.size = int(np.prod(shape, dtype=np.int64))
        self.ops = ops

    def __call__(self, *arrays, out=None):
        if len(arrays) != self.n_inputs:
            raise ValueError(f"fused kernel {self.ops} takes {self.n_inputs} arrays, got "
                             f"{len(arrays)}")
        ptrs = []
        keep = []
        for a, shape in zip(arrays, self.shapes):
            if isinstance(a, np.generic):  # a reduction's 0-d result
                a = np.asarray(a)
            if a.shape != shape or a.dtype != self.dtype:
                raise ValueError(f"fused kernel {self.ops} expects a {shape} {self.dtype} "
                                 f"array, got {a.shape} {a.dtype}")
            if not a.flags.c_contiguous:
                a = np.ascontiguousarray(a)
            keep.append(a)
            ptrs.append(a.ctypes.data)
        if self.kept_shape is not None:
            if out is not None:
                raise ValueError(f"fused kernel {self.ops} has two outputs: no out=")
            kept, out = np.empty(self.kept_shape, self.dtype), np.empty(self.shape, self.dtype)
            self.fn(*ptrs, kept.ctypes.data, out.ctypes.data, self.size)
            return kept, out
        if out is None:
            out = np.empty(self.shape, self.dtype)
        elif out.shape != self.shape or out.dtype != self.dtype or not out.flags.c_contiguous \
                or not out.flags.writeable:
            raise ValueError(f"fused kernel {self.ops} writes a contiguous {self.shape} "
                             f"{self.dtype} array, got out of {out.shape} {out.dtype}")
        self.fn(*ptrs, out.ctypes.data, self.size)
        return out
