// Elementwise arithmetic and sums of large float32/float64 arrays on OpenMP threads.
//
// NumPy runs these on one core. Here each runs over fixed spans of kGrain elements (the
// grain PyTorch's CPU kernels use), one OpenMP task a span, so a small array stays on the
// calling thread, and a sum adds its spans' partial sums in span order: the result does
// not depend on the thread count (nor on the schedule). The arithmetic is the reference's
// to the bit (IEEE operations on the same operands, a scalar rounded to the array's dtype
// first, as NumPy does with a Python number); the sums accumulate in double (a sum over
// leading rows adds eight rows pairwise first: add_rows) and so differ from NumPy's
// pairwise float32 sums in the last bits (they are more accurate).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "checks.h"
#include "team.h"
#include "vecmath.h"

namespace py = pybind11;
using std::int64_t;

namespace {

using torcia_team::kGrain;
// Output columns per task of a sum over a dim with a contiguous inner part: their
// double accumulators (8 KB) stay in L1.
constexpr int64_t kColumns = 1024;
// A sum over a dim with fewer output blocks of columns than this also splits its rows
// (run_sum); into at most kMaxPieces pieces.
constexpr int64_t kSplitBelow = 16;
constexpr int64_t kMaxPieces = 32;

enum class Bin { add, sub, mul, div };
enum class Un { neg, abs, sqrt, rsqrt, reciprocal, square, exp };

Bin parse_binary(const std::string& name) {
  if (name == "add") return Bin::add;
  if (name == "sub") return Bin::sub;
  if (name == "mul") return Bin::mul;
  if (name == "div") return Bin::div;
  throw std::runtime_error("binary: unknown op '" + name + "'");
}

Un parse_unary(const std::string& name) {
  if (name == "neg") return Un::neg;
  if (name == "abs") return Un::abs;
  if (name == "sqrt") return Un::sqrt;
  if (name == "rsqrt") return Un::rsqrt;
  if (name == "reciprocal") return Un::reciprocal;
  if (name == "square") return Un::square;
  if (name == "exp") return Un::exp;
  throw std::runtime_error("unary: unknown op '" + name + "'");
}

bool is_f32(const py::array& a) { return torcia_checks::is_dtype<float>(a.dtype()); }

// body(lo, len) over the spans of [0, n), on OpenMP threads when there are several
template <typename Body>
void spans(int64_t n, Body body) {
  const int64_t count = (n + kGrain - 1) / kGrain;
  if (count <= 1) {
    if (n) body(0, n);
    return;
  }
  py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) schedule(static)
  for (int64_t c = 0; c < count; ++c) body(c * kGrain, std::min(kGrain, n - c * kGrain));
}

template <typename T>
TORCIA_INLINE T apply(Bin op, T x, T y) {
  switch (op) {
    case Bin::add: return x + y;
    case Bin::sub: return x - y;
    case Bin::mul: return x * y;
    case Bin::div: return x / y;
  }
  return x;
}

// out[k] = x[k] op y[k] over one piece; OP a template argument, so each loop is one
// vectorised instruction stream
template <Bin OP, typename T>
TORCIA_CLONES_WIDE void binary_piece(const T* __restrict__ x, const T* __restrict__ y,
                                     T* __restrict__ out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = apply(OP, x[k], y[k]);
}

// out[k] = x[k] op s, or s op x[k] (scalar first)
template <Bin OP, bool FIRST, typename T>
TORCIA_CLONES_WIDE void scalar_piece(const T* __restrict__ x, T s, T* __restrict__ out,
                                     int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = FIRST ? apply(OP, s, x[k]) : apply(OP, x[k], s);
}

// The in-place pieces (an out= that is an operand): io[k] = io[k] op y[k] (or y[k] op
// io[k] when IO_FIRST is false), and io[k] = io[k] op io[k]. binary_piece's restrict
// pointers may not alias; here the written pointer is read at the same index only, and
// the other one is another array, so each loop still vectorises with no overlap test.
template <Bin OP, bool IO_FIRST, typename T>
TORCIA_CLONES_WIDE void inplace_piece(T* __restrict__ io, const T* __restrict__ y,
                                      int64_t n) {
  for (int64_t k = 0; k < n; ++k)
    io[k] = IO_FIRST ? apply(OP, io[k], y[k]) : apply(OP, y[k], io[k]);
}

template <Bin OP, typename T>
TORCIA_CLONES_WIDE void self_piece(T* io, int64_t n) {
  for (int64_t k = 0; k < n; ++k) io[k] = apply(OP, io[k], io[k]);
}

template <Bin OP, bool FIRST, typename T>
TORCIA_CLONES_WIDE void scalar_inplace_piece(T* io, T s, int64_t n) {
  for (int64_t k = 0; k < n; ++k) io[k] = FIRST ? apply(OP, s, io[k]) : apply(OP, io[k], s);
}

// x + y * t, with t = s for add and -s for sub, as one fused multiply-add (one
// rounding), as PyTorch's add and sub with alpha compute it. std::fma is exact in every
// clone (the x86-64-v3 ones have the instruction, the baseline calls libm's).

// out[k] = fma(y[k], t, x[k]) into memory of its own
template <typename T>
TORCIA_CLONES_WIDE void scaled_piece_apart(const T* __restrict__ x, const T* __restrict__ y,
                                           T t, T* __restrict__ out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = std::fma(y[k], t, x[k]);
}

// io[k] = fma(v[k], t, io[k]) (IO_FIRST), or fma(io[k], t, v[k])
template <bool IO_FIRST, typename T>
TORCIA_CLONES_WIDE void scaled_piece_inplace(T* __restrict__ io, const T* __restrict__ v,
                                             T t, int64_t n) {
  for (int64_t k = 0; k < n; ++k)
    io[k] = IO_FIRST ? std::fma(v[k], t, io[k]) : std::fma(io[k], t, v[k]);
}

