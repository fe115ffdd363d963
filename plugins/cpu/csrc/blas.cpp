// Matrix products called from C++: a batch of small products with OpenMP threads over the
// batch, one single-threaded GEMM per matrix, without a return to Python between them; and
// the choice of library that runs every GEMM of the extension (gemm.h's table).
//
// The default is the OpenBLAS of the scipy-openblas32 wheel, loaded by importing
// scipy_openblas32 (torcia_cpu/__init__.py) before this extension; its functions carry the
// wheel's scipy_ prefix, so they never clash with NumPy's own OpenBLAS in the process.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <dlfcn.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "checks.h"
#include "gemm.h"
#include "stages.h"
#include "team.h"

namespace py = pybind11;
using std::int64_t;

namespace torcia_blas {

Table table = {
    scipy_cblas_sgemm,
    scipy_cblas_dgemm,
    scipy_cblas_sgemm_batch_strided,
    scipy_cblas_dgemm_batch_strided,
    scipy_cblas_sgemv,
    scipy_cblas_dgemv,
    scipy_openblas_set_num_threads,
    nullptr,
};

}  // namespace torcia_blas

namespace {

// Below this many multiply-adds in all, a batch runs on the calling thread.
constexpr int64_t kParallelMacs = 1 << 18;

// Panels of a product split over threads are at least this wide, and start on multiples of
// kPanelAlign columns (or rows): whole vector registers of float32 for the GEMM kernels.
constexpr int64_t kMinPanel = 64;
constexpr int64_t kPanelAlign = 16;

// C = A B + beta C cut for `threads` threads and run by `team` OpenMP threads: C's
// columns (or its rows, where it has more rows than columns) in panels, each one
// single-threaded GEMM of the columns of B (rows of A) it needs. OpenBLAS's own threads
// spin while they wait for each other, and a thread another process keeps off its core
// stalls its partner for a scheduler slice at every hand-off (a 128x1024x512 product:
// 3.5 ms on one thread, 57 ms on two on the loaded 2-core machine); these are libgomp's,
// which the plugin has sleep after a brief spin, and they take the panels in turn (stages.h), twice
// as many as `threads`, so a thread without a core leaves its panels to the others. The
// panels depend on the shape and `threads` alone, and so does the result: a team of one
// (a crowded machine, see torcia_cpu/_blas.py) gives the same bits as a full one.
template <typename T>
void gemm_panels(int threads, int team, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m,
                 int64_t n, int64_t k, const T* a, blasint lda, const T* b, blasint ldb,
                 T beta, T* c, blasint ldc, T alpha = T(1)) {
  const bool cols = n >= m;
  const int64_t dim = cols ? n : m;
  const int panels = static_cast<int>(std::min<int64_t>(2 * int64_t(std::max(threads, 1)),
                                                        dim / kMinPanel));
  // one thread: the library's own call, whatever threads set_blas_threads gave it (MKL's
  // from SLEEPING_WORK), not two halves of it
  if (threads <= 1 || panels < 2) {
    gemm<T>(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, alpha);
    return;
  }
  const auto bound = [&](int j) {
    return j >= panels ? dim : dim * j / panels / kPanelAlign * kPanelAlign;
  };
  torcia_stages::Grid grid(1, panels);
  const auto work = [&](int64_t, int j) {
    const int64_t lo = bound(j), size = bound(j + 1) - lo;
    if (cols)
      gemm<T>(ta, tb, m, size, k, a, lda, tb == CblasNoTrans ? b + lo : b + lo * ldb, ldb,
              beta, c + lo, ldc, alpha);
    else
      gemm<T>(ta, tb, size, n, k, ta == CblasNoTrans ? a + lo * lda : a + lo, lda, b, ldb,
              beta, c + lo * ldc, ldc, alpha);
  };
#pragma omp parallel num_threads(std::min(team, panels)) if (team > 1)
  grid.run(work);
}

// How one matrix operand (its last two dims) is laid out for GEMM: row-major (unit stride
// along the row) or transposed (unit stride down the column), with its leading dimension.
struct Layout {
  CBLAS_TRANSPOSE trans;
  blasint ld;
};

Layout layout_of(const std::string& fn, const std::string& name, const py::array& a) {
  const int64_t item = a.itemsize(), nd = a.ndim();
  const int64_t rows = a.shape(nd - 2), cols = a.shape(nd - 1);
  const int64_t rs = a.strides(nd - 2), cs = a.strides(nd - 1);
  for (int64_t d = 0; d < nd; ++d)
    if (a.strides(d) < 0 || a.strides(d) % item != 0)
      throw std::runtime_error(fn + ": " + name + " has a negative or unaligned stride");
  // a dimension of size 1 may have any stride: the other one decides
  if ((cs == item || cols == 1) && (rows == 1 || rs / item >= cols))
    return {CblasNoTrans, static_cast<blasint>(rows == 1 ? std::max<int64_t>(cols, 1) : rs / item)};
  if ((rs == item || rows == 1) && (cols == 1 || cs / item >= rows))
    return {CblasTrans, static_cast<blasint>(cols == 1 ? std::max<int64_t>(rows, 1) : cs / item)};
  throw std::runtime_error(fn + ": " + name +
                           " has no unit stride along either of its last two dims");
}

// element offset of batch index i (over the leading dims of shape) in a
int64_t batch_offset(const py::array& a, const std::vector<int64_t>& lead, int64_t i) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(lead.size()) - 1; d >= 0; --d) {
    off += (i % lead[d]) * (a.strides(d) / a.itemsize());
    i /= lead[d];
  }
  return off;
}

