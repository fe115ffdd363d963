"""Autograd over complex numbers: z.grad for a real loss equals PyTorch's (conjugate
Wirtinger convention), and gradcheck/gradgradcheck check complex inputs and outputs."""

import numpy as np
import pytest

import torcia
from torcia.autograd import GradcheckError, gradcheck, gradgradcheck

RNG = np.random.default_rng(2)
A = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)
B = RNG.standard_normal(4) + 1j * RNG.standard_normal(4)

LOSSES = {
    "abs_of_product": lambda L, z, w: (z * w).abs().sum(),
    "exp_times_conj": lambda L, z, w: (z.exp() * w.conj()).real.sum(),
    "angle_of_quotient": lambda L, z, w: (z / w).angle().sum(),
    "view_as_real": lambda L, z, w: L.view_as_real(z * z).pow(2).sum(),
    "sqrt_log_imag": lambda L, z, w: (z.sqrt() + w.log()).imag.sum(),
    "sin_tanh": lambda L, z, w: (z.sin() * w.tanh()).abs().sum(),
    "matmul_mH": lambda L, z, w: (z.reshape(2, 2) @ w.reshape(2, 2).mH).abs().sum(),
    "polar": lambda L, z, w: L.polar(z.abs(), w.real).imag.sum(),
    "pow_reciprocal": lambda L, z, w: (z ** 3 * w.reciprocal()).real.sum(),
    "complex": lambda L, z, w: L.complex(z.real, w.imag).abs().sum(),
    "sgn_of_view": lambda L, z, w: L.view_as_complex(L.view_as_real(z) * 2).sgn().real.sum(),
    "mean_sum": lambda L, z, w: (z.mean() * w.sum()).abs(),
    # these took f'(z) where the convention takes its conjugate (softsign, not holomorphic,
    # also lacked its |z| term)
    "sinc": lambda L, z, w: (L.sinc(z) * w).real.sum(),

    "logsumexp_logcumsumexp": lambda L, z, w: (
        L.logsumexp(z.reshape(2, 2), 1).sum() + L.logcumsumexp(w, 0).sum()).abs(),
    "softsign_tanhshrink": lambda L, z, w: (
        L.nn.functional.softsign(z) * L.nn.functional.tanhshrink(w)).abs().sum(),
    "conv1d_conv_transpose1d": lambda L, z, w: (
        L.nn.functional.conv1d(z.reshape(1, 1, 4), w[:3].reshape(1, 1, 3)).sum()
        + L.nn.functional.conv_transpose1d(z.reshape(1, 1, 4), w[:2].reshape(1, 1, 2))
        .pow(2).sum()).abs(),
}


