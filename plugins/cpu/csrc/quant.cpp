// Integer kernels of torcia-ao's quantized ops: int8 products on oneDNN's
// dnnl_gemm_u8s8s32 (uint8 activations times int8 weights, int32 sums, on VNNI where the
// CPU has it), or MKL's cblas_gemm_s8u8s32 without oneDNN; 2-d convolutions on oneDNN's
// convolution primitive (columns and the GEMM without it); the quantization of
// activations and the epilogues (scales, bias, ReLU, requantization to uint8) in C++
// around it; and the weight-only products (int8 and 4-bit weights dequantized a block of
// rows at a time into a float buffer, multiplied with the table's SGEMM).
//
// OpenBLAS has no integer GEMM: the int8 products need oneDNN (torcia-cpu's int8 extra,
// loaded at run time by use_onednn, as MKL is by use_mkl) or MKL. has_int8_gemm() says
// whether one is loaded; without it the plugin's Python side runs torcia-ao's NumPy
// reference kernels. Conventions are torcia-ao's (torcia/ao/_ops.py):
// q = clamp(rint(x / scale) + zero_point), x ~ (q - zero_point) * scale, weights
// symmetric (zero point 0).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <dlfcn.h>

#include "checks.h"
#include "gemm.h"
#include "onednn.h"
#include "vecmath.h"

namespace torcia_blas {
dnnl_gemm_u8s8s32_t dnnl_gemm_u8s8s32 = nullptr;
}  // namespace torcia_blas

namespace py = pybind11;
using std::int32_t;
using std::int64_t;
using std::int8_t;
using std::uint8_t;

namespace {

constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112, kFixOffset = 173;

// nearest, ties to even (C's nearbyint in the default rounding mode), for |v| < 2^22:
// plain additions the compiler vectorises, where nearbyint stays a call per element
TORCIA_INLINE float round_even(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (v + kMagic) - kMagic;
}

template <typename T>
const T* data_of(const std::string& fn, const std::string& name, const py::array& a,
                 int64_t ndim) {
  if (!torcia_checks::is_dtype<T>(a.dtype()))  // by value: a pickled array's dtype is a copy
    throw std::runtime_error(fn + ": " + name + " has dtype " + std::string(py::str(a.dtype())) +
                             ", expected " + std::string(py::str(py::dtype::of<T>())));
  if (!(a.flags() & py::array::c_style))
    throw std::runtime_error(fn + ": " + name + " must be C-contiguous");
  if (ndim >= 0 && a.ndim() != ndim)
    throw std::runtime_error(fn + ": " + name + " must have " + std::to_string(ndim) +
                             " dims, got " + torcia_checks::shape_of(a));
  return static_cast<const T*>(a.data());
}

void check_len(const std::string& fn, const std::string& name, const py::array& a, int64_t n) {
  if (a.ndim() != 1 || a.shape(0) != n)
    throw std::runtime_error(fn + ": " + name + " has shape " + torcia_checks::shape_of(a) +
                             ", expected (" + std::to_string(n) + ",)");
}

const float* optional_bias(const std::string& fn, const py::object& bias, int64_t n) {
  if (bias.is_none()) return nullptr;
  const py::array b = py::reinterpret_borrow<py::array>(bias);
  const float* p = data_of<float>(fn, "bias", b, 1);
  check_len(fn, "bias", b, n);
  return p;
}

std::string int8_library = "none";

bool has_int8_gemm() {
  return torcia_blas::dnnl_gemm_u8s8s32 != nullptr || torcia_blas::table.gemm_s8u8s32 != nullptr;
}

void need_gemm(const std::string& fn) {
  if (!has_int8_gemm())
    throw std::runtime_error(fn + ": no integer GEMM is loaded (oneDNN: install torcia-cpu's "
                             "int8 extra; or MKL's)");
}

constexpr int64_t kMax32 = (int64_t(1) << 31) - 1;

// C (m, n) int32 = (A - a_offset) (m, k) uint8 times op(B) int8, B stored (n, k) row-major
// (so op(B) = B^T: the weight of a linear layer, or a convolution's filters as rows); A
// stored (m, k), or (k, m) where a_trans (a convolution's windows as columns).
void gemm_u8s8(int64_t m, int64_t n, int64_t k, const uint8_t* a, int64_t lda, int a_offset,
               const int8_t* b, int64_t ldb, int32_t* c, int64_t ldc, bool a_trans = false) {
  const int32_t zero = 0;
  if (torcia_blas::dnnl_gemm_u8s8s32) {
    // oneDNN subtracts a uint8 offset: any zero point
    const int status = torcia_blas::dnnl_gemm_u8s8s32(a_trans ? 'T' : 'N', 'T', 'F', m, n, k,
                                                      1.0f, a, lda,
                                                      static_cast<uint8_t>(a_offset), b, ldb, 0,
                                                      0.0f, c, ldc, &zero);
    if (status != 0)
      throw std::runtime_error("oneDNN's dnnl_gemm_u8s8s32 failed with status " +
                               std::to_string(status));
    return;
  }
  if (a_offset <= 128) {
    // MKL adds the offset as an int8: -a_offset fits for offsets up to 128
    torcia_blas::table.gemm_s8u8s32(kRowMajor, a_trans ? kTrans : kNoTrans, kTrans, kFixOffset,
                                    m, n, k, 1.0f, a, lda, static_cast<int8_t>(-a_offset), b,
                                    ldb, 0, 0.0f, c, ldc, &zero);
    return;
  }
  torcia_blas::table.gemm_s8u8s32(kRowMajor, a_trans ? kTrans : kNoTrans, kTrans, kFixOffset, m,
                                  n, k, 1.0f, a, lda, 0, b, ldb, 0, 0.0f, c, ldc, &zero);
  // sum_k (a - off) b = sum_k a b - off * sum_k b: subtract each column's share
  for (int64_t j = 0; j < n; ++j) {
    int32_t s = 0;
    for (int64_t kk = 0; kk < k; ++kk) s += b[j * ldb + kk];
    const int32_t sub = a_offset * s;
    for (int64_t i = 0; i < m; ++i) c[i * ldc + j] -= sub;
  }
}

// the epilogue of one row: acc * row_scale * col_scale + bias, as float or requantized
void finish_row(const int32_t* acc, int64_t n, float row_scale, const float* col_scale,
                const float* bias, float* out_f, uint8_t* out_q, float inv_out, int out_zp,
                bool relu) {
  if (out_f) {
    for (int64_t j = 0; j < n; ++j) {
      const float v = static_cast<float>(acc[j]) * (row_scale * col_scale[j]) +
                      (bias ? bias[j] : 0.f);
      out_f[j] = relu ? std::max(v, 0.f) : v;
    }
    return;
  }
  const float lo = relu ? static_cast<float>(out_zp) : 0.f;
  for (int64_t j = 0; j < n; ++j) {
    const float v = static_cast<float>(acc[j]) * (row_scale * col_scale[j]) +
                    (bias ? bias[j] : 0.f);
    float q = round_even(v * inv_out) + static_cast<float>(out_zp);
    q = std::min(std::max(lo, q), 255.f);  // NaN -> lo
    out_q[j] = static_cast<uint8_t>(q);
  }
}

// A product's or a convolution's buffers (its sums, its input channels-last, oneDNN's
// scratchpad), kept per thread between calls and grown as needed: fresh allocations of
// that size come from mmap, and touching their new pages costs as much as a small
// convolution. Buffers past kKeepBytes (large images) are let go after each call.
constexpr int kSumsSlot = 0, kImageSlot = 1, kScratchSlot = 2, kSlots = 3;
constexpr size_t kKeepBytes = size_t(32) << 20;
// the sums of one chunk of images (qconv2d): well inside a core's L2 cache
constexpr int64_t kChunkBytes = int64_t(512) << 10;

std::vector<uint8_t>* workspaces() {
  thread_local std::vector<uint8_t> buffers[kSlots];
  return buffers;
}

void* workspace(int slot, size_t bytes) {
  constexpr size_t kAlign = 64;  // a cache line, as oneDNN's kernels prefer
  std::vector<uint8_t>& b = workspaces()[slot];
  if (b.size() < bytes + kAlign) b.resize(bytes + kAlign);
  const auto at = reinterpret_cast<std::uintptr_t>(b.data());
  return b.data() + (kAlign - at % kAlign) % kAlign;
}

void trim_workspaces() {
  for (int slot = 0; slot < kSlots; ++slot) {
    std::vector<uint8_t>& b = workspaces()[slot];
    if (b.size() > kKeepBytes) std::vector<uint8_t>().swap(b);
  }
}

struct MatmulPlan;
struct Packed;
std::pair<std::shared_ptr<MatmulPlan>, std::shared_ptr<Packed>> matmul_plan_for(
    const py::array& wq, int64_t m, bool zero_point);
void dnnl_product(const MatmulPlan& plan, const Packed& packed, const uint8_t* x, int x_zp,
                  int32_t* acc);

// int8_linear(xq (M, K) uint8, a_offset, wq (N, K) int8, row_scale (M,), col_scale (N,),
// bias (N,), (M, N) or None, out_scale, out_zero_point, relu) -> (M, N): float32 when out_scale
// <= 0, else uint8 at out_scale / out_zero_point
py::array int8_linear(const py::array& xq, int a_offset, const py::array& wq,
                      const py::array& row_scale, const py::array& col_scale,
                      const py::object& bias, double out_scale, int out_zp, bool relu) {
  const std::string fn = "int8_linear";
  need_gemm(fn);
  const uint8_t* x = data_of<uint8_t>(fn, "xq", xq, 2);
  const int8_t* w = data_of<int8_t>(fn, "wq", wq, 2);
  const int64_t m = xq.shape(0), k = xq.shape(1), n = wq.shape(0);
  if (wq.shape(1) != k)
    throw std::runtime_error(fn + ": xq has shape " + torcia_checks::shape_of(xq) +
                             ", wq has " + torcia_checks::shape_of(wq));
  if (m > kMax32 || n > kMax32 || k > kMax32)
    throw std::runtime_error(fn + ": a matrix dimension exceeds 32 bits");
  if (a_offset < 0 || a_offset > 255)
    throw std::runtime_error(fn + ": a_offset must be in 0..255, got " + std::to_string(a_offset));
  if (out_zp < 0 || out_zp > 255)
    throw std::runtime_error(fn + ": out_zero_point must be in 0..255");
  const float* rs = data_of<float>(fn, "row_scale", row_scale, 1);
  check_len(fn, "row_scale", row_scale, m);
  const float* cs = data_of<float>(fn, "col_scale", col_scale, 1);
  check_len(fn, "col_scale", col_scale, n);
  // a bias per output (N,), or per element (M, N): a recurrent layer's input projection
  // added to its hidden one in the epilogue rather than by one more pass over the gates
  const float* b = nullptr;
  int64_t b_row = 0;
  if (!bias.is_none() && py::reinterpret_borrow<py::array>(bias).ndim() == 2) {
    const py::array ba = py::reinterpret_borrow<py::array>(bias);
    b = data_of<float>(fn, "bias", ba, 2);
    if (ba.shape(0) != m || ba.shape(1) != n)
      throw std::runtime_error(fn + ": a 2-d bias must have the output's shape (" +
                               std::to_string(m) + ", " + std::to_string(n) + "), got " +
                               torcia_checks::shape_of(ba));
    b_row = n;
  } else {
    b = optional_bias(fn, bias, n);
  }
  const bool to_float = out_scale <= 0;
  const std::vector<py::ssize_t> shape{m, n};
  py::array out = to_float ? py::array(py::dtype::of<float>(), shape)
                           : py::array(py::dtype::of<uint8_t>(), shape);
  if (m == 0 || n == 0) return out;
  float* of = to_float ? static_cast<float*>(out.mutable_data()) : nullptr;
  uint8_t* oq = to_float ? nullptr : static_cast<uint8_t*>(out.mutable_data());
  const float inv = to_float ? 0.f : static_cast<float>(1.0 / out_scale);
  // oneDNN's matmul and its packed weights, found with the GIL held (frozen weights' owners
  // are Python objects); null where the library has no matmul
  auto [plan, packed] = k > 0 ? matmul_plan_for(wq, m, a_offset != 0)
                              : std::pair<std::shared_ptr<MatmulPlan>, std::shared_ptr<Packed>>{};
  {
    py::gil_scoped_release release;
    // the sums in this thread's buffer, kept between calls (its pages touched once); the
    // GEMM writes every sum (beta 0)
    int32_t* acc = static_cast<int32_t*>(workspace(kSumsSlot, sizeof(int32_t) * m * n));
    if (k == 0)
      std::fill(acc, acc + m * n, 0);
    else if (plan)
      dnnl_product(*plan, *packed, x, a_offset, acc);
    else
      gemm_u8s8(m, n, k, x, k, a_offset, w, k, acc, n);
#pragma omp parallel for schedule(static) if (m * n > 65536)
    for (int64_t i = 0; i < m; ++i)
      finish_row(acc + i * n, n, rs[i], cs, b ? b + i * b_row : nullptr,
                 of ? of + i * n : nullptr,
                 oq ? oq + i * n : nullptr, inv, out_zp, relu);
    trim_workspaces();
  }
  return out;
}

// per row: int8 symmetric (scale max|x| / 127), stored with +128
void quantize_per_row(const float* xp, int64_t m, int64_t k, uint8_t* qp, float* sp) {
#pragma omp parallel for schedule(static) if (m * k > 65536)
  for (int64_t i = 0; i < m; ++i) {
    const float* row = xp + i * k;
    float amax = 0.f;
    for (int64_t j = 0; j < k; ++j) amax = std::max(amax, std::fabs(row[j]));
    const float scale = amax > 0 ? amax / 127.f : 1.f;
    uint8_t* out = qp + i * k;
    for (int64_t j = 0; j < k; ++j) {
      const float v = std::min(std::max(-127.f, round_even(row[j] / scale)), 127.f);
      out[j] = static_cast<uint8_t>(static_cast<int>(v) + 128);
    }
    sp[i] = scale;
  }
}

// over the whole tensor: uint8 affine with FBGEMM's ChooseQuantizationParams (0..127 with
// reduce_range); returns the zero point
int quantize_whole(const float* xp, int64_t m, int64_t k, bool reduce_range, uint8_t* qp,
                   float* sp) {
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < m * k; ++i) {
    lo = std::min(lo, xp[i]);
    hi = std::max(hi, xp[i]);
  }
  const int qmax = reduce_range ? 127 : 255;
  double scale = (static_cast<double>(hi) - lo) / qmax;
  if (static_cast<float>(scale) == 0.f || std::isinf(1.f / static_cast<float>(scale)))
    scale = 0.1;
  const double from_min = -lo / scale, from_max = qmax - hi / scale;
  const double err_min = std::fabs(lo / scale), err_max = qmax + std::fabs(hi / scale);
  const double initial = err_min < err_max ? from_min : from_max;
  // ties to even on the double, as Python's round() in torcia-ao's reference
  const int zp = static_cast<int>(std::min(std::max(std::nearbyint(initial), 0.0),
                                           static_cast<double>(qmax)));
  const float fscale = static_cast<float>(scale);
  const float inv = 1.f / fscale;
  const float top = static_cast<float>(qmax);
#pragma omp parallel for schedule(static) if (m * k > 65536)
  for (int64_t i = 0; i < m * k; ++i) {
    const float v = round_even(xp[i] * inv + static_cast<float>(zp));
    qp[i] = static_cast<uint8_t>(std::min(std::max(0.f, v), top));  // NaN -> 0
  }
  for (int64_t i = 0; i < m; ++i) sp[i] = fscale;
  return zp;
}

