"""gradcheck and gradgradcheck with PyTorch's whole signature (issue #44): each option
does what PyTorch's does, shown on functions built to pass or to fail it."""

from __future__ import annotations

import inspect

import pytest

import torcia
from torcia.autograd import Function, GradcheckError, gradcheck, gradgradcheck

F64 = torcia.float64


def leaf(*shape):
    return torcia.randn(*shape, dtype=F64).requires_grad_(True)


def test_signatures_are_pytorchs():
    torch = pytest.importorskip("torch")
    for ours, theirs in ((gradcheck, torch.autograd.gradcheck),
                         (gradgradcheck, torch.autograd.gradgradcheck)):
        a, b = inspect.signature(ours).parameters, inspect.signature(theirs).parameters
        assert list(a) == list(b)
        assert [(p.kind, p.default) for p in a.values()] == [(p.kind, p.default)
                                                             for p in b.values()]


class Counted(Function):
    """x * 2, counting the calls of its backward and of its jvp."""

    calls = {"backward": 0, "jvp": 0}

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        Counted.calls["backward"] += 1
        return grad * 2

    @staticmethod
    def jvp(ctx, tangent):
        Counted.calls["jvp"] += 1
        return tangent * 2


def test_check_backward_ad_false_never_calls_backward():
    Counted.calls.update(backward=0, jvp=0)
    assert gradcheck(Counted.apply, (leaf(3),), check_forward_ad=True,
                     check_backward_ad=False)
    assert Counted.calls == {"backward": 0, "jvp": 3}


def test_forward_mode_is_checked_against_finite_differences():
    class WrongJvp(Counted):
        @staticmethod
        def jvp(ctx, tangent):
            return tangent * 3

    with pytest.raises(GradcheckError, match="Jacobian computed with forward mode mismatch"):
        gradcheck(WrongJvp.apply, (leaf(3),), check_forward_ad=True, check_backward_ad=False)


def test_fast_mode_passes_right_derivatives_and_catches_wrong_ones():
    x = leaf(4)
    assert gradcheck(lambda t: (t.sin() * t).cumsum(0), (x,), fast_mode=True,
                     check_forward_ad=True)
    with pytest.raises(GradcheckError, match="Fast gradcheck failed"):
        gradcheck(lambda t: t.detach() * t, (x,), fast_mode=True)
    assert not gradcheck(lambda t: t.detach() * t, (x,), fast_mode=True,
                         raise_exception=False)


class Noisy(Function):
    """A backward that differs from run to run by up to 1e-9 of its value."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * (2 + torcia.rand(grad.shape, dtype=F64) * 1e-9)


def test_nondet_tol():
    with pytest.raises(GradcheckError, match="Backward is not reentrant"):
        gradcheck(Noisy.apply, (leaf(3),))
    assert gradcheck(Noisy.apply, (leaf(3),), nondet_tol=1e-8)


class Pair(Function):
    """(2x, 3x), whose backward is right where an output gets no gradient (None) and
    wrong where it gets zeros alongside a nonzero one."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        if g1 is None:
            return g2 * 3
        if g2 is None:
            return g1 * 2
        return g1 * 2 + g2 * 3 + g1 * (g2 == 0).all()


def test_check_undefined_grad():
    with pytest.raises(GradcheckError, match="undefined output gradients to act as zeros"):
        gradcheck(Pair.apply, (leaf(2),))
    assert gradcheck(Pair.apply, (leaf(2),), check_undefined_grad=False)


def test_backward_must_scale_with_the_output_gradient():
    class Constant(Function):
        # a gradient of 2 whatever the output gradient: right at ones, wrong at zeros
        @staticmethod
        def forward(ctx, x):
            return (x * 2).sum()

        @staticmethod
        def backward(ctx, grad):
            return torcia.full((3,), 2.0, dtype=F64)

    with pytest.raises(GradcheckError, match="not multiplied by grad_output"):
        gradcheck(Constant.apply, (leaf(3),))


def test_check_batched_grad():
    pytest.importorskip("torcia.func")  # the batched checks vmap with torcia-nn's torcia.func
    x = leaf(2, 3)
    assert gradcheck(lambda t: (t @ t.mT).tanh(), (x,), check_batched_grad=True)

    class ReadsValues(Function):
        # a backward that reads its gradient's values as one array: not batchable
        @staticmethod
        def forward(ctx, t):
            return t * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2 if grad.sum().item() != 1e300 else grad

    with pytest.raises(GradcheckError, match="While computing batched gradients"):
        gradcheck(ReadsValues.apply, (leaf(3),), check_batched_grad=True)
    assert gradcheck(ReadsValues.apply, (leaf(3),))


def test_check_batched_forward_grad():
    pytest.importorskip("torcia.func")
    assert gradcheck(lambda t: t.exp() * t.sum(), (leaf(3),), check_forward_ad=True,
                     check_batched_forward_grad=True)


def test_check_grad_dtypes():
    # the engine casts every gradient to its input's dtype, so this holds by construction
    assert gradcheck(lambda t: t * 2, (leaf(3),), check_grad_dtypes=True)


def test_non_contiguous_inputs_stay_non_contiguous():
    seen = []

    def f(t):
        seen.append(t.is_contiguous())
        return t * t

    base = torcia.randn(3, 4, dtype=F64)
    assert gradcheck(f, (base.mT.requires_grad_(True),))
    assert not any(seen)


def test_gradgradcheck_options():
    x = leaf(3)
    assert gradgradcheck(lambda t: t.sin() * t, (x,), gen_non_contig_grad_outputs=True)
    assert gradgradcheck(lambda t: t.sin() * t, (x,), check_fwd_over_rev=True,
                         check_rev_over_rev=False)
    assert gradgradcheck(lambda t: t.sin() * t, (x,), fast_mode=True)


def test_gradgradcheck_batched_grad():
    pytest.importorskip("torcia.func")
    assert gradgradcheck(lambda t: (t ** 3).sum(), (leaf(3),), check_batched_grad=True)


def test_gradgradcheck_fwd_over_rev_catches_a_wrong_second_derivative():
    class CubeWrongSecond(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x.detach() ** 2  # the second derivative is lost

        @staticmethod
        def jvp(ctx, tangent):
            return tangent * 3 * ctx.saved_tensors[0] ** 2

    with pytest.raises(GradcheckError):
        gradgradcheck(CubeWrongSecond.apply, (leaf(3),), check_fwd_over_rev=True,
                      check_rev_over_rev=False)
