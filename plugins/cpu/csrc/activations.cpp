// Elementwise activations and their first derivatives: GELU (exact and tanh), SiLU,
// sigmoid, tanh, softplus, ELU, LeakyReLU and ReLU, in float32 and float64.
//
// NumPy runs each of these as several passes over memory (GELU: an erf from SciPy and five
// arithmetic passes); here each is one vectorised pass, on OpenMP threads when large.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "checks.h"
#include "team.h"
#include "vecmath.h"

namespace py = pybind11;
using std::int64_t;

namespace {

enum class Act { gelu, gelu_tanh, silu, sigmoid, tanh, softplus, elu, leaky_relu, relu };

Act parse(const std::string& fn, const std::string& name) {
  if (name == "gelu") return Act::gelu;
  if (name == "gelu_tanh") return Act::gelu_tanh;
  if (name == "silu") return Act::silu;
  if (name == "sigmoid") return Act::sigmoid;
  if (name == "tanh") return Act::tanh;
  if (name == "softplus") return Act::softplus;
  if (name == "elu") return Act::elu;
  if (name == "leaky_relu") return Act::leaky_relu;
  if (name == "relu") return Act::relu;
  throw std::runtime_error(fn + ": unknown activation '" + name + "'");
}

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluTanhC = 0.044715;

// min(x, 0), NaN kept (as NumPy's minimum): the exponentials of ELU's unused branch stay
// finite, and NaN reaches the output as in the reference kernel
template <typename T>
TORCIA_INLINE T nonpositive(T x) {
  return x > T(0) ? T(0) : x;
}

// exp(-(hi + lo) / 2) for hi + lo = a^2 <= kGeluTail^2, hi = a*a rounded and lo its
// rounding error: Cephes' range reduction (n = round(-hi/2 log2 e), ln 2 in two parts,
// the first times n exact) done on s = hi + lo + 2 n ln 2 = -2r, whose sum with hi is
// exact (Sterbenz) and into which lo is added, not multiplied in afterwards; then e^r =
// e^(-s/2) by a minimax polynomial 1 + s P(s) of degree 6 (|s| <= ln 2 + 2^-19: relative
// error 2e-9, a fiftieth of an ulp). Against exp_in_range's degree 7 and a separate lo
// correction, four multiply-adds fewer: GELU's loop is bound by them (they share the
// FMA pipes; its division runs apart).
static TORCIA_INLINE float gauss_in_range(float hi, float lo) {
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: n in v's low mantissa bits
  const float v = hi * -0.721347520444481703f + kShift;
  const float n = v - kShift;
  float s = hi + n * 1.38671875f;
  s = s + n * -4.24388880e-4f;
  s = s + lo;
  float y = 2.1634530639857985e-05f;
  y = y * s - 0.00026169250486418605f;
  y = y * s + 0.0026042477693408728f;
  y = y * s - 0.02083303965628147f;
  y = y * s + 0.1249999850988388f;
  y = y * s - 0.5f;
  y = y * s + 1.0f;
  uint32_t vbits;
  std::memcpy(&vbits, &v, sizeof vbits);
  // 2^n from v's low bits, as exp_in_range's (n >= -126 here: a normal power of two)
  const uint32_t bits = (vbits + 127u) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

// GELU's Phi(x) = erfc(-x / sqrt 2) / 2, and e = exp(-x^2 / 2) (its density times
// sqrt(2 pi), which the backward needs too): one exponential for both. For float,
// erfc(z) / 2 = exp(-z^2) t Q(t) at z = |x| / sqrt 2, t = 1 / (1 + 0.304 |x|), Q a
// degree-7 fit (relative error 8.5e-8 on the range used, 4.4e-7 evaluated in float);
// Phi(x) = 1 - erfc(z) / 2 above 0. x^2 is split into its rounded value and the rounding
// error (an FMA), so that exp(-x^2 / 2) keeps its relative accuracy in the tail, where
// x^2 is near 170 and its rounding alone would cost 100 ulp (std::fma: one instruction
// in the AVX2 and AVX-512 clones, a library call only in the baseline one, for CPUs
// without FMA). Against float64, for |x| <= 13 (beyond, Phi(-|x|) is subnormal): within
// 7 ulp for the forward (6.6 measured: the rounding of t and of Q's alternating terms
// near x = 0, as with the previous degree-8 fit in t = 1 / (1 + |x| / sqrt 8), 6.2), and
// for the backward 7 ulp of its larger term (Phi or x e / sqrt(2 pi)); in the baseline
// clone, whose products and sums round separately, one more.
// From |x| = 13.2, where Phi(-|x|) < 5e-40, e is 0: the clamped |x| keeps exp in range,
// and inf gives inf * 0 as the reference (NaN propagates: the clamp and the select keep
// it, and 1 - 0 times NaN is NaN).
static TORCIA_INLINE float gelu_cdf(float x, float& e) {
  constexpr float kTail = 13.2f;  // exp(-kTail^2 / 2) is still normal
  const float a = std::min(std::fabs(x), kTail);
  const float hi = a * a;
  const float lo = std::fma(a, a, -hi);
  const float ea = gauss_in_range(hi, lo);
  e = a < kTail ? ea : 0.0f;
  const float t = 1.0f / (1.0f + 0.304f * a);
  float q = 0.03687424585223198f;
  q = q * t - 0.15536293387413025f;
  q = q * t + 0.19229619204998016f;
  q = q * t - 0.04322578012943268f;
  q = q * t + 0.12360263615846634f;
  q = q * t + 0.10240817815065384f;
  q = q * t + 0.12217295914888382f;
  q = q * t + 0.12123453617095947f;
  const float h = t * q * e;
  return x < 0.0f ? h : 1.0f - h;
}

// float64: the C library's erfc and exp (correctly rounded to within an ulp or two)
static TORCIA_INLINE double gelu_cdf(double x, double& e) {
  e = std::exp(-0.5 * x * x);
  return 0.5 * std::erfc(-x * kSqrt1_2);
}

using torcia_team::kGrain;

// y = f(x) over one span. p0, p1: softplus's beta and threshold, ELU's alpha, LeakyReLU's
// negative slope. Both sides of a select are computed before it: a select with work in
// one arm is a branch, which keeps the loop scalar. GELU-tanh is x sigmoid(2u), with
// u = sqrt(2/pi)(x + c x^3): 0.5 x (1 + tanh u) without the cancellation of 1 + tanh u
// for negative x.
template <typename T>
TORCIA_CLONES_WIDE void forward_span(Act act, const T* __restrict__ x, T* __restrict__ y,
                                     int64_t n, T p0, T p1) {
  switch (act) {
    case Act::gelu:
      for (int64_t k = 0; k < n; ++k) {
        T e;
        y[k] = x[k] * gelu_cdf(x[k], e);
      }
      break;
    case Act::gelu_tanh:
      for (int64_t k = 0; k < n; ++k) {
        const T u = T(2 * kSqrt2OverPi) * (x[k] + T(kGeluTanhC) * x[k] * x[k] * x[k]);
        y[k] = x[k] * sigmoid_approx(u);
      }
      break;
    case Act::silu:
      for (int64_t k = 0; k < n; ++k) y[k] = x[k] * sigmoid_approx(x[k]);
      break;
    case Act::sigmoid:
      for (int64_t k = 0; k < n; ++k) y[k] = sigmoid_approx(x[k]);
      break;
    case Act::tanh:
      for (int64_t k = 0; k < n; ++k) y[k] = tanh_approx(x[k]);
      break;
    case Act::softplus:
      // log(1 + e^b) = max(b, 0) + log1p(e^-|b|); x itself above the threshold
      for (int64_t k = 0; k < n; ++k) {
        const T b = x[k] * p0;
        const T pos = b > T(0) ? b : T(0);
        const T soft = (pos + std::log1p(exp_approx(-std::fabs(b)))) / p0;
        y[k] = b > p1 ? x[k] : soft;
      }
      break;
    case Act::elu:
      for (int64_t k = 0; k < n; ++k) {
        const T neg = p0 * expm1_approx(nonpositive(x[k]));
        y[k] = x[k] > T(0) ? x[k] : neg;
      }
      break;
    case Act::leaky_relu:
      for (int64_t k = 0; k < n; ++k) y[k] = x[k] > T(0) ? x[k] : x[k] * p0;
      break;
    case Act::relu:
      // NaN kept (its comparison is false), as NumPy's maximum(x, 0)
      for (int64_t k = 0; k < n; ++k) y[k] = x[k] < T(0) ? T(0) : x[k];
      break;
  }
}

// out = g f'(x) over one span, parameters as forward_span's.
template <typename T>
TORCIA_CLONES_WIDE void backward_span(Act act, const T* __restrict__ g,
                                      const T* __restrict__ x, T* __restrict__ out, int64_t n,
                                      T p0, T p1) {
  const T one(1);
  switch (act) {
    case Act::gelu:
      for (int64_t k = 0; k < n; ++k) {
        T e;
        const T cdf = gelu_cdf(x[k], e);
        out[k] = g[k] * (cdf + x[k] * e * T(kInvSqrt2Pi));
      }
      break;
    case Act::gelu_tanh:
      // with s = sigmoid(2u): 0.5 (1 + tanh u) = s and 1 - tanh^2 u = 4 s (1 - s)
      for (int64_t k = 0; k < n; ++k) {
        const T xx = x[k] * x[k];
        const T u = T(kSqrt2OverPi) * (x[k] + T(kGeluTanhC) * xx * x[k]);
        const T s = sigmoid_approx(T(2) * u);
        const T du = T(kSqrt2OverPi) * (one + T(3 * kGeluTanhC) * xx);
        out[k] = g[k] * (s + T(2) * x[k] * s * (one - s) * du);
      }
      break;
    case Act::silu:
      for (int64_t k = 0; k < n; ++k) {
        const T s = sigmoid_approx(x[k]);
        out[k] = g[k] * s * (one + x[k] * (one - s));
      }
      break;
    // sigmoid's and tanh's x is the forward's output (PyTorch's sigmoid_backward and
    // tanh_backward), in the reference's order of operations: sigmoid's the same bits,
    // tanh's 1 - x^2 one FMA where the clone has it (within an ulp, the more accurate)
    case Act::sigmoid:
      for (int64_t k = 0; k < n; ++k) out[k] = g[k] * (x[k] * (one - x[k]));
      break;
    case Act::tanh:
      for (int64_t k = 0; k < n; ++k) out[k] = g[k] * (one - x[k] * x[k]);
      break;
    case Act::softplus:
      for (int64_t k = 0; k < n; ++k) {
        const T z = x[k] * p0;
        const T soft = g[k] * sigmoid_approx(z);
        out[k] = z > p1 ? g[k] : soft;
      }
      break;
    case Act::elu:
      for (int64_t k = 0; k < n; ++k) {
        const T neg = g[k] * p0 * exp_approx(nonpositive(x[k]));
        out[k] = x[k] > T(0) ? g[k] : neg;
      }
      break;
    case Act::leaky_relu:
      for (int64_t k = 0; k < n; ++k) out[k] = x[k] > T(0) ? g[k] : g[k] * p0;
      break;
    case Act::relu:
      // x: the input or the output, positive at the same places; zero where x <= 0, NaN
      // gradients there included, g where x is NaN (PyTorch's threshold_backward)
      for (int64_t k = 0; k < n; ++k) out[k] = x[k] <= T(0) ? T(0) : g[k];
      break;
  }
}

// body(lo, len) over the spans of [0, n), on OpenMP threads when there are several
template <typename Body>
void chunked(int64_t n, Body body) {
  py::gil_scoped_release release;
  const int64_t chunks = (n + kGrain - 1) / kGrain;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) body(c * kGrain, std::min(kGrain, n - c * kGrain));
}

template <typename T>
void run_forward(Act act, const py::array& x, py::array& y, double p0, double p1) {
  const T* xp = static_cast<const T*>(x.data());
  T* yp = static_cast<T*>(y.mutable_data());
  chunked(x.size(), [&](int64_t lo, int64_t len) {
    forward_span<T>(act, xp + lo, yp + lo, len, T(p0), T(p1));
  });
}

template <typename T>
void run_backward(Act act, const py::array& g, const py::array& x, py::array& out, double p0,
                  double p1) {
  const T* gp = static_cast<const T*>(g.data());
  const T* xp = static_cast<const T*>(x.data());
  T* op = static_cast<T*>(out.mutable_data());
  chunked(x.size(), [&](int64_t lo, int64_t len) {
    backward_span<T>(act, gp + lo, xp + lo, op + lo, len, T(p0), T(p1));
  });
}

void check_params(const std::string& fn, Act act, double p0) {
  if (act == Act::softplus && p0 == 0)
    throw std::runtime_error(fn + ": softplus's beta must not be 0");
}

// activation(name, x, p0, p1) -> f(x), a new array of x's shape and dtype.
py::array activation(const std::string& name, const py::array& x, double p0, double p1) {
  const std::string fn = "activation";
  const Act act = parse(fn, name);
  torcia_checks::float_array(fn, "x", x);
  check_params(fn, act, p0);
  py::array y(x.dtype(), std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  if (torcia_checks::is_dtype<float>(x.dtype()))
    run_forward<float>(act, x, y, p0, p1);
  else
    run_forward<double>(act, x, y, p0, p1);
  return y;
}

// activation_backward(name, g, x, p0, p1) -> g f'(x); g has x's shape and dtype.
py::array activation_backward(const std::string& name, const py::array& g, const py::array& x,
                              double p0, double p1) {
  const std::string fn = "activation_backward";
  const Act act = parse(fn, name);
  torcia_checks::float_array(fn, "x", x);
  torcia_checks::same(fn, "g", g, "x", x);
  check_params(fn, act, p0);
  py::array out(x.dtype(), std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  if (torcia_checks::is_dtype<float>(x.dtype()))
    run_backward<float>(act, g, x, out, p0, p1);
  else
    run_backward<double>(act, g, x, out, p0, p1);
  return out;
}

// out = mask ? v : a over one (rows, d) block, the mask repeated for every row: a select
// per element, in the lanes of the widest vectors (NumPy's where with a broadcast mask
// walks it in a slower, general iteration)
template <typename T>
TORCIA_CLONES_WIDE void fill_rows(const T* __restrict__ a, const uint8_t* __restrict__ mask,
                                  T* __restrict__ out, int64_t rows, int64_t d, T v) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* ar = a + r * d;
    T* orow = out + r * d;
    for (int64_t k = 0; k < d; ++k) orow[k] = mask[k] ? v : ar[k];
  }
}

// fill_rows over blocks of about kGrain elements, on OpenMP threads when there are several
template <typename T>
void run_fill(const py::array& a, const py::array& mask, py::array& out, double value) {
  const T* ap = static_cast<const T*>(a.data());
  const auto* m = static_cast<const uint8_t*>(mask.data());
  T* op = static_cast<T*>(out.mutable_data());
  const int64_t d = a.shape(1);
  py::gil_scoped_release release;
  torcia_team::for_row_blocks(a.shape(0), d, [&](int64_t lo, int64_t hi) {
    fill_rows<T>(ap + lo * d, m, op + lo * d, hi - lo, d, T(value));
  });
}

// masked_fill_rows(a (R, D), mask (D,) bool, value) -> a with value where the mask, which
// each row repeats, is True: a new C-contiguous array of a's dtype.
py::array masked_fill_rows(const py::array& a, const py::array& mask, double value) {
  const std::string fn = "masked_fill_rows";
  torcia_checks::float_array(fn, "a", a);
  if (a.ndim() != 2) throw std::runtime_error(fn + ": a must be 2-D, got " +
                                              torcia_checks::shape_of(a));
  if (!torcia_checks::is_dtype<bool>(mask.dtype()) || !(mask.flags() & py::array::c_style))
    throw std::runtime_error(fn + ": mask must be a C-contiguous bool array");
  if (mask.ndim() != 1 || mask.shape(0) != a.shape(1))
    throw std::runtime_error(fn + ": mask has shape " + torcia_checks::shape_of(mask) +
                             ", expected (" + std::to_string(a.shape(1)) + ",)");
  py::array out(a.dtype(), std::vector<py::ssize_t>{a.shape(0), a.shape(1)});
  if (out.size() == 0) return out;
  if (torcia_checks::is_dtype<float>(a.dtype()))
    run_fill<float>(a, mask, out, value);
  else
    run_fill<double>(a, mask, out, value);
  return out;
}

}  // namespace

void define_activations(py::module_& m) {
  m.def("activation", &activation, py::arg("name"), py::arg("x"), py::arg("p0") = 0.0,
        py::arg("p1") = 0.0);
  m.def("activation_backward", &activation_backward, py::arg("name"), py::arg("g"),
        py::arg("x"), py::arg("p0") = 0.0, py::arg("p1") = 0.0);
  m.def("masked_fill_rows", &masked_fill_rows, py::arg("a"), py::arg("mask"), py::arg("value"));
}
