"""The views that are strides arithmetic (view, reshape, permute, expand, unfold, diagonal,
detach_view) decompose into as_strided of their input: on a device with the primitives
only, they are PyTorch's views exactly: values, sizes, strides, storage offset, ``_base``,
the shared version counter, writes seen both ways, view or copy, errors and gradients."""

import numpy as np
import pytest

import torcia
from torcia import library
from torcia.testing.conformance import primitives_only

torch = pytest.importorskip("torch")

STRIDED = ("view", "reshape", "permute", "expand", "unfold", "diagonal", "detach_view")


@pytest.fixture(scope="module")
def vprims():
    with primitives_only("vprims") as device:
        yield device


#: name -> (the input made from a (4, 6) grid, the op), one function for both libraries
CASES = {
    "view": (lambda b: b, lambda x: x.view(6, 4)),
    "view_of_narrow": (lambda b: b[1:3], lambda x: x.view(3, 2, 2)),
    "view_split_dim": (lambda b: b.t(), lambda x: x.view(3, 2, 4)),
    "view_size_one": (lambda b: b[:, :1], lambda x: x.view(1, 4, 1)),
    "view_0d": (lambda b: b[1, 2], lambda x: x.view(1, 1)),
    "view_empty": (lambda b: b[:, :0], lambda x: x.view(0, 2)),
    "reshape_view": (lambda b: b[1:], lambda x: x.reshape(2, 9)),
    "reshape_copy": (lambda b: b.t(), lambda x: x.reshape(24)),
    "flatten_copy": (lambda b: b[:, 1:], lambda x: x.flatten()),
    "permute": (lambda b: b, lambda x: x.permute(1, 0)),
    "permute_of_transposed": (lambda b: b.t()[1:, ::2], lambda x: x.permute(1, 0)),
    "transpose": (lambda b: b.view(2, 3, 4), lambda x: x.transpose(0, 2)),
    "expand": (lambda b: b[:, 2:3], lambda x: x.expand(3, 4, 5)),
    "expand_of_transposed": (lambda b: b.t()[:1], lambda x: x.expand(2, 4)),
    "unfold": (lambda b: b[1:], lambda x: x.unfold(1, 2, 2)),
    "unfold_transposed": (lambda b: b.t(), lambda x: x.unfold(0, 3, 1)),
    "diagonal": (lambda b: b, lambda x: x.diagonal(1)),
    "diagonal_negative": (lambda b: b.t(), lambda x: x.diagonal(-2)),
    "diagonal_empty": (lambda b: b, lambda x: x.diagonal(9)),
    "diagonal_3d": (lambda b: b.view(2, 3, 4), lambda x: x.diagonal(0, 2, 0)),
    "squeeze": (lambda b: b[:1], lambda x: x.squeeze(0)),
    "unsqueeze": (lambda b: b.t(), lambda x: x.unsqueeze(1)),
    "contiguous": (lambda b: b.t()[1:], lambda x: x.contiguous()),
}


def _grid(lib, device=None):
    values = np.arange(24.0).reshape(4, 6)
    if lib is torch:
        return torch.tensor(values)
    return torcia.tensor(values).to(device)


def _geometry(t):
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def test_the_device_has_no_kernel_of_the_strided_views(vprims):
    kernels = library.get_backend(vprims).kernels
    assert "as_strided" in kernels
    assert not [name for name in STRIDED if name in kernels]
    assert not {*STRIDED, "reshape"} & set(library.primitives())


@pytest.mark.parametrize("name", list(CASES))
def test_a_decomposed_view_is_pytorchs_view(vprims, name):
    make, op = CASES[name]
    base, want_base = _grid(torcia, vprims), _grid(torch)
    x, want_x = make(base), make(want_base)
    out, want = op(x), op(want_x)
    np.testing.assert_array_equal(out.to("cpu").numpy(), want.numpy())
    assert _geometry(out) == _geometry(want)
    assert out.is_contiguous() == want.is_contiguous()
    # a view of the same base as PyTorch's, or a copy of its own
    if want._base is None:
        assert out._base is None
        assert not np.shares_memory(out.__torcia_data__, base.__torcia_data__)
    else:
        assert want._base is want_base and out._base is base
    # one version counter with the base where PyTorch shares it, writes seen both ways
    before = (out._version, want._version)
    base.add_(1)
    want_base.add_(1)
    assert (out._version > before[0]) == (want._version > before[1])
    if out.numel() and 0 not in want.stride():  # an expanded view refuses writes
        out.fill_(-5)
        want.fill_(-5)
    np.testing.assert_array_equal(base.to("cpu").numpy(), want_base.numpy())
    np.testing.assert_array_equal(out.to("cpu").numpy(), want.numpy())


