"""torch.library's custom ops on torcia (``torcia.library.custom_op`` and its
registrations): gradients checked by finite differences, meta shapes from the fake
implementation, PyTorch's errors, and the same definitions run on PyTorch 2.13 where it
is installed."""

import itertools
import subprocess
import sys

import numpy as np
import pytest

import torcia
from torcia import library
from torcia.autograd import gradcheck, gradgradcheck

_names = itertools.count()


def _name(stem: str) -> str:
    # an op is defined once per process: every test defines its own
    return f"t{next(_names)}::{stem}"


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if getattr(torch, "Tensor", None) is not torcia.Tensor else None


def _define(lib, tensor_type, name):
    """The same op defined through ``lib`` (torcia.library or torch.library): x * sin(y) *
    k with a derivative and a fake implementation."""

    def scaled(x: tensor_type, y: tensor_type, k: float) -> tensor_type:
        return x * y.sin() * k

    op = lib.custom_op(name, mutates_args=())(scaled)

    def setup_context(ctx, inputs, output):
        x, y, k = inputs
        ctx.save_for_backward(x, y)
        ctx.k = k

    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return grad * y.sin() * ctx.k, grad * x * y.cos() * ctx.k, None

    op.register_autograd(backward, setup_context=setup_context)
    op.register_fake(lambda x, y, k: x.new_empty(x.shape))
    return op


def test_forward_gradients_and_second_order_by_finite_differences():
    op = _define(library, torcia.Tensor, _name("scaled"))
    rng = np.random.default_rng(0)
    x = torcia.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    y = torcia.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    np.testing.assert_allclose(op(x, y, 1.5).detach().numpy(),
                               x.detach().numpy() * np.sin(y.detach().numpy()) * 1.5)
    assert gradcheck(lambda a, b: op(a, b, 1.5), (x, y))
    # the backward is written with differentiable ops: second order comes with it
    assert gradgradcheck(lambda a, b: op(a, b, 1.5), (x, y))


def test_the_implementation_is_opaque_to_autograd():
    seen = []

    @library.custom_op(_name("peek"), mutates_args=())
    def peek(x: torcia.Tensor) -> torcia.Tensor:
        seen.append((x.requires_grad, torcia.is_grad_enabled()))
        return x * 2

    x = torcia.ones(2, requires_grad=True)
    y = peek(x)
    assert seen == [(False, False)]
    # as PyTorch: the output still requires grad, and backward says what is missing
    assert y.requires_grad
    with pytest.raises(RuntimeError, match=r"Trying to backward through t\d+\.peek\.default "
                                           "but no autograd formula was registered"):
        y.sum().backward()


def test_several_outputs_from_a_schema_string():
    name = _name("sum_prod")

    def sum_prod(a, b):
        return a + b, a * b

    op = library.custom_op(name, sum_prod, mutates_args=(),
                           schema="(Tensor a, Tensor b) -> (Tensor, Tensor)")

    def backward(ctx, g_sum, g_prod):
        a, b = ctx.saved_tensors
        return g_sum + g_prod * b, g_sum + g_prod * a

    library.register_autograd(
        name, backward, setup_context=lambda ctx, inputs, output: ctx.save_for_backward(*inputs))
    library.register_fake(name, lambda a, b: (torcia.empty_like(a), torcia.empty_like(a)))
    a = torcia.tensor([1.0, 2.0], dtype=torcia.float64, requires_grad=True)
    b = torcia.tensor([3.0, -1.0], dtype=torcia.float64, requires_grad=True)
    s, p = op(a, b)
    assert s.tolist() == [4.0, 1.0] and p.tolist() == [3.0, -2.0]
    # only one output used: the other's gradient is materialised as zeros
    p.sum().backward()
    assert a.grad.tolist() == [3.0, -1.0] and b.grad.tolist() == [1.0, 2.0]
    assert gradcheck(lambda a, b: op(a, b), (a.detach().requires_grad_(),
                                             b.detach().requires_grad_()))
    metas = op(torcia.empty(2, 5, device="meta"), torcia.empty(2, 5, device="meta"))
    assert [tuple(m.shape) for m in metas] == [(2, 5), (2, 5)]
    assert all(m.device.type == "meta" for m in metas)


def test_meta_needs_a_fake_implementation():
    @library.custom_op(_name("nofake"), mutates_args=())
    def nofake(x: torcia.Tensor) -> torcia.Tensor:
        return x + 1

    with pytest.raises(RuntimeError, match="There was no fake impl registered for "
                                           r"<CustomOpDef\(t\d+::nofake\)>"):
        nofake(torcia.empty(3, device="meta"))
    nofake.register_fake(lambda x: torcia.empty_like(x))
    assert nofake(torcia.empty(3, 7, device="meta")).shape == (3, 7)
    with pytest.raises(RuntimeError, match="already has a fake impl"):
        nofake.register_fake(lambda x: x)


