// LayerNorm and RMSNorm over the rows of a (R, D) array and BatchNorm over the channels of
// an (N, C, *) one, forward and backward, float32 and float64.
//
// NumPy's version makes about ten passes over the activations (mean, centring, variance,
// scaling, their gradients); here each row is read twice forward and backward,
// with sums in the input's dtype over short chunks, added in double (chunk_sum),
// rows split among OpenMP threads. LayerNorm's backward reads each row twice (its
// statistics and sums in one pass, then the gradient).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "checks.h"
#include "team.h"
#include "vecmath.h"

namespace py = pybind11;
using std::int64_t;

namespace {

// Rows are split among threads from this many elements.
constexpr int64_t kParallelElements = 1 << 15;

// Elements summed in T before their sums join double totals: vector lanes of T are as
// fast as the loads, where converting each element to double took most of a norm's time
// (LayerNorm's backward at 1024 rows of 128: 77 -> 64 us, PyTorch's 61; its forward at
// 512 rows of 768: 158 -> 126 us, PyTorch's 112). A float32 lane sums at most
// kSumChunk / 4 terms (SSE's four lanes; 16 in chunk_sum), so a sum stays within a few
// float32 roundings of float64's (measured on LayerNorm's backward: at most 1.1e-6 of the
// largest gradient, 1.8e-7 with double sums; PyTorch's float32 layer_norm 1.4e-7 to 4e-3,
// worst far from zero; its forward at a mean of 1e4: 0.08 from float64's, PyTorch's 0.12).
constexpr int64_t kSumChunk = 256;

// Independent partial sums of a chunk: two AVX2 vectors of float, two chains of additions
// where an OpenMP simd reduction makes one, which waits on each addition's latency (more
// lanes than two vectors spilled to the stack and ran slower)
constexpr int kLanes = 16;

// sum over k < d of f(k), f's terms in T, as above
template <typename T, typename F>
TORCIA_INLINE double chunk_sum(int64_t d, F f) {
  double total = 0;
  for (int64_t k0 = 0; k0 < d; k0 += kSumChunk) {
    const int64_t k1 = std::min(d, k0 + kSumChunk);
    T lanes[kLanes] = {};
    int64_t k = k0;
    for (; k + kLanes <= k1; k += kLanes)
      for (int u = 0; u < kLanes; ++u) lanes[u] += f(k + u);
    T t = 0;
    for (; k < k1; ++k) t += f(k);
    for (int u = 0; u < kLanes; ++u) t += lanes[u];
    total += t;
  }
  return total;
}

// mean and 1/sqrt(var + eps) of one row (two passes: the centred sum of squares does not
// lose digits the way E[x^2] - E[x]^2 does)
template <typename T>
TORCIA_INLINE void row_stats(const T* __restrict__ x, int64_t d, double eps, double* mean,
                             double* rstd) {
  const double m = chunk_sum<T>(d, [&](int64_t k) { return x[k]; }) / d;
  const T mt = T(m);
  const double v = chunk_sum<T>(d, [&](int64_t k) {
    const T c = x[k] - mt;
    return c * c;
  });
  *mean = m;
  *rstd = 1.0 / std::sqrt(v / d + eps);
}

template <typename T>
TORCIA_CLONES void forward_row(const T* __restrict__ x, const T* __restrict__ w,
                               const T* __restrict__ b, T* __restrict__ y, int64_t d,
                               double eps) {
  double mean, rstd;
  row_stats(x, d, eps, &mean, &rstd);
  const T m = T(mean), r = T(rstd);
  for (int64_t k = 0; k < d; ++k) {
    T v = (x[k] - m) * r;
    if (w) v *= w[k];
    if (b) v += b[k];
    y[k] = v;
  }
}

// Rows whose parameter-gradient terms are summed in x's dtype before they join the
// double totals: short runs keep float32's rounding small, and the inner loop in floats.
constexpr int64_t kBlockRows = 16;

// Per-row constants of the gradient: gx = (gxhat - a - xhat c) r with xhat = ((x - x0) - sh) r
template <typename T>
struct RowGrad {
  T a, c, r, x0, sh;
};

// sums over a row of x - s, (x - s)^2, gxhat and gxhat (x - s), in T over chunks of
// kSumChunk elements (as chunk_sum), their results added in double; x - s is exact near s
struct RowSums {
  double t1, t2, ta, tc;
};

template <bool HasWeight, typename T>
TORCIA_INLINE RowSums row_sums(const T* __restrict__ g, const T* __restrict__ x,
                               const T* __restrict__ w, int64_t d, T s) {
  RowSums out = {0, 0, 0, 0};
  for (int64_t k0 = 0; k0 < d; k0 += kSumChunk) {
    const int64_t k1 = std::min(d, k0 + kSumChunk);
    T t1 = 0, t2 = 0, ta = 0, tc = 0;
#pragma omp simd reduction(+ : t1, t2, ta, tc)
    for (int64_t k = k0; k < k1; ++k) {
      const T xs = x[k] - s;
      const T gh = HasWeight ? g[k] * w[k] : g[k];
      t1 += xs;
      t2 += xs * xs;
      ta += gh;
      tc += gh * xs;
    }
    out.t1 += t1;
    out.t2 += t2;
    out.ta += ta;
    out.tc += tc;
  }
  return out;
}

// A row's sums are taken again about its mean when (mean - s)^2 exceeds this many times
// its variance (see row_sums below).
constexpr double kShiftRatio = 8.0;

// The row's sums about s = x[0], or about its mean where x[0] lies far from it. The
// variance is t2/d - (mean - s)^2 and the sum of gxhat (x - mean) is tc - (mean - s) ta:
// the rounding of t2 in T, up to about m units of its last place for the m terms a chain
// adds (32 in AVX2's lanes, 256 where the loop is not vectorised), reaches the variance
// multiplied by 1 + (mean - s)^2 / var, and tc's reaches its result multiplied by about
// |mean - s| / std. Rows of 300 normal values after a first element of 300 multiply it by
// 300: up to 2.5e-4 of the largest weight gradient off float64's, whichever side of the
// test's 1e-4 the summation order falls (the sanitizers' build, not vectorised, failed
// it). About the mean the factor is about 1, and at most 9 below kShiftRatio; a row whose
// first element lies more than sqrt(kShiftRatio) = 2.8 standard deviations out (about 1
// in 200 rows of normal values) is read once more.
template <typename T>
TORCIA_INLINE RowSums row_sums(const T* __restrict__ g, const T* __restrict__ x,
                               const T* __restrict__ w, int64_t d, T* s) {
  auto about = [&](T c) {
    return w ? row_sums<true>(g, x, w, d, c) : row_sums<false>(g, x, w, d, c);
  };
  *s = x[0];
  const RowSums first = about(*s);
  const double shift = first.t1 / double(d), square = first.t2 / double(d);
  // (a row with a NaN or an infinity keeps its first sums: NaN either way)
  if (!(shift * shift > kShiftRatio * (square - shift * shift))) return first;
  *s = T(double(*s) + shift);
  return about(*s);
}

template <typename T>
TORCIA_INLINE RowGrad<T> row_grad(RowSums sums, T x0, int64_t d, double eps) {
  auto [t1, t2, ta, tc] = sums;
  // products with 1/d, not four divisions a row (their latency showed in rows of 128)
  const double inv_d = 1.0 / double(d);
  const double shift = t1 * inv_d;  // mean - s
  const double var = std::max(t2 * inv_d - shift * shift, 0.0);
  const double rstd = 1.0 / std::sqrt(var + eps);
  tc -= shift * ta;  // sum of gxhat (x - mean)
  // x - mean as (x - s) - (mean - s), in T: x - s is exact for the x near s (Sterbenz),
  // and mean - s small, so a mean far from zero loses no digits to its rounding in T;
  // gxhat - mean(gxhat) in double, as the sums (zero for a row of one element)
  return {T(ta * inv_d), T(tc * rstd * inv_d), T(rstd), x0, T(shift)};
}

// One row's last pass: its gx, and its terms of the parameter gradients (g xhat and g)
// added into the block's sums gw and gb. The gradient in T (as PyTorch): its terms are
// rounded to T already, and float32 arithmetic fills twice the lanes.
template <bool HasWeight, typename T>
TORCIA_INLINE void row_pass(const T* __restrict__ g, const T* __restrict__ x,
                            const T* __restrict__ w, T* __restrict__ gx, T* __restrict__ gw,
                            T* __restrict__ gb, RowGrad<T> q, int64_t d) {
#pragma omp simd
  for (int64_t k = 0; k < d; ++k) {
    const T xhat = ((x[k] - q.x0) - q.sh) * q.r;
    gw[k] += g[k] * xhat;
    gb[k] += g[k];
    gx[k] = ((HasWeight ? g[k] * w[k] : g[k]) - q.a - xhat * q.c) * q.r;
  }
}

// Rows shorter than this take the next row's sums before the row's last pass: the
// division and square root of its constants then overlap those loads (LayerNorm's
// backward at 1024 rows of 128: 79 -> 63 us, PyTorch's 61). Longer rows keep their order:
// reading ahead there cost 2048 rows of 768 1.2 ms against 0.9.
constexpr int64_t kAheadElements = 256;

// gx of n <= kBlockRows consecutive rows, and the block's sums of g xhat (gw) and g (gb),
// row by row. Each row's last pass follows its sums while the row is still in L1: sums of
// a whole block first, then its last pass, read the block from memory in one burst and
// then left the memory idle, and once the arrays outgrew the cache that took 3x
// PyTorch's time (16,384 rows of 128: 2.8 ms against 1.0; one row at a time, 1.1).
template <typename T>
TORCIA_CLONES void backward_block(const T* __restrict__ g, const T* __restrict__ x,
                                  const T* __restrict__ w, T* __restrict__ gx,
                                  T* __restrict__ gw, T* __restrict__ gb, int64_t n, int64_t d,
                                  double eps) {
  std::fill(gw, gw + d, T(0));
  std::fill(gb, gb + d, T(0));
  const bool ahead = d < kAheadElements;
  T s;
  RowSums sums = row_sums(g, x, w, d, &s);
  for (int64_t i = 0; i < n; ++i) {
    const RowGrad<T> q = row_grad(sums, s, d, eps);
    const int64_t next = (i + 1) * d;
    if (ahead && i + 1 < n) sums = row_sums(g + next, x + next, w, d, &s);
    if (w)
      row_pass<true>(g + i * d, x + i * d, w, gx + i * d, gw, gb, q, d);
    else
      row_pass<false>(g + i * d, x + i * d, w, gx + i * d, gw, gb, q, d);
    if (!ahead && i + 1 < n) sums = row_sums(g + next, x + next, w, d, &s);
  }
}

const std::string kForward = "layer_norm", kBackward = "layer_norm_backward";

// x as (rows, d): d > 0 and dividing x's size
int64_t rows_of(const std::string& fn, const py::array& x, int64_t d) {
  if (d <= 0) throw std::runtime_error(fn + ": d must be positive, got " + std::to_string(d));
  if (x.size() % d != 0)
    throw std::runtime_error(fn + ": x has " + std::to_string(x.size()) +
                             " elements, not a multiple of d = " + std::to_string(d));
  return x.size() / d;
}

// an optional parameter of d elements and x's dtype; nullptr for None
const void* param(const std::string& fn, const std::string& name, const py::object& p,
                  const py::array& x, int64_t d) {
  if (p.is_none()) return nullptr;
  if (!py::isinstance<py::array>(p))
    throw std::runtime_error(fn + ": " + name + " must be an array or None");
  const py::array a = py::reinterpret_borrow<py::array>(p);
  torcia_checks::like(fn, name, a, "x", x);
  if (a.size() != d)
    throw std::runtime_error(fn + ": " + name + " has " + std::to_string(a.size()) +
                             " elements, expected " + std::to_string(d));
  return a.data();
}

// What a row-norm backward entry point starts with: g and x checked (float, alike), x's
// rows of d, the weight ((d,) or None) and grad_input made like x.
struct BackwardArgs {
  int64_t rows;
  const void* w;
  py::array gx;
};

BackwardArgs backward_args(const std::string& fn, const py::array& g, const py::array& x,
                           const py::object& weight, int64_t d) {
  torcia_checks::float_array(fn, "x", x);
  torcia_checks::same(fn, "g", g, "x", x);
  const int64_t rows = rows_of(fn, x, d);
  const void* w = param(fn, "weight", weight, x, d);
  py::array gx(x.dtype(), std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  return {rows, w, gx};
}

template <typename T>
void forward(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t d, double eps) {
  py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (rows * d > kParallelElements && rows > 1)
  for (int64_t r = 0; r < rows; ++r) forward_row(x + r * d, w, b, y + r * d, d, eps);
}

// The blocks fall into at most this many runs of consecutive blocks, each summed apart in
// double, the runs then added in their order: the weight and bias gradients have the same
// bits on every thread count and from run to run (the runs depend on the row count only).
constexpr int64_t kMaxRuns = 32;

template <typename T>
void backward(const T* g, const T* x, const T* w, T* gx, T* gw, T* gb, int64_t rows, int64_t d,
              double eps) {
  py::gil_scoped_release release;
  const int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  const int64_t runs = std::min(kMaxRuns, blocks);
  const int64_t per_run = runs ? (blocks + runs - 1) / runs : 0;
  std::vector<double> partial(static_cast<size_t>(runs) * 2 * d, 0.0);
#pragma omp parallel num_threads(torcia_team::fixed_split()) \
    if (rows * d > kParallelElements && rows > 1)
  {
    std::vector<T> block(2 * d);
#pragma omp for schedule(static)
    for (int64_t run = 0; run < runs; ++run) {
      double* sums = partial.data() + run * 2 * d;
      const int64_t last = std::min(blocks, (run + 1) * per_run);
      for (int64_t blk = run * per_run; blk < last; ++blk) {
        const int64_t r0 = blk * kBlockRows, n = std::min(rows - r0, kBlockRows);
        backward_block(g + r0 * d, x + r0 * d, w, gx + r0 * d, block.data(), block.data() + d,
                       n, d, eps);
        for (int64_t k = 0; k < 2 * d; ++k) sums[k] += block[k];
      }
    }
  }
  // run by run, each a contiguous sweep: column by column, the runs' 16 KiB strides (at
  // d = 1024) fell in the same cache sets and took 170 us, against 19 for the sweeps
  std::vector<double> total(2 * d, 0.0);
  for (int64_t run = 0; run < runs; ++run) {
    const double* sums = partial.data() + run * 2 * d;
    for (int64_t k = 0; k < 2 * d; ++k) total[k] += sums[k];
  }
  for (int64_t k = 0; k < d; ++k) {
    gw[k] = T(total[k]);
    gb[k] = T(total[d + k]);
  }
}

// layer_norm(x, weight, bias, d, eps): each run of d elements of x normalised, then
// scaled by weight and shifted by bias (each (d,) or None).
py::array layer_norm(const py::array& x, const py::object& weight, const py::object& bias,
                     int64_t d, double eps) {
  torcia_checks::float_array(kForward, "x", x);
  const int64_t rows = rows_of(kForward, x, d);
  const void* w = param(kForward, "weight", weight, x, d);
  const void* b = param(kForward, "bias", bias, x, d);
  py::array y(x.dtype(), std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  if (torcia_checks::is_dtype<float>(x.dtype()))
    forward(static_cast<const float*>(x.data()), static_cast<const float*>(w),
            static_cast<const float*>(b), static_cast<float*>(y.mutable_data()), rows, d, eps);
  else
    forward(static_cast<const double*>(x.data()), static_cast<const double*>(w),
            static_cast<const double*>(b), static_cast<double*>(y.mutable_data()), rows, d, eps);
  return y;
}

// layer_norm_backward(g, x, weight, d, eps) -> (grad_x, grad_weight, grad_bias), the
// parameter gradients of shape (d,) whether or not the layer has them.
py::tuple layer_norm_backward(const py::array& g, const py::array& x, const py::object& weight,
                              int64_t d, double eps) {
  auto [rows, w, gx] = backward_args(kBackward, g, x, weight, d);
  py::array gw(x.dtype(), std::vector<py::ssize_t>{d}), gb(x.dtype(), std::vector<py::ssize_t>{d});
  if (torcia_checks::is_dtype<float>(x.dtype()))
    backward(static_cast<const float*>(g.data()), static_cast<const float*>(x.data()),
             static_cast<const float*>(w), static_cast<float*>(gx.mutable_data()),
             static_cast<float*>(gw.mutable_data()), static_cast<float*>(gb.mutable_data()),
             rows, d, eps);
  else
    backward(static_cast<const double*>(g.data()), static_cast<const double*>(x.data()),
             static_cast<const double*>(w), static_cast<double*>(gx.mutable_data()),
             static_cast<double*>(gw.mutable_data()), static_cast<double*>(gb.mutable_data()),
             rows, d, eps);
  return py::make_tuple(gx, gw, gb);
}

// ----- BatchNorm: per channel of (N, C, S) ------------------------------------------

// sum over the N segments of length S of channel c of f(segment, k), f's terms in T
template <typename T, typename F>
TORCIA_INLINE double channel_sum(int64_t n, int64_t s, F f) {
  double total = 0;
  for (int64_t b = 0; b < n; ++b) total += chunk_sum<T>(s, [&](int64_t k) { return f(b, k); });
  return total;
}

// (N, C, S) sizes of x (N, C, *), after checking it and the optional (C,) parameters
struct Channels {
  int64_t n, c, s;
};

Channels channels_of(const std::string& fn, const py::array& x) {
  torcia_checks::float_array(fn, "x", x);
  if (x.ndim() < 2)
    throw std::runtime_error(fn + ": x must be (N, C, *), got " + torcia_checks::shape_of(x));
  int64_t s = 1;
  for (py::ssize_t d = 2; d < x.ndim(); ++d) s *= x.shape(d);
  return {x.shape(0), x.shape(1), s};
}

// mean and biased variance of channel c: the given ones (eval), else the batch's (two
// passes, as row_stats)
template <typename T>
void channel_stats(const T* x, const Channels& d, int64_t c, const T* mean_in, const T* var_in,
                   double* mean, double* var) {
  if (mean_in) {
    *mean = mean_in[c];
    *var = var_in[c];
    return;
  }
  auto at = [&](int64_t b, int64_t k) { return (b * d.c + c) * d.s + k; };
  const double count = double(d.n * d.s);
  const double m = channel_sum<T>(d.n, d.s, [&](int64_t b, int64_t k) { return x[at(b, k)]; }) /
                   count;
  const T mt = T(m);
  *mean = m;
  *var = channel_sum<T>(d.n, d.s, [&](int64_t b, int64_t k) {
           const T v = x[at(b, k)] - mt;
           return v * v;
         }) / count;
}

// out = (x - m) scale + shift over a channel of mean ``mean`` and variance ``var``
template <typename T>
struct BnAffine {
  T m, scale, shift;
};

template <typename T>
TORCIA_INLINE BnAffine<T> bn_affine(double mean, double var, const T* w, const T* b, int64_t c,
                                    double eps) {
  return {T(mean), T((w ? double(w[c]) : 1.0) / std::sqrt(var + eps)), b ? b[c] : T(0)};
}

// Channels handled together where a channel is a column of (N, C) (S = 1, BatchNorm1d's
// usual input): walking one channel would read one element per row, each from another
// cache line (a (1024, 1024) forward took 24 ms, PyTorch's 0.54); a block's sums run along
// the rows instead, its columns in vector lanes, each column's sum in row order whatever
// the split.
constexpr int64_t kColumns = 64;

// columns [c0, c1) of (N, C): statistics (the given ones in eval) and out
template <typename T>
TORCIA_CLONES void bn_forward_columns(const T* __restrict__ x, const T* w, const T* b,
                                      const T* mean_in, const T* var_in, T* __restrict__ out,
                                      T* mean_out, T* var_out, int64_t n, int64_t c, int64_t c0,
                                      int64_t c1, double eps) {
  const int64_t m = c1 - c0;
  double mean[kColumns], var[kColumns];
  for (int64_t j = 0; j < m; ++j) {
    mean[j] = mean_in ? double(mean_in[c0 + j]) : 0.0;
    var[j] = var_in ? double(var_in[c0 + j]) : 0.0;
  }
  if (!mean_in) {  // two passes, as row_stats
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < m; ++j) mean[j] += x[r * c + c0 + j];
    for (int64_t j = 0; j < m; ++j) mean[j] /= double(n);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < m; ++j) {
        const double v = x[r * c + c0 + j] - mean[j];
        var[j] += v * v;
      }
    for (int64_t j = 0; j < m; ++j) var[j] /= double(n);
  }
  T mt[kColumns], scale[kColumns], shift[kColumns];
  for (int64_t j = 0; j < m; ++j) {
    mean_out[c0 + j] = T(mean[j]);
    var_out[c0 + j] = T(var[j]);
    const BnAffine<T> a = bn_affine(mean[j], var[j], w, b, c0 + j, eps);
    mt[j] = a.m;
    scale[j] = a.scale;
    shift[j] = a.shift;
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < m; ++j)
      out[r * c + c0 + j] = (x[r * c + c0 + j] - mt[j]) * scale[j] + shift[j];
}

template <typename T>
void bn_forward(const T* x, const T* w, const T* b, const T* mean_in, const T* var_in, T* out,
                T* mean_out, T* var_out, const Channels& d, double eps) {
  py::gil_scoped_release release;
  if (d.s == 1) {
    const int64_t blocks = (d.c + kColumns - 1) / kColumns;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (d.n * d.c > kParallelElements && blocks > 1)
    for (int64_t blk = 0; blk < blocks; ++blk)
      bn_forward_columns(x, w, b, mean_in, var_in, out, mean_out, var_out, d.n, d.c,
                         blk * kColumns, std::min(d.c, (blk + 1) * kColumns), eps);
    return;
  }
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (d.n * d.c * d.s > kParallelElements && d.c > 1)
  for (int64_t c = 0; c < d.c; ++c) {
    auto at = [&](int64_t b, int64_t k) { return (b * d.c + c) * d.s + k; };
    double mean, var;
    channel_stats(x, d, c, mean_in, var_in, &mean, &var);
    mean_out[c] = T(mean);
    var_out[c] = T(var);
    const auto [m, scale, shift] = bn_affine(mean, var, w, b, c, eps);
    for (int64_t bb = 0; bb < d.n; ++bb) {
      const T* xi = x + at(bb, 0);
      T* oi = out + at(bb, 0);
      for (int64_t k = 0; k < d.s; ++k) oi[k] = (xi[k] - m) * scale + shift;
    }
  }
}

// Training's statistics of channel c and the sums of g and g (x - mean) over it, in one
// pass about the channel's first element s (as LayerNorm's backward_row): the channel is
// read once here, not four times.
template <typename T>
TORCIA_CLONES void channel_backward_sums(const T* __restrict__ g, const T* __restrict__ x,
                                         const Channels& d, int64_t c, double* mean,
                                         double* var, double* sum_g, double* sum_gc) {
  *mean = *var = *sum_g = *sum_gc = 0.0;
  if (d.n == 0 || d.s == 0) return;  // an empty channel: no gradient for its parameters
  const double s = double(x[c * d.s]);
  double s1[8] = {}, s2[8] = {}, sg[8] = {}, sc[8] = {};
  double t1 = 0, t2 = 0, tg = 0, tc = 0;
  for (int64_t b = 0; b < d.n; ++b) {
    const T* gi = g + (b * d.c + c) * d.s;
    const T* xi = x + (b * d.c + c) * d.s;
    int64_t k = 0;
    for (; k + 8 <= d.s; k += 8)
      for (int u = 0; u < 8; ++u) {
        const double xs = double(xi[k + u]) - s, gk = double(gi[k + u]);
        s1[u] += xs;
        s2[u] += xs * xs;
        sg[u] += gk;
        sc[u] += gk * xs;
      }
    for (; k < d.s; ++k) {
      const double xs = double(xi[k]) - s, gk = double(gi[k]);
      t1 += xs;
      t2 += xs * xs;
      tg += gk;
      tc += gk * xs;
    }
  }
  for (int u = 0; u < 8; ++u) {
    t1 += s1[u];
    t2 += s2[u];
    tg += sg[u];
    tc += sc[u];
  }
  const double count = double(d.n * d.s), shift = t1 / count;
  *mean = s + shift;
  *var = std::max(t2 / count - shift * shift, 0.0);
  *sum_g = tg;
  *sum_gc = tc - shift * tg;
}

// gx = (g - a - ((x - x0) - sh) k) scale over a channel; its gw and gb written. training:
// g - mean(g) - xhat mean(g xhat), times the scale; eval (a = k = 0): g times it. x - mean
// as (x - x0) - (mean - x0) about one of the channel's elements x0, as LayerNorm's
// row_grad: exact near x0, where x - T(mean) would carry mean's rounding to T (half a unit
// of 1e4 in float32 is 5e-4 of a unit deviation)
template <typename T>
struct BnGrad {
  T a, k, x0, sh, scale;
};

template <typename T>
TORCIA_INLINE BnGrad<T> bn_grad(double mean, double var, double sum_g, double sum_gx,
                                T x0, const T* w, int64_t c, double count, bool eval,
                                double eps, T* gw, T* gb) {
  const double rstd = 1.0 / std::sqrt(var + eps);
  sum_gx *= rstd;
  gb[c] = T(sum_g);
  gw[c] = T(sum_gx);
  const double a = eval ? 0.0 : sum_g / count, k2 = eval ? 0.0 : sum_gx / count;
  return {T(a), T(k2 * rstd), x0, T(mean - double(x0)), T(rstd * (w ? double(w[c]) : 1.0))};
}

// columns [c0, c1) of (N, C) (see kColumns): the statistics (two passes, as
// bn_forward_columns), the sums of g and g (x - mean), then gx
template <typename T>
TORCIA_CLONES void bn_backward_columns(const T* __restrict__ g, const T* __restrict__ x,
                                       const T* w, const T* mean_in, const T* var_in,
                                       T* __restrict__ gx, T* gw, T* gb, int64_t n, int64_t c,
                                       int64_t c0, int64_t c1, double eps) {
  const int64_t m = c1 - c0;
  double mean[kColumns], var[kColumns], sg[kColumns], sgx[kColumns];
  for (int64_t j = 0; j < m; ++j) {
    mean[j] = mean_in ? double(mean_in[c0 + j]) : 0.0;
    var[j] = var_in ? double(var_in[c0 + j]) : 0.0;
    sg[j] = sgx[j] = 0.0;
  }
  // an empty batch: no gradient for the parameters (statistics 0, as channel_backward_sums)
  const double count = n ? double(n) : 1.0;
  if (!mean_in) {
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < m; ++j) mean[j] += x[r * c + c0 + j];
    for (int64_t j = 0; j < m; ++j) mean[j] /= count;
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < m; ++j) {
      const double v = x[r * c + c0 + j] - mean[j], gr = g[r * c + c0 + j];
      if (!mean_in) var[j] += v * v;
      sg[j] += gr;
      sgx[j] += gr * v;
    }
  T ta[kColumns], tk[kColumns], x0[kColumns], sh[kColumns], ts[kColumns];
  for (int64_t j = 0; j < m; ++j) {
    if (!mean_in) var[j] /= count;
    const BnGrad<T> q = bn_grad(mean[j], var[j], sg[j], sgx[j], n ? x[c0 + j] : T(0), w,
                                c0 + j, count, mean_in, eps, gw, gb);
    ta[j] = q.a;
    tk[j] = q.k;
    x0[j] = q.x0;
    sh[j] = q.sh;
    ts[j] = q.scale;
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < m; ++j) {
      const int64_t i = r * c + c0 + j;
      gx[i] = (g[i] - ta[j] - ((x[i] - x0[j]) - sh[j]) * tk[j]) * ts[j];
    }
}

