// Vectorisable math shared by torcia-cpu's native kernels: the clone attribute that
// compiles a loop for AVX2+FMA and the baseline, and functions written in plain arithmetic
// (no calls into the C library, which would keep the loops around them scalar).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// The row loops are compiled twice on x86-64, for AVX2+FMA and for the baseline, and
// the loader picks one for the CPU at hand: AVX2 doubles the lanes and has the 64-bit
// integer compares and blends the pooling selects need (the LSTM cell: 2x faster,
// max pooling: 3.4x).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TORCIA_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
// the elementwise activations also for AVX-512, whose sixteen float lanes they fill
#define TORCIA_CLONES_WIDE \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TORCIA_CLONES
#define TORCIA_CLONES_WIDE
#endif

// The functions below are inlined whatever the inliner's size budget: a loop that calls
// them out of line (several in one kernel exceed the budget) stays scalar.
#if defined(__GNUC__)
#define TORCIA_INLINE inline __attribute__((always_inline))
#else
#define TORCIA_INLINE inline
#endif

// e^c = y 2^n for float in plain arithmetic (Cephes' range reduction and polynomial, ~1
// ulp): returns y and leaves n in the low bits of vbits' mantissa (2^22 + n). Plain
// arithmetic, so that the loops calling it vectorize: a call to the C library's expf or
// tanhf would keep them scalar, at several times NumPy's (SIMD) cost.
static TORCIA_INLINE float exp_reduced(float c, uint32_t& vbits) {
  // n = round(c log2 e): adding 1.5 * 2^23 leaves n in the low bits of v's mantissa
  // (|n| < 2^22), with no conversion to an integer and back (plain arithmetic, not
  // std::fma, which is a library call where the CPU has no FMA: the compiler contracts it
  // where it has; n may be off by one at a tie either way, which the polynomial covers)
  constexpr float kShift = 12582912.0f;
  const float v = c * 1.44269504088896341f + kShift;
  const float n = v - kShift;
  // n ln 2 in two parts, the first (9 significant bits) times n exact
  float r = c - n * 0.693359375f;
  r -= n * -2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * r * r + r + 1.0f;
  std::memcpy(&vbits, &v, sizeof vbits);
  return y;
}

