"""NumPy's allocator while the plugin is in use (csrc/memory.cpp): arrays of 64 KiB or more
start on a page, and every NumPy operation that allocates, grows or frees data still works."""

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from numpy._core.multiarray import get_handler_name

import torcia

PAGE = 4096
NAME = "torcia_cpu_page_aligned"


@pytest.fixture(autouse=True)
def policy_applied(registered):
    torcia.ones(2, 2) @ torcia.ones(2, 2)  # the first kernel call installs the allocator
    if get_handler_name() != NAME:
        pytest.skip("TORCIA_CPU_KEEP_DEFAULTS keeps NumPy's allocator")


@pytest.mark.parametrize("nbytes", [1, 15, 16, 1000, 4096, 65535, 65536, 65537, 1 << 20,
                                    (4 << 20) + 8, 3 * (1 << 22) + 4])
def test_large_arrays_start_on_a_page_and_small_ones_stay_16_byte_aligned(nbytes):
    a = np.empty(nbytes, np.uint8)
    assert get_handler_name(a) == NAME
    assert a.ctypes.data % (PAGE if nbytes >= 65536 else 16) == 0
    a[:] = 7  # every byte of the block is writable
    assert int(a.sum(dtype=np.int64)) == 7 * nbytes


@pytest.mark.parametrize("nbytes", [0, 24, 70000, 5 << 20])
def test_zeros_come_from_calloc_zeroed(nbytes):
    for _ in range(3):  # reused blocks too
        junk = np.full(nbytes, 0xAB, np.uint8)
        del junk
        z = np.zeros(nbytes, np.uint8)
        assert not z.any()


@pytest.mark.parametrize("old, new", [(10, 100_000), (100_000, 10), (50_000, 200_000),
                                      (200_000, 50_000), (1, 1)])
def test_resize_keeps_the_data_across_the_page_threshold(old, new):
    a = np.arange(old, dtype=np.float64)
    a.resize(new, refcheck=False)
    keep = min(old, new)
    np.testing.assert_array_equal(a[:keep], np.arange(keep, dtype=np.float64))
    assert (a[keep:] == 0).all()  # numpy zero-fills a grown array
    if a.nbytes >= 65536:
        assert a.ctypes.data % PAGE == 0


def test_growing_buffers_of_numpy_functions():
    # fromiter and loadtxt grow their result with realloc as they read
    np.testing.assert_array_equal(np.fromiter(iter(range(50_000)), np.int64),
                                  np.arange(50_000))
    text = "\n".join(f"{i} {2 * i}" for i in range(20_000))
    got = np.loadtxt(text.splitlines(), dtype=np.int64)
    np.testing.assert_array_equal(got[:, 1], 2 * np.arange(20_000))


def test_arrays_survive_pickle_copy_and_views_outliving_their_base():
    a = np.random.default_rng(0).standard_normal((300, 300))
    view = a[10:20]
    del a
    b = pickle.loads(pickle.dumps(view))
    np.testing.assert_array_equal(b, view)
    assert np.array_equal(view.copy(), view)


@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer aborts on a malloc above 1 TiB by design")
def test_an_impossible_size_is_a_memory_error_not_a_crash():
    with pytest.raises(MemoryError):
        np.empty(2 ** 62, np.uint8)
    with pytest.raises((MemoryError, ValueError)):
        np.zeros(2 ** 62, np.uint8)


def test_torcia_tensors_of_native_kernels_start_on_a_page():
    x = torcia.randn(256, 256)
    for y in (x.tanh(), x + x, x @ x, torcia.nn.functional.layer_norm(x, (256,))):
        assert y.numpy().ctypes.data % PAGE == 0


def test_other_threads_keep_numpy_s_allocator():
    # the handler is a context variable: a thread that never ran a kernel has NumPy's own
    code = ("import threading, torcia, numpy as np\n"
            "from numpy._core.multiarray import get_handler_name\n"
            "torcia.ones(2, 2) @ torcia.ones(2, 2)\n"
            "seen = []\n"
            "t = threading.Thread(target=lambda: seen.append(get_handler_name()))\n"
            "t.start(); t.join(); print(get_handler_name(), seen[0])")
    env = {k: v for k, v in os.environ.items() if k != "TORCIA_CPU_KEEP_DEFAULTS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env).stdout.split()
    assert out == [NAME, "default_allocator"]
