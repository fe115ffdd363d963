"""torcia.library: op records derived from the op lists, the shared helpers, the fallback."""

import numpy as np
import pytest

import torcia
from torcia import _oprecords, library, ops
from torcia.utils.hooks import RemovableHandle


def test_every_op_in_the_lists_has_a_record_with_its_group():
    records = library.op_records()
    # plus what installed plugins define through torcia_register_ops
    assert set(ops.ALL) <= set(records)
    assert set(records) - set(ops.ALL) == set(library.plugin_ops.build())
    assert records["exp"].group == "unary_float"
    assert records["sum"].group == "reduce"
    assert records["sum"].params == {"dim": None, "keepdim": False, "dtype": None}
    assert records["add"].inputs == ("input", "other")
    assert records["eq"].differentiable is False and records["mul"].differentiable


def test_records_carry_the_reference_kernel_and_docstring():
    rec = library.get_op("matmul")
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(rec.kernel(a, a.T), a @ a.T)
    assert "matrix" in rec.doc.lower()


def test_an_op_added_to_a_list_becomes_a_record(monkeypatch):
    monkeypatch.setattr(ops, "MY_GROUP", ("my_op",), raising=False)
    monkeypatch.setattr(_oprecords._records, "builtin", None)
    assert library.get_op("my_op").group == "my_group"
    monkeypatch.undo()
    _oprecords._records.builtin = None
    with pytest.raises(KeyError, match="no op named 'my_op'"):
        library.get_op("my_op")


def test_removable_handle_on_a_dict_and_on_a_list():
    hooks, flags = {}, set()
    handle = RemovableHandle(hooks, extra_dict=flags)
    hooks[handle.id] = print
    flags.add(handle.id)
    with handle:
        assert handle.id in hooks
    assert not hooks and not flags
    handle.remove()  # a second removal does nothing
    seq = [print]
    RemovableHandle(seq, hook=print).remove()
    assert seq == []


def test_parse_to_reads_the_arguments_of_to():
    t = torcia.zeros(2, dtype=torcia.float64)
    assert library.parse_to(t) == (t.device, torcia.float64, False, False)
    assert library.parse_to("cpu", torcia.int32, True, True) == ("cpu", torcia.int32, True, True)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['bogus'\]"):
        library.parse_to(bogus=1)


def test_dtype_helpers():
    assert library.dtype_by_name("half") is torcia.float16
    assert library.dtype_from_numpy(np.dtype("int64")) is torcia.int64
    with pytest.raises(KeyError, match="no dtype named 'float8'"):
        library.dtype_by_name("float8")


def test_host_fallback_runs_the_reference_kernel():
    kernel = library.host_fallback("cumsum", "cpu")
    np.testing.assert_array_equal(kernel(np.array([1, 2, 3]), dim=0), [1, 3, 6])
    with pytest.raises(KeyError, match="no reference kernel"):
        library.host_fallback("no_such_op", "cpu")


def test_thread_callbacks_follow_set_num_threads():
    seen = []
    handle = library.add_thread_callback(seen.append)
    before = torcia.get_num_threads()
    try:
        torcia.set_num_threads(1)
        handle.remove()
        torcia.set_num_threads(2)
    finally:
        torcia.set_num_threads(before)
    assert seen == [1]


def test_protocols_describe_the_backends():
    cpu = library.get_backend("cpu")
    assert isinstance(cpu, library.BackendProtocol)


def test_kernel_setup_runs_at_first_call_only():
    from torcia.backend import Backend, KernelRegistry

    calls = []
    backend = Backend("cpu", np)
    registry = KernelRegistry({"cpu": backend})

    def setup():
        calls.append("setup")

    registry.add("neg", "cpu", np.negative, setup=setup)
    assert calls == []
    np.testing.assert_array_equal(backend.kernels["neg"](np.array([1])), [-1])
    assert calls == ["setup"]