// quantize_rows(x (M, K) float32, per_row, reduce_range) -> (q uint8 (M, K), row scale
// (M,), offset): per row, int8 symmetric (scale max|x| / 127) stored with +128; or over
// the whole tensor, uint8 affine with FBGEMM's ChooseQuantizationParams (0..127 with
// reduce_range), the offset its zero point
py::tuple quantize_rows(const py::array& x, bool per_row, bool reduce_range) {
  const std::string fn = "quantize_rows";
  const float* xp = data_of<float>(fn, "x", x, 2);
  const int64_t m = x.shape(0), k = x.shape(1);
  py::array q(py::dtype::of<uint8_t>(), std::vector<py::ssize_t>{m, k});
  py::array scales(py::dtype::of<float>(), std::vector<py::ssize_t>{m});
  uint8_t* qp = static_cast<uint8_t*>(q.mutable_data());
  float* sp = static_cast<float*>(scales.mutable_data());
  int offset = 128;
  {
    py::gil_scoped_release release;
    if (per_row)
      quantize_per_row(xp, m, k, qp, sp);
    else
      offset = quantize_whole(xp, m, k, reduce_range, qp, sp);
  }
  return py::make_tuple(q, scales, offset);
}

// n values quantized as T (the clones fill AVX-512's and AVX2's lanes)
template <typename T>
TORCIA_CLONES_WIDE void quantize_span(const float* x, int64_t n, float inv, float zp, float lo,
                                      float hi, T* out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<T>(std::min(std::max(lo, round_even(x[i] * inv + zp)), hi));  // NaN: lo
}

// quantize_tensor(x float32, scale, zero_point, qmin, qmax, signed) -> uint8 or int8 array
// of x's shape: clamp(rint(x * (1 / scale) + zero_point), qmin, qmax)
py::array quantize_tensor(const py::array& x, double scale, int zp, int qmin, int qmax,
                          bool is_signed) {
  const std::string fn = "quantize_tensor";
  const float* xp = data_of<float>(fn, "x", x, -1);
  if (!(scale > 0)) throw std::runtime_error(fn + ": scale must be positive");
  if (qmin > qmax || qmin < (is_signed ? -128 : 0) || qmax > (is_signed ? 127 : 255))
    throw std::runtime_error(fn + ": qmin and qmax must be in the dtype's range, in order; got " +
                             std::to_string(qmin) + " and " + std::to_string(qmax));
  std::vector<py::ssize_t> shape(x.shape(), x.shape() + x.ndim());
  py::array q = is_signed ? py::array(py::dtype::of<int8_t>(), shape)
                          : py::array(py::dtype::of<uint8_t>(), shape);
  const int64_t n = x.size();
  const float inv = 1.f / static_cast<float>(scale);
  const float lo = static_cast<float>(qmin), hi = static_cast<float>(qmax);
  void* out = q.mutable_data();
  constexpr int64_t kBlock = 65536;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  {
    py::gil_scoped_release release;
#pragma omp parallel for schedule(static) if (n > 262144)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t first = blk * kBlock, len = std::min(kBlock, n - first);
      if (is_signed)
        quantize_span(xp + first, len, inv, static_cast<float>(zp), lo, hi,
                      static_cast<int8_t*>(out) + first);
      else
        quantize_span(xp + first, len, inv, static_cast<float>(zp), lo, hi,
                      static_cast<uint8_t*>(out) + first);
    }
  }
  return q;
}

// dequantize_tensor(q uint8 or int8, scale, zero_point) -> float32 of q's shape
py::array dequantize_tensor(const py::array& q, double scale, int zp) {
  const std::string fn = "dequantize_tensor";
  const bool is_signed = torcia_checks::is_dtype<int8_t>(q.dtype());
  if (!is_signed && !torcia_checks::is_dtype<uint8_t>(q.dtype()))
    throw std::runtime_error(fn + ": q must be uint8 or int8");
  if (!(q.flags() & py::array::c_style)) throw std::runtime_error(fn + ": q must be C-contiguous");
  std::vector<py::ssize_t> shape(q.shape(), q.shape() + q.ndim());
  py::array out(py::dtype::of<float>(), shape);
  float* o = static_cast<float*>(out.mutable_data());
  const int64_t n = q.size();
  const float s = static_cast<float>(scale);
  {
    py::gil_scoped_release release;
    if (is_signed) {
      const int8_t* p = static_cast<const int8_t*>(q.data());
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(p[i] - zp) * s;
    } else {
      const uint8_t* p = static_cast<const uint8_t*>(q.data());
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(p[i] - zp) * s;
    }
  }
  return out;
}

// the windows of one image as columns: row (channel, ky, kx) of cols (ckk, ld) holds, from
// its start, that tap of every output position, padding with pad (the quantized 0.0); the valid
// stretch of an output row copied at once where the stride along it is 1
void columns(const uint8_t* img, int64_t c, int64_t h, int64_t wd, int64_t kh, int64_t kw,
             const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
             const std::vector<int64_t>& dilation, int64_t oh, int64_t ow, uint8_t pad,
             uint8_t* cols, int64_t ld) {
  const int64_t sh = stride[0], sw = stride[1], dh = dilation[0], dw = dilation[1];
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx) {
        uint8_t* row = cols + ((ch * kh + ky) * kw + kx) * ld;
        const int64_t x0 = kx * dw - padding[2];  // input column of output column 0
        // output columns whose input column is inside: x0 + xo * sw in [0, wd)
        const int64_t lo = x0 >= 0 ? 0 : std::min<int64_t>(ow, (-x0 + sw - 1) / sw);
        const int64_t hi = std::max<int64_t>(lo, std::min<int64_t>(ow, (wd - x0 + sw - 1) / sw));
        for (int64_t yo = 0; yo < oh; ++yo, row += ow) {
          const int64_t y = yo * sh - padding[0] + ky * dh;
          if (y < 0 || y >= h) {
            std::memset(row, pad, ow);
            continue;
          }
          const uint8_t* src = img + (ch * h + y) * wd + x0;
          std::memset(row, pad, lo);
          if (sw == 1) {
            std::memcpy(row + lo, src + lo, hi - lo);
          } else {
            for (int64_t xo = lo; xo < hi; ++xo) row[xo] = src[xo * sw];
          }
          std::memset(row + hi, pad, ow - hi);
        }
      }
}

