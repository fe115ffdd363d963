"""What :func:`torcia.jit.script` reads of a function's source before it runs: control
flow that depends on tensor values.

torcia's ``script`` compiles by capturing the ops a call runs (as ``trace`` and
``torcia.export`` do), which one graph can hold only when the branches Python takes do
not depend on the data. Reading the source finds the ``if``, ``while``, ``for``,
conditional expression, ``assert`` or ``and``/``or`` whose condition reads a tensor's
values, before any call; an untyped argument is a tensor, as in TorchScript, and sizes
(``x.shape``, ``x.size(0)``, ``x.dim()``, ``len(x)``), dtypes, devices and ``is None``
tests are not values.
"""

from __future__ import annotations

import ast
import inspect
import textwrap

import torcia
from torcia import nn


class NotSupportedError(RuntimeError):
    """What :func:`torcia.jit.script` refuses to compile: control flow that depends on
    tensor values, named with its line (``torch.jit.frontend.NotSupportedError``).

    Examples
    --------
    >>> import torcia
    >>> issubclass(torcia.jit.NotSupportedError, RuntimeError)
    True
    """


NotSupportedError.__module__ = "torcia.jit"

_SIZE_ATTRS = {"shape", "ndim", "dtype", "device", "is_cuda", "requires_grad", "layout",
               "is_sparse", "is_quantized", "is_leaf", "names"}
_SIZE_METHODS = {"size", "dim", "numel", "nelement", "ndimension", "is_floating_point",
                 "is_complex", "get_device", "element_size", "is_contiguous", "stride",
                 "storage_offset"}
_SIZE_FUNCTIONS = {"len", "isinstance", "hasattr", "type", "callable", "getattr"}
_NOT_TENSOR_TYPES = ("int", "float", "bool", "str", "List[int]", "list[int]",
                     "Tuple[int", "tuple[int", "List[str]", "list[str]", "Optional[int]",
                     "Optional[float]", "Optional[bool]", "Optional[str]", "None", "Any")


class _Flow(ast.NodeVisitor):
    """Marks names that hold tensor data, then finds conditions that read them."""

    def __init__(self, tensors: set, owner, scope=None, depth=0):
        self.tensors = set(tensors)
        self.owner = owner
        self.scope = scope or {}  # the function's globals: the helpers it calls
        self.depth = depth
        self.found: list = []  # (ast node, kind)

    # -- is an expression tensor data? ------------------------------------------------

    def data(self, node) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.tensors
        if isinstance(node, ast.Attribute):
            if node.attr in _SIZE_ATTRS:
                return False
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                return isinstance(getattr(self.owner, node.attr, None), torcia.Tensor)
            return self.data(node.value)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _SIZE_FUNCTIONS:
                return False
            if isinstance(func, ast.Attribute) and func.attr in _SIZE_METHODS:
                return False
            if isinstance(func, ast.Attribute) and self.data(func.value):
                return True  # a tensor's method: x.sum(), x.max()
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    and func.value.id == "self" and isinstance(
                        getattr(self.owner, func.attr, None), nn.Module):
                return any(self.data(a) for a in node.args)  # a submodule on tensors
            if not any(self.data(a) for a in [*node.args, *(k.value for k in node.keywords)]):
                return False
            return self._returned(func) != [False]
        if isinstance(node, ast.Compare):
            if all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
                return False
            return any(self.data(x) for x in [node.left, *node.comparators])
        if isinstance(node, ast.Subscript):
            return self.data(node.value)
        if isinstance(node, (ast.BinOp,)):
            return self.data(node.left) or self.data(node.right)
        if isinstance(node, ast.UnaryOp):
            return self.data(node.operand)
        if isinstance(node, ast.BoolOp):
            return any(self.data(v) for v in node.values)
        if isinstance(node, ast.IfExp):
            return self.data(node.body) or self.data(node.orelse)
        if isinstance(node, (ast.Tuple, ast.List)):
            return any(self.data(e) for e in node.elts)
        return False

    def _returned(self, func, n=1):
        """What ``func`` returns, for a helper named in the code (a function of the module,
        or a method of ``self``) whose source can be read: ``[data?]``, or one flag per
        item where every ``return`` gives an ``n``-tuple (``shape_of(x)`` returning
        ``x.shape`` gives ``[False]``); None where unknown. One level deep."""
        if self.depth > 0:
            return None
        if isinstance(func, ast.Name):
            target = self.scope.get(func.id)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == "self" and self.owner is not None:
            target = getattr(type(self.owner), func.attr, None)
        else:
            return None
        fn_node, _, _, target = _parse(target)
        if fn_node is None:
            return None
        inner = _Flow(_tensor_args(fn_node), self.owner, target.__globals__, self.depth + 1)
        for stmt in fn_node.body:
            inner.visit(stmt)
        returns = [r.value for r in ast.walk(fn_node) if isinstance(r, ast.Return)]
        if not returns or any(v is None for v in returns):
            return None
        if n > 1 and all(isinstance(v, ast.Tuple) and len(v.elts) == n for v in returns):
            return [any(inner.data(v.elts[i]) for v in returns) for i in range(n)]
        return [any(inner.data(v) for v in returns)]

    # -- assignments carry data --------------------------------------------------------

    def _bind(self, target, is_data: bool) -> None:
        if isinstance(target, ast.Name):
            if is_data:
                self.tensors.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._bind(t, is_data)

    def visit_Assign(self, node):
        for t in node.targets:
            if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Call) and self.data(
                    node.value):
                # a helper's tuple: which of its items are data (x, batched = prepare(x))
                each = self._returned(node.value.func, len(t.elts))
                if each is not None and len(each) == len(t.elts):
                    for target, is_data in zip(t.elts, each):
                        self._bind(target, is_data)
                    continue
            self._bind(t, self.data(node.value))
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self._bind(node.target, self.data(node.value))
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._bind(node.target, self.data(node.value))
        self.generic_visit(node)

    def visit_For(self, node):
        # iterating over a tensor goes along its first dimension: a size, not data;
        # over range(<data>) reads values
        it = node.iter
        if not isinstance(it, (ast.Name, ast.Tuple, ast.List)) and self.data(it) and not (
                isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr in ("unbind", "split", "chunk", "children", "parameters")):
            self.found.append((node, "for"))
        target = node.target
        if isinstance(it, (ast.Tuple, ast.List)) and isinstance(target, ast.Tuple) and all(
                isinstance(e, ast.Tuple) and len(e.elts) == len(target.elts) for e in it.elts):
            # a literal of tuples: each loop variable holds data where some tuple's item does
            for i, t in enumerate(target.elts):
                self._bind(t, any(self.data(e.elts[i]) for e in it.elts))
        else:
            self._bind(target, (isinstance(it, ast.Name) and it.id in self.tensors)
                       or (isinstance(it, (ast.Tuple, ast.List)) and self.data(it)))
        self.generic_visit(node)

    # -- conditions ------------------------------------------------------------------

    def visit_If(self, node):
        if self.data(node.test):
            self.found.append((node, "if"))
        self.generic_visit(node)

    def visit_While(self, node):
        if self.data(node.test):
            self.found.append((node, "while"))
        self.generic_visit(node)

    def visit_IfExp(self, node):
        if self.data(node.test):
            self.found.append((node, "if"))
        self.generic_visit(node)

    def visit_Assert(self, node):
        if self.data(node.test):
            self.found.append((node, "assert"))
        self.generic_visit(node)

    def visit_BoolOp(self, node):
        if any(self.data(v) for v in node.values[:-1]):
            self.found.append((node, "and" if isinstance(node.op, ast.And) else "or"))
        self.generic_visit(node)