// io[k] = fma(io[k], t, io[k])
template <typename T>
TORCIA_CLONES_WIDE void scaled_piece_self(T* io, T t, int64_t n) {
  for (int64_t k = 0; k < n; ++k) io[k] = std::fma(io[k], t, io[k]);
}

// out[k] = x[k] op y[k] * s (add and sub); out is x, y, both, or memory of its own
template <Bin OP, typename T>
void scaled_piece(const T* x, const T* y, T s, T* out, int64_t n) {
  const T t = OP == Bin::add ? s : -s;
  if (out == x && out == y)
    scaled_piece_self<T>(out, t, n);
  else if (out == x)
    scaled_piece_inplace<true, T>(out, y, t, n);
  else if (out == y)
    scaled_piece_inplace<false, T>(out, x, t, n);
  else
    scaled_piece_apart<T>(x, y, t, out, n);
}

// out[k] = x[k] op y[k], where out is x, y, both, or memory of its own (out_array)
template <Bin OP, typename T>
void any_piece(const T* x, const T* y, T* out, int64_t n) {
  if (out == x && out == y)
    self_piece<OP, T>(out, n);
  else if (out == x)
    inplace_piece<OP, true, T>(out, y, n);
  else if (out == y)
    inplace_piece<OP, false, T>(out, x, n);
  else
    binary_piece<OP, T>(x, y, out, n);
}

// a op b (a op b * alpha where scaled), b (or a, when a_row) repeated every d elements
// of the other: one piece per stretch of [lo, lo + len) that lies within one repetition
template <Bin OP, typename T>
void run_binary(const T* a, const T* b, T* out, int64_t n, int64_t d, bool a_row,
                bool scaled, T alpha) {
  const auto piece = [&](const T* x, const T* y, T* o, int64_t m) {
    if (scaled)
      scaled_piece<OP, T>(x, y, alpha, o, m);
    else
      any_piece<OP, T>(x, y, o, m);
  };
  spans(n, [&](int64_t lo, int64_t len) {
    for (int64_t i = lo, end = lo + len; i < end;) {
      const int64_t k = i % d, m = std::min(d - k, end - i);
      if (a_row)
        piece(a + k, b + i, out + i, m);
      else
        piece(a + i, b + k, out + i, m);
      i += m;
    }
  });
}

template <Bin OP, typename T>
void run_scalar(const T* x, T s, T* out, int64_t n, bool scalar_first) {
  spans(n, [&](int64_t lo, int64_t len) {
    if (out == x) {
      if (scalar_first)
        scalar_inplace_piece<OP, true, T>(out + lo, s, len);
      else
        scalar_inplace_piece<OP, false, T>(out + lo, s, len);
    } else if (scalar_first) {
      scalar_piece<OP, true, T>(x + lo, s, out + lo, len);
    } else {
      scalar_piece<OP, false, T>(x + lo, s, out + lo, len);
    }
  });
}

template <typename F>
void by_op(Bin op, F f) {
  switch (op) {
    case Bin::add: f(std::integral_constant<Bin, Bin::add>{}); break;
    case Bin::sub: f(std::integral_constant<Bin, Bin::sub>{}); break;
    case Bin::mul: f(std::integral_constant<Bin, Bin::mul>{}); break;
    case Bin::div: f(std::integral_constant<Bin, Bin::div>{}); break;
  }
}

void flat_array(const std::string& fn, const std::string& name, const py::array& a) {
  torcia_checks::float_array(fn, name, a);
  if (a.ndim() != 1)
    throw std::runtime_error(fn + ": " + name + " must be 1-D, got " +
                             torcia_checks::shape_of(a));
}

// The array a kernel writes its result into: a new one of `shape` and like's dtype where
// out_arg is None, else out_arg, checked before anything is written: an array, writeable,
// C-contiguous, of like's dtype and of `shape`, and either one of the operands (the same
// first element and size: elementwise, each element is read before it is written) or
// memory of its own (a partial overlap would read elements already written).
py::array out_array(const std::string& fn, const py::object& out_arg, const py::array& like,
                    const std::vector<py::ssize_t>& shape,
                    std::initializer_list<const py::array*> operands) {
  if (out_arg.is_none()) return py::array(like.dtype(), shape);
  if (!py::isinstance<py::array>(out_arg))
    throw std::runtime_error(fn + ": out must be a NumPy array, got " +
                             std::string(py::str(py::type::of(out_arg))));
  py::array out = py::reinterpret_borrow<py::array>(out_arg);
  torcia_checks::like(fn, "out", out, "the operands", like);
  if (!out.writeable()) throw std::runtime_error(fn + ": out is read-only");
  bool fits = out.ndim() == static_cast<py::ssize_t>(shape.size());
  for (size_t i = 0; fits && i < shape.size(); ++i) fits = out.shape(i) == shape[i];
  if (!fits) {
    std::string want = "(";
    for (size_t i = 0; i < shape.size(); ++i)
      want += (i ? ", " : "") + std::to_string(shape[i]);
    throw std::runtime_error(fn + ": out has shape " + torcia_checks::shape_of(out) +
                             ", the result has " + want + (shape.size() == 1 ? ",)" : ")"));
  }
  const char* lo = static_cast<const char*>(out.data());
  const char* hi = lo + out.nbytes();
  for (const py::array* x : operands) {
    const char* xlo = static_cast<const char*>(x->data());
    const char* xhi = xlo + x->nbytes();
    const bool apart = xhi <= lo || hi <= xlo || out.nbytes() == 0 || x->nbytes() == 0;
    if (!apart && !(xlo == lo && xhi == hi))
      throw std::runtime_error(fn + ": out overlaps an operand in part");
  }
  return out;
}

