"""mv, addmv, addr, addbmm, baddbmm, dist and cdist: values written out by hand, torch
parity over shapes and coefficients, PyTorch's errors, and PyTorch's autocast dtypes."""

import math

import numpy as np
import pytest

import torcia

RNG = np.random.default_rng(0)


def t(*shape):
    return RNG.standard_normal(shape)


def test_values_by_hand():
    m = torcia.tensor([[1.0, 2.0], [3.0, 4.0]])
    v = torcia.tensor([1.0, -1.0])
    assert torcia.mv(m, v).tolist() == [-1.0, -1.0]
    assert m.mv(v).tolist() == [-1.0, -1.0]
    # 0.5 * [1, 1] + 2 * [-1, -1]
    assert torcia.addmv(torcia.ones(2), m, v, beta=0.5, alpha=2).tolist() == [-1.5, -1.5]
    # 1 * zeros + outer([1, 2], [3, 4])
    assert torcia.addr(torcia.zeros(2, 2), torcia.tensor([1.0, 2.0]),
                       torcia.tensor([3.0, 4.0])).tolist() == [[3.0, 4.0], [6.0, 8.0]]
    # two batches of ones(1, 3) @ ones(3, 1) = 3 each, summed: 6, plus input 1
    assert torcia.addbmm(torcia.ones(1, 1), torcia.ones(2, 1, 3),
                         torcia.ones(2, 3, 1)).tolist() == [[7.0]]
    assert torcia.baddbmm(torcia.ones(2, 1, 1), torcia.ones(2, 1, 3), torcia.ones(2, 3, 1),
                          alpha=2).tolist() == [[[7.0]], [[7.0]]]
    # a 3-4-5 triangle; |3| + |4|; max(3, 4); two non-zero differences
    a, b = torcia.tensor([0.0, 0.0]), torcia.tensor([3.0, 4.0])
    assert torcia.dist(a, b).item() == 5.0
    assert a.dist(b, 1).item() == 7.0
    assert torcia.dist(a, b, math.inf).item() == 4.0
    assert torcia.dist(a, b, 0).item() == 2.0
    d = torcia.cdist(torcia.tensor([[0.0, 0.0], [1.0, 1.0]]),
                     torcia.tensor([[3.0, 4.0], [0.0, 1.0], [1.0, 1.0]]))
    np.testing.assert_allclose(d.numpy(), [[5.0, 1.0, math.sqrt(2)],
                                           [math.sqrt(13), 1.0, 0.0]], rtol=1e-6)


def test_beta_zero_ignores_nan_in_input():
    out = torcia.addmv(torcia.full((2,), math.nan), torcia.eye(2), torcia.ones(2), beta=0)
    assert out.tolist() == [1.0, 1.0]
    out = torcia.baddbmm(torcia.full((1, 1, 1), math.inf), torcia.ones(1, 1, 2),
                         torcia.ones(1, 2, 1), beta=0)
    assert out.tolist() == [[[2.0]]]


def test_in_place_variants():
    x = torcia.zeros(2, 2)
    assert x.addr_(torcia.tensor([1.0, 2.0]), torcia.tensor([1.0, 1.0])) is x
    assert x.tolist() == [[1.0, 1.0], [2.0, 2.0]]
    y = torcia.ones(2)
    y.addmv_(torcia.eye(2), torcia.tensor([2.0, 3.0]))
    assert y.tolist() == [3.0, 4.0]


def test_errors_name_the_problem():
    with pytest.raises(RuntimeError, match="vector \\+ matrix @ vector expected, got 1, 3, 1"):
        torcia.mv(torcia.ones(2, 2, 2), torcia.ones(2))
    with pytest.raises(RuntimeError, match=r"size mismatch, got input \(2\), mat \(2x3\), "
                                           r"vec \(2\)"):
        torcia.mv(torcia.ones(2, 3), torcia.ones(2))
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        torcia.addmv(torcia.ones(3), torcia.ones(2, 2), torcia.ones(2))
    with pytest.raises(RuntimeError, match="Expected 1-D argument vec1"):
        torcia.addr(torcia.ones(2, 2), torcia.ones(2, 1), torcia.ones(2))
    with pytest.raises(RuntimeError, match="cdist only supports at least 2D tensors, X1 got"):
        torcia.cdist(torcia.ones(3), torcia.ones(2, 3))
    with pytest.raises(RuntimeError, match="same number of columns. X1: 3 X2: 4"):
        torcia.cdist(torcia.ones(2, 3), torcia.ones(2, 4))
    with pytest.raises(RuntimeError, match="non-negative p"):
        torcia.cdist(torcia.ones(2, 3), torcia.ones(2, 3), p=-1)



