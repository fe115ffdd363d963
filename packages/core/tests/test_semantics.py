"""PyTorch's semantics in the long tail (issue #36): each test pins a case that used to give
a silently wrong answer, refuse valid input or accept invalid input. Expected values are
derived by hand in the comments; the op database (tests/opinfo) checks the same ops against
torch on generated inputs."""

import math

import numpy as np
import pytest

import torcia

# ----- gathering and splitting -------------------------------------------------------------


def test_gather_result_has_the_index_shape():
    # x = [[0,1],[2,3],[4,5],[6,7]]; out[i][0] = x[index[i][0]][0] = x[2][0], x[2][0], x[3][0]
    x = torcia.arange(8).view(4, 2)
    out = torcia.gather(x, 0, torcia.tensor([[2], [2], [3]]))
    assert out.tolist() == [[4], [4], [6]]


@pytest.mark.parametrize("indices, pieces", [
    ([-2, 5], [[0, 1, 2, 3, 4], [], [5, 6]]),        # -2 is 5: x[0:5], x[5:5], x[5:]
    ([-5, -2], [[0, 1], [2, 3, 4], [5, 6]]),         # x[0:2], x[2:5], x[5:]
    ([3, 1], [[0, 1, 2], [], [1, 2, 3, 4, 5, 6]]),   # x[3:1] is empty, x[1:] overlaps
    ([-9, 3], [[], [0, 1, 2], [3, 4, 5, 6]]),        # -9 clamps to 0
])
def test_tensor_split_reads_indices_as_python_slices(indices, pieces):
    out = torcia.tensor_split(torcia.arange(7), indices)
    assert [p.tolist() for p in out] == pieces
    assert [p.tolist() for p in torcia.tensor_split(torcia.arange(7),
                                                    torcia.tensor(indices))] == pieces


# ----- promotion -------------------------------------------------------------------------


def test_python_scalar_base_promotes_with_an_integer_exponent():
    # (-0.5) ** [1, 2, 3] in the default float dtype, not truncated to uint8
    out = torcia.pow(-0.5, torcia.tensor([1, 2, 3], dtype=torcia.uint8))
    assert out.dtype is torcia.float32 and out.tolist() == [-0.5, 0.25, -0.125]
    # a number on the left keeps a float16 tensor float16 (a wrapped number, not a tensor)
    assert (2.5 ** torcia.tensor(2.0, dtype=torcia.float16)).dtype is torcia.float16
    # and wraps like PyTorch's scalar in an integer dtype: 300 - 1 = 299 = 43 mod 256
    assert (300 - torcia.tensor([1], dtype=torcia.uint8)).tolist() == [43]


def test_xlogy_of_an_integer_tensor_and_a_python_number_is_float32():
    out = torcia.xlogy(torcia.tensor([1, 2]), 3)
    assert out.dtype is torcia.float32
    np.testing.assert_allclose(out.numpy(), [math.log(3), 2 * math.log(3)], rtol=1e-6)


def test_clamp_promotes_with_a_zero_dim_bound_and_wraps_integer_bounds():
    # a 0-dim float64 bound outranks an integer tensor's category: float64
    out = torcia.clamp(torcia.tensor([1, 2]), min=torcia.tensor(1.5, dtype=torcia.float64))
    assert out.dtype is torcia.float64 and out.tolist() == [1.5, 2.0]
    # -1 as a uint8 bound is 255, so every element is clamped up to 255
    out = torcia.clamp(torcia.tensor([1, 2], dtype=torcia.uint8), min=-1)
    assert out.dtype is torcia.uint8 and out.tolist() == [255, 255]


def test_addcmul_promotes_its_three_tensors_and_casts_value():
    one = torcia.ones(2)
    assert torcia.addcmul(one, one.double(), one).dtype is torcia.float64
    # value 2.5 in int64 is 2: 1 + 2 * 1 * 3 = 7
    i = torcia.ones(2, dtype=torcia.int64)
    assert torcia.addcmul(i, i, i * 3, value=2.5).tolist() == [7, 7]
    with pytest.raises(RuntimeError, match="Integer division with addcdiv"):
        torcia.addcdiv(i, i, i)


def test_lerp_refuses_mixed_dtypes_and_integers():
    with pytest.raises(RuntimeError, match="expected dtype float for `end` but got dtype double"):
        torcia.lerp(torcia.ones(2), torcia.ones(2, dtype=torcia.float64), 0.5)
    with pytest.raises(NotImplementedError, match="lerp_kernel_scalar"):
        torcia.lerp(torcia.ones(2, dtype=torcia.int64), torcia.ones(2, dtype=torcia.int64), 0.5)


def test_copysign_and_ldexp_follow_the_operands_dtypes():
    half = torcia.tensor([1.0, 2.0], dtype=torcia.float16)
    assert torcia.copysign(half, 2).dtype is torcia.float16
    assert torcia.copysign(half, torcia.tensor([-1.0], dtype=torcia.float64)).tolist() == [
        -1.0, -2.0]
    assert torcia.ldexp(half, torcia.tensor([1, 2])).dtype is torcia.float16


# ----- complex inputs keep their imaginary part --------------------------------------------


def test_complex_inputs_keep_their_imaginary_part():
    z = torcia.tensor([0.5 + 1j, 1 - 1j])
    # sigmoid(z) = 1 / (1 + exp(-z)), computed by Python's cmath
    ref = [1 / (1 + complex(np.exp(-w))) for w in (0.5 + 1j, 1 - 1j)]
    np.testing.assert_allclose(torcia.sigmoid(z).numpy(), ref, rtol=1e-6)
    lse = np.log(np.exp(0.5 + 1j) + np.exp(1 - 1j))
    np.testing.assert_allclose(torcia.logsumexp(z, 0).item(), lse, rtol=1e-6)
    np.testing.assert_allclose(torcia.logcumsumexp(z, 0).numpy(), [0.5 + 1j, lse], rtol=1e-6)
    # ldexp(z, 2) = 4 z; float_power computes in complex128
    assert torcia.ldexp(z, torcia.tensor([2])).tolist() == [2 + 4j, 4 - 4j]
    p = torcia.float_power(z, 2)
    assert p.dtype is torcia.complex128
    np.testing.assert_allclose(p.numpy(), [(0.5 + 1j) ** 2, (1 - 1j) ** 2])


