"""Inputs that used to give silently wrong answers now raise PyTorch's errors, and the
edge cases PyTorch handles are handled (issue #20)."""

import warnings

import pytest

import torcia
from torcia._ops import nn_norm
from torcia._ops.nn_conv import conv1d, conv2d, conv_transpose2d
from torcia._ops.nn_norm import batch_norm
from torcia._ops.nn_pool import avg_pool2d, max_pool2d

# ----- indices are never wrapped around --------------------------------------------


@pytest.mark.parametrize("index", [-1, -5, 5])
def test_gather_refuses_out_of_range_and_negative_indices(index):
    with pytest.raises(RuntimeError, match=f"index {index} is out of bounds for dimension 0 "
                                           "with size 5"):
        torcia.gather(torcia.arange(5), 0, torcia.tensor([index]))


@pytest.mark.parametrize("index", [-1, 5])
def test_index_select_refuses_out_of_range_and_negative_indices(index):
    with pytest.raises(IndexError, match="index out of range in self"):
        torcia.arange(5).index_select(0, torcia.tensor([index]))


@pytest.mark.parametrize("op", ["scatter", "scatter_add"])
def test_scatter_refuses_negative_indices(op):
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 0 with "
                                           "size 5"):
        getattr(torcia.zeros(5), op)(0, torcia.tensor([-1]), torcia.ones(1))


def test_index_add_and_copy_refuse_negative_indices():
    with pytest.raises(IndexError, match="index out of range in self"):
        torcia.zeros(5).index_add(0, torcia.tensor([-1]), torcia.ones(1))
    with pytest.raises(IndexError, match=r"index_copy_\(\): index -1 is out of bounds"):
        torcia.zeros(5).index_copy(0, torcia.tensor([-1]), torcia.ones(1))


def test_indexing_still_counts_from_the_end():
    assert torcia.arange(5)[torcia.tensor([-1])].tolist() == [4]


# ----- integer division by zero ----------------------------------------------------

# each takes the library (torcia or torch) first: only div is spelled through it
DIVISIONS = {
    "//": lambda lib, a, b: a // b,
    "%": lambda lib, a, b: a % b,
    "fmod": lambda lib, a, b: a.fmod(b),
    "remainder": lambda lib, a, b: a.remainder(b),
    "div floor": lambda lib, a, b: lib.div(a, b, rounding_mode="floor"),
    "div trunc": lambda lib, a, b: lib.div(a, b, rounding_mode="trunc"),
}


@pytest.mark.parametrize("op", list(DIVISIONS))
@pytest.mark.parametrize("divisor", [0, "tensor"])
def test_integer_division_by_zero_raises(op, divisor):
    a = torcia.arange(5)
    b = torcia.tensor([1, 2, 0, 1, 1]) if divisor == "tensor" else divisor
    # PyTorch raises RuntimeError("ZeroDivisionError"); the error is a ZeroDivisionError too
    with pytest.raises(RuntimeError, match="^ZeroDivisionError$") as err:
        DIVISIONS[op](torcia, a, b)
    assert isinstance(err.value, ZeroDivisionError)


@pytest.mark.parametrize("op", list(DIVISIONS))
def test_float_division_by_zero_is_ieee(op):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        out = DIVISIONS[op](torcia, torcia.tensor([1.0]), 0)
    assert not torcia.isfinite(out).all()


@pytest.mark.torch
@pytest.mark.parametrize("op", list(DIVISIONS))
def test_integer_division_by_zero_as_pytorch(op):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as theirs:
        DIVISIONS[op](torch, torch.arange(5), 0)
    with pytest.raises(RuntimeError) as ours:
        DIVISIONS[op](torcia, torcia.arange(5), 0)
    assert str(ours.value) == str(theirs.value)


# ----- edge cases --------------------------------------------------------------------


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_over_a_zero_width_dim(op, dim):
    out = getattr(nn_norm, op)(torcia.ones(3, 0), dim)
    assert out.shape == (3, 0)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_of_integers_is_not_implemented(op):
    with pytest.raises(NotImplementedError, match=f'"{op}_lastdim_kernel_impl" not '
                                                  "implemented for 'Long'"):
        getattr(nn_norm, op)(torcia.zeros(2, 3, dtype=torcia.int64), -1)
    with pytest.raises(NotImplementedError, match=f'"{op}_kernel_impl" not implemented'):
        getattr(nn_norm, op)(torcia.zeros(2, 3, dtype=torcia.int64), 0)


