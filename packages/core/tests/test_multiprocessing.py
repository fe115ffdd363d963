"""torcia.multiprocessing: tensors through shared memory, spawn/start_processes and
their error reporting, as torch.multiprocessing."""

import os
import sys

import numpy as np
import pytest

import torcia
import torcia.multiprocessing as mp

sys.path.insert(0, os.path.dirname(__file__))  # children import mp_helpers by name
import mp_helpers  # noqa: E402


def _layouts():
    """Tensors of several dtypes and layouts, with the base each is a view of."""
    for dtype in (torcia.float32, torcia.float64, torcia.int64, torcia.bool, torcia.float16):
        base = torcia.arange(24).to(dtype).reshape(4, 6)
        yield base, base
        yield base, base[1:3, ::2]   # a strided view into the middle
        yield base, base.t()         # a transposed view
    empty = torcia.zeros(0, 3)
    yield empty, empty
    scalar = torcia.tensor(3.5)
    yield scalar, scalar


@pytest.mark.parametrize("k", range(len(list(_layouts()))))
def test_share_memory_keeps_values_and_aliasing(k):
    base, t = list(_layouts())[k]
    other_view = base.reshape(-1) if base.is_contiguous() else base
    before_t, before_base = t.numpy().copy(), base.numpy().copy()
    assert not t.is_shared()
    assert t.share_memory_() is t
    assert t.is_shared() and base.is_shared() and other_view.is_shared()
    np.testing.assert_array_equal(t.numpy(), before_t)
    np.testing.assert_array_equal(base.numpy(), before_base)
    if base.numel():  # writes through one view reach every other view
        base.view(-1)[0] = 1
        assert other_view.reshape(-1)[0].item() == 1
    assert t.share_memory_() is t  # a second call is a no-op


def test_is_shared_is_false_for_ordinary_tensors():
    assert not torcia.ones(2).is_shared()
    assert not torcia.ones(2).clone().is_shared()
    shared = torcia.ones(2).share_memory_()
    assert not shared.clone().is_shared()  # a copy lives in private memory again


def test_a_dead_weak_proxy_on_the_heap_does_not_stop_sharing():
    # the scan for tensors over the same memory walks every object the collector tracks;
    # a weakref.proxy whose referent died raises ReferenceError when asked its class
    import weakref

    class Referent:
        pass

    holder = [weakref.proxy(Referent())]  # a tracked container keeps the dead proxy
    base = torcia.ones(3)
    view = base[1:]
    assert view.share_memory_() is view
    assert base.is_shared() and view.is_shared() and holder


def test_sharing_strategies():
    assert mp.get_sharing_strategy() in mp.get_all_sharing_strategies()
    with pytest.raises(ValueError, match="file_system"):
        mp.set_sharing_strategy("file_system")


def test_the_standard_names_are_there():
    import multiprocessing

    for name in multiprocessing.__all__:
        assert getattr(mp, name) is getattr(multiprocessing, name), name


def test_a_non_leaf_tensor_that_requires_grad_is_refused():
    from multiprocessing.reduction import ForkingPickler

    pytest.importorskip("torcia.autograd")
    x = torcia.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="Cowardly refusing"):
        ForkingPickler.dumps(x * 2)


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_queue_passes_tensors_through_shared_memory():
    ctx = mp.get_context("spawn")
    inbox, outbox, done = ctx.Queue(), ctx.Queue(), ctx.Event()
    x = torcia.zeros(3)
    p = ctx.Process(target=mp_helpers.add_one_and_reply, args=(inbox, outbox, done))
    p.start()
    inbox.put(x)
    child_saw_shared, reply = outbox.get(timeout=60)
    done.set()
    p.join(60)
    assert p.exitcode == 0
    assert child_saw_shared and x.is_shared() and x.tolist() == [1.0, 1.0, 1.0]
    assert reply.is_shared() and reply.tolist() == [7.0, 7.0]


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_pool_maps_over_tensors():
    with mp.get_context("spawn").Pool(2) as pool:
        out = pool.map(mp_helpers.square, [torcia.tensor([2.0]), torcia.tensor([-3.0])])
    assert [t.item() for t in out] == [4.0, 9.0]


@pytest.mark.slow
@pytest.mark.multiprocess
def test_spawn_passes_the_index_and_shares_arguments():
    shared = torcia.zeros(3)
    mp.spawn(mp_helpers.write_rank, args=(shared,), nprocs=3)
    assert shared.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.slow
@pytest.mark.multiprocess
def test_an_error_in_a_child_is_raised_with_its_traceback():
    with pytest.raises(mp.ProcessRaisedException) as info:
        mp.spawn(mp_helpers.fail_at, args=(1,), nprocs=2)
    assert info.value.error_index == 1
    assert "-- Process 1 terminated with the following error:" in str(info.value)
    assert "ValueError: process 1 fails on purpose" in str(info.value)
    assert "fail_at" in str(info.value)  # the child's traceback


@pytest.mark.slow
@pytest.mark.multiprocess
def test_a_child_killed_by_a_signal_is_named():
    with pytest.raises(mp.ProcessExitedException) as info:
        mp.start_processes(mp_helpers.kill_at, args=(0,), nprocs=2, start_method="fork")
    assert info.value.error_index == 0 and info.value.signal_name == "SIGKILL"
    assert info.value.exit_code == -9
    assert str(info.value) == "process 0 terminated with signal SIGKILL"


@pytest.mark.slow
@pytest.mark.multiprocess
def test_an_exit_code_is_reported_and_join_false_returns_the_context():
    context = mp.start_processes(mp_helpers.exit_with, args=(3,), nprocs=1, join=False,
                                 start_method="fork")
    assert isinstance(context, mp.ProcessContext) and len(context.pids()) == 1
    with pytest.raises(mp.ProcessExitedException, match="terminated with exit code 3"):
        while not context.join(timeout=30):
            pass


def test_spawn_warns_for_other_start_methods_and_checks_nprocs():
    with pytest.raises(ValueError, match="nprocs"):
        mp.start_processes(mp_helpers.square, nprocs=0)
    with pytest.warns(FutureWarning, match="start_processes"):
        mp.spawn(mp_helpers.write_rank, args=(torcia.zeros(1),), nprocs=1,
                 start_method="fork")