def test_complex_logsumexp_and_logcumsumexp_do_not_overflow():
    z = torcia.tensor([1000 + 1j, -1000 + 2j, 1001 - 1j], dtype=torcia.complex128)
    # log(e^1000 e^i + e^1001 e^-i) = 1000 + log(e^i + e^(1 - i)); the middle term is 0
    second = 1000 + np.log(np.exp(1j) + np.exp(1 - 1j))
    np.testing.assert_allclose(torcia.logsumexp(z, 0).item(), second, rtol=1e-12)
    np.testing.assert_allclose(torcia.logcumsumexp(z, 0).numpy(),
                               [1000 + 1j, 1000 + 1j, second], rtol=1e-12)


@pytest.mark.parametrize("fn, error, message", [
    (torcia.logit, NotImplementedError, '"logit_cpu" not implemented for \'ComplexFloat\''),
    (torcia.deg2rad, RuntimeError, "deg2rad is not supported for complex tensors."),
    (torcia.rad2deg, RuntimeError, "rad2deg is not supported for complex tensors."),
    (lambda z: torcia.copysign(z, 1.0), NotImplementedError, '"copysign_cpu" not implemented'),
    (lambda z: torcia.xlogy(z, z), NotImplementedError, '"xlogy_cpu" not implemented'),
])
def test_ops_without_complex_kernels_refuse_complex_inputs(fn, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(")):
        fn(torcia.tensor([0.5 + 1j]))


def test_isreal_looks_at_the_imaginary_part():
    assert torcia.isreal(torcia.tensor([2 - 0.5j, 2 + 0j])).tolist() == [False, True]
    assert torcia.isreal(torcia.tensor([1.0])).tolist() == [True]


# ----- storage offsets and as_strided ----------------------------------------------------


def test_views_report_their_storage_offset():
    x = torcia.arange(12).view(3, 4)
    # row 1 starts at 4; [1:, 2:] at 1 * 4 + 2; column 1 of the transpose at 1
    assert x.storage_offset() == 0
    assert x[1].storage_offset() == 4
    assert x[1:, 2:].storage_offset() == 6
    assert x.t()[1].storage_offset() == 1
    assert x.view(-1)[5:].narrow(0, 2, 3).storage_offset() == 7


def test_as_strided_indexes_the_storage_not_the_view():
    x = torcia.arange(10)
    v = x[2:]
    # offset 5 of the storage is element 5 of x, whatever v's own start
    assert torcia.as_strided(v, (2,), (1,), 5).tolist() == [5, 6]
    # without an offset, v's own (2)
    assert torcia.as_strided(v, (2,), (1,)).tolist() == [2, 3]
    # a transposed view: the storage is x.view(2, 3)'s memory [0 .. 5] in order
    t = torcia.arange(6).view(2, 3).t()
    assert torcia.as_strided(t, (2, 2), (1, 2)).tolist() == [[0, 2], [1, 3]]
    # and the result is a view: writing through it changes x
    torcia.as_strided(v, (1,), (1,), 0).fill_(-1)
    assert x[0].item() == -1


def test_as_strided_refuses_out_of_bounds_and_negative_strides():
    with pytest.raises(RuntimeError, match="out of bounds for storage of size 32"):
        torcia.as_strided(torcia.arange(4), (3,), (2,))
    with pytest.raises(RuntimeError, match="Negative strides are not supported"):
        torcia.as_strided(torcia.arange(4), (2,), (-1,))


def test_as_strided_gradient_reaches_the_storage():
    pytest.importorskip("torcia.autograd")
    x = torcia.arange(6.0).requires_grad_()
    # elements 3..4 and 4..5 of the storage, read through a view starting at 2
    out = torcia.as_strided(x[2:], (2, 2), (1, 1), 3)
    out.sum().backward()
    assert x.grad.tolist() == [0, 0, 0, 1, 2, 1]


def test_as_strided_in_place_keeps_the_offset():
    x = torcia.arange(6.0)
    x.as_strided_((2,), (1,), 2)
    assert x.tolist() == [2.0, 3.0] and x.storage_offset() == 2
    assert x.as_strided((3,), (2,), 0).tolist() == [0.0, 2.0, 4.0]


# ----- overlap of in-place writes --------------------------------------------------------


def test_in_place_write_from_a_partly_overlapping_source_is_refused():
    x = torcia.arange(5.0)
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the "
                                           "written-to tensor refer to a single memory"):
        x[1:].copy_(x[:-1])
    with pytest.raises(RuntimeError, match="some elements of the input tensor"):
        x[1:].add_(x[:-1])
    with pytest.raises(RuntimeError, match="some elements of the input tensor"):
        x[torcia.tensor([1, 2])] = x[2:4]
    assert x.tolist() == [0, 1, 2, 3, 4]  # nothing was written


def test_in_place_writes_that_pytorch_allows():
    x = torcia.arange(5.0)
    x.add_(x)  # the same memory, element for element
    assert x.tolist() == [0, 2, 4, 6, 8]
    x[1:3] = x[1:3]  # a region copied onto itself
    x.masked_fill_(x > 4, x[0])  # a 0-dim value is read as a number
    assert x.tolist() == [0, 2, 4, 0, 0]
    # a size-1 dim of stride 0 does not make elements share memory
    y = torcia.arange(3.0)
    y.expand(1, -1).copy_(torcia.ones(1, 3))
    assert y.tolist() == [1, 1, 1]
    z = torcia.zeros(3)
    z.expand(-1).add_(1)
    assert z.tolist() == [1, 1, 1]


def test_expanded_view_with_shared_elements_is_not_written():
    e = torcia.zeros(3).expand(2, 3)
    for write in (lambda: e.add_(1), lambda: e.uniform_(), lambda: e.copy_(torcia.ones(2, 3))):
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            write()


@pytest.mark.parametrize("make", [
    lambda: torcia.zeros(4, 5)[3:3].clone(),  # NumPy's copy of an empty array: strides 0
    lambda: torcia.zeros(3).expand(0, 3),
    lambda: torcia.zeros(0, 5),
], ids=["empty-clone", "empty-expand", "empty"])
def test_an_empty_tensor_has_no_shared_elements_to_refuse(make):
    # nothing is written, whatever its strides say: FSDP's empty shard on a rank past the
    # rows of a parameter is loaded this way
    for write in (lambda t: t.copy_(torcia.zeros(t.shape)), lambda t: t.add_(1),
                  lambda t: t.uniform_()):
        t = make()
        assert write(t) is t and t.numel() == 0


# ----- a 0-dim tensor's dim 0 -------------------------------------------------------------

# a 0-dim tensor holds one element; reducing or scanning "along dim 0" leaves it as it is
# (std and var divide by n - 1 = 0: NaN), and the result keeps no dim
ZERO_DIM_VALUE = {
    "sum": lambda x, d, k: torcia.sum(x, d, keepdim=k),
    "nansum": lambda x, d, k: torcia.nansum(x, d, keepdim=k),
    "mean": lambda x, d, k: torcia.mean(x, d, keepdim=k),
    "nanmean": lambda x, d, k: torcia.nanmean(x, d, keepdim=k),
    "prod": lambda x, d, k: torcia.prod(x, d, keepdim=k),
    "amax": lambda x, d, k: torcia.amax(x, d, keepdim=k),
    "amin": lambda x, d, k: torcia.amin(x, d, keepdim=k),
    "logsumexp": lambda x, d, k: torcia.logsumexp(x, d, keepdim=k),
    "norm": lambda x, d, k: torcia.norm(x, dim=d, keepdim=k),
    "max": lambda x, d, k: torcia.max(x, d, keepdim=k).values,
    "min": lambda x, d, k: torcia.min(x, d, keepdim=k).values,
    "median": lambda x, d, k: torcia.median(x, d, keepdim=k).values,
    "nanmedian": lambda x, d, k: torcia.nanmedian(x, d, keepdim=k).values,
    "mode": lambda x, d, k: torcia.mode(x, d, keepdim=k).values,
    "kthvalue": lambda x, d, k: torcia.kthvalue(x, 1, d, keepdim=k).values,
    "quantile": lambda x, d, k: torcia.quantile(x, 0.5, d, keepdim=k),
    "topk": lambda x, d, k: torcia.topk(x, 1, d).values,
    "sort": lambda x, d, k: torcia.sort(x, d).values,
    "cumsum": lambda x, d, k: torcia.cumsum(x, d),
    "cumprod": lambda x, d, k: torcia.cumprod(x, d),
    "cummax": lambda x, d, k: torcia.cummax(x, d).values,
    "logcumsumexp": lambda x, d, k: torcia.logcumsumexp(x, d),
    "flip": lambda x, d, k: torcia.flip(x, [d]),
    "transpose": lambda x, d, k: torcia.transpose(x, d, d),
    "movedim": lambda x, d, k: torcia.movedim(x, d, d),
    "index_select": lambda x, d, k: torcia.index_select(x, d, torcia.tensor([0])),
    "gather": lambda x, d, k: torcia.gather(x, d, torcia.tensor(0)),
}


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("op", list(ZERO_DIM_VALUE))
def test_zero_dim_tensor_along_its_dim_0(op, dim, keepdim):
    out = ZERO_DIM_VALUE[op](torcia.tensor(3.0), dim, keepdim)
    assert out.shape == () and out.item() == 3.0


@pytest.mark.parametrize("op", ["std", "var"])
def test_zero_dim_spread_is_nan(op):
    with pytest.warns(RuntimeWarning):
        out = getattr(torcia, op)(torcia.tensor(3.0), 0)
    assert out.shape == () and math.isnan(out.item())


def test_zero_dim_indices_and_writes():
    x = torcia.tensor(3.0)
    assert torcia.argmax(x, 0).item() == 0 and torcia.max(x, -1).indices.shape == ()
    assert torcia.scatter(x, 0, torcia.tensor(0), torcia.tensor(5.0)).item() == 5.0
    assert torcia.index_fill(x, 0, torcia.tensor([0]), 2.0).item() == 2.0
    assert torcia.index_add(x, 0, torcia.tensor(0), torcia.tensor(1.0)).item() == 4.0


@pytest.mark.parametrize("call", [
    lambda x: torcia.sum(x, 1), lambda x: torcia.softmax(x, 1), lambda x: x.squeeze(1),
    lambda x: torcia.flatten(x, 1, 1), lambda x: torcia.repeat_interleave(x, 2, dim=0),
])
def test_zero_dim_tensor_has_no_dim_1(call):
    with pytest.raises(IndexError, match="Dimension out of range"):
        call(torcia.tensor(3.0))


def test_index_add_and_copy_check_the_source_shape():
    with pytest.raises(RuntimeError, match=r"Number of indices \(2\) should be equal to "
                                           r"source.size\(dim\): \(3\)"):
        torcia.index_add(torcia.ones(3), 0, torcia.tensor([0, 1]), torcia.ones(3))
    with pytest.raises(RuntimeError, match="source tensor shape must match self tensor shape"):
        torcia.index_copy(torcia.ones(3, 2), 0, torcia.tensor([0, 1]), torcia.ones(2, 3))


def test_renorm_checks_its_arguments():
    with pytest.raises(RuntimeError, match="input needs at least 2 dimensions, got 1"):
        torcia.renorm(torcia.ones(3), 2, 0, 1.0)
    with pytest.raises(RuntimeError, match="non-positive-norm not supported"):
        torcia.renorm(torcia.ones(3, 2), -1, 0, 1.0)


def test_nanmedian_of_integers_is_the_median():
    # sorted [1, 2, 3]: the middle one, at index 2 of the input
    out = torcia.nanmedian(torcia.tensor([3, 1, 2]), 0)
    assert out.values.item() == 2 and out.indices.item() == 2
    assert torcia.nanmedian(torcia.tensor([3, 1, 2, 4])).item() == 2  # the lower middle


# ----- valid input PyTorch accepts -----------------------------------------------------------


def test_shift_operators():
    # 1 << 2 = 4, 2 << 2 = 8; 4 >> 1 = 2, 8 >> 2 = 2; 1 << [1, 2] = [2, 4]
    assert (torcia.tensor([1, 2]) << 2).tolist() == [4, 8]
    assert (torcia.tensor([4, 8]) >> torcia.tensor([1, 2])).tolist() == [2, 2]
    assert (1 << torcia.tensor([1, 2])).tolist() == [2, 4]
    x = torcia.tensor([1, 2])
    x <<= 1
    assert x.tolist() == [2, 4]
    # uint8 with a 0-dim int64 shift amount stays uint8 (PyTorch's promotion)
    assert (torcia.tensor([1], dtype=torcia.uint8) << torcia.tensor(1)).dtype is torcia.uint8
    with pytest.raises(NotImplementedError, match="\"lshift_cpu\" not implemented for 'Float'"):
        torcia.tensor([1.0]) << 1


def test_bool_unary_ops_as_pytorch():
    b = torcia.tensor([True, False])
    assert torcia.sign(b).tolist() == [True, False] and torcia.sign(b).dtype is torcia.bool
    assert torcia.square(b).dtype is torcia.int64  # pow(b, 2)
    with pytest.raises(NotImplementedError, match="\"abs_cpu\" not implemented for 'Bool'"):
        torcia.abs(b)
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor"):
        torcia.neg(b)
    with pytest.raises(RuntimeError, match="Boolean inputs not supported for relu"):
        torcia.relu(b)


def test_integer_power_of_negative_tensor_exponents():
    # 1 ** -1 = 1, (-1) ** -3 = -1, 3 ** -2 = 1/9 truncated to 0, 0 ** 2 = 0
    out = torcia.tensor([1, -1, 3, 0]) ** torcia.tensor([-1, -3, -2, 2])
    assert out.tolist() == [1, -1, 0, 0]
    assert (torcia.tensor([-1]) ** torcia.tensor([-2])).tolist() == [1]
    with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
        torcia.tensor([2]) ** -1


def test_scatter_with_a_value_and_a_reduction():
    # two writes of 2.0 at position 0: added 0 + 2 + 2 = 4, multiplied 1 * 2 * 2 = 4
    idx = torcia.tensor([0, 0])
    assert torcia.zeros(3).scatter(0, idx, 2.0, reduce="add").tolist() == [4, 0, 0]
    assert torcia.ones(3).scatter(0, idx, 2.0, reduce="multiply").tolist() == [4, 1, 1]
    assert torcia.ones(3).scatter(0, idx, torcia.tensor([2.0, 3.0]),
                                  reduce="multiply").tolist() == [6, 1, 1]
    with pytest.raises(RuntimeError, match="reduce argument must be either add or multiply"):
        torcia.ones(3).scatter(0, idx, 2.0, reduce="mean")


def test_put_and_take_count_negative_indices_from_the_end():
    assert torcia.zeros(3).put_(torcia.tensor([-1]), torcia.tensor([5.0])).tolist() == [0, 0, 5]
    # -1 and 2 are the same element: 5 + 1 accumulated
    out = torcia.zeros(3).put_(torcia.tensor([-1, 2]), torcia.tensor([5.0, 1.0]),
                               accumulate=True)
    assert out.tolist() == [0, 0, 6]
    assert torcia.take(torcia.arange(4), torcia.tensor([-1, 0])).tolist() == [3, 0]
    with pytest.raises(IndexError, match="tried to access index -4 on a tensor of 3"):
        torcia.take(torcia.arange(3), torcia.tensor([-4]))


def test_outer_promotes_mixed_dtypes():
    out = torcia.outer(torcia.tensor([1, 2]), torcia.tensor([1.5, 2.0]))
    assert out.dtype is torcia.float32 and out.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    with pytest.raises(RuntimeError, match="outer: Expected 1-D argument self, but got 2-D"):
        torcia.outer(torcia.ones(2, 2), torcia.ones(2))


def test_diff_past_the_length_is_empty():
    assert torcia.diff(torcia.arange(3), n=5).shape == (0,)
    assert torcia.diff(torcia.zeros(2, 3), n=4, dim=0).shape == (0, 3)
    with pytest.raises(RuntimeError, match="order must be non-negative"):
        torcia.diff(torcia.arange(3), n=-1)


def test_all_and_any_keep_uint8():
    x = torcia.tensor([[1, 0]], dtype=torcia.uint8)
    assert torcia.all(x, 1).dtype is torcia.uint8 and torcia.all(x, 1).tolist() == [0]
    assert torcia.any(x).dtype is torcia.uint8 and torcia.any(x).item() == 1
    assert torcia.all(torcia.tensor([1, 2], dtype=torcia.int32)).dtype is torcia.bool


def test_logsumexp_over_an_empty_dim_is_minus_infinity():
    assert torcia.logsumexp(torcia.zeros(2, 0), 1).tolist() == [-math.inf, -math.inf]


# ----- invalid input PyTorch refuses --------------------------------------------------------


@pytest.mark.parametrize("value, dtype, ctype", [
    (-1.5, torcia.uint8, "uint8_t"), (300, torcia.uint8, "uint8_t"),
    (1e6, torcia.float16, "c10::Half"), (2 ** 40, torcia.int32, "int"),
    (float("nan"), torcia.int64, "int64_t"),
])
def test_fill_values_out_of_range_are_refused(value, dtype, ctype):
    with pytest.raises(RuntimeError, match=f"value cannot be converted to type {ctype} "
                                           "without overflow"):
        torcia.full((2,), value, dtype=dtype)


def test_fill_values_in_range_convert_as_pytorch():
    # an integer from -255 up wraps into uint8; a float truncates toward zero
    assert torcia.full((2,), -1, dtype=torcia.uint8).tolist() == [255, 255]
    assert torcia.zeros(2, dtype=torcia.uint8).fill_(-1).tolist() == [255, 255]
    assert torcia.full((1,), -2.7, dtype=torcia.int8).tolist() == [-2]
    assert torcia.full((1,), float("inf"), dtype=torcia.float16).tolist() == [math.inf]
    mask = torcia.tensor([True, False])
    assert torcia.zeros(2, dtype=torcia.uint8).masked_fill(mask, -1).tolist() == [255, 0]


def test_addmm_refuses_a_bias_that_does_not_expand():
    with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(2\) must match "
                                           r"the existing size \(3\)"):
        torcia.addmm(torcia.ones(3), torcia.ones(2, 2), torcia.ones(2, 2))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied"):
        torcia.addmm(torcia.ones(2), torcia.ones(2, 2), torcia.ones(3, 2))