def test_meta_device_shapes_without_data():
    a, b = torcia.empty(3, 4, device="meta"), torcia.empty(4, 5, device="meta")
    out = a @ b
    assert out.shape == (3, 5) and out.device == torcia.device("meta")
    huge = torcia.empty(10**6, 10**6, device="meta")  # no memory behind it
    assert (huge.exp() * 2 + huge).shape == (10**6, 10**6)
    assert (torcia.ones(2, 3, device="meta") > 0).dtype is torcia.bool
    assert torcia.zeros(2, 3).to("meta").device.type == "meta"
    assert repr(out) == "tensor(..., device='meta', size=(3, 5))"
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        torcia.empty(1, device="meta").item()
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied"):
        a @ a


def test_registry_lookup_by_name_or_class():
    from torcia.backend import backends

    cpu = backends.get("cpu")
    assert backends.get(type(cpu)) is not None
    assert backends.name_of(cpu) == "cpu"
    with pytest.raises(KeyError, match="no device backend of class RemovableHandle"):
        backends.get(RemovableHandle)
    with pytest.raises(KeyError, match="is not a registered device backend"):
        backends.name_of(object())


# ----- the one fallback of device plugins ------------------------------------------------


def _copy(array, index=None):
    return np.array(array, copy=True)


class _Devices:
    """Three devices on NumPy (copies on transfer), one per declared fallback, each with
    a matmul (and sigmoid) kernel of its own that counts its calls; "rdev" also has a
    partial ``exp``
    and a multi-tensor step that hand what they do not cover on."""

    def __init__(self):
        self.matmuls, self.sigmoids = [], []

    @torcia.hookimpl
    def torcia_register_backends(self, registry):
        for name, fallback in (("hdev", "host"), ("rdev", "reference"), ("ddev", "decompose")):
            registry.add(library.Backend(name, np, to_host=_copy, from_host=_copy,
                                         fallback=fallback))

    @torcia.hookimpl
    def torcia_register_kernels(self, registry):
        def matmul(a, b):
            self.matmuls.append(a.shape)
            return np.matmul(a, b)

        def exp(a):  # float64 only: the rest goes to the fallback
            if a.dtype != np.float64:
                return library.fallback("exp", "rdev", exp)(a)
            return np.exp(a) + 0.0

        def step(params, *, lr):
            for p in params:
                p -= lr

        def native_step(params, *, lr):
            return library.fallback("toy_step", "rdev", native_step)(params, lr=lr)

        def sigmoid(a):
            self.sigmoids.append(a.shape)
            return (1 / (1 + np.exp(-a))).astype(a.dtype)

        for device in ("hdev", "rdev", "ddev"):
            registry.add("matmul", device, matmul)
        registry.add("sigmoid", "hdev", sigmoid)
        registry.add("sigmoid", "rdev", sigmoid)
        # "ddev" implements the primitives but exp: its composites decompose into them
        reference = library.ReferenceKernels().table()
        for name in library.primitives():
            if name in reference and name not in ("exp", "matmul"):
                registry.add(name, "ddev", reference[name])
        registry.add("exp", "rdev", exp)
        registry.add("toy_step", "rdev", step)
        registry.add("toy_step", "rdev", native_step, priority=10)


@pytest.fixture
def devices():
    pm = torcia.plugins.manager()
    plugin = _Devices()
    pm.register(plugin, name="test-fallback-devices")
    for registry in list(torcia.plugins._state.registries.values()):
        registry.reset()
    yield plugin
    pm.unregister(plugin)
    torcia.plugins.reset()


def test_a_backend_declares_a_known_fallback():
    with pytest.raises(ValueError, match="fallback must be one of 'decompose', 'host', "
                                         "'reference', got 'cpu'"):
        library.Backend("x", np, fallback="cpu")


def test_each_device_runs_what_it_lacks_through_its_declared_fallback(devices):
    x = torcia.randn(2, 3, 5, 5)
    w = torcia.randn(4, 3, 3, 3)
    want = library.functional.conv2d(x, w, padding=1)
    for device, how in (("hdev", "fallback"), ("rdev", "fallback"), ("ddev", "decomposed")):
        ops = library.device_ops(device)
        assert ops["matmul"] == "native" and ops["conv"] == how, device
        got = library.functional.conv2d(x.to(device), w.to(device), padding=1)
        torcia.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    # a primitive without a kernel: on host, on the device's array module, or missing
    assert library.device_ops("ddev")["exp"] == "missing"
    with pytest.raises(NotImplementedError, match="no kernel for device type 'ddev'"):
        torcia.zeros(2).to("ddev").exp()
    assert torcia.zeros(2).to("hdev").exp().tolist() == [1.0, 1.0]


