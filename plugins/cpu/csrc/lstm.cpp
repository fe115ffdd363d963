// A one-direction LSTM layer over a whole sequence, forward and back through time, in C++:
// each step's recurrent product is one GEMM against the weight packed once a call
// (packed_gemm.h) and the cell one vectorised pass, with no return to Python between steps
// (NumPy: a matmul call, temporaries and a cell call per step).
//
// On several threads (torcia's count), the batch's rows are split into a group a thread
// (at least kMinRows rows each): the rows of a batch never meet through time, so a group
// runs all steps, forward or back, without waiting on the others, and only the recurrent
// weight's gradient (one product over every row) waits for all of them. Each element of
// the steps is computed as on one thread, so on the packed products the outputs and the
// gradients but the weight's (BLAS's, in column slices) are the same bits on any thread
// count. A batch too small for groups splits the hidden units into a slice a thread
// instead: a slice of a step is its units' columns of the step's product and their cell,
// and the next step starts once every slice is done. Either way stages.h runs the work: a
// thread that has a core takes the groups or slices of one that has none. A step's product
// is too small for BLAS's own threads to pay (MKL's sleeping ones made an LSTM step 5x
// slower, see torcia_cpu/_blas.py), and they would leave the cell on one thread. The split
// depends on the shape and thread count alone, so results are the same from run to run at
// a given count.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "checks.h"
#include "gemm.h"
#include "lstm_rows.h"
#include "packed_gemm.h"
#include "stages.h"

namespace py = pybind11;
using std::int64_t;

int get_num_threads();  // torcia's thread count (kernels.cpp)

namespace {

py::array new_like(const py::array& like, std::vector<py::ssize_t> shape) {
  return py::array(like.dtype(), shape);
}

void expect_shape(const std::string& fn, const std::string& name, const py::array& a,
                  std::vector<int64_t> shape) {
  bool ok = a.ndim() == static_cast<py::ssize_t>(shape.size());
  for (size_t d = 0; ok && d < shape.size(); ++d) ok = a.shape(d) == shape[d];
  if (!ok) {
    std::string want = "(";
    for (size_t d = 0; d < shape.size(); ++d) want += (d ? ", " : "") + std::to_string(shape[d]);
    throw std::runtime_error(fn + ": " + name + " has shape " + torcia_checks::shape_of(a) +
                             ", expected " + want + ")");
  }
}

// The sizes (L, N, H) from x_gates (L, N, 4H), after checking h0, c0 (N, H) and w_hh_t
// (H, 4H): all C-contiguous, of one float dtype.
struct Dims {
  int64_t steps, batch, hidden;
};

Dims layer_dims(const std::string& fn, const py::array& x_gates, const py::array& h0,
                const py::array& c0, const py::array& w) {
  torcia_checks::float_array(fn, "x_gates", x_gates);
  if (x_gates.ndim() != 3 || x_gates.shape(2) % 4 != 0)
    throw std::runtime_error(fn + ": x_gates must be (L, N, 4H), got " +
                             torcia_checks::shape_of(x_gates));
  const Dims d{x_gates.shape(0), x_gates.shape(1), x_gates.shape(2) / 4};
  if (d.batch * 4 * d.hidden > (int64_t(1) << 31) - 1)
    throw std::runtime_error(fn + ": x_gates's steps exceed BLAS's 32-bit range");
  torcia_checks::like(fn, "h0", h0, "x_gates", x_gates);
  torcia_checks::like(fn, "c0", c0, "x_gates", x_gates);
  torcia_checks::like(fn, "w_hh_t", w, "x_gates", x_gates);
  expect_shape(fn, "h0", h0, {d.batch, d.hidden});
  expect_shape(fn, "c0", c0, {d.batch, d.hidden});
  expect_shape(fn, "w_hh_t", w, {d.hidden, 4 * d.hidden});
  return d;
}

// A step's multiply-adds (N x H x 4H) from which the layer runs on several threads, the
// fewest units a slice takes (a cache line of float32) and the fewest rows a group takes.
constexpr int64_t kThreadedMacs = 1 << 17;
constexpr int64_t kMinUnits = 16;
constexpr int64_t kMinRows = 8;

// The threads a layer call may take: torcia's count, one for a small step or inside
// another parallel region.
int64_t layer_threads(const Dims& d) {
#ifdef _OPENMP
  if (d.steps == 0 || omp_in_parallel() || d.batch * 4 * d.hidden * d.hidden < kThreadedMacs)
    return 1;
  return get_num_threads();
#else
  (void)d;
  return 1;
#endif
}

// The groups to split a layer's batch rows into: rows never meet through time, so a group
// runs every step with no wait on the others. The layer's threads, fewer where a group
// would get under kMinRows rows.
int groups_for(const Dims& d) {
  return static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>(layer_threads(d), d.batch / kMinRows)));
}

