"""Module: registration by attribute, iteration, modes, conversion, state dicts, hooks,
printing; Parameter and Buffer; the containers."""

from collections import OrderedDict

import numpy as np
import pytest

import torcia
from torcia import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)
        self.fc2 = nn.Linear(4, 2, bias=False)
        self.scale = nn.Parameter(torcia.ones(1))
        self.register_buffer("steps", torcia.tensor(0))
        self.register_buffer("cache", torcia.zeros(2), persistent=False)

    def forward(self, x):
        return self.fc2(self.bn(self.fc1(x)).relu()) * self.scale


# ----- registration ---------------------------------------------------------------------


def test_attributes_register_parameters_buffers_and_submodules():
    net = Net()
    assert list(net._parameters) == ["scale"]
    assert list(net._buffers) == ["steps", "cache"]
    assert list(net._modules) == ["fc1", "bn", "fc2"]
    assert net.fc1 is net._modules["fc1"] and net.steps is net._buffers["steps"]
    assert [n for n, _ in net.named_parameters()] == [
        "scale", "fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "fc2.weight"]
    assert [n for n, _ in net.named_buffers()] == [
        "steps", "cache", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "bn", "fc2"]
    assert [n for n, _ in net.named_children()] == ["fc1", "bn", "fc2"]
    assert len(list(net.parameters(recurse=False))) == 1


def test_reassigning_and_deleting_keeps_the_tables_consistent():
    net = Net()
    net.fc2 = None
    assert net.fc2 is None and "fc2" in net._modules
    net.steps = torcia.tensor(5)  # a tensor over a buffer stays a buffer
    assert net._buffers["steps"].item() == 5
    net.fc1 = nn.Parameter(torcia.zeros(2))  # a parameter replaces a submodule
    assert "fc1" not in net._modules and "fc1" in net._parameters
    del net.fc1
    assert not hasattr(net, "fc1")
    with pytest.raises(TypeError, match="cannot assign 'torcia.Tensor' as parameter 'scale'"):
        net.scale = torcia.ones(1)
    with pytest.raises(TypeError, match=r"cannot assign 'int' as child module 'bn'"):
        net.bn = 3
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'nothing'"):
        net.nothing  # noqa: B018


def test_register_errors_name_the_argument():
    m = nn.Module()
    with pytest.raises(KeyError, match="contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="torcia.nn.Parameter or None required"):
        m.register_parameter("w", torcia.ones(1))
    with pytest.raises(TypeError, match="is not a Module subclass"):
        m.add_module("x", 3)

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(torcia.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


def test_shared_parameters_are_listed_once():
    a = nn.Linear(2, 2)
    seq = nn.Sequential(a, a)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 4
    assert len(list(seq.modules())) == 2
    shared = nn.Linear(1, 1)
    tree = nn.Sequential(nn.Sequential(shared, nn.ReLU()), shared, nn.Sequential(shared))
    assert list(tree.modules()) == [m for _, m in tree.named_modules()]
    assert list(tree.parameters()) == [p for _, p in tree.named_parameters()]


def test_get_submodule_parameter_buffer():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.BatchNorm1d(2)))
    assert net.get_submodule("1.0") is net[1][0]
    assert net.get_parameter("0.bias") is net[0].bias
    assert net.get_buffer("1.0.running_var") is net[1][0].running_var
    with pytest.raises(AttributeError, match="has no attribute `2`"):
        net.get_submodule("2")


# ----- modes, gradients, conversion ---------------------------------------------------


def test_train_eval_reach_every_submodule():
    net = Net()
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="boolean"):
        net.train("yes")


