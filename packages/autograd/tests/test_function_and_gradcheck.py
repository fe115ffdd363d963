"""Custom ``Function``s (ctx and its options) and gradcheck/gradgradcheck catching wrong
derivatives."""

from __future__ import annotations

import pytest

import torcia
from torcia.autograd import Function, GradcheckError, gradcheck, gradgradcheck, once_differentiable

F64 = torcia.float64


def leaf(values):
    return torcia.tensor(values, dtype=F64, requires_grad=True)


class Cube(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x ** 2


class WrongCube(Cube):
    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x ** 2  # wrong factor


class CubeWrongSecond(Cube):
    """Right first derivative; its backward is built from ops whose own derivative is
    wrong (x.detach() hides x from the second derivative)."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x.detach() ** 2


# ----- Function -----------------------------------------------------------------------------


def test_function_forward_backward_and_node_name():
    x = leaf([1.0, 2.0])
    y = Cube.apply(x)
    assert y.grad_fn.name() == "CubeBackward"
    assert y.grad_fn.next_functions[0][1] == 0
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 12.0]


def test_function_gradcheck_and_double_backward():
    x = torcia.randn(3, dtype=F64, requires_grad=True)
    assert gradcheck(Cube.apply, (x,))
    assert gradgradcheck(Cube.apply, (x,))


def test_forward_without_ctx_and_setup_context():
    class Mul(Function):
        @staticmethod
        def forward(x, y):
            return x * y

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs)

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * y, grad * x

    x, y = leaf([2.0, 3.0]), leaf([5.0, 7.0])
    Mul.apply(x, y).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0] and y.grad.tolist() == [2.0, 3.0]
    assert gradgradcheck(Mul.apply, (leaf([0.5, 1.5]), leaf([2.0, -1.0])))


def test_needs_input_grad_and_non_tensor_arguments():
    seen = {}

    class Scale(Function):
        @staticmethod
        def forward(ctx, x, y, factor):
            seen["needs"] = ctx.needs_input_grad
            ctx.factor = factor
            return x * y * factor

        @staticmethod
        def backward(ctx, grad):
            return grad * ctx.factor, None, None

    x, y = leaf([1.0]), torcia.tensor([2.0], dtype=F64)
    Scale.apply(x, y, 4.0).sum().backward()
    assert seen["needs"] == (True, False, False) and x.grad.item() == 4.0


def test_mark_non_differentiable():
    class SortWithIndex(Function):
        @staticmethod
        def forward(ctx, x):
            values, idx = torcia.sort(x)
            ranks = idx.to(x.dtype)
            ctx.mark_non_differentiable(ranks)
            ctx.save_for_backward(idx)
            return values, ranks

        @staticmethod
        def backward(ctx, g_values, g_ranks):
            (idx,) = ctx.saved_tensors
            return torcia.zeros_like(g_values).scatter(0, idx, g_values)

    x = leaf([3.0, 1.0, 2.0])
    values, ranks = SortWithIndex.apply(x)
    assert values.requires_grad and not ranks.requires_grad
    (values * torcia.tensor([1.0, 2.0, 3.0], dtype=F64)).sum().backward()
    assert x.grad.tolist() == [3.0, 1.0, 2.0]


def test_mark_dirty():
    class AddOneInPlace(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        AddOneInPlace.apply(leaf([1.0]))
    x = leaf([1.0, 2.0])
    a = x * 2
    b = AddOneInPlace.apply(a)
    assert b is a and a.tolist() == [3.0, 5.0]
    assert a.grad_fn.name() == "AddOneInPlaceBackward"
    (a * a).sum().backward()
    assert x.grad.tolist() == [12.0, 20.0]


def test_set_materialize_grads():
    seen = {}

    def make(materialize):
        class Two(Function):
            @staticmethod
            def forward(ctx, x):
                ctx.set_materialize_grads(materialize)
                return x * 2, x * 3

            @staticmethod
            def backward(ctx, g1, g2):
                seen[materialize] = g2
                return g1 * 2 if g2 is None else g1 * 2 + g2 * 3

        return Two

    for materialize in (True, False):
        x = leaf([1.0])
        a, _ = make(materialize).apply(x)
        a.sum().backward()
        assert x.grad.item() == 2.0
    assert seen[True].tolist() == [0.0] and seen[False] is None


def test_wrong_number_or_shape_of_gradients():
    class TooFew(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        TooFew.apply(leaf([1.0]), leaf([2.0])).sum().backward()

    class BadShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return grad.sum()

    with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
        BadShape.apply(leaf([1.0, 2.0])).sum().backward()


def test_gradient_takes_the_input_dtype_as_in_pytorch():
    # PyTorch's validate_outputs casts a backward's gradient to its input's dtype, so a
    # leaf's .grad keeps the leaf's dtype through backward and autograd.grad alike
    class Widen(Function):
        @staticmethod
        def forward(ctx, x):
            return x.double()

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    x = torcia.tensor([1.0, 2.0], requires_grad=True)
    Widen.apply(x).sum().backward()
    assert x.grad.dtype is torcia.float32 and x.grad.tolist() == [2.0, 2.0]
    (g,) = torcia.autograd.grad(Widen.apply(x).sum(), x)
    assert g.dtype is torcia.float32
    b = torcia.ones(2, dtype=torcia.bfloat16, requires_grad=True)
    Widen.apply(b).sum().backward()
    assert b.grad.dtype is torcia.bfloat16


def test_saved_tensors_freed_after_backward():
    x = leaf([1.0])
    y = Cube.apply(x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="second time"):
        _ = y.grad_fn.ctx.saved_tensors


def test_once_differentiable_blocks_double_backward():
    class Once(Cube):
        @staticmethod
        @once_differentiable
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x ** 2

    x = leaf([2.0])
    (g,) = torcia.autograd.grad(Once.apply(x).sum(), x, create_graph=True)
    assert g.item() == 12.0 and not g.requires_grad  # as in PyTorch: the seed needs no grad
    seed = torcia.ones(1, dtype=F64, requires_grad=True)
    (g,) = torcia.autograd.grad(Once.apply(x), x, seed, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()


def test_function_under_no_grad_records_nothing():
    x = leaf([1.0])
    with torcia.no_grad():
        y = Cube.apply(x)
    assert not y.requires_grad and y.grad_fn is None


def test_function_matches_torch_function():
    torch = pytest.importorskip("torch")

    class TorchCube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x ** 2

    t = torch.tensor([0.5, -1.5], dtype=torch.float64, requires_grad=True)
    x = leaf([0.5, -1.5])
    (gt,) = torch.autograd.grad(TorchCube.apply(t).sum(), t, create_graph=True)
    (gx,) = torcia.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    assert gx.tolist() == gt.tolist()
    assert torcia.autograd.grad(gx.sum(), x)[0].tolist() == \
        torch.autograd.grad(gt.sum(), t)[0].tolist()


# ----- gradcheck catches wrong derivatives ----------------------------------------------------


def test_gradcheck_fails_on_a_wrong_first_derivative():
    x = torcia.randn(3, dtype=F64, requires_grad=True)
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradcheck(WrongCube.apply, (x,))
    assert gradcheck(WrongCube.apply, (x,), raise_exception=False) is False


def test_gradgradcheck_fails_on_a_wrong_second_derivative():
    x = torcia.randn(3, dtype=F64, requires_grad=True)
    assert gradcheck(CubeWrongSecond.apply, (x,))
    with pytest.raises(GradcheckError):
        gradgradcheck(CubeWrongSecond.apply, (x,))


def test_gradcheck_leaves_inputs_untouched_and_needs_a_grad_input():
    x = torcia.randn(2, 3, dtype=F64).mT.requires_grad_()
    before = x.detach().clone()
    assert gradcheck(lambda t: (t * t).sum(1), (x,))
    assert x.tolist() == before.tolist()
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradcheck(lambda t: t * 2, (torcia.randn(2, dtype=F64),))


def test_gradcheck_warns_on_float32():
    x = torcia.randn(2, requires_grad=True)
    with pytest.warns(UserWarning, match="not a double precision"):
        gradcheck(lambda t: t * 2, (x,), eps=1e-2, atol=1e-2, raise_exception=False)


def test_variable_is_every_tensor():
    import torcia
    from torcia.autograd import Variable

    t = torcia.ones(2)
    v = Variable(t, requires_grad=True)
    assert v.requires_grad and not t.requires_grad
    assert isinstance(t, Variable) and isinstance(v, Variable)
    assert not isinstance([1.0], Variable)
    (v * 2).sum().backward()
    assert v.grad.tolist() == [2.0, 2.0]
    try:
        Variable([1.0])
    except TypeError as exc:
        assert "has to be a tensor" in str(exc)
    else:
        raise AssertionError("Variable accepted a list")