// The slices to split a layer's units into where its batch is too small for groups: the
// layer's threads, fewer where a slice would get under kMinUnits units.
int slices_for(const Dims& d) {
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(layer_threads(d), d.hidden / kMinUnits)));
}

// The first unit of slice j of `slices` over h units (j = slices gives h): boundaries on
// multiples of kMinUnits, so that slices write whole cache lines of float32 rows.
int64_t unit_bound(int64_t h, int j, int slices) {
  if (j >= slices) return h;
  return h * j / slices / kMinUnits * kMinUnits;
}

// A scratch buffer on a 64-byte boundary: GEMM's results do not then depend on where the
// allocator put it.
template <typename T>
class Scratch {
 public:
  explicit Scratch(int64_t count) {
    const size_t bytes = (std::max<int64_t>(count, 1) * sizeof(T) + 63) / 64 * 64;
    ptr_.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
    if (!ptr_) throw std::bad_alloc();
  }
  T* get() const { return ptr_.get(); }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> ptr_;
};

// The recurrent weight as every step's product reads it, B (k, n): packed once a layer
// call where packed_gemm.h runs (a BLAS call would pack it again at every step: 1.5-1.8x
// slower on OpenBLAS), else row-major for BLAS. Allocated before a parallel region, filled
// in it.
template <typename T>
class StepWeight {
 public:
  StepWeight(int64_t k, int64_t n)
      : k_(k), n_(n), packed_(torcia_packed::available()),
        data_(packed_ ? torcia_packed::packed_size<T>(k, n) : k * n) {}

  // B's element (p, j) is at(p, j)
  template <typename At>
  void fill(At at) {
    const int64_t k = k_, n = n_;
    if (packed_) {
      torcia_packed::pack<T>(k, n, at, data_.get());
      return;
    }
    T* d = data_.get();
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) d[p * n + j] = at(p, j);
  }

  // c (m, n) = a (m, k) B + beta c
  void product(int64_t m, const T* a, int64_t lda, T beta, T* c, int64_t ldc) const {
    if (m == 0 || n_ == 0) return;  // k is H or 4H: never 0 with n
    if (packed_)
      torcia_packed::gemm<T>(m, n_, k_, a, lda, data_.get(), beta, c, ldc);
    else
      gemm<T>(CblasNoTrans, CblasNoTrans, m, n_, k_, a, lda, data_.get(), n_, beta, c, ldc);
  }

 private:
  int64_t k_, n_;
  bool packed_;
  Scratch<T> data_;
};

// Runs grid.run(work) on a team of `slices` threads (or fewer, where OpenMP gives fewer).
template <typename Work>
void on_team(int slices, torcia_stages::Grid& grid, Work&& work) {
#pragma omp parallel num_threads(slices)
  grid.run(work);
}

// The forward in slices: stage 0 packs each slice's columns of the four gates of w as a
// (H, 4 * units) matrix, gate-major as the gates of a row; stage 1 + s is step s: each
// slice's gates (N, 4 * units) = x_gates' columns + h_prev times those columns, and their
// cell, which writes the slice's columns of out, cs and acts.
template <typename T>
void forward_split(const Dims& d, int slices, const T* xg, const T* h0, const T* c0,
                   const T* w, T* out, T* cs, T* acts) {
  const int64_t n = d.batch, h = d.hidden, g = 4 * h;
  std::vector<StepWeight<T>> wp;
  std::vector<Scratch<T>> gates;
  wp.reserve(slices);
  gates.reserve(slices);
  for (int j = 0; j < slices; ++j) {
    const int64_t u = unit_bound(h, j + 1, slices) - unit_bound(h, j, slices);
    wp.emplace_back(h, 4 * u);
    gates.emplace_back(n * 4 * u);
  }
  torcia_stages::Grid grid(1 + d.steps, slices);
  on_team(slices, grid, [&](int64_t stage, int j) {
    const int64_t lo = unit_bound(h, j, slices), u = unit_bound(h, j + 1, slices) - lo;
    if (stage == 0) {
      wp[j].fill([&](int64_t p, int64_t c) { return w[p * g + c / u * h + lo + c % u]; });
      return;
    }
    const int64_t s = stage - 1;
    const T* h_prev = s == 0 ? h0 : out + (s - 1) * n * h;
    const T* c_prev = s == 0 ? c0 : cs + (s - 1) * n * h;
    T* gt = gates[j].get();
    const T* xs = xg + s * n * g;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t q = 0; q < 4; ++q)
        std::memcpy(gt + r * 4 * u + q * u, xs + r * g + q * h + lo, sizeof(T) * u);
    wp[j].product(n, h_prev, h, T(1), gt, 4 * u);
    T* ht = out + s * n * h;
    T* ct = cs + s * n * h;
    T* at = acts + s * n * g;
    for (int64_t r = 0; r < n; ++r)
      lstm_cell_row(gt + r * 4 * u, u, c_prev + r * h + lo, at + r * g + lo, h,
                    ht + r * h + lo, ct + r * h + lo, u);
  });
}

