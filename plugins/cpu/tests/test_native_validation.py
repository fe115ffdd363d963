"""Every native entry point checks its arguments before it touches memory (issue #20).

Each case runs in a child process: before the checks, most of them wrote or read out of
bounds (SIGSEGV, SIGABRT, a hang, or a silently wrong result); now each must end with a
RuntimeError naming the argument, and a clean exit code, never a signal.
"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from torcia_cpu.kernels import NativeKernels

BIG = 1 << 20
F4 = "np.float32"

CASES = {
    # fused optimizer updates: the state of a checkpoint is not trusted
    "sgd momentum buffer too small": (
        f"n.sgd_step_f32([z({BIG})], [z({BIG})], [z(1)], 0.1, 0.9, 0.0, 0.0, False, False, "
        "True)", "momentum_buffers[0] has 1 elements"),
    "sgd gradient too small": (
        f"n.sgd_step_f32([z({BIG})], [z(1)], [z({BIG})], 0.1, 0.9, 0.0, 0.0, False, False, "
        "True)", "grads[0] has 1 elements"),
    "sgd fewer buffers than params": (
        "n.sgd_step_f32([z(4), z(4)], [z(4), z(4)], [z(4)], 0.1, 0.9, 0.0, 0.0, False, False, "
        "True)", "momentum_buffers has 1 entries, params 2"),
    "sgd float64 parameter in the float32 update": (
        "n.sgd_step_f32([np.zeros(4)], [z(4)], [z(4)], 0.1, 0.9, 0.0, 0.0, False, False, True)",
        "params[0] has dtype float64, expected float32"),
    "sgd non-contiguous parameter": (
        "n.sgd_step_f32([z(8)[::2]], [z(4)], [z(4)], 0.1, 0.9, 0.0, 0.0, False, False, True)",
        "params[0] is not C-contiguous"),
    "sgd read-only parameter": (
        "a = z(4); a.flags.writeable = False\n"
        "n.sgd_step_f32([a], [z(4)], [z(4)], 0.1, 0.9, 0.0, 0.0, False, False, True)",
        "params[0] is read-only"),
    "sgd parameter not an array": (
        "n.sgd_step_f32([[0.0] * 4], [z(4)], [z(4)], 0.1, 0.9, 0.0, 0.0, False, False, True)",
        "params[0] is not a numpy array"),
    "adam exp_avg too small": (
        f"n.adam_step_f32([z({BIG})], [z({BIG})], [z(1)], [z({BIG})], [], [1.0], 1e-3, 0.9, "
        "0.999, 1e-8, 0.0, False, False, False)", "exp_avgs[0] has 1 elements"),
    "adam exp_avg_sq too small": (
        f"n.adam_step_f32([z({BIG})], [z({BIG})], [z({BIG})], [z(1)], [], [1.0], 1e-3, 0.9, "
        "0.999, 1e-8, 0.0, False, False, False)", "exp_avg_sqs[0] has 1 elements"),
    "amsgrad max_exp_avg_sq too small": (
        f"n.adam_step_f32([z({BIG})], [z({BIG})], [z({BIG})], [z({BIG})], [z(1)], [1.0], "
        "1e-3, 0.9, 0.999, 1e-8, 0.0, True, False, False)",
        "max_exp_avg_sqs[0] has 1 elements"),
    "amsgrad without max buffers": (
        "n.adam_step_f32([z(4)], [z(4)], [z(4)], [z(4)], [], [1.0], 1e-3, 0.9, 0.999, 1e-8, "
        "0.0, True, False, False)", "max_exp_avg_sqs has 0 entries, params 1"),
    "adam fewer steps than params": (
        "n.adam_step_f32([z(4), z(4)], [z(4), z(4)], [z(4), z(4)], [z(4), z(4)], [], [1.0], "
        "1e-3, 0.9, 0.999, 1e-8, 0.0, False, False, False)", "steps has 1 entries, params 2"),
    "adam moment overlapping the parameter": (
        "a = z(12)\n"
        "n.adam_step_f32([a[:8]], [z(8)], [a[4:]], [z(8)], [], [1.0], 1e-3, 0.9, 0.999, "
        "1e-8, 0.0, False, False, False)", "the parameter and the state of params[0] share"),
    # pooling
    "max_pool2d padding over half the kernel": (
        "n.max_pool2d(z(1, 1, 4, 4), 3, 3, 1, 1, 2, 2, 1, 1, 6, 6)",
        "pad should be at most half of effective kernel size"),
    "max_pool2d negative padding": (
        "n.max_pool2d(z(1, 1, 4, 4), 3, 3, 1, 1, -1, 0, 1, 1, 2, 2)", "padding (height)"),
    "max_pool2d zero stride": (
        "n.max_pool2d(z(1, 1, 4, 4), 2, 2, 0, 1, 0, 0, 1, 1, 3, 3)", "stride (height)"),
    "max_pool2d stride overflowing": (
        "n.max_pool2d(z(1, 1, 4, 4), 2, 2, 1 << 62, 1, 0, 0, 1, 1, 3, 3)", "overflow"),
    "max_pool2d more windows than the input has": (
        "n.max_pool2d(z(1, 1, 4, 4), 2, 2, 2, 2, 0, 0, 1, 1, 50, 50)",
        "windows starting past the padded input"),
    "max_pool2d 3-D input": (
        "n.max_pool2d(z(1, 4, 4), 2, 2, 2, 2, 0, 0, 1, 1, 2, 2)", "x must be 4-D"),
    "max_pool2d_backward index out of the plane": (
        "n.max_pool2d_backward(z(1, 1, 2, 2), np.full((1, 1, 2, 2), 1 << 40), 4, 4)",
        "indices holds 1099511627776"),
    "max_pool2d_backward index -1": (
        "n.max_pool2d_backward(z(1, 1, 2, 2), np.full((1, 1, 2, 2), -1), 4, 4)",
        "indices holds -1"),
    "max_pool2d_backward indices smaller than g": (
        "n.max_pool2d_backward(z(2, 3, 8, 8), np.zeros((1, 1, 1, 1), np.int64), 16, 16)",
        "indices has size 1 at dimension 0, expected 2"),
    # convolution windows
    "im2col zero stride": (
        "n.im2col(z(1, 1, 4, 4), 2, 2, 0, 1, 0, 0, 1, 1, 3, 3, False)", "stride (height)"),
    "im2col stride overflowing": (
        "n.im2col(z(1, 1, 4, 4), 2, 2, 1 << 62, 1, 0, 0, 1, 1, 3, 3, False)", "overflow"),
    "im2col negative output size": (
        "n.im2col(z(1, 1, 4, 4), 2, 2, 1, 1, 0, 0, 1, 1, -3, 3, False)",
        "output size (height) must be at least 0"),
    "col2im cols of the wrong size": (
        "n.col2im(z(10), 1, 1, 4, 4, 2, 2, 1, 1, 0, 0, 1, 1, 3, 3, False)",
        "cols has 10 elements, the geometry needs 36"),
    "col2im negative padding": (
        "n.col2im(z(36), 1, 1, 4, 4, 2, 2, 1, 1, -1, 0, 1, 1, 3, 3, False)",
        "padding (height)"),
    "conv2d channels differ from the weight's": (
        "n.conv2d(z(2, 3, 5, 5), z(4, 2, 3, 3), None, 1, 1, 1, 1, 1, 1, 5, 5)",
        "weight has size 2 at dimension 1, expected 3"),
    "conv2d bias of the wrong size": (
        "n.conv2d(z(2, 3, 5, 5), z(4, 3, 3, 3), z(3), 1, 1, 1, 1, 1, 1, 5, 5)",
        "bias has size 3 at dimension 0, expected 4"),
    "conv2d 3-D input": (
        "n.conv2d(z(3, 5, 5), z(4, 3, 3, 3), None, 1, 1, 1, 1, 1, 1, 5, 5)", "x must be 4-D"),
    "conv2d zero stride": (
        "n.conv2d(z(1, 1, 4, 4), z(1, 1, 2, 2), None, 0, 1, 0, 0, 1, 1, 3, 3)",
        "stride (height)"),
    "conv2d stride overflowing": (
        "n.conv2d(z(1, 1, 4, 4), z(1, 1, 2, 2), None, 1 << 62, 1, 0, 0, 1, 1, 3, 3)",
        "overflow"),
    "conv2d_weight g of another batch": (
        "n.conv2d_weight(z(2, 1, 4, 4), z(3, 1, 3, 3), 2, 2, 1, 1, 0, 0, 1, 1)",
        "g has size 3 at dimension 0, expected 2"),
    "conv2d_weight negative padding": (
        "n.conv2d_weight(z(2, 1, 4, 4), z(2, 1, 3, 3), 2, 2, 1, 1, -1, 0, 1, 1)",
        "padding (height)"),
    "conv2d_transpose channels differ from the weight's": (
        "n.conv2d_transpose(z(2, 3, 4, 4), z(2, 1, 3, 3), 6, 6, 1, 1, 0, 0, 1, 1)",
        "weight has size 2 at dimension 0, expected 3"),
    "conv2d_transpose negative height": (
        "n.conv2d_transpose(z(2, 3, 4, 4), z(3, 1, 3, 3), -6, 6, 1, 1, 0, 0, 1, 1)",
        "height must be at least 0"),
    "linear inner dims differ": (
        "n.linear(z(4, 5), z(3, 6), None)", "their last dims must be equal"),
    "linear bias of the wrong size": (
        "n.linear(z(4, 5), z(3, 5), z(4))", "bias has shape (4,), expected (3,)"),
    "linear bias of another dtype": (
        "n.linear(z(4, 5), z(3, 5), np.zeros(3))", "bias has dtype float64, x has float32"),
    "linear 3-D x": ("n.linear(z(2, 4, 5), z(3, 5), None)", "x must be 2-D"),
    "linear x without a unit stride": (
        "n.linear(z(4, 10)[:, ::2], z(3, 5), None)", "x has no unit stride"),
    # embedding, softmax, LSTM
    "embedding_backward index out of range": (
        "n.embedding_backward(z(3, 4), np.array([0, 1, 1 << 40]), 10, -1)",
        "indices holds 1099511627776"),
    "embedding_backward negative index": (
        "n.embedding_backward(z(3, 4), np.array([0, -5, 1]), 10, -1)", "indices holds -5"),
    "embedding_backward fewer indices than rows": (
        "n.embedding_backward(z(300, 4), np.array([0]), 10, -1)", "indices has size 1"),
    "softmax_backward_rows g smaller than y": (
        "n.softmax_backward_rows(z(1, 1), z(512, 512), False)", "g has size 1 at dimension 0"),
    "softmax_rows 1-D": ("n.softmax_rows(z(8), False)", "x must be 2-D"),
    "logsumexp_rows 3-D": ("n.logsumexp_rows(z(2, 2, 2))", "x must be 2-D"),
    "lstm_cell gates narrower than 4H": (
        "n.lstm_cell(z(64, 4), z(64, 256))", "gates has size 4 at dimension 1, expected 1024"),
    "lstm_cell fewer gate rows than cells": (
        "n.lstm_cell(z(1, 1024), z(64, 256))", "gates has size 1 at dimension 0, expected 64"),
    "lstm_cell_backward act too small": (
        "n.lstm_cell_backward(z(64, 256), z(64, 256), z(1, 4), z(64, 256), z(64, 256))",
        "act has size 1 at dimension 0"),
    "lstm_cell_backward gh too small": (
        "n.lstm_cell_backward(z(1, 1), z(64, 256), z(64, 1024), z(64, 256), z(64, 256))",
        "gh has size 1 at dimension 0"),
    # elementwise ops and sums
    "binary lengths that do not repeat": (
        f"n.binary('add', z({BIG}), z(3))", "do not repeat into each other"),
    "binary empty operand of a non-empty one": (
        f"n.binary('mul', z({BIG}), z(0))", "do not repeat into each other"),
    "binary 2-D operand": ("n.binary('add', z(4, 4), z(4))", "a must be 1-D"),
    "binary dtypes differ": (
        "n.binary('add', z(4), np.zeros(4))", "b has dtype float64, a has float32"),
    "binary non-contiguous operand": (
        f"n.binary('sub', z({BIG}), z({2 * BIG})[::2])", "b must be C-contiguous"),
    "binary unknown op": ("n.binary('pow', z(4), z(4))", "unknown op 'pow'"),
    "binary out of another dtype": (
        "n.binary('add', z(4), z(4), np.zeros(4))", "out has dtype float64"),
    "binary out of another size": (
        f"n.binary('add', z({BIG}), z({BIG}), z({BIG} - 1))", f"the result has ({BIG},)"),
    "binary out not an array": ("n.binary('add', z(4), z(4), [0.0] * 4)",
                                "out must be a NumPy array"),
    "binary out non-contiguous": (
        f"n.binary('mul', z({BIG}), z({BIG}), z({2 * BIG})[::2])", "out must be C-contiguous"),
    "binary out read-only": (
        "n.binary('add', z(4), z(4), np.lib.stride_tricks.as_strided(z(4), writeable=False))",
        "out is read-only"),
    "binary out overlapping an operand in part": (
        f"(lambda x: n.binary('add', x[1:], x[:-1], x[:-1]))(z({BIG} + 1))",
        "out overlaps an operand in part"),
    "binary_scalar out of another shape": (
        "n.binary_scalar('mul', z(4, 4), 2.0, False, z(16))", "the result has (4, 4)"),
    "binary_scalar integer array": (
        "n.binary_scalar('div', np.zeros(4, np.int64), 2.0, False)",
        "x must be float32 or float64"),
    "unary integer array": ("n.unary('neg', np.zeros(4, np.int32))",
                            "x must be float32 or float64"),
    "reduce_sum geometry larger than x": (
        f"n.reduce_sum(z(4), 1, {BIG}, 1, False)", "does not match x's 4 elements"),
    "reduce_sum negative size": (
        "n.reduce_sum(z(4), -1, -4, 1, True)", "does not match x's 4 elements"),
    "cat of nothing": ("n.cat([], 0)", "no arrays to join"),
    "cat dim out of range": ("n.cat([z(4), z(4)], 1)", "dim 1 is out of range for 1 dims"),
    "cat of objects": ("n.cat([np.zeros(4, object)] * 2, 0)", "arrays of object"),
    "cat dtypes differ": ("n.cat([z(4), np.zeros(4)], 0)", "array 1 has dtype float64"),
    "cat sizes differ": ("n.cat([z(2, 3), z(2, 4)], 0)",
                         "array 1 has shape (2, 4), array 0 has (2, 3)"),
    "cat ranks differ": ("n.cat([z(2, 3), z(3)], 1)", "array 1 has shape (3,)"),
    "contiguous of objects": ("n.contiguous(np.zeros((4, 4), object).T)", "a of object"),
    "contiguous of records": ("n.contiguous(np.zeros(8, 'i4,f4')[::2])", "a of [("),
    # attention
    "flash_attention 3-D query": (
        "n.flash_attention(z(2, 5, 4), z(1, 2, 5, 4), z(1, 2, 5, 4), None, False, 1.0)",
        "q must be 4-D"),
    "flash_attention keys of another width": (
        "n.flash_attention(z(1, 2, 5, 4), z(1, 2, 5, 3), z(1, 2, 5, 4), None, False, 1.0)",
        "k has size 3 at dimension 3, expected 4"),
    "flash_attention values shorter than keys": (
        f"n.flash_attention(z(1, 2, 5, 4), z(1, 2, {BIG}, 4), z(1, 2, 5, 4), None, False, 1.0)",
        f"v has size 5 at dimension 2, expected {BIG}"),
    "flash_attention heads not a multiple": (
        "n.flash_attention(z(1, 3, 5, 4), z(1, 2, 5, 4), z(1, 2, 5, 4), None, False, 1.0)",
        "q's 3 heads are not a multiple of k's 2"),
    "flash_attention mask too small": (
        "n.flash_attention(z(1, 2, 5, 4), z(1, 2, 9, 4), z(1, 2, 9, 4), "
        "np.ones((1, 2, 5, 1), bool), False, 1.0)", "mask has size 1 at dimension 3"),
    "flash_attention integer mask": (
        "n.flash_attention(z(1, 2, 5, 4), z(1, 2, 5, 4), z(1, 2, 5, 4), "
        "np.ones((1, 2, 5, 5), np.int64), False, 1.0)", "mask must be bool or of q's dtype"),
    "flash_attention empty rows": (
        "n.flash_attention(z(1, 2, 5, 0), z(1, 2, 5, 0), z(1, 2, 5, 4), None, False, 1.0)",
        "must not have empty rows"),
    "flash_attention_backward lse too short": (
        "n.flash_attention_backward(z(1, 2, 5, 4), z(1, 2, 5, 4), z(1, 2, 5, 4), "
        "z(1, 2, 5, 4), z(1, 2, 5, 4), z(1, 2, 1), None, False, 1.0)",
        "lse has size 1 at dimension 2, expected 5"),
    "flash_attention_backward out of another shape": (
        "n.flash_attention_backward(z(1, 2, 5, 4), z(1, 2, 5, 4), z(1, 2, 5, 4), "
        "z(1, 2, 5, 4), z(1, 2, 5, 2), z(1, 2, 5), None, False, 1.0)", "out has shape"),
}

PRELUDE = f"""
import sys
import numpy as np
from torcia_cpu import _native as n
def z(*shape):
    return np.zeros(shape, {F4})