// The dtype of the product's operands: a's, float32 or float64, which b must share.
py::dtype product_dtype(const std::string& fn, const std::string& a_name, const py::array& a,
                        const std::string& b_name, const py::array& b) {
  const py::dtype dt = a.dtype();
  if (!torcia_checks::is_dtype<float>(dt) && !torcia_checks::is_dtype<double>(dt))
    throw std::runtime_error(fn + ": " + a_name + " must be float32 or float64, got " +
                             std::string(py::str(dt)));
  if (!torcia_checks::same_dtype(b.dtype(), dt))
    throw std::runtime_error(fn + ": " + b_name + " has dtype " +
                             std::string(py::str(b.dtype())) + ", " + a_name + " has " +
                             std::string(py::str(dt)));
  return dt;
}

// BLAS takes its sizes as 32-bit integers
void check_blas_range(const std::string& fn, int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kLimit = (int64_t(1) << 31) - 1;
  if (m > kLimit || n > kLimit || k > kLimit)
    throw std::runtime_error(fn + ": a matrix dimension exceeds BLAS's 32-bit range");
}

template <typename T>
void run_batched(const py::array& a, const py::array& b, py::array& out, Layout la, Layout lb,
                 const std::vector<int64_t>& lead, int64_t batch, int64_t m, int64_t k,
                 int64_t n, int threads, int team) {
  const T* ap = static_cast<const T*>(a.data());
  const T* bp = static_cast<const T*>(b.data());
  T* cp = static_cast<T*>(out.mutable_data());
  std::vector<int64_t> aoff(batch), boff(batch);
  for (int64_t i = 0; i < batch; ++i) {
    aoff[i] = batch_offset(a, lead, i);
    boff[i] = batch_offset(b, lead, i);
  }
  // one stride between consecutive matrices of each operand (any batch that is a slice of
  // a C-ordered or broadcast layout), within BLAS's 32-bit range: strided batch calls
  constexpr int64_t kMax = (int64_t(1) << 31) - 1;
  const int64_t sa = batch > 1 ? aoff[1] - aoff[0] : 0, sb = batch > 1 ? boff[1] - boff[0] : 0;
  bool strided = sa >= 0 && sb >= 0 && sa <= kMax && sb <= kMax && m * n <= kMax;
  for (int64_t i = 1; strided && i < batch; ++i)
    strided = aoff[i] == i * sa && boff[i] == i * sb;
  py::gil_scoped_release release;
  if (batch == 1) {
    // one product (a's rows times b: a linear layer's backward): in panels (threads > 1),
    // or the plain call, where the library uses the threads set_blas_threads gives it;
    // its batched call splits the batch over them, which leaves a single product on one
    // thread
    gemm_panels<T>(threads, team, la.trans, lb.trans, m, n, k, ap, la.ld, bp, lb.ld, T(0),
                   cp, n);
    return;
  }
  const bool wide = batch * m * n * k > kParallelMacs;
  if (strided) {
    // each thread a contiguous range of the batch
#pragma omp parallel if (wide)
    {
      int64_t lo = 0, hi = batch;
#ifdef _OPENMP
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      lo = batch * t / nt;
      hi = batch * (t + 1) / nt;
#endif
      if (hi > lo)
        gemm_batch_strided<T>(la.trans, lb.trans, m, n, k, ap + lo * sa, la.ld, sa,
                              bp + lo * sb, lb.ld, sb, T(0), cp + lo * m * n, n, m * n, hi - lo);
    }
    return;
  }
#pragma omp parallel for schedule(static) if (wide)
  for (int64_t i = 0; i < batch; ++i)
    gemm<T>(la.trans, lb.trans, m, n, k, ap + aoff[i], la.ld, bp + boff[i], lb.ld, T(0),
            cp + i * m * n, n);
}

