"""Forward-mode AD: dual tensors, where each op's JVP comes from, and parity with
PyTorch's forward_ad."""

from __future__ import annotations

import numpy as np
import pytest

import torcia
import torcia.autograd.forward_ad as fwAD
from torcia.autograd import derivatives, forward_derivatives


def test_tangent_flows_and_the_level_cleans_up():
    x = torcia.tensor([0.5, 1.0, 2.0], dtype=torcia.float64)
    v = torcia.tensor([1.0, 0.0, -1.0], dtype=torcia.float64)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, v)
        y = (d.exp() * d).sum()
        primal, tangent = fwAD.unpack_dual(y)
        assert not d.requires_grad and not y.requires_grad
    xv = x.numpy()
    np.testing.assert_allclose(tangent.numpy(), (np.exp(xv) * (1 + xv) * v.numpy()).sum())
    np.testing.assert_allclose(primal.numpy(), (np.exp(xv) * xv).sum())
    assert type(d) is torcia.Tensor and not d.requires_grad
    assert fwAD.unpack_dual(y).tangent is None


def test_dual_of_a_tensor_that_requires_grad_still_backpropagates():
    x = torcia.tensor([1.0, 2.0], dtype=torcia.float64, requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, torcia.ones(2, dtype=torcia.float64))
        y = (d * d).sum()
        assert y.requires_grad
        # the tangent depends on x: differentiable in reverse mode too, as in PyTorch
        assert fwAD.unpack_dual(y).tangent.requires_grad
        np.testing.assert_allclose(fwAD.unpack_dual(y).tangent.detach().numpy(), 6.0)
        y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])


def test_in_place_ops_on_duals_carry_the_tangent():
    with fwAD.dual_level():
        d = fwAD.make_dual(torcia.tensor([1.0, 2.0, 3.0]), torcia.ones(3))
        z = d * 1
        z[1:].mul_(z[1:])
        np.testing.assert_allclose(fwAD.unpack_dual(z).tangent.numpy(), [1.0, 4.0, 6.0])
        w = fwAD.make_dual(torcia.zeros(2), torcia.ones(2))
        w.add_(1)
        np.testing.assert_allclose(fwAD.unpack_dual(w).tangent.numpy(), [1.0, 1.0])


def test_errors():
    with pytest.raises(RuntimeError, match="within a forward AD level"):
        fwAD.make_dual(torcia.ones(2), torcia.ones(2))
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match="different size"):
            fwAD.make_dual(torcia.ones(2), torcia.ones(3))
        with pytest.raises(ValueError, match="floating point"):
            fwAD.make_dual(torcia.ones(2, dtype=torcia.int64), torcia.ones(2))
        with pytest.raises(RuntimeError, match="Nested forward mode AD"):
            fwAD.enter_dual_level()


def test_every_row_has_a_jvp_and_the_kinds_are_sensible():
    kinds = {op: forward_derivatives.kind(op) for op in derivatives.TABLE
             if derivatives.TABLE[op].fn is not None}
    assert set(kinds.values()) <= {"formula", "linear", "transposed-vjp"}
    for op in ("add", "sub", "neg", "sum", "reshape", "permute", "getitem", "cat"):
        assert kinds[op] == "linear", op
    for op in ("sign", "floor", "copy_slices"):
        assert kinds.get(op, "transposed-vjp") == "transposed-vjp"


@pytest.mark.parametrize("op", sorted(forward_derivatives.JVP))
def test_written_formulas_match_the_transposed_vjp(op):
    rng = np.random.default_rng(0)
    shapes = {"matmul": [(3, 4), (4, 2)], "mul": [(3, 4), (3, 4)], "div": [(3, 4), (3, 4)],
              "pad": [(3, 4)]}.get(op, [(3, 4)])
    primals = [torcia.tensor(rng.uniform(0.5, 2.0, s)) for s in shapes]
    tangents = [torcia.tensor(rng.standard_normal(s)) for s in shapes]
    params = {"pad": {"pad": (1, 2), "mode": "constant", "value": 3.0},
              "div": {"rounding_mode": None}}.get(op, {})
    result = torcia.library.call(op, tuple(primals), params)
    written = forward_derivatives.JVP[op](tangents, *primals, result=result, **params)
    derived = forward_derivatives._transposed_vjp(op, tuple(primals), tangents, params, result)
    np.testing.assert_allclose(written.numpy(), derived.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.torch
def test_matches_torch_forward_ad():
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as tfwAD

    rng = np.random.default_rng(1)
    xv, tv = rng.uniform(0.5, 2.0, (3, 4)), rng.standard_normal((3, 4))
    wv = rng.standard_normal((4, 2))

    def f(lib, x, w):
        h = (x @ w).tanh() * x[:, :2].log() + x.sum(0)[:2]
        return (h.softmax(-1) * h.sigmoid()).cumsum(0)

    with tfwAD.dual_level():
        ty = f(torch, tfwAD.make_dual(torch.tensor(xv), torch.tensor(tv)), torch.tensor(wv))
        expected = tfwAD.unpack_dual(ty).tangent.numpy()
    with fwAD.dual_level():
        cy = f(torcia, fwAD.make_dual(torcia.tensor(xv), torcia.tensor(tv)), torcia.tensor(wv))
        got = fwAD.unpack_dual(cy).tangent.numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-10)


