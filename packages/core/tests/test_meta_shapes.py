"""Shape functions: the "meta" device computes shapes and dtypes without running kernels.

Every shape function is checked against the reference kernel it stands for (the kernel
runs here on real arrays, in the dtypes the dispatcher hands it), and on the meta device
an op with a shape function runs no kernel at all.
"""

import numpy as np
import pytest

import torcia
from torcia import _meta, library, ops

rng = np.random.default_rng(0)
f32 = rng.standard_normal((3, 4)).astype(np.float32)
f64 = rng.standard_normal((2, 3, 4))
pos = np.abs(f32) + 0.5
c64 = (f32 + 1j * pos).astype(np.complex64)
i64 = np.arange(12).reshape(3, 4)
mask = f32 > 0
row = rng.standard_normal(4).astype(np.float32)
pairs = rng.standard_normal((3, 2)).astype(np.float32)

# (op, inputs, params) on arrays; the families each group of shape functions serves
SAMPLES = [
    *[(name, (pos,), {}) for name in ops.SPECIAL_UNARY],
    *[(name, (f64,), {}) for name in ops.SPECIAL_UNARY[:4]],
    ("polygamma", (pos,), {"n": 2}),
    *[(name, (pos, row), {}) for name in ops.SPECIAL_BINARY if "polynomial" not in name],
    *[(name, (f32, np.float32(3.0)), {}) for name in ops.SPECIAL_BINARY if "polynomial" in name],
    ("abs", (c64,), {}), ("abs", (i64,), {}), ("real", (c64,), {}), ("imag", (c64,), {}),
    ("conj", (c64,), {}), ("angle", (c64,), {}),
    ("angle", (f32,), {}), ("view_as_real", (c64,), {}), ("view_as_complex", (pairs,), {}),
    ("complex", (f64, f64[0]), {}),
    ("round", (f32,), {"decimals": 1}), ("clamp", (f32, row, None), {}),
    ("where", (mask, f32, row), {}), ("lerp", (f32, row, np.float32(0.5)), {}),
    ("addcmul", (f32, row, f32), {"value": 2}), ("addcdiv", (f32, row, pos), {"value": 2}),
    ("cast", (f32,), {"dtype": np.float64}), ("masked_fill", (f32, mask), {"value": 1.0}),
    ("nan_to_num", (f32,), {"nan": 0.0, "posinf": None, "neginf": None}),
    ("sum", (f32,), {"dim": (1,), "keepdim": True, "dtype": None}),
    ("sum", (i64,), {"dim": None, "keepdim": False, "dtype": np.int64}),
    ("nansum", (f64,), {"dim": (0, 2), "keepdim": False, "dtype": None}),
    ("prod", (f32,), {"dim": (0,), "keepdim": False, "dtype": np.float64}),
    ("mean", (f64,), {"dim": (1,), "keepdim": False, "dtype": None}),
    ("amax", (i64,), {"dim": (1,), "keepdim": True}), ("amin", (f32,), {"dim": None}),
    ("var", (f64,), {"dim": (2,), "correction": 1, "keepdim": True}),
    ("std", (f32,), {"dim": None, "correction": 0, "keepdim": False}),
    ("norm", (c64,), {"p": 2.0, "dim": (1,), "keepdim": False}),
    ("logsumexp", (f32,), {"dim": (0,), "keepdim": False}),
    ("all", (mask,), {"dim": (1,), "keepdim": False}), ("any", (mask,), {"dim": None}),
    ("count_nonzero", (f64,), {"dim": (0, 1)}),
    ("argmax", (f32,), {"dim": 1, "keepdim": True}), ("argmin", (f64,), {}),
    ("argmax", (f32,), {"dim": None, "keepdim": True}),
    *[(name, (f64,), {"dim": 1, "keepdim": keep}) for name in
      ("max_dim", "min_dim", "median_dim", "mode_dim") for keep in (False, True)],
    ("cumsum", (i64,), {"dim": 1}), ("cumsum", (f32,), {"dim": 0, "dtype": np.float64}),
    ("cumprod", (f64,), {"dim": 2}), ("cummax", (f32,), {"dim": 1}),
    ("cummin", (f64,), {"dim": 0}), ("logcumsumexp", (f32,), {"dim": 1}),
    ("view", (f64,), {"shape": (6, 4)}), ("reshape", (f32,), {"shape": (2, 6)}),
    ("expand", (row,), {"shape": (5, 4)}), ("permute", (f64,), {"dims": (2, 0, 1)}),
    ("transpose", (f64,), {"dim0": 0, "dim1": 2}),
    ("squeeze", (f64[:, :1],), {"dim": None}), ("squeeze", (f64[:1],), {"dim": (0, 2)}),
    ("unsqueeze", (f32,), {"dim": 1}), ("narrow", (f64,), {"dim": 2, "start": 1, "length": 2}),
    ("diagonal", (f64,), {"offset": 1, "dim1": 1, "dim2": 2}),
    ("diagonal", (f32,), {"offset": -1, "dim1": 0, "dim2": 1}),
    ("detach_view", (f32,), {}), ("contiguous", (f32,), {}), ("clone", (c64,), {}),
    ("flip", (f64,), {"dims": (0, 2)}), ("roll", (f32,), {"shifts": (1,), "dims": (1,)}),
    ("tril", (f32,), {"diagonal": 1}), ("triu", (f64,), {"diagonal": -1}),
    ("cat", (f32, f32[:1]), {"dim": 0}), ("stack", (f32, f32, f32), {"dim": 2}),
    *[(name, (f32,), {}) for name in ("selu", "silu", "mish", "hardswish", "hardsigmoid",
                                      "logsigmoid", "softsign", "tanhshrink")],
    ("leaky_relu", (f32,), {"negative_slope": 0.1}), ("elu", (f64,), {"alpha": 1.0}),
    ("celu", (f32,), {"alpha": 2.0}), ("gelu", (f32,), {"approximate": "tanh"}),
    ("softplus", (f32,), {"beta": 1.0, "threshold": 20.0}),
    ("hardtanh", (f32,), {"min_val": -1.0, "max_val": 1.0}),
    ("softmax", (f64,), {"dim": 1}), ("log_softmax", (f32,), {"dim": 0}),
    ("softmax_backward", (f32, pos, 1), {}), ("log_softmax_backward", (f32, pos, 0), {}),
    ("gelu_backward", (f32, pos), {"approximate": "none"}), ("silu_backward", (f32, pos), {}),
    ("sort", (f64,), {"dim": 1, "descending": True}), ("topk", (f32, 2), {"dim": 1}),
    ("kthvalue", (f64, 2), {"dim": 2, "keepdim": True}),
    ("gather", (f32, i64[:, :2] % 4), {"dim": 1}),
    ("index_select", (f64, np.array([0, 2, 2, 1])), {"dim": 1}),
    ("scatter", (f32, i64[:2, :3] % 4, f32), {"dim": 1}),
    ("scatter_add", (f32, i64[:2, :3] % 4, f32), {"dim": 1}),
    ("scatter_reduce", (f32, i64[:2, :3] % 4, f32), {"dim": 1, "reduce": "amax"}),
    ("index_add", (f32, np.array([0, 2]), f32[:2]), {"dim": 0}),
    ("index_copy", (f32, np.array([0, 2]), f32[:2]), {"dim": 0}),
    ("index_put", (f32, row[:2]), {"key": (np.array([0, 1]), np.array([1, 3]))}),
    ("dot", (row, row), {}), ("outer", (row, row[:3]), {}),
    ("linalg_inv", (f64[:, :3, :3] + 3 * np.eye(3),), {}),
    ("linalg_matrix_exp", (f32[:3, :3],), {}),
    ("linalg_cholesky", (np.eye(3) * 2,), {"upper": True}),
    ("linalg_det", (f64[:, :3, :3],), {}), ("linalg_slogdet", (f32[:3, :3],), {}),
    ("linalg_eigh", (np.eye(3, dtype=np.complex64),), {}),
    ("linalg_eigvalsh", (np.eye(4),), {}),
    ("eye", (3, 5, np.float32), {}), ("eye", (3, None, np.int64), {}),
    ("linspace", (0.0, 1.0, 7, np.float32), {}), ("logspace", (0.0, 1.0, 5, 2.0, np.float64), {}),
    ("arange", (1, 10, 3, np.int64), {}), ("arange", (0.0, 1.0, 0.3, np.float32), {}),
    ("repeat", (row, (2, 3)), {}), ("tile", (f64, (2,)), {}), ("tile", (row, (2, 1, 3)), {}),
    ("embedding", (f32, np.array([[0, 2], [1, 1]])), {"padding_idx": None}),
    ("embedding_backward", (f32[:2], np.array([0, 2]), 5, None), {}),
    ("linalg_vector_norm", (c64,), {"ord": 1.0, "dim": (0,), "keepdim": True}),
    ("linalg_matrix_norm", (f64,), {"ord": "fro", "dim": (-2, -1), "keepdim": False}),
    ("linalg_matrix_norm", (f64,), {"ord": "nuc", "dim": (0, 2), "keepdim": True}),
    ("unfold", (f64,), {"dimension": 2, "size": 2, "step": 1}),
    ("as_strided", (f32,), {"size": (2, 2), "stride": (1, 2), "storage_offset": 1}),
    ("diag", (row,), {"diagonal": -2}), ("diag", (f32,), {"diagonal": 1}),
    ("fft_c2c", (c64,), {"dims": (0, 1), "norm": "ortho", "forward": False}),
    ("fft_r2c", (f64,), {"dims": (1, 2), "norm": "backward", "onesided": True}),
    ("fft_r2c", (f32,), {"dims": (0,), "norm": "forward", "onesided": False}),
    ("fft_c2r", (c64,), {"dims": (0, 1), "norm": "backward", "last_dim_size": 6}),
]

