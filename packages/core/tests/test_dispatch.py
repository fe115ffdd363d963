"""The op list, the reference kernel table, and the hot path.

Every core op (outside the NN group, whose owner tests it) has a reference kernel and a
public function; the dispatch of an op calls no pluggy hook once tables are built.
"""

import pluggy
import pytest

import torcia
from torcia import ops
from torcia.backend import CPU

CORE_OPS = [op for op in ops.ALL if op not in ops.NN]

# ops whose public entry point has another name than the op
PUBLIC_NAMES = {
    "cast": lambda: torcia.Tensor.to,
    "max_dim": lambda: torcia.max,
    "min_dim": lambda: torcia.min,
    "median_dim": lambda: torcia.median,
    "mode_dim": lambda: torcia.mode,
    "detach_view": lambda: torcia.Tensor.detach,
    "getitem": lambda: torcia.Tensor.__getitem__,
    "index_put": lambda: torcia.Tensor.__setitem__,
    "uniform": lambda: torcia.Tensor.uniform_,
    "pad": lambda: torcia._ops.movement.pad,  # torcia.nn.functional.pad in torcia-nn
    "linalg_lu_permutation": lambda: torcia.lu_unpack,
    "linalg_geqrf": lambda: torcia.geqrf,
    "fft_c2c": lambda: torcia.fft.fft, "fft_r2c": lambda: torcia.fft.rfft,
    "fft_c2r": lambda: torcia.fft.irfft,
    "sparse_mm": lambda: torcia.sparse.mm,
}


def test_every_core_op_has_a_reference_kernel():
    table = CPU.backend.kernels
    missing = [op for op in CORE_OPS if op not in table]
    assert missing == []


def test_reference_table_has_no_unknown_kernels():
    from torcia._numpy_backend import Reference

    assert set(Reference().table()) <= set(ops.ALL)


def test_op_names_are_unique():
    assert len(ops.ALL) == len(set(ops.ALL))


@pytest.mark.parametrize("op", CORE_OPS)
def test_every_core_op_has_a_public_function(op):
    if op in PUBLIC_NAMES:
        fn = PUBLIC_NAMES[op]()
    elif op.startswith("linalg_"):
        fn = getattr(torcia.linalg, op[len("linalg_"):], None)
    elif op in ops.SPECIAL_UNARY + ops.SPECIAL_BINARY + ops.SPECIAL_OTHER:
        fn = getattr(torcia.special, op, None)
    else:
        fn = getattr(torcia, op, None) or getattr(torcia.Tensor, op, None)
    assert callable(fn), op


def _workload(a, b, m, idx):
    a + b
    a * 2.0
    (a - b).sum()
    a.exp()
    m @ m
    m[0]
    m[idx]
    torcia.cat([a, b])
    torcia.zeros(4)
    a.view(2, 2).t()
    a.sort()
    torcia.linalg.det(m)
    c = a.clone()
    c += 1
    c[0] = 5.0


def test_dispatch_calls_no_plugin_hook(monkeypatch):
    a, b = torcia.ones(4), torcia.arange(4.0)
    m, idx = torcia.eye(3), torcia.tensor([0, 2])
    _workload(a, b, m, idx)  # warm-up: the first use builds the tables through hooks

    calls = []
    original_call = pluggy.HookCaller.__call__
    original_impls = pluggy.HookCaller.get_hookimpls

    def counting_call(self, *args, **kwargs):
        calls.append(self.name)
        return original_call(self, *args, **kwargs)

    def counting_impls(self):
        calls.append(self.name)
        return original_impls(self)

    monkeypatch.setattr(pluggy.HookCaller, "__call__", counting_call)
    monkeypatch.setattr(pluggy.HookCaller, "get_hookimpls", counting_impls)
    for _ in range(70):  # 15 ops each: over 1000 ops
        _workload(a, b, m, idx)
    assert calls == []
    # the counter does see a hook call
    torcia.plugins.manager().hook.torcia_autograd_engine()
    assert calls == ["torcia_autograd_engine"]