@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64"])
def test_addr_refuses_a_float_scalar_for_an_integral_result(dtype):
    dt = getattr(torcia, dtype)
    v, m = torcia.ones(3, dtype=dt), torcia.ones(3, 3, dtype=dt)
    for name in ("beta", "alpha"):
        with pytest.raises(RuntimeError, match=f"argument {name} must not be a floating"):
            torcia.addr(m, v, v, **{name: 0.5})
    assert torcia.addr(m, v, v, beta=2).dtype is dt  # an integer is fine
    if dtype != "bool":
        with pytest.raises(RuntimeError, match="Boolean beta only supported for Boolean"):
            torcia.addr(m, v, v, beta=True)
    # the result's dtype decides: float vectors make a float result
    assert torcia.addr(m, torcia.ones(3), torcia.ones(3), beta=0.5)[0, 0].item() == 1.5

CASES = [
    ("mv", (t(3, 4), t(4)), {}),
    ("addmv", (t(3), t(3, 4), t(4)), {"beta": 0.5, "alpha": 2}),
    ("addmv", (t(1), t(3, 4), t(4)), {}),
    ("addr", (t(3, 4), t(3), t(4)), {"beta": 2, "alpha": -1}),
    ("addr", (t(4), t(3), t(4)), {}),
    ("addbmm", (t(3, 5), t(2, 3, 4), t(2, 4, 5)), {"alpha": 0.3}),
    ("baddbmm", (t(2, 3, 5), t(2, 3, 4), t(2, 4, 5)), {"beta": 0.0}),
    ("baddbmm", (t(3, 5), t(2, 3, 4), t(2, 4, 5)), {"beta": 1.5}),
    ("dist", (t(3, 4), t(4)), {}),
    ("dist", (t(3), t(3)), {"p": 1}),
    ("dist", (t(3), t(3)), {"p": math.inf}),
    ("dist", (t(3), t(3)), {"p": 3.5}),
    ("cdist", (t(3, 4), t(5, 4)), {}),
    ("cdist", (t(2, 3, 4), t(5, 4)), {"p": 1.0}),
    ("cdist", (t(3, 4), t(5, 4)), {"p": 0.0}),
    ("cdist", (t(3, 4), t(5, 4)), {"p": math.inf}),
    ("cdist", (t(30, 4), t(35, 4)), {"compute_mode": "use_mm_for_euclid_dist"}),
]


@pytest.mark.torch
@pytest.mark.parametrize("name, args, kwargs", CASES)
def test_matches_torch(name, args, kwargs):
    torch = pytest.importorskip("torch")
    ours = getattr(torcia, name)(*[torcia.tensor(a) for a in args], **kwargs)
    theirs = getattr(torch, name)(*[torch.tensor(a) for a in args], **kwargs)
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-12)


def test_autocast_dtypes_as_pytorch_on_cpu():
    pytest.importorskip("ml_dtypes")
    m, v = torcia.randn(3, 4), torcia.randn(4)
    b1, b2 = torcia.randn(2, 3, 4), torcia.randn(2, 4, 5)
    with torcia.autocast("cpu", dtype=torcia.bfloat16):
        # not on PyTorch's CPU lists: they run in their inputs' dtype (no inner cast)
        assert torcia.mv(m, v).dtype is torcia.float32
        assert torcia.addmv(torcia.zeros(3), m, v).dtype is torcia.float32
        assert torcia.addr(torcia.zeros(3, 4), torcia.ones(3), v).dtype is torcia.float32
        assert torcia.dist(v, v).dtype is torcia.float32
        assert torcia.dist(v.bfloat16(), v.bfloat16()).dtype is torcia.bfloat16
        # on its lower-precision list
        assert torcia.baddbmm(torcia.zeros(2, 3, 5), b1, b2).dtype is torcia.bfloat16
        assert torcia.addbmm(torcia.zeros(3, 5), b1, b2).dtype is torcia.bfloat16
        # on its float32 list
        low = m.bfloat16()
        assert torcia.cdist(low, low).dtype is torcia.float32