_x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
_w = rng.standard_normal((6, 2, 3, 2)).astype(np.float32)
_geometry = {"stride": (2, 1), "padding": ((1, 0), (0, 1)), "dilation": (1, 2), "groups": 2}
_pool = {"kernel_size": (3, 2), "stride": (2, 2), "padding": (1, 1)}
SAMPLES += [
    ("conv", (_x, _w, None), _geometry),
    ("conv_weight", (_x, np.zeros((2, 6, 3, 5), np.float32)),
     {"weight_shape": (6, 2, 3, 2), **_geometry}),
    *[("max_pool", (_x,), {**_pool, "dilation": (1, 1), "ceil_mode": c}) for c in (0, 1)],
    *[("avg_pool", (_x,), {**_pool, "ceil_mode": c, "count_include_pad": True,
                           "divisor_override": None}) for c in (0, 1)],
    ("avg_pool_backward", (np.ones((2, 4, 4, 4), np.float32),),
     {"input_shape": (7, 6), **_pool, "ceil_mode": True, "count_include_pad": True,
      "divisor_override": None}),
    ("pad", (_x,), {"pad": (1, 2, 0, -1), "mode": "constant", "value": 0.0}),
    ("pad", (_x,), {"pad": (1, 1), "mode": "reflect"}),
    ("im2col", (_x,), {"kernel_size": (3, 2), "dilation": (1, 2), "padding": (1, 0),
                       "stride": (2, 1)}),
]

