// torcia-cpu: native kernels for torcia's "cpu" device.
//
// Only the work NumPy does poorly lives here: gathering and scattering convolution
// windows (im2col/col2im), pooling, embedding scatter-add, softmax, the LSTM cell, fused
// optimizer updates over many arrays; activations, normalisation and the products run on
// the extension's own OpenBLAS are in the other files of csrc/, registered at the end.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "checks.h"
#include "gemm.h"
#include "lstm_rows.h"
#include "team.h"
#include "vecmath.h"
#include "winograd.h"

// defined in activations.cpp, attention.cpp, elementwise.cpp, norm.cpp, blas.cpp and
// lstm.cpp
void define_activations(pybind11::module_& m);
void define_attention(pybind11::module_& m);
void define_elementwise(pybind11::module_& m);
void define_norm(pybind11::module_& m);
void define_blas(pybind11::module_& m);
void define_lstm(pybind11::module_& m);
void define_quant(pybind11::module_& m);
void define_memory(pybind11::module_& m);

namespace py = pybind11;
using std::int64_t;

template <typename T>
using carray = py::array_t<T, py::array::c_style | py::array::forcecast>;

// The team OpenMP runs a parallel region on until set_num_threads: its default (the CPU
// count, or OMP_NUM_THREADS), which is also torcia's default count. The plugin calls
// set_num_threads only for a count set explicitly (plugin.py), so starting at 1 left the
// kernels that size their work by this count (convolution) on one thread by default.
static int initial_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

static int num_threads = initial_threads();

// Below this many elements a loop runs on the calling thread: waking the team costs more
// than it saves, and much more when the machine is loaded.
constexpr int64_t kParallelWork = 1 << 16;

void set_num_threads(int n) {
  num_threads = std::max(1, n);
#ifdef _OPENMP
  omp_set_num_threads(num_threads);
#endif
}

int get_num_threads() { return num_threads; }

// Whether 3x3 convolutions of stride 1 may run by Winograd's F(2x2, 3x3) (winograd.h);
// off, every convolution is im2col and one GEMM (TORCIA_CPU_WINOGRAD=0, see plugin.py).
static bool winograd_enabled = true;

void set_winograd(bool on) { winograd_enabled = on; }

// ----- argument checks ------------------------------------------------------------------
// Every entry point checks what it is given before it touches memory: the kernels index
// raw pointers, so a size or geometry the caller got wrong (an optimizer state from a
// checkpoint, a hand-built call) would read or write out of bounds instead of failing.
// std::runtime_error reaches Python as RuntimeError.

[[noreturn]] static void fail(const std::string& fn, const std::string& what) {
  throw std::runtime_error(fn + ": " + what);
}

static std::string shape_of(const py::array& a) {
  std::string s = "[";
  for (py::ssize_t d = 0; d < a.ndim(); ++d) s += (d ? ", " : "") + std::to_string(a.shape(d));
  return s + "]";
}

static void check_ndim(const std::string& fn, const char* name, const py::array& a, int nd) {
  if (a.ndim() != nd)
    fail(fn, std::string(name) + " must be " + std::to_string(nd) + "-D, got shape " +
                 shape_of(a));
}

static void check_dim(const std::string& fn, const char* name, const py::array& a, int d,
                      int64_t want) {
  if (a.shape(d) != want)
    fail(fn, std::string(name) + " has size " + std::to_string(a.shape(d)) + " at dimension " +
                 std::to_string(d) + ", expected " + std::to_string(want) + " (shape " +
                 shape_of(a) + ")");
}

static void check_at_least(const std::string& fn, const char* name, int64_t v, int64_t lo) {
  if (v < lo)
    fail(fn, std::string(name) + " must be at least " + std::to_string(lo) + ", got " +
                 std::to_string(v));
}

// a * b, or an error where it overflows int64 (a huge stride or size would wrap around)
static int64_t mul(const std::string& fn, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail(fn, "sizes overflow 64-bit integers");
  return r;
}

static int64_t add(const std::string& fn, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail(fn, "sizes overflow 64-bit integers");
  return r;
}

// One spatial axis of a window geometry: kernel k >= 1, stride s >= 1, dilation d >= 1,
// padding p >= 0, out >= 0 windows, and the farthest position a window reaches,
// (out - 1) * s + (k - 1) * d, representable.
static void check_axis(const std::string& fn, const char* axis, int64_t k, int64_t s, int64_t p,
                       int64_t d, int64_t out) {
  const std::string a(axis);
  check_at_least(fn, ("kernel size " + a).c_str(), k, 1);
  check_at_least(fn, ("stride " + a).c_str(), s, 1);
  check_at_least(fn, ("dilation " + a).c_str(), d, 1);
  check_at_least(fn, ("padding " + a).c_str(), p, 0);
  check_at_least(fn, ("output size " + a).c_str(), out, 0);
  if (out > 0) add(fn, add(fn, mul(fn, out - 1, s), mul(fn, k - 1, d)), p);
}

// Pooling windows must each hold an input element, as PyTorch requires: otherwise a max
// has no index to record and the backward would write before the plane.
static void check_pool_padding(const std::string& fn, int64_t p, int64_t k, int64_t d) {
  if (p > (d * (k - 1) + 1) / 2)
    fail(fn, "pad should be at most half of effective kernel size, but got pad=" +
                 std::to_string(p) + ", kernel_size=" + std::to_string(k) +
                 " and dilation=" + std::to_string(d));
}

// The arrays of one fused optimizer update: numpy arrays of T, C-contiguous, writeable
// where the update writes, each of its parameter's size.
template <typename T>
static T* checked_ptr(const std::string& fn, const char* name, size_t i, py::handle h,
                      int64_t size, bool write) {
  const std::string what = std::string(name) + "[" + std::to_string(i) + "]";
  if (!py::isinstance<py::array>(h)) fail(fn, what + " is not a numpy array");
  py::array a = py::reinterpret_borrow<py::array>(h);
  if (!torcia_checks::is_dtype<T>(a.dtype()))
    fail(fn, what + " has dtype " + std::string(py::str(a.dtype())) + ", expected " +
                 std::string(py::str(py::dtype::of<T>())));
  if (!(a.flags() & py::array::c_style)) fail(fn, what + " is not C-contiguous");
  if (write && !a.writeable()) fail(fn, what + " is read-only");
  if (size >= 0 && a.size() != size)
    fail(fn, what + " has " + std::to_string(a.size()) + " elements (shape " + shape_of(a) +
                 "), its parameter " + std::to_string(size));
  return static_cast<T*>(write ? a.mutable_data() : const_cast<void*>(a.data()));
}

static void check_count(const std::string& fn, const char* name, size_t have, size_t want) {
  if (have != want)
    fail(fn, std::string(name) + " has " + std::to_string(have) + " entries, params " +
                 std::to_string(want));
}

// The outputs [lo, hi) of a row whose input column j * stride + off falls inside [0, w).
static inline void inside(int64_t off, int64_t stride, int64_t w, int64_t ow, int64_t& lo,
                          int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  hi = off >= w ? 0 : std::min(ow, (w - off + stride - 1) / stride);
  lo = std::min(lo, hi);
}

// A convolution's window geometry along both spatial axes (padding: the low side's).
struct Window {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};

// One offset (ki, kj) of the window: the input position (i * sh + y0, j * sw + x0) output
// (i, j) reads there, and the outputs [ilo, ihi) x [lo, hi) for which it lies inside the
// input (the others read padding). Computed once per call, so that the loops over
// channels and samples do no integer division.
struct Tap {
  int64_t y0, x0, ilo, ihi, lo, hi;
};

static std::vector<Tap> window_taps(const Window& g, int64_t h, int64_t w) {
  std::vector<Tap> taps(g.kh * g.kw);
  for (int64_t ki = 0; ki < g.kh; ++ki) {
    for (int64_t kj = 0; kj < g.kw; ++kj) {
      Tap& t = taps[ki * g.kw + kj];
      t.y0 = ki * g.dh - g.ph;
      t.x0 = kj * g.dw - g.pw;
      inside(t.y0, g.sh, h, g.oh, t.ilo, t.ihi);
      inside(t.x0, g.sw, w, g.ow, t.lo, t.hi);
    }
  }
  return taps;
}