def test_the_random_composites_draw_the_same_numbers_on_a_device_of_primitives(devices):
    # "ddev" has rand and randn only: uniform, normal, bernoulli and dropout's mask draw
    # through them, from the same generator, the reference kernels' values bit for bit
    assert {op: library.device_ops("ddev")[op] for op in ("rand", "uniform", "dropout_mask")} \
        == {"rand": "native", "uniform": "decomposed", "dropout_mask": "decomposed"}
    p = torcia.rand(3, 4)
    x = torcia.ones(3, 4)
    results = {}
    for device in ("cpu", "ddev"):
        torcia.manual_seed(7)
        results[device] = [
            torcia.empty(3, 4, device=device).uniform_(-2, 3),
            torcia.empty(3, 4, dtype=torcia.float64, device=device).normal_(1, 2),
            torcia.normal(1.0, 2.0, size=(5,), device=device),
            torcia.bernoulli(p.to(device)),
            library.functional.dropout(x.to(device), 0.3),
            torcia.rand(2, device=device),  # the generator is where the reference left it
        ]
    for want, got in zip(results["cpu"], results["ddev"]):
        assert got.device.type == "ddev" and got.dtype == want.dtype
        assert got.cpu().numpy().tobytes() == want.numpy().tobytes()


def test_reference_kernels_on_a_device_call_its_own_kernels(devices):
    # the reference SiLU is written with sigmoid: on "rdev" it runs the device's, on
    # "hdev" the host's (the round trip copies the arrays to NumPy's "cpu")
    x = torcia.randn(2, 3)
    devices.sigmoids.clear()
    library.functional.silu(x.to("hdev"))
    assert devices.sigmoids == []
    out = library.functional.silu(x.to("rdev"))
    assert devices.sigmoids == [(2, 3)]
    torcia.testing.assert_close(out.cpu(), library.functional.silu(x))


def test_a_partial_kernel_hands_the_rest_to_the_fallback(devices):
    x = torcia.tensor([0.0, 1.0])
    assert library.device_ops("rdev")["exp"] == "native"
    torcia.testing.assert_close(x.to("rdev").exp().cpu(), x.exp())  # float32: the fallback
    assert library.fallback("exp", "rdev") is np.exp  # the reference kernel on the xp
    # an op without a reference kernel: the kernel registered below the one handing on
    p = np.ones(2)
    library.get_backend("rdev").kernels["toy_step"]([p], lr=0.5)
    np.testing.assert_array_equal(p, [0.5, 0.5])
    with pytest.raises(NotImplementedError, match="no fallback on device type 'ddev'"):
        library.fallback("toy_step", "ddev")
    with pytest.raises(NotImplementedError, match="runs through its decomposition"):
        library.fallback("conv", "ddev")


def test_schema_of_a_wrapped_kernel_comes_from_the_kernel_itself():
    # topk's reference kernel is wrapped (complex inputs refused) and its backward formula
    # names only ``dim``: the other parameters come from the kernel's own signature
    topk = library.get_op("topk")
    # k is a parameter where the backward formula names the inputs (autograd installed) and
    # an input where only the kernel's signature is read
    assert {"dim": -1, "largest": True, "sorted": True}.items() <= topk.params.items()
    assert "k" in topk.params or "k" in topk.inputs
    assert library.get_op("sort").params == {"dim": -1, "descending": False, "stable": False}
    assert library.get_op("clamp").inputs[1:] == ("lo", "hi")


# ---- a tensor's internals: the published fields and functions ----------------------------


