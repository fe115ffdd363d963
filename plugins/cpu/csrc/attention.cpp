// Scaled-dot-product attention without the (Lq, Lk) scores: flash attention's forward and
// backward (Dao et al., 2022, and FlashAttention-2's loop order) in float32 and float64.
//
// The forward takes a block of queries at a time through the keys in blocks, keeping
// each query's running maximum, softmax denominator and weighted sum of values (an
// online softmax), and saves only the output and each row's log-sum-exp. The backward
// recomputes the block's probabilities from the log-sum-exp and, for each key/value head,
// goes through its key blocks, summing the keys' and values' gradients over every query
// (and every query head of its group) and adding each block's terms to the queries'. With
// fewer heads than threads, a first pass over key blocks sums the keys' and values'
// gradients and a second over query blocks the queries', the same terms in the same
// order. Each output element is summed by one thread in a fixed order, so results do
// not depend on the thread count. Memory beyond the inputs and outputs: a few blocks per thread.
// The block products run on the extension's BLAS (gemm.h), single-threaded inside the
// OpenMP tasks.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "checks.h"
#include "gemm.h"
#include "vecmath.h"

namespace py = pybind11;
using std::int64_t;

namespace {

// Queries and keys per block: a block's scores (64 x 128) and its keys and values stay in
// L2 next to the queries'.
constexpr int64_t kQueries = 64;
constexpr int64_t kKeys = 128;

// The geometry of one call: (B, Hq, Lq, E) queries, (B, Hk, Lk, E) keys, (B, Hk, Lk, Ev)
// values, the mask (none, bool or additive float) read through its strides (in elements,
// broadcast dims 0).
struct Geometry {
  int64_t b, hq, hk, lq, lk, e, ev;
  bool causal;
  double scale;
  int mask_kind;  // 0: none, 1: bool (true: may attend), 2: added
  const void* mask;
  int64_t ms[4];
};

template <typename T>
struct Views {
  const T* q;
  const T* k;
  const T* v;
};

// s[r, c] = scale * (the block's scores) masked: -inf where the mask or causality forbids
// (query i0 + r, key j0 + c), plus an additive mask; nk keys per row, ld the row stride
template <typename T>
TORCIA_CLONES_WIDE void mask_scores(const Geometry& g, int64_t bi, int64_t h, int64_t i0,
                                    int64_t rows, int64_t j0, int64_t nk, T* s, int64_t ld) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const T scale = T(g.scale);
  for (int64_t r = 0; r < rows; ++r) {
    T* sr = s + r * ld;
    for (int64_t c = 0; c < nk; ++c) sr[c] *= scale;
    const int64_t i = i0 + r;
    if (g.causal) {
      for (int64_t c = std::max<int64_t>(0, i + 1 - j0); c < nk; ++c) sr[c] = neg_inf;
    } else if (g.mask_kind != 0) {
      const int64_t base = bi * g.ms[0] + h * g.ms[1] + i * g.ms[2] + j0 * g.ms[3];
      if (g.mask_kind == 1) {
        const auto* m = static_cast<const uint8_t*>(g.mask) + base;
        for (int64_t c = 0; c < nk; ++c)
          if (!m[c * g.ms[3]]) sr[c] = neg_inf;
      } else {
        const T* m = static_cast<const T*>(g.mask) + base;
        for (int64_t c = 0; c < nk; ++c) sr[c] += m[c * g.ms[3]];
      }
    }
  }
}

// the keys a block of queries [i0, i0 + rows) may see: all, or up to the last row's
// position under causality
int64_t key_end(const Geometry& g, int64_t i0, int64_t rows) {
  return g.causal ? std::min(g.lk, i0 + rows) : g.lk;
}

// s[c] = exp(s[c] - m) over a row, in the wide vector units' lanes
template <typename T>
TORCIA_CLONES_WIDE void exp_row(T* __restrict__ s, int64_t n, T m) {
  for (int64_t c = 0; c < n; ++c) s[c] = exp_approx(s[c] - m);
}

// the dot product of two rows, in the wide vector units' lanes (a single running sum, a
// chain of dependent additions, took a fifth of a small attention's backward)
template <typename T>
TORCIA_CLONES_WIDE T dot_row(const T* __restrict__ a, const T* __restrict__ b, int64_t n) {
  return dot_lanes(a, b, n);
}