// binary(op, a, b, out=None, alpha=None) -> a op b, 1-D: a and b 1-D, C-contiguous, of
// one float dtype; the shorter (of d elements) repeats along the longer, whose length d
// divides. The result is a new array, or out (see out_array), which may be a or b: a += b.
// alpha (add and sub): a op (b * alpha), alpha rounded to the dtype and the product to
// it before the sum, as mul's kernel and then the op's give it.
py::array binary(const std::string& name, const py::array& a, const py::array& b,
                 const py::object& out_arg, std::optional<double> alpha) {
  const std::string fn = "binary";
  const Bin op = parse_binary(name);
  if (alpha && op != Bin::add && op != Bin::sub)
    throw std::runtime_error(fn + ": alpha is add's and sub's, not " + name + "'s");
  flat_array(fn, "a", a);
  flat_array(fn, "b", b);
  torcia_checks::like(fn, "b", b, "a", a);
  const bool a_row = a.size() < b.size();
  const int64_t n = std::max(a.size(), b.size()), d = std::min(a.size(), b.size());
  if (d == 0 ? n != 0 : n % d != 0)
    throw std::runtime_error(fn + ": the lengths " + std::to_string(a.size()) + " and " +
                             std::to_string(b.size()) + " do not repeat into each other");
  py::array out = out_array(fn, out_arg, a, {n}, {&a, &b});
  if (n == 0) return out;
  by_op(op, [&](auto c) {
    const double s = alpha.value_or(1.0);
    if (is_f32(a))
      run_binary<decltype(c)::value, float>(static_cast<const float*>(a.data()),
                                            static_cast<const float*>(b.data()),
                                            static_cast<float*>(out.mutable_data()), n, d,
                                            a_row, alpha.has_value(), static_cast<float>(s));
    else
      run_binary<decltype(c)::value, double>(static_cast<const double*>(a.data()),
                                             static_cast<const double*>(b.data()),
                                             static_cast<double*>(out.mutable_data()), n, d,
                                             a_row, alpha.has_value(), s);
  });
  return out;
}

// binary_scalar(op, x, s, scalar_first, out=None) -> x op s (s op x when scalar_first),
// of x's shape: x C-contiguous float32 or float64, s rounded to x's dtype first. The
// result is a new array, or out (see out_array), which may be x: x *= s.
py::array binary_scalar(const std::string& name, const py::array& x, double s,
                        bool scalar_first, const py::object& out_arg) {
  const std::string fn = "binary_scalar";
  const Bin op = parse_binary(name);
  torcia_checks::float_array(fn, "x", x);
  py::array out = out_array(fn, out_arg, x,
                            std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()), {&x});
  by_op(op, [&](auto c) {
    if (is_f32(x))
      run_scalar<decltype(c)::value, float>(static_cast<const float*>(x.data()),
                                            static_cast<float>(s),
                                            static_cast<float*>(out.mutable_data()), x.size(),
                                            scalar_first);
    else
      run_scalar<decltype(c)::value, double>(static_cast<const double*>(x.data()), s,
                                             static_cast<double*>(out.mutable_data()),
                                             x.size(), scalar_first);
  });
  return out;
}

// lerp with a number weight w and addcmul with a number value v, as PyTorch's CPU kernels
// round them (and the reference, to the bit): lerp one fused multiply-add from the nearer
// end, fma(w, b - a, a) below |w| = 0.5, fma(-(b - a), 1 - w, b) from there (NaN: the
// end's; -(b - a), not a - b: the sign of a zero difference as PyTorch's);
// addcmul fma(v * b, c, a).
template <typename T>
TORCIA_CLONES_WIDE void lerp_span(const T* __restrict__ a, const T* __restrict__ b, T w,
                                  T* __restrict__ out, int64_t n) {
  if (std::fabs(w) < T(0.5)) {
    for (int64_t k = 0; k < n; ++k) out[k] = std::fma(w, b[k] - a[k], a[k]);
  } else {
    const T rest = T(1) - w;
    for (int64_t k = 0; k < n; ++k) out[k] = std::fma(-(b[k] - a[k]), rest, b[k]);
  }
}

template <typename T>
TORCIA_CLONES_WIDE void addcmul_span(const T* __restrict__ a, const T* __restrict__ b,
                                     const T* __restrict__ c, T v, T* __restrict__ out,
                                     int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = std::fma(v * b[k], c[k], a[k]);
}

template <typename T>
void fused_typed(bool lerp, const py::array& a, const py::array& b, const py::array* c,
                 double s, py::array& out) {
  const T* ap = static_cast<const T*>(a.data());
  const T* bp = static_cast<const T*>(b.data());
  const T* cp = c ? static_cast<const T*>(c->data()) : nullptr;
  T* op = static_cast<T*>(out.mutable_data());
  const T scalar = static_cast<T>(s);
  spans(a.size(), [&](int64_t lo, int64_t len) {
    if (lerp)
      lerp_span<T>(ap + lo, bp + lo, scalar, op + lo, len);
    else
      addcmul_span<T>(ap + lo, bp + lo, cp + lo, scalar, op + lo, len);
  });
}