// A row of the columns: what each output position's window reads from one input plane
// at one tap, 0 where that falls in the padding.
template <typename T>
static void im2col_tap(const T* __restrict__ plane, T* __restrict__ row, const Tap& t,
                       int64_t w, const Window& g) {
  const int64_t ow = g.ow;
  std::fill(row, row + t.ilo * ow, T(0));
  if (g.sw == 1 && t.lo == 0 && t.hi == ow && ow == w && g.sh == 1) {
    // whole input rows, one after the other
    std::copy_n(plane + (t.ilo + t.y0) * w + t.x0, (t.ihi - t.ilo) * ow, row + t.ilo * ow);
  } else {
    for (int64_t i = t.ilo; i < t.ihi; ++i) {
      const T* line = plane + (i * g.sh + t.y0) * w + t.x0;
      T* o = row + i * ow;
      std::fill(o, o + t.lo, T(0));
      if (g.sw == 1) {
        std::copy(line + t.lo, line + t.hi, o + t.lo);
      } else {
        for (int64_t j = t.lo; j < t.hi; ++j) o[j] = line[j * g.sw];
      }
      std::fill(o + t.hi, o + ow, T(0));
    }
  }
  std::fill(row + std::max(t.ihi, t.ilo) * ow, row + g.oh * ow, T(0));
}

// The adjoint of im2col_tap: a row of the columns added into the input plane.
template <typename T>
static void col2im_tap(const T* __restrict__ row, T* __restrict__ plane, const Tap& t,
                       int64_t w, const Window& g) {
  for (int64_t i = t.ilo; i < t.ihi; ++i) {
    T* line = plane + (i * g.sh + t.y0) * w + t.x0;
    const T* rr = row + i * g.ow;
    for (int64_t j = t.lo; j < t.hi; ++j) line[j * g.sw] += rr[j];
  }
}

static Window checked_window(const std::string& fn, int64_t kh, int64_t kw, int64_t sh,
                             int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                             int64_t oh, int64_t ow) {
  check_axis(fn, "(height)", kh, sh, ph, dh, oh);
  check_axis(fn, "(width)", kw, sw, pw, dw, ow);
  return {kh, kw, sh, sw, ph, pw, dh, dw, oh, ow};
}

// x (N, C, H, W) -> cols (N, C*kh*kw, OH*OW), or (C*kh*kw, N, OH*OW) when batch_inner
// (the layout of one product over the whole batch); positions outside the input read 0.
template <typename T>
py::array_t<T> im2col(carray<T> x, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                      int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t oh, int64_t ow,
                      bool batch_inner) {
  const std::string fn = "im2col";
  check_ndim(fn, "x", x, 4);
  const Window g = checked_window(fn, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow);
  const int64_t n = x.shape(0), c = x.shape(1), h = x.shape(2), w = x.shape(3);
  const int64_t rows = mul(fn, c, mul(fn, kh, kw)), p = mul(fn, oh, ow);
  mul(fn, mul(fn, rows, n), p);
  py::array_t<T> out = batch_inner ? py::array_t<T>({rows, n, p}) : py::array_t<T>({n, rows, p});
  T* dst = out.mutable_data();
  const T* src = x.data();
  const std::vector<Tap> taps = window_taps(g, h, w);
  const int64_t kk = kh * kw;
  {
    py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    collapse(2) schedule(static) if (n * rows * p > kParallelWork)
    for (int64_t b = 0; b < n; ++b)
      for (int64_t r = 0; r < rows; ++r)
        im2col_tap(src + (b * c + r / kk) * h * w,
                   dst + (batch_inner ? r * n + b : b * rows + r) * p, taps[r % kk], w, g);
  }
  return out;
}

// The adjoint of im2col: cols (N, C*kh*kw, OH*OW), or (C*kh*kw, N, OH*OW) when
// batch_inner, summed back into (N, C, H, W).
template <typename T>
py::array_t<T> col2im(carray<T> cols, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh,
                      int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,
                      int64_t dw, int64_t oh, int64_t ow, bool batch_inner) {
  const std::string fn = "col2im";
  const Window g = checked_window(fn, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow);
  check_at_least(fn, "n", n, 0);
  check_at_least(fn, "channels", c, 0);
  check_at_least(fn, "height", h, 0);
  check_at_least(fn, "width", w, 0);
  mul(fn, mul(fn, n, c), mul(fn, h, w));
  const int64_t rows = mul(fn, c, mul(fn, kh, kw)), p = mul(fn, oh, ow);
  if (cols.size() != mul(fn, mul(fn, n, rows), p))
    fail(fn, "cols has " + std::to_string(cols.size()) + " elements, the geometry needs " +
                 std::to_string(n * rows * p));
  py::array_t<T> out({n, c, h, w});
  T* dst = out.mutable_data();
  const T* src = cols.data();
  const std::vector<Tap> taps = window_taps(g, h, w);
  {
    py::gil_scoped_release release;
    // one (batch, channel) plane per task: no two tasks write the same element
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    collapse(2) schedule(static) if (n * rows * p > kParallelWork)
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t ch = 0; ch < c; ++ch) {
        T* sample = dst + b * c * h * w;
        std::fill(sample + ch * h * w, sample + (ch + 1) * h * w, T(0));
        for (int64_t t = 0; t < kh * kw; ++t) {
          const int64_t r = ch * kh * kw + t;
          col2im_tap(src + (batch_inner ? r * n + b : b * rows + r) * p, sample + ch * h * w,
                     taps[t], w, g);
        }
      }
    }
  }
  return out;
}

// ----- 2-D convolution without groups, a few samples at a time -----------------------------
// A chunk of samples' columns (C*kh*kw, samples * OH*OW) fits in cache and goes straight
// into one GEMM with the weight: no columns for the whole batch, and, where a sample has
// enough positions to make the product wide (a chunk of one sample), no (O, N, ...) to
// (N, O, ...) transpose either: the product is the sample's output planes. On this
// machine's OpenBLAS a (64, 288) x (288, 196) product per sample runs faster than one
// (64, 288) x (288, 12544), while samples of 2x2 positions need dozens in one product
// (a (512, 4608) x (4608, 4) product is GEMV-bound: 3.5x slower per sample). A 1x1 window
// of stride 1 without padding reads a single sample's planes as its columns. Chunks are
// spread over OpenMP threads, each with its own buffers and single-threaded GEMMs.

// Columns a chunk's product should have at least.
constexpr int64_t kChunkColumns = 512;

// Samples per chunk for p positions each: enough for kChunkColumns, at most n, and at
// most n / threads (rounded up) so that every thread gets a chunk.
static int64_t chunk_samples(int64_t n, int64_t p, bool threads) {
  int64_t nb = std::max<int64_t>(1, (kChunkColumns + p - 1) / std::max<int64_t>(p, 1));
  if (threads) nb = std::min(nb, (n + get_num_threads() - 1) / get_num_threads());
  return std::max<int64_t>(1, std::min(nb, n));
}

// whether a window's columns are the input planes themselves
static bool identity_window(const Window& g, int64_t h, int64_t w) {
  return g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 &&
         g.oh == h && g.ow == w;
}

// a dimension BLAS's 32-bit integers can hold
static void check_blas_dim(const std::string& fn, int64_t v) {
  if (v > (int64_t(1) << 31) - 1) fail(fn, "a matrix dimension exceeds BLAS's 32-bit range");
}

// Whether a convolution of window g, n samples, c input and o output channels and an
// output of oh x ow runs by Winograd (winograd.h): a 3x3 window of stride 1 without
// dilation, in a layer whose sizes repay the transforms.
static bool winograd_applies(const Window& g, int64_t n, int64_t c, int64_t o, int64_t oh,
                             int64_t ow) {
  return winograd_enabled && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 &&
         g.dw == 1 && winograd::worth(n, c, o, oh, ow);
}

// Output rows shorter than this gather their columns through a table of offsets, one per
// tap and output position, padding reading a zero kept past a copy of the plane: at
// ResNet's 4x4 and 2x2 planes a row piece is 2-4 elements, and the memcpy and memset
// calls per piece cost several times the data (im2col of (32, 256, 4, 4): 1.8 ms).
constexpr int64_t kShortRow = 16;

