import json
import threading

import pytest

import torcia
from torcia.backend import get_backend
from torcia.profiler import profile, record_function


def test_ops_and_user_blocks_are_timed_and_tabled():
    a = torcia.randn(16, 16)
    with profile(record_shapes=True) as prof:
        with record_function("block"):
            (a @ a + 1).sum()
    names = {e.key for e in prof.key_averages()}
    assert {"matmul", "add", "sum", "block"} <= names
    block = next(e for e in prof.key_averages() if e.key == "block")
    inner = sum(e.cpu_time_total for e in prof.key_averages() if e.kind == "op")
    assert block.cpu_time_total >= inner and block.count == 1
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=3)
    assert table.splitlines()[3].startswith("block") and "Self CPU time total" in table
    shapes = {str(e.input_shapes) for e in prof.key_averages(group_by_input_shape=True)
              if e.key == "matmul"}
    assert shapes == {"[[16, 16], [16, 16]]"}
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="nonsense")


def test_backward_nodes_are_timed_when_autograd_is_there():
    pytest.importorskip("torcia.autograd")
    x = torcia.randn(4, requires_grad=True)
    with profile() as prof:
        (x.exp() * 2).sum().backward()
    kinds = {(e.key, e.kind) for e in prof.key_averages()}
    assert ("ExpBackward0", "backward") in kinds and ("exp", "op") in kinds


def test_chrome_trace_is_json_in_the_trace_format(tmp_path):
    with profile(with_stack=True) as prof:
        torcia.ones(3) * 2
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path)
    events = json.loads(path.read_text())["traceEvents"]
    mul = next(e for e in events if e["name"] == "mul")
    assert mul["ph"] == "X" and mul["dur"] >= 0 and mul["args"]["backend"] in ("core", "cpu")
    assert "test_profiler.py" in mul["args"]["stack"]


def test_the_kernel_tables_stay_untouched():
    cpu = get_backend("cpu")
    before = dict(cpu.kernels)
    with profile():
        torcia.ones(2) + torcia.ones(2)
        assert all(cpu.kernels[k] is v for k, v in before.items())
    assert all(cpu.kernels[k] is v for k, v in before.items())
    with profile(), pytest.raises(RuntimeError, match="already active"):
        with profile():
            pass


def test_another_thread_runs_unprofiled_meanwhile():
    started, done = threading.Event(), threading.Event()
    counts = []

    def worker():
        started.wait()
        with profile() as other:
            for _ in range(50):
                torcia.ones(3).exp()
        counts.append(sum(e.count for e in other.key_averages() if e.key == "exp"))
        for _ in range(50):  # after its own profile: runs unprofiled again
            torcia.ones(3).cos()
        done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    with profile() as prof:
        started.set()
        while not done.is_set():
            torcia.ones(3).sin()
    thread.join()
    keys = {e.key for e in prof.key_averages()}
    assert "sin" in keys and not {"exp", "cos"} & keys
    assert counts == [50]