// fused(op, a, b, c, s) -> lerp(a, b, s) (c None) or addcmul(a, b, c, value=s), a new
// array: a, b (and c) C-contiguous float arrays of one dtype and shape
py::array fused(const std::string& name, const py::array& a, const py::array& b,
                const py::object& c_arg, double s) {
  const std::string fn = "fused";
  if (name != "lerp" && name != "addcmul")
    throw std::runtime_error(fn + ": unknown op '" + name + "' (lerp, addcmul)");
  const bool lerp = name == "lerp";
  torcia_checks::float_array(fn, "a", a);
  torcia_checks::same(fn, "b", b, "a", a);
  py::array c;
  if (!lerp) {
    if (c_arg.is_none()) throw std::runtime_error(fn + ": addcmul needs c");
    c = py::reinterpret_borrow<py::array>(c_arg);
    torcia_checks::same(fn, "c", c, "a", a);
  } else if (!c_arg.is_none()) {
    throw std::runtime_error(fn + ": lerp takes no c");
  }
  py::array out(a.dtype(), std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  if (is_f32(a))
    fused_typed<float>(lerp, a, b, lerp ? nullptr : &c, s, out);
  else
    fused_typed<double>(lerp, a, b, lerp ? nullptr : &c, s, out);
  return out;
}

// y = f(x) over one span; exp: float32's polynomial (about 1 ulp), float64's C library
template <typename T>
TORCIA_CLONES_WIDE void unary_span(Un op, const T* __restrict__ x, T* __restrict__ y,
                                   int64_t n) {
  switch (op) {
    case Un::neg:
      for (int64_t k = 0; k < n; ++k) y[k] = -x[k];
      break;
    case Un::abs:
      for (int64_t k = 0; k < n; ++k) y[k] = std::fabs(x[k]);
      break;
    case Un::sqrt:
      for (int64_t k = 0; k < n; ++k) y[k] = std::sqrt(x[k]);
      break;
    case Un::rsqrt:
      // the reference's 1 / sqrt(x), two correctly rounded operations
      for (int64_t k = 0; k < n; ++k) y[k] = T(1) / std::sqrt(x[k]);
      break;
    case Un::reciprocal:
      for (int64_t k = 0; k < n; ++k) y[k] = T(1) / x[k];
      break;
    case Un::square:
      for (int64_t k = 0; k < n; ++k) y[k] = x[k] * x[k];
      break;
    case Un::exp:
      for (int64_t k = 0; k < n; ++k) y[k] = exp_full(x[k]);
      break;
  }
}

// unary(op, x) -> f(x), a new array of x's shape and dtype (x C-contiguous float)
py::array unary(const std::string& name, const py::array& x) {
  const std::string fn = "unary";
  const Un op = parse_unary(name);
  torcia_checks::float_array(fn, "x", x);
  py::array y(x.dtype(), std::vector<py::ssize_t>(x.shape(), x.shape() + x.ndim()));
  if (is_f32(x)) {
    const float* xp = static_cast<const float*>(x.data());
    float* yp = static_cast<float*>(y.mutable_data());
    spans(x.size(), [&](int64_t lo, int64_t len) { unary_span<float>(op, xp + lo, yp + lo, len); });
  } else {
    const double* xp = static_cast<const double*>(x.data());
    double* yp = static_cast<double*>(y.mutable_data());
    spans(x.size(), [&](int64_t lo, int64_t len) { unary_span<double>(op, xp + lo, yp + lo, len); });
  }
  return y;
}

// the sum of x[0, n) in double, in an order fixed by the code (lanes of the widest
// vectors, then their total)
template <typename T>
TORCIA_CLONES_WIDE double span_sum(const T* __restrict__ x, int64_t n) {
  double acc = 0.0;
#pragma omp simd reduction(+ : acc)
  for (int64_t k = 0; k < n; ++k) acc += double(x[k]);
  return acc;
}

// the sum of x[0, n): its kGrain spans' sums added in span order, the spans on OpenMP
// threads when parallel is set and there are several
template <typename T>
double total(const T* x, int64_t n, bool parallel) {
  const int64_t count = (n + kGrain - 1) / kGrain;
  if (count <= 1) return n ? span_sum(x, n) : 0.0;
  std::vector<double> part(count);
  if (parallel) {
    py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) schedule(static)
    for (int64_t c = 0; c < count; ++c)
      part[c] = span_sum(x + c * kGrain, std::min(kGrain, n - c * kGrain));
  } else {
    for (int64_t c = 0; c < count; ++c)
      part[c] = span_sum(x + c * kGrain, std::min(kGrain, n - c * kGrain));
  }
  double acc = 0.0;
  for (double p : part) acc += p;
  return acc;
}

// acc[j] += the sum of x's rows [0, rows) at column j, j < n (rows `stride` elements
// apart). Eight rows at a time are added pairwise in T, and their sum once into the
// double acc: a row at a time, converting each element to double and loading and storing
// acc per row, bias gradients' column sums ran at 1.2-2.2x PyTorch's time. The pairwise
// sum rounds three times, so each column's error stays below 3 eps (sum of |x|) on top
// of the double accumulation's: PyTorch's cascade sums, in float with levels of
// sequential sums, round more.
template <typename T>
TORCIA_CLONES_WIDE void add_rows(const T* __restrict__ x, int64_t stride, int64_t rows,
                                 double* __restrict__ acc, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= rows; i += 8) {
    const T* __restrict__ r0 = x + i * stride;
    const T* __restrict__ r1 = r0 + stride;
    const T* __restrict__ r2 = r1 + stride;
    const T* __restrict__ r3 = r2 + stride;
    const T* __restrict__ r4 = r3 + stride;
    const T* __restrict__ r5 = r4 + stride;
    const T* __restrict__ r6 = r5 + stride;
    const T* __restrict__ r7 = r6 + stride;
    for (int64_t j = 0; j < n; ++j)
      acc[j] += double(((r0[j] + r1[j]) + (r2[j] + r3[j])) +
                       ((r4[j] + r5[j]) + (r6[j] + r7[j])));
  }
  for (; i < rows; ++i) {
    const T* __restrict__ r = x + i * stride;
    for (int64_t j = 0; j < n; ++j) acc[j] += double(r[j]);
  }
}