def _tensor_args(fn_node: ast.FunctionDef) -> set:
    """The arguments TorchScript types as Tensor: unannotated ones, and those whose
    annotation names Tensor (not ``self``)."""
    out = set()
    args = fn_node.args
    positional = [*args.posonlyargs, *args.args]
    defaults = dict(zip([a.arg for a in positional][len(positional) - len(args.defaults):],
                        args.defaults))
    defaults.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d)
    for a in [*positional, *args.kwonlyargs]:
        if a.arg == "self":
            continue
        ann = ast.unparse(a.annotation) if a.annotation is not None else ""
        default = defaults.get(a.arg)
        if not ann and isinstance(default, ast.Constant) and isinstance(
                default.value, (bool, int, float, str)):
            continue  # typed by its default, as TorchScript infers it: a flag, not a tensor
        if not ann or ("Tensor" in ann) or not ann.startswith(_NOT_TENSOR_TYPES):
            out.add(a.arg)
    return out


def _parse(fn):
    """(function node, source lines, first line, unwrapped function) of ``fn``'s source,
    or Nones where it cannot be read (a builtin, a lambda inside an expression)."""
    fn = inspect.unwrap(getattr(fn, "__func__", fn)) if fn is not None else None
    if not inspect.isfunction(fn):
        return None, None, None, None
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None, None, None, None
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None, None, None, None
    fn_node = next((n for n in ast.walk(tree)
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    return fn_node, lines, start, fn


def check(fn, owner=None, name: str | None = None) -> None:
    """Raise :class:`NotSupportedError` where ``fn``'s control flow depends on tensor
    values (nothing when its source cannot be read: the capture still refuses)."""
    fn_node, lines, start, fn = _parse(fn)
    if fn_node is None:
        return
    file = inspect.getsourcefile(fn) or "<unknown>"
    flow = _Flow(_tensor_args(fn_node), owner, fn.__globals__)
    for _ in range(2):  # twice: a name made from data later in a loop body
        flow.found = []
        for stmt in fn_node.body:
            flow.visit(stmt)
    if not flow.found:
        return
    node, kind = min(flow.found, key=lambda f: f[0].lineno)
    line = start + node.lineno - 1
    text = lines[node.lineno - 1].strip() if node.lineno - 1 < len(lines) else ""
    qual = name or getattr(fn, "__qualname__", fn.__name__)
    raise NotSupportedError(
        f"torcia.jit.script cannot compile {qual}: data-dependent control flow. The "
        f"`{kind}` at\n  File \"{file}\", line {line}, in {fn.__name__}\n    {text}\n"
        "reads the values of a tensor, so what runs next depends on the data, and "
        "torcia.jit.script compiles what one traced graph can hold. Compute both branches "
        "and select with torcia.where, or trace it (torcia.jit.trace records the branch "
        "the example inputs take; torcia.export refuses the branch, naming it).")