// exp for c in [-87.33, 88.37] (a normal result; NaN gives NaN)
static TORCIA_INLINE float exp_in_range(float c) {
  uint32_t vbits;
  const float y = exp_reduced(c, vbits);
  // 2^n from v's low bits (v's own exponent bits are shifted out); unsigned, so that NaN's
  // bits shift without undefined behaviour (y is NaN already then)
  const uint32_t bits = (vbits + 127u) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

// exp for any float, as the C library's: 2^n applied as two normal factors, so that
// results above FLT_MAX overflow to inf and those below FLT_MIN round to subnormals (or
// 0) once; NaN stays NaN. Integer work only on bits (no float-to-int conversion,
// undefined for NaN).
static TORCIA_INLINE float exp_full(float x) {
  // beyond both clamps the result is inf or rounds to 0 (NaN passes: see exp_approx)
  const float c = std::min(std::max(x, -104.0f), 89.0f);
  uint32_t vbits;
  const float y = exp_reduced(c, vbits);
  // n in [-151, 129]: each half of it is a normal power of two
  const int32_t n = int32_t(vbits & 0x7fffffu) - 0x400000;
  const int32_t n1 = n / 2, n2 = n - n1;
  const uint32_t b1 = uint32_t(n1 + 127) << 23, b2 = uint32_t(n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof s1);
  std::memcpy(&s2, &b2, sizeof s2);
  return y * s1 * s2;
}

static TORCIA_INLINE double exp_full(double x) { return std::exp(x); }

// Row reductions in 64-byte vectors (sixteen float or eight double lanes; the narrower
// clones split them), each lane a running sum or maximum, combined at the end by halving
// the vector (four dependent steps for sixteen lanes). The former eight scalar lanes,
// combined one after the other, compiled to scalar maxima and sums whose chains were most
// of a short row's time: the online softmax of a 64x64 block of attention scores (NaN
// check, maximum, exp, sum a row) took 6.8 us on one AVX-512 thread, 4.8 us now.
template <typename T, int Bytes = 64>
struct LaneVector {
  typedef T type __attribute__((vector_size(Bytes)));
};
template <typename T, int Bytes = 64>
using Lanes = typename LaneVector<T, Bytes>::type;

template <typename T, int Bytes = 64>
static TORCIA_INLINE Lanes<T, Bytes> load_lanes(const T* x) {
  Lanes<T, Bytes> v;
  std::memcpy(&v, x, sizeof v);
  return v;
}

// op over the lanes of v, halving: the low half with the high half (in registers: a
// vector's lanes stored and read back one by one stall on the store), down to 16 bytes,
// then its lanes in pairs
template <typename T, int Bytes = 64, typename Op>
static TORCIA_INLINE T combine_lanes(Lanes<T, Bytes> v, Op op) {
  if constexpr (Bytes > 16) {
    Lanes<T, Bytes / 2> lo, hi;
    std::memcpy(&lo, &v, sizeof lo);
    std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
    return combine_lanes<T, Bytes / 2>(op(lo, hi), op);
  } else if constexpr (sizeof(T) == 4) {
    return op(op(v[0], v[2]), op(v[1], v[3]));
  } else {
    return op(v[0], v[1]);
  }
}

// the sum of x[0, n); two vectors of partial sums, so that the additions of a long row
// overlap rather than wait on each other (the compiler may not reorder float sums itself)
template <typename T>
static TORCIA_INLINE T sum_lanes(const T* __restrict__ x, int64_t n) {
  constexpr int64_t W = 64 / sizeof(T);
  Lanes<T> a = {}, b = {};
  int64_t k = 0;
  for (; k + 2 * W <= n; k += 2 * W) {
    a += load_lanes(x + k);
    b += load_lanes(x + k + W);
  }
  if (k + W <= n) {
    a += load_lanes(x + k);
    k += W;
  }
  T total = combine_lanes<T>(a + b, [](auto p, auto q) { return p + q; });
  for (; k < n; ++k) total += x[k];
  return total;
}

// the dot product of x[0, n) and y[0, n), in lanes as sum_lanes
template <typename T>
static TORCIA_INLINE T dot_lanes(const T* __restrict__ x, const T* __restrict__ y, int64_t n) {
  constexpr int64_t W = 64 / sizeof(T);
  Lanes<T> a = {}, b = {};
  int64_t k = 0;
  for (; k + 2 * W <= n; k += 2 * W) {
    a += load_lanes(x + k) * load_lanes(y + k);
    b += load_lanes(x + k + W) * load_lanes(y + k + W);
  }
  if (k + W <= n) {
    a += load_lanes(x + k) * load_lanes(y + k);
    k += W;
  }
  T total = combine_lanes<T>(a + b, [](auto p, auto q) { return p + q; });
  for (; k < n; ++k) total += x[k] * y[k];
  return total;
}

// The largest of start and x[0, n); a NaN loses every comparison, so it is passed over
// (and a NaN start is the result).
template <typename T>
static TORCIA_INLINE T max_lanes(const T* __restrict__ x, int64_t n, T start) {
  constexpr int64_t W = 64 / sizeof(T);
  Lanes<T> lanes = start - Lanes<T>{};
  int64_t k = 0;
  for (; k + W <= n; k += W) {
    const Lanes<T> v = load_lanes(x + k);
    lanes = v > lanes ? v : lanes;
  }
  T m = start;
  for (; k < n; ++k) m = x[k] > m ? x[k] : m;
  const T top = combine_lanes<T>(lanes, [](auto p, auto q) { return q > p ? q : p; });
  return top > m ? top : m;
}

// exp for any float x; double keeps std::exp.
static TORCIA_INLINE float exp_approx(float x) {
  // NaN passes the clamp (x first: std::max(x, lo) is x when the comparison is false)
  const float c = std::min(std::max(x, -87.33f), 88.37f);
  // underflow gives 0, so that exp(-inf) is exactly 0; a product, not a select, which
  // would keep the loops around it scalar (and NaN * 0 stays NaN)
  return exp_in_range(c) * static_cast<float>(x >= -87.33f);
}

static TORCIA_INLINE double exp_approx(double x) { return std::exp(x); }

// tanh for float: Cephes' odd polynomial below |x| = 0.625 (where 1 - 2 / (e^2x + 1)
// would lose digits to cancellation), that expression above; both are computed and one
// picked, so that the loop stays vectorised. copysign keeps tanh(-0) = -0. tanh rounds to
// 1 from |x| = 9.01 on, so e^2x is taken at |x| <= 10, where it needs none of
// exp_approx's clamps for overflow and underflow (1M elements: 0.68 -> 0.54 ms on one
// AVX-512 thread; NaN passes std::min, see exp_approx).
static TORCIA_INLINE float tanh_approx(float x) {
  const float z = std::fabs(x);
  const float s = x * x;
  float p = -5.70498872745e-3f;
  p = p * s + 2.06390887954e-2f;
  p = p * s - 5.37397155531e-2f;
  p = p * s + 1.33314422036e-1f;
  p = p * s - 3.33332819422e-1f;
  const float small = std::copysign(p * s * x + x, x);
  const float large =
      std::copysign(1.0f - 2.0f / (exp_in_range(2.0f * std::min(z, 10.0f)) + 1.0f), x);
  return z < 0.625f ? small : large;
}

static TORCIA_INLINE double tanh_approx(double x) { return std::tanh(x); }

// expm1 for float: its Taylor polynomial below |x| = 0.5 (relative error under 3e-7),
// exp(x) - 1 above, where the subtraction no longer cancels digits. copysign: the sum
// x^2 p + x gives +0 at x = -0, where libm and torch give -0.
static TORCIA_INLINE float expm1_approx(float x) {
  float p = 1.0f / 5040;
  p = p * x + 1.0f / 720;
  p = p * x + 1.0f / 120;
  p = p * x + 1.0f / 24;
  p = p * x + 1.0f / 6;
  p = p * x + 0.5f;
  const float small = std::copysign((p * x) * x + x, x);
  const float large = exp_approx(x) - 1.0f;
  return std::fabs(x) < 0.5f ? small : large;
}

static TORCIA_INLINE double expm1_approx(double x) { return std::expm1(x); }

// sigmoid through exp(-|x|), which never overflows: 1 / (1 + e) for x >= 0, e / (1 + e)
// below.
template <typename T>
static TORCIA_INLINE T sigmoid_approx(T x) {
  const T e = exp_approx(-std::fabs(x));
  return (x >= T(0) ? T(1) : e) / (T(1) + e);
}