// matmul_batched(a (*, M, K), b (*, K, N), threads, team) -> (*, M, N), C-contiguous; the
// leading dims of a and b are equal (broadcast by the caller: stride 0 is fine), each
// operand's last two dims row-major or transposed, with any strides elsewhere. A single
// product (no leading dims) runs in panels cut for `threads` threads, run by `team`
// (gemm_panels).
py::array matmul_batched(const py::array& a, const py::array& b, int threads, int team) {
  const std::string fn = "matmul_batched";
  if (threads < 1 || team < 1)
    throw std::runtime_error(fn + ": threads and team must be at least 1");
  if (a.ndim() < 2) throw std::runtime_error(fn + ": a must have at least 2 dims");
  if (b.ndim() != a.ndim())
    throw std::runtime_error(fn + ": b has " + std::to_string(b.ndim()) + " dims, a has " +
                             std::to_string(a.ndim()));
  const py::dtype dt = product_dtype(fn, "a", a, "b", b);
  const int64_t nd = a.ndim();
  std::vector<int64_t> lead;
  std::vector<py::ssize_t> shape;
  int64_t batch = 1;
  for (int64_t d = 0; d < nd - 2; ++d) {
    if (a.shape(d) != b.shape(d))
      throw std::runtime_error(fn + ": a has shape " + torcia_checks::shape_of(a) + ", b has " +
                               torcia_checks::shape_of(b) + " (leading dims must be equal)");
    lead.push_back(a.shape(d));
    shape.push_back(a.shape(d));
    batch *= a.shape(d);
  }
  const int64_t m = a.shape(nd - 2), k = a.shape(nd - 1), n = b.shape(nd - 1);
  if (b.shape(nd - 2) != k)
    throw std::runtime_error(fn + ": a has shape " + torcia_checks::shape_of(a) + ", b has " +
                             torcia_checks::shape_of(b) +
                             " (a's last dim must be b's second last)");
  check_blas_range(fn, m, n, k);
  shape.push_back(m);
  shape.push_back(n);
  py::array out(dt, shape);
  // empty operands (whose strides NumPy leaves at 0) need no product: an empty sum is 0
  if (out.size() == 0) return out;
  if (k == 0) {
    std::fill_n(static_cast<char*>(out.mutable_data()), out.nbytes(), 0);
    return out;
  }
  const Layout la = layout_of(fn, "a", a), lb = layout_of(fn, "b", b);
  if (torcia_checks::is_dtype<float>(dt))
    run_batched<float>(a, b, out, la, lb, lead, batch, m, k, n, threads, team);
  else
    run_batched<double>(a, b, out, la, lb, lead, batch, m, k, n, threads, team);
  return out;
}