_sq = rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)
_tall = rng.standard_normal((2, 5, 3)).astype(np.float32)
_wide = rng.standard_normal((3, 5))
_spd = _sq @ _sq.transpose(0, 2, 1)
_logits = rng.standard_normal((5, 4)).astype(np.float32)
_target = np.array([0, 3, 1, 3, 2])
_lp = np.log(np.full((6, 2, 5), 0.2))
_gates = rng.standard_normal((3, 8)).astype(np.float32)
_h = rng.standard_normal((3, 2)).astype(np.float32)
_seq = np.sort(rng.standard_normal((3, 6)), axis=-1)
_ix = np.array([[0, 2], [1, 1]])
_rng = np.random.default_rng(1)
SAMPLES += [
    ("activation_backward", (f32, pos, "leaky_relu"), {"negative_slope": 0.1}),
    ("adaptive_max_pool", (_x,), {"output_size": (3, 4)}),
    ("adaptive_max_pool", (_x[:, :, 0],), {"output_size": (5,)}),
    *[("batch_norm", (_x, row, row, row, pos[0] + 1, t, 1e-5), {}) for t in (True, False)],
    *[("batch_norm_backward", (_x, _x, row, row, pos[0] + 1, t, 1e-5), {})
      for t in (True, False)],
    ("layer_norm", (f64, f64[0], f64[0], 2, 1e-5), {}),
    ("layer_norm", (f32, None, None, 1, 1e-5), {}),
    ("layer_norm_backward", (f64, f64, f64[0], 2, 1e-5), {}),
    ("lstm_cell", (_gates, _h), {}),
    ("lstm_cell_backward", (_h, _h, _gates, _h, _h), {}),
    ("lstm_cell_backward", (None, _h, _gates, _h, _h), {}),
    ("lstm_layer", (np.stack([_gates] * 4), _h, _h, _gates[:2]), {}),
    ("lstm_layer_backward", (np.stack([_h] * 4), None, np.stack([_gates] * 4),
                             np.stack([_h] * 4), np.stack([_h] * 4), _h, _h, _gates[:2]), {}),
    *[("nll_loss", (_logits, _target, w, r, -100), {}) for r in ("none", "mean", "sum")
      for w in (None, row)],
    *[("cross_entropy", (_logits, _target, None, r, 1, s), {}) for r in ("none", "mean")
      for s in (0.0, 0.1)],
    ("cross_entropy_backward", (np.float32(1.0), _logits, _target, row, "mean", -100, 0.1), {}),
    ("ctc_loss", (_lp, np.array([[1, 2], [3, 3]]), np.array([6, 5]), np.array([2, 2]), 0), {}),
    ("ctc_loss_backward", (np.ones(2), _lp, np.array([[1, 2], [3, 3]]), np.array([6, 5]),
                           np.array([2, 2]), np.ones(2)), {"blank": 0}),
    ("diag_embed", (f32,), {"offset": 1, "dim1": 0, "dim2": 2}),
    ("diag_embed", (f64,), {"offset": -2, "dim1": -1, "dim2": 1}),
    ("einsum", (f32, f32), {"equation": "ij,kj->ik"}),
    ("einsum", (f64, row.astype(np.float64)), {"equation": "...j,j"}),
    ("einsum", (f64,), {"equation": "b i j -> j b"}),
    ("einsum", (f64, f64[0]), {"equation": "bij,ij->b..."}),
    ("einsum", (f64, f32[:1, :].astype(np.float64)), {"equation": "...ij,ij->...i"}),
    ("einsum", (f32, f32), {"equation": "ij,ij"}),
    ("einsum", (f32[:3, :3],), {"equation": "ii"}),
    ("tensordot", (f64, f32.T.astype(np.float64)), {"dims": ((1, 2), (1, 0))}),
    ("tensordot", (f64, f32[0].astype(np.float64)), {"dims": 1}),
    ("tensordot", (row, row), {"dims": 0}),
    ("histc", (f32,), {"bins": 7, "min": 0.0, "max": 0.0}),
    ("randperm", (5, np.int64, _rng), {}),
    ("bernoulli", (pos / 4, _rng), {}),
    ("dropout_mask", ((2, 3), 0.5, np.float32, _rng), {}),
    ("multinomial", (pos, 6, True, _rng), {}),
    ("linalg_eig", (_sq,), {}), ("linalg_eig", (f32[:3, :3],), {}),
    ("linalg_eigvals", (_sq.astype(np.complex64),), {}),
    ("linalg_geqrf", (_tall,), {}), ("linalg_geqrf", (_wide,), {}),
    ("linalg_lu_factor", (_tall,), {}), ("linalg_lu_factor", (_wide,), {}),
    ("linalg_lu_permutation", (np.array([[2, 3, 3]], np.int32),),
     {"m": 4, "dtype": np.float32}),
    ("linalg_ldl_factor", (_spd,), {"hermitian": False}),
    ("linalg_ldl_solve", (np.tril(_spd), np.array([1, 2, 3], np.int32), _wide),
     {"hermitian": False}),
    ("linalg_solve", (_sq, _wide), {"left": True}),
    ("linalg_solve", (_sq, _wide[0, :3]), {}),
    ("linalg_solve", (_sq[0], _wide.T), {"left": False}),
    ("linalg_solve_triangular", (np.triu(_sq), _wide[:, :2]), {"upper": True}),
    ("linalg_solve_triangular", (np.tril(_sq[0]), _wide.T), {"left": False}),
    ("linalg_pinv", (_tall,), {}), ("linalg_pinv", (_spd,), {"hermitian": True}),
    *[("linalg_qr", (a,), {"mode": m}) for a in (_tall, _wide)
      for m in ("reduced", "complete", "r")],
    *[("linalg_svd", (a,), {"full_matrices": f}) for a in (_tall, _wide, c64)
      for f in (True, False)],
    *[("linalg_lstsq", (a, b), {"driver": d}) for a, b in ((_tall, _tall[..., :2]),
                                                          (_wide, _wide[:, :2]))
      for d in ("gelsy", "gelsd", "gelss", "gels") if not (d != "gelsy" and a is _tall)],
    ("linalg_norm", (f64,), {}), ("linalg_norm", (f64,), {"ord": 2, "dim": (0,)}),
    ("linalg_norm", (c64,), {"ord": "fro", "dim": (0, 1), "keepdim": True}),
    ("linalg_norm", (f32,), {"dim": (1, 0)}),
    ("repeat_interleave", (f64,), {"repeats": 3, "dim": 1}),
    ("repeat_interleave", (f64,), {"repeats": 2, "dim": None}),
    ("searchsorted", (row, f32), {}), ("searchsorted", (_seq, f64[0]), {"out_int32": True}),
    ("searchsorted", (_seq[0], np.float64(0.5)), {}),
    ("split", (f64,), {"sections": [1, 3], "dim": 2}), ("split", (f32,), {"sections": [3]}),
    ("take_along_dim", (f32, i64[:, :2] % 3), {}),
    ("take_along_dim", (f64, np.zeros((1, 1, 5), np.int64)), {"dim": 2}),
    ("take_along_dim", (f64, np.zeros((2, 2, 1), np.int64)), {"dim": 1}),
    ("conv_transpose", (_x, np.zeros((4, 3, 3, 2), np.float32), row[:2].repeat(3)),
     {"stride": (2, 1), "padding": ((1, 1), (0, 0)), "output_padding": (1, 0),
      "dilation": (1, 2), "groups": 2}),
    ("col2im", (np.ones((2, 12, 6), np.float32),),
     {"output_size": (4, 5), "kernel_size": (2, 3), "dilation": (1, 1), "padding": (0, 1),
      "stride": (2, 2)}),
    *[("getitem", (f64,), {"key": k}) for k in (
        1, -2, (slice(None), 1), (Ellipsis, None, slice(1, None, 2)), (None, 0, Ellipsis),
        _ix % 2, (slice(None), _ix, np.array([1, 0])),
        (_ix % 2, slice(None), np.array([1, 0])), (None, 1, _ix, slice(0, 2)),
        (1, slice(None), _ix), (slice(None), np.array([True, False, True])),
        (Ellipsis, np.array([[0], [3]])), (slice(None, None, -1),), (np.array(1), None),
        (f64[..., 0] > 0,), (0, f64[0] > 0), (True,), ())],
]