def test_zero_grad_and_requires_grad():
    net = Net()
    net(torcia.randn(5, 3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(float(p.grad.abs().sum()) == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_to_double_keeps_parameter_objects_and_integer_buffers():
    net = Net()
    weight = net.fc1.weight
    before = weight.detach().numpy().copy()
    assert net.double() is net
    assert net.fc1.weight is weight and weight.dtype == torcia.float64
    assert isinstance(weight, nn.Parameter) and weight.requires_grad
    np.testing.assert_array_equal(weight.detach().numpy(), before)
    assert net.bn.running_mean.dtype == torcia.float64
    assert net.bn.num_batches_tracked.dtype == torcia.int64
    assert net.steps.dtype == torcia.int64
    net.to(torcia.float32)
    assert net.fc1.weight.dtype == torcia.float32
    net.half().float()
    assert net.scale.dtype == torcia.float32
    net.to("cpu", dtype=torcia.float64)
    assert net.fc2.weight.dtype == torcia.float64
    with pytest.raises(TypeError, match="floating point"):
        net.to(torcia.int64)


def test_apply_visits_children_first():
    net = Net()
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "BatchNorm1d", "Linear", "Net"]


# ----- state dicts ----------------------------------------------------------------------


def test_state_dict_keys_and_values_share_storage():
    net = Net()
    sd = net.state_dict()
    assert list(sd) == ["scale", "steps", "fc1.weight", "fc1.bias", "bn.weight", "bn.bias",
                        "bn.running_mean", "bn.running_var", "bn.num_batches_tracked",
                        "fc2.weight"]
    assert isinstance(sd, OrderedDict)
    assert not sd["fc1.weight"].requires_grad
    assert sd["fc1.weight"].data_ptr() == net.fc1.weight.data_ptr()
    assert net.state_dict(keep_vars=True)["fc1.weight"] is net.fc1.weight


def test_load_state_dict_copies_values():
    a, b = Net(), Net()
    a.bn.running_mean.fill_(3.0)
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert repr(result) == "<All keys matched successfully>"
    for key, value in a.state_dict().items():
        np.testing.assert_array_equal(b.state_dict()[key].numpy(), value.numpy())
    assert b.fc1.weight.data_ptr() != a.fc1.weight.data_ptr()


def test_load_state_dict_reports_every_problem_in_pytorchs_format():
    net = nn.Sequential(OrderedDict(fc=nn.Linear(3, 4), out=nn.Linear(4, 2)))
    sd = net.state_dict()
    sd["fc.weight"] = torcia.zeros(5, 3)
    del sd["out.bias"]
    sd["extra"] = torcia.zeros(1)
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(sd)
    assert str(info.value) == (
        "Error(s) in loading state_dict for Sequential:\n"
        '\tMissing key(s) in state_dict: "out.bias". \n'
        '\tUnexpected key(s) in state_dict: "extra". \n'
        "\tsize mismatch for fc.weight: copying a param with shape torcia.Size([5, 3]) from "
        "checkpoint, the shape in current model is torcia.Size([4, 3])."
    )


def test_load_state_dict_not_strict_returns_the_keys():
    net = nn.Linear(2, 2)
    result = net.load_state_dict({"weight": torcia.zeros(2, 2), "junk": torcia.ones(1)},
                                 strict=False)
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["junk"]
    assert float(net.weight.abs().sum()) == 0
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        net.load_state_dict({"weight": torcia.zeros(3, 2)}, strict=False)


def test_load_state_dict_assign_takes_the_tensors():
    net = nn.Linear(2, 2)
    w = torcia.ones(2, 2)
    net.load_state_dict({"weight": w, "bias": torcia.zeros(2)}, assign=True)
    assert net.weight.data_ptr() == w.data_ptr() and isinstance(net.weight, nn.Parameter)


def test_non_persistent_buffers_are_not_saved_nor_expected():
    net = Net()
    assert "cache" not in net.state_dict()
    assert "cache" in dict(net.named_buffers())
    Net().load_state_dict(net.state_dict())


def test_save_load_roundtrip_gives_identical_outputs(tmp_path):
    torcia.manual_seed(0)
    net = Net()
    net(torcia.randn(8, 3))  # move the running statistics away from their start
    net.eval()
    x = torcia.randn(4, 3)
    path = tmp_path / "net.tca"
    torcia.save(net.state_dict(), path)
    fresh = Net().eval()
    fresh.load_state_dict(torcia.load(path))
    np.testing.assert_array_equal(fresh(x).detach().numpy(), net(x).detach().numpy())
    assert fresh.bn.num_batches_tracked.item() == 1


# ----- hooks ----------------------------------------------------------------------------


def test_forward_pre_hook_and_forward_hook_can_replace_values():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(out) or out + 1)
    y = lin(torcia.ones(1, 2))
    np.testing.assert_allclose(y.detach().numpy(), lin.bias.detach().numpy()[None] + 1)
    assert len(calls) == 1
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(lin(torcia.zeros(1, 2)).detach().numpy(),
                               lin.bias.detach().numpy()[None])


def test_hooks_with_kwargs_and_prepend():
    class Scale(nn.Module):
        def forward(self, x, factor=1.0):
            return x * factor

    m = Scale()
    order = []
    m.register_forward_pre_hook(lambda mod, a, kw: (a, {"factor": 3.0}), with_kwargs=True)
    m.register_forward_hook(lambda mod, a, out: order.append("second"))
    m.register_forward_hook(lambda mod, a, kw, out: order.append(("first", kw)),
                            prepend=True, with_kwargs=True)
    assert m(torcia.ones(1)).item() == 3.0
    assert order == [("first", {"factor": 3.0}), "second"]


def test_full_backward_hook_gets_grad_input_and_grad_output():
    # y = x @ W.T + b, L = sum(y * c): dL/dy = c, dL/dx = c @ W
    torcia.manual_seed(0)
    lin = nn.Linear(3, 2)
    x = torcia.randn(4, 3, requires_grad=True)
    c = torcia.randn(4, 2)
    seen = {}

    def hook(module, grad_input, grad_output):
        seen["in"], seen["out"] = grad_input, grad_output

    lin.register_full_backward_hook(hook)
    (lin(x) * c).sum().backward()
    assert len(seen["in"]) == 1 and len(seen["out"]) == 1
    np.testing.assert_allclose(seen["out"][0].numpy(), c.numpy())
    expected = c.numpy() @ lin.weight.detach().numpy()
    np.testing.assert_allclose(seen["in"][0].numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


def test_full_backward_hook_can_replace_grad_input():
    lin = nn.Linear(3, 2)
    x = torcia.randn(4, 3, requires_grad=True)
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0 + 7,))
    lin(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((4, 3), 7.0, np.float32))