// Rows [r0, r1) of the forward through every step, on the packed weight all groups share.
template <typename T>
void forward_rows(const Dims& d, int64_t r0, int64_t r1, const StepWeight<T>& wp, const T* xg,
                  const T* h0, const T* c0, T* out, T* cs, T* acts) {
  const int64_t n = d.batch, h = d.hidden, g = 4 * h, m = r1 - r0;
  Scratch<T> gates(m * g);
  T* gt = gates.get();
  const T* h_prev = h0 + r0 * h;
  const T* c_prev = c0 + r0 * h;
  for (int64_t t = 0; t < d.steps; ++t) {
    std::memcpy(gt, xg + (t * n + r0) * g, sizeof(T) * m * g);
    wp.product(m, h_prev, h, T(1), gt, g);
    T* ht = out + (t * n + r0) * h;
    T* ct = cs + (t * n + r0) * h;
    T* at = acts + (t * n + r0) * g;
    for (int64_t r = 0; r < m; ++r)
      lstm_cell_row(gt + r * g, h, c_prev + r * h, at + r * g, h, ht + r * h, ct + r * h, h);
    h_prev = ht;
    c_prev = ct;
  }
}

template <typename T>
void forward(const Dims& d, const T* xg, const T* h0, const T* c0, const T* w, T* out, T* cs,
             T* acts) {
  py::gil_scoped_release release;
  const int groups = groups_for(d);
  const int slices = groups > 1 ? 1 : slices_for(d);
  if (slices > 1) {
    forward_split<T>(d, slices, xg, h0, c0, w, out, cs, acts);
    return;
  }
  const int64_t n = d.batch, h = d.hidden, g = 4 * h;
  StepWeight<T> wp(h, g);
  wp.fill([&](int64_t p, int64_t c) { return w[p * g + c]; });
  if (groups == 1) {
    forward_rows<T>(d, 0, n, wp, xg, h0, c0, out, cs, acts);
    return;
  }
  torcia_stages::Grid grid(1, groups);
  on_team(groups, grid, [&](int64_t, int j) {
    forward_rows<T>(d, n * j / groups, n * (j + 1) / groups, wp, xg, h0, c0, out, cs, acts);
  });
}

// lstm_layer(x_gates (L, N, 4H), h0 (N, H), c0 (N, H), w_hh_t (H, 4H)) -> (out (L, N, H),
// cs (L, N, H), acts (L, N, 4H)), as core's reference kernel of the same name.
py::tuple lstm_layer(const py::array& x_gates, const py::array& h0, const py::array& c0,
                     const py::array& w_hh_t) {
  const Dims d = layer_dims("lstm_layer", x_gates, h0, c0, w_hh_t);
  py::array out = new_like(x_gates, {d.steps, d.batch, d.hidden});
  py::array cs = new_like(x_gates, {d.steps, d.batch, d.hidden});
  py::array acts = new_like(x_gates, {d.steps, d.batch, 4 * d.hidden});
  if (torcia_checks::is_dtype<float>(x_gates.dtype()))
    forward<float>(d, static_cast<const float*>(x_gates.data()),
                   static_cast<const float*>(h0.data()), static_cast<const float*>(c0.data()),
                   static_cast<const float*>(w_hh_t.data()),
                   static_cast<float*>(out.mutable_data()), static_cast<float*>(cs.mutable_data()),
                   static_cast<float*>(acts.mutable_data()));
  else
    forward<double>(d, static_cast<const double*>(x_gates.data()),
                    static_cast<const double*>(h0.data()), static_cast<const double*>(c0.data()),
                    static_cast<const double*>(w_hh_t.data()),
                    static_cast<double*>(out.mutable_data()),
                    static_cast<double*>(cs.mutable_data()),
                    static_cast<double*>(acts.mutable_data()));
  return py::make_tuple(out, cs, acts);
}