@pytest.mark.parametrize("name", list(CASES))
def test_a_decomposed_view_has_the_views_gradient(vprims, name):
    make, op = CASES[name]
    leaf = _grid(torcia, vprims).requires_grad_(True)
    want_leaf = _grid(torch).requires_grad_(True)
    out, want = op(make(leaf * 1)), op(make(want_leaf * 1))
    assert out.grad_fn is not None
    weights = np.arange(1.0, 1.0 + want.numel()).reshape(tuple(want.shape))
    (out * torcia.tensor(weights).to(vprims)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    np.testing.assert_array_equal(leaf.grad.to("cpu").numpy(), want_leaf.grad.numpy())


def test_the_errors_are_pytorchs(vprims):
    x = _grid(torcia, vprims).t()
    with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's "
                                           "size and stride"):
        x.view(24)
    with pytest.raises(RuntimeError, match="diagonal dimensions cannot be identical"):
        x.diagonal(0, 1, 1)
    with pytest.raises(RuntimeError, match="must be greater or equal to the number of "
                                           "dimensions"):
        x.expand(3)


def test_detach_view_shares_the_inputs_memory_and_counter(vprims):
    from torcia.library import call

    x = _grid(torcia, vprims)[1:]
    out = call("detach_view", (x,), {})
    assert _geometry(out) == _geometry(x) and out._vc is x._vc
    assert np.shares_memory(out.__torcia_data__, x.__torcia_data__)


def test_a_decomposed_view_carries_forward_mode_tangents(vprims):
    fwAD = pytest.importorskip("torcia.autograd.forward_ad")
    got = {}
    for device in ("cpu", vprims):
        x = _grid(torcia, device)
        tangent = _grid(torcia, device) * 2 + 1
        with fwAD.dual_level():
            dual = fwAD.make_dual(x.t(), tangent.t())
            out = dual.permute(1, 0).reshape(24).view(6, 4).t().contiguous().diagonal(1) * 3
            got[device] = fwAD.unpack_dual(out).tangent.to("cpu").numpy()
    np.testing.assert_array_equal(got[vprims], got["cpu"])


def _layouts(lib, count=400):
    """Seeded tensors of up to 4 dims, permuted, sliced with steps and expanded."""
    rng = np.random.default_rng(7)
    for _ in range(count):
        shape = [int(n) for n in rng.integers(1, 5, rng.integers(1, 5))]
        t = lib.arange(int(np.prod(shape)), dtype=lib.float64).reshape(shape)
        t = t.permute(*[int(d) for d in rng.permutation(len(shape))])
        if rng.random() < 0.5:
            dim = int(rng.integers(t.ndim))
            t = t.narrow(dim, 0, t.shape[dim])[(slice(None),) * dim + (slice(None, None, 2),)]
        ones = [d for d in range(t.ndim) if t.shape[d] == 1]
        if ones and rng.random() < 0.5:
            t = t.expand(*[3 if d == ones[0] else n for d, n in enumerate(t.shape)])
        yield t


def test_clone_keeps_the_layout_as_pytorch_does():
    # preserve_format: a dense layout kept (a transposed tensor's clone is transposed, and
    # view(-1) of it fails as torch's), any other made dense in the same order of dims
    for ours, theirs in zip(_layouts(torcia), _layouts(torch)):
        got, want = ours.clone(), theirs.clone()
        assert got.tolist() == want.tolist()
        if all(n > 1 for n in want.shape):  # NumPy's strides of a size-1 dim are its own
            assert got.stride() == want.stride(), (tuple(theirs.shape), theirs.stride())
        assert got.is_contiguous() == want.is_contiguous()