// offsets[t * p + q]: where output position q reads the plane at tap t, or h * w (the
// zero) where it reads padding; empty where the rows are long enough to copy.
static std::vector<int32_t> short_row_offsets(const Window& g, const std::vector<Tap>& taps,
                                              int64_t h, int64_t w) {
  const int64_t p = g.oh * g.ow;
  // the offsets (up to h * w) and the adjoint's (up to taps * p) are 32-bit
  if (g.ow >= kShortRow || h * w >= (int64_t(1) << 30) ||
      static_cast<int64_t>(taps.size()) * p >= (int64_t(1) << 30))
    return {};
  std::vector<int32_t> off(taps.size() * p, static_cast<int32_t>(h * w));
  for (size_t t = 0; t < taps.size(); ++t)
    for (int64_t i = taps[t].ilo; i < taps[t].ihi; ++i)
      for (int64_t j = taps[t].lo; j < taps[t].hi; ++j)
        off[t * p + i * g.ow + j] =
            static_cast<int32_t>((i * g.sh + taps[t].y0) * w + taps[t].x0 + j * g.sw);
  return off;
}

// The adjoint's table, for col2im of short rows: sources[t * h * w + y] is where in a
// sample's kk rows of p (laid end to end) tap t of input position y was read, or kk * p
// (a zero past them) where no output read it there; empty where off is. Each position
// then sums its taps in tap order, as col2im_tap's passes add them.
static std::vector<int32_t> short_row_sources(const std::vector<int32_t>& off, int64_t kk,
                                              int64_t p, int64_t hw) {
  if (off.empty()) return {};
  std::vector<int32_t> src(kk * hw, static_cast<int32_t>(kk * p));
  for (int64_t t = 0; t < kk; ++t)
    for (int64_t q = 0; q < p; ++q)
      if (off[t * p + q] < hw) src[t * hw + off[t * p + q]] = static_cast<int32_t>(t * p + q);
  return src;
}

template <typename T>
TORCIA_CLONES static void sum_taps(const T* __restrict__ rows, const int32_t* __restrict__ src,
                                   int64_t kk, int64_t hw, T* __restrict__ plane) {
  for (int64_t y = 0; y < hw; ++y) plane[y] = T(0);
  for (int64_t t = 0; t < kk; ++t)
    for (int64_t y = 0; y < hw; ++y) plane[y] += rows[src[t * hw + y]];
}

template <typename T>
TORCIA_CLONES static void gather_row(const T* __restrict__ plane,
                                     const int32_t* __restrict__ off, int64_t p,
                                     T* __restrict__ row) {
  for (int64_t q = 0; q < p; ++q) row[q] = plane[off[q]];
}

// The columns of samples [b0, b0 + nb) of x (each sample c planes h x w) as (k, nb * p):
// row r holds each sample's p positions in turn. `off` from short_row_offsets.
template <typename T>
static void chunk_columns(const T* x, int64_t c, int64_t b0, int64_t nb, int64_t p, int64_t h,
                          int64_t w, const Window& g, const std::vector<Tap>& taps,
                          const std::vector<int32_t>& off, T* cols) {
  const int64_t kk = static_cast<int64_t>(taps.size());
  if (!off.empty()) {
    std::vector<T> plane(h * w + 1, T(0));
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t j = 0; j < nb; ++j) {
        std::copy_n(x + ((b0 + j) * c + ch) * h * w, h * w, plane.data());
        for (int64_t t = 0; t < kk; ++t)
          gather_row(plane.data(), off.data() + t * p, p, cols + ((ch * kk + t) * nb + j) * p);
      }
    return;
  }
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t t = 0; t < kk; ++t)
      for (int64_t j = 0; j < nb; ++j)
        im2col_tap(x + ((b0 + j) * c + ch) * h * w, cols + ((ch * kk + t) * nb + j) * p, taps[t],
                   w, g);
}

// Rows (N, R, P) of samples [b0, b0 + nb) gathered as (R, nb * P), or scattered back.
template <typename T>
static void gather_rows(const T* src, int64_t b0, int64_t nb, int64_t rows, int64_t p, T* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < nb; ++j)
      std::copy_n(src + ((b0 + j) * rows + i) * p, p, dst + (i * nb + j) * p);
}

template <typename T>
static void scatter_rows(const T* src, int64_t b0, int64_t nb, int64_t rows, int64_t p, T* dst) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < nb; ++j)
      std::copy_n(src + (i * nb + j) * p, p, dst + ((b0 + j) * rows + i) * p);
}

// the first input dim and the window of conv2d and its gradients, checked
static void check_conv_shapes(const std::string& fn, const py::array& x, const char* xname,
                              const py::array& wt, int64_t w_in_dim, const Window& g) {
  check_ndim(fn, xname, x, 4);
  check_ndim(fn, "weight", wt, 4);
  check_dim(fn, "weight", wt, w_in_dim, x.shape(1));
  check_dim(fn, "weight", wt, 2, g.kh);
  check_dim(fn, "weight", wt, 3, g.kw);
}

// conv2d(x (N, C, H, W), weight (O, C, kh, kw), bias (O,) or None) -> (N, O, OH, OW).
template <typename T>
py::array_t<T> conv2d(carray<T> x, carray<T> wt, std::optional<carray<T>> bias, int64_t sh,
                      int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t oh,
                      int64_t ow) {
  const std::string fn = "conv2d";
  check_ndim(fn, "weight", wt, 4);
  const Window g = checked_window(fn, wt.shape(2), wt.shape(3), sh, sw, ph, pw, dh, dw, oh, ow);
  check_conv_shapes(fn, x, "x", wt, 1, g);
  const int64_t n = x.shape(0), c = x.shape(1), h = x.shape(2), w = x.shape(3), o = wt.shape(0);
  if (bias) {
    check_ndim(fn, "bias", *bias, 1);
    check_dim(fn, "bias", *bias, 0, o);
  }
  const int64_t k = mul(fn, c, mul(fn, g.kh, g.kw)), p = mul(fn, oh, ow);
  mul(fn, mul(fn, n, o), p);
  mul(fn, mul(fn, n, k), p);
  mul(fn, mul(fn, n, c), mul(fn, h, w));
  for (int64_t v : {o, k, mul(fn, n, p)}) check_blas_dim(fn, v);
  py::array_t<T> out({n, o, oh, ow});
  if (out.size() == 0) return out;
  T* dst = out.mutable_data();
  const T* src = x.data();
  const T* wp = wt.data();
  const T* bp = bias ? bias->data() : nullptr;
  if (winograd_applies(g, n, c, o, oh, ow)) {
    py::gil_scoped_release release;
    winograd::conv3x3(src, n, c, h, w, wp, false, o, bp, g.ph, g.pw, oh, ow, dst,
                      get_num_threads());
    return out;
  }
  const bool threads = n > 1 && n * o * p * k > kParallelWork && get_num_threads() > 1;
  const int64_t nb = identity_window(g, h, w) ? 1 : chunk_samples(n, p, threads);
  const bool direct = nb == 1 && identity_window(g, h, w);
  const std::vector<Tap> taps = window_taps(g, h, w);
  const std::vector<int32_t> off = direct ? std::vector<int32_t>()
                                          : short_row_offsets(g, taps, h, w);
  {
    py::gil_scoped_release release;
#pragma omp parallel if (threads)
    {
      std::vector<T> cols(direct ? 0 : k * nb * p), prod(nb > 1 ? o * nb * p : 0);
#pragma omp for schedule(static)
      for (int64_t b0 = 0; b0 < n; b0 += nb) {
        const int64_t m = std::min(nb, n - b0);
        if (!direct) chunk_columns(src, c, b0, m, p, h, w, g, taps, off, cols.data());
        T* res = nb > 1 ? prod.data() : dst + b0 * o * p;
        if (k == 0) std::fill(res, res + o * m * p, T(0));
        else gemm<T>(CblasNoTrans, CblasNoTrans, o, m * p, k, wp, k,
                     direct ? src + b0 * c * h * w : cols.data(), m * p, T(0), res, m * p);
        if (nb > 1) scatter_rows(res, b0, m, o, p, dst);
        if (bp)
          for (int64_t j = b0; j < b0 + m; ++j)
            for (int64_t i = 0; i < o; ++i)
              for (int64_t q = 0; q < p; ++q) dst[(j * o + i) * p + q] += bp[i];
      }
    }
  }
  return out;
}