// One row of a block's scores s (n of them) into the online softmax, given the row's
// running maximum m and sum of weights l: s becomes the weights exp(s - m'), m' the new
// maximum, and the return value is exp(m - m'), the factor for the values summed so far.
// NaN scores make the row NaN, as the reference's softmax; a row with nothing to attend
// to yet keeps zero weights. Its max, exp and sum run in lanes (a running maximum and a
// running sum, each a chain of dependent steps, held a 64 x 64 block's rows to 21 us).
// A weight below e^-87.3 (of the row's largest, 1) is 0 rather than a subnormal
// (exp_approx): far below the rounding of the row's sum (at least 1), it moves an output
// only through a value above ~1e31 (4.8 -> 4.3 us a 64 x 64 block, without exp_full's
// two scale factors).
template <typename T>
TORCIA_CLONES_WIDE T online_softmax_row(T* __restrict__ s, int64_t n, T& m, T& l) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  int nan = std::isnan(m);
  for (int64_t c = 0; c < n; ++c) nan |= s[c] != s[c];
  if (nan) {
    std::fill(s, s + n, std::numeric_limits<T>::quiet_NaN());
    m = l = std::numeric_limits<T>::quiet_NaN();
    return T(1);
  }
  const T top = max_lanes(s, n, m);
  if (top == neg_inf) {
    std::fill(s, s + n, T(0));
    return T(1);
  }
  const T alpha = m == neg_inf ? T(0) : exp_approx(m - top);
  for (int64_t c = 0; c < n; ++c) s[c] = exp_approx(s[c] - top);
  l = l * alpha + sum_lanes(s, n);
  m = top;
  return alpha;
}

template <typename T>
void forward_block(const Geometry& g, const Views<T>& in, T* out, T* lse, int64_t bi,
                   int64_t h, int64_t i0, int64_t rows, std::vector<T>& s_buf,
                   std::vector<T>& acc_buf) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  const int64_t kh = h / (g.hq / g.hk);
  const T* q = in.q + ((bi * g.hq + h) * g.lq + i0) * g.e;
  const T* k = in.k + (bi * g.hk + kh) * g.lk * g.e;
  const T* v = in.v + (bi * g.hk + kh) * g.lk * g.ev;
  T* s = s_buf.data();
  T* acc = acc_buf.data();
  std::fill(acc, acc + rows * g.ev, T(0));
  T m[kQueries], l[kQueries];
  std::fill(m, m + rows, neg_inf);
  std::fill(l, l + rows, T(0));
  const int64_t end = key_end(g, i0, rows);
  for (int64_t j0 = 0; j0 < end; j0 += kKeys) {
    const int64_t nk = std::min(kKeys, end - j0);
    gemm<T>(CblasNoTrans, CblasTrans, rows, nk, g.e, q, g.e, k + j0 * g.e, g.e, T(0), s, kKeys);
    mask_scores<T>(g, bi, h, i0, rows, j0, nk, s, kKeys);
    for (int64_t r = 0; r < rows; ++r) {
      const T alpha = online_softmax_row(s + r * kKeys, nk, m[r], l[r]);
      if (alpha != T(1)) {
        T* ar = acc + r * g.ev;
        for (int64_t c = 0; c < g.ev; ++c) ar[c] *= alpha;
      }
    }
    gemm<T>(CblasNoTrans, CblasNoTrans, rows, g.ev, nk, s, kKeys, v + j0 * g.ev, g.ev, T(1), acc,
            g.ev);
  }
  T* o = out + ((bi * g.hq + h) * g.lq + i0) * g.ev;
  T* ls = lse + (bi * g.hq + h) * g.lq + i0;
  for (int64_t r = 0; r < rows; ++r) {
    const T inv = l[r] > T(0) ? T(1) / l[r] : T(0);
    for (int64_t c = 0; c < g.ev; ++c) o[r * g.ev + c] = acc[r * g.ev + c] * inv;
    // a row with no key to attend to: zero output, lse -inf; NaN stays NaN
    ls[r] = std::isnan(l[r]) ? l[r] : (l[r] > T(0) ? m[r] + std::log(l[r]) : neg_inf);
  }
}