// out (outer, inner) = the sum over r of x (outer, r, inner) divided by divisor (1, or r
// for a mean), rounded once to T. Every output element adds its terms in an order fixed by
// the shape alone, whatever the thread count: rows of a contiguous reduction as total()
// does; columns one row after the other, or, where the output has fewer than
// kSplitBelow blocks of columns (a bias gradient: the sum of a (rows, features) gradient
// over its rows), over pieces of rows summed apart and then added in piece order.
template <typename T>
void run_sum(const T* x, T* out, int64_t outer, int64_t r, int64_t inner, double divisor) {
  const bool big = outer * r * inner >= 2 * kGrain;
  if (inner == 1) {
    if (outer == 1) {
      out[0] = T(total(x, r, big) / divisor);
      return;
    }
    py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) schedule(static) if (big)
    for (int64_t o = 0; o < outer; ++o) out[o] = T(total(x + o * r, r, false) / divisor);
    return;
  }
  const int64_t blocks = (inner + kColumns - 1) / kColumns;
  const int64_t width = std::min(inner, kColumns);
  // pieces of at least a grain each, at most kMaxPieces (their partial sums stay small)
  const int64_t pieces = big && outer * blocks < kSplitBelow
                             ? std::max<int64_t>(1, std::min(kMaxPieces, r * width / kGrain))
                             : 1;
  const int64_t tasks = outer * blocks * pieces;
  if (pieces <= 1) {
    py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) \
    schedule(static) if (big && tasks > 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t o = t / blocks, j0 = (t % blocks) * kColumns;
      const int64_t m = std::min(kColumns, inner - j0);
      double acc[kColumns] = {};
      const T* base = x + o * r * inner + j0;
      add_rows(base, inner, r, acc, m);
      T* dst = out + o * inner + j0;
      for (int64_t j = 0; j < m; ++j) dst[j] = T(acc[j] / divisor);
    }
    return;
  }
  const int64_t rows = (r + pieces - 1) / pieces;
  // a task's sums `width` doubles apart (not kColumns: a bias of 128 features zeroes and
  // reads an eighth of the memory)
  std::vector<double> part(tasks * width, 0.0);
  py::gil_scoped_release release;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t ob = t / pieces, p = t % pieces;
    const int64_t o = ob / blocks, j0 = (ob % blocks) * kColumns;
    const int64_t m = std::min(kColumns, inner - j0);
    const int64_t lo = p * rows, hi = std::min(r, lo + rows);
    double* acc = part.data() + t * width;
    const T* base = x + o * r * inner + j0;
    add_rows(base + lo * inner, inner, hi - lo, acc, m);
  }
  // the pieces' sums added into the first one's, a row of them at a time (contiguous
  // columns: a column at a time walked the pieces kColumns doubles apart, one cache set
  // for all, and took most of the sum's time)
  for (int64_t ob = 0; ob < outer * blocks; ++ob) {
    const int64_t o = ob / blocks, j0 = (ob % blocks) * kColumns;
    const int64_t m = std::min(kColumns, inner - j0);
    double* first = part.data() + ob * pieces * width;
    add_rows(first + width, width, pieces - 1, first, m);
    T* dst = out + o * inner + j0;
    for (int64_t j = 0; j < m; ++j) dst[j] = T(first[j] / divisor);
  }
}

// reduce_sum(x, outer, r, inner, mean) -> x's sum (mean: average) over the middle dim of
// x viewed as (outer, r, inner), a new 1-D array of outer * inner elements of x's dtype
// (x C-contiguous float32 or float64 of outer * r * inner elements)
py::array reduce_sum(const py::array& x, int64_t outer, int64_t r, int64_t inner, bool mean) {
  const std::string fn = "reduce_sum";
  torcia_checks::float_array(fn, "x", x);
  if (outer < 0 || r < 0 || inner < 0 || outer * r * inner != x.size())
    throw std::runtime_error(fn + ": (" + std::to_string(outer) + ", " + std::to_string(r) +
                             ", " + std::to_string(inner) + ") does not match x's " +
                             std::to_string(x.size()) + " elements");
  py::array out(x.dtype(), std::vector<py::ssize_t>{outer * inner});
  if (outer * inner == 0) return out;
  // a mean over nothing is NaN, as NumPy's (0 / 0)
  const double divisor = mean ? double(r) : 1.0;
  if (is_f32(x))
    run_sum<float>(static_cast<const float*>(x.data()), static_cast<float*>(out.mutable_data()),
                   outer, r, inner, divisor);
  else
    run_sum<double>(static_cast<const double*>(x.data()),
                    static_cast<double*>(out.mutable_data()), outer, r, inner, divisor);
  return out;
}

// The bytes of an element of a, whose dtype is one of numbers (bool, integers, floats,
// complex) of 1, 2, 4, 8 or 16 bytes, which the copies move by size alone
int64_t number_item(const std::string& fn, const std::string& name, const py::array& a) {
  const char kind = a.dtype().kind();
  const int64_t item = a.itemsize();
  if ((kind != 'b' && kind != 'i' && kind != 'u' && kind != 'f' && kind != 'c') ||
      (item != 1 && item != 2 && item != 4 && item != 8 && item != 16))
    throw std::runtime_error(fn + ": " + name + " of " + std::string(py::str(a.dtype())) +
                             ": expected bool, integer, float or complex numbers");
  return item;
}

// Bytes a copy writes per task: kGrain float32s.
constexpr int64_t kSpan = kGrain * int64_t(sizeof(float));

// copy(lo, hi) over the spans of `span` units of [0, total), on the team where there are
// several (the caller holds no GIL)
template <typename Copy>
void copy_spans(int64_t total, int64_t span, Copy copy) {
  const int64_t count = (total + span - 1) / span;
#pragma omp parallel for num_threads(torcia_team::fixed_split()) schedule(static) if (count > 1)
  for (int64_t c = 0; c < count; ++c) copy(c * span, std::min(total, (c + 1) * span));
}

// One array of a cat: where its elements are, by byte strides (any, negative and zero
// ones too), split at the dim joined along into the outer dims (a row of the result) and
// the inner ones (the array's part of that row, `width` bytes).
struct Piece {
  const char* data;
  std::vector<int64_t> outer_strides, inner_shape, inner_strides;
  int64_t width;
  bool dense;  // the inner part of a row is one run of memory, in C order
};

// Element `e` onward (C order over shape) of a block with byte strides: the offset of
// its first element.
int64_t offset_of(int64_t e, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0 && e; --d) {
    off += (e % shape[d]) * strides[d];
    e /= shape[d];
  }
  return off;
}