@pytest.mark.parametrize("shapes", [((3, 4), (4,)), ((3,), (2, 2)), ((), (3,))])
def test_outer_takes_vectors_only_everywhere(shapes):
    # PyTorch's outer refuses what is not 1-D; NumPy's would flatten it, and the default
    # decomposition would broadcast it to yet another shape: all three refuse alike
    from torcia import library

    a, b = (torcia.ones(s) for s in shapes)
    wrong = a if a.ndim != 1 else b
    message = f"outer: Expected 1-D argument {'self' if wrong is a else 'vec2'}, but got " \
              f"{wrong.ndim}-D"
    with pytest.raises(RuntimeError, match=message):
        torcia.outer(a, b)
    with pytest.raises(RuntimeError, match=message):
        library.get_op("outer").kernel(a.numpy(), b.numpy())
    with pytest.raises(RuntimeError, match=message):
        library.get_op("outer").decomposition(a, b)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match=message):
        torch.outer(torch.ones(shapes[0]), torch.ones(shapes[1]))


BITS_SHAPES = [(4, 3, 5, 4), (3, 8, 8, 8), (2, 20, 30, 10), (2, 64, 64, 64)]
BITS_SCALARS = [(1, 1), (0.5, 1), (1, 0.3), (0.7, 1.3), (1, 0), (2.5, 0)]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_baddbmm_and_addmm_give_pytorchs_bits(dtype):
    """One op, as PyTorch's: the product summed, scaled by ``alpha`` and added to ``beta``
    times the input in float32 for half floats (alpha and beta float32 too) and rounded once;
    in float32 and float64 batches under 400 multiply-adds a matrix in PyTorch's loop,
    larger ones one GEMM a matrix with alpha and beta inside (the reference's BLAS, where it
    is not MKL, rounds those differently: compared below 400 here, on MKL in torcia-cpu's
    tests). Before, a product rounded to the dtype and then scaled and added differed in
    25-65% of half-precision elements."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    gemm = dtype in ("float32", "float64")
    rng = np.random.default_rng(1)
    threads = torch.get_num_threads(), torcia.get_num_threads()
    torch.set_num_threads(1)
    torcia.set_num_threads(1)
    try:
        for b, n, m, p in BITS_SHAPES:
            for alpha, beta in BITS_SCALARS:
                for name, arrays in (
                        ("baddbmm", [rng.standard_normal(s) for s in ((b, n, p), (b, n, m),
                                                                     (b, m, p))]),
                        ("baddbmm", [rng.standard_normal(s) for s in ((p,), (b, n, m),
                                                                     (b, m, p))]),
                        ("addmm", [rng.standard_normal(s) for s in ((n, p), (n, m), (m, p))])):
                    small = name == "baddbmm" and n * m * p < 400
                    if gemm and not small:
                        continue  # a GEMM of the BLAS (torcia-cpu's tests, on MKL)
                    ours = getattr(torcia, name)(
                        *(torcia.tensor(a, dtype=getattr(torcia, dtype)) for a in arrays),
                        beta=beta, alpha=alpha)
                    theirs = getattr(torch, name)(
                        *(torch.tensor(a, dtype=getattr(torch, dtype)) for a in arrays),
                        beta=beta, alpha=alpha)
                    assert ours.dtype is getattr(torcia, dtype)
                    got, want = ours.double().numpy(), theirs.double().numpy()
                    if dtype in ("float16", "bfloat16") and not small:
                        # PyTorch's half-precision GEMM sums in its own order: the float32
                        # sums round to the dtype alike but for a few
                        assert (got != want).mean() < 0.1, (name, b, n, m, p, beta, alpha)
                    else:
                        np.testing.assert_array_equal(got, want,
                                                      err_msg=f"{name} {(b, n, m, p)} "
                                                              f"beta={beta} alpha={alpha}")
    finally:
        torch.set_num_threads(threads[0])
        torcia.set_num_threads(threads[1])


def test_baddbmm_records_one_node_whose_gradients_check():
    pytest.importorskip("torcia.autograd")
    check, check2 = torcia.autograd.gradcheck, torcia.autograd.gradgradcheck
    for shapes in [((8,), (3, 8, 8), (3, 8, 8)), ((3, 8, 1), (3, 8, 8), (3, 8, 8)),
                   ((2, 3), (2, 2, 0), (2, 0, 3)), ((1, 1, 4), (2, 3, 5), (2, 5, 4))]:
        xs = [torcia.randn(*s, dtype=torcia.float64, requires_grad=True) for s in shapes]
        for beta, alpha in ((1, 1), (0.7, -1.3), (0, 2)):
            def f(c, a, b, beta=beta, alpha=alpha):
                return torcia.baddbmm(c, a, b, beta=beta, alpha=alpha)

            # one node over the three leaves, named as PyTorch's
            node = f(*xs).grad_fn
            assert node.name() == "BaddbmmBackward0"
            assert [n.name() for n, _ in node.next_functions] == \
                ["torch::autograd::AccumulateGrad"] * 3
            assert check(f, xs) and check2(f, xs)


@pytest.mark.parametrize("shapes, dtypes, message", [
    (((2, 3, 4), (2, 3, 5), (2, 5, 4)), ("float16", "float32", "float32"),
     "Input dtypes must be the same, got: input c10::Half, batch1: float, batch2: float"),
    (((2, 3, 4), (2, 3, 5), (2, 5, 4)), ("float32", "float32", "float64"),
     "expected scalar type Float but found Double"),
    (((3, 4), (2, 3, 5), (3, 5, 4)), ("float32",) * 3,
     r"Expected size for first two dimensions of batch2 tensor to be: \[2, 5\] but got: "
     r"\[3, 5\]\."),
    (((5,), (2, 3, 5), (2, 5, 4)), ("bool", "float32", "float32"),
     r"The expanded size of the tensor \(4\) must match the existing size \(5\) at "
     r"non-singleton dimension 2\.  Target sizes: \[2, 3, 4\]\.  Tensor sizes: \[5\]"),
    (((4,), (3, 5), (2, 5, 4)), ("float32",) * 3,
     r"batch1 must be a 3D tensor \(got 2-D and 3-D\)"),
])
def test_baddbmm_refuses_as_pytorch(shapes, dtypes, message):
    args = [torcia.ones(s, dtype=getattr(torcia, d)) for s, d in zip(shapes, dtypes)]
    with pytest.raises(RuntimeError, match=message):
        torcia.baddbmm(*args)


ADDR_SHAPES = [(40, 50), (7, 13), (3, 100), (1, 37), (37, 1), (5, 16), (9, 8), (0, 3)]


def _addr_inputs(rng, n, m):
    for shape in ((n, m), (m,), (n, 1), (), (1, m)):
        yield [rng.standard_normal(s) for s in (shape, (n,), (m,))]


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_addr_gives_pytorchs_bits(dtype):
    """PyTorch's CPU addr in its order of operations (see ``_addr_as_pytorch``): its
    vectorised steps fused into one FMA, its scalar tail and its loops where the input is
    constant along a row fused the other way, half floats rounded at each op."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(3)
    for n, m in ADDR_SHAPES:
        for arrays in _addr_inputs(rng, n, m):
            for alpha, beta in ((1, 1), (0.7, 1.3), (2.5, 0), (1, 0.3), (-1.5, 1)):
                ours = torcia.addr(*(torcia.tensor(a, dtype=getattr(torcia, dtype))
                                     for a in arrays), alpha=alpha, beta=beta)
                theirs = torch.addr(*(torch.tensor(a, dtype=getattr(torch, dtype))
                                      for a in arrays), alpha=alpha, beta=beta)
                np.testing.assert_array_equal(
                    ours.double().numpy(), theirs.double().numpy(),
                    err_msg=f"{(n, m)} input {arrays[0].shape} alpha={alpha} beta={beta}")