// the probabilities of a block, recomputed from the scores and each row's lse (zero for
// rows with nothing to attend to)
template <typename T>
void probabilities(const Geometry& g, const T* q, const T* k, const T* lse, int64_t bi,
                   int64_t h, int64_t i0, int64_t rows, int64_t j0, int64_t nk, T* p) {
  gemm<T>(CblasNoTrans, CblasTrans, rows, nk, g.e, q, g.e, k + j0 * g.e, g.e, T(0), p, kKeys);
  mask_scores<T>(g, bi, h, i0, rows, j0, nk, p, kKeys);
  for (int64_t r = 0; r < rows; ++r) {
    T* pr = p + r * kKeys;
    if (std::isinf(lse[r]) && lse[r] < 0) {
      std::fill(pr, pr + nk, T(0));
    } else {
      exp_row(pr, nk, lse[r]);
    }
  }
}

// ds = p (dp - d) scale, in place of dp
template <typename T>
TORCIA_CLONES_WIDE void score_grads(const T* p, T* dp, const T* d, int64_t rows, int64_t nk,
                                    T scale) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < nk; ++c)
      dp[r * kKeys + c] = p[r * kKeys + c] * (dp[r * kKeys + c] - d[r]) * scale;
}

struct BackwardIn {
  const void* g;
  const void* d;  // rowsum(g * out): (B, Hq, Lq)
  const void* lse;
};

// the key and value gradients of keys [j0, j0 + nk) of head kh: every query head of the
// group, every query block that may see them; with dq, these keys' terms of the queries'
// gradients added too (the caller owns those rows)
template <typename T>
void key_block_grads(const Geometry& g, const Views<T>& in, const BackwardIn& bw, T* dk,
                     T* dv, T* dq, int64_t bi, int64_t kh, int64_t j0, std::vector<T>& p_buf,
                     std::vector<T>& dp_buf) {
  const int64_t nk = std::min(kKeys, g.lk - j0), group = g.hq / g.hk;
  const T* k = in.k + (bi * g.hk + kh) * g.lk * g.e;
  const T* v = in.v + (bi * g.hk + kh) * g.lk * g.ev;
  T* dkb = dk + ((bi * g.hk + kh) * g.lk + j0) * g.e;
  T* dvb = dv + ((bi * g.hk + kh) * g.lk + j0) * g.ev;
  std::fill(dkb, dkb + nk * g.e, T(0));
  std::fill(dvb, dvb + nk * g.ev, T(0));
  T* p = p_buf.data();
  T* dp = dp_buf.data();
  // under causality only queries from j0 on see these keys
  const int64_t first = g.causal ? (j0 / kQueries) * kQueries : 0;
  for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
    const int64_t row0 = (bi * g.hq + h) * g.lq;
    for (int64_t i0 = first; i0 < g.lq; i0 += kQueries) {
      const int64_t rows = std::min(kQueries, g.lq - i0);
      const T* q = in.q + (row0 + i0) * g.e;
      const T* go = static_cast<const T*>(bw.g) + (row0 + i0) * g.ev;
      probabilities<T>(g, q, k, static_cast<const T*>(bw.lse) + row0 + i0, bi, h, i0, rows,
                       j0, nk, p);
      // dV += P^T dO, dP = dO V^T, dS = P (dP - D) scale, dK += dS^T Q
      gemm<T>(CblasTrans, CblasNoTrans, nk, g.ev, rows, p, kKeys, go, g.ev, T(1), dvb, g.ev);
      gemm<T>(CblasNoTrans, CblasTrans, rows, nk, g.ev, go, g.ev, v + j0 * g.ev, g.ev, T(0), dp,
              kKeys);
      score_grads<T>(p, dp, static_cast<const T*>(bw.d) + row0 + i0, rows, nk, T(g.scale));
      gemm<T>(CblasTrans, CblasNoTrans, nk, g.e, rows, dp, kKeys, q, g.e, T(1), dkb, g.e);
      if (dq)
        gemm<T>(CblasNoTrans, CblasNoTrans, rows, g.e, nk, dp, kKeys, k + j0 * g.e, g.e, T(1),
                dq + (row0 + i0) * g.e, g.e);
    }
  }
}