// The epilogue of a convolution, exactly as torcia-ao's reference computes it: sum *
// mult + bias in double (mult = x_scale * w_scale of the sum's channel), then float32, or
// uint8 at out_scale (rint(v / out_scale) + zero point, clamped; from the zero point up
// with relu). quant.cpp is built without contraction into FMA: every multiply and add below
// rounds once, as the error bounds count them.
struct Requant {
  bool to_uint8, relu;
  float scale, zp, lo;  // lo: the lowest output, the zero point with relu
};

TORCIA_INLINE float requantized(double v, const Requant& r) {
  if (!r.to_uint8) return static_cast<float>(r.relu ? std::max(v, 0.0) : v);
  const float q = round_even(static_cast<float>(v) / r.scale) + r.zp;  // |q| >= 2^22 clamps
  return std::min(std::max(r.lo, q), 255.f);  // NaN -> lo
}

// A span of sums as the reference computes them, stored as T.
template <typename T>
TORCIA_CLONES_WIDE void exact_span(const int32_t* acc, int64_t len, const double* mult,
                                   const double* bias, Requant r, T* out) {
  for (int64_t i = 0; i < len; ++i)
    out[i] = static_cast<T>(requantized(static_cast<double>(acc[i]) * mult[i] + bias[i], r));
}

// The uint8 outputs of a span in float arithmetic. With fm = fl(mult / scale) and fb =
// fl(bias / scale), y = fl(fl(fl(acc) fm) + fb) lies within 6.01 u (|p| + |fb|) of the
// reference's quotient fl(fl(acc mult + bias) / scale) (u = 2^-24; p = fl(fl(acc) fm); the
// reference's double roundings count 2^-53 each, its float ones u; subnormals add less
// than 2^-40 for scales of at least 2^-100), so both round to the same integer unless y
// lies within 16 u (|p| + |fb|) + 2^-40 of a half (slack = fl(16 u |fb| + 2^-40), a
// channel's; the margin's own roundings are covered by 16 u against 6.01 u). Sets q to y
// rounded and says whether y may round otherwise than the reference (values past 2^22,
// which clamp, may be flagged too: they are computed again, as the reference does).
TORCIA_INLINE bool near_half(int32_t acc, float fm, float fb, float slack, float& q) {
  const float p = static_cast<float>(acc) * fm;
  const float y = p + fb;
  q = round_even(y);
  return std::fabs(y - q) + (std::fabs(p) * 0x1p-20f + slack) >= 0.5f;
}

// The uint8 outputs of a span through near_half. Blocks of kBlock values run as loops of
// that constant count, which the clones fill for AVX-512 and AVX2 with the block's floats
// kept in registers and packed to bytes from there; the rest of the span as loops over it
// (v: its outputs as floats, a loop storing bytes alone would stay scalar on short spans).
// A block or rest with a value near a half (about one in 10^4 values of 100 or so) is
// looked at again by groups of 16 values, and the groups that hold one are computed as the
// reference does.
constexpr int64_t kGroup = 16, kBlock = 64;

TORCIA_INLINE int uint8_block(const int32_t* acc, const float* fm, const float* fb,
                              const float* slack, float lo, float zp, uint8_t* out) {
  float v[kBlock];
  int near = 0;
  for (int64_t i = 0; i < kBlock; ++i) {
    float q;
    near |= near_half(acc[i], fm[i], fb[i], slack[i], q);
    v[i] = std::min(255.f, std::max(lo, q + zp));
  }
  for (int64_t i = 0; i < kBlock; ++i) out[i] = static_cast<uint8_t>(v[i]);
  return near;
}

// the groups of [first, first + len) that hold a value near a half, as the reference
TORCIA_INLINE void recheck(const int32_t* acc, int64_t first, int64_t len, const float* fm,
                           const float* fb, const float* slack, const double* mult,
                           const double* bias, const Requant& r, uint8_t* out) {
  for (int64_t g = first; g < first + len; g += kGroup) {
    const int64_t n = std::min(kGroup, first + len - g);
    int close = 0;
    for (int64_t k = g; k < g + n; ++k) {
      float q;
      close |= near_half(acc[k], fm[k], fb[k], slack[k], q);
    }
    if (close) exact_span(acc + g, n, mult + g, bias + g, r, out + g);
  }
}

TORCIA_CLONES_WIDE void uint8_span(const int32_t* acc, int64_t len, const float* fm,
                                   const float* fb, const float* slack, const double* mult,
                                   const double* bias, Requant r, float* v, uint8_t* out) {
  int64_t first = 0;
  for (; first + kBlock <= len; first += kBlock)
    if (uint8_block(acc + first, fm + first, fb + first, slack + first, r.lo, r.zp,
                    out + first))
      recheck(acc, first, kBlock, fm, fb, slack, mult, bias, r, out);
  int near = 0;
  for (int64_t i = first; i < len; ++i) {
    float q;
    near |= near_half(acc[i], fm[i], fb[i], slack[i], q);
    v[i] = std::min(255.f, std::max(r.lo, q + r.zp));
  }
  for (int64_t i = first; i < len; ++i) out[i] = static_cast<uint8_t>(v[i]);
  if (near) recheck(acc, first, len - first, fm, fb, slack, mult, bias, r, out);
}

// The constants of a convolution's epilogue, per output channel repeated along a span of
// `per` rows (len values): the reference's multipliers and biases in double, and for
// uint8_span their quotients by the scale (fm, fb) and fb's share of the margin (slack),
// left empty where its bound may not hold (float outputs; a scale under 2^-100; quotients
// not finite or past 2^60, where a product or sum of int32 sums could overflow a float):
// the epilogue then computes as the reference throughout.
struct Epilogue {
  Requant r;
  int64_t o, per, len;
  std::vector<double> mult, bias;
  std::vector<float> fm, fb, slack;
  // what it was made from (bias_of empty without a bias), for the_epilogue
  double x_scale;
  std::vector<float> scale_of, bias_of;
};

Epilogue make_epilogue(int64_t o, double x_scale, const float* ws, const float* bias,
                       const Requant& r) {
  const int64_t per = std::max<int64_t>(1, 1024 / o);
  Epilogue e{r, o, per, per * o, {}, {}, {}, {}, {}, x_scale, {ws, ws + o}, {}};
  if (bias) e.bias_of.assign(bias, bias + o);
  std::vector<double> m(static_cast<size_t>(o)), b(static_cast<size_t>(o), 0.0);
  std::vector<float> fm(static_cast<size_t>(o)), fb(static_cast<size_t>(o)),
      slack(static_cast<size_t>(o));
  bool in_float = r.to_uint8 && r.scale >= 0x1p-100f && std::isfinite(r.scale);
  const double s = r.scale;
  for (int64_t j = 0; j < o; ++j) {
    m[j] = x_scale * static_cast<double>(ws[j]);
    if (bias) b[j] = static_cast<double>(bias[j]);  // + 0.0 changes no sum (but -0.0)
    const double qm = m[j] / s, qb = b[j] / s;
    in_float &= std::fabs(qm) < 0x1p60 && std::fabs(qb) < 0x1p60;  // NaN: false
    fm[j] = static_cast<float>(qm);
    fb[j] = static_cast<float>(qb);
    slack[j] = std::fabs(fb[j]) * 0x1p-20f + 0x1p-40f;
  }
  auto repeat = [&](const auto& v, auto& into) {
    into.reserve(static_cast<size_t>(e.len));
    for (int64_t k = 0; k < per; ++k) into.insert(into.end(), v.begin(), v.end());
  };
  repeat(m, e.mult);
  repeat(b, e.bias);
  if (in_float) {
    repeat(fm, e.fm);
    repeat(fb, e.fb);
    repeat(slack, e.slack);
  }
  return e;
}

// The epilogue of a convolution's call: kept, where it was made from the same constants
// (the scales and bias compared, as they may change in place between calls), else made
// and kept. A plan keeps its own: repeating the constants along a span costs a small
// convolution's time. Called with plans_mutex held.
std::shared_ptr<const Epilogue> the_epilogue(std::shared_ptr<const Epilogue>& kept, int64_t o,
                                             double x_scale, const float* ws,
                                             const float* bias, const Requant& r) {
  const size_t bytes = sizeof(float) * static_cast<size_t>(o);
  const Epilogue* e = kept.get();
  if (e && e->o == o && e->x_scale == x_scale && e->r.to_uint8 == r.to_uint8 &&
      e->r.relu == r.relu && e->r.scale == r.scale && e->r.zp == r.zp && e->r.lo == r.lo &&
      std::memcmp(e->scale_of.data(), ws, bytes) == 0 &&
      (bias ? !e->bias_of.empty() && std::memcmp(e->bias_of.data(), bias, bytes) == 0
            : e->bias_of.empty()))
    return kept;
  kept = std::make_shared<const Epilogue>(make_epilogue(o, x_scale, ws, bias, r));
  return kept;
}

// the epilogue of a convolution's sums (rows, O), a row per output position (channels-last),
// into out of the same shape, by spans of e.per rows
template <typename T>
void conv_epilogue(const Epilogue& e, const int32_t* sums, int64_t rows, T* out) {
  const int64_t o = e.o, per = e.per, spans = (rows + per - 1) / per;
  const bool in_float = std::is_same_v<T, uint8_t> && !e.fm.empty();
#pragma omp parallel if (rows * o > 65536)
  {
    std::unique_ptr<float[]> v(in_float ? new float[static_cast<size_t>(e.len)] : nullptr);
#pragma omp for schedule(static)
    for (int64_t span = 0; span < spans; ++span) {
      const int64_t first = span * per, count = std::min(per, rows - first);
      if constexpr (std::is_same_v<T, uint8_t>) {
        if (in_float) {
          uint8_span(sums + first * o, count * o, e.fm.data(), e.fb.data(), e.slack.data(),
                     e.mult.data(), e.bias.data(), e.r, v.get(), out + first * o);
          continue;
        }
      }
      exact_span(sums + first * o, count * o, e.mult.data(), e.bias.data(), e.r,
                 out + first * o);
    }
  }
}

// ---- oneDNN's convolution ----
//
// An int8 convolution on oneDNN's own primitive (u8 activations channels-last, s8 weights
// in the blocked layout it chooses, s32 sums channels-last, the input's zero point applied
// by the primitive, padding as the quantized 0.0): its kernels read each window in place,
// where columns and a GEMM copy every input kh*kw times. The filters are packed into the
// primitive's layout once per weight array and kept (with the primitive) in a small
// cache. Frozen weights (a read-only array over memory that read-only arrays own, as
// torcia-ao's quantized modules pass) are packed once while that owner lives: the cache
// holds a reference to it, so its memory stays its own; other weights are compared with
// the copy they were packed from on every call, so weights changed in place are packed
// again.

torcia_dnnl::Api dnnl{};
bool dnnl_conv_loaded = false;