@pytest.mark.torch
def test_complex_matches_torch_forward_ad():
    # holomorphic formulas, the real-linear ops and the non-holomorphic ones (abs, angle),
    # which come through the transposed backward formula
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as tfwAD

    rng = np.random.default_rng(2)
    zv = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))
    tv = rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))

    def f(z):
        w = (z * z).exp() / z.conj() + z.abs() * z.angle()
        return w.sin() + w.real * w.imag

    with tfwAD.dual_level():
        ty = f(tfwAD.make_dual(torch.tensor(zv), torch.tensor(tv)))
        expected = tfwAD.unpack_dual(ty).tangent.numpy()
    with fwAD.dual_level():
        cy = f(fwAD.make_dual(torcia.tensor(zv), torcia.tensor(tv)))
        got = fwAD.unpack_dual(cy).tangent
    assert got.dtype == torcia.complex128
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10)


def test_complex_abs_tangent_is_real():
    with fwAD.dual_level():
        z = fwAD.make_dual(torcia.tensor([3 + 4j], dtype=torcia.complex128),
                           torcia.tensor([1j], dtype=torcia.complex128))
        t = fwAD.unpack_dual(z.abs()).tangent
    # d|z| along t is Re(conj(z) t) / |z|
    assert t.dtype == torcia.float64
    np.testing.assert_allclose(t.numpy(), [0.8])


def test_a_bool_or_complex_number_operand_has_no_tangent():
    # x + True took True for its own tangent (x + 1j likewise)
    x = torcia.tensor([1.0, 2.0], dtype=torcia.float64)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, torcia.tensor([1.0, 0.0], dtype=torcia.float64))
        for out in (d + True, True + d, d + 1j):
            assert fwAD.unpack_dual(out).tangent.tolist() == [1.0, 0.0]


def test_custom_function_jvp():
    class Cube(torcia.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 3 * x * x * t

    class NoJvp(torcia.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torcia.tensor([1.0, 2.0])
    with fwAD.dual_level():
        y = Cube.apply(fwAD.make_dual(x, torcia.ones(2)))
        np.testing.assert_allclose(fwAD.unpack_dual(y).tangent.numpy(), [3.0, 12.0])
        assert not y.requires_grad
        with pytest.raises(NotImplementedError, match="implement the jvp function"):
            NoJvp.apply(fwAD.make_dual(x, torcia.ones(2)))
    assert x.grad is None


def test_tangents_flow_under_no_grad_as_in_pytorch():
    x = torcia.tensor([0.5, 1.0], dtype=torcia.float64)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, torcia.tensor([1.0, 2.0], dtype=torcia.float64))
        with torcia.no_grad():
            y = d.sin() * d
        primal, tangent = fwAD.unpack_dual(y)
        # d/dx (x sin x) = sin x + x cos x, times the tangent
        want = (np.sin(x.numpy()) + x.numpy() * np.cos(x.numpy())) * np.array([1.0, 2.0])
        np.testing.assert_allclose(tangent.numpy(), want, rtol=1e-12)
        assert not y.requires_grad and y.grad_fn is None


def test_a_dual_requires_grad_exactly_when_its_primal_does():
    with fwAD.dual_level():
        plain = fwAD.make_dual(torcia.ones(2), torcia.ones(2))
        assert not plain.requires_grad and (plain * 2).grad_fn is None
        leaf = torcia.ones(2, requires_grad=True)
        tracked = fwAD.make_dual(leaf, torcia.ones(2))
        assert tracked.requires_grad and (tracked * 2).grad_fn is not None


def _fd(f, x, eps=1e-6):
    flat = x.numpy().ravel()
    cols = []
    for j in range(flat.size):
        plus, minus = flat.copy(), flat.copy()
        plus[j] += eps
        minus[j] -= eps
        cols.append((f(torcia.tensor(plus.reshape(x.shape))).numpy()
                     - f(torcia.tensor(minus.reshape(x.shape))).numpy()).ravel() / (2 * eps))
    return np.stack(cols, -1)


def test_gradients_computed_inside_a_level_carry_hessian_vector_products():
    # forward-over-reverse by hand: the backward pass runs with grad mode off, and the
    # tangents flow through its formulas (softmax's included)
    x = torcia.tensor([0.3, -0.2, 0.8], dtype=torcia.float64)
    v = torcia.tensor([1.0, -1.0, 0.5], dtype=torcia.float64)

    def grad_of(t):
        leaf = t.detach().requires_grad_(True)
        y = (torcia.softmax(leaf, 0) * leaf.tanh()).sum()
        return torcia.autograd.grad(y, [leaf])[0]

    with fwAD.dual_level():
        leaf = fwAD.make_dual(x.detach().requires_grad_(True), v)
        y = (torcia.softmax(leaf, 0) * leaf.tanh()).sum()
        g = torcia.autograd.grad(y, [leaf])[0]
        hvp = fwAD.unpack_dual(g).tangent
    np.testing.assert_allclose(hvp.numpy(), _fd(grad_of, x) @ v.numpy(), rtol=1e-6,
                               atol=1e-8)


def test_op_records_read_their_jvp_from_the_one_forward_table():
    from torcia import library

    x = torcia.tensor([0.5, 1.5], dtype=torcia.float64)
    t = torcia.tensor([1.0, -2.0], dtype=torcia.float64)
    for op, fn in (("sin", torcia.sin), ("exp", torcia.exp)):
        record = library.get_op(op)
        want = forward_derivatives.output_tangents(op, (x,), [t], {}, fn(x))
        assert torcia.equal(record.jvp([t], x, result=fn(x)), want)
    assert library.get_op("argmax").jvp is None  # not differentiable