// the gradient of queries [i0, i0 + rows) of head h: every key block they may see, each
// of the width key_block_grads gives it, so that both add the same terms in the same order
template <typename T>
void query_block_grads(const Geometry& g, const Views<T>& in, const BackwardIn& bw, T* dq,
                       int64_t bi, int64_t h, int64_t i0, std::vector<T>& p_buf,
                       std::vector<T>& dp_buf) {
  const int64_t rows = std::min(kQueries, g.lq - i0), kh = h / (g.hq / g.hk);
  const int64_t row0 = (bi * g.hq + h) * g.lq + i0;
  const T* q = in.q + row0 * g.e;
  const T* k = in.k + (bi * g.hk + kh) * g.lk * g.e;
  const T* v = in.v + (bi * g.hk + kh) * g.lk * g.ev;
  const T* go = static_cast<const T*>(bw.g) + row0 * g.ev;
  T* dqb = dq + row0 * g.e;
  std::fill(dqb, dqb + rows * g.e, T(0));
  T* p = p_buf.data();
  T* dp = dp_buf.data();
  const int64_t end = key_end(g, i0, rows);
  for (int64_t j0 = 0; j0 < end; j0 += kKeys) {
    const int64_t nk = std::min(kKeys, g.lk - j0);
    probabilities<T>(g, q, k, static_cast<const T*>(bw.lse) + row0, bi, h, i0, rows, j0, nk,
                     p);
    gemm<T>(CblasNoTrans, CblasTrans, rows, nk, g.ev, go, g.ev, v + j0 * g.ev, g.ev, T(0), dp,
            kKeys);
    score_grads<T>(p, dp, static_cast<const T*>(bw.d) + row0, rows, nk, T(g.scale));
    gemm<T>(CblasNoTrans, CblasNoTrans, rows, g.e, nk, dp, kKeys, k + j0 * g.e, g.e, T(1), dqb,
            g.e);
  }
}

int64_t query_blocks(const Geometry& g) { return (g.lq + kQueries - 1) / kQueries; }

template <typename T>
void run_forward(const Geometry& g, const Views<T>& in, T* out, T* lse) {
  const int64_t blocks = query_blocks(g), tasks = g.b * g.hq * blocks;
  const bool threads = tasks > 1 && g.b * g.hq * g.lq * g.lk * (g.e + g.ev) > (1 << 16);
  py::gil_scoped_release release;
#pragma omp parallel if (threads)
  {
    std::vector<T> s(kQueries * kKeys), acc(kQueries * g.ev);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t bh = t / blocks, i0 = (t % blocks) * kQueries;
      forward_block<T>(g, in, out, lse, bh / g.hq, bh % g.hq, i0,
                       std::min(kQueries, g.lq - i0), s, acc);
    }
  }
}

template <typename T>
void run_backward(const Geometry& g, const Views<T>& in, const T* go, const T* out,
                  const T* lse, T* dq, T* dk, T* dv) {
  const int64_t rows = g.b * g.hq * g.lq;
  std::vector<T> d(rows);
  const bool threads = g.b * g.hq * g.lq * g.lk * (g.e + g.ev) > (1 << 16);
  py::gil_scoped_release release;
#pragma omp parallel for schedule(static) if (threads)
  for (int64_t r = 0; r < rows; ++r) d[r] = dot_row(go + r * g.ev, out + r * g.ev, g.ev);
  const BackwardIn bw{go, d.data(), lse};
  const int64_t kblocks = (g.lk + kKeys - 1) / kKeys, qblocks = query_blocks(g);
  const int64_t groups = g.b * g.hk, group_rows = (g.hq / g.hk) * g.lq;
  int64_t team = 1;
#ifdef _OPENMP
  team = threads ? omp_get_max_threads() : 1;
#endif
  if (groups >= team) {
    // a task per key/value head, which owns its group's query rows: one pass adds every
    // gradient (the queries' over the key blocks in order, as the second pass below)
#pragma omp parallel if (threads)
    {
      std::vector<T> p(kQueries * kKeys), dp(kQueries * kKeys);
#pragma omp for schedule(static)
      for (int64_t t = 0; t < groups; ++t) {
        T* dqg = dq + t * group_rows * g.e;
        std::fill(dqg, dqg + group_rows * g.e, T(0));
        for (int64_t j0 = 0; j0 < g.lk; j0 += kKeys)
          key_block_grads<T>(g, in, bw, dk, dv, dq, t / g.hk, t % g.hk, j0, p, dp);
      }
    }
    return;
  }
  // few heads: a task per key block for the keys' and values' gradients, then one per
  // query block for the queries'
#pragma omp parallel if (threads)
  {
    std::vector<T> p(kQueries * kKeys), dp(kQueries * kKeys);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < groups * kblocks; ++t) {
      const int64_t bh = t / kblocks;
      key_block_grads<T>(g, in, bw, dk, dv, nullptr, bh / g.hk, bh % g.hk,
                         (t % kblocks) * kKeys, p, dp);
    }
#pragma omp for schedule(static)
    for (int64_t t = 0; t < g.b * g.hq * qblocks; ++t) {
      const int64_t bh = t / qblocks;
      query_block_grads<T>(g, in, bw, dq, bh / g.hq, bh % g.hq, (t % qblocks) * kQueries, p,
                           dp);
    }
  }
}