void dnnl_check(int status, const char* what) {
  if (status != torcia_dnnl::kSuccess)
    throw std::runtime_error(std::string("torcia-cpu: oneDNN's ") + what +
                             " failed with status " + std::to_string(status));
}

// an oneDNN object, destroyed with it
class Owned {
 public:
  explicit Owned(int (*destroy)(torcia_dnnl::handle)) : destroy_(destroy) {}
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (h_) destroy_(h_);
  }
  torcia_dnnl::handle* out() { return &h_; }
  torcia_dnnl::handle get() const { return h_; }

 private:
  torcia_dnnl::handle h_ = nullptr;
  int (*destroy_)(torcia_dnnl::handle);
};

torcia_dnnl::handle dnnl_engine() {
  // one per process, never destroyed (the primitives cached below refer to it)
  static torcia_dnnl::handle engine = [] {
    torcia_dnnl::handle e = nullptr;
    dnnl_check(dnnl.engine_create(&e, torcia_dnnl::kCpu, 0), "engine_create");
    return e;
  }();
  return engine;
}

// a memory descriptor of dims with strides (row-major over perm: perm lists the dims from
// outermost to innermost)
void strided_md(Owned& md, int ndims, const int64_t* dims_in, const int* perm, int dtype) {
  torcia_dnnl::dims dims{}, strides{};
  int64_t step = 1;
  for (int i = ndims - 1; i >= 0; --i) {
    strides[perm[i]] = step;
    step *= dims_in[perm[i]];
  }
  for (int i = 0; i < ndims; ++i) dims[i] = dims_in[i];
  dnnl_check(dnnl.memory_desc_create_with_strides(md.out(), ndims, dims, dtype, strides),
             "memory_desc_create_with_strides");
}

// a memory object over data
void memory_over(Owned& mem, torcia_dnnl::const_handle md, const void* data) {
  dnnl_check(dnnl.memory_create(mem.out(), md, dnnl_engine(), const_cast<void*>(data)),
             "memory_create");
}

// a stream for one call's primitives (a stream is not to be shared between threads)
struct Stream : Owned {
  Stream() : Owned(dnnl.stream_destroy) {
    dnnl_check(dnnl.stream_create(out(), dnnl_engine(), torcia_dnnl::kStreamInOrder),
               "stream_create");
  }
  void run(torcia_dnnl::handle primitive, std::initializer_list<torcia_dnnl::exec_arg> args) {
    dnnl_check(dnnl.primitive_execute(primitive, get(), static_cast<int>(args.size()),
                                      args.begin()),
               "primitive_execute");
    dnnl_check(dnnl.stream_wait(get()), "stream_wait");
  }
};

// run an int8 primitive (a convolution or a matmul) on its source, packed weights,
// destination and scratchpad, with the source's zero point where zero_point is not null
void run_int8(Stream& stream, torcia_dnnl::handle primitive, torcia_dnnl::handle src,
              torcia_dnnl::handle weights, torcia_dnnl::handle dst, torcia_dnnl::handle scratch,
              torcia_dnnl::handle zero_point) {
  using namespace torcia_dnnl;
  if (zero_point)
    stream.run(primitive, {{kArgSrc, src},
                           {kArgWeights, weights},
                           {kArgDst, dst},
                           {kArgScratchpad, scratch},
                           {kArgZeroPoints | kArgSrc, zero_point}});
  else
    stream.run(primitive,
               {{kArgSrc, src}, {kArgWeights, weights}, {kArgDst, dst}, {kArgScratchpad, scratch}});
}

// the problem a plan serves: shapes, options and the weights' address
struct ConvKey {
  int64_t v[17];
  const int8_t* w;
  bool operator==(const ConvKey& k) const {
    return w == k.w && std::memcmp(v, k.v, sizeof v) == 0;
  }
};

// filters packed for a primitive, and the plain ones they were packed from (empty for
// frozen weights, which are not compared)
struct Packed {
  Owned memory{dnnl.memory_destroy};
  std::vector<int8_t> plain;
};

struct ConvPlan {
  ConvKey key;
  Owned src_md{dnnl.memory_desc_destroy}, nhwc_md{dnnl.memory_desc_destroy},
      dst_md{dnnl.memory_desc_destroy}, w_md{dnnl.memory_desc_destroy},
      zp_md{dnnl.memory_desc_destroy};
  Owned conv_pd{dnnl.primitive_desc_destroy}, conv{dnnl.primitive_destroy};
  Owned to_nhwc_pd{dnnl.primitive_desc_destroy}, to_nhwc{dnnl.primitive_destroy};
  size_t scratch = 0;
  std::shared_ptr<Packed> packed;
  std::shared_ptr<const Epilogue> epilogue;  // the last call's (the_epilogue)
  // the frozen weights' owner (a strong reference), or null; changed only with the GIL
  // held, in plan_for, and never released by a destructor (a plan may outlive the
  // interpreter, or be dropped by a call running without the GIL)
  PyObject* owner = nullptr;
  uint64_t used = 0;
};

std::mutex plans_mutex;
std::vector<std::shared_ptr<ConvPlan>> plans;
uint64_t plans_clock = 0;
constexpr size_t kMaxPlans = 256;

// The array that owns the memory of w where w and every array it views are read-only (a
// borrowed reference), else null: its elements cannot change while it lives, short of
// making it writeable again.
PyObject* frozen_owner(const py::array& w) {
  py::array a = w;
  while (!a.writeable()) {
    if (a.owndata()) return a.ptr();
    const py::object base = a.base();
    if (!py::isinstance<py::array>(base)) return nullptr;
    a = py::reinterpret_borrow<py::array>(base);
  }
  return nullptr;
}

// weights packed into the layout primitive pd reads (from plain ones described by w_md),
// with a copy of the plain ones to compare later calls' weights with where keep_plain
std::shared_ptr<Packed> pack_for(torcia_dnnl::const_handle pd, torcia_dnnl::const_handle w_md,
                                 const int8_t* w, size_t bytes, bool keep_plain = true) {
  auto packed = std::make_shared<Packed>();
  if (keep_plain) packed->plain.assign(w, w + bytes);
  torcia_dnnl::const_handle to = dnnl.primitive_desc_query_md(pd, torcia_dnnl::kQueryWeightsMd,
                                                              0);
  dnnl_check(dnnl.memory_create(packed->memory.out(), to, dnnl_engine(), torcia_dnnl::kAllocate),
             "memory_create");
  Owned reorder_pd(dnnl.primitive_desc_destroy), reorder(dnnl.primitive_destroy),
      from(dnnl.memory_destroy);
  dnnl_check(dnnl.reorder_primitive_desc_create(reorder_pd.out(), w_md, dnnl_engine(), to,
                                                dnnl_engine(), nullptr),
             "reorder_primitive_desc_create");
  dnnl_check(dnnl.primitive_create(reorder.out(), reorder_pd.get()), "primitive_create");
  memory_over(from, w_md, w);
  Stream().run(reorder.get(), {{torcia_dnnl::kArgSrc, from.get()},
                               {torcia_dnnl::kArgDst, packed->memory.get()}});
  return packed;
}

struct ConvShape {
  int64_t n, c, h, wd, o, kh, kw, groups, oh, ow;
  std::vector<int64_t> stride, padding, dilation;
};

std::shared_ptr<ConvPlan> make_plan(const ConvKey& key, const ConvShape& s, bool zero_point) {
  using namespace torcia_dnnl;
  auto plan = std::make_shared<ConvPlan>();
  plan->key = key;
  const int nchw[4] = {0, 1, 2, 3}, nhwc[4] = {0, 2, 3, 1};
  const int64_t src_dims[4] = {s.n, s.c, s.h, s.wd}, dst_dims[4] = {s.n, s.o, s.oh, s.ow};
  strided_md(plan->src_md, 4, src_dims, nchw, kU8);
  strided_md(plan->nhwc_md, 4, src_dims, nhwc, kU8);
  strided_md(plan->dst_md, 4, dst_dims, nhwc, kS32);
  const int plain5[5] = {0, 1, 2, 3, 4};
  if (s.groups == 1) {
    const int64_t w_dims[4] = {s.o, s.c, s.kh, s.kw};
    strided_md(plan->w_md, 4, w_dims, nchw, kS8);
  } else {
    const int64_t w_dims[5] = {s.groups, s.o / s.groups, s.c / s.groups, s.kh, s.kw};
    strided_md(plan->w_md, 5, w_dims, plain5, kS8);
  }
  const int64_t one = 1;
  strided_md(plan->zp_md, 1, &one, nchw, kS32);
  Owned any_w(dnnl.memory_desc_destroy);
  {
    dims w_dims{};
    int w_ndims = s.groups == 1 ? 4 : 5;
    if (s.groups == 1) {
      w_dims[0] = s.o, w_dims[1] = s.c, w_dims[2] = s.kh, w_dims[3] = s.kw;
    } else {
      w_dims[0] = s.groups, w_dims[1] = s.o / s.groups, w_dims[2] = s.c / s.groups,
      w_dims[3] = s.kh, w_dims[4] = s.kw;
    }
    dnnl_check(dnnl.memory_desc_create_with_tag(any_w.out(), w_ndims, w_dims, kS8, kFormatAny),
               "memory_desc_create_with_tag");
  }
  Owned attr(dnnl.primitive_attr_destroy);
  dnnl_check(dnnl.primitive_attr_create(attr.out()), "primitive_attr_create");
  dnnl_check(dnnl.primitive_attr_set_scratchpad_mode(attr.get(), kScratchpadUser),
             "primitive_attr_set_scratchpad_mode");
  if (zero_point)
    dnnl_check(dnnl.primitive_attr_set_zero_points_mask(attr.get(), kArgSrc, 0),
               "primitive_attr_set_zero_points_mask");
  // oneDNN counts dilation from 0 (no gap)
  dims strides{s.stride[0], s.stride[1]}, dilates{s.dilation[0] - 1, s.dilation[1] - 1},
      pad_l{s.padding[0], s.padding[2]}, pad_r{s.padding[1], s.padding[3]};
  dnnl_check(dnnl.convolution_forward_primitive_desc_create(
                 plan->conv_pd.out(), dnnl_engine(), kForwardInference, kConvolutionDirect,
                 plan->nhwc_md.get(), any_w.get(), nullptr, plan->dst_md.get(), strides,
                 dilates, pad_l, pad_r, attr.get()),
             "convolution_forward_primitive_desc_create");
  dnnl_check(dnnl.primitive_create(plan->conv.out(), plan->conv_pd.get()), "primitive_create");
  plan->scratch = dnnl.memory_desc_get_size(
      dnnl.primitive_desc_query_md(plan->conv_pd.get(), kQueryScratchpadMd, 0));
  dnnl_check(dnnl.reorder_primitive_desc_create(plan->to_nhwc_pd.out(), plan->src_md.get(),
                                                dnnl_engine(), plan->nhwc_md.get(),
                                                dnnl_engine(), nullptr),
             "reorder_primitive_desc_create");
  dnnl_check(dnnl.primitive_create(plan->to_nhwc.out(), plan->to_nhwc_pd.get()),
             "primitive_create");
  return plan;
}

