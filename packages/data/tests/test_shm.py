"""The batch transport on its own: pack in this process, unpack in this process."""

import collections
import mmap
import os

import numpy as np
import pytest

import torcia
from torcia.data import _shm

pytestmark = [
    pytest.mark.skipif(not _shm.available(), reason="no POSIX shared memory"),
    pytest.mark.usefixtures("no_leaks"),
]
Pair = collections.namedtuple("Pair", "image label")
BIG = _shm.MIN_SHARED_BYTES // 4  # float32 elements in an array just large enough to share


def prefix():
    return f"tc{os.getpid()}_test"  # under the no_leaks fixture's watch


def mapped(arr) -> bool:
    """Whether ``arr`` is a view of a shared-memory mapping."""
    while arr is not None and not isinstance(arr, mmap.mmap):
        arr = getattr(arr, "base", None) if not isinstance(arr, memoryview) else arr.obj
    return isinstance(arr, mmap.mmap)


def test_round_trip_of_a_nested_batch(segments):
    rng = np.random.default_rng(0)
    batch = {
        "images": torcia.from_numpy(rng.standard_normal((4, BIG), dtype=np.float32)),
        "masks": rng.integers(0, 2, (4, BIG)).astype(bool),
        "half": rng.standard_normal((2, BIG)).astype(np.float16),
        "strided": rng.standard_normal((BIG, 4), dtype=np.float32)[:, ::2],
        "pairs": [Pair(torcia.zeros(3), 7), "text"],
    }
    packed = _shm.pack(batch, prefix())
    assert len(packed.layout) == 4 and len(segments()) == 4
    out = _shm.unpack(packed)
    # nothing is ever named in /dev/shm; each live mapping keeps a descriptor (mmap's own)
    assert [n for n in segments() if not n.startswith("/memfd:")] == []
    assert len(segments()) == 4
    assert isinstance(out["images"], torcia.Tensor) and isinstance(out["masks"], np.ndarray)
    for key in ("images", "masks", "half", "strided"):
        assert np.array_equal(np.asarray(out[key]), np.asarray(batch[key]))
        assert out[key].dtype == batch[key].dtype
    assert out["pairs"][0].image.tolist() == [0.0, 0.0, 0.0] and out["pairs"][0].label == 7
    assert out["pairs"][1] == "text"
    del out
    assert segments() == []  # the last mapping gone, the kernel frees the segment


def test_each_large_array_has_its_own_mapping_and_small_ones_none():
    batch = (torcia.ones(BIG), torcia.ones(BIG), torcia.arange(4))
    images, masks, labels = _shm.unpack(_shm.pack(batch, prefix()))
    assert mapped(images.numpy()) and mapped(masks.numpy())
    assert images.numpy().base is not masks.numpy().base  # each frees its memory alone
    assert not mapped(labels.numpy())  # keeping the labels keeps no segment alive
    assert labels.tolist() == [0, 1, 2, 3]


def test_batches_from_the_mapping_are_writable():
    (images,) = _shm.unpack(_shm.pack((np.zeros(BIG, np.float32),), prefix()))
    images[:3] = 5
    assert images[:4].tolist() == [5, 5, 5, 0]


def test_discard_unlinks(segments):
    packed = _shm.pack([np.ones(BIG, np.float32)] * 3, prefix())
    assert len(segments()) == 3
    _shm.discard(packed)
    assert segments() == []


def test_a_failed_pack_leaves_no_segment():
    class Unpicklable:
        def __reduce__(self):
            raise TypeError("cannot pickle this")

    with pytest.raises(TypeError, match="cannot pickle this"):
        _shm.pack([np.ones(BIG, np.float32), Unpicklable()], prefix())


def test_bfloat16_keeps_its_dtype():
    pytest.importorskip("ml_dtypes")
    t = torcia.ones(2 * BIG, dtype=torcia.bfloat16)  # 2 bytes an element
    (out,) = _shm.unpack(_shm.pack([t], prefix()))
    assert mapped(out.numpy())
    assert out.dtype is torcia.bfloat16 and out.tolist() == t.tolist()
