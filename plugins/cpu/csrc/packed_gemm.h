// Small products against one operand that many products reuse: an LSTM layer's recurrent
// weight, multiplied by each step's (N, H) state. B is packed once into panels of two
// 64-byte vectors' worth of columns, k rows of them contiguous, and each product keeps an
// (8, panel) block of C in registers while it runs down k. A BLAS call packs B again at
// every product; on one thread of the 2-core Xeon (AVX-512), against the scipy-openblas32
// and MKL 2026 GEMMs (row-major, B not transposed):
//
//   (M, K) x (K, N)         OpenBLAS   MKL     packed
//   (32, 128) x (128, 512)  27.7 us    18.0    18.8
//   (32, 512) x (512, 128)  29.6       17.5    19.5
//   (20, 200) x (200, 800)  47.6       30.1    29.4
//   (20, 800) x (800, 200)  53.9       30.2    37.1
//
// Each element of C is one sum in the order of k, whatever the blocking, so a product's
// result does not depend on which panels or rows a thread takes. Only compiled for
// x86-64 with AVX-512 (available()); elsewhere callers use BLAS.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace torcia_packed {

using std::int64_t;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TORCIA_PACKED_GEMM 1
#define TORCIA_AVX512 __attribute__((target("avx512f")))
#endif

// columns a panel holds: two 64-byte vectors
template <typename T>
constexpr int64_t kPanel = 128 / sizeof(T);

// whether this CPU runs gemm below
inline bool available() {
#ifdef TORCIA_PACKED_GEMM
  static const bool ok = __builtin_cpu_supports("avx512f");
  return ok;
#else
  return false;
#endif
}

// elements of B (k, n) packed
template <typename T>
int64_t packed_size(int64_t k, int64_t n) {
  return (n + kPanel<T> - 1) / kPanel<T> * kPanel<T> * k;
}

// packs B (k, n), element (p, j) read as at(p, j), into out (packed_size(k, n)): panel q
// is rows p = 0..k-1 of columns q * kPanel.., zero past n
template <typename T, typename At>
void pack(int64_t k, int64_t n, At at, T* out) {
  for (int64_t j0 = 0; j0 < n; j0 += kPanel<T>)
    for (int64_t p = 0; p < k; ++p, out += kPanel<T>)
      for (int64_t j = 0; j < kPanel<T>; ++j) out[j] = j0 + j < n ? at(p, j0 + j) : T(0);
}

#ifdef TORCIA_PACKED_GEMM

// rows r < MR of C's columns < cols (at most a panel) = A's rows times the panel b, plus
// beta C
template <typename T, int MR>
TORCIA_AVX512 inline __attribute__((always_inline)) void block(
    int64_t k, const T* a, int64_t lda, const T* b, T beta, T* c, int64_t ldc, int64_t cols) {
  typedef T V __attribute__((vector_size(64)));
  constexpr int64_t W = 64 / sizeof(T);
  V lo[MR], hi[MR];
  for (int r = 0; r < MR; ++r) lo[r] = hi[r] = V{};
  for (int64_t p = 0; p < k; ++p) {
    V b0, b1;
    std::memcpy(&b0, b + p * 2 * W, 64);
    std::memcpy(&b1, b + p * 2 * W + W, 64);
    for (int r = 0; r < MR; ++r) {
      const T s = a[r * lda + p];
      lo[r] += s * b0;
      hi[r] += s * b1;
    }
  }
  for (int r = 0; r < MR; ++r) {
    T* cr = c + r * ldc;
    if (cols == 2 * W) {
      if (beta != T(0)) {
        V c0, c1;
        std::memcpy(&c0, cr, 64);
        std::memcpy(&c1, cr + W, 64);
        lo[r] += beta * c0;
        hi[r] += beta * c1;
      }
      std::memcpy(cr, &lo[r], 64);
      std::memcpy(cr + W, &hi[r], 64);
    } else {
      T sum[2 * W];
      std::memcpy(sum, &lo[r], 64);
      std::memcpy(sum + W, &hi[r], 64);
      for (int64_t j = 0; j < cols; ++j) cr[j] = beta != T(0) ? sum[j] + beta * cr[j] : sum[j];
    }
  }
}

// C (m, n) = A (m, k) B + beta C, B packed by pack; beta 0 never reads C. Only where
// available(). The rows go in blocks of at most 8, as even as may be (10 rows: 5 and 5,
// not 8, 1 and 1, whose one-row blocks load a panel row for two products).
template <typename T>
TORCIA_AVX512 void gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                        const T* packed, T beta, T* c, int64_t ldc) {
  const int64_t blocks = (m + 7) / 8;
  for (int64_t j = 0; j < n; j += kPanel<T>) {
    const T* b = packed + j * k;
    const int64_t cols = n - j < kPanel<T> ? n - j : kPanel<T>;
    for (int64_t q = 0; q < blocks; ++q) {
      const int64_t i = m * q / blocks, rows = m * (q + 1) / blocks - i;
      const T* ai = a + i * lda;
      T* ci = c + i * ldc + j;
      switch (rows) {
        case 8: block<T, 8>(k, ai, lda, b, beta, ci, ldc, cols); break;
        case 7: block<T, 7>(k, ai, lda, b, beta, ci, ldc, cols); break;
        case 6: block<T, 6>(k, ai, lda, b, beta, ci, ldc, cols); break;
        case 5: block<T, 5>(k, ai, lda, b, beta, ci, ldc, cols); break;
        case 4: block<T, 4>(k, ai, lda, b, beta, ci, ldc, cols); break;
        case 3: block<T, 3>(k, ai, lda, b, beta, ci, ldc, cols); break;
        case 2: block<T, 2>(k, ai, lda, b, beta, ci, ldc, cols); break;
        default: block<T, 1>(k, ai, lda, b, beta, ci, ldc, cols); break;
      }
    }
  }
}

#else

template <typename T>
void gemm(int64_t, int64_t, int64_t, const T*, int64_t, const T*, T, T*, int64_t) {
  throw std::logic_error("packed gemm: not compiled for this CPU");
}

#endif

}  // namespace torcia_packed