// Keep a new plan in its cache, letting the least recently used one go (and its reference
// to a frozen owner) when the cache is full. Called with the GIL and plans_mutex held.
template <typename Plan>
void remember(std::vector<std::shared_ptr<Plan>>& cache, const std::shared_ptr<Plan>& plan) {
  if (cache.size() >= kMaxPlans) {
    auto oldest = std::min_element(cache.begin(), cache.end(),
                                   [](const auto& a, const auto& b) { return a->used < b->used; });
    Py_XDECREF((*oldest)->owner);
    (*oldest)->owner = nullptr;
    cache.erase(oldest);
  }
  cache.push_back(plan);
}

// Mark the plan used and its weights packed from w for primitive pd: packed again unless
// they are the same frozen owner's or equal to the copy they were packed from; the plan
// then holds a reference to owner (null for weights that may change). Called with the GIL
// and plans_mutex held.
template <typename Plan>
void refresh(Plan& plan, torcia_dnnl::const_handle pd, const int8_t* w, size_t w_bytes,
             PyObject* owner) {
  plan.used = ++plans_clock;
  const bool same = plan.packed && ((owner && plan.owner == owner) ||
                                    (!plan.packed->plain.empty() &&
                                     std::memcmp(plan.packed->plain.data(), w, w_bytes) == 0));
  if (!same) plan.packed = pack_for(pd, plan.w_md.get(), w, w_bytes, owner == nullptr);
  if (plan.owner != owner) {
    Py_XINCREF(owner);
    Py_XDECREF(plan.owner);
    plan.owner = owner;
  }
}

// The plan of a problem and the filters packed for it (packed again when the weights at
// that address may have changed since). Called with the GIL held: it changes the plans'
// references to frozen owners.
std::pair<std::shared_ptr<ConvPlan>, std::shared_ptr<Packed>> plan_for(
    const py::array& wq, const ConvShape& s, bool zero_point) {
  ConvKey key{{s.n, s.c, s.h, s.wd, s.o, s.kh, s.kw, s.groups, s.stride[0], s.stride[1],
               s.padding[0], s.padding[1], s.padding[2], s.padding[3], s.dilation[0],
               s.dilation[1], zero_point},
              static_cast<const int8_t*>(wq.data())};
  const size_t w_bytes = static_cast<size_t>(s.o * (s.c / s.groups) * s.kh * s.kw);
  PyObject* owner = frozen_owner(wq);
  std::lock_guard<std::mutex> lock(plans_mutex);
  std::shared_ptr<ConvPlan> plan;
  for (auto& p : plans)
    if (p->key == key) plan = p;
  if (!plan) {
    plan = make_plan(key, s, zero_point);
    remember(plans, plan);
  }
  refresh(*plan, plan->conv_pd.get(), key.w, w_bytes, owner);
  return {plan, plan->packed};
}

// acc int32 (N, OH * OW, O) channels-last = the convolution of x (N, C, H, W) uint8 (less
// its zero point; channels-last in memory where channels_last, else reordered to it) with
// the plan's packed filters, on oneDNN's primitive
void dnnl_conv(const ConvPlan& plan, const Packed& packed, const uint8_t* x, int x_zp,
               bool channels_last, const ConvShape& s, int32_t* acc) {
  using namespace torcia_dnnl;
  const void* nhwc = x;
  thread_local Stream stream;  // one per thread (not to be shared), kept between calls
  Owned src(dnnl.memory_destroy), src_nhwc(dnnl.memory_destroy), dst(dnnl.memory_destroy),
      zp_mem(dnnl.memory_destroy), scratch_mem(dnnl.memory_destroy);
  if (!channels_last) {
    nhwc = workspace(kImageSlot, static_cast<size_t>(s.n * s.c * s.h * s.wd));
    memory_over(src, plan.src_md.get(), x);
  }
  memory_over(src_nhwc, plan.nhwc_md.get(), nhwc);
  if (!channels_last)
    stream.run(plan.to_nhwc.get(), {{kArgSrc, src.get()}, {kArgDst, src_nhwc.get()}});
  void* scratch = workspace(kScratchSlot, plan.scratch);
  int32_t zp = x_zp;
  memory_over(dst, plan.dst_md.get(), acc);
  memory_over(zp_mem, plan.zp_md.get(), &zp);
  memory_over(scratch_mem,
              dnnl.primitive_desc_query_md(plan.conv_pd.get(), kQueryScratchpadMd, 0),
              scratch);
  run_int8(stream, plan.conv.get(), src_nhwc.get(), packed.memory.get(), dst.get(),
           scratch_mem.get(), x_zp != 0 ? zp_mem.get() : nullptr);
}

// ---- oneDNN's matmul ----
//
// The products of the linear layers (int8_linear) on oneDNN's matmul primitive, with the
// weights packed once into the layout its kernels read and kept, with the primitive, per
// problem (packed again when changed in place, as the convolutions' filters), the
// activations' zero point applied by the primitive, s32 sums. dnnl_gemm_u8s8s32 packs the
// weights on every call: for a recurrent layer's step (32 x 512 by 512 x 2048) that
// packing costs as much as the product.

struct MatmulPlan {
  int64_t m, k, n;
  bool zero_point;
  const int8_t* w;
  Owned src_md{dnnl.memory_desc_destroy}, w_md{dnnl.memory_desc_destroy},
      dst_md{dnnl.memory_desc_destroy}, zp_md{dnnl.memory_desc_destroy};
  Owned pd{dnnl.primitive_desc_destroy}, prim{dnnl.primitive_destroy};
  size_t scratch = 0;
  std::shared_ptr<Packed> packed;
  PyObject* owner = nullptr;  // as ConvPlan's
  uint64_t used = 0;
};

std::vector<std::shared_ptr<MatmulPlan>> matmul_plans;

std::shared_ptr<MatmulPlan> make_matmul_plan(int64_t m, int64_t k, int64_t n, bool zero_point,
                                             const int8_t* w) {
  using namespace torcia_dnnl;
  auto plan = std::make_shared<MatmulPlan>();
  plan->m = m, plan->k = k, plan->n = n, plan->zero_point = zero_point, plan->w = w;
  const int rows[2] = {0, 1}, cols[2] = {1, 0};
  const int64_t src_dims[2] = {m, k}, w_dims[2] = {k, n}, dst_dims[2] = {m, n}, one = 1;
  strided_md(plan->src_md, 2, src_dims, rows, kU8);
  strided_md(plan->w_md, 2, w_dims, cols, kS8);  // (N, K) row-major, read as (K, N)
  strided_md(plan->dst_md, 2, dst_dims, rows, kS32);
  strided_md(plan->zp_md, 1, &one, rows, kS32);
  Owned any_w(dnnl.memory_desc_destroy);
  dims any_dims{k, n};
  dnnl_check(dnnl.memory_desc_create_with_tag(any_w.out(), 2, any_dims, kS8, kFormatAny),
             "memory_desc_create_with_tag");
  Owned attr(dnnl.primitive_attr_destroy);
  dnnl_check(dnnl.primitive_attr_create(attr.out()), "primitive_attr_create");
  dnnl_check(dnnl.primitive_attr_set_scratchpad_mode(attr.get(), kScratchpadUser),
             "primitive_attr_set_scratchpad_mode");
  if (zero_point)
    dnnl_check(dnnl.primitive_attr_set_zero_points_mask(attr.get(), kArgSrc, 0),
               "primitive_attr_set_zero_points_mask");
  dnnl_check(dnnl.matmul_primitive_desc_create(plan->pd.out(), dnnl_engine(),
                                               plan->src_md.get(), any_w.get(), nullptr,
                                               plan->dst_md.get(), attr.get()),
             "matmul_primitive_desc_create");
  dnnl_check(dnnl.primitive_create(plan->prim.out(), plan->pd.get()), "primitive_create");
  plan->scratch = dnnl.memory_desc_get_size(
      dnnl.primitive_desc_query_md(plan->pd.get(), kQueryScratchpadMd, 0));
  return plan;
}

// The matmul of x (m, K) uint8 with wq (N, K) int8 and its packed weights (packed again
// when the weights at that address may have changed since, as plan_for's filters), or
// nulls where oneDNN's matmul is not loaded or refuses the problem (the GEMM runs it).
// Called with the GIL held.
std::pair<std::shared_ptr<MatmulPlan>, std::shared_ptr<Packed>> matmul_plan_for(
    const py::array& wq, int64_t m, bool zero_point) {
  if (!dnnl_conv_loaded || !dnnl.matmul_primitive_desc_create) return {};
  const int64_t n = wq.shape(0), k = wq.shape(1);
  const auto* w = static_cast<const int8_t*>(wq.data());
  const size_t w_bytes = static_cast<size_t>(n * k);
  PyObject* owner = frozen_owner(wq);
  std::lock_guard<std::mutex> lock(plans_mutex);
  std::shared_ptr<MatmulPlan> plan;
  for (auto& p : matmul_plans)
    if (p->m == m && p->k == k && p->n == n && p->zero_point == zero_point && p->w == w)
      plan = p;
  if (!plan) {
    try {
      plan = make_matmul_plan(m, k, n, zero_point, w);
    } catch (const std::runtime_error&) {
      return {};
    }
    remember(matmul_plans, plan);
  }
  refresh(*plan, plan->pd.get(), w, w_bytes, owner);
  return {plan, plan->packed};
}

// acc (m, N) int32 = (x (m, K) uint8 - x_zp) w^T on the plan's matmul and packed weights
void dnnl_product(const MatmulPlan& plan, const Packed& packed, const uint8_t* x, int x_zp,
                  int32_t* acc) {
  using namespace torcia_dnnl;
  void* scratch = workspace(kScratchSlot, plan.scratch);
  int32_t zp = x_zp;
  Owned src(dnnl.memory_destroy), dst(dnnl.memory_destroy), zp_mem(dnnl.memory_destroy),
      scratch_mem(dnnl.memory_destroy);
  memory_over(src, plan.src_md.get(), x);
  memory_over(dst, plan.dst_md.get(), acc);
  memory_over(zp_mem, plan.zp_md.get(), &zp);
  memory_over(scratch_mem, dnnl.primitive_desc_query_md(plan.pd.get(), kQueryScratchpadMd, 0),
              scratch);
  thread_local Stream stream;  // one per thread (not to be shared), kept between calls
  run_int8(stream, plan.prim.get(), src.get(), packed.memory.get(), dst.get(),
           scratch_mem.get(), plan.zero_point ? zp_mem.get() : nullptr);
}

