"""Forward AD levels and tangent identity (issue #44).

``make_dual`` keeps the tangent it is given (``unpack_dual(make_dual(p, t)).tangent is
t``, as PyTorch); ``dual_level`` opens one level at a time, as PyTorch; levels opened with
``nested_dual_level`` (what ``torcia.func.jvp`` opens) nest, each with its own tangents,
so forward mode composes with itself: ``jacfwd(jacfwd(f))`` and ``jvp`` of a ``jvp``.
Checked by hand-derived derivatives, then against torch.func where installed.
"""

import numpy as np
import pytest

import torcia
import torcia.autograd.forward_ad as fwAD

F64 = torcia.float64


def test_make_dual_keeps_the_tangent_object():
    p, t = torcia.randn(3), torcia.randn(3)
    with fwAD.dual_level():
        dual = fwAD.make_dual(p, t)
        assert fwAD.unpack_dual(dual).tangent is t
        y = dual * 2
        # an output's tangent is one object too, however often it is read
        assert fwAD.unpack_dual(y).tangent is fwAD.unpack_dual(y).tangent
        # a tangent of another dtype is kept as given, as PyTorch does
        wide = torcia.ones(3, dtype=F64)
        assert fwAD.unpack_dual(fwAD.make_dual(p, wide)).tangent is wide


def test_a_tangent_at_the_same_level_twice_is_refused():
    with fwAD.dual_level():
        dual = fwAD.make_dual(torcia.ones(2), torcia.ones(2))
        with pytest.raises(RuntimeError, match="already has a forward gradient at the same"):
            fwAD.make_dual(dual, torcia.ones(2))


def test_dual_level_does_not_nest_as_in_pytorch():
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="Nested forward mode AD is not supported"):
            with fwAD.dual_level():
                pass
    # and it can be opened again afterwards
    with fwAD.dual_level():
        assert fwAD.unpack_dual(fwAD.make_dual(torcia.ones(1), torcia.ones(1))).tangent == 1


def test_nested_levels_carry_each_others_tangents():
    # y = x^3 at x = 2: the inner tangent 3x^2 = 12 carries the outer one, 6x = 12;
    # the outer tangent of y is 3x^2 = 12, and the level numbers name the tangents
    with fwAD.nested_dual_level() as outer:
        x = fwAD.make_dual(torcia.tensor(2.0, dtype=F64), torcia.tensor(1.0, dtype=F64),
                           level=outer)
        with fwAD.nested_dual_level() as inner:
            assert inner != outer
            y = fwAD.make_dual(x, torcia.tensor(1.0, dtype=F64), level=inner) ** 3
            dy = fwAD.unpack_dual(y, level=inner).tangent
            assert dy.item() == 12.0
            assert fwAD.unpack_dual(y, level=outer).tangent.item() == 12.0
        assert fwAD.unpack_dual(dy, level=outer).tangent.item() == 12.0
        # the inner level closed: its tangents are gone, the outer ones stay
        assert fwAD.unpack_dual(y, level=inner).tangent is None
        assert fwAD.is_dual(y)
    assert not fwAD.is_dual(y) and not fwAD.is_dual(dy)


def test_levels_close_innermost_first():
    level = fwAD.nested_dual_level()
    outer = level.__enter__()
    with fwAD.nested_dual_level():
        with pytest.raises(RuntimeError, match="not the last one"):
            fwAD.exit_dual_level(level=outer)
    level.__exit__(None, None, None)


def _func():
    """torcia.func, which torcia-nn provides: the tests of its transforms skip without it."""
    return pytest.importorskip("torcia.func")


def test_jvp_of_jvp_is_the_second_directional_derivative():
    # f = sin(x) * x: f'' = 2 cos(x) - x sin(x), along u then v: sum u v f''
    x = torcia.tensor([0.3, -1.2, 2.0], dtype=F64)
    u = torcia.tensor([1.0, 0.5, -2.0], dtype=F64)
    v = torcia.tensor([0.25, -1.0, 1.5], dtype=F64)
    jvp = _func().jvp

    def f(z):
        return (z.sin() * z).sum()

    _, second = jvp(lambda z: jvp(f, (z,), (u,))[1], (x,), (v,))
    want = (u * v * (2 * x.cos() - x * x.sin())).sum()
    assert torcia.allclose(second, want)


def test_jacfwd_of_jacfwd_is_the_hessian():
    func = _func()
    jacfwd, jacrev = func.jacfwd, func.jacrev
    x = torcia.tensor([0.3, -1.2, 2.0], dtype=F64)

    def f(z):
        return (z.exp() * z[0]).sum()

    # d2/dzi dzj of z0 sum exp(z): exp(z0)(2 + z0) at (0,0), exp(zi) at (0,i) and (i,0),
    # z0 exp(zi) on the rest of the diagonal
    e = x.exp().numpy()
    want = np.diag(x[0].item() * e)
    want[0, 0] = e[0] * (2 + x[0].item())
    want[0, 1:] = want[1:, 0] = e[1:]
    for h in (jacfwd(jacfwd(f))(x), func.hessian(f)(x), jacrev(jacfwd(f))(x)):
        np.testing.assert_allclose(h.numpy(), want, rtol=1e-12)


def test_third_order_matches_torch():
    torch = pytest.importorskip("torch")
    jacfwd = _func().jacfwd
    x = np.random.default_rng(0).standard_normal(3)

    def body(lib):
        return lambda z: (z.tanh() * z.sum()).prod()

    ours = jacfwd(jacfwd(jacfwd(body(torcia))))(torcia.tensor(x))
    theirs = torch.func.jacfwd(torch.func.jacfwd(torch.func.jacfwd(body(torch))))(
        torch.tensor(x))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10)
