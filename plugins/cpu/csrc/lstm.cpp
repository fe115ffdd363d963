// A one-direction LSTM layer over a whole sequence, forward and back through time, in C++:
// each step's recurrent product is one GEMM on OpenBLAS and the cell one vectorised pass,
// with no return to Python between steps (NumPy: a matmul call, temporaries and a cell
// call per step).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "checks.h"
#include "gemm.h"
#include "lstm_rows.h"

namespace py = pybind11;
using std::int64_t;

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

template <typename T>
void forward(const Dims& d, const T* xg, const T* h0, const T* c0, const T* w, T* out, T* cs,
             T* acts) {
  py::gil_scoped_release release;
  const int64_t n = d.batch, h = d.hidden, g = 4 * h;
  std::vector<T> gates(n * g);
  const T* h_prev = h0;
  const T* c_prev = c0;
  for (int64_t t = 0; t < d.steps; ++t) {
    std::memcpy(gates.data(), xg + t * n * g, sizeof(T) * n * g);
    if (h > 0)
      gemm<T>(CblasNoTrans, CblasNoTrans, n, g, h, h_prev, h, w, g, T(1), gates.data(), g);
    T* ht = out + t * n * h;
    T* ct = cs + t * n * h;
    T* at = acts + t * n * g;
    for (int64_t r = 0; r < n; ++r)
      lstm_cell_row(gates.data() + r * g, c_prev + r * h, at + r * g, ht + r * h, ct + r * h, h);
    h_prev = ht;
    c_prev = ct;
  }
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

template <typename T>
void backward(const Dims& d, const T* g_out, const T* g_cs, const T* acts, const T* cs,
              const T* out, const T* h0, const T* c0, const T* w, T* g_gates, T* dh, T* dc,
              T* g_w) {
  py::gil_scoped_release release;
  const int64_t n = d.batch, h = d.hidden, g = 4 * h, nh = n * h;
  std::vector<T> gh(nh), gc(nh), dc_next(nh);
  // w (H, 4H) transposed once: the per-step products run ~1.3x faster on a row-major
  // operand than on w read transposed
  std::vector<T> w_t(h * g);
  for (int64_t i = 0; i < h; ++i)
    for (int64_t j = 0; j < g; ++j) w_t[j * h + i] = w[i * g + j];
  std::fill(dh, dh + nh, T(0));
  std::fill(dc, dc + nh, T(0));
  for (int64_t t = d.steps - 1; t >= 0; --t) {
    for (int64_t k = 0; k < nh; ++k) {
      gh[k] = g_out ? dh[k] + g_out[t * nh + k] : dh[k];
      gc[k] = g_cs ? dc[k] + g_cs[t * nh + k] : dc[k];
    }
    const T* c_prev = t == 0 ? c0 : cs + (t - 1) * nh;
    T* gt = g_gates + t * n * g;
    for (int64_t r = 0; r < n; ++r)
      lstm_cell_backward_row(gh.data() + r * h, gc.data() + r * h, acts + t * n * g + r * g,
                             c_prev + r * h, cs + t * nh + r * h, gt + r * g,
                             dc_next.data() + r * h, h);
    std::copy(dc_next.begin(), dc_next.end(), dc);
    if (h > 0) gemm<T>(CblasNoTrans, CblasNoTrans, n, h, g, gt, g, w_t.data(), h, T(0), dh, h);
  }
  // the recurrent weight's gradient, one product over all steps: [h0; out[:-1]]^T g_gates
  if (h > 0 && n > 0) {
    gemm<T>(CblasTrans, CblasNoTrans, h, g, n, h0, h, g_gates, g, T(0), g_w, g);
    if (d.steps > 1)
      gemm<T>(CblasTrans, CblasNoTrans, h, g, (d.steps - 1) * n, out, h, g_gates + n * g, g,
              T(1), g_w, g);
  } else {
    std::fill(g_w, g_w + h * g, T(0));
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
  return py::make_tuple(g_gates, dh, dc, g_w);
}

}  // namespace

void define_lstm(py::module_& m) {
  m.def("lstm_layer", &lstm_layer, py::arg("x_gates"), py::arg("h0"), py::arg("c0"),
        py::arg("w_hh_t"));
  m.def("lstm_layer_backward", &lstm_layer_backward, py::arg("g_out"), py::arg("g_cs"),
        py::arg("acts"), py::arg("cs"), py::arg("out"), py::arg("h0"), py::arg("c0"),
        py::arg("w_hh_t"));
}