// the convolution's sums by columns and GEMM (without oneDNN: MKL's integer GEMM): the
// input's windows as columns (padded with its zero point, the quantized 0.0), a chunk of
// samples at a time, one int8 GEMM against the filters; acc (N, OH * OW, O)
void gemm_conv(const uint8_t* x, int x_zp, const int8_t* w, int64_t n, int64_t c, int64_t h,
               int64_t wd, int64_t o, int64_t kh, int64_t kw, int64_t oh, int64_t ow,
               const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
               const std::vector<int64_t>& dilation, int32_t* acc) {
  const int64_t p = oh * ow, ckk = c * kh * kw;
  // a 1x1 window of stride 1 without padding reads the image itself as the columns
  const bool direct = kh == 1 && kw == 1 && stride[0] == 1 && stride[1] == 1 &&
                      padding[0] == 0 && padding[1] == 0 && padding[2] == 0 && padding[3] == 0;
  // samples of few positions share one product (a GEMM of 4 rows wastes the kernel's
  // tiles): chunks of at least 256 positions
  const int64_t per = direct ? 1 : std::min<int64_t>(n, std::max<int64_t>(1, 256 / p));
  const int64_t chunks = (n + per - 1) / per;
#pragma omp parallel if (chunks > 1)
  {
    // uninitialised, as int8_linear's: the columns and the GEMM write every element
    std::unique_ptr<uint8_t[]> cols(direct ? nullptr
                                           : new uint8_t[static_cast<size_t>(per * p * ckk)]);
#pragma omp for schedule(static)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const int64_t first = chunk * per, count = std::min(per, n - first);
      const uint8_t* a = x + first * c * h * wd;
      if (!direct) {
        for (int64_t i = 0; i < count; ++i)
          columns(x + (first + i) * c * h * wd, c, h, wd, kh, kw, stride, padding, dilation,
                  oh, ow, static_cast<uint8_t>(x_zp), cols.get() + i * p, count * p);
        a = cols.get();
      }
      // C (positions, out channels): the (ckk, positions) columns read transposed
      gemm_u8s8(count * p, o, ckk, a, count * p, x_zp, w, ckk, acc + first * p * o, o, true);
    }
  }
}

// Whether a (N, C, H, W) array is channels-last in memory ((N, H, W, C) without gaps, as
// qconv2d returns its outputs) rather than C-contiguous; any other layout raises. The
// strides of dimensions of size 1 are not looked at: NumPy leaves them arbitrary.
bool channels_last_image(const std::string& fn, const std::string& name, const py::array& a) {
  if (a.ndim() != 4)
    throw std::runtime_error(fn + ": " + name + " must have 4 dims, got " +
                             torcia_checks::shape_of(a));
  const py::ssize_t item = a.itemsize(), c = a.shape(1), h = a.shape(2), w = a.shape(3);
  const py::ssize_t dense[4] = {h * w * c * item, item, w * c * item, c * item};
  bool last = true;
  for (int d = 0; d < 4; ++d)
    if (a.shape(d) > 1 && a.strides(d) != dense[d]) last = false;
  if (last) return true;
  if (a.flags() & py::array::c_style) return false;
  throw std::runtime_error(fn + ": " + name + " must be C-contiguous or channels-last");
}

// a (N, H, W, C) array viewed as (N, C, H, W): how the images come out of the kernels
// here, channels-last as from PyTorch's quantized convolutions
py::array as_nchw(const py::array& nhwc) { return nhwc.attr("transpose")(0, 3, 1, 2); }

// qconv2d(xq (N, C, H, W) uint8 (C-contiguous or channels-last), x_zero_point, wq (O, C /
// groups, kh, kw) int8, x_scale, w_scale (O,), bias (O,) or None, stride, padding (top,
// bottom, left, right), dilation, groups, out_scale, out_zero_point, relu) -> (N, O, OH,
// OW) channels-last: uint8 (float32 when out_scale <= 0). The sums on oneDNN's convolution
// where it is loaded, else by columns and GEMM (groups 1 only); the epilogue as torcia-ao's
// reference, to the same values.
py::array qconv2d(const py::array& xq, int x_zp, const py::array& wq, double x_scale,
                  const py::array& w_scale, const py::object& bias, std::vector<int64_t> stride,
                  std::vector<int64_t> padding, std::vector<int64_t> dilation, int64_t groups,
                  double out_scale, int out_zp, bool relu) {
  const std::string fn = "qconv2d";
  need_gemm(fn);
  if (!torcia_checks::is_dtype<uint8_t>(xq.dtype()))
    throw std::runtime_error(fn + ": xq has dtype " + std::string(py::str(xq.dtype())) +
                             ", expected uint8");
  const bool channels_last = channels_last_image(fn, "xq", xq);
  const uint8_t* x = static_cast<const uint8_t*>(xq.data());
  const int8_t* w = data_of<int8_t>(fn, "wq", wq, 4);
  if (stride.size() != 2 || dilation.size() != 2 || padding.size() != 4)
    throw std::runtime_error(fn + ": stride and dilation need 2 values, padding 4");
  const int64_t n = xq.shape(0), c = xq.shape(1), h = xq.shape(2), wd = xq.shape(3);
  const int64_t o = wq.shape(0), kh = wq.shape(2), kw = wq.shape(3);
  if (groups < 1 || c % groups != 0 || o % groups != 0 || wq.shape(1) * groups != c)
    throw std::runtime_error(fn + ": wq has shape " + torcia_checks::shape_of(wq) +
                             " for an input of " + std::to_string(c) + " channels in " +
                             std::to_string(groups) + " group(s)");
  if (groups != 1 && !dnnl_conv_loaded)
    throw std::runtime_error(fn + ": grouped convolutions need oneDNN (torcia-cpu's int8 "
                             "extra)");
  for (int64_t v : stride)
    if (v < 1) throw std::runtime_error(fn + ": stride must be positive");
  for (int64_t v : dilation)
    if (v < 1) throw std::runtime_error(fn + ": dilation must be positive");
  for (int64_t v : padding)
    if (v < 0) throw std::runtime_error(fn + ": padding must be non-negative");
  if (x_zp < 0 || x_zp > 255 || out_zp < 0 || out_zp > 255)
    throw std::runtime_error(fn + ": zero points must be in 0..255");
  const float* ws = data_of<float>(fn, "w_scale", w_scale, 1);
  check_len(fn, "w_scale", w_scale, o);
  const float* b = optional_bias(fn, bias, o);
  if (kh < 1 || kw < 1) throw std::runtime_error(fn + ": the kernel must not be empty");
  const int64_t oh = (h + padding[0] + padding[1] - dilation[0] * (kh - 1) - 1) / stride[0] + 1;
  const int64_t ow = (wd + padding[2] + padding[3] - dilation[1] * (kw - 1) - 1) / stride[1] + 1;
  if (oh <= 0 || ow <= 0 || h + padding[0] + padding[1] < dilation[0] * (kh - 1) + 1 ||
      wd + padding[2] + padding[3] < dilation[1] * (kw - 1) + 1)
    throw std::runtime_error(fn + ": the output would be empty");
  const int64_t p = oh * ow, ckk = c * kh * kw;
  if (p > kMax32 || ckk > kMax32 || o > kMax32 || n * p > kMax32)
    throw std::runtime_error(fn + ": a matrix dimension exceeds 32 bits");
  const bool to_float = out_scale <= 0;
  const std::vector<py::ssize_t> shape{n, oh, ow, o};
  py::array out = to_float ? py::array(py::dtype::of<float>(), shape)
                           : py::array(py::dtype::of<uint8_t>(), shape);
  if (n == 0 || o == 0) return as_nchw(out);
  // On oneDNN, a chunk of images at a time, so that the epilogue reads their sums back
  // from the core's own cache
  const bool on_dnnl = dnnl_conv_loaded && c > 0;
  const int64_t chunk =
      on_dnnl ? std::clamp<int64_t>(kChunkBytes / (static_cast<int64_t>(sizeof(int32_t)) * p * o),
                                    1, n)
              : n;
  auto geometry = [&](int64_t images) {
    return ConvShape{images, c, h, wd, o, kh, kw, groups, oh, ow, stride, padding, dilation};
  };
  std::pair<std::shared_ptr<ConvPlan>, std::shared_ptr<Packed>> full, rest;
  const Requant r{!to_float, relu, static_cast<float>(out_scale), static_cast<float>(out_zp),
                  relu ? static_cast<float>(out_zp) : 0.f};
  std::shared_ptr<const Epilogue> kept;
  if (on_dnnl) {
    full = plan_for(wq, geometry(chunk), x_zp != 0);
    if (n % chunk) rest = plan_for(wq, geometry(n % chunk), x_zp != 0);
    std::lock_guard<std::mutex> lock(plans_mutex);
    kept = the_epilogue(full.first->epilogue, o, x_scale, ws, b, r);
  }
  {
    py::gil_scoped_release release;
    if (!kept) kept = std::make_shared<const Epilogue>(make_epilogue(o, x_scale, ws, b, r));
    const Epilogue& epilogue = *kept;
    // the primitive or the GEMM writes every sum
    int32_t* acc =
        static_cast<int32_t*>(workspace(kSumsSlot, sizeof(int32_t) * chunk * p * o));
    if (!on_dnnl && c > 0 && channels_last) {  // the columns are read from images channels-first
      uint8_t* nchw = static_cast<uint8_t*>(workspace(kImageSlot, n * c * h * wd));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t q = 0; q < h * wd; ++q)
          for (int64_t ch = 0; ch < c; ++ch)
            nchw[(i * c + ch) * h * wd + q] = x[(i * h * wd + q) * c + ch];
      x = nchw;
    }
    for (int64_t first = 0; first < n; first += chunk) {
      const int64_t count = std::min(chunk, n - first);
      if (c == 0) {
        std::fill(acc, acc + count * p * o, 0);
      } else if (on_dnnl) {
        const auto& [plan, packed] = count == chunk ? full : rest;
        dnnl_conv(*plan, *packed, x + first * c * h * wd, x_zp, channels_last, geometry(count),
                  acc);
      } else {
        gemm_conv(x, x_zp, w, n, c, h, wd, o, kh, kw, oh, ow, stride, padding, dilation, acc);
      }
      if (to_float)
        conv_epilogue(epilogue, acc, count * p,
                      static_cast<float*>(out.mutable_data()) + first * p * o);
      else
        conv_epilogue(epilogue, acc, count * p,
                      static_cast<uint8_t*>(out.mutable_data()) + first * p * o);
    }
    trim_workspaces();
  }
  return as_nchw(out);
}