// conv2d's gradient for its weight: g (N, O, OH, OW) against x (N, C, H, W) -> (O, C, kh, kw),
// the sum over chunks of g's rows (O, samples * P) times their columns transposed.
template <typename T>
py::array_t<T> conv2d_weight(carray<T> x, carray<T> gy, int64_t kh, int64_t kw, int64_t sh,
                             int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
  const std::string fn = "conv2d_weight";
  check_ndim(fn, "x", x, 4);
  check_ndim(fn, "g", gy, 4);
  const Window g = checked_window(fn, kh, kw, sh, sw, ph, pw, dh, dw, gy.shape(2), gy.shape(3));
  check_dim(fn, "g", gy, 0, x.shape(0));
  const int64_t n = x.shape(0), c = x.shape(1), h = x.shape(2), w = x.shape(3), o = gy.shape(1);
  const int64_t k = mul(fn, c, mul(fn, kh, kw)), p = mul(fn, g.oh, g.ow);
  mul(fn, mul(fn, n, k), p);
  mul(fn, o, k);
  mul(fn, mul(fn, n, o), p);
  mul(fn, mul(fn, n, c), mul(fn, h, w));
  for (int64_t v : {o, k, mul(fn, n, p)}) check_blas_dim(fn, v);
  py::array_t<T> out({o, c, kh, kw});
  T* dst = out.mutable_data();
  std::fill(dst, dst + out.size(), T(0));
  if (out.size() == 0 || n == 0 || p == 0) return out;
  const T* src = x.data();
  const T* gp = gy.data();
  if (winograd_applies(g, n, c, o, g.oh, g.ow)) {
    py::gil_scoped_release release;
    winograd::conv3x3_weight(src, n, c, h, w, gp, o, ph, pw, g.oh, g.ow, dst,
                             get_num_threads());
    return out;
  }
  const bool threads = n > 1 && n * o * p * k > kParallelWork && get_num_threads() > 1;
  const int64_t nb = identity_window(g, h, w) ? 1 : chunk_samples(n, p, threads);
  const bool direct = nb == 1 && identity_window(g, h, w);
  const std::vector<Tap> taps = window_taps(g, h, w);
  const std::vector<int32_t> off = direct ? std::vector<int32_t>()
                                          : short_row_offsets(g, taps, h, w);
  {
    py::gil_scoped_release release;
    // each thread sums its chunks' products into its own (O, K), added up at the end
    std::vector<std::vector<T>> partial(threads ? get_num_threads() : 0);
#pragma omp parallel if (threads)
    {
      std::vector<T> cols(direct ? 0 : k * nb * p), grows(nb > 1 ? o * nb * p : 0);
      T* acc = dst;
#ifdef _OPENMP
      const int tid = omp_get_thread_num();
      if (threads && tid > 0 && tid < static_cast<int>(partial.size())) {
        partial[tid].assign(o * k, T(0));
        acc = partial[tid].data();
      }
#endif
#pragma omp for schedule(static)
      for (int64_t b0 = 0; b0 < n; b0 += nb) {
        const int64_t m = std::min(nb, n - b0);
        if (!direct) chunk_columns(src, c, b0, m, p, h, w, g, taps, off, cols.data());
        if (nb > 1) gather_rows(gp, b0, m, o, p, grows.data());
        gemm<T>(CblasNoTrans, CblasTrans, o, k, m * p, nb > 1 ? grows.data() : gp + b0 * o * p,
                m * p, direct ? src + b0 * c * h * w : cols.data(), m * p, T(1), acc, k);
      }
    }
    for (const auto& part : partial)
      for (size_t i = 0; i < part.size(); ++i) dst[i] += part[i];
  }
  return out;
}

// conv2d's gradient for its input, and conv_transpose2d without groups: x (N, Ci, IH, IW)
// and weight (Ci, Co, kh, kw) -> (N, Co, H, W), the window sliding over the output: a
// chunk's columns weight^T (Co*kh*kw, Ci) x x's rows (Ci, samples * IH*IW) summed into
// its samples' planes.
template <typename T>
py::array_t<T> conv2d_transpose(carray<T> x, carray<T> wt, int64_t h, int64_t w, int64_t sh,
                                int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
  const std::string fn = "conv2d_transpose";
  check_ndim(fn, "x", x, 4);
  check_ndim(fn, "weight", wt, 4);
  const Window g = checked_window(fn, wt.shape(2), wt.shape(3), sh, sw, ph, pw, dh, dw,
                                  x.shape(2), x.shape(3));
  check_conv_shapes(fn, x, "x", wt, 0, g);
  check_at_least(fn, "height", h, 0);
  check_at_least(fn, "width", w, 0);
  const int64_t n = x.shape(0), ci = x.shape(1), co = wt.shape(1);
  const int64_t k = mul(fn, co, mul(fn, g.kh, g.kw)), p = mul(fn, g.oh, g.ow);
  mul(fn, mul(fn, n, k), p);
  mul(fn, mul(fn, n, co), mul(fn, h, w));
  mul(fn, mul(fn, n, ci), p);
  for (int64_t v : {ci, k, mul(fn, n, p)}) check_blas_dim(fn, v);
  py::array_t<T> out({n, co, h, w});
  T* dst = out.mutable_data();
  const T* src = x.data();
  const T* wp = wt.data();
  // stride 1: the correlation of x with the rotated filters, padded by 2 - padding
  if (out.size() > 0 && g.ph <= 2 && g.pw <= 2 && winograd_applies(g, n, ci, co, h, w)) {
    py::gil_scoped_release release;
    winograd::conv3x3(src, n, ci, x.shape(2), x.shape(3), wp, true, co, static_cast<T*>(nullptr),
                      2 - g.ph, 2 - g.pw, h, w, dst, get_num_threads());
    return out;
  }
  std::fill(dst, dst + out.size(), T(0));
  if (out.size() == 0 || p == 0 || ci == 0) return out;
  const bool threads = n > 1 && n * ci * p * k > kParallelWork && get_num_threads() > 1;
  const int64_t nb = identity_window(g, h, w) ? 1 : chunk_samples(n, p, threads);
  const bool direct = nb == 1 && identity_window(g, h, w);
  const std::vector<Tap> taps = window_taps(g, h, w);
  const int64_t kk = static_cast<int64_t>(taps.size());
  const std::vector<int32_t> sources =
      direct ? std::vector<int32_t>()
             : short_row_sources(short_row_offsets(g, taps, h, w), kk, p, h * w);
  {
    py::gil_scoped_release release;
#pragma omp parallel if (threads)
    {
      std::vector<T> cols(direct ? 0 : k * nb * p), xrows(nb > 1 ? ci * nb * p : 0),
          rows(sources.empty() ? 0 : kk * p + 1, T(0));
#pragma omp for schedule(static)
      for (int64_t b0 = 0; b0 < n; b0 += nb) {
        const int64_t m = std::min(nb, n - b0);
        if (nb > 1) gather_rows(src, b0, m, ci, p, xrows.data());
        gemm<T>(CblasTrans, CblasNoTrans, k, m * p, ci, wp, k,
                nb > 1 ? xrows.data() : src + b0 * ci * p, m * p, T(0),
                direct ? dst + b0 * co * h * w : cols.data(), m * p);
        if (!direct)
          for (int64_t j = 0; j < m; ++j)
            for (int64_t ch = 0; ch < co; ++ch) {
              T* plane = dst + ((b0 + j) * co + ch) * h * w;
              if (sources.empty()) {
                for (int64_t t = 0; t < kk; ++t)
                  col2im_tap(cols.data() + ((ch * kk + t) * m + j) * p, plane, taps[t], w, g);
                continue;
              }
              for (int64_t t = 0; t < kk; ++t)
                std::copy_n(cols.data() + ((ch * kk + t) * m + j) * p, p, rows.data() + t * p);
              sum_taps(rows.data(), sources.data(), kk, h * w, plane);
            }
      }
    }
  }
  return out;
}

// For each offset k of a window along one axis, the outputs [lo, hi) whose window
// element k falls inside [0, size) (the others read padding).
static void valid_outputs(int64_t out, int64_t k, int64_t stride, int64_t pad, int64_t dil,
                          int64_t size, std::vector<int64_t>& lo, std::vector<int64_t>& hi) {
  lo.assign(k, out);
  hi.assign(k, 0);
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t o = 0; o < out; ++o) {
      const int64_t at = o * stride - pad + kk * dil;
      if (at >= 0 && at < size) {
        lo[kk] = std::min(lo[kk], o);
        hi[kk] = o + 1;
      }
    }
  }
}