# ----- NaN, infinity and signed zero ------------------------------------------------------


def test_nan_inf_and_signed_zero_corners():
    # angle is pi for negative numbers only: not for -0.0; NaN stays NaN
    out = torcia.angle(torcia.tensor([-0.0, -1.0, 0.0, float("nan")]))
    assert out[:3].tolist() == [0.0, pytest.approx(math.pi), 0.0] and math.isnan(out[3])
    # log|gamma(x)| grows without bound at -inf as at +inf
    assert torcia.lgamma(torcia.tensor([-math.inf, math.inf])).tolist() == [math.inf, math.inf]
    # 0 * log(nan) is nan; 0 * log(0) is 0
    assert math.isnan(torcia.xlogy(torcia.tensor([0.0]), torcia.tensor([math.nan])).item())
    assert torcia.xlogy(torcia.tensor([0.0]), torcia.tensor([0.0])).item() == 0.0


def test_median_of_bfloat16_propagates_nan():
    x = torcia.tensor([1.0, float("nan"), 2.0], dtype=torcia.bfloat16)
    assert math.isnan(torcia.median(x).item())
    values, indices = torcia.median(x.view(1, 3), 1)
    assert math.isnan(values.item()) and indices.item() == 1


def test_products_keep_the_integer_dtype_and_refuse_bools():
    # 1 * 1 summed three times in uint8: 3, not widened to int64
    a = torcia.ones(3, dtype=torcia.uint8)
    assert torcia.vdot(a, a).dtype is torcia.uint8 and torcia.vdot(a, a).item() == 3
    b = torcia.ones(3, dtype=torcia.bool)
    with pytest.raises(NotImplementedError, match="\"dot\" not implemented for 'Bool'"):
        torcia.vdot(b, b)
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        torcia.ones(2, 2, dtype=torcia.bool) @ torcia.ones(2, 2, dtype=torcia.bool)
    # vdot conjugates its first argument: conj(1j) 1j + 2 * 1 = 1 + 2
    assert torcia.vdot(torcia.tensor([1j, 2]), torcia.tensor([1j, 1])).item() == 3