def test_backward_pre_hook_replaces_grad_output():
    lin = nn.Linear(3, 2)
    x = torcia.randn(4, 3, requires_grad=True)
    lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 2,))
    lin(x).sum().backward()
    expected = 2 * np.ones((4, 2)) @ lin.weight.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(lin.bias.grad.numpy(), [8.0, 8.0])


def test_full_backward_hook_on_inputs_without_grad():
    # the first layer of a model: its input needs no gradient, grad_input is (None,)
    lin = nn.Linear(3, 2)
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go[0].shape)))
    lin(torcia.randn(4, 3)).sum().backward()
    assert seen == [((None,), torcia.Size([4, 2]))]
    assert lin.weight.grad is not None


@pytest.mark.torch
def test_full_backward_hook_matches_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    ours.load_state_dict({k: torcia.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    got = {}
    ours.register_full_backward_hook(lambda m, gi, go: got.update(ours=(gi, go)))
    theirs.register_full_backward_hook(lambda m, gi, go: got.update(theirs=(gi, go)))
    (ours(torcia.tensor(x, requires_grad=True)) ** 2).sum().backward()
    (theirs(torch.tensor(x, requires_grad=True)) ** 2).sum().backward()
    for a, b in zip(got["ours"], got["theirs"]):
        np.testing.assert_allclose(a[0].numpy(), b[0].numpy(), rtol=1e-5)


def test_global_forward_hook_sees_every_module():
    names = []
    handle = nn.register_module_forward_hook(lambda m, a, o: names.append(type(m).__name__))
    try:
        nn.Sequential(nn.Linear(2, 2), nn.ReLU())(torcia.ones(1, 2))
    finally:
        handle.remove()
    assert names == ["Linear", "ReLU", "Sequential"]
    nn.Linear(2, 2)(torcia.ones(1, 2))
    assert len(names) == 3


# ----- Parameter, Buffer, printing -------------------------------------------------------


def test_parameter_basics():
    p = nn.Parameter(torcia.tensor([1.0, 2.0]))
    assert isinstance(p, torcia.Tensor) and p.requires_grad and p.is_leaf
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    frozen = nn.Parameter(torcia.zeros(2), requires_grad=False)
    assert not frozen.requires_grad
    assert nn.Parameter().shape == torcia.Size([0])
    data = torcia.zeros(2)
    shared = nn.Parameter(data)
    data[0] = 5.0
    assert shared[0].item() == 5.0
    assert type(p * 2) is torcia.Tensor


def test_buffer_registers_with_its_persistence():
    m = nn.Module()
    m.a = nn.Buffer(torcia.ones(1))
    m.b = nn.Buffer(torcia.ones(1), persistent=False)
    assert list(dict(m.named_buffers())) == ["a", "b"]
    assert list(m.state_dict()) == ["a"]


def test_printed_tree_nests_and_indents():
    net = Net()
    assert repr(net) == (
        "Net(\n"
        "  (fc1): Linear(in_features=3, out_features=4, bias=True)\n"
        "  (bn): BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, "
        "track_running_stats=True)\n"
        "  (fc2): Linear(in_features=4, out_features=2, bias=False)\n"
        ")"
    )
    outer = nn.Sequential(nn.Sequential(nn.ReLU()), nn.ModuleList([nn.Tanh(), nn.Tanh()]))
    assert repr(outer) == (
        "Sequential(\n"
        "  (0): Sequential(\n"
        "    (0): ReLU()\n"
        "  )\n"
        "  (1): ModuleList(\n"
        "    (0-1): 2 x Tanh()\n"
        "  )\n"
        ")"
    )


@pytest.mark.torch
def test_printed_trees_match_torch():
    torch = pytest.importorskip("torch")

    def build(lib):
        m = lib.nn
        return m.Sequential(
            m.Conv2d(1, 8, 3, padding=1), m.BatchNorm2d(8), m.ReLU(inplace=True),
            m.MaxPool2d(2), m.Dropout2d(0.1),
            m.ModuleList([m.Linear(2, 2), m.Linear(2, 2), m.ReLU(), m.Linear(2, 2)]),
            m.ModuleDict({"head": m.Linear(4, 2), "act": m.GELU(approximate="tanh")}),
            m.Sequential(m.Flatten(), m.Unflatten(1, (2, 2))),
            m.Embedding(10, 3, padding_idx=0), m.LayerNorm([3, 4]), m.GroupNorm(2, 4),
            m.Upsample(scale_factor=2, mode="bilinear"), m.Identity(),
        )

    assert repr(build(torcia)) == repr(build(torch))


# ----- containers -----------------------------------------------------------------------


def test_sequential_indexing_slicing_and_editing():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b)
    seq.append(c)
    assert len(seq) == 3 and seq[-1] is c and list(seq) == [a, b, c]
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and list(head) == [a, b]
    assert head(torcia.ones(1, 2)).shape == torcia.Size([1, 3])
    del seq[1]
    assert list(seq._modules) == ["0", "1"] and seq[1] is c
    seq.insert(-1, b)
    assert list(seq) == [a, b, c]
    seq[1] = nn.Tanh()
    assert isinstance(seq[1], nn.Tanh)
    named = nn.Sequential(OrderedDict(first=a, second=c))
    assert named.first is a and [n for n, _ in named.named_children()] == ["first", "second"]
    with pytest.raises(IndexError, match="index 5 is out of range"):
        seq[5]


def test_module_list_and_dict():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    layers += [nn.ReLU()]
    assert len(layers) == 4 and len(list(layers.parameters())) == 6
    assert isinstance(layers[1:3], nn.ModuleList) and len(layers[1:3]) == 2
    del layers[0]
    assert list(layers._modules) == ["0", "1", "2"]
    with pytest.raises(TypeError, match="iterable"):
        layers.extend(nn.ReLU())
    heads = nn.ModuleDict({"a": nn.Linear(1, 1)})
    heads["b"] = nn.Linear(1, 2)
    assert list(heads) == ["a", "b"] and "b" in heads and len(heads) == 2
    assert [n for n, _ in heads.named_parameters()] == ["a.weight", "a.bias", "b.weight",
                                                        "b.bias"]
    assert heads.pop("a").out_features == 1 and list(heads.keys()) == ["b"]


def test_parameter_list_and_dict():
    plist = nn.ParameterList([torcia.zeros(2), nn.Parameter(torcia.ones(3))])
    plist.append(torcia.ones(1))
    assert len(plist) == 3 and all(isinstance(p, nn.Parameter) for p in plist)
    assert [n for n, _ in plist.named_parameters()] == ["0", "1", "2"]
    assert repr(plist) == (
        "ParameterList(\n"
        "    (0): Parameter containing: [torcia.float32 of size 2]\n"
        "    (1): Parameter containing: [torcia.float32 of size 3]\n"
        "    (2): Parameter containing: [torcia.float32 of size 1]\n"
        ")"
    )
    pdict = nn.ParameterDict({"w": torcia.ones(2, 2)})
    pdict["b"] = torcia.zeros(2)
    assert list(pdict) == ["w", "b"] and isinstance(pdict["b"], nn.Parameter)
    assert list(pdict.state_dict()) == ["w", "b"]


@pytest.mark.torch
def test_parameter_containers_print_like_torch():
    torch = pytest.importorskip("torch")
    ours = nn.ParameterList([torcia.zeros(2, 3), torcia.zeros(4, dtype=torcia.float64)])
    theirs = torch.nn.ParameterList([torch.zeros(2, 3), torch.zeros(4, dtype=torch.float64)])
    assert repr(ours) == repr(theirs).replace("torch.", "torcia.")
    ours = nn.ParameterDict({"a": torcia.zeros(1)})
    theirs = torch.nn.ParameterDict({"a": torch.zeros(1)})
    assert repr(ours) == repr(theirs).replace("torch.", "torcia.")


def test_always_call_forward_hook_runs_when_forward_raises():
    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("bad input")

    m = Broken()
    seen = []
    m.register_forward_hook(lambda mod, a, out: seen.append(("always", out)), always_call=True)
    m.register_forward_hook(lambda mod, a, out: seen.append("normal"))
    with pytest.raises(ValueError, match="bad input"):
        m(torcia.ones(1))
    assert seen == [("always", None)]


def test_extra_state_is_saved_and_restored():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(1, 1)
            self.seen = 0

        def get_extra_state(self):
            return {"seen": self.seen}

        def set_extra_state(self, state):
            self.seen = state["seen"]

    a = nn.Sequential(Counter())
    a[0].seen = 7
    sd = a.state_dict()
    assert list(sd) == ["0._extra_state", "0.fc.weight", "0.fc.bias"]  # own state first
    b = nn.Sequential(Counter())
    b.load_state_dict(sd)
    assert b[0].seen == 7
    del sd["0._extra_state"]
    with pytest.raises(RuntimeError, match='Missing key.*"0._extra_state"'):
        b.load_state_dict(sd)
    with pytest.raises(RuntimeError, match='Unexpected key.*"_extra_state"'):
        nn.Linear(1, 1).load_state_dict({**nn.Linear(1, 1).state_dict(), "_extra_state": 1})


def test_full_backward_hook_with_two_inputs_and_tuple_outputs():
    class Split(nn.Module):
        def forward(self, a, scale, b):
            return a * scale, a + b

    m = Split()
    a = torcia.randn(3, requires_grad=True)
    b = torcia.randn(3)  # needs no gradient: its grad_input entry is None
    seen = {}
    m.register_full_backward_hook(lambda mod, gi, go: seen.update(gi=gi, go=go))
    p, q = m(a, 2.0, b)
    (p.sum() * 3 + q.sum()).backward()
    assert len(seen["gi"]) == 2 and seen["gi"][1] is None
    np.testing.assert_allclose(seen["go"][0].numpy(), [3.0] * 3)
    np.testing.assert_allclose(seen["go"][1].numpy(), [1.0] * 3)
    # d/da (3 * 2a + a) = 7
    np.testing.assert_allclose(seen["gi"][0].numpy(), [7.0] * 3)
    np.testing.assert_allclose(a.grad.numpy(), [7.0] * 3)


def test_gradients_through_a_hooked_module_pass_finite_differences():
    torcia.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    calls = []
    net[0].register_full_backward_hook(lambda m, gi, go: calls.append(1))
    net.register_full_backward_pre_hook(lambda m, go: None)
    x = torcia.randn(5, 3, dtype=torcia.float64, requires_grad=True)
    assert torcia.autograd.gradcheck(net, (x,))
    assert torcia.autograd.gradgradcheck(net, (x,))
    assert calls