// The size of a max pooling's output along one dimension, as PyTorch computes it (the
// last window starts inside the input or its low padding, with ceil_mode too), after
// PyTorch's checks of the window.
int64_t pooled_size(const std::string& fn, int64_t size, int64_t k, int64_t stride, int64_t pad,
                    int64_t dilation, bool ceil_mode) {
  if (k < 1 || stride < 1 || dilation < 1 || pad < 0)
    throw std::runtime_error(fn + ": kernel_size, stride and dilation must be positive and "
                             "padding non-negative");
  const int64_t span = dilation * (k - 1) + 1;
  if (pad > span / 2)
    throw std::runtime_error(fn + ": pad should be at most half of effective kernel size, "
                             "but got pad=" + std::to_string(pad) + ", kernel_size=" +
                             std::to_string(k) + " and dilation=" + std::to_string(dilation));
  const int64_t room = size + 2 * pad - span + (ceil_mode ? stride - 1 : 0);
  int64_t out = (room >= 0 ? room / stride : -((-room + stride - 1) / stride)) + 1;
  if (ceil_mode && out > 0 && (out - 1) * stride >= size + pad) --out;
  if (out < 1)
    throw std::runtime_error(fn + ": the output would be empty (input size " +
                             std::to_string(size) + ", window " + std::to_string(span) +
                             ", padding " + std::to_string(pad) + ")");
  return out;
}

// The largest of each window, over the images' inner elements at once: b images of h x w
// elements of `inner` bytes each (the channels of a channels-last image, or 1), windows
// that skip what lies outside (0, the smallest uint8, in PyTorch's quantized max pooling).
// The inner elements run by blocks of kPoolBlock bytes kept in registers over the window
// (two vectors of 32 bytes, which the clones fill with AVX2's or SSE2's lanes: the same
// maxima kept in memory chain each tap's loads to the last tap's stores), the rest by a
// loop over memory.
typedef uint8_t Bytes32 __attribute__((vector_size(32)));
constexpr int64_t kPoolBlock = 2 * sizeof(Bytes32);

TORCIA_CLONES
void max_pool_images(const uint8_t* __restrict__ x, uint8_t* __restrict__ out, int64_t b,
                     int64_t h, int64_t w, int64_t inner, int64_t oh, int64_t ow,
                     const int64_t* g) {
  const int64_t kh = g[0], kw = g[1], sh = g[2], sw = g[3], ph = g[4], pw = g[5], dh = g[6],
                dw = g[7];
  const int64_t blocked = inner / kPoolBlock * kPoolBlock;
  // the taps [first, last) of a window starting at `start` that fall inside `size`
  auto inside = [](int64_t start, int64_t k, int64_t d, int64_t size, int64_t& first,
                   int64_t& last) {
    first = start >= 0 ? 0 : (-start + d - 1) / d;
    last = start >= size ? 0 : std::min(k, (size - start + d - 1) / d);
  };
#pragma omp parallel for schedule(static) if (b * oh * ow * inner * kh * kw > (1 << 18))
  for (int64_t row = 0; row < b * oh; ++row) {
    const int64_t img = row / oh, i = row % oh;
    const uint8_t* plane = x + img * h * w * inner;
    int64_t ki0, ki1;
    inside(i * sh - ph, kh, dh, h, ki0, ki1);
    for (int64_t j = 0; j < ow; ++j) {
      uint8_t* best = out + (row * ow + j) * inner;
      int64_t kj0, kj1;
      inside(j * sw - pw, kw, dw, w, kj0, kj1);
      // where the window's first tap would lie in the image (maybe outside: an offset, not
      // a pointer), taps ki, kj at ki * dh rows and kj * dw columns from it
      const int64_t corner = ((i * sh - ph) * w + j * sw - pw) * inner;
      for (int64_t e0 = 0; e0 < blocked; e0 += kPoolBlock) {
        Bytes32 m0 = {}, m1 = {};
        for (int64_t ki = ki0; ki < ki1; ++ki)
          for (int64_t kj = kj0; kj < kj1; ++kj) {
            const uint8_t* v = plane + (corner + (ki * dh * w + kj * dw) * inner + e0);
            Bytes32 a, c;
            std::memcpy(&a, v, sizeof a);
            std::memcpy(&c, v + sizeof a, sizeof c);
            m0 = m0 > a ? m0 : a;
            m1 = m1 > c ? m1 : c;
          }
        std::memcpy(best + e0, &m0, sizeof m0);
        std::memcpy(best + e0 + sizeof m0, &m1, sizeof m1);
      }
      if (blocked == inner) continue;
      std::memset(best + blocked, 0, inner - blocked);
      for (int64_t ki = ki0; ki < ki1; ++ki)
        for (int64_t kj = kj0; kj < kj1; ++kj) {
          const uint8_t* v = plane + (corner + (ki * dh * w + kj * dw) * inner);
          for (int64_t e = blocked; e < inner; ++e) best[e] = std::max(best[e], v[e]);
        }
    }
  }
}

// qmax_pool2d(x (N, C, H, W) uint8 (C-contiguous or channels-last), kernel_size, stride,
// padding, dilation (2 values each), ceil_mode) -> (N, C, OH, OW) uint8 in x's layout: the
// integers' max pooling (max commutes with the increasing map to the values they stand
// for, so the quantization parameters are the input's)
py::array qmax_pool2d(const py::array& x, std::vector<int64_t> kernel,
                      std::vector<int64_t> stride, std::vector<int64_t> padding,
                      std::vector<int64_t> dilation, bool ceil_mode) {
  const std::string fn = "qmax_pool2d";
  if (!torcia_checks::is_dtype<uint8_t>(x.dtype()))
    throw std::runtime_error(fn + ": x has dtype " + std::string(py::str(x.dtype())) +
                             ", expected uint8");
  const bool channels_last = channels_last_image(fn, "x", x);
  if (kernel.size() != 2 || stride.size() != 2 || padding.size() != 2 || dilation.size() != 2)
    throw std::runtime_error(fn + ": kernel_size, stride, padding and dilation need 2 values");
  const int64_t n = x.shape(0), c = x.shape(1), h = x.shape(2), w = x.shape(3);
  const int64_t oh = pooled_size(fn, h, kernel[0], stride[0], padding[0], dilation[0], ceil_mode);
  const int64_t ow = pooled_size(fn, w, kernel[1], stride[1], padding[1], dilation[1], ceil_mode);
  const std::vector<py::ssize_t> shape = channels_last ? std::vector<py::ssize_t>{n, oh, ow, c}
                                                       : std::vector<py::ssize_t>{n, c, oh, ow};
  py::array out(py::dtype::of<uint8_t>(), shape);
  const int64_t geometry[] = {kernel[0], kernel[1], stride[0], stride[1],
                              padding[0], padding[1], dilation[0], dilation[1]};
  {
    py::gil_scoped_release release;
    if (n * c > 0)
      max_pool_images(static_cast<const uint8_t*>(x.data()),
                      static_cast<uint8_t*>(out.mutable_data()), channels_last ? n : n * c, h,
                      w, channels_last ? c : 1, oh, ow, geometry);
  }
  return channels_last ? as_nchw(out) : out;
}

// Whether a's elements fill its memory without gaps in some order of its dimensions (C
// order, channels-last...), every stride positive: an elementwise kernel then runs over the
// memory as it lies. The strides of dimensions of size 1 are not looked at.
bool dense(const py::array& a) {
  std::vector<std::pair<py::ssize_t, py::ssize_t>> dims;  // (stride, size), outermost first
  for (py::ssize_t d = 0; d < a.ndim(); ++d)
    if (a.shape(d) > 1) dims.emplace_back(a.strides(d), a.shape(d));
  std::sort(dims.begin(), dims.end(), std::greater<>());
  py::ssize_t step = a.itemsize();
  for (auto d = dims.rbegin(); d != dims.rend(); ++d) {
    if (d->first != step) return false;
    step *= d->second;
  }
  return true;
}

// n sums of a and b requantized (the clones fill AVX-512's and AVX2's lanes)
TORCIA_CLONES_WIDE
void qadd_span(const uint8_t* a, const uint8_t* b, int64_t n, int az, int bz, float fa,
               float fb, float inv, float oz, float lo, uint8_t* o) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(a[i] - az) * fa + static_cast<float>(b[i] - bz) * fb;
    o[i] = static_cast<uint8_t>(std::min(std::max(lo, round_even(v * inv) + oz), 255.f));
  }
}

// qadd(a uint8, b uint8 of a's shape and layout, a_scale, a_zp, b_scale, b_zp, out_scale,
// out_zp, relu) -> uint8 laid out as a: the sum requantized. The operands may be laid out
// in any order of their dimensions without gaps (channels-last images), both alike.
py::array qadd(const py::array& a, const py::array& b, double as, int az, double bs, int bz,
               double os, int oz, bool relu) {
  const std::string fn = "qadd";
  for (const auto& [name, arr] : {std::pair<const char*, const py::array&>{"a", a}, {"b", b}})
    if (!torcia_checks::is_dtype<uint8_t>(arr.dtype()))
      throw std::runtime_error(fn + ": " + name + " has dtype " +
                               std::string(py::str(arr.dtype())) + ", expected uint8");
  bool alike = a.ndim() == b.ndim();
  for (int64_t d = 0; alike && d < a.ndim(); ++d)
    alike = a.shape(d) == b.shape(d) && (a.shape(d) <= 1 || a.strides(d) == b.strides(d));
  if (!alike)
    throw std::runtime_error(fn + ": a has shape " + torcia_checks::shape_of(a) + ", b has " +
                             torcia_checks::shape_of(b) + " (or another layout)");
  if (!dense(a))
    throw std::runtime_error(fn + ": a and b must fill their memory without gaps "
                             "(C-contiguous or channels-last)");
  std::vector<py::ssize_t> shape(a.shape(), a.shape() + a.ndim());
  std::vector<py::ssize_t> strides(a.strides(), a.strides() + a.ndim());
  const int64_t n = a.size();
  if (n == 0) return py::array(py::dtype::of<uint8_t>(), shape);
  py::array out(py::dtype::of<uint8_t>(), shape, strides);
  const uint8_t* ap = static_cast<const uint8_t*>(a.data());
  const uint8_t* bp = static_cast<const uint8_t*>(b.data());
  uint8_t* o = static_cast<uint8_t*>(out.mutable_data());
  const float fa = static_cast<float>(as), fb = static_cast<float>(bs);
  const float inv = static_cast<float>(1.0 / os);
  const float lo = relu ? static_cast<float>(oz) : 0.f;
  constexpr int64_t kBlock = 65536;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  {
    py::gil_scoped_release release;
#pragma omp parallel for schedule(static) if (n > 262144)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t first = blk * kBlock, len = std::min(kBlock, n - first);
      qadd_span(ap + first, bp + first, len, az, bz, fa, fb, inv, static_cast<float>(oz), lo,
                o + first);
    }
  }
  return out;
}