void check_rank(const std::string& fn, const std::string& name, const py::array& a,
                py::ssize_t ndim) {
  if (a.ndim() != ndim)
    throw std::runtime_error(fn + ": " + name + " must be " + std::to_string(ndim) +
                             "-D, got " + torcia_checks::shape_of(a));
}

void check_dim(const std::string& fn, const std::string& name, const py::array& a, int d,
               int64_t want) {
  if (a.shape(d) != want)
    throw std::runtime_error(fn + ": " + name + " has size " + std::to_string(a.shape(d)) +
                             " at dimension " + std::to_string(d) + ", expected " +
                             std::to_string(want));
}

// The geometry from q, k, v (checked: 4-D, C-contiguous, one float dtype, matching sizes,
// query heads a multiple of key heads) and the mask (None, or a 4-D array of q's batch,
// heads, queries and keys, bool or q's dtype, with non-negative strides: a broadcast view)
Geometry geometry(const std::string& fn, const py::array& q, const py::array& k,
                  const py::array& v, const py::object& mask, bool causal, double scale) {
  torcia_checks::float_array(fn, "q", q);
  torcia_checks::like(fn, "k", k, "q", q);
  torcia_checks::like(fn, "v", v, "q", q);
  check_rank(fn, "q", q, 4);
  check_rank(fn, "k", k, 4);
  check_rank(fn, "v", v, 4);
  Geometry g{q.shape(0), q.shape(1), k.shape(1), q.shape(2), k.shape(2), q.shape(3),
             v.shape(3), causal, scale, 0, nullptr, {0, 0, 0, 0}};
  check_dim(fn, "k", k, 0, g.b);
  check_dim(fn, "k", k, 3, g.e);
  check_dim(fn, "v", v, 0, g.b);
  check_dim(fn, "v", v, 1, g.hk);
  check_dim(fn, "v", v, 2, g.lk);
  if (g.e == 0 || g.ev == 0)
    throw std::runtime_error(fn + ": q, k and v must not have empty rows");
  if (g.hk == 0 || g.hq % g.hk != 0)
    throw std::runtime_error(fn + ": q's " + std::to_string(g.hq) +
                             " heads are not a multiple of k's " + std::to_string(g.hk));
  if (!mask.is_none()) {
    if (!py::isinstance<py::array>(mask))
      throw std::runtime_error(fn + ": mask must be an array or None");
    const py::array m = py::reinterpret_borrow<py::array>(mask);
    check_rank(fn, "mask", m, 4);
    const int64_t want[4] = {g.b, g.hq, g.lq, g.lk};
    for (int d = 0; d < 4; ++d) check_dim(fn, "mask", m, d, want[d]);
    if (torcia_checks::is_dtype<bool>(m.dtype()))
      g.mask_kind = 1;
    else if (torcia_checks::same_dtype(m.dtype(), q.dtype()))
      g.mask_kind = 2;
    else
      throw std::runtime_error(fn + ": mask must be bool or of q's dtype, got " +
                               std::string(py::str(m.dtype())));
    for (int d = 0; d < 4; ++d) {
      if (m.strides(d) < 0 || m.strides(d) % m.itemsize() != 0)
        throw std::runtime_error(fn + ": mask has a negative or unaligned stride");
      g.ms[d] = m.strides(d) / m.itemsize();
    }
    g.mask = m.data();
  }
  return g;
}