// One output row of max_pool2d: the window's elements are taken one offset (ki, kj) at a
// time across the whole row, so the outputs are independent lanes the compiler vectorizes
// (a window at a time is a chain of dependent selects, 3x slower), and the selects are not
// branches, whose outcome on real data is a coin toss.
template <typename T>
TORCIA_CLONES static void max_pool2d_row(const T* __restrict__ plane, T* __restrict__ best,
                                         int64_t* __restrict__ where, int64_t i, int64_t h,
                                         int64_t w, const int64_t* g, const int64_t* col_lo,
                                         const int64_t* col_hi, int64_t ow) {
  const int64_t kh = g[0], kw = g[1], sh = g[2], sw = g[3], ph = g[4], pw = g[5], dh = g[6],
                dw = g[7];
  for (int64_t j = 0; j < ow; ++j) {
    best[j] = -std::numeric_limits<T>::infinity();
    where[j] = -1;
  }
  for (int64_t ki = 0; ki < kh; ++ki) {
    const int64_t y = i * sh - ph + ki * dh;
    if (y < 0 || y >= h) continue;
    for (int64_t kj = 0; kj < kw; ++kj) {
      const int64_t base = y * w - pw + kj * dw;
      for (int64_t j = col_lo[kj]; j < col_hi[kj]; ++j) {
        const int64_t at = base + j * sw;
        const T v = plane[at];
        const T b = best[j];
        // the first element, then a larger one; NaN wins and then stays, as in PyTorch
        const bool take = (where[j] < 0) | (v > b) | ((v != v) & (b == b));
        best[j] = take ? v : b;
        where[j] = take ? at : where[j];
      }
    }
  }
}

// Max pooling of (N, C, H, W) into (N, C, OH, OW) values and flat in-plane indices.
// Padding (ph, pw) is on both sides; windows may run past the high side (ceil_mode).
template <typename T>
py::tuple max_pool2d(carray<T> x, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                     int64_t pw, int64_t dh, int64_t dw, int64_t oh, int64_t ow) {
  const std::string fn = "max_pool2d";
  check_ndim(fn, "x", x, 4);
  check_axis(fn, "(height)", kh, sh, ph, dh, oh);
  check_axis(fn, "(width)", kw, sw, pw, dw, ow);
  check_pool_padding(fn, ph, kh, dh);
  check_pool_padding(fn, pw, kw, dw);
  const int64_t n = x.shape(0), c = x.shape(1), h = x.shape(2), w = x.shape(3);
  // every window must start inside the padded input (the last one may run past it)
  if ((oh > 0 && (oh - 1) * sh >= h + ph) || (ow > 0 && (ow - 1) * sw >= w + pw))
    fail(fn, "output size (" + std::to_string(oh) + ", " + std::to_string(ow) +
                 ") has windows starting past the padded input " + shape_of(x));
  mul(fn, mul(fn, mul(fn, n, c), mul(fn, oh, ow)), mul(fn, kh, kw));
  py::array_t<T> values({n, c, oh, ow});
  py::array_t<int64_t> indices({n, c, oh, ow});
  T* vo = values.mutable_data();
  int64_t* io = indices.mutable_data();
  const T* src = x.data();
  const int64_t geometry[] = {kh, kw, sh, sw, ph, pw, dh, dw};
  std::vector<int64_t> col_lo, col_hi;
  valid_outputs(ow, kw, sw, pw, dw, w, col_lo, col_hi);
  {
    py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (n * c * oh * ow * kh * kw > kParallelWork)
    for (int64_t pl = 0; pl < n * c; ++pl) {
      for (int64_t i = 0; i < oh; ++i) {
        const int64_t row = (pl * oh + i) * ow;
        max_pool2d_row(src + pl * h * w, vo + row, io + row, i, h, w, geometry, col_lo.data(),
                       col_hi.data(), ow);
      }
    }
  }
  return py::make_tuple(values, indices);
}

// Gradients (N, C, OH, OW) added at their recorded input positions of (N, C, H, W).
template <typename T>
py::array_t<T> max_pool2d_backward(carray<T> g, carray<int64_t> indices, int64_t h, int64_t w) {
  const std::string fn = "max_pool2d_backward";
  check_ndim(fn, "g", g, 4);
  check_ndim(fn, "indices", indices, 4);
  for (int d = 0; d < 4; ++d) check_dim(fn, "indices", indices, d, g.shape(d));
  check_at_least(fn, "height", h, 0);
  check_at_least(fn, "width", w, 0);
  const int64_t n = g.shape(0), c = g.shape(1), p = g.shape(2) * g.shape(3);
  const int64_t plane_size = mul(fn, h, w);
  mul(fn, mul(fn, n, c), plane_size);
  const int64_t* idx = indices.data();
  for (int64_t k = 0; k < indices.size(); ++k)
    if (idx[k] < 0 || idx[k] >= plane_size)
      fail(fn, "indices holds " + std::to_string(idx[k]) + ", outside a plane of " +
                   std::to_string(plane_size) + " elements");
  py::array_t<T> out({n, c, h, w});
  T* dst = out.mutable_data();
  const T* src = g.data();
  {
    py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (n * c * h * w > kParallelWork)
    for (int64_t pl = 0; pl < n * c; ++pl) {
      T* plane = dst + pl * h * w;
      std::fill(plane, plane + h * w, T(0));
      for (int64_t k = 0; k < p; ++k) plane[idx[pl * p + k]] += src[pl * p + k];
    }
  }
  return out;
}

// Rows of g (M, D) summed into the rows of a (V, D) result named by indices (M,).
template <typename T>
py::array_t<T> embedding_backward(carray<T> g, carray<int64_t> indices, int64_t num_weights,
                                  int64_t padding_idx) {
  const std::string fn = "embedding_backward";
  check_ndim(fn, "g", g, 2);
  check_ndim(fn, "indices", indices, 1);
  check_dim(fn, "indices", indices, 0, g.shape(0));
  check_at_least(fn, "num_weights", num_weights, 0);
  const int64_t m = g.shape(0), d = g.shape(1);
  mul(fn, num_weights, d);
  const int64_t* idx = indices.data();
  for (int64_t r = 0; r < m; ++r)
    if (idx[r] != padding_idx && (idx[r] < 0 || idx[r] >= num_weights))
      fail(fn, "indices holds " + std::to_string(idx[r]) + ", out of range for " +
                   std::to_string(num_weights) + " embeddings");
  py::array_t<T> out({num_weights, d});
  T* dst = out.mutable_data();
  const T* src = g.data();
  {
    py::gil_scoped_release release;
    std::fill(dst, dst + num_weights * d, T(0));
    // split the embedding dimension among threads: each owns whole columns
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (m * d > kParallelWork)
    for (int64_t col = 0; col < d; ++col) {
      for (int64_t r = 0; r < m; ++r) {
        const int64_t row = idx[r];
        if (row == padding_idx) continue;
        dst[row * d + col] += src[r * d + col];
      }
    }
  }
  return out;
}

// Columns per task of index_add_rows: a cache line of float32, so that even a narrow
// embedding (64 columns) spreads over threads.
constexpr int64_t kIndexColumns = 16;

// out (outer, n, inner) = a with source (outer, m, inner) added along the middle dim at
// idx (m,): out[o, idx[i], j] += alpha * source[o, i, j], each term fused (one rounding,
// as PyTorch's add_ with alpha). Each element takes its terms in index order, as NumPy's
// add.at does, so the result is its bits on every thread count; threads own blocks of
// columns.
template <typename T>
void index_add_run(const T* a, const int64_t* idx, const T* source, T* out, int64_t outer,
                   int64_t n, int64_t m, int64_t inner, T alpha) {
  const int64_t blocks = (inner + kIndexColumns - 1) / kIndexColumns;
  const int64_t tasks = outer * blocks;
  const bool threads = tasks > 1 && outer * inner * (n + m) > kParallelWork;
  py::gil_scoped_release release;
#pragma omp parallel for schedule(static) if (threads)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t o = t / blocks, j0 = (t % blocks) * kIndexColumns;
    const int64_t w = std::min(kIndexColumns, inner - j0);
    const T* from = a + o * n * inner + j0;
    const T* rows = source + o * m * inner + j0;
    T* to = out + o * n * inner + j0;
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < w; ++j) to[k * inner + j] = from[k * inner + j];
    for (int64_t i = 0; i < m; ++i) {
      T* row = to + idx[i] * inner;
      const T* s = rows + i * inner;
      if (alpha == T(1))
        for (int64_t j = 0; j < w; ++j) row[j] += s[j];
      else
        for (int64_t j = 0; j < w; ++j) row[j] = std::fma(s[j], alpha, row[j]);
    }
  }
}