// linear(x (M, K), w (N, K), bias (N,) or None, threads, team) -> x w^T + bias (M, N),
// C-contiguous: one GEMM (in panels, as matmul_batched's), the bias written first and
// added by the product (beta = 1), so that no second pass over the output adds it. x and
// w row-major or transposed, as matmul_batched's.
py::array linear(const py::array& x, const py::array& w, const py::object& bias,
                 int threads, int team) {
  const std::string fn = "linear";
  if (threads < 1 || team < 1)
    throw std::runtime_error(fn + ": threads and team must be at least 1");
  if (x.ndim() != 2) throw std::runtime_error(fn + ": x must be 2-D, got " +
                                              torcia_checks::shape_of(x));
  if (w.ndim() != 2) throw std::runtime_error(fn + ": weight must be 2-D, got " +
                                              torcia_checks::shape_of(w));
  const py::dtype dt = product_dtype(fn, "x", x, "weight", w);
  const int64_t m = x.shape(0), k = x.shape(1), n = w.shape(0);
  if (w.shape(1) != k)
    throw std::runtime_error(fn + ": x has shape " + torcia_checks::shape_of(x) +
                             ", weight has " + torcia_checks::shape_of(w) +
                             " (their last dims must be equal)");
  check_blas_range(fn, m, n, k);
  const void* bp = nullptr;
  if (!bias.is_none()) {
    if (!py::isinstance<py::array>(bias))
      throw std::runtime_error(fn + ": bias must be an array or None");
    const py::array b = py::reinterpret_borrow<py::array>(bias);
    torcia_checks::like(fn, "bias", b, "x", x);
    if (b.ndim() != 1 || b.shape(0) != n)
      throw std::runtime_error(fn + ": bias has shape " + torcia_checks::shape_of(b) +
                               ", expected (" + std::to_string(n) + ",)");
    bp = b.data();
  }
  py::array out(dt, std::vector<py::ssize_t>{m, n});
  if (out.size() == 0) return out;
  const int64_t item = dt.itemsize();
  char* op = static_cast<char*>(out.mutable_data());
  Layout lx{CblasNoTrans, 1}, lw{CblasNoTrans, 1};
  if (k != 0) {
    lx = layout_of(fn, "x", x);
    lw = layout_of(fn, "weight", w);
    // the product reads w transposed: a row-major w is a transposed operand, and back
    lw.trans = lw.trans == CblasNoTrans ? CblasTrans : CblasNoTrans;
  }
  py::gil_scoped_release release;
  // the bias rows in blocks of rows over the team, as PyTorch's addmm copies its bias: on
  // one thread this pass held a (1024, 128) x (128, 384) product on two threads 20% above
  // PyTorch's time
  torcia_team::for_row_blocks(m, n, [&](int64_t lo, int64_t hi) {
    if (bp) {
      for (int64_t i = lo; i < hi; ++i) std::memcpy(op + i * n * item, bp, n * item);
    } else {
      std::memset(op + lo * n * item, 0, (hi - lo) * n * item);
    }
  });
  if (k == 0) return out;
  if (torcia_checks::is_dtype<float>(dt))
    gemm_panels<float>(threads, team, lx.trans, lw.trans, m, n, k,
                       static_cast<const float*>(x.data()), lx.ld,
                       static_cast<const float*>(w.data()), lw.ld, 1.0f,
                       reinterpret_cast<float*>(op), n);
  else
    gemm_panels<double>(threads, team, lx.trans, lw.trans, m, n, k,
                        static_cast<const double*>(x.data()), lx.ld,
                        static_cast<const double*>(w.data()), lw.ld, 1.0,
                        reinterpret_cast<double*>(op), n);
  return out;
}