def test_addr_float32_by_a_model_of_the_loop():
    # the model: in float64, where a float32 product is exact, rounded to float32 once
    # (fused) or after the product too (the tail)
    rng = np.random.default_rng(4)
    n, m = 6, 21  # one step of 16 a row, then a tail of 5
    c, v1, v2 = (rng.standard_normal(s).astype(np.float32) for s in ((n, m), (n,), (m,)))
    beta, alpha = np.float32(1.3), np.float32(0.7)
    left = (alpha * v1)[:, None].astype(np.float64)
    fused = (left * v2 + np.float64(beta * c)).astype(np.float32)
    tail = (np.float64(beta) * c + (left * v2).astype(np.float32)).astype(np.float32)
    want = np.where(np.arange(m) < 16, fused, tail)
    got = torcia.addr(torcia.tensor(c), torcia.tensor(v1), torcia.tensor(v2), beta=1.3,
                      alpha=0.7)
    np.testing.assert_array_equal(got.numpy(), want)
    assert (fused != tail).any()  # the two orders do differ on these inputs


def test_addr_gradients_check():
    pytest.importorskip("torcia.autograd")
    for shape, (n, m) in (((6, 21), (6, 21)), ((21,), (6, 21)), ((6, 1), (6, 21)),
                          ((), (1, 9)), ((3, 1), (3, 1))):
        xs = [torcia.randn(*s, dtype=torcia.float64, requires_grad=True)
              for s in (shape, (n,), (m,))]
        for beta, alpha in ((1, 1), (1.3, 0.7), (0, 2)):
            def f(c, a, b, beta=beta, alpha=alpha):
                return torcia.addr(c, a, b, beta=beta, alpha=alpha)

            assert torcia.autograd.gradcheck(f, xs) and torcia.autograd.gradgradcheck(f, xs)