// Columns [c_lo, c_hi) of the recurrent weight's gradient, one product over all steps:
// [h0; out[:-1]]^T g_gates
template <typename T>
void weight_grad(const Dims& d, int64_t c_lo, int64_t c_hi, const T* h0, const T* out,
                 const T* g_gates, T* g_w) {
  const int64_t n = d.batch, h = d.hidden, g = 4 * h, width = c_hi - c_lo;
  if (width == 0 || h == 0) return;
  if (n == 0) {
    for (int64_t i = 0; i < h; ++i) std::fill_n(g_w + i * g + c_lo, width, T(0));
    return;
  }
  gemm<T>(CblasTrans, CblasNoTrans, h, width, n, h0, h, g_gates + c_lo, g, T(0), g_w + c_lo, g);
  if (d.steps > 1)
    gemm<T>(CblasTrans, CblasNoTrans, h, width, (d.steps - 1) * n, out, h,
            g_gates + n * g + c_lo, g, T(1), g_w + c_lo, g);
}

// The backward in the forward's slices. Stage 0 packs each slice's columns of w^T,
// (4H, units), and zeroes its columns of dh and dc.
// Then two stages a step, last step first: the slice's cell derivative, writing its
// columns of the step's g_gates and of dc; then its columns of dh = g_gates w^T, which
// read all of the step's g_gates. The last stage splits the 4H columns of
// grad_w_hh_t = [h0; out[:-1]]^T g_gates into slices.
template <typename T>
void backward_split(const Dims& d, int slices, const T* g_out, const T* g_cs, const T* acts,
                    const T* cs, const T* out, const T* h0, const T* c0, const T* w,
                    T* g_gates, T* dh, T* dc, T* g_w) {
  const int64_t n = d.batch, h = d.hidden, g = 4 * h, nh = n * h;
  std::vector<StepWeight<T>> w_t;
  std::vector<Scratch<T>> gh, gc;
  w_t.reserve(slices);
  gh.reserve(slices);
  gc.reserve(slices);
  for (int j = 0; j < slices; ++j) {
    const int64_t u = unit_bound(h, j + 1, slices) - unit_bound(h, j, slices);
    w_t.emplace_back(g, u);
    gh.emplace_back(n * u);
    gc.emplace_back(n * u);
  }
  const int64_t last = 1 + 2 * d.steps;
  torcia_stages::Grid grid(last + 1, slices);
  on_team(slices, grid, [&](int64_t stage, int j) {
    const int64_t lo = unit_bound(h, j, slices), u = unit_bound(h, j + 1, slices) - lo;
    if (stage == 0) {
      w_t[j].fill([&](int64_t p, int64_t k) { return w[(lo + k) * g + p]; });
      for (int64_t r = 0; r < n; ++r) {
        std::fill_n(dh + r * h + lo, u, T(0));
        std::fill_n(dc + r * h + lo, u, T(0));
      }
      return;
    }
    if (stage == last) {
      weight_grad<T>(d, g * j / slices, g * (j + 1) / slices, h0, out, g_gates, g_w);
      return;
    }
    const int64_t s = d.steps - 1 - (stage - 1) / 2;
    T* gt = g_gates + s * n * g;
    if ((stage - 1) % 2 == 1) {
      w_t[j].product(n, gt, g, T(0), dh + lo, h);
      return;
    }
    T* ghj = gh[j].get();
    T* gcj = gc[j].get();
    for (int64_t r = 0; r < n; ++r) {
      const int64_t e = r * h + lo;
      for (int64_t k = 0; k < u; ++k) {
        ghj[r * u + k] = g_out ? dh[e + k] + g_out[s * nh + e + k] : dh[e + k];
        gcj[r * u + k] = g_cs ? dc[e + k] + g_cs[s * nh + e + k] : dc[e + k];
      }
    }
    const T* c_prev = s == 0 ? c0 : cs + (s - 1) * nh;
    for (int64_t r = 0; r < n; ++r)
      lstm_cell_backward_row(ghj + r * u, gcj + r * u, acts + s * n * g + r * g + lo,
                             c_prev + r * h + lo, cs + s * nh + r * h + lo, gt + r * g + lo,
                             dc + r * h + lo, u, h);
  });
}