"""


@pytest.mark.parametrize("case", list(CASES))
def test_bad_arguments_raise_runtime_error(case):
    call, message = CASES[case]
    body = textwrap.indent(call, "    ")
    script = PRELUDE + f"try:\n{body}\nexcept RuntimeError as e:\n    print(e)\n    sys.exit(3)\n"
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr[-2000:])
    assert message in r.stdout, r.stdout


def test_bfloat16_max_pool_runs_in_the_plugin():
    # issue #20: the plugin handed bfloat16 to the reference, which failed on it; now the
    # native kernel runs on float32 copies (exact: every bfloat16 is a float32)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)[:, :, ::-1].astype(
        ml_dtypes.bfloat16)
    args = dict(kernel_size=(2, 2), stride=(2, 2), padding=(1, 1), dilation=(1, 1),
                ceil_mode=False)
    values, indices = NativeKernels().max_pool(x, **args)
    want, want_idx = NativeKernels().max_pool(x.astype(np.float32), **args)
    assert values.dtype == x.dtype
    np.testing.assert_array_equal(values.astype(np.float32), want)
    np.testing.assert_array_equal(indices, want_idx)
    g = np.ones(values.shape, ml_dtypes.bfloat16)
    back = NativeKernels().max_pool_backward(g, indices, input_shape=(4, 4))
    assert back.dtype == x.dtype and back.astype(np.float32).sum() == g.size
