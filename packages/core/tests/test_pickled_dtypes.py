"""Arrays whose dtype went through pickle, of every dtype (issue #44).

NumPy gives an unpickled array (a DataLoader worker's batch, a pickled dataset) a dtype
object equal to ``np.dtype(np.float32)`` but not the same one, and hands it on to what is
computed from it. torcia compares dtypes by value: tensors made from such arrays get
NumPy's own dtype object (sharing memory where the array is shared), and every op gives
what the same values in an ordinary array give.
"""

import pickle

import numpy as np
import pytest

import torcia


def _np_dtype(d):
    try:
        return d.to_numpy()
    except RuntimeError:  # bfloat16 without ml_dtypes
        return None


DTYPES = [d for d in (torcia.bool, torcia.uint8, torcia.int8, torcia.int16, torcia.int32,
                      torcia.int64, torcia.float16, torcia.bfloat16, torcia.float32,
                      torcia.float64, torcia.complex64, torcia.complex128)
          if _np_dtype(d) is not None]
SHAPES = [(), (0,), (3,), (2, 3), (4, 3)]


def _values(d, shape, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 5, size=shape) if d.category < 2 else rng.standard_normal(shape)
    if d.is_complex:
        a = a + 1j * rng.standard_normal(shape)
    return np.asarray(a).astype(d.to_numpy())


def _unpickled(a):
    out = pickle.loads(pickle.dumps(a))
    # ml_dtypes' bfloat16 unpickles as its one dtype object; NumPy's own dtypes do not
    assert out.dtype == a.dtype and (out.dtype is not a.dtype or a.dtype.isbuiltin != 1)
    return out


@pytest.mark.parametrize("d", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_tensors_from_pickled_arrays_take_numpys_dtype(d, shape):
    a = _unpickled(_values(d, shape, 0))
    canonical = d.to_numpy()
    for make in (torcia.tensor, torcia.as_tensor, torcia.from_numpy, torcia.asarray):
        t = make(a)
        assert t.dtype is d
        assert t.numpy().dtype is canonical
        np.testing.assert_array_equal(t.numpy(), a)
    shared = torcia.from_numpy(a)
    if a.size:
        a.reshape(-1)[0] = a.reshape(-1)[-1]
        assert shared.numpy().reshape(-1)[0] == a.reshape(-1)[-1]  # still the same memory
    # a non-contiguous array: its view keeps its strides
    if a.ndim == 2:
        assert torcia.from_numpy(a.T).stride() == torcia.from_numpy(np.ascontiguousarray(a).T
                                                                     ).stride()


def _ops(lib, x, y):
    """Ops over two tensors of one dtype, each defined for every dtype."""
    out = [x + y, x == y, _cat(lib, x, y), x.sum(), x.reshape(-1).clone(),
           x.to(lib.float64) if not x.is_complex() else x.to(lib.complex128)]
    if x.dtype is not lib.bool:
        out += [x * y, x - y]
    if x.ndim == 2:
        out.append(x @ y.transpose(0, 1) if x.dtype is not lib.bool else x.T.contiguous())
    return out


def _cat(lib, x, y):
    return lib.cat([x.reshape(-1), y.reshape(-1)])


@pytest.mark.parametrize("d", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_ops_on_pickled_arrays_match_ordinary_ones(d, shape):
    a, b = _values(d, shape, 1), _values(d, shape, 2)
    mixed = (torcia.from_numpy(_unpickled(a)), torcia.tensor(b))
    plain = (torcia.from_numpy(a), torcia.tensor(b))
    for got, want in zip(_ops(torcia, *mixed), _ops(torcia, *plain)):
        assert got.dtype is want.dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())