def _outputs(result):
    """(shape, dtype) pairs of a kernel's result or a shape function's."""
    if isinstance(result, tuple) and len(result) == 2 and not isinstance(result[1], tuple) \
            and not isinstance(result[0], (np.ndarray, np.generic)):
        return [(tuple(result[0]), np.dtype(result[1]))]
    if isinstance(result, tuple) and all(isinstance(r, tuple) for r in result):
        return [(tuple(s), np.dtype(d)) for s, d in result]
    outs = result if isinstance(result, tuple) else (result,)
    return [(np.shape(o), np.asarray(o).dtype) for o in outs]


@pytest.mark.parametrize("op, inputs, params", SAMPLES,
                         ids=[f"{s[0]}-{i}" for i, s in enumerate(SAMPLES)])
def test_shape_function_agrees_with_the_reference_kernel(op, inputs, params):
    record = library.get_op(op)
    assert record.shape is not None, f"{op} has no shape function"
    with np.errstate(all="ignore"):
        want = _outputs(record.kernel(*inputs, **params))
    metas = [_meta.Meta(x.shape, x.dtype) if isinstance(x, np.ndarray) else x for x in inputs]
    assert _outputs(record.shape(*metas, **params)) == want


def test_every_op_record_has_a_shape_function_but_the_listed_ones():
    records = library.op_records()
    without = {name for name, record in records.items() if record.shape is None}
    # the list names exactly what is missing: an op given a shape function leaves it
    assert without == set(_meta.WITHOUT_SHAPE)
    assert len(without) < len(records) / 3
    for name in {s[0] for s in SAMPLES}:
        assert records[name].shape is not None