template <typename T>
void bn_backward(const T* g, const T* x, const T* w, const T* mean_in, const T* var_in, T* gx,
                 T* gw, T* gb, const Channels& d, double eps) {
  py::gil_scoped_release release;
  if (d.s == 1) {
    const int64_t blocks = (d.c + kColumns - 1) / kColumns;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (d.n * d.c > kParallelElements && blocks > 1)
    for (int64_t blk = 0; blk < blocks; ++blk)
      bn_backward_columns(g, x, w, mean_in, var_in, gx, gw, gb, d.n, d.c, blk * kColumns,
                          std::min(d.c, (blk + 1) * kColumns), eps);
    return;
  }
  const double count = double(d.n * d.s);
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (d.n * d.c * d.s > kParallelElements && d.c > 1)
  for (int64_t c = 0; c < d.c; ++c) {
    auto at = [&](int64_t b, int64_t k) { return (b * d.c + c) * d.s + k; };
    double mean, var, sum_g, sum_gx;
    if (mean_in) {
      channel_stats(x, d, c, mean_in, var_in, &mean, &var);
      const T tm = T(mean);
      sum_g = channel_sum<T>(d.n, d.s, [&](int64_t b, int64_t k) { return g[at(b, k)]; });
      sum_gx = channel_sum<T>(d.n, d.s, [&](int64_t b, int64_t k) {
        return g[at(b, k)] * (x[at(b, k)] - tm);
      });
    } else {
      channel_backward_sums(g, x, d, c, &mean, &var, &sum_g, &sum_gx);
    }
    const T x0 = count > 0 ? x[at(0, 0)] : T(0);
    const auto [ta, tk, s, sh, ts] =
        bn_grad(mean, var, sum_g, sum_gx, x0, w, c, count, mean_in, eps, gw, gb);
    for (int64_t bb = 0; bb < d.n; ++bb) {
      const T* gi = g + at(bb, 0);
      const T* xi = x + at(bb, 0);
      T* oi = gx + at(bb, 0);
      for (int64_t k = 0; k < d.s; ++k) oi[k] = (gi[k] - ta - ((xi[k] - s) - sh) * tk) * ts;
    }
  }
}