#: the losses that use torcia-nn (absent when torcia-autograd is tested alone)
NEEDS_NN = {"softsign_tanhshrink", "conv1d_conv_transpose1d"}


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_complex_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    if name in NEEDS_NN:
        pytest.importorskip("torcia.nn", reason="its loss uses torcia-nn's functional forms")
    z1, w1 = torcia.tensor(A, requires_grad=True), torcia.tensor(B, requires_grad=True)
    LOSSES[name](torcia, z1, w1).backward()
    z2, w2 = torch.tensor(A, requires_grad=True), torch.tensor(B, requires_grad=True)
    LOSSES[name](torch, z2, w2).backward()
    for ours, theirs in ((z1.grad, z2.grad), (w1.grad, w2.grad)):
        assert (ours is None) == (theirs is None)
        if ours is not None:
            assert ours.dtype is torcia.complex128
            np.testing.assert_allclose(ours.numpy(), theirs.resolve_conj().numpy(),
                                       rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_complex_gradcheck_and_gradgradcheck(name):
    if name in NEEDS_NN:
        pytest.importorskip("torcia.nn", reason="its loss uses torcia-nn's functional forms")
    z = torcia.tensor(A, requires_grad=True)
    w = torcia.tensor(B, requires_grad=True)
    fn = LOSSES[name]
    assert gradcheck(lambda a, b: fn(torcia, a, b), (z, w))
    assert gradgradcheck(lambda a, b: fn(torcia, a, b), (z, w))


@pytest.mark.parametrize("op", ["erf", "erfc", "ndtr", "log_ndtr", "erfcx", "entr"])
def test_complex_special_functions_take_the_conjugate_convention(op):
    # torch refuses them for complex; torcia computes them, and their gradients took f'(z)
    z = torcia.tensor(np.abs(A.real) + 0.2 + 0.5j * A.imag, requires_grad=True)  # entr: Re > 0
    assert gradcheck(getattr(torcia.special, op), (z,))
    assert gradgradcheck(getattr(torcia.special, op), (z,))


_LENIENT = {"digamma": torcia.special.digamma,
            "silu": lambda z: torcia.nn.functional.silu(z),
            "xlog1py": lambda z: torcia.special.xlog1py(z, z * 0.5 + 0.1j)}


@pytest.mark.parametrize("op", sorted(_LENIENT))
def test_complex_inputs_torch_refuses_get_conjugate_convention_gradients(op):
    # torcia computes these for complex numbers; their gradients took f'(z) (and digamma's
    # compared complex numbers), so they were wrong or raised
    pytest.importorskip("torcia.nn")
    z = torcia.tensor(np.abs(A.real) + 0.6 + 0.5j * A.imag, requires_grad=True)
    assert gradcheck(_LENIENT[op], (z,))
    assert gradgradcheck(_LENIENT[op], (z,))


def test_gradcheck_sees_complex_outputs_and_wrong_conventions():
    z = torcia.tensor(A, requires_grad=True)
    assert gradcheck(lambda t: t * t.conj().exp(), (z,))

    class NoConj(torcia.autograd.Function):
        # d(z^2)/dz without the conjugate: right for real inputs, wrong for complex ones
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x

    assert gradcheck(NoConj.apply, (torcia.tensor(A.real, requires_grad=True),))
    with pytest.raises(GradcheckError):
        gradcheck(NoConj.apply, (z,))


def test_real_input_gets_real_gradient_and_complex_loss_is_refused():
    x = torcia.tensor([1.0, 2.0], dtype=torcia.float64, requires_grad=True)
    ((x * (1 + 2j)).abs() ** 2).sum().backward()
    assert x.grad.dtype is torcia.float64
    np.testing.assert_allclose(x.grad.numpy(), 2 * 5 * np.array([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="only for real scalar outputs"):
        (x * 1j).sum().backward()


def _cmat(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


_G = _cmat(4, 3)
_A = (lambda g: g @ g.conj().T + 3 * np.eye(3))(_cmat(3, 3))
_B = _cmat(3, 2)
LINALG = {
    "inv": lambda L, a, b, g: L.linalg.inv(a),
    "solve": lambda L, a, b, g: L.linalg.solve(a, b),
    "det": lambda L, a, b, g: L.linalg.det(a),
    "slogdet": lambda L, a, b, g: L.linalg.slogdet(a).logabsdet,
    # the sign of a complex determinant turns with A (its gradient was dropped)
    "slogdet_sign": lambda L, a, b, g: (lambda s: (s.real, s.imag))(
        L.linalg.slogdet(g[:3]).sign),
    "cholesky": lambda L, a, b, g: L.linalg.cholesky(a, upper=True),
    "qr": lambda L, a, b, g: tuple(x.abs() for x in L.linalg.qr(g)),
    "eigh": lambda L, a, b, g: (lambda w, v: (w, v.abs()))(*L.linalg.eigh(a)),
    "svd": lambda L, a, b, g: (lambda u, s, vh: (u.abs(), s, vh.abs()))(
        *L.linalg.svd(g, full_matrices=False)),
    "pinv": lambda L, a, b, g: L.linalg.pinv(g),
    "lu": lambda L, a, b, g: L.linalg.lu(a)[1:],
    "lu_solve": lambda L, a, b, g: L.linalg.lu_solve(*L.linalg.lu_factor(a), b),
    "solve_triangular": lambda L, a, b, g: L.linalg.solve_triangular(a, b, upper=True),
    "matrix_exp": lambda L, a, b, g: L.linalg.matrix_exp(a / 3),
    "lstsq": lambda L, a, b, g: L.linalg.lstsq(g, g[:, :2], driver="gelsd").solution,
    "eig": lambda L, a, b, g: (lambda w, v: (w, v.abs()))(*L.linalg.eig(a)),
    "eigvals": lambda L, a, b, g: L.linalg.eigvals(g[:3]),
    "matrix_norms": lambda L, a, b, g: tuple(L.linalg.matrix_norm(g, o)
                                             for o in ("fro", "nuc", 2, 1)),
}


def _weighted(L, out):
    outs = out if isinstance(out, tuple) else (out,)
    total = 0
    for o in outs:
        w = 1 + L.arange(o.numel(), dtype=L.float64).reshape(o.shape)
        total = total + ((o.abs() ** 2 if o.is_complex() else o) * w).sum()
    return total


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(LINALG))
def test_complex_linalg_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    ours = [torcia.tensor(x, requires_grad=True) for x in (_A, _B, _G)]
    theirs = [torch.tensor(x, requires_grad=True) for x in (_A, _B, _G)]
    _weighted(torcia, LINALG[name](torcia, *ours)).backward()
    _weighted(torch, LINALG[name](torch, *theirs)).backward()
    for o, t in zip(ours, theirs):
        assert (o.grad is None) == (t.grad is None)
        if o.grad is not None:
            np.testing.assert_allclose(o.grad.numpy(), t.grad.resolve_conj().numpy(),
                                       rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("loss, message", [
    (lambda a: torcia.linalg.eig(a).eigenvectors.real.sum(), "linalg_eig_backward"),
    (lambda a: torcia.linalg.eigh(a @ a.mH).eigenvectors.real.sum(), "linalg_eigh_backward"),
    (lambda a: torcia.linalg.svd(a).U.real.sum(), "svd_backward"),
])
def test_losses_depending_on_vector_phases_are_refused(loss, message):
    # as PyTorch: complex eigen-/singular vectors are defined up to a phase, so a loss that
    # sees it has no gradient
    a = torcia.tensor(_cmat(3, 3), requires_grad=True)
    with pytest.raises(RuntimeError, match=f"{message}: The .* in the complex case are "
                                           f"specified up to multiplication by e\\^{{i phi}}"):
        loss(a).backward()


HOLOMORPHIC = ("exp2", "expm1", "log2", "log10", "log1p", "rsqrt", "tan", "asin", "acos",
               "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "sigmoid")


@pytest.mark.parametrize("name", HOLOMORPHIC)
def test_holomorphic_unary_gradients_conjugate_the_derivative(name):
    # grad * conj(f'(z)): without the conjugate gradcheck's finite differences disagree
    z = torcia.tensor(RNG.uniform(0.2, 0.8, 5) + 1j * RNG.uniform(0.2, 0.8, 5),
                      requires_grad=True)
    assert gradcheck(getattr(torcia, name), (z,))
    assert gradgradcheck(getattr(torcia, name), (z,))


@pytest.mark.torch
@pytest.mark.parametrize("name", HOLOMORPHIC)
def test_holomorphic_unary_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    # away from the branch cuts, where the two may pick different sides
    rng = np.random.default_rng(5)
    v = rng.uniform(0.2, 0.8, 5) + 1j * rng.uniform(0.2, 0.8, 5)
    z1, z2 = torcia.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    getattr(torcia, name)(z1).abs().sum().backward()
    getattr(torch, name)(z2).abs().sum().backward()
    np.testing.assert_allclose(z1.grad.numpy(), z2.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("op", ["prod", "prod_dim", "cumprod"])
def test_products_of_complex_input_cast_to_a_real_dtype_differentiate_the_real_part(op):
    # dtype= casts the input first: the gradient took the complex values' products
    f = {"prod": lambda z: torcia.prod(z, dtype=torcia.float64),
         "prod_dim": lambda z: torcia.prod(z, 0, dtype=torcia.float64),
         "cumprod": lambda z: torcia.cumprod(z, 0, dtype=torcia.float64)}[op]
    z = torcia.tensor(A.reshape(2, 2), requires_grad=True)
    assert gradcheck(f, (z,))
    assert gradgradcheck(f, (z,))