// flash_attention(q (B, Hq, Lq, E), k (B, Hk, Lk, E), v (B, Hk, Lk, Ev), mask, causal,
// scale) -> (out (B, Hq, Lq, Ev), lse (B, Hq, Lq)), new C-contiguous arrays of q's dtype
py::tuple flash_attention(const py::array& q, const py::array& k, const py::array& v,
                          const py::object& mask, bool causal, double scale) {
  const Geometry g = geometry("flash_attention", q, k, v, mask, causal, scale);
  py::array out(q.dtype(), std::vector<py::ssize_t>{g.b, g.hq, g.lq, g.ev});
  py::array lse(q.dtype(), std::vector<py::ssize_t>{g.b, g.hq, g.lq});
  if (torcia_checks::is_dtype<float>(q.dtype()))
    run_forward<float>(g, {static_cast<const float*>(q.data()),
                           static_cast<const float*>(k.data()),
                           static_cast<const float*>(v.data())},
                       static_cast<float*>(out.mutable_data()),
                       static_cast<float*>(lse.mutable_data()));
  else
    run_forward<double>(g, {static_cast<const double*>(q.data()),
                            static_cast<const double*>(k.data()),
                            static_cast<const double*>(v.data())},
                        static_cast<double*>(out.mutable_data()),
                        static_cast<double*>(lse.mutable_data()));
  return py::make_tuple(out, lse);
}

// flash_attention_backward(g, q, k, v, out, lse, mask, causal, scale) -> (dq, dk, dv):
// g and out of out's shape (B, Hq, Lq, Ev), lse (B, Hq, Lq), all C-contiguous
py::tuple flash_attention_backward(const py::array& go, const py::array& q, const py::array& k,
                                   const py::array& v, const py::array& out,
                                   const py::array& lse, const py::object& mask, bool causal,
                                   double scale) {
  const std::string fn = "flash_attention_backward";
  const Geometry g = geometry(fn, q, k, v, mask, causal, scale);
  torcia_checks::like(fn, "g", go, "q", q);
  torcia_checks::same(fn, "out", out, "g", go);
  torcia_checks::like(fn, "lse", lse, "q", q);
  check_rank(fn, "g", go, 4);
  const int64_t want[4] = {g.b, g.hq, g.lq, g.ev};
  for (int d = 0; d < 4; ++d) check_dim(fn, "g", go, d, want[d]);
  check_rank(fn, "lse", lse, 3);
  for (int d = 0; d < 3; ++d) check_dim(fn, "lse", lse, d, want[d]);
  py::array dq(q.dtype(), std::vector<py::ssize_t>(q.shape(), q.shape() + 4));
  py::array dk(k.dtype(), std::vector<py::ssize_t>(k.shape(), k.shape() + 4));
  py::array dv(v.dtype(), std::vector<py::ssize_t>(v.shape(), v.shape() + 4));
  if (torcia_checks::is_dtype<float>(q.dtype()))
    run_backward<float>(g, {static_cast<const float*>(q.data()),
                            static_cast<const float*>(k.data()),
                            static_cast<const float*>(v.data())},
                        static_cast<const float*>(go.data()),
                        static_cast<const float*>(out.data()),
                        static_cast<const float*>(lse.data()),
                        static_cast<float*>(dq.mutable_data()),
                        static_cast<float*>(dk.mutable_data()),
                        static_cast<float*>(dv.mutable_data()));
  else
    run_backward<double>(g, {static_cast<const double*>(q.data()),
                             static_cast<const double*>(k.data()),
                             static_cast<const double*>(v.data())},
                         static_cast<const double*>(go.data()),
                         static_cast<const double*>(out.data()),
                         static_cast<const double*>(lse.data()),
                         static_cast<double*>(dq.mutable_data()),
                         static_cast<double*>(dk.mutable_data()),
                         static_cast<double*>(dv.mutable_data()));
  return py::make_tuple(dq, dk, dv);
}

}  // namespace

void define_attention(py::module_& m) {
  m.def("flash_attention", &flash_attention, py::arg("q"), py::arg("k"), py::arg("v"),
        py::arg("mask"), py::arg("causal"), py::arg("scale"));
  m.def("flash_attention_backward", &flash_attention_backward, py::arg("g"), py::arg("q"),
        py::arg("k"), py::arg("v"), py::arg("out"), py::arg("lse"), py::arg("mask"),
        py::arg("causal"), py::arg("scale"));
}