// Rows [r0, r1) of the backward through every step (their rows of g_gates, dh and dc), on
// the packed w^T all groups share.
template <typename T>
void backward_rows(const Dims& d, int64_t r0, int64_t r1, const StepWeight<T>& w_t,
                   const T* g_out, const T* g_cs, const T* acts, const T* cs, const T* c0,
                   T* g_gates, T* dh, T* dc) {
  const int64_t n = d.batch, h = d.hidden, g = 4 * h, nh = n * h, m = r1 - r0, mh = m * h;
  Scratch<T> gh(mh), gc(mh);
  dh += r0 * h;
  dc += r0 * h;
  std::fill(dh, dh + mh, T(0));
  std::fill(dc, dc + mh, T(0));
  for (int64_t t = d.steps - 1; t >= 0; --t) {
    const int64_t e = t * nh + r0 * h;
    for (int64_t k = 0; k < mh; ++k) {
      gh.get()[k] = g_out ? dh[k] + g_out[e + k] : dh[k];
      gc.get()[k] = g_cs ? dc[k] + g_cs[e + k] : dc[k];
    }
    const T* c_prev = t == 0 ? c0 + r0 * h : cs + e - nh;
    T* gt = g_gates + (t * n + r0) * g;
    for (int64_t r = 0; r < m; ++r)
      lstm_cell_backward_row(gh.get() + r * h, gc.get() + r * h, acts + (t * n + r0) * g + r * g,
                             c_prev + r * h, cs + e + r * h, gt + r * g, dc + r * h, h, h);
    w_t.product(m, gt, g, T(0), dh, h);
  }
}

template <typename T>
void backward(const Dims& d, const T* g_out, const T* g_cs, const T* acts, const T* cs,
              const T* out, const T* h0, const T* c0, const T* w, T* g_gates, T* dh, T* dc,
              T* g_w) {
  py::gil_scoped_release release;
  const int groups = groups_for(d);
  const int slices = groups > 1 ? 1 : slices_for(d);
  if (slices > 1) {
    backward_split<T>(d, slices, g_out, g_cs, acts, cs, out, h0, c0, w, g_gates, dh, dc, g_w);
    return;
  }
  const int64_t n = d.batch, h = d.hidden, g = 4 * h;
  // w (H, 4H) transposed once: BLAS runs the per-step products ~1.3x faster on a
  // row-major operand than on w read transposed
  StepWeight<T> w_t(g, h);
  w_t.fill([&](int64_t p, int64_t k) { return w[k * g + p]; });
  if (groups == 1) {
    backward_rows<T>(d, 0, n, w_t, g_out, g_cs, acts, cs, c0, g_gates, dh, dc);
    weight_grad<T>(d, 0, g, h0, out, g_gates, g_w);
    return;
  }
  // stage 0: each group's rows through time; stage 1: the weight gradient's columns in
  // slices, once every row of g_gates is done
  torcia_stages::Grid grid(2, groups);
  on_team(groups, grid, [&](int64_t stage, int j) {
    if (stage == 0)
      backward_rows<T>(d, n * j / groups, n * (j + 1) / groups, w_t, g_out, g_cs, acts, cs, c0,
                       g_gates, dh, dc);
    else
      weight_grad<T>(d, g * j / groups, g * (j + 1) / groups, h0, out, g_gates, g_w);
  });
}

// dst (cols, rows) = src (rows, cols)^T in tiles of 16 x 16, each read along src's rows:
// NumPy's copy of the transposed view runs down src's columns, cols * sizeof(T) apart
// (2 KB for 128 units: a few cache sets), at ~2.3 ns an element
template <typename T>
void transpose_into(const T* src, int64_t rows, int64_t cols, T* dst) {
  constexpr int64_t kTile = 16;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile)
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(cols, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t j = j0; j < j1; ++j) dst[j * rows + i] = src[i * cols + j];
    }
}

