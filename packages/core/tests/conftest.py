"""Shared test helpers for torcia-core."""

import numpy as np
import pytest

import torcia


@pytest.fixture
def torch_parity():
    """``check(cases, *arrays)``: run each ``case(lib, *tensors)`` with torcia and with torch
    on the same NumPy ``arrays`` and compare every output (dtype and values)."""
    torch = pytest.importorskip("torch")

    def check(cases, *arrays, rtol=1e-6, atol=0.0, dtypes=True):
        for case in cases:
            ours = case(torcia, *(torcia.from_numpy(a.copy()) for a in arrays))
            theirs = case(torch, *(torch.from_numpy(a.copy()) for a in arrays))
            ours = ours if isinstance(ours, tuple) else (ours,)
            theirs = theirs if isinstance(theirs, tuple) else (theirs,)
            assert len(ours) == len(theirs)
            for o, t in zip(ours, theirs):
                if dtypes:
                    assert o.dtype.name == str(t.dtype).split(".")[1]
                np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=rtol, atol=atol)

    return check