def test_conv2d_without_input_channels_gives_an_empty_batch():
    # PyTorch: (N, 0, *out), whatever the weight's output channels
    out = conv2d(torcia.ones(2, 0, 5, 5), torcia.ones(3, 0, 3, 3), torcia.ones(3), padding=1)
    assert out.shape == (2, 0, 5, 5)
    assert conv1d(torcia.ones(0, 4), torcia.ones(2, 0, 3)).shape == (0, 2)


def test_batch_norm_on_an_empty_batch_in_training():
    mean, var = torcia.zeros(3), torcia.ones(3)
    out = batch_norm(torcia.ones(0, 3, 2, 2), mean, var, torcia.ones(3), torcia.zeros(3),
                       training=True)
    assert out.shape == (0, 3, 2, 2)
    assert mean.tolist() == [0.0] * 3 and var.tolist() == [1.0] * 3
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        batch_norm(torcia.ones(1, 3), mean, var, training=True)



@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_parameter_dtypes_as_pytorchs_cpu_kernels(training):
    x, f32 = torcia.ones(4, 3), torcia.float32

    def p(dtype):
        return torcia.ones(3, dtype=dtype)

    # the first parameter given (weight, bias, running_mean, running_var) sets the kind
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        batch_norm(x, p(f32), p(torcia.float64), training=training)
    with pytest.raises(RuntimeError, match="expect parameter to have scalar type of Float"):
        batch_norm(x, p(torcia.float64), p(torcia.float64), training=training)
    with pytest.raises(RuntimeError, match="all inputs must share same datatype"):
        batch_norm(x.double(), p(f32), p(f32), p(f32), training=training)
    with pytest.raises(RuntimeError, match="expected scalar type Half but found Float"):
        batch_norm(x.half(), p(torcia.float16), p(f32), training=training)
    # half input with float32 parameters: PyTorch's mixed kernel, the input's dtype out
    for half in (torcia.float16, torcia.bfloat16):
        if half is torcia.bfloat16:
            pytest.importorskip("ml_dtypes")
        out = batch_norm(x.to(half), p(f32), p(f32), p(f32), p(f32), training=training)
        assert out.dtype is half

def test_bfloat16_max_pool():
    pytest.importorskip("ml_dtypes")
    x = torcia.arange(16.0).reshape(1, 1, 4, 4).to(torcia.bfloat16)
    values, indices = max_pool2d(x, 2, return_indices=True)
    assert values.dtype is torcia.bfloat16
    assert values.float().tolist() == [[[[5.0, 7.0], [13.0, 15.0]]]]
    assert indices.tolist() == [[[[5, 7], [13, 15]]]]


# ----- window geometry ---------------------------------------------------------------

GEOMETRY = {
    "max_pool2d negative padding": (
        lambda: max_pool2d(torcia.ones(1, 1, 5, 5), 3, 1, -1),
        "pad must be non-negative, but got pad: -1"),
    "max_pool2d padding over half the kernel": (
        lambda: max_pool2d(torcia.ones(1, 1, 5, 5), 3, 1, 2),
        "pad should be at most half of effective kernel size"),
    "max_pool2d stride overflowing": (
        lambda: max_pool2d(torcia.ones(1, 1, 5, 5), 3, 2**62),
        "value cannot be converted to type int without overflow"),
    "max_pool2d zero dilation": (
        lambda: max_pool2d(torcia.ones(1, 1, 5, 5), 2, dilation=0),
        "dilation should be greater than zero"),
    "avg_pool2d negative padding": (
        lambda: avg_pool2d(torcia.ones(1, 1, 5, 5), 3, 1, -1),
        "pad must be non-negative, but got pad: -1"),
    "conv_transpose2d negative padding": (
        lambda: conv_transpose2d(torcia.ones(1, 2, 5, 5), torcia.ones(2, 3, 3, 3),
                                   padding=-1), "negative padding is not supported"),
    "conv_transpose2d negative output_padding": (
        lambda: conv_transpose2d(torcia.ones(1, 2, 5, 5), torcia.ones(2, 3, 3, 3), stride=2,
                                   output_padding=-1),
        "negative output_padding is not supported"),
    "conv_transpose2d stride overflowing": (
        lambda: conv_transpose2d(torcia.ones(1, 2, 5, 5), torcia.ones(2, 3, 3, 3),
                                   stride=2**62),
        "value cannot be converted to type int without overflow"),
}


@pytest.mark.parametrize("case", list(GEOMETRY))
def test_invalid_geometry_is_refused(case):
    fn, message = GEOMETRY[case]
    with pytest.raises(RuntimeError, match=message):
        fn()