// batch_norm(x (N, C, *), weight, bias, mean, var, eps) -> (out, mean, var): normalised per
// channel with the batch's statistics when mean and var are None (training), else with
// them; weight, bias (C,) or None; the statistics used come back (var biased).
py::tuple batch_norm(const py::array& x, const py::object& weight, const py::object& bias,
                     const py::object& mean, const py::object& var, double eps) {
  const std::string fn = "batch_norm";
  const Channels d = channels_of(fn, x);
  const void* w = param(fn, "weight", weight, x, d.c);
  const void* b = param(fn, "bias", bias, x, d.c);
  if (mean.is_none() != var.is_none())
    throw std::runtime_error(fn + ": mean and var must both be given or both be None");
  const void* m = param(fn, "mean", mean, x, d.c);
  const void* v = param(fn, "var", var, x, d.c);
  py::array out(x.dtype(), std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  py::array mean_out(x.dtype(), std::vector<py::ssize_t>{d.c});
  py::array var_out(x.dtype(), std::vector<py::ssize_t>{d.c});
  if (torcia_checks::is_dtype<float>(x.dtype()))
    bn_forward<float>(static_cast<const float*>(x.data()), static_cast<const float*>(w),
                      static_cast<const float*>(b), static_cast<const float*>(m),
                      static_cast<const float*>(v), static_cast<float*>(out.mutable_data()),
                      static_cast<float*>(mean_out.mutable_data()),
                      static_cast<float*>(var_out.mutable_data()), d, eps);
  else
    bn_forward<double>(static_cast<const double*>(x.data()), static_cast<const double*>(w),
                       static_cast<const double*>(b), static_cast<const double*>(m),
                       static_cast<const double*>(v), static_cast<double*>(out.mutable_data()),
                       static_cast<double*>(mean_out.mutable_data()),
                       static_cast<double*>(var_out.mutable_data()), d, eps);
  return py::make_tuple(out, mean_out, var_out);
}

// batch_norm_backward(g, x, weight, mean, var, eps) -> (grad_x, grad_weight, grad_bias):
// batch statistics recomputed when mean and var are None (training), else those.
py::tuple batch_norm_backward(const py::array& g, const py::array& x, const py::object& weight,
                              const py::object& mean, const py::object& var, double eps) {
  const std::string fn = "batch_norm_backward";
  const Channels d = channels_of(fn, x);
  torcia_checks::same(fn, "g", g, "x", x);
  const void* w = param(fn, "weight", weight, x, d.c);
  if (mean.is_none() != var.is_none())
    throw std::runtime_error(fn + ": mean and var must both be given or both be None");
  const void* m = param(fn, "mean", mean, x, d.c);
  const void* v = param(fn, "var", var, x, d.c);
  py::array gx(x.dtype(), std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  py::array gw(x.dtype(), std::vector<py::ssize_t>{d.c});
  py::array gb(x.dtype(), std::vector<py::ssize_t>{d.c});
  if (torcia_checks::is_dtype<float>(x.dtype()))
    bn_backward<float>(static_cast<const float*>(g.data()), static_cast<const float*>(x.data()),
                       static_cast<const float*>(w), static_cast<const float*>(m),
                       static_cast<const float*>(v), static_cast<float*>(gx.mutable_data()),
                       static_cast<float*>(gw.mutable_data()),
                       static_cast<float*>(gb.mutable_data()), d, eps);
  else
    bn_backward<double>(static_cast<const double*>(g.data()),
                        static_cast<const double*>(x.data()), static_cast<const double*>(w),
                        static_cast<const double*>(m), static_cast<const double*>(v),
                        static_cast<double*>(gx.mutable_data()),
                        static_cast<double*>(gw.mutable_data()),
                        static_cast<double*>(gb.mutable_data()), d, eps);
  return py::make_tuple(gx, gw, gb);
}

// ----- RMSNorm: over the rows of (R, D) ---------------------------------------------

const std::string kRmsForward = "rms_norm", kRmsBackward = "rms_norm_backward";

// 1 / sqrt(mean(x^2) + eps) of one row
template <typename T>
TORCIA_INLINE double row_invrms(const T* __restrict__ x, int64_t d, double eps) {
  return 1.0 / std::sqrt(chunk_sum<T>(d, [&](int64_t k) { return x[k] * x[k]; }) / d + eps);
}

template <typename T>
TORCIA_CLONES void rms_forward_row(const T* __restrict__ x, const T* __restrict__ w,
                                   T* __restrict__ y, int64_t d, double eps) {
  // in T, each step rounded, as PyTorch's composite (mean, + eps, sqrt, reciprocal): r
  // rounded once from double differed in a last bit in 41% of elements, against 17%
  const T mean = T(chunk_sum<T>(d, [&](int64_t k) { return x[k] * x[k]; })) / T(d);
  const T r = T(1) / std::sqrt(mean + T(eps));
  for (int64_t k = 0; k < d; ++k) y[k] = w ? x[k] * r * w[k] : x[k] * r;
}

// gx of one row, with xhat = x r: r (gxhat - xhat mean(gxhat xhat)), gxhat = g w; and the
// row's terms of gw (g xhat) added to the thread's sums
template <typename T>
TORCIA_CLONES void rms_backward_row(const T* __restrict__ g, const T* __restrict__ x,
                                    const T* __restrict__ w, T* __restrict__ gx,
                                    double* __restrict__ gw, int64_t d, double eps) {
  const double r = row_invrms(x, d, eps);
  auto gh = [&](int64_t k) { return w ? double(g[k]) * w[k] : double(g[k]); };
  const double c =
      chunk_sum<T>(d, [&](int64_t k) { return (w ? g[k] * w[k] : g[k]) * x[k]; }) * r / d;
  for (int64_t k = 0; k < d; ++k) {
    const double xhat = x[k] * r;
    gw[k] += double(g[k]) * xhat;
    gx[k] = T((gh(k) - xhat * c) * r);
  }
}

// gw's terms are summed per thread, then over the threads in their order: the same bits
// from run to run, whichever thread finishes first
template <typename T>
void rms_backward(const T* g, const T* x, const T* w, T* gx, T* gw, int64_t rows, int64_t d,
                  double eps) {
  py::gil_scoped_release release;
  const bool threads = rows * d > kParallelElements && rows > 1;
  int nt = 1;
#ifdef _OPENMP
  if (threads) nt = omp_get_max_threads();
#endif
  std::vector<double> sums(static_cast<size_t>(nt) * d, 0.0);
#pragma omp parallel num_threads(nt) if (threads)
  {
    int t = 0;
#ifdef _OPENMP
    t = omp_get_thread_num();
#endif
    double* mine = sums.data() + static_cast<int64_t>(t) * d;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      rms_backward_row(g + r * d, x + r * d, w, gx + r * d, mine, d, eps);
  }
  for (int64_t k = 0; k < d; ++k) {
    double total = 0;
    for (int t = 0; t < nt; ++t) total += sums[static_cast<size_t>(t) * d + k];
    gw[k] = T(total);
  }
}

// rms_norm(x, weight, d, eps): each run of d elements of x divided by its root mean
// square, then scaled by weight ((d,) or None).
py::array rms_norm(const py::array& x, const py::object& weight, int64_t d, double eps) {
  torcia_checks::float_array(kRmsForward, "x", x);
  const int64_t rows = rows_of(kRmsForward, x, d);
  const void* w = param(kRmsForward, "weight", weight, x, d);
  py::array y(x.dtype(), std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  char* yp = static_cast<char*>(y.mutable_data());
  const char* xp = static_cast<const char*>(x.data());
  const bool f32 = torcia_checks::is_dtype<float>(x.dtype());
  const int64_t row_bytes = d * x.itemsize();
  py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (rows * d > kParallelElements && rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    if (f32)
      rms_forward_row(reinterpret_cast<const float*>(xp + r * row_bytes),
                      static_cast<const float*>(w), reinterpret_cast<float*>(yp + r * row_bytes),
                      d, eps);
    else
      rms_forward_row(reinterpret_cast<const double*>(xp + r * row_bytes),
                      static_cast<const double*>(w),
                      reinterpret_cast<double*>(yp + r * row_bytes), d, eps);
  }
  return y;
}

// rms_norm_backward(g, x, weight, d, eps) -> (grad_x, grad_weight), grad_weight of shape
// (d,) whether or not the layer has a weight.
py::tuple rms_norm_backward(const py::array& g, const py::array& x, const py::object& weight,
                            int64_t d, double eps) {
  auto [rows, w, gx] = backward_args(kRmsBackward, g, x, weight, d);
  py::array gw(x.dtype(), std::vector<py::ssize_t>{d});
  if (torcia_checks::is_dtype<float>(x.dtype()))
    rms_backward(static_cast<const float*>(g.data()), static_cast<const float*>(x.data()),
                 static_cast<const float*>(w), static_cast<float*>(gx.mutable_data()),
                 static_cast<float*>(gw.mutable_data()), rows, d, eps);
  else
    rms_backward(static_cast<const double*>(g.data()), static_cast<const double*>(x.data()),
                 static_cast<const double*>(w), static_cast<double*>(gx.mutable_data()),
                 static_cast<double*>(gw.mutable_data()), rows, d, eps);
  return py::make_tuple(gx, gw);
}

}  // namespace

void define_norm(py::module_& m) {
  m.def("rms_norm", &rms_norm, py::arg("x"), py::arg("weight"), py::arg("d"), py::arg("eps"));
  m.def("rms_norm_backward", &rms_norm_backward, py::arg("g"), py::arg("x"), py::arg("weight"),
        py::arg("d"), py::arg("eps"));
  m.def("layer_norm", &layer_norm, py::arg("x"), py::arg("weight"), py::arg("bias"),
        py::arg("d"), py::arg("eps"));
  m.def("layer_norm_backward", &layer_norm_backward, py::arg("g"), py::arg("x"),
        py::arg("weight"), py::arg("d"), py::arg("eps"));
  m.def("batch_norm", &batch_norm, py::arg("x"), py::arg("weight"), py::arg("bias"),
        py::arg("mean"), py::arg("var"), py::arg("eps"));
  m.def("batch_norm_backward", &batch_norm_backward, py::arg("g"), py::arg("x"),
        py::arg("weight"), py::arg("mean"), py::arg("var"), py::arg("eps"));
}