# ----- found by the op database --------------------------------------------------------------


def test_half_precision_reductions_and_scans_accumulate_in_float32():
    # 4096 ones: float16 counts exactly only to 2048 alone, so the sum runs in float32
    ones = torcia.full((4096,), 1.0, dtype=torcia.float16)
    assert ones.sum().item() == 4096.0 and ones.cumsum(0)[-1].item() == 4096.0
    assert ones.sum().dtype is torcia.float16


def test_special_values_found_by_the_database():
    assert torcia.sign(torcia.tensor([math.nan, -2.0])).tolist() == [0.0, -1.0]
    # P(a, 0) = 0 for a > 0; j0(inf) = sin(x) / x -> 0; Ai(x) underflows to 0 past x = 200
    assert torcia.special.gammainc(torcia.tensor([1.0, 2.0]), torcia.zeros(2)).tolist() == [0, 0]
    assert torcia.special.spherical_bessel_j0(torcia.tensor([math.inf])).item() == 0.0
    assert torcia.special.airy_ai(torcia.tensor([250.0])).item() == 0.0
    # log(e^0 + e^0) = log 2, for complex numbers too
    out = torcia.logaddexp(torcia.tensor([0j]), torcia.tensor([0j]))
    assert out.dtype is torcia.complex64 and out.item() == pytest.approx(math.log(2))