// `count` elements of ITEM bytes from `src`, `stride` bytes apart, to consecutive `dst`;
// of one element repeated (a broadcast dim, stride 0) in doubling copies of the elements
// already written (an element at a time took 2 to 9x NumPy's time)
template <int64_t ITEM>
void gather(char* __restrict__ dst, const char* __restrict__ src, int64_t stride,
            int64_t count) {
  if (stride == 0 && count) {
    std::memcpy(dst, src, ITEM);
    for (int64_t done = 1; done < count; done *= 2)
      std::memcpy(dst + done * ITEM, dst, std::min(done, count - done) * ITEM);
    return;
  }
  for (int64_t k = 0; k < count; ++k) std::memcpy(dst + k * ITEM, src + k * stride, ITEM);
}

void gather_items(int64_t item, char* dst, const char* src, int64_t stride, int64_t count) {
  switch (item) {
    case 1: return gather<1>(dst, src, stride, count);
    case 2: return gather<2>(dst, src, stride, count);
    case 4: return gather<4>(dst, src, stride, count);
    case 8: return gather<8>(dst, src, stride, count);
    default: return gather<16>(dst, src, stride, count);
  }
}

// elements [e, e + count) of a piece's inner block at `base` to `dst`: along its last
// dim a run at a time
void copy_inner(const Piece& p, int64_t item, char* dst, const char* base, int64_t e,
                int64_t count) {
  if (p.dense) {
    std::memcpy(dst, base + e * item, count * item);
    return;
  }
  const int64_t last = p.inner_shape.back(), step = p.inner_strides.back();
  while (count > 0) {
    const int64_t j = e % last, run = std::min(count, last - j);
    const char* from = base + offset_of(e, p.inner_shape, p.inner_strides);
    if (step == item)
      std::memcpy(dst, from, run * item);
    else
      gather_items(item, dst, from, step, run);
    dst += run * item;
    e += run;
    count -= run;
  }
}

// cat(arrays, dim) -> the arrays joined along dim, a new C-contiguous array: arrays of
// one dtype of numbers, of one rank, their sizes equal but at dim, in any layout. A row
// of the result (an index over the dims before dim) is the arrays' parts of it in turn;
// the result's bytes are written in spans of kGrain float32s over the team (a copy: the
// same bits on any number of threads).
py::array cat(const std::vector<py::array>& arrays, int64_t dim) {
  const std::string fn = "cat";
  if (arrays.empty()) throw std::runtime_error(fn + ": no arrays to join");
  const py::array& first = arrays[0];
  const int64_t nd = first.ndim();
  if (dim < 0 || dim >= nd)
    throw std::runtime_error(fn + ": dim " + std::to_string(dim) + " is out of range for " +
                             std::to_string(nd) + " dims");
  const int64_t item = number_item(fn, "arrays", first);
  std::vector<py::ssize_t> shape(first.shape(), first.shape() + nd);
  shape[dim] = 0;
  std::vector<Piece> pieces;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const py::array& a = arrays[i];
    const std::string name = "array " + std::to_string(i);
    if (!torcia_checks::same_dtype(a.dtype(), first.dtype()))
      throw std::runtime_error(fn + ": " + name + " has dtype " + std::string(py::str(a.dtype())) +
                               ", array 0 has " + std::string(py::str(first.dtype())) +
                               " (one dtype of numbers)");
    bool fits = a.ndim() == nd;
    for (int64_t d = 0; fits && d < nd; ++d) fits = d == dim || a.shape(d) == first.shape(d);
    if (!fits)
      throw std::runtime_error(fn + ": " + name + " has shape " + torcia_checks::shape_of(a) +
                               ", array 0 has " + torcia_checks::shape_of(first) +
                               " (sizes must match but at dim " + std::to_string(dim) + ")");
    shape[dim] += a.shape(dim);
    Piece p{static_cast<const char*>(a.data()), {}, {}, {}, item, true};
    for (int64_t d = 0; d < dim; ++d) p.outer_strides.push_back(a.strides(d));
    int64_t expected = item;  // a C-ordered stride; dims of size 1 take any
    for (int64_t d = nd - 1; d >= dim; --d) {
      p.inner_shape.insert(p.inner_shape.begin(), a.shape(d));
      p.inner_strides.insert(p.inner_strides.begin(), a.strides(d));
      p.dense = p.dense && (a.shape(d) == 1 || a.strides(d) == expected);
      expected *= a.shape(d);
    }
    p.width = expected;
    pieces.push_back(std::move(p));
  }
  py::array out(first.dtype(), shape);
  char* dst = static_cast<char*>(out.mutable_data());
  const int64_t total = out.nbytes();
  int64_t row = 0;
  for (const Piece& p : pieces) row += p.width;
  if (total == 0) return out;
  const std::vector<int64_t> outer_shape(first.shape(), first.shape() + dim);
  // bytes [lo, hi) of the result: the parts of the rows they cross
  const auto copy = [&](int64_t lo, int64_t hi) {
    while (lo < hi) {
      const int64_t r = lo / row;
      int64_t at = lo - r * row;
      size_t i = 0;
      while (at >= pieces[i].width) at -= pieces[i++].width;
      const Piece& p = pieces[i];
      const int64_t len = std::min(hi - lo, p.width - at);
      copy_inner(p, item, dst + lo, p.data + offset_of(r, outer_shape, p.outer_strides),
                 at / item, len / item);
      lo += len;
    }
  };
  py::gil_scoped_release release;
  copy_spans(total, kSpan, copy);
  return out;
}

// A dim of a copy: its size and the source's byte stride along it.
struct Dim {
  int64_t size, stride;
};