def test_meta_ops_with_a_shape_function_run_no_kernel():
    kernels = library.get_backend("meta").kernels
    for name, record in library.op_records().items():
        if record.shape is not None:
            # ==, not is: a custom op's shape function is a bound method, a new object
            # at each attribute access (custom ops defined by other tests are here too)
            assert kernels[name].shape_function == record.shape, name


def test_meta_tensors_through_the_user_api():
    x = torcia.empty(10**5, 10**5, device="meta")  # no memory behind it
    v, i = x.max(dim=1)
    assert v.shape == i.shape == (10**5,) and i.dtype is torcia.int64
    assert x.sum(0, keepdim=True).shape == (1, 10**5)
    assert torcia.special.i0(x).shape == x.shape
    assert x.t().unsqueeze(0).shape == (1, 10**5, 10**5)
    assert torcia.cat([x, x], 1).shape == (10**5, 2 * 10**5)
    assert torcia.softmax(x, dim=-1).dtype is torcia.float32
    z = torcia.empty(3, 4, dtype=torcia.complex64, device="meta")
    assert torcia.view_as_real(z).shape == (3, 4, 2) and z.abs().dtype is torcia.float32
    assert x.cumsum(1).shape == x.shape and x.to(torcia.float64).dtype is torcia.float64


def test_bfloat16_float_functions_stay_bfloat16_on_meta():
    # bfloat16 (NumPy's kind "V") was taken for an integer: its float results were float64
    x = torcia.empty(3, 4, dtype=torcia.bfloat16, device="meta")
    y = torcia.ones(3, 4, dtype=torcia.bfloat16)
    for f in (torcia.mean, lambda t: t.logsumexp(1), torcia.angle, torcia.special.i0,
              lambda t: torcia.special.zeta(t, t), torcia.norm, torcia.cov):
        assert f(x).dtype is f(y).dtype is torcia.bfloat16