def test_complex_logaddexp_keeps_the_greater_operands_imaginary_part():
    import cmath

    # PyTorch's formula: hi + log1p(exp(lo - hi)), hi the operand of the greater real part
    # (x on a tie), so the imaginary part is hi's plus a principal angle, not reduced to
    # (-pi, pi]; a NaN anywhere gives nan+nanj
    rng = np.random.default_rng(36)
    x = rng.uniform(-3, 3, 40) + 1j * rng.uniform(-20, 20, 40)
    y = np.where(rng.random(40) < 0.2, x.real, rng.uniform(-3, 3, 40)) + 1j * rng.uniform(
        -20, 20, 40)
    want = []
    for a, b in zip(x, y):
        lo, hi = (a, b) if a.real < b.real else (b, a)
        want.append(cmath.log(1 + cmath.exp(lo - hi)) + hi)
    got = torcia.logaddexp(torcia.tensor(x), torcia.tensor(y)).numpy()
    np.testing.assert_allclose(got, np.array(want), rtol=1e-12)
    assert (np.abs(got.imag) > math.pi).any()
    nan = torcia.logaddexp(torcia.tensor([complex(math.nan, 0), 1j]),
                           torcia.tensor([1j, complex(0, math.nan)])).numpy()
    assert np.isnan(nan.real).all() and np.isnan(nan.imag).all()


def test_integer_results_found_by_the_database():
    assert torcia.isclose(torcia.tensor([1, 2]), torcia.tensor([1, 3])).tolist() == [True, False]
    # beta * 1 + alpha * 2 * 3 = 2 + 18, in int64
    one, two, three = (torcia.tensor([[v]]) for v in (1, 2, 3))
    assert torcia.addmm(one, two, three, beta=2, alpha=3).tolist() == [[20]]
    assert torcia.addbmm(one, two.unsqueeze(0), three.unsqueeze(0)).dtype is torcia.int64
    assert torcia.mvlgamma(torcia.tensor([3, 4]), 2).dtype is torcia.float32