// The dims a copy of `a` walks: its dims but those of size 1, each run of dims that is one
// dim in memory (the stride of one the next's times its size: C order, a flip of C order,
// broadcasting) merged into one.
std::vector<Dim> copy_dims(const py::array& a) {
  std::vector<Dim> dims;
  for (py::ssize_t d = 0; d < a.ndim(); ++d) {
    const int64_t size = a.shape(d), stride = a.strides(d);
    if (size == 1) continue;
    if (!dims.empty() && dims.back().stride == stride * size)
      dims.back() = {dims.back().size * size, stride};
    else
      dims.push_back({size, stride});
  }
  return dims;
}

// The source's byte offset of element `e` onward (C order) of `dims`, stepped one element
// at a time by additions (a row of 32 floats copied by memcpy took less than the
// divisions of offset_of)
class Walk {
 public:
  Walk(const std::vector<Dim>& dims, int64_t e) : dims_(dims), index_(dims.size()) {
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      index_[d] = e % dims[d].size;
      at += index_[d] * dims[d].stride;
      e /= dims[d].size;
    }
  }
  void next() {
    for (int64_t d = static_cast<int64_t>(dims_.size()) - 1; d >= 0; --d) {
      at += dims_[d].stride;
      if (++index_[d] < dims_[d].size) return;
      at -= dims_[d].size * dims_[d].stride;
      index_[d] = 0;
    }
  }
  int64_t at = 0;

 private:
  const std::vector<Dim>& dims_;
  std::vector<int64_t> index_;
};

// Side of the square tiles a transposing copy moves at a time: a tile's source lines
// and result lines stay in L1.
constexpr int64_t kTile = 16;