def test_complex_var_and_std_are_real_on_meta():
    # the variance of complex values is real, on meta as on the CPU (it was complex)
    for dt, real in ((torcia.complex64, torcia.float32), (torcia.complex128, torcia.float64)):
        z = torcia.empty(3, 4, dtype=dt, device="meta")
        assert torcia.var(z).dtype is torcia.std(z, 1).dtype is real
        assert [t.dtype for t in torcia.std_mean(z, 0)] == [real, dt]


def test_creation_shape_functions_take_their_arguments_by_position_or_name():
    # init functions call the kernels positionally (``uniform_`` on a meta weight)
    for op, args in (("zeros", ((2, 3), np.float32)), ("full", ((4,), 1.5, np.float64)),
                     ("uniform", ((2, 5), -1.0, 1.0, np.float32, _rng)),
                     ("normal", ((3,), 0.0, 2.0, np.float64, _rng)),
                     ("randint", ((2, 2), 0, 5, np.int64, _rng))):
        record = library.get_op(op)
        assert _outputs(record.shape(*args)) == _outputs(record.kernel(*args)), op
    assert library.get_op("zeros").shape(shape=(2,), dtype=np.int32) == ((2,), np.int32)


def test_only_data_dependent_ops_have_no_shape_function():
    assert set(_meta.WITHOUT_SHAPE) == set(_meta.DATA_DEPENDENT)


@pytest.mark.parametrize("op, run", [
    ("nonzero", lambda e: e(3, 4).nonzero()),
    ("unique", lambda e: torcia.unique(e(5))),
    ("masked_select", lambda e: torcia.masked_select(e(3), e(3, dtype=torcia.bool))),
    ("bincount", lambda e: torcia.bincount(e(4, dtype=torcia.int64))),
])
def test_data_dependent_ops_refuse_meta_tensors(op, run):
    # as PyTorch's meta device: no shape without values, rather than one made from zeros
    with pytest.raises(NotImplementedError, match=f"{op}: cannot run on the meta device"):
        run(_meta_empty)


def _meta_empty(*shape, dtype=torcia.float32):
    return torcia.empty(*shape, dtype=dtype, device="meta")


def test_data_dependent_cases_of_other_ops_refuse_meta_tensors():
    e = _meta_empty
    with pytest.raises(NotImplementedError, match="boolean mask"):
        e(3, 4)[e(3, 4, dtype=torcia.bool)]
    with pytest.raises(RuntimeError, match="tensor of repeats"):
        torcia.repeat_interleave(e(3), e(3, dtype=torcia.int64))
    with pytest.raises(NotImplementedError, match="rank"):
        torcia.linalg.lstsq(e(5, 3), e(5, 2), driver="gelsd")



