// Argument checks for torcia-cpu's native entry points: each runs before any memory is
// touched and raises RuntimeError (std::runtime_error) naming the argument at fault.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace torcia_checks {

namespace py = pybind11;

inline std::string shape_of(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

// a C-contiguous array of float32 or float64
inline void float_array(const std::string& fn, const std::string& name, const py::array& a) {
  const py::dtype dt = a.dtype();
  if (!dt.is(py::dtype::of<float>()) && !dt.is(py::dtype::of<double>()))
    throw std::runtime_error(fn + ": " + name + " must be float32 or float64, got " +
                             std::string(py::str(dt)));
  if (!(a.flags() & py::array::c_style))
    throw std::runtime_error(fn + ": " + name + " must be C-contiguous");
}

// a C-contiguous array of the same dtype as ref
inline void like(const std::string& fn, const std::string& name, const py::array& a,
                 const std::string& ref_name, const py::array& ref) {
  float_array(fn, name, a);
  if (!a.dtype().is(ref.dtype()))
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

}  // namespace torcia_checks