// index_add_rows(a, index, source, outer, n, inner, alpha=1) -> a copy of a (float32 or
// float64, C-contiguous, outer * n * inner elements) with alpha (taken in a's dtype) times
// source (a's dtype, C-contiguous, outer * m * inner elements) added at index (1-D int64,
// C-contiguous, m values in [0, n)) along the middle dim of (outer, n, inner); of a's
// shape.
py::array index_add_rows(const py::array& a, const py::array& index, const py::array& source,
                         int64_t outer, int64_t n, int64_t inner, double alpha) {
  const std::string fn = "index_add_rows";
  torcia_checks::float_array(fn, "a", a);
  torcia_checks::like(fn, "source", source, "a", a);
  if (!torcia_checks::is_dtype<int64_t>(index.dtype()) || index.ndim() != 1 ||
      !(index.flags() & py::array::c_style))
    fail(fn, "index must be a 1-D C-contiguous int64 array, got " +
                 std::string(py::str(index.dtype())) + " of shape " + shape_of(index));
  check_at_least(fn, "outer", outer, 0);
  check_at_least(fn, "n", n, 0);
  check_at_least(fn, "inner", inner, 0);
  const int64_t m = index.shape(0);
  const int64_t plane = mul(fn, outer, inner);
  if (a.size() != mul(fn, plane, n))
    fail(fn, "a has " + std::to_string(a.size()) + " elements, not (" + std::to_string(outer) +
                 ", " + std::to_string(n) + ", " + std::to_string(inner) + ")");
  if (source.size() != mul(fn, plane, m))
    fail(fn, "source has " + std::to_string(source.size()) + " elements, not (" +
                 std::to_string(outer) + ", " + std::to_string(m) + ", " +
                 std::to_string(inner) + ")");
  const int64_t* idx = static_cast<const int64_t*>(index.data());
  for (int64_t i = 0; i < m; ++i)
    if (idx[i] < 0 || idx[i] >= n)
      fail(fn, "index holds " + std::to_string(idx[i]) + ", out of range for size " +
                   std::to_string(n));
  const bool single = torcia_checks::is_dtype<float>(a.dtype());
  if (single) torcia_checks::float32_scalar(fn, "alpha", alpha);
  py::array out(a.dtype(), std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  if (single)
    index_add_run(static_cast<const float*>(a.data()), idx,
                  static_cast<const float*>(source.data()),
                  static_cast<float*>(out.mutable_data()), outer, n, m, inner,
                  static_cast<float>(alpha));
  else
    index_add_run(static_cast<const double*>(a.data()), idx,
                  static_cast<const double*>(source.data()),
                  static_cast<double*>(out.mutable_data()), outer, n, m, inner, alpha);
  return out;
}

// ----- LSTM cell (its rows in lstm_rows.h) ---------------------------------------------

// One step from the gate pre-activations gates (M, 4H) = [i f g o] and the cell state
// c (M, H): h = o tanh(c'), c' = f c + i g, with i, f, o sigmoids and g a tanh; act holds
// the activated gates for the backward.
template <typename T>
py::tuple lstm_cell(carray<T> gates, carray<T> c) {
  const std::string fn = "lstm_cell";
  check_ndim(fn, "c", c, 2);
  check_ndim(fn, "gates", gates, 2);
  const int64_t m = c.shape(0), hd = c.shape(1);
  check_dim(fn, "gates", gates, 0, m);
  check_dim(fn, "gates", gates, 1, mul(fn, 4, hd));
  py::array_t<T> h({m, hd}), c_new({m, hd}), act({m, 4 * hd});
  const T* gp = gates.data();
  const T* cp = c.data();
  T* hp = h.mutable_data();
  T* cn = c_new.mutable_data();
  T* ap = act.mutable_data();
  {
    py::gil_scoped_release release;
    for (int64_t r = 0; r < m; ++r)
      lstm_cell_row(gp + r * 4 * hd, hd, cp + r * hd, ap + r * 4 * hd, hd, hp + r * hd,
                    cn + r * hd, hd);
  }
  return py::make_tuple(h, c_new, act);
}

// lstm_cell's first derivative from its saved activations: (grad_gates, grad_c).
template <typename T>
py::tuple lstm_cell_backward(carray<T> gh, carray<T> gc, carray<T> act, carray<T> c,
                             carray<T> c_new) {
  const std::string fn = "lstm_cell_backward";
  check_ndim(fn, "c", c, 2);
  const int64_t m = c.shape(0), hd = c.shape(1);
  for (auto [name, a] : {std::pair<const char*, const py::array*>{"gh", &gh}, {"gc", &gc},
                         {"c_new", &c_new}}) {
    check_ndim(fn, name, *a, 2);
    check_dim(fn, name, *a, 0, m);
    check_dim(fn, name, *a, 1, hd);
  }
  check_ndim(fn, "act", act, 2);
  check_dim(fn, "act", act, 0, m);
  check_dim(fn, "act", act, 1, mul(fn, 4, hd));
  py::array_t<T> g_gates({m, 4 * hd}), g_c({m, hd});
  const T* ghp = gh.data();
  const T* gcp = gc.data();
  const T* ap = act.data();
  const T* cp = c.data();
  const T* cnp = c_new.data();
  T* out = g_gates.mutable_data();
  T* outc = g_c.mutable_data();
  {
    py::gil_scoped_release release;
    for (int64_t r = 0; r < m; ++r) {
      const int64_t e = r * hd;
      lstm_cell_backward_row(ghp + e, gcp + e, ap + 4 * e, cp + e, cnp + e, out + 4 * e,
                             outc + e, hd, hd);
    }
  }
  return py::make_tuple(g_gates, g_c);
}

// ----- softmax over the last dimension ------------------------------------------------

// One row: out = exp(x - max) and its sum; NaN propagates through the sum to the row.
template <typename T>
static TORCIA_INLINE T exp_shifted_row(const T* __restrict__ x, T* __restrict__ out,
                                       int64_t n, T* max_out) {
  const T m = max_lanes(x, n, -std::numeric_limits<T>::infinity());
  for (int64_t k = 0; k < n; ++k) out[k] = exp_approx(x[k] - m);
  *max_out = m;
  return sum_lanes(out, n);
}

// One row of softmax (log = false) or log_softmax (log = true), all its passes compiled
// for the wide vector units (their normalising pass too: 2x faster on 64-wide rows).
template <typename T>
TORCIA_CLONES_WIDE static void softmax_row(const T* __restrict__ xi, T* __restrict__ oi,
                                           int64_t n, bool log) {
  T m;
  const T total = exp_shifted_row(xi, oi, n, &m);
  if (log) {
    const T lse = m + std::log(total);
    for (int64_t k = 0; k < n; ++k) oi[k] = xi[k] - lse;
  } else {
    const T inv = T(1) / total;
    for (int64_t k = 0; k < n; ++k) oi[k] *= inv;
  }
}

// softmax (log = false) or log_softmax (log = true) of each row of x (R, C).
template <typename T>
py::array_t<T> softmax_rows(carray<T> x, bool log) {
  check_ndim("softmax_rows", "x", x, 2);
  const int64_t r = x.shape(0), n = x.shape(1);
  py::array_t<T> out({r, n});
  const T* src = x.data();
  T* dst = out.mutable_data();
  {
    py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (r * n > kParallelWork)
    for (int64_t i = 0; i < r; ++i) softmax_row(src + i * n, dst + i * n, n, log);
  }
  return out;
}

// Cross-entropy's gradient for the logits, row i of x (R, C): (softmax(x_i) - onehot(t_i))
// times scale[i] (the loss gradient, the class weight and the mean's divisor folded
// together), the scale folded into the normalising pass and the target's term taken
// while the row is in cache.
template <typename T>
TORCIA_CLONES_WIDE static void cross_entropy_backward_row(const T* __restrict__ xi,
                                                         T* __restrict__ oi, int64_t n,
                                                         T scale, int64_t target) {
  T m;
  const T total = exp_shifted_row(xi, oi, n, &m);
  const T factor = scale / total;
  for (int64_t k = 0; k < n; ++k) oi[k] *= factor;
  oi[target] -= scale;
}

// cross_entropy_backward_rows(x (R, C), scale (R,), target (R,) in [0, C)) -> (R, C)
template <typename T>
py::array_t<T> cross_entropy_backward_rows(carray<T> x, carray<T> scale,
                                           py::array_t<int64_t, py::array::c_style> target) {
  const std::string fn = "cross_entropy_backward_rows";
  check_ndim(fn, "x", x, 2);
  check_ndim(fn, "scale", scale, 1);
  check_ndim(fn, "target", target, 1);
  const int64_t r = x.shape(0), n = x.shape(1);
  check_dim(fn, "scale", scale, 0, r);
  check_dim(fn, "target", target, 0, r);
  const int64_t* tp = target.data();
  for (int64_t i = 0; i < r; ++i)
    if (tp[i] < 0 || tp[i] >= n)
      throw std::out_of_range(fn + ": target " + std::to_string(tp[i]) +
                              " is out of bounds for " + std::to_string(n) + " classes");
  py::array_t<T> out({r, n});
  const T* src = x.data();
  const T* sp = scale.data();
  T* dst = out.mutable_data();
  {
    py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (r * n > kParallelWork)
    for (int64_t i = 0; i < r; ++i)
      cross_entropy_backward_row(src + i * n, dst + i * n, n, sp[i], tp[i]);
  }
  return out;
}

template <typename T>
TORCIA_CLONES_WIDE static T logsumexp_row(const T* __restrict__ xi, T* __restrict__ buf,
                                          int64_t n) {
  T m;
  const T total = exp_shifted_row(xi, buf, n, &m);
  return m + std::log(total);
}

// logsumexp of each row of x (R, C): cross-entropy needs only it and the picked logits.
template <typename T>
py::array_t<T> logsumexp_rows(carray<T> x) {
  check_ndim("logsumexp_rows", "x", x, 2);
  const int64_t r = x.shape(0), n = x.shape(1);
  py::array_t<T> out(r);
  const T* src = x.data();
  T* dst = out.mutable_data();
  {
    py::gil_scoped_release release;
#pragma omp parallel num_threads(torcia_team::fixed_split()) if (r * n > kParallelWork)
    {
      std::vector<T> buf(n);
#pragma omp for schedule(static)
      for (int64_t i = 0; i < r; ++i) {
        dst[i] = logsumexp_row(src + i * n, buf.data(), n);
      }
    }
  }
  return out;
}

template <typename T>
TORCIA_CLONES_WIDE static void softmax_backward_row(const T* __restrict__ gi,
                                                    const T* __restrict__ yi,
                                                    T* __restrict__ oi, int64_t n, bool log) {
  if (log) {
    const T s = sum_lanes(gi, n);
    for (int64_t k = 0; k < n; ++k) oi[k] = gi[k] - exp_approx(yi[k]) * s;
  } else {
    for (int64_t k = 0; k < n; ++k) oi[k] = gi[k] * yi[k];
    const T s = sum_lanes(oi, n);
    for (int64_t k = 0; k < n; ++k) oi[k] -= yi[k] * s;
  }
}

// The first derivative of softmax (log = false: y (g - sum(g y))) or log_softmax
// (log = true: g - exp(y) sum(g)) along the rows, from the output y.
template <typename T>
py::array_t<T> softmax_backward_rows(carray<T> g, carray<T> y, bool log) {
  const std::string fn = "softmax_backward_rows";
  check_ndim(fn, "y", y, 2);
  check_ndim(fn, "g", g, 2);
  const int64_t r = y.shape(0), n = y.shape(1);
  check_dim(fn, "g", g, 0, r);
  check_dim(fn, "g", g, 1, n);
  py::array_t<T> out({r, n});
  const T* gp = g.data();
  const T* yp = y.data();
  T* dst = out.mutable_data();
  {
    py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (r * n > kParallelWork)
    for (int64_t i = 0; i < r; ++i)
      softmax_backward_row(gp + i * n, yp + i * n, dst + i * n, n, log);
  }
  return out;
}

// ----- optimizer updates over many arrays at once --------------------------------------

// Elements per task of the optimizer updates: the grain of the elementwise ops.
constexpr int64_t kStepSpan = torcia_team::kGrain;

template <typename T>
struct AdamConstants {
  bool maximize, coupled, decoupled;  // coupled: L2 decay added to the gradient
  // lerp_'s two sides, as torch's: from the gradient's end for a weight 1 - beta1 >= 0.5
  bool from_end;
  T weight_decay, decay, one_minus_beta1, end_weight, beta2, one_minus_beta2, eps;
};

// The optimizer updates' bits are torcia-optim's (test_plugin.py): products and sums
// rounded one at a time, but for the multiply-adds that torch's lerp_, addcmul_ and add's
// alpha fuse, written as std::fma (which fp-contract leaves alone). No other contraction.
#if defined(__GNUC__) && !defined(__clang__)
#define TORCIA_NO_FMA __attribute__((optimize("fp-contract=off")))
#else
#define TORCIA_NO_FMA
#endif

// Adam's update of n elements of one parameter, torch.optim.Adam's formulas in T. The
// arrays do not overlap (keep_apart), so the loop vectorises, once per instruction set.
template <typename T, bool AMSGRAD>
TORCIA_CLONES_WIDE TORCIA_NO_FMA void adam_span(T* __restrict__ p, const T* __restrict__ g,
                                                T* __restrict__ m, T* __restrict__ v,
                                                T* __restrict__ vmax, int64_t n,
                                                const AdamConstants<T> c, T step_size,
                                                T bc2_sqrt) {
  for (int64_t k = 0; k < n; ++k) {
    T d = c.maximize ? -g[k] : g[k];
    if (c.decoupled) p[k] *= c.decay;
    if (c.coupled) d = std::fma(p[k], c.weight_decay, d);
    m[k] = c.from_end ? std::fma(-(d - m[k]), c.end_weight, d)
                      : std::fma(c.one_minus_beta1, d - m[k], m[k]);
    v[k] = std::fma(c.one_minus_beta2 * d, d, c.beta2 * v[k]);
    T denom_v = v[k];
    if (AMSGRAD) {
      vmax[k] = std::max(vmax[k], v[k]);
      denom_v = vmax[k];
    }
    const T denom = std::sqrt(denom_v) / bc2_sqrt + c.eps;
    p[k] -= step_size * m[k] / denom;
  }
}

// Whether any two of arrays (n elements of T each, nullptr for none) share memory.
template <typename T>
static bool overlap(int64_t n, std::initializer_list<const T*> arrays) {
  for (auto a = arrays.begin(); a != arrays.end(); ++a)
    for (auto b = a + 1; b != arrays.end(); ++b)
      if (*a && *b && n > 0 && *a < *b + n && *b < *a + n) return true;
  return false;
}

// Refuses a parameter whose written arrays (the parameter, its state; nullptr for none)
// share memory, and copies a gradient g that shares memory with one of them
// (p.grad = p.detach()) into copies: the update loops assume arrays apart.
template <typename T>
static void keep_apart(const std::string& fn, size_t i, int64_t n, T*& g,
                       std::initializer_list<const T*> written,
                       std::list<std::vector<T>>& copies) {
  if (overlap<T>(n, written))
    fail(fn, "the parameter and the state of params[" + std::to_string(i) + "] share memory");
  for (const T* w : written)
    if (overlap<T>(n, {g, w})) {
      copies.emplace_back(g, g + n);
      g = copies.back().data();
      return;
    }
}

// Every parameter's spans of at most kStepSpan elements, (parameter, start, length), and
// the elements in all: the updates run them in one team, so that no parameter opens its
// own and the small ones (biases, norms) run beside the others.
static std::vector<std::array<int64_t, 3>> step_spans(const std::vector<int64_t>& sizes,
                                                      int64_t& total) {
  std::vector<std::array<int64_t, 3>> spans;
  total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int64_t lo = 0; lo < sizes[i]; lo += kStepSpan)
      spans.push_back({int64_t(i), lo, std::min(kStepSpan, sizes[i] - lo)});
    total += sizes[i];
  }
  return spans;
}