def test_view_as_complex_and_embedding_renorm_on_meta_tensors():
    # as PyTorch's meta device: a meta tensor has no storage whose strides would be checked,
    # and no values to rescale
    z = torcia.view_as_complex(_meta_empty(3, 4, 2, dtype=torcia.float64))
    assert z.device.type == "meta" and z.shape == (3, 4) and z.dtype is torcia.complex128
    w = _meta_empty(5, 3)
    assert torcia.embedding_renorm_(w, _meta_empty(2, dtype=torcia.int64), 1.0, 2.0) is w
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        torcia.view_as_complex(_meta_empty(3, 3))

def test_getitem_shape_function_checks_the_key():
    x = _meta.Meta((3, 4), np.float32)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        _meta.SHAPES["getitem"](x, 3)
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        _meta.SHAPES["getitem"](x, (0, 1, 2))


# (name, fn(module, functional, empty, int64)) run on the meta devices of torcia and torch
TORCH_META = {
    "batch_norm": lambda m, f, e, L: f.batch_norm(e(4, 3, 5), e(3), e(3), training=True),
    "layer_norm": lambda m, f, e, L: f.layer_norm(e(4, 3, 5), (3, 5)),
    "cross_entropy": lambda m, f, e, L: f.cross_entropy(e(4, 5), e(4, dtype=L)),
    "cross_entropy_none": lambda m, f, e, L: f.cross_entropy(e(4, 5), e(4, dtype=L),
                                                              reduction="none"),
    "nll_loss": lambda m, f, e, L: f.nll_loss(e(4, 5), e(4, dtype=L)),
    "einsum": lambda m, f, e, L: m.einsum("bij,bjk->bik", e(2, 3, 4), e(2, 4, 5)),
    "einsum_ellipsis": lambda m, f, e, L: m.einsum("...ij->...ji", e(2, 3, 4)),
    "tensordot": lambda m, f, e, L: m.tensordot(e(2, 3, 4), e(4, 3, 5), dims=([1, 2], [1, 0])),
    "getitem": lambda m, f, e, L: e(5, 6, 7)[1:4, None, ..., ::2],
    "getitem_advanced": lambda m, f, e, L: e(5, 6, 7)[:, e(2, 3, dtype=L), e(2, 3, dtype=L)],
    "getitem_apart": lambda m, f, e, L: e(5, 6, 7)[e(2, dtype=L), :, e(2, dtype=L)],
    "split": lambda m, f, e, L: m.split(e(7, 3), 3),
    "take_along_dim": lambda m, f, e, L: m.take_along_dim(e(3, 4), e(3, 2, dtype=L), dim=1),
    "repeat_interleave": lambda m, f, e, L: m.repeat_interleave(e(3, 4), 2, dim=1),
    "searchsorted": lambda m, f, e, L: m.searchsorted(e(5), e(2, 3)),
    "conv_transpose2d": lambda m, f, e, L: f.conv_transpose2d(
        e(2, 4, 5, 6), e(4, 3, 3, 3), stride=2, padding=1, output_padding=1),
    "fold": lambda m, f, e, L: f.fold(e(2, 12, 6), (4, 5), (2, 3), stride=2, padding=(0, 1)),
    "adaptive_max_pool2d": lambda m, f, e, L: f.adaptive_max_pool2d(
        e(2, 3, 7, 9), (3, 4), return_indices=True),
    "diag_embed": lambda m, f, e, L: m.diag_embed(e(2, 3), offset=1),
    "qr": lambda m, f, e, L: m.linalg.qr(e(2, 5, 3)),
    "qr_complete": lambda m, f, e, L: m.linalg.qr(e(5, 3), mode="complete"),
    "svd": lambda m, f, e, L: m.linalg.svd(e(2, 5, 3), full_matrices=False),
    "svd_full": lambda m, f, e, L: m.linalg.svd(e(5, 3)),
    "eigh": lambda m, f, e, L: m.linalg.eigh(e(3, 3)),
    "eig": lambda m, f, e, L: m.linalg.eig(e(3, 3)),
    "lu_factor": lambda m, f, e, L: m.linalg.lu_factor(e(2, 4, 3)),
    "cholesky": lambda m, f, e, L: m.linalg.cholesky(e(2, 3, 3)),
    "solve": lambda m, f, e, L: m.linalg.solve(e(2, 3, 3), e(2, 3, 4)),
    "solve_triangular": lambda m, f, e, L: m.linalg.solve_triangular(e(3, 3), e(3, 4),
                                                                     upper=True),
    "inv": lambda m, f, e, L: m.linalg.inv(e(3, 3)),
    "pinv": lambda m, f, e, L: m.linalg.pinv(e(5, 3)),
    "norm": lambda m, f, e, L: m.linalg.norm(e(3, 4), dim=(0, 1)),
    "histc": lambda m, f, e, L: m.histc(e(10), bins=4),
    "multinomial": lambda m, f, e, L: m.multinomial(e(2, 4), 3, replacement=True),
    "bernoulli": lambda m, f, e, L: m.bernoulli(e(2, 4)),
    "randperm": lambda m, f, e, L: m.randperm(5, device="meta"),
    "dropout": lambda m, f, e, L: f.dropout(e(2, 4), 0.5),
    "topk": lambda m, f, e, L: m.topk(e(3, 5), 2),
    # a 0-dim tensor fill value: read as a number on the CPU, a tensor operand here
    "masked_fill_tensor": lambda m, f, e, L: e(3, 4).masked_fill(e(3, 4, dtype=m.bool), e(())),
    "masked_fill_inplace": lambda m, f, e, L: e(3, 4).masked_fill_(e(4, dtype=m.bool), e(())),
    "index_fill_tensor": lambda m, f, e, L: e(3, 4).index_fill(1, e(2, dtype=L), e(())),
    "fill_tensor": lambda m, f, e, L: e(3, 4).fill_(e(())),
    "quantile_tensor_q": lambda m, f, e, L: m.quantile(e(3, 5), e(2), dim=1),
}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(TORCH_META))
def test_meta_results_match_pytorchs_meta_device(name):
    torch = pytest.importorskip("torch")
    torch_f = pytest.importorskip("torch.nn.functional")
    # torcia-nn is not a dependency of core: its functional ops are tested where present
    torcia_f = pytest.importorskip("torcia.nn.functional")

    results = []
    for module, functional in ((torcia, torcia_f), (torch, torch_f)):
        def empty(*shape, dtype=None, module=module):
            return module.empty(*shape, device="meta", dtype=dtype or module.float32)

        out = TORCH_META[name](module, functional, empty, module.int64)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        assert all(o.device.type == "meta" for o in outs)
        results.append([(tuple(o.shape), str(o.dtype).rsplit(".", 1)[-1]) for o in outs])
    assert results[0] == results[1]