// addmm(c, a, b, alpha, beta, threads, team) -> c = alpha a b + beta c, written in place
// and returned: a (m, k) and b (k, n) float32 or float64 matrices with a unit stride along
// one dim; c (m, n) C-contiguous and writable, of their dtype, holding the input already
// broadcast (its values unread where beta is 0). PyTorch's addmm so: the input copied into
// the result, then one GEMM with alpha and beta, whose scaling inside the kernel rounds as
// PyTorch's does.
py::array addmm(py::array c, const py::array& a, const py::array& b, double alpha,
                double beta, int threads, int team) {
  const std::string fn = "addmm";
  if (threads < 1 || team < 1)
    throw std::runtime_error(fn + ": threads and team must be at least 1");
  if (a.ndim() != 2 || b.ndim() != 2 || c.ndim() != 2)
    throw std::runtime_error(fn + ": c, a and b must be 2-D, got " +
                             torcia_checks::shape_of(c) + ", " + torcia_checks::shape_of(a) +
                             " and " + torcia_checks::shape_of(b));
  const py::dtype dt = product_dtype(fn, "a", a, "b", b);
  torcia_checks::like(fn, "c", c, "a", a);
  if (!c.writeable()) throw std::runtime_error(fn + ": c must be writable");
  const int64_t m = a.shape(0), k = a.shape(1), n = b.shape(1);
  if (b.shape(0) != k || c.shape(0) != m || c.shape(1) != n)
    throw std::runtime_error(fn + ": a has shape " + torcia_checks::shape_of(a) + ", b " +
                             torcia_checks::shape_of(b) + ", c " + torcia_checks::shape_of(c) +
                             " (expected (m, k), (k, n), (m, n))");
  check_blas_range(fn, m, n, k);
  const bool single = torcia_checks::is_dtype<float>(dt);
  if (single) {
    torcia_checks::float32_scalar(fn, "alpha", alpha);
    torcia_checks::float32_scalar(fn, "beta", beta);
  }
  if (c.size() == 0) return c;
  Layout la{CblasNoTrans, 1}, lb{CblasNoTrans, 1};
  if (k != 0) {
    la = layout_of(fn, "a", a);
    lb = layout_of(fn, "b", b);
  }
  py::gil_scoped_release release;
  const auto run = [&](auto* out, const auto* ap, const auto* bp) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(ap)>>;
    if (k == 0) {  // no product: beta c, and zeros where beta is 0 (BLAS's rule)
      for (int64_t i = 0; i < m * n; ++i) out[i] = beta == 0 ? T(0) : T(beta) * out[i];
      return;
    }
    gemm_panels<T>(threads, team, la.trans, lb.trans, m, n, k, ap, la.ld, bp, lb.ld, T(beta),
                   out, n, T(alpha));
  };
  if (single)
    run(static_cast<float*>(c.mutable_data()), static_cast<const float*>(a.data()),
        static_cast<const float*>(b.data()));
  else
    run(static_cast<double*>(c.mutable_data()), static_cast<const double*>(a.data()),
        static_cast<const double*>(b.data()));
  return c;
}

}  // namespace