// params[i] and grads[i] checked (checked_ptr), their data in p and g: the parameter's size
template <typename T>
static int64_t param_and_grad(const std::string& fn, size_t i, const py::list& params,
                              const py::list& grads, T*& p, T*& g) {
  p = checked_ptr<T>(fn, "params", i, params[i], -1, true);
  const int64_t n = py::reinterpret_borrow<py::array>(params[i]).size();
  g = checked_ptr<T>(fn, "grads", i, grads[i], n, false);
  return n;
}

template <typename T>
struct SgdConstants {
  bool maximize, decay, nesterov;
  T weight_decay, beta, one_minus_dampening, lr;  // beta: the momentum factor
};

// SGD's update of n elements of one parameter (b: its momentum buffer, or nullptr). Whether
// there is a buffer, and whether it is read, are template arguments: a store to b under a
// runtime test kept the momentum loop scalar (0.43 ms for an MLP's 669K parameters in
// cache, 0.12 ms vectorised); the other tests only choose between values, which vectorises.
template <typename T, bool MOMENTUM, bool HAS_BUFFERS>
TORCIA_CLONES_WIDE TORCIA_NO_FMA void sgd_span(T* __restrict__ p, const T* __restrict__ g,
                                               T* __restrict__ b, int64_t n,
                                               const SgdConstants<T> c) {
  for (int64_t k = 0; k < n; ++k) {
    T d = c.maximize ? -g[k] : g[k];
    d = c.decay ? std::fma(p[k], c.weight_decay, d) : d;
    if (MOMENTUM) {
      const T buf = HAS_BUFFERS ? std::fma(d, c.one_minus_dampening, c.beta * b[k]) : d;
      b[k] = buf;
      d = c.nesterov ? std::fma(buf, c.beta, d) : buf;
    }
    p[k] = std::fma(d, -c.lr, p[k]);
  }
}