def test_a_training_step_on_the_meta_device_gives_every_gradient_its_shape():
    # forward and backward through convolutions, norms, pooling, losses and an LSTM with
    # shape functions only: no kernel runs on the stand-ins
    nn = pytest.importorskip("torcia.nn")
    functional = pytest.importorskip("torcia.nn.functional")
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.ConvTranspose2d(4, 2, 3, stride=2), nn.AdaptiveMaxPool2d(3),
                          nn.Flatten(), nn.LayerNorm(18), nn.Linear(18, 5)).to("meta")
    x = _meta_empty(4, 3, 8, 8)
    target = _meta_empty(4, dtype=torcia.int64)
    loss = functional.cross_entropy(model(x), target, label_smoothing=0.1)
    loss.backward()
    assert loss.shape == () and loss.device.type == "meta"
    assert all(p.grad.shape == p.shape for p in model.parameters())
    lstm = nn.LSTM(4, 3, device="meta")
    out, (h, c) = lstm(_meta_empty(5, 2, 4))
    assert out.shape == (5, 2, 3) and h.shape == c.shape == (1, 2, 3)
    (out.sum() + c.sum()).backward()
    assert all(p.grad.shape == p.shape for p in lstm.parameters())


@pytest.mark.parametrize("dtype", [torcia.bool, torcia.int32, torcia.float16])
def test_layer_and_group_norm_of_integers_on_meta_give_the_cpu_dtype(dtype):
    # torcia normalises integers (torch has no kernel) in float64: meta said the input's dtype
    x = torcia.ones(2, 4, 3, dtype=dtype)
    for f in (lambda t: torcia.layer_norm(t, (3,)), lambda t: torcia.group_norm(t, 2)):
        assert f(x.to("meta")).dtype == f(x).dtype