def test_outputs_must_not_alias_inputs():
    @library.custom_op(_name("same"), mutates_args=())
    def same(x: torcia.Tensor) -> torcia.Tensor:
        return x[1:]

    with pytest.raises(RuntimeError, match="must not be one of its inputs"):
        same(torcia.ones(3))


def test_mutated_arguments_are_written_and_their_version_moves():
    @library.custom_op(_name("fill"), mutates_args={"out"})
    def fill(x: torcia.Tensor, out: torcia.Tensor) -> None:
        out.copy_(x * 2)

    out = torcia.zeros(3)
    before = out._version
    assert fill(torcia.arange(3.0), out) is None
    assert out.tolist() == [0.0, 2.0, 4.0]
    assert out._version > before


def test_a_kernel_per_device_type():
    @library.custom_op(_name("only_cuda"), mutates_args=(), device_types="cuda")
    def only_cuda(x: torcia.Tensor) -> torcia.Tensor:
        return x + 1

    with pytest.raises(NotImplementedError, match="no kernel for device type 'cpu'"):
        only_cuda(torcia.zeros(2))

    @only_cuda.register_kernel("cpu")
    def _(x):
        return x - 1

    assert only_cuda(torcia.zeros(2)).tolist() == [-1.0, -1.0]


def test_the_record_and_schema():
    name = _name("rec")

    def rec(x: torcia.Tensor, n: int = 2, *, scale: float | None = None) -> torcia.Tensor:
        return x * n

    op = library.custom_op(name, rec, mutates_args=())
    record = library.get_op(name)
    assert record.group == "custom" and record.inputs == ("x", "n", "scale")
    assert library.infer_schema(rec, mutates_args=()) == (
        "(Tensor x, int n=2, *, float? scale=None) -> Tensor")
    assert op(torcia.ones(2), scale=3.0).tolist() == [2.0, 2.0]
    assert op(torcia.ones(2), 3).tolist() == [3.0, 3.0]
    with pytest.raises(TypeError, match="argument 'x' must be a Tensor"):
        op(2.0)


@pytest.mark.parametrize("bad, error, match", [
    (lambda: library.custom_op("noname", mutates_args=())(lambda x: x), ValueError,
     "Expected there to be a namespace in noname"),
    (lambda: library.custom_op(_name("untyped"), mutates_args=())(lambda x: x), ValueError,
     "Parameter x must have a type annotation"),
    (lambda: library.custom_op(_name("bad_mut"), mutates_args={"y"})(_identity_typed),
     ValueError, "mutates_args contains 'y'"),
    (lambda: library.register_autograd(_name("missing"), lambda ctx, g: g), ValueError,
     "no custom op named"),
])
def test_refused_definitions(bad, error, match):
    with pytest.raises(error, match=match):
        bad()


def _identity_typed(x: torcia.Tensor) -> torcia.Tensor:
    return x.clone()


def test_torch_ops_namespaces_under_the_compat_runner():
    code = (
        "import torcia.compat\ntorcia.compat.install()\nimport torch\n"
        "@torch.library.custom_op('ns_test::inc', mutates_args=())\n"
        "def inc(x: torch.Tensor) -> torch.Tensor:\n"
        "    return x + 1\n"
        "print(torch.ops.ns_test.inc(torch.zeros(1)).tolist(),"
        " torch.ops.ns_test.inc.default is inc)\n"
        "try:\n    torch.ops.ns_test.dec\nexcept AttributeError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout.splitlines()
    assert out[0] == "[1.0] True"
    assert "no custom op ns_test::dec is defined" in out[1]


def test_defined_before_the_kernel_tables_are_built():
    # a fresh process: the op goes in through the plugin's hooks, not into built tables
    code = (
        "import torcia\n"
        "from torcia import library\n"
        "@library.custom_op('early::twice', mutates_args=())\n"
        "def twice(x: torcia.Tensor) -> torcia.Tensor:\n"
        "    return x * 2\n"
        "print(twice(torcia.ones(2)).tolist(), library.get_op('early::twice').group)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    assert out.strip() == "[2.0, 2.0] custom"


def test_same_values_gradients_and_errors_as_pytorch():
    torch = _torch()
    if torch is None:
        pytest.skip("PyTorch is not installed")
    name = _name("scaled")
    ours = _define(library, torcia.Tensor, name)
    theirs = _define(torch.library, torch.Tensor, name)
    rng = np.random.default_rng(3)
    xs, ys = rng.standard_normal((2, 5)), rng.standard_normal((2, 5))
    results = []
    for fw, op in ((torcia, ours), (torch, theirs)):
        x = fw.tensor(xs, requires_grad=True)
        y = fw.tensor(ys, requires_grad=True)
        out = op(x, y, -0.5)
        out.pow(2).sum().backward()
        results.append([t.detach().numpy() for t in (out, x.grad, y.grad)])
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    assert library.infer_schema(_identity_typed, mutates_args=()) == \
        torch.library.infer_schema(_identity_typed_torch(torch), mutates_args=())


def _identity_typed_torch(torch):
    def _identity_typed(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    return _identity_typed