def test_complex_results_found_by_the_database():
    # the adjoint conjugates: [[1j, 2]]^H = [[-1j], [2]]
    assert torcia.tensor([[1j, 2]]).adjoint().tolist() == [[-1j], [2]]
    # the covariance conjugates: mean (1j + 2) / 3, sum |x - mean|^2 / 2 = 5/3, real
    # (one variable, given as a row: 0-d, as for a 1-D input)
    out = torcia.cov(torcia.tensor([[1j, 2, 0]]))
    assert out.shape == () and out.item() == pytest.approx(5 / 3)
    assert torcia.linalg.vector_norm(torcia.tensor([1j, 0j]), 0).dtype is torcia.float32
    assert torcia.zeros(1, dtype=torcia.complex64).type() == "torcia.ComplexFloatTensor"


@pytest.mark.parametrize(("call", "error", "words"), [
    (lambda: torcia.argmax(torcia.tensor([True])), RuntimeError, "does not support bool"),
    (lambda: torcia.floor_divide(torcia.tensor([True]), torcia.tensor([True])),
     NotImplementedError, "'Bool'"),
    (lambda: torcia.searchsorted(torcia.tensor([True]), torcia.tensor([True])),
     NotImplementedError, "'Bool'"),
    (lambda: torcia.pow(torcia.tensor([True]), torcia.tensor([True])), NotImplementedError,
     "'Bool'"),
    (lambda: torcia.positive(torcia.tensor([True])), RuntimeError, "on a bool tensor"),
    (lambda: ~torcia.tensor([1.0]), TypeError, "integer and Boolean"),
    (lambda: torcia.tensor([1.0, 2]) + torcia.ones(3), RuntimeError,
     r"size of tensor a \(2\) must match the size of tensor b \(3\)"),
    (lambda: torcia.broadcast_shapes((2, 3), (4, 1, 3), (5,)), RuntimeError,
     r"length 5 at -1! Mismatching argument at index 2 had \(5,\); but expected shape "
     r"should be broadcastable to \[4, 2, 3\]"),
    (lambda: torcia.amax(torcia.zeros(0, 3), 0), IndexError, "dim 0 to have non-zero size"),
    (lambda: torcia.nanmedian(torcia.zeros(0, 3), 0), IndexError, "non-zero size"),
    (lambda: torcia.zeros(3).index_add_(0, torcia.tensor([5]), torcia.ones(1)), IndexError,
     "index out of range"),
])
def test_refusals_found_by_the_database(call, error, words):
    with pytest.raises(error, match=words):
        call()


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_extremes_refuse_complex_before_looking_at_the_dim(op):
    # dim 2 is out of range too: the dtype is what PyTorch names
    with pytest.raises(RuntimeError, match=rf"{op}\(\): does not support complex input"):
        getattr(torcia, op)(torcia.tensor([[1j]]), 2)


@pytest.mark.parametrize(("call", "words"), [
    (lambda b, i: b - 1, "with a bool tensor"),
    (lambda b, i: 1 - b, "with a bool tensor"),
    (lambda b, i: i - b, "with a bool tensor"),
    (lambda b, i: i - True, "with a bool tensor"),
    (lambda b, i: torcia.rsub(b, 1), "with a bool tensor"),
    (lambda b, i: True - b, "with two bool tensors"),
])
def test_subtraction_refuses_bools_on_either_side(call, words):
    with pytest.raises(RuntimeError, match=f"Subtraction, the `-` operator, {words}"):
        call(torcia.tensor([True]), torcia.tensor([1]))


def test_reflected_subtraction_keeps_its_values():
    # 10 - 2 * [1, 2] and 1.5 - [1] (a float scalar on the left promotes)
    assert torcia.rsub(torcia.tensor([1, 2]), 10, alpha=2).tolist() == [8, 6]
    out = 1.5 - torcia.tensor([1])
    assert out.tolist() == [0.5] and out.dtype is torcia.float32


# ----- creation and casts (found by the op database) ----------------------------------------


_BOUNDS = [(0, 5, 1.5), (0, 2.5, 1), (0.5, 3, 1), (-2.5, 3, 1), (0, 3.7, 1.9), (0, -3.7, -1.2)]


@pytest.mark.parametrize(("start", "end", "step"), _BOUNDS)
def test_an_int64_arange_truncates_its_bounds_and_step_first(start, end, step):
    # int(start), int(end), int(step): (0, 5, 1.5) is range(0, 5, 1), (-2.5, 3, 1) is
    # range(-2, 3, 1), (0, -3.7, -1.2) is range(0, -3, -1)
    out = torcia.arange(start, end, step, dtype=torcia.int64)
    assert out.tolist() == list(range(int(start), int(end), int(step)))


@pytest.mark.parametrize("step", [0.25, 0.5, 0.9, -0.3])
def test_an_int64_arange_refuses_a_step_that_truncates_to_zero(step):
    with pytest.raises(ValueError, match="step must be nonzero"):
        torcia.arange(0, 1 if step > 0 else -1, step, dtype=torcia.int64)
    # a float range takes it
    assert torcia.arange(0, 1 if step > 0 else -1, step).numel() == math.ceil(1 / abs(step))


