"""The engine's observable behaviour: leaves, grad_fn, backward and grad's arguments,
accumulation, higher order, errors, long and wide graphs."""

from __future__ import annotations

import pytest

import torcia
from torcia.autograd.graph import AccumulateGrad

F64 = torcia.float64


def leaf(values):
    return torcia.tensor(values, dtype=F64, requires_grad=True)


# ----- leaves, requires_grad, detach -----------------------------------------------------


def test_leaf_and_non_leaf():
    x = leaf([1.0, 2.0])
    y = x * 2
    assert x.is_leaf and x.grad_fn is None and x.requires_grad
    assert not y.is_leaf and y.requires_grad and y.grad_fn.name() == "MulBackward0"
    z = torcia.tensor([1.0])
    assert z.is_leaf and not z.requires_grad
    assert not (z * 2).requires_grad


def test_requires_grad_only_on_float_and_on_leaves():
    with pytest.raises(RuntimeError, match="floating point"):
        torcia.tensor([1, 2]).requires_grad_()
    y = leaf([1.0]) * 2
    with pytest.raises(RuntimeError, match="leaf variables"):
        y.requires_grad_(False)
    x = torcia.tensor([1.0])
    assert x.requires_grad_() is x and x.requires_grad
    x.requires_grad = False
    assert not x.requires_grad


def test_detach_shares_storage_and_leaves_the_graph():
    x = leaf([1.0, 2.0])
    y = x * 3
    d = y.detach()
    assert d.is_leaf and not d.requires_grad
    d[0] = 10.0
    assert y[0].item() == 10.0  # shared storage, as in PyTorch
    y2 = x * 3
    y2.detach_()
    assert y2.is_leaf and not y2.requires_grad


def test_next_functions_have_pytorchs_form():
    x = leaf([1.0, 2.0])
    c = torcia.tensor([3.0, 4.0], dtype=F64)
    y = x * c
    ((acc, nr), (none, nr2)) = y.grad_fn.next_functions
    assert isinstance(acc, AccumulateGrad) and acc.variable is x and nr == 0
    assert none is None and nr2 == 0
    z = y.exp() + y
    names = [(f.name(), n) for f, n in z.grad_fn.next_functions]
    assert names == [("ExpBackward0", 0), ("MulBackward0", 0)]
    values, _ = torcia.sort(x * 1, descending=True)
    assert values.grad_fn.next_functions[0][0].name() == "MulBackward0"
    # the accumulator of a leaf is one object while the graph holds it
    assert (x * 2).grad_fn.next_functions[0][0] is acc


def test_next_functions_match_torch():
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    x = leaf([1.0, 2.0])
    pairs = [(x * 2, t * 2), (x + x, t + t), (x.sum(), t.sum()), ((x * 2).exp(), (t * 2).exp())]
    for ours, theirs in pairs:
        o = [(None if f is None else f.name(), n) for f, n in ours.grad_fn.next_functions]
        p = [(None if f is None else f.name(), n) for f, n in theirs.grad_fn.next_functions]
        assert o == p


# ----- backward ------------------------------------------------------------------------------


