// Argument checks for torcia-cpu's native entry points: each runs before any memory is
// touched and raises RuntimeError (std::runtime_error) naming the argument at fault.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace torcia_checks {

namespace py = pybind11;

inline std::string shape_of(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

// The byte-order character of a dtype whose bytes are swapped on this machine.
constexpr char kSwapped = __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ ? '<' : '>';

// Whether dt is T's dtype, compared by value. Never by identity (dt.is(...)): an array that
// went through pickle (a worker process, a pickled dataset) or a buffer carries a dtype
// object equal to NumPy's float32 but not the same object. Kind and size are what
// np.dtype's equality compares for the builtin numbers (int64 is both 'l' and 'q'), and the
// kernels read raw memory, so a byte-swapped dtype is not T's.
template <typename T>
inline bool is_dtype(const py::dtype& dt) {
  constexpr char kind = std::is_same_v<T, bool>        ? 'b'
                        : std::is_floating_point_v<T> ? 'f'
                        : std::is_signed_v<T>         ? 'i'
                                                      : 'u';
  return dt.kind() == kind && dt.itemsize() == static_cast<py::ssize_t>(sizeof(T)) &&
         dt.byteorder() != kSwapped;
}

// Whether two dtypes of numbers (bool, integers, floats, complex) are equal by value (see
// is_dtype); other kinds (datetimes of different units, records) are never equal here.
inline bool same_dtype(const py::dtype& a, const py::dtype& b) {
  const char k = a.kind();
  return a.is(b) || ((k == 'b' || k == 'i' || k == 'u' || k == 'f' || k == 'c') &&
                     k == b.kind() && a.itemsize() == b.itemsize() &&
                     a.byteorder() != kSwapped && b.byteorder() != kSwapped);
}

// a C-contiguous array of float32 or float64
inline void float_array(const std::string& fn, const std::string& name, const py::array& a) {
  const py::dtype dt = a.dtype();
  if (!is_dtype<float>(dt) && !is_dtype<double>(dt))
    throw std::runtime_error(fn + ": " + name + " must be float32 or float64, got " +
                             std::string(py::str(dt)));
  if (!(a.flags() & py::array::c_style))
    throw std::runtime_error(fn + ": " + name + " must be C-contiguous");
}

// a C-contiguous array of the same dtype as ref
inline void like(const std::string& fn, const std::string& name, const py::array& a,
                 const std::string& ref_name, const py::array& ref) {
  float_array(fn, name, a);
  if (!same_dtype(a.dtype(), ref.dtype()))
    throw std::runtime_error(fn + ": " + name + " has dtype " + std::string(py::str(a.dtype())) +
                             ", " + ref_name + " has " + std::string(py::str(ref.dtype())));
}

// a C-contiguous array of the dtype and shape of ref
inline void same(const std::string& fn, const std::string& name, const py::array& a,
                 const std::string& ref_name, const py::array& ref) {
  like(fn, name, a, ref_name, ref);
  bool equal = a.ndim() == ref.ndim();
  for (py::ssize_t i = 0; equal && i < a.ndim(); ++i) equal = a.shape(i) == ref.shape(i);
  if (!equal)
    throw std::runtime_error(fn + ": " + name + " has shape " + shape_of(a) + ", " + ref_name +
                             " has " + shape_of(ref));
}

// A double passed for a float32 computation: a finite one beyond float's range has no
// float value to convert to.
inline void float32_scalar(const std::string& fn, const std::string& name, double v) {
  if (std::isfinite(v) && std::fabs(v) > std::numeric_limits<float>::max())
    throw std::runtime_error(fn + ": " + name + " is outside float32's range");
}

}  // namespace torcia_checks
