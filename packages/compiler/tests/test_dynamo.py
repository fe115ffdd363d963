"""torcia.compiler.dynamo: what libraries use of ``torch._dynamo``, against PyTorch 2.13
where it is installed."""

import subprocess
import sys

import numpy as np
import pytest

import torcia
from torcia.compiler import dynamo


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch if getattr(torch, "Tensor", None) is not torcia.Tensor else None


def _indices(fw):
    """Index tuples of tensors only: 0-d, 1-d, broadcasting against each other, negative,
    and a single tensor."""
    t = fw.tensor
    return [t(2), (t(1), t(-1)), (t([0, 2]), t(1)), (t([[0], [2]]), t([1, 3, 0])),
            t([2, 0, 0]), (t(0), t([3, 1]))]


def test_indexing_by_tensors_is_advanced_indexing():
    x = torcia.arange(24).reshape(3, 4, 2)
    ours = []
    with dynamo.TransformGetItemToIndex():
        for index in _indices(torcia):
            got = x[index]
            # advanced indexing copies, even for a 0-d index PyTorch reads as an int
            got.fill_(-1) if got.numel() else None
            ours.append(got.shape)
    assert (x >= 0).all()
    assert ours == [(4, 2), (2,), (2, 2), (2, 3, 2), (3, 4, 2), (2, 2)]
    torch = _torch()
    if torch is None:
        pytest.skip("PyTorch is not installed")
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

    xt = torch.arange(24).reshape(3, 4, 2)
    with dynamo.TransformGetItemToIndex():
        ours = [x[i].numpy() for i in _indices(torcia)]
    with TransformGetItemToIndex():
        theirs = [xt[i].numpy() for i in _indices(torch)]
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_mask_function_under_vmap():
    # transformers' use: a mask function of four indices, vmapped over each of them
    padding = torcia.tensor([[True, True, False], [True, True, True]])

    def mask(b, h, q, kv):
        return (kv <= q) & padding[b, kv]

    fn = mask
    for dims in [(None, None, None, 0), (None, None, 0, None), (None, 0, None, None),
                 (0, None, None, None)]:
        fn = torcia.vmap(fn, in_dims=dims)
    ar = torcia.arange
    with dynamo.TransformGetItemToIndex():
        got = fn(ar(2), ar(1), ar(3), ar(3))
    want = (np.arange(3)[None, None, None, :] <= np.arange(3)[None, None, :, None]) & \
        padding.numpy()[:, None, None, :]
    np.testing.assert_array_equal(got.numpy(), want)


def test_mark_static_address_and_config():
    x = torcia.zeros(2)
    dynamo.mark_static_address(x)
    assert x._dynamo_static_input_type == "guarded"
    with pytest.raises(TypeError, match="mark_static_address expects a tensor"):
        dynamo.mark_static_address([1.0])
    before = torcia.compiler.recompile_limit
    try:
        dynamo.config.cache_size_limit = 3
        assert torcia.compiler.recompile_limit == 3 == dynamo.config.recompile_limit
        with pytest.raises(ValueError, match="recompile_limit must be an int"):
            dynamo.config.recompile_limit = -1
        with pytest.raises(AttributeError):
            dynamo.config.suppress_errors = True
    finally:
        torcia.compiler.recompile_limit = before
    assert dynamo.disable is torcia.compiler.disable
    assert dynamo.is_compiling() is False


def test_served_as_torch_dynamo_under_the_compat_runner():
    code = ("import torcia.compat\ntorcia.compat.install()\n"
            "import torch._dynamo\n"
            "from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex\n"
            "from torcia.compiler import dynamo\n"
            "print(TransformGetItemToIndex is dynamo.TransformGetItemToIndex,"
            " torch._dynamo.mark_static_address is dynamo.mark_static_address)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    assert out.split() == ["True", "True"]