def test_grad_accumulates_over_calls():
    x = leaf([1.0, 2.0])
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]
    x.grad = None
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_backward_with_gradient_argument():
    x = leaf([1.0, 2.0, 3.0])
    y = x * x
    y.backward(torcia.tensor([1.0, 0.5, 0.0], dtype=F64))
    assert x.grad.tolist() == [2.0, 2.0, 0.0]
    with pytest.raises(RuntimeError, match="implicitly created only for scalar outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        (x * 2).backward(torcia.ones(2, dtype=F64))


def test_backward_twice_needs_retain_graph():
    x = leaf([1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    torcia.testing.assert_close(x.grad, 2 * (x.exp() * (1 + x)).detach())
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def _second_backward(lib, build):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    w = lib.tensor([3.0, 4.0], requires_grad=True)
    y = build(x, w).sum()
    y.backward()
    try:
        y.backward()
    except RuntimeError:
        return "raises"
    return x.grad.tolist()


@pytest.mark.parametrize("build", [lambda x, w: x + 1, lambda x, w: x * 2,
                                   lambda x, w: x * w.detach(), lambda x, w: x * w,
                                   lambda x, w: x.exp(), lambda x, w: (x * 3).reshape(2, 1)])
def test_nodes_without_saved_tensors_run_again_as_in_torch(build):
    torch = pytest.importorskip("torch")
    assert _second_backward(torcia, build) == _second_backward(torch, build)


def test_backward_on_non_grad_tensor_raises():
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
        torcia.tensor(1.0).backward()


def test_backward_inputs_limits_accumulation():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    h = x * w
    (h * h).sum().backward(inputs=[w])
    assert x.grad is None
    assert w.grad.tolist() == [6.0, 32.0]  # 2 x^2 w
    # a non-leaf in inputs gets its .grad
    x2 = leaf([1.0, 2.0])
    h2 = x2 * 2
    (h2 * h2).sum().backward(inputs=[h2])
    assert h2.grad.tolist() == [4.0, 8.0] and x2.grad is None
    with pytest.raises(RuntimeError, match="cannot be empty"):
        (x * 2).sum().backward(inputs=[])


def test_retain_grad():
    x = leaf([1.0, 2.0])
    y = x * 3
    y.retain_grad()
    assert y.retains_grad
    (y * y).sum().backward()
    assert y.grad.tolist() == [6.0, 12.0]
    assert x.grad.tolist() == [18.0, 36.0]
    z = x * 2
    (z * z).sum().backward()
    assert z.grad is None  # not retained


def test_create_graph_gives_higher_order():
    x = leaf([0.5, -1.0])
    y = (x ** 4).sum()
    (g,) = torcia.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad
    (h,) = torcia.autograd.grad(g.sum(), x, create_graph=True)
    (k,) = torcia.autograd.grad(h.sum(), x)
    assert g.tolist() == [0.5, -4.0]
    assert h.tolist() == [3.0, 12.0]
    assert k.tolist() == [12.0, -24.0]


def test_backward_create_graph_accumulates_differentiable_grad():
    x = leaf([2.0])
    (x ** 3).sum().backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.item() == 12.0
    gx = x.grad
    x.grad = None
    gx.sum().backward()
    assert x.grad.item() == 12.0


# ----- autograd.grad -------------------------------------------------------------------------


def test_grad_does_not_touch_dot_grad():
    x = leaf([1.0, 2.0])
    (g,) = torcia.autograd.grad((x * x).sum(), x)
    assert g.tolist() == [2.0, 4.0] and x.grad is None and not g.requires_grad


def test_grad_allow_unused_and_materialize():
    x, u = leaf([1.0]), leaf([2.0])
    y = (x * 2).sum()
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        torcia.autograd.grad(y, [x, u], retain_graph=True)
    gx, gu = torcia.autograd.grad(y, [x, u], retain_graph=True, allow_unused=True)
    assert gx.item() == 2.0 and gu is None
    gx, gu = torcia.autograd.grad(y, [x, u], materialize_grads=True)
    assert gu.tolist() == [0.0]


def test_grad_of_non_leaf_and_several_outputs():
    x = leaf([1.0, 2.0])
    h = x * x
    a, b = h.sum(), (h * 3).sum()
    (gh,) = torcia.autograd.grad([a, b], h)
    assert gh.tolist() == [4.0, 4.0]


def test_grad_outputs_and_errors():
    x = leaf([1.0, 2.0])
    y = x * 2
    (g,) = torcia.autograd.grad(y, x, grad_outputs=torcia.tensor([1.0, 3.0], dtype=F64))
    assert g.tolist() == [2.0, 6.0]
    with pytest.raises(RuntimeError, match="does not require grad"):
        torcia.autograd.grad((x * 2).sum(), torcia.tensor([1.0]))


def test_grad_batched_gives_one_vjp_per_row():
    x = leaf([1.0, 2.0, 3.0])
    y = x ** 2
    seeds = torcia.eye(3, dtype=F64)
    (jac,) = torcia.autograd.grad(y, x, seeds, is_grads_batched=True)
    assert jac.tolist() == [[2.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 6.0]]
    with pytest.raises(RuntimeError, match="second time"):
        y.sum().backward()  # the graph was freed by the last row's pass
    u = leaf([1.0])
    z = x * 2
    gx, gu = torcia.autograd.grad(z, [x, u], seeds, is_grads_batched=True,
                                  materialize_grads=True)
    assert gu.tolist() == [[0.0]] * 3 and gx.tolist() == (seeds * 2).tolist()


def test_grad_matches_torch_on_a_small_network():
    torch = pytest.importorskip("torch")
    import numpy as np

    rng = np.random.default_rng(1)
    xs, w1, w2 = rng.standard_normal((4, 3)), rng.standard_normal((3, 5)), rng.standard_normal(5)
    ours = [torcia.tensor(a, requires_grad=True) for a in (xs, w1, w2)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (xs, w1, w2)]

    def net(lib, x, a, b):
        h = lib.tanh(x @ a)
        return (lib.sigmoid(h @ b) ** 2).mean() + (a * a).sum() * 0.01

    g1 = torcia.autograd.grad(net(torcia, *ours), ours, create_graph=True)
    g2 = torch.autograd.grad(net(torch, *theirs), theirs, create_graph=True)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10)
    hv1 = torcia.autograd.grad(sum((g * g).sum() for g in g1), ours)
    hv2 = torch.autograd.grad(sum((g * g).sum() for g in g2), theirs)
    for a, b in zip(hv1, hv2):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-12)


# ----- graph shapes ----------------------------------------------------------------------


def test_long_chain_is_iterative():
    x = leaf([1.0])
    y = x
    for _ in range(10_000):
        y = y * 1.0001
    y.sum().backward()
    assert x.grad.item() == pytest.approx(1.0001 ** 10_000)


def test_wide_graph():
    x = leaf([1.0, 2.0])
    parts = [x * float(i) for i in range(2_000)]
    total = torcia.stack(parts).sum() + sum(p.sum() for p in parts[:100])
    total.backward()
    expected = sum(range(2_000)) + sum(range(100))
    assert x.grad.tolist() == [expected, expected]


def test_unbind_slices_share_one_backward_node():
    # a sequence stepped through slice by slice (an RNN) must not scatter each slice's
    # gradient into a tensor of the whole sequence's size
    x = leaf([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    rows = x.unbind(0)
    nodes = {r.grad_fn.next_functions[0][0] for r in rows}
    assert len(nodes) == 1 and nodes.pop().name() == "SplitBackward0"
    (rows[0] * 2 + rows[2]).sum().backward()
    assert x.grad.tolist() == [[2.0, 2.0], [0.0, 0.0], [1.0, 1.0]]


def test_diamond_sums_both_paths():
    x = leaf([3.0])
    a = x * 2
    y = a * a + a.exp()
    y.sum().backward()
    assert x.grad.item() == pytest.approx(8 * 3.0 + 2 * torcia.exp(torcia.tensor(6.0)).item())


def test_integer_outputs_do_not_require_grad():
    x = leaf([3.0, 1.0, 2.0])
    values, indices = torcia.sort(x)
    assert values.requires_grad and not indices.requires_grad
    assert not (x > 1).requires_grad and not x.argmax().requires_grad
    assert not x.to(torcia.int64).requires_grad and x.to(torcia.float32).requires_grad
    # a float sign is an output of the graph, as torch's (its gradient is zero when real)
    sign, logabs = torcia.linalg.slogdet(leaf([[2.0, 1.0], [1.0, 3.0]]))
    assert sign.requires_grad and logabs.requires_grad


def test_missing_derivative_says_so():
    from torcia.autograd import derivatives

    x = leaf([1.0])
    entry = derivatives.TABLE.pop("exp")
    try:
        with pytest.raises(RuntimeError, match="derivative for 'exp' is not implemented"):
            x.exp()
    finally:
        derivatives.TABLE["exp"] = entry


def test_gradient_dtype_and_shape_follow_the_input():
    x = torcia.tensor([1.0, 2.0], dtype=torcia.float32, requires_grad=True)
    b = torcia.tensor([[1.0], [2.0]], dtype=F64, requires_grad=True)
    (x * b).sum().backward()
    assert x.grad.dtype is torcia.float32 and x.grad.tolist() == [3.0, 3.0]
    assert b.grad.dtype is F64 and b.grad.shape == (2, 1)


def _node_names(lib):
    x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    v = lib.tensor([1.0, -1.0], requires_grad=True)
    exprs = [
        lambda: lib.max(x, 1).values, lambda: x.to(lib.float64), lambda: x.sum(0),
        lambda: x.sum(), lambda: x.mean(0), lambda: x[0], lambda: x[1:],
        lambda: x[lib.tensor([0, 1])], lambda: x[0, 1:], lambda: lib.linalg.inv(x),
        lambda: x @ x, lambda: x @ v, lambda: v @ v, lambda: x.reshape(4), lambda: x ** x,
        lambda: x ** 2, lambda: x.prod(0), lambda: x.narrow(0, 0, 1), lambda: x.norm(),
        lambda: x[None].squeeze(0), lambda: x.mT.contiguous(), lambda: x.exp(),
        lambda: lib.cat([x, x]), lambda: (lambda y: (y[0].mul_(2), y)[1])(x * 1),
    ]
    return [f().grad_fn for f in exprs]


def test_node_names_match_torch():
    torch = pytest.importorskip("torch")
    ours = [n.name() for n in _node_names(torcia)]
    # the same names, C++ namespaces included ("torch::autograd::CopySlices"); the repr
    # shows the class name
    assert ours == [n.name() for n in _node_names(torch)]
    assert [repr(n).split()[0] for n in _node_names(torcia)] == \
        [repr(n).split()[0] for n in _node_names(torch)]


# base[key] = value: (key, value) and the node PyTorch 2.13 gives the base, whether or not
# it required grad before
SETITEM = [
    ("[:]", 5.0, "FillBackward3"), ("[...]", "sum", "FillBackward3"),
    ("[:]", "row", "torch::autograd::CopyBackwards"),
    ("[0:3]", "row", "torch::autograd::CopyBackwards"),
    ("[:, 0:4]", "row", "torch::autograd::CopyBackwards"),
    ("[0:10]", "row", "torch::autograd::CopyBackwards"),
    ("[::1, ...]", "row", "torch::autograd::CopyBackwards"),
    ("[0:2]", "row", "torch::autograd::CopySlices"),
    ("[-3:]", "row", "torch::autograd::CopySlices"),
    ("[:, ::2]", "row", "torch::autograd::CopySlices"),
    ("[0]", 5.0, "torch::autograd::CopySlices"),
    ("[:, None]", "row", "torch::autograd::CopySlices"),
    ("[1, ...]", "row", "torch::autograd::CopySlices"),
    ("[lib.tensor([0])]", 5.0, "IndexPutBackward0"),
    ("[:, lib.tensor([0])]", "row", "IndexPutBackward0"),
    ("[lib.tensor([True, False, True])]", "row", "IndexPutBackward0"),
    ("[[0, 1]]", "row", "IndexPutBackward0"),
    ("[0:2, lib.tensor([0])]", "row", "torch::autograd::CopySlices"),
    ("[lib.tensor([0, 1, 2]), 1]", "row", "torch::autograd::CopySlices"),
]


@pytest.mark.parametrize("key, value, name", SETITEM)
def test_setitem_node_names_as_pytorchs(key, value, name):
    libs = [torcia]
    try:
        import torch

        libs.append(torch)
    except ImportError:
        pass
    for lib in libs:
        y = lib.ones(4, requires_grad=True) * 2
        v = {"sum": y.sum(), "row": y[:1]}.get(value, value)
        for base in (lib.zeros(3, 4, requires_grad=True).clone(), lib.zeros(3, 4)):
            exec(f"base{key} = v", {"lib": lib, "base": base, "v": v})
            if base.grad_fn is not None or isinstance(v, lib.Tensor):
                assert base.grad_fn.name() == name, lib.__name__
                assert repr(base.grad_fn).startswith(f"<{name.rpartition('::')[2]} object")


def _third_order(lib, xs, ws):
    x, w = lib.tensor(xs, requires_grad=True), lib.tensor(ws, requires_grad=True)
    h = lib.tanh(x @ w)
    y = (lib.sigmoid(h).log() * h.exp()).sum() + (x.sin() ** 3).mean() + h.logsumexp(1).sum()
    g1 = lib.autograd.grad(y, (x, w), create_graph=True)
    g2 = lib.autograd.grad(sum((g * g).sum() for g in g1), (x, w), create_graph=True)
    g3 = lib.autograd.grad(sum(g.sin().sum() for g in g2), (x, w))
    return [g.detach().numpy() for g in g1 + g2 + g3]


def test_third_order_gradients_match_torch():
    torch = pytest.importorskip("torch")
    import numpy as np

    rng = np.random.default_rng(2)
    xs, ws = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    for a, b in zip(_third_order(torcia, xs, ws), _third_order(torch, xs, ws)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