@pytest.mark.parametrize("where", [0, 2])
def test_normal_refuses_a_negative_std_tensor(where):
    std = torcia.ones(3)
    std[where] = -0.5
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        torcia.normal(torcia.zeros(3), std)
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        torcia.normal(torcia.zeros(3), -0.5)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_bfloat16_to_integers_converts_as_float32_does(dtype):
    # PyTorch goes through float: -2.5 to uint8 is 254 (wraps), 300 to int8 is 44
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.uniform(-400, 400, 20).round(), [-2.5, -1.0, 300.0]])
    x = torcia.tensor(values, dtype=torcia.bfloat16)
    want = torcia.tensor(values, dtype=torcia.bfloat16).float().to(getattr(torcia, dtype))
    assert x.to(getattr(torcia, dtype)).tolist() == want.tolist()


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float32", "complex64"])
def test_unary_plus_refuses_bools_as_positive_does(dtype):
    x = torcia.ones(3, dtype=getattr(torcia, dtype))
    if dtype == "bool":
        for plus in (lambda t: +t, torcia.positive):
            with pytest.raises(RuntimeError, match="`\\+` operator, on a bool tensor"):
                plus(x)
    else:
        assert (+x) is x and torcia.positive(x) is x


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("shape", [(0, 3), (2, 0), (0,)])
def test_complex_scans_and_extremes_of_empty_tensors_answer(dtype, shape):
    # PyTorch returns before looking for a complex kernel when there is nothing to scan
    x = torcia.zeros(shape, dtype=getattr(torcia, dtype))
    for scan in (torcia.cummax, torcia.cummin):
        values, indices = scan(x, 0)
        assert values.shape == x.shape and values.dtype is x.dtype
        assert indices.shape == x.shape and indices.dtype is torcia.int64
    if len(shape) == 2 and shape[0] == 0:  # over a dim of size 3: an empty result
        assert torcia.amin(x, 1).shape == (0,) and torcia.amax(x, -1).shape == (0,)
    # a value still has no complex kernel
    with pytest.raises(RuntimeError, match="not implemented for"):
        torcia.cummax(torcia.ones(2, dtype=getattr(torcia, dtype)), 0)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_reciprocal_of_the_edges_as_torch(dtype):
    # 1 / z: of 0 it is inf+nanj (NumPy's reciprocal gave nan+nanj)
    torch = pytest.importorskip("torch")
    edges = [0.0, -0.0, math.inf, -math.inf, math.nan, 1.0, -0.5, 1e-30, 1e30]
    v = np.array([complex(a, b) for a in edges for b in edges], dtype=dtype)
    ours = torcia.reciprocal(torcia.tensor(v)).numpy()
    theirs = torch.reciprocal(torch.tensor(v)).numpy()
    for part in (np.real, np.imag):
        np.testing.assert_array_equal(np.isnan(part(ours)), np.isnan(part(theirs)))
        np.testing.assert_allclose(np.nan_to_num(part(ours)), np.nan_to_num(part(theirs)),
                                   rtol=1e-6)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_integer_comparisons_cast_a_python_int_to_the_tensor_dtype(dtype):
    # PyTorch casts the scalar first, wrapping: for uint8, -1 is 255, so 255 == -1 is True
    torch = pytest.importorskip("torch")
    info = np.iinfo(dtype)
    rng = np.random.default_rng(36)
    edges = [info.min, info.max, 0, -1, 1]
    values = np.concatenate([edges, rng.integers(info.min, info.max, 20, endpoint=True)])
    values = values.astype(dtype)
    scalars = [-1, -200, 255, 256, 300, info.max + 1, info.min - 1, -(2 ** 40)]
    ours, theirs = torcia.tensor(values), torch.tensor(values)
    for s in scalars:
        for name in ("eq", "ne", "lt", "le", "gt", "ge"):
            try:
                want = getattr(torch, name)(theirs, s).tolist()
            except OverflowError:  # below int64's range: no scalar holds it
                with pytest.raises(OverflowError):
                    getattr(torcia, name)(ours, s)
                continue
            assert getattr(torcia, name)(ours, s).tolist() == want, (name, s)
            assert getattr(ours, f"__{name}__")(s).tolist() == want, (name, s)


_CALLS = [  # (args after the tensor, keywords)
    ((), {"keepdim": True}), ((), {"keepdim": False}), ((None, True), {}),
    ((), {"dim": None, "keepdim": True}), ((), {"dim": None}), ((), {}), ((0, True), {}),
    ((-1,), {"keepdim": False}),
]


@pytest.mark.torch
@pytest.mark.parametrize("name", ["sum", "mean", "prod", "max", "min", "median", "nanmedian"])
@pytest.mark.parametrize("shape", [(2, 3), (4,), ()])
def test_keepdim_without_dim_is_refused_as_torch_refuses_it(name, shape):
    # PyTorch's overloads without dim take no keepdim (sum/mean take dim=None beside one)
    torch = pytest.importorskip("torch")
    values = np.random.default_rng(36).standard_normal(shape).astype(np.float32)
    x, y = torcia.tensor(values), torch.tensor(values)
    for args, kwargs in _CALLS:
        for ours, theirs in ((lambda *a, **k: getattr(torcia, name)(x, *a, **k),
                              lambda *a, **k: getattr(torch, name)(y, *a, **k)),
                             (getattr(x, name), getattr(y, name))):
            try:
                want = theirs(*args, **kwargs)
            except TypeError:
                with pytest.raises(TypeError):
                    ours(*args, **kwargs)
                continue
            got = ours(*args, **kwargs)
            want, got = (r[0] if isinstance(r, tuple) else r for r in (want, got))
            assert tuple(got.shape) == tuple(want.shape), (args, kwargs)


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["complex64", "complex128", "float32", "int64", "bool"])
@pytest.mark.parametrize("name", ["cummax", "cummin", "mode"])
def test_zero_dim_scans_and_mode_answer_before_the_dtype_kernel(dtype, name):
    # a 0-dim input is its own running extreme and mode, at index 0, complex included;
    # one element more and a complex input has no kernel, as in PyTorch
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(36)
    for v in rng.standard_normal((4, 2)):
        value = np.array(complex(*v) if dtype.startswith("complex") else v[0], dtype=dtype)
        for dim in (0, -1):
            ours = getattr(torcia, name)(torcia.tensor(value), dim)
            theirs = getattr(torch, name)(torch.tensor(value), dim)
            assert ours[0].dtype is getattr(torcia, dtype) and ours[0].shape == ()
            assert ours[0].item() == theirs[0].item() and ours[1].item() == theirs[1].item()
        if dtype.startswith("complex"):
            with pytest.raises(NotImplementedError, match=f'"{name}_cpu" not implemented'):
                getattr(torch, name)(torch.tensor(value).reshape(1), 0)
            with pytest.raises(NotImplementedError, match=f'"{name}_cpu" not implemented'):
                getattr(torcia, name)(torcia.tensor(value).reshape(1), 0)


@pytest.mark.torch
@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("int64", "float64"),
                                    ("int16", "int16"), ("float64", "int32")])