// SGD with momentum, dampening, nesterov, weight decay and maximize, as torch.optim.SGD.
// bufs[i] is read only when has_buffers; otherwise it is initialised to the gradient.
template <typename T>
void sgd_step(py::list params, py::list grads, py::list bufs, double lr, double momentum,
              double dampening, double weight_decay, bool nesterov, bool maximize,
              bool has_buffers) {
  const std::string fn = "sgd_step";
  const size_t count = params.size();
  check_count(fn, "grads", grads.size(), count);
  if (momentum != 0) check_count(fn, "momentum_buffers", bufs.size(), count);
  std::vector<T*> p(count), g(count), b(count);
  std::vector<int64_t> sizes(count);
  std::list<std::vector<T>> copies;  // a list: its elements stay where they are
  for (size_t i = 0; i < count; ++i) {
    sizes[i] = param_and_grad(fn, i, params, grads, p[i], g[i]);
    b[i] = momentum != 0 ? checked_ptr<T>(fn, "momentum_buffers", i, bufs[i], sizes[i], true)
                         : nullptr;
    keep_apart<T>(fn, i, sizes[i], g[i], {p[i], b[i]}, copies);
  }
  int64_t total;
  const auto spans = step_spans(sizes, total);
  const SgdConstants<T> c{maximize, weight_decay != 0, nesterov, T(weight_decay), T(momentum),
                          T(1 - dampening), T(lr)};
  const auto span = momentum == 0 ? sgd_span<T, false, false>
                    : has_buffers ? sgd_span<T, true, true>
                                  : sgd_span<T, true, false>;
  const int64_t n_spans = int64_t(spans.size());
  py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (total > kParallelWork && n_spans > 1)
  for (int64_t t = 0; t < n_spans; ++t) {
    const auto [i, lo, len] = spans[t];
    span(p[i] + lo, g[i] + lo, b[i] ? b[i] + lo : nullptr, len, c);
  }
}

// Adam / AdamW (decoupled weight decay), amsgrad and maximize, as torch.optim.Adam(W).
template <typename T>
void adam_step(py::list params, py::list grads, py::list exp_avgs, py::list exp_avg_sqs,
               py::list max_exp_avg_sqs, py::list steps, double lr, double beta1, double beta2,
               double eps, double weight_decay, bool amsgrad, bool maximize, bool decoupled) {
  const std::string fn = "adam_step";
  const size_t count = params.size();
  check_count(fn, "grads", grads.size(), count);
  check_count(fn, "exp_avgs", exp_avgs.size(), count);
  check_count(fn, "exp_avg_sqs", exp_avg_sqs.size(), count);
  if (amsgrad) check_count(fn, "max_exp_avg_sqs", max_exp_avg_sqs.size(), count);
  check_count(fn, "steps", steps.size(), count);
  std::vector<T*> p(count), g(count), m(count), v(count), vmax(count);
  std::vector<double> step(count);
  std::vector<int64_t> sizes(count);
  std::list<std::vector<T>> copies;  // a list: its elements stay where they are
  for (size_t i = 0; i < count; ++i) {
    sizes[i] = param_and_grad(fn, i, params, grads, p[i], g[i]);
    m[i] = checked_ptr<T>(fn, "exp_avgs", i, exp_avgs[i], sizes[i], true);
    v[i] = checked_ptr<T>(fn, "exp_avg_sqs", i, exp_avg_sqs[i], sizes[i], true);
    vmax[i] = amsgrad ? checked_ptr<T>(fn, "max_exp_avg_sqs", i, max_exp_avg_sqs[i], sizes[i],
                                       true)
                      : nullptr;
    step[i] = steps[i].cast<double>();
    keep_apart<T>(fn, i, sizes[i], g[i], {p[i], m[i], v[i], vmax[i]}, copies);
  }
  int64_t total;
  const auto spans = step_spans(sizes, total);
  std::vector<T> step_size(count), bc2_sqrt(count);
  for (size_t i = 0; i < count; ++i) {
    step_size[i] = T(lr / (1 - std::pow(beta1, step[i])));
    // pow(x, 0.5) rather than sqrt: the reference computes it with Python's float power
    bc2_sqrt[i] = T(std::pow(1 - std::pow(beta2, step[i]), 0.5));
  }
  const double weight = 1 - beta1;
  // the end's weight 1 - w in T, as lerp_ takes its weight w
  const T end_weight = T(1) - T(weight);
  const AdamConstants<T> c{maximize, weight_decay != 0 && !decoupled,
                           weight_decay != 0 && decoupled, std::abs(T(weight)) >= T(0.5),
                           T(weight_decay), T(1 - lr * weight_decay), T(weight), end_weight,
                           T(beta2), T(1 - beta2), T(eps)};
  const int64_t n_spans = int64_t(spans.size());
  py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (total > kParallelWork && n_spans > 1)
  for (int64_t t = 0; t < n_spans; ++t) {
    const auto [i, lo, len] = spans[t];
    T* vmi = amsgrad ? vmax[i] + lo : nullptr;
    if (amsgrad)
      adam_span<T, true>(p[i] + lo, g[i] + lo, m[i] + lo, v[i] + lo, vmi, len, c,
                         step_size[i], bc2_sqrt[i]);
    else
      adam_span<T, false>(p[i] + lo, g[i] + lo, m[i] + lo, v[i] + lo, vmi, len, c,
                          step_size[i], bc2_sqrt[i]);
  }
}

template <typename T>
void define(py::module_& m) {
  m.def("im2col", &im2col<T>);
  m.def("col2im", &col2im<T>);
  m.def("conv2d", &conv2d<T>);
  m.def("conv2d_weight", &conv2d_weight<T>);
  m.def("conv2d_transpose", &conv2d_transpose<T>);
  m.def("max_pool2d", &max_pool2d<T>);
  m.def("max_pool2d_backward", &max_pool2d_backward<T>);
  m.def("embedding_backward", &embedding_backward<T>);
  m.def("lstm_cell", &lstm_cell<T>);
  m.def("softmax_rows", &softmax_rows<T>);
  m.def("logsumexp_rows", &logsumexp_rows<T>);
  m.def("cross_entropy_backward_rows", &cross_entropy_backward_rows<T>);
  m.def("softmax_backward_rows", &softmax_backward_rows<T>);
  m.def("lstm_cell_backward", &lstm_cell_backward<T>);
}

PYBIND11_MODULE(_native, m) {
  m.doc() = "Native kernels of torcia-cpu (float32 and float64).";
  define<float>(m);
  define<double>(m);
  m.def("sgd_step_f32", &sgd_step<float>);
  m.def("sgd_step_f64", &sgd_step<double>);
  m.def("adam_step_f32", &adam_step<float>);
  m.def("adam_step_f64", &adam_step<double>);
  m.def("index_add_rows", &index_add_rows, py::arg("a"), py::arg("index"), py::arg("source"),
        py::arg("outer"), py::arg("n"), py::arg("inner"), py::arg("alpha") = 1.0);
  m.def("set_num_threads", &set_num_threads);
  m.def("get_num_threads", &get_num_threads);
  // team.h: one thread for the regions of a fixed split while the machine is crowded
  m.def("set_crowded", [](bool on) { torcia_team::crowded.store(on); }, py::arg("on"));
  m.def("set_winograd", &set_winograd, py::arg("on"));
  m.def("winograd", [] { return winograd_enabled; });
  define_activations(m);
  define_attention(m);
  define_elementwise(m);
  define_norm(m);
  define_blas(m);
  define_lstm(m);
  define_quant(m);
  define_memory(m);
#ifdef _OPENMP
  m.attr("openmp") = true;
#else
  m.attr("openmp") = false;
#endif
}