// result[i][j] = source[i][j] for i < ni, j < nj: the result's rows `dk` bytes apart,
// its elements consecutive; the source's `si` and `sj` bytes apart, where si is the
// smaller: one kTile x kTile tile at a time.
template <int64_t ITEM>
void transpose_block(char* __restrict__ dst, int64_t dk, const char* __restrict__ src,
                     int64_t si, int64_t sj, int64_t ni, int64_t nj) {
  for (int64_t j0 = 0; j0 < nj; j0 += kTile) {
    const int64_t jn = std::min(kTile, nj - j0);
    for (int64_t i = 0; i < ni; ++i) {
      char* to = dst + i * dk + j0 * ITEM;
      const char* from = src + i * si + j0 * sj;
      for (int64_t j = 0; j < jn; ++j) std::memcpy(to + j * ITEM, from + j * sj, ITEM);
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define TORCIA_COPY_AVX 1
#define TORCIA_AVX2 __attribute__((target("avx2")))

bool has_avx2() {
  static const bool ok = __builtin_cpu_supports("avx2");
  return ok;
}

// One 8 x 8 block of 4-byte elements (transpose_blocks): 8 loads of 32 bytes from the
// source's rows `sj` bytes apart, a transpose in registers, 8 stores `dk` bytes apart.
TORCIA_AVX2 inline void block_4x8(char* to, int64_t dk, const char* from, int64_t sj) {
  __m256 r[8], t[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(reinterpret_cast<const float*>(from + k * sj));
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    r[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(reinterpret_cast<float*>(to + k * dk),
                     _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
    _mm256_storeu_ps(reinterpret_cast<float*>(to + (k + 4) * dk),
                     _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
  }
}

// the same of a 4 x 4 block of 8-byte elements
TORCIA_AVX2 inline void block_8x4(char* to, int64_t dk, const char* from, int64_t sj) {
  __m256d r[4], t[4];
  for (int k = 0; k < 4; ++k)
    r[k] = _mm256_loadu_pd(reinterpret_cast<const double*>(from + k * sj));
  for (int k = 0; k < 4; k += 2) {
    t[k] = _mm256_unpacklo_pd(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_pd(r[k], r[k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    _mm256_storeu_pd(reinterpret_cast<double*>(to + k * dk),
                     _mm256_permute2f128_pd(t[k], t[k + 2], 0x20));
    _mm256_storeu_pd(reinterpret_cast<double*>(to + (k + 2) * dk),
                     _mm256_permute2f128_pd(t[k], t[k + 2], 0x31));
  }
}

// transpose_block of ITEM-byte elements consecutive along i (si = ITEM), ni and nj
// multiples of a block's side (32 bytes of elements), a block at a time in registers. The
// scalar tiles read and write a line per element, and where the source's or the result's
// rows are a power of two bytes apart (a (2048, 2048) or (64, 4096) float32 transpose)
// all of a tile's lines fall into one L1 set and evict each other: 2x PyTorch's time.
template <int64_t ITEM, void (*BLOCK)(char*, int64_t, const char*, int64_t)>
TORCIA_AVX2 void transpose_blocks(char* dst, int64_t dk, const char* src, int64_t sj,
                                  int64_t ni, int64_t nj) {
  constexpr int64_t side = 32 / ITEM;
  for (int64_t j0 = 0; j0 < nj; j0 += side)
    for (int64_t i0 = 0; i0 < ni; i0 += side)
      BLOCK(dst + i0 * dk + j0 * ITEM, dk, src + j0 * sj + i0 * ITEM, sj);
}
#endif

void transpose_items(int64_t item, char* dst, int64_t dk, const char* src, int64_t si,
                     int64_t sj, int64_t ni, int64_t nj) {
#ifdef TORCIA_COPY_AVX
  // the blocks in registers where the source is consecutive along i, the edges below
  const int64_t side = 32 / item;
  if ((item == 4 || item == 8) && si == item && has_avx2()) {
    const int64_t mi = ni / side * side, mj = nj / side * side;
    if (mi && mj) {
      if (item == 4)
        transpose_blocks<4, block_4x8>(dst, dk, src, sj, mi, mj);
      else
        transpose_blocks<8, block_8x4>(dst, dk, src, sj, mi, mj);
      if (mj < nj) transpose_items(item, dst + mj * item, dk, src + mj * sj, si, sj, mi,
                                    nj - mj);
      if (mi < ni) transpose_items(item, dst + mi * dk, dk, src + mi * si, si, sj, ni - mi, nj);
      return;
    }
  }
#endif
  switch (item) {
    case 1: return transpose_block<1>(dst, dk, src, si, sj, ni, nj);
    case 2: return transpose_block<2>(dst, dk, src, si, sj, ni, nj);
    case 4: return transpose_block<4>(dst, dk, src, si, sj, ni, nj);
    case 8: return transpose_block<8>(dst, dk, src, si, sj, ni, nj);
    default: return transpose_block<16>(dst, dk, src, si, sj, ni, nj);
  }
}

// The result's C-order byte strides over `dims`
std::vector<int64_t> c_strides(const std::vector<Dim>& dims, int64_t item) {
  std::vector<int64_t> out(dims.size());
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    out[d] = item;
    item *= dims[d].size;
  }
  return out;
}

// dst = the elements of `dims` from src in C order, a row (the last dim) at a time: one
// run of memory, or `stride` bytes apart; in spans of kSpan bytes over the team (a long
// row split, many short ones together)
void copy_rows(char* dst, const char* src, const std::vector<Dim>& dims, int64_t item) {
  const Dim last = dims.back();
  const std::vector<Dim> outer(dims.begin(), dims.end() - 1);
  int64_t total = last.size;
  for (const Dim& d : outer) total *= d.size;
  copy_spans(total, kSpan / item, [&](int64_t lo, int64_t hi) {
    Walk from(outer, lo / last.size);
    for (int64_t j = lo % last.size; lo < hi; j = 0, from.next()) {
      const int64_t len = std::min(hi - lo, last.size - j);
      const char* run = src + from.at + j * last.stride;
      if (last.stride == item)
        std::memcpy(dst + lo * item, run, len * item);
      else
        gather_items(item, dst + lo * item, run, last.stride, len);
      lo += len;
    }
  });
}

// dst = the elements of `dims` from src in C order, where dim k's stride is smaller than
// the last dim's: each (dim k, last dim) plane transposed in tiles, kTile of its rows a
// task
void copy_transposed(char* dst, const char* src, const std::vector<Dim>& dims, int64_t k,
                     int64_t item) {
  const std::vector<int64_t> strides = c_strides(dims, item);
  const Dim rows = dims[k], last = dims.back();
  // the dims of the planes: their sizes, the source's and the result's strides
  std::vector<int64_t> outer, from, to;
  int64_t planes = 1;
  for (size_t d = 0; d + 1 < dims.size(); ++d)
    if (static_cast<int64_t>(d) != k) {
      outer.push_back(dims[d].size);
      from.push_back(dims[d].stride);
      to.push_back(strides[d]);
      planes *= dims[d].size;
    }
  const int64_t bands = (rows.size + kTile - 1) / kTile;
  torcia_team::for_row_blocks(planes * bands, kTile * last.size, [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      const int64_t i0 = (t % bands) * kTile, plane = t / bands;
      transpose_items(item, dst + offset_of(plane, outer, to) + i0 * strides[k], strides[k],
                      src + offset_of(plane, outer, from) + i0 * rows.stride, rows.stride,
                      last.stride, std::min(kTile, rows.size - i0), last.size);
    }
  });
}

// contiguous(a) -> a C-contiguous copy of a: a new array of a's shape and dtype, a of
// numbers (see number_item) in any layout (byte strides negative, zero or stepped). Its
// dims merged where they are one in memory (copy_dims), the copy moves rows where the
// last dim is the nearest in memory, else transposes tiles between the nearest dim and the
// last; its rows (tile bands) split over the team: a copy, the same bits on any number of
// threads.
py::array contiguous(const py::array& a) {
  const std::string fn = "contiguous";
  const int64_t item = number_item(fn, "a", a);
  py::array out(a.dtype(), std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()));
  if (a.size() == 0) return out;
  if (a.data() == nullptr) throw std::runtime_error(fn + ": a has no memory");
  const char* src = static_cast<const char*>(a.data());
  char* dst = static_cast<char*>(out.mutable_data());
  const std::vector<Dim> dims = copy_dims(a);
  if (dims.empty()) {
    std::memcpy(dst, src, item);
    return out;
  }
  // the dim nearest in memory but the last (a broadcast one, of stride 0, is no nearer
  // than any: its elements are one)
  int64_t k = -1;
  for (size_t d = 0; d + 1 < dims.size(); ++d) {
    const int64_t s = std::abs(dims[d].stride);
    if (s && (k < 0 || s < std::abs(dims[k].stride))) k = static_cast<int64_t>(d);
  }
  const int64_t step = std::abs(dims.back().stride);
  py::gil_scoped_release release;
  if (k >= 0 && step != item && step > std::abs(dims[k].stride))
    copy_transposed(dst, src, dims, k, item);
  else
    copy_rows(dst, src, dims, item);
  return out;
}

}  // namespace

void define_elementwise(py::module_& m) {
  m.attr("ELEMENTWISE_GRAIN") = kGrain;
  m.def("binary", &binary, py::arg("op"), py::arg("a"), py::arg("b"),
        py::arg("out") = py::none(), py::arg("alpha") = py::none());
  m.def("binary_scalar", &binary_scalar, py::arg("op"), py::arg("x"), py::arg("s"),
        py::arg("scalar_first"), py::arg("out") = py::none());
  m.def("unary", &unary, py::arg("op"), py::arg("x"));
  m.def("fused", &fused, py::arg("op"), py::arg("a"), py::arg("b"), py::arg("c"),
        py::arg("s"));
  m.def("reduce_sum", &reduce_sum, py::arg("x"), py::arg("outer"), py::arg("r"),
        py::arg("inner"), py::arg("mean"));
  m.def("cat", &cat, py::arg("arrays"), py::arg("dim"));
  m.def("contiguous", &contiguous, py::arg("a"));
}