def test_each_published_field_is_the_field_the_api_shows():
    pytest.importorskip("torcia.autograd")
    x = torcia.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], requires_grad=True)
    y = x * 2
    y.retain_grad()
    v = y[0]
    assert x.__torcia_data__ is library.array(x)
    assert x.__torcia_device__ is x.device
    assert x.__torcia_requires_grad__ is True and v.__torcia_requires_grad__ is True
    assert v.__torcia_base__ is y and x.__torcia_base__ is None
    assert y.__torcia_retains_grad__ is True and x.__torcia_retains_grad__ is False
    assert v.__torcia_output_nr__ == v.output_nr == 0
    with torcia.no_grad():
        y.add_(1)
    # one counter for the storage: the view counts the write into its base
    assert v.__torcia_version__ is y.__torcia_version__
    assert v.__torcia_version__[0] == v._version == 1
    y.sum().backward()
    assert x.__torcia_grad__ is x.grad


def test_the_published_names_write_the_fields():
    x = torcia.zeros(2)
    x.__torcia_data__ = np.ones(3, dtype=np.float32)
    assert x.tolist() == [1.0, 1.0, 1.0]
    x.__torcia_requires_grad__ = True
    assert x.requires_grad
    # the published list is the whole contract: each name is a field of every tensor
    assert set(library.TENSOR_FIELDS) == {n for n in dir(x) if n.startswith("__torcia_")}


def test_wrap_alias_and_versions():
    a = np.arange(3.0)
    t = library.wrap(a, torcia.device("cpu"))
    a[0] = 7
    assert t.tolist() == [7.0, 1.0, 2.0] and t.grad_fn is None
    view = library.wrap(a[1:], t.device, t)
    assert view.__torcia_base__ is t and view.__torcia_version__ is t.__torcia_version__
    alias = library.alias(t)
    assert library.array(alias) is a and alias.__torcia_base__ is None
    library.bump_version(t)
    assert (t._version, alias._version, view._version) == (1, 1, 1)
    assert library.tensor_of(a, "cpu").device == torcia.device("cpu")


def test_set_grad_mode_returns_the_mode_before_in_this_thread_only():
    import threading

    seen = []
    assert library.set_grad_mode(False) is True
    try:
        thread = threading.Thread(target=lambda: seen.append(torcia.is_grad_enabled()))
        thread.start()
        thread.join()
        assert not torcia.is_grad_enabled() and seen == [True]
    finally:
        assert library.set_grad_mode(True) is False


def test_seed_callbacks_follow_manual_seed_until_removed():
    seen = []
    handle = library.add_seed_callback(seen.append)
    torcia.manual_seed(3)
    handle.remove()
    torcia.manual_seed(4)
    assert seen == [3]


def test_the_installed_autograd_engine_follows_the_protocol():
    pytest.importorskip("torcia.autograd")
    assert isinstance(library.autograd_engine(), library.AutogradEngine)


def test_the_autograd_protocol_declares_what_registration_requires():
    declared = {n for n in vars(library.AutogradEngine) if not n.startswith("_")}
    assert {"register_hook", "register_post_accumulate_grad_hook", "retain_grad"} <= declared

    class Partial:  # every declared method but one
        pass

    for name in declared - {"retain_grad"}:
        setattr(Partial, name, lambda self, *a, **k: None)
    with pytest.raises(TypeError, match="must implement retain_grad"):
        library.register_autograd_mode(Partial())


def test_op_table_resolves_its_names_to_the_records():
    table = library.op_table("my table", {"mul": 1, "exp": 2})
    assert table == {"mul": 1, "exp": 2}
    assert all(name in library.op_records() for name in table)


def test_op_table_refuses_a_name_no_op_has_naming_the_table_and_the_name():
    with pytest.raises(KeyError, match="my table: no op named 'mull'; similar: .*mul"):
        library.op_table("my table", {"mul": 1, "mull": 2})


def test_op_table_leaves_out_an_optional_op_only_while_no_plugin_defines_it(monkeypatch):
    assert library.op_table("my table", {"exp": 1, "plugin_op": 2},
                            optional=["plugin_op"]) == {"exp": 1}
    monkeypatch.setattr(ops, "MY_GROUP", ("plugin_op",), raising=False)
    monkeypatch.setattr(_oprecords._records, "builtin", None)
    assert library.op_table("my table", {"exp": 1, "plugin_op": 2},
                            optional=["plugin_op"]) == {"exp": 1, "plugin_op": 2}