namespace {

std::string blas_name = "openblas";

// MKL's run-time interface: the layer constants of mkl_service.h
constexpr int kMklInterfaceLp64 = 0;  // 32-bit integers, as blasint
constexpr int kMklThreadingSequential = 1;
constexpr int kMklThreadingGnu = 3;  // GCC's libgomp, the OpenMP this extension runs on

template <typename F>
F symbol(void* lib, const std::string& path, const char* name) {
  void* p = dlsym(lib, name);
  if (!p)
    throw std::runtime_error("use_mkl: " + path + " has no symbol " + name +
                             " (not an MKL runtime library, or one too old: 2020 or later "
                             "has the batched products)");
  return reinterpret_cast<F>(p);
}

// Switch every GEMM of the extension to MKL's, from its single dynamic library (libmkl_rt)
// at path. All symbols are looked up before anything changes, so a wrong library leaves
// OpenBLAS in place. Called once, before the first product (torcia_cpu/_provider.py).
std::string use_mkl(const std::string& path) {
  if (blas_name != "openblas") throw std::runtime_error("use_mkl: MKL is already in use");
#if defined(_OPENMP) && defined(__GNUC__) && !defined(__clang__)
  // MKL's GNU threading layer finds libgomp's symbols in the global scope, where the
  // extension's own copy (loaded as a dependency of a local module) is not yet
  const int threading = kMklThreadingGnu;
  if (!dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD))
    throw std::runtime_error("use_mkl: libgomp.so.1 is not loaded: " + std::string(dlerror()));
#else
  const int threading = kMklThreadingSequential;
#endif
  // libmkl_rt itself stays local, but it loads its layers (interface, threading, core)
  // into the global scope, where a library loaded later that calls plain BLAS/LAPACK names
  // (cblas_sgemm, dgeev_) finds them: MKL's own design, the same in any process using it
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw std::runtime_error("use_mkl: cannot load " + path + ": " + dlerror());
  using layer_t = int (*)(int);
  const auto set_interface = symbol<layer_t>(lib, path, "MKL_Set_Interface_Layer");
  const auto set_threading = symbol<layer_t>(lib, path, "MKL_Set_Threading_Layer");
  const auto set_threads = symbol<void (*)(int)>(lib, path, "MKL_Set_Num_Threads");
  const auto version = symbol<void (*)(char*, int)>(lib, path, "MKL_Get_Version_String");
  const torcia_blas::Table mkl = {
      symbol<torcia_blas::sgemm_t>(lib, path, "cblas_sgemm"),
      symbol<torcia_blas::dgemm_t>(lib, path, "cblas_dgemm"),
      symbol<torcia_blas::sgemm_strided_t>(lib, path, "cblas_sgemm_batch_strided"),
      symbol<torcia_blas::dgemm_strided_t>(lib, path, "cblas_dgemm_batch_strided"),
      symbol<torcia_blas::sgemv_t>(lib, path, "cblas_sgemv"),
      symbol<torcia_blas::dgemv_t>(lib, path, "cblas_dgemv"),
      set_threads,
      // the integer product is optional: torcia-ao's kernels fall back without it
      reinterpret_cast<torcia_blas::gemm_s8u8s32_t>(dlsym(lib, "cblas_gemm_s8u8s32")),
  };
  if (set_interface(kMklInterfaceLp64) != kMklInterfaceLp64)
    throw std::runtime_error("use_mkl: " + path + " refused the LP64 interface (32-bit "
                             "integers); was another interface chosen in this process?");
  if (set_threading(threading) != threading)
    throw std::runtime_error("use_mkl: " + path + " refused its threading layer");
  set_threads(1);
  char buf[256] = {0};
  version(buf, sizeof(buf) - 1);
  torcia_blas::table = mkl;
  blas_name = buf;
  return blas_name;
}

}  // namespace

void define_blas(py::module_& m) {
  // torcia's threads go over the batch, each product on one; the LSTM layer asks for more
  // for the duration of a large one (set_blas_threads)
  torcia_blas::table.set_threads(1);
  m.def("matmul_batched", &matmul_batched, py::arg("a"), py::arg("b"), py::arg("threads") = 1,
        py::arg("team") = 1);
  m.def("linear", &linear, py::arg("x"), py::arg("weight"), py::arg("bias"),
        py::arg("threads") = 1, py::arg("team") = 1);
  m.def("addmm", &addmm, py::arg("c"), py::arg("a"), py::arg("b"), py::arg("alpha"),
        py::arg("beta"), py::arg("threads") = 1, py::arg("team") = 1);
  m.def("set_blas_threads", [](int n) { torcia_blas::table.set_threads(std::max(1, n)); },
        py::arg("n"));
  m.def("use_mkl", &use_mkl, py::arg("path"));
  m.def("blas_name", [] { return blas_name; });
}