const void* optional_grad(const std::string& fn, const std::string& name, const py::object& a,
                          const py::array& like) {
  if (a.is_none()) return nullptr;
  if (!py::isinstance<py::array>(a))
    throw std::runtime_error(fn + ": " + name + " must be an array or None");
  const py::array arr = py::reinterpret_borrow<py::array>(a);
  torcia_checks::same(fn, name, arr, "out", like);
  return arr.data();
}

// lstm_layer_backward(g_out, g_cs, acts, cs, out, h0, c0, w_hh_t) -> (grad_x_gates,
// grad_h0, grad_c0, grad_w_hh_t), as core's reference kernel; g_out or g_cs may be None.
py::tuple lstm_layer_backward(const py::object& g_out, const py::object& g_cs,
                              const py::array& acts, const py::array& cs, const py::array& out,
                              const py::array& h0, const py::array& c0,
                              const py::array& w_hh_t) {
  const std::string fn = "lstm_layer_backward";
  const Dims d = layer_dims(fn, acts, h0, c0, w_hh_t);
  torcia_checks::like(fn, "cs", cs, "acts", acts);
  torcia_checks::like(fn, "out", out, "acts", acts);
  expect_shape(fn, "cs", cs, {d.steps, d.batch, d.hidden});
  expect_shape(fn, "out", out, {d.steps, d.batch, d.hidden});
  const void* go = optional_grad(fn, "g_out", g_out, out);
  const void* gcs = optional_grad(fn, "g_cs", g_cs, out);
  py::array g_gates = new_like(acts, {d.steps, d.batch, 4 * d.hidden});
  py::array dh = new_like(acts, {d.batch, d.hidden}), dc = new_like(acts, {d.batch, d.hidden});
  py::array g_w = new_like(acts, {d.hidden, 4 * d.hidden});
  // grad_w_hh_t is handed back as the transpose of a (4H, H) array: the module transposes
  // it into w_hh's gradient, which the engine would otherwise copy into w_hh's layout
  // (0.15 ms for an LSTM of 128 units; 0.02 ms here)
  py::array g_w_t = new_like(acts, {4 * d.hidden, d.hidden});
  if (torcia_checks::is_dtype<float>(acts.dtype()))
    backward<float>(d, static_cast<const float*>(go), static_cast<const float*>(gcs),
                    static_cast<const float*>(acts.data()), static_cast<const float*>(cs.data()),
                    static_cast<const float*>(out.data()), static_cast<const float*>(h0.data()),
                    static_cast<const float*>(c0.data()),
                    static_cast<const float*>(w_hh_t.data()),
                    static_cast<float*>(g_gates.mutable_data()),
                    static_cast<float*>(dh.mutable_data()), static_cast<float*>(dc.mutable_data()),
                    static_cast<float*>(g_w.mutable_data()));
  else
    backward<double>(d, static_cast<const double*>(go), static_cast<const double*>(gcs),
                     static_cast<const double*>(acts.data()),
                     static_cast<const double*>(cs.data()),
                     static_cast<const double*>(out.data()),
                     static_cast<const double*>(h0.data()), static_cast<const double*>(c0.data()),
                     static_cast<const double*>(w_hh_t.data()),
                     static_cast<double*>(g_gates.mutable_data()),
                     static_cast<double*>(dh.mutable_data()),
                     static_cast<double*>(dc.mutable_data()),
                     static_cast<double*>(g_w.mutable_data()));
  if (torcia_checks::is_dtype<float>(acts.dtype()))
    transpose_into<float>(static_cast<const float*>(g_w.data()), d.hidden, 4 * d.hidden,
                          static_cast<float*>(g_w_t.mutable_data()));
  else
    transpose_into<double>(static_cast<const double*>(g_w.data()), d.hidden, 4 * d.hidden,
                           static_cast<double*>(g_w_t.mutable_data()));
  return py::make_tuple(g_gates, dh, dc, g_w_t.attr("T"));
}

}  // namespace

void define_lstm(py::module_& m) {
  m.def("lstm_layer", &lstm_layer, py::arg("x_gates"), py::arg("h0"), py::arg("c0"),
        py::arg("w_hh_t"));
  m.def("lstm_layer_backward", &lstm_layer_backward, py::arg("g_out"), py::arg("g_cs"),
        py::arg("acts"), py::arg("cs"), py::arg("out"), py::arg("h0"), py::arg("c0"),
        py::arg("w_hh_t"));
}