@pytest.mark.parametrize("shapes", [((3, 4), (5,)), ((), (2, 2)), ((0,), (3,)), ((4,), (0,))])
def test_isin_as_torch_and_on_the_meta_device(dtypes, shapes):
    # computed with tensor ops (it was NumPy's isin on the host, which meta cannot run)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(36)
    pool = np.array([0.0, -0.0, 1.0, 2.5, -3.0, math.nan, math.inf, 7.0])
    a, b = (rng.choice(pool, s).astype(d) if d.startswith("float") else
            rng.integers(-3, 4, s).astype(d) for s, d in zip(shapes, dtypes))
    for invert in (False, True):
        ours = torcia.isin(torcia.tensor(a), torcia.tensor(b), invert=invert)
        theirs = torch.isin(torch.tensor(a), torch.tensor(b), invert=invert)
        assert ours.dtype is torcia.bool and ours.tolist() == theirs.tolist()
    meta = torcia.isin(torcia.empty(shapes[0], device="meta"), torcia.empty(shapes[1],
                                                                            device="meta"))
    assert meta.device.type == "meta" and meta.shape == shapes[0] and meta.dtype is torcia.bool


@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_frexp_as_torch_with_tensor_ops(dtype):
    # computed with tensor ops (it was NumPy's frexp on the host, which meta cannot run);
    # the powers of two and their neighbours check log2's rounding is corrected
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(36)
    tdt = getattr(torch, dtype)
    info = torch.finfo(tdt)
    powers = torch.tensor(2.0 ** np.arange(-30, 30)).to(tdt)
    values = torch.cat([
        powers, -powers, torch.nextafter(powers, torch.zeros_like(powers)) if dtype !=
        "bfloat16" else powers * 0.99,
        torch.tensor(rng.standard_normal(300) * 10.0 ** rng.integers(-20, 20, 300)).to(tdt),
        torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, info.max, -info.max,
                      info.tiny, info.tiny / 4]).to(tdt)])
    ours = torcia.tensor(values.double().numpy()).to(getattr(torcia, dtype))  # exact
    m, e = torcia.frexp(ours)
    tm, te = torch.frexp(values)
    assert m.dtype is ours.dtype and e.dtype is torcia.int32
    np.testing.assert_array_equal(m.double().numpy(), tm.double().numpy())
    np.testing.assert_array_equal(e.numpy(), te.numpy())
    meta = torcia.frexp(torcia.empty(2, 3, dtype=getattr(torcia, dtype), device="meta"))
    assert meta[0].shape == meta[1].shape == (2, 3) and meta[1].dtype is torcia.int32
    # the mantissa's gradient is 2**-exponent, as torch's
    x = torcia.tensor([3.0, 0.1, -0.0], requires_grad=True)
    torcia.frexp(x)[0].sum().backward()
    assert x.grad.tolist() == [0.25, 8.0, 1.0]


@pytest.mark.torch
def test_masked_scatter_as_torch_and_on_the_meta_device():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(36)
    for shape, mshape in (((4, 3), (4, 3)), ((4, 3), (3,)), ((2, 0), (2, 0)), ((), ())):
        x, mask = rng.standard_normal(shape), rng.random(mshape) < 0.5
        src = rng.standard_normal(int(np.broadcast_to(mask, shape).sum()) + 1)
        ours = torcia.masked_scatter(*map(torcia.tensor, (x, mask, src)))
        np.testing.assert_array_equal(
            ours.numpy(), torch.masked_scatter(*map(torch.tensor, (x, mask, src))).numpy())
        meta = torcia.masked_scatter(torcia.empty(shape, device="meta"),
                                     torcia.empty(mshape, dtype=torcia.bool, device="meta"),
                                     torcia.empty(src.shape, device="meta"))
        assert meta.device.type == "meta" and meta.shape == shape
    with pytest.raises(RuntimeError, match="at least as many elements as ones in mask"):
        torcia.masked_scatter(torcia.zeros(3), torcia.ones(3, dtype=torcia.bool),
                              torcia.zeros(2))


@pytest.mark.torch
@pytest.mark.parametrize("shape", [(2, 3), (4,), (), (3, 1, 5), (2, 0)])
def test_unravel_index_as_torch_and_on_the_meta_device(shape):
    # torch wraps an index out of range around (it does not check); shape () takes any
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(36)
    total = int(np.prod(shape))
    for idx in (rng.integers(-2 * total - 1, 2 * total + 2, (3, 4)), np.array(5),
                np.zeros(0, dtype=np.int64)):
        try:
            want = torch.unravel_index(torch.tensor(idx), shape)
        except RuntimeError:
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                torcia.unravel_index(torcia.tensor(idx), shape)
            continue
        got = torcia.unravel_index(torcia.tensor(idx), shape)
        assert [g.tolist() for g in got] == [w.tolist() for w in want]
        assert all(g.dtype is torcia.int64 for g in got)
    if total:
        meta = torcia.unravel_index(torcia.empty(3, dtype=torcia.int64, device="meta"), shape)
        assert len(meta) == len(shape) and all(m.shape == (3,) for m in meta)


def test_nanmean_checks_the_dim_before_the_dtype_and_takes_complex():
    z = torcia.tensor([[1 + 1j, complex(math.nan, 0), 3 - 1j]])
    with pytest.raises(IndexError, match="Dimension out of range"):
        torcia.nanmean(z, 2)
    # the NaN element left out of both the sum and the count
    assert torcia.nanmean(z, 1).tolist() == [2 + 0j]
    with pytest.raises(RuntimeError, match="floating point or complex dtype but got Long"):
        torcia.nanmean(torcia.tensor([1, 2]))


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_adaptive_avg_pool_to_one_is_a_mean(nd):
    # PyTorch's global-pooling shortcut: a mean over the spatial dims, which refuses
    # integer input as mean does
    from torcia._ops import nn_pool

    pool = getattr(nn_pool, f"adaptive_avg_pool{nd}d")
    rng = np.random.default_rng(36)
    x = rng.normal(size=(2, 3) + (5,) * nd)
    got = pool(torcia.tensor(x), 1)
    want = x.mean(axis=tuple(range(2, 2 + nd)), keepdims=True)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5)
    for dtype in (torcia.int64, torcia.uint8, torcia.bool):
        with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype"):
            pool(torcia.ones((2, 3) + (4,) * nd, dtype=dtype), 1)
