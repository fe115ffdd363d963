"""torcia.library: op records derived from the op lists, the shared helpers, the fallback."""

import numpy as np
import pytest

import torcia
from torcia import library, ops
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
    monkeypatch.setattr(library._records, "builtin", None)
    assert library.get_op("my_op").group == "my_group"
    monkeypatch.undo()
    library._records.builtin = None
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
    assert backend.overridden("neg", backend.kernels["neg"]) is None
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