// the float product of x (M, K) with weights (N, K) dequantized a block of rows at a time
// by unpack(first_row, rows, buffer): out = x w^T + bias
template <typename Unpack>
py::array blocked_linear(const std::string& fn, const py::array& x, int64_t n,
                         const float* bias, Unpack unpack) {
  const float* xp = data_of<float>(fn, "x", x, 2);
  const int64_t m = x.shape(0), k = x.shape(1);
  if (m > kMax32 || n > kMax32 || k > kMax32)
    throw std::runtime_error(fn + ": a matrix dimension exceeds 32 bits");
  py::array out(py::dtype::of<float>(), std::vector<py::ssize_t>{m, n});
  float* op = static_cast<float*>(out.mutable_data());
  if (m == 0 || n == 0) return out;
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  {
    py::gil_scoped_release release;
#pragma omp parallel if (blocks > 1 && m * n * k > (int64_t(1) << 20))
  {
    std::vector<float> buf(static_cast<size_t>(kBlock * k));
#pragma omp for schedule(static)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t first = blk * kBlock, rows = std::min(kBlock, n - first);
      unpack(first, rows, buf.data());
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < rows; ++j) op[i * n + first + j] = bias ? bias[first + j] : 0.f;
      gemm<float>(CblasNoTrans, CblasTrans, m, rows, k, xp, k, buf.data(), k, 1.0f,
                  op + first, n);
    }
  }
  }
  return out;
}

// linear_w8(x (M, K) float32, wq (N, K) int8, scale (N,), bias (N,) or None) -> (M, N)
py::array linear_w8(const py::array& x, const py::array& wq, const py::array& scale,
                    const py::object& bias) {
  const std::string fn = "linear_w8";
  const int8_t* w = data_of<int8_t>(fn, "wq", wq, 2);
  const int64_t n = wq.shape(0), k = wq.shape(1);
  if (x.ndim() != 2 || x.shape(1) != k)
    throw std::runtime_error(fn + ": x has shape " + torcia_checks::shape_of(x) + ", wq has " +
                             torcia_checks::shape_of(wq));
  const float* s = data_of<float>(fn, "scale", scale, 1);
  check_len(fn, "scale", scale, n);
  const float* b = optional_bias(fn, bias, n);
  return blocked_linear(fn, x, n, b, [&](int64_t first, int64_t rows, float* buf) {
    for (int64_t r = 0; r < rows; ++r) {
      const int8_t* src = w + (first + r) * k;
      const float sc = s[first + r];
      for (int64_t j = 0; j < k; ++j) buf[r * k + j] = static_cast<float>(src[j]) * sc;
    }
  });
}

// linear_w4(x (M, K) float32, packed (N, ceil(K / 2)) uint8 (low nibble first), scales
// (N, G), zeros (N, G) float32, group_size, bias) -> (M, N): w = (q - zero) * scale per
// group of group_size along K
py::array linear_w4(const py::array& x, const py::array& packed, const py::array& scales,
                    const py::array& zeros, int64_t group, const py::object& bias) {
  const std::string fn = "linear_w4";
  const uint8_t* pk = data_of<uint8_t>(fn, "packed", packed, 2);
  const int64_t n = packed.shape(0);
  if (x.ndim() != 2) throw std::runtime_error(fn + ": x must be 2-D");
  const int64_t k = x.shape(1);
  if (packed.shape(1) != (k + 1) / 2)
    throw std::runtime_error(fn + ": packed has shape " + torcia_checks::shape_of(packed) +
                             " for " + std::to_string(k) + " input features");
  if (group < 1) throw std::runtime_error(fn + ": group_size must be positive");
  const int64_t groups = (k + group - 1) / group;
  const float* sc = data_of<float>(fn, "scales", scales, 2);
  const float* zr = data_of<float>(fn, "zeros", zeros, 2);
  if (scales.shape(0) != n || scales.shape(1) != groups || zeros.shape(0) != n ||
      zeros.shape(1) != groups)
    throw std::runtime_error(fn + ": scales and zeros must be (" + std::to_string(n) + ", " +
                             std::to_string(groups) + ")");
  const float* b = optional_bias(fn, bias, n);
  const int64_t row_bytes = packed.shape(1);
  return blocked_linear(fn, x, n, b, [&](int64_t first, int64_t rows, float* buf) {
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* src = pk + (first + r) * row_bytes;
      const float* s = sc + (first + r) * groups;
      const float* z = zr + (first + r) * groups;
      for (int64_t j = 0; j < k; ++j) {
        const uint8_t byte = src[j >> 1];
        const float q = static_cast<float>((j & 1) ? (byte >> 4) : (byte & 0x0F));
        const int64_t g = j / group;
        buf[r * k + j] = (q - z[g]) * s[g];
      }
    }
  });
}

// oneDNN's convolution API (onednn.h), looked up by name in lib: a library that lacks any
// of it, or of another major version than the constants', keeps the convolutions on its
// GEMM
bool load_dnnl_api(void* lib, int major) {
  if (major != 3) return false;
  torcia_dnnl::Api api{};
  const std::pair<const char*, void**> symbols[] = {
      {"dnnl_engine_create", reinterpret_cast<void**>(&api.engine_create)},
      {"dnnl_stream_create", reinterpret_cast<void**>(&api.stream_create)},
      {"dnnl_stream_wait", reinterpret_cast<void**>(&api.stream_wait)},
      {"dnnl_stream_destroy", reinterpret_cast<void**>(&api.stream_destroy)},
      {"dnnl_memory_desc_create_with_strides",
       reinterpret_cast<void**>(&api.memory_desc_create_with_strides)},
      {"dnnl_memory_desc_create_with_tag",
       reinterpret_cast<void**>(&api.memory_desc_create_with_tag)},
      {"dnnl_memory_desc_destroy", reinterpret_cast<void**>(&api.memory_desc_destroy)},
      {"dnnl_memory_desc_get_size", reinterpret_cast<void**>(&api.memory_desc_get_size)},
      {"dnnl_memory_create", reinterpret_cast<void**>(&api.memory_create)},
      {"dnnl_memory_destroy", reinterpret_cast<void**>(&api.memory_destroy)},
      {"dnnl_primitive_attr_create", reinterpret_cast<void**>(&api.primitive_attr_create)},
      {"dnnl_primitive_attr_destroy", reinterpret_cast<void**>(&api.primitive_attr_destroy)},
      {"dnnl_primitive_attr_set_scratchpad_mode",
       reinterpret_cast<void**>(&api.primitive_attr_set_scratchpad_mode)},
      {"dnnl_primitive_attr_set_zero_points_mask",
       reinterpret_cast<void**>(&api.primitive_attr_set_zero_points_mask)},
      {"dnnl_convolution_forward_primitive_desc_create",
       reinterpret_cast<void**>(&api.convolution_forward_primitive_desc_create)},
      {"dnnl_reorder_primitive_desc_create",
       reinterpret_cast<void**>(&api.reorder_primitive_desc_create)},
      {"dnnl_primitive_desc_query_md", reinterpret_cast<void**>(&api.primitive_desc_query_md)},
      {"dnnl_primitive_desc_destroy", reinterpret_cast<void**>(&api.primitive_desc_destroy)},
      {"dnnl_primitive_create", reinterpret_cast<void**>(&api.primitive_create)},
      {"dnnl_primitive_execute", reinterpret_cast<void**>(&api.primitive_execute)},
      {"dnnl_primitive_destroy", reinterpret_cast<void**>(&api.primitive_destroy)},
  };
  for (const auto& [name, slot] : symbols)
    if (!(*slot = dlsym(lib, name))) return false;
  api.matmul_primitive_desc_create = reinterpret_cast<decltype(api.matmul_primitive_desc_create)>(
      dlsym(lib, "dnnl_matmul_primitive_desc_create"));
  dnnl = api;
  return true;
}

// Load oneDNN's integer GEMM and convolution from its library (libdnnl.so.3 of the
// onednn-cpu-gomp wheel, GNU OpenMP threading: the OpenMP this extension runs on) at path;
// returns its version.
// The symbol is looked up before anything changes, so a wrong library changes nothing.
std::string use_onednn(const std::string& path) {
  if (torcia_blas::dnnl_gemm_u8s8s32) return int8_library;  // loaded once per process
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw std::runtime_error("use_onednn: cannot load " + path + ": " + dlerror());
  void* gemm = dlsym(lib, "dnnl_gemm_u8s8s32");
  void* version = dlsym(lib, "dnnl_version");
  if (!gemm || !version)
    throw std::runtime_error("use_onednn: " + path + " has no dnnl_gemm_u8s8s32 (not oneDNN)");
  struct Version {
    int major, minor, patch;
    const char* hash;
  };
  const Version* v = reinterpret_cast<const Version* (*)()>(version)();
  dnnl_conv_loaded = load_dnnl_api(lib, v->major);
  torcia_blas::dnnl_gemm_u8s8s32 = reinterpret_cast<torcia_blas::dnnl_gemm_u8s8s32_t>(gemm);
  int8_library = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                 std::to_string(v->patch);
  return int8_library;
}

}  // namespace

void define_quant(py::module_& m) {
  m.def("has_int8_gemm", &has_int8_gemm);
  m.def("has_int8_conv", [] { return dnnl_conv_loaded; });
  m.def("use_onednn", &use_onednn, py::arg("path"));
  m.def("int8_library", [] {
    if (torcia_blas::dnnl_gemm_u8s8s32) return int8_library;
    return std::string(torcia_blas::table.gemm_s8u8s32 ? "MKL" : "none");
  });
  m.def("int8_linear", &int8_linear, py::arg("xq"), py::arg("a_offset"), py::arg("wq"),
        py::arg("row_scale"), py::arg("col_scale"), py::arg("bias"), py::arg("out_scale"),
        py::arg("out_zero_point"), py::arg("relu"));
  m.def("quantize_rows", &quantize_rows, py::arg("x"), py::arg("per_row"),
        py::arg("reduce_range"));
  m.def("quantize_tensor", &quantize_tensor, py::arg("x"), py::arg("scale"),
        py::arg("zero_point"), py::arg("qmin"), py::arg("qmax"), py::arg("is_signed"));
  m.def("dequantize_tensor", &dequantize_tensor, py::arg("q"), py::arg("scale"),
        py::arg("zero_point"));
  m.def("qconv2d", &qconv2d, py::arg("xq"), py::arg("x_zero_point"), py::arg("wq"),
        py::arg("x_scale"), py::arg("w_scale"), py::arg("bias"), py::arg("stride"),
        py::arg("padding"), py::arg("dilation"), py::arg("groups"), py::arg("out_scale"),
        py::arg("out_zero_point"), py::arg("relu"));
  m.def("qmax_pool2d", &qmax_pool2d, py::arg("x"), py::arg("kernel_size"), py::arg("stride"),
        py::arg("padding"), py::arg("dilation"), py::arg("ceil_mode"));
  m.def("qadd", &qadd, py::arg("a"), py::arg("b"), py::arg("a_scale"), py::arg("a_zero_point"),
        py::arg("b_scale"), py::arg("b_zero_point"), py::arg("out_scale"),
        py::arg("out_zero_point"), py::arg("relu"));
  m.def("linear_w8", &linear_w8, py::arg("x"), py::arg("wq"), py::arg("scale"), py::arg("bias"));
  m.def("linear_w4", &linear_w4, py::arg("x"), py::arg("packed"), py::arg("scales"),
        py::arg("zeros"), py::arg("group_size"), py::arg("bias"));
}
