// GEMM through a table of BLAS entry points (row-major), one template for float and
// double: C = A B + beta C, A (m, k) and B (k, n) each possibly transposed.
//
// The table starts on the scipy-openblas32 wheel's OpenBLAS, linked at build time. When
// Intel's MKL is installed, blas.cpp's use_mkl swaps in MKL's entry points, loaded at run
// time from its libmkl_rt (see torcia_cpu/_provider.py for when, and why). Both take the
// same CBLAS arguments with 32-bit integers, so every caller is the same for either.
#pragma once

#include <cblas.h>

#include <cstdint>

namespace torcia_blas {

using sgemm_t = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint,
                         blasint, float, const float*, blasint, const float*, blasint, float,
                         float*, blasint);
using dgemm_t = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint, blasint,
                         blasint, double, const double*, blasint, const double*, blasint,
                         double, double*, blasint);
using sgemm_strided_t = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint,
                                 blasint, blasint, float, const float*, blasint, blasint,
                                 const float*, blasint, blasint, float, float*, blasint,
                                 blasint, blasint);
using dgemm_strided_t = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, blasint,
                                 blasint, blasint, double, const double*, blasint, blasint,
                                 const double*, blasint, blasint, double, double*, blasint,
                                 blasint, blasint);

using sgemv_t = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, blasint, blasint, float, const float*,
                         blasint, const float*, blasint, float, float*, blasint);
using dgemv_t = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, blasint, blasint, double, const double*,
                         blasint, const double*, blasint, double, double*, blasint);

// MKL's integer product (row-major C int32 = (A uint8 + oa) op(B int8 + ob)), its enums
// passed as ints; OpenBLAS has none
using gemm_s8u8s32_t = void (*)(int, int, int, int, int, int, int, float, const void*, int,
                                std::int8_t, const void*, int, std::int8_t, float,
                                std::int32_t*, int, const std::int32_t*);

struct Table {
  sgemm_t sgemm;
  dgemm_t dgemm;
  sgemm_strided_t sgemm_strided;
  dgemm_strided_t dgemm_strided;
  sgemv_t sgemv;
  dgemv_t dgemv;
  void (*set_threads)(int);
  gemm_s8u8s32_t gemm_s8u8s32;  // nullptr where the library has no integer GEMM
};

// the entry points in use; written only by use_mkl, before any product of the process
extern Table table;

// oneDNN's integer product (row-major C int32 = (A uint8 - ao) op(B int8 - bo)): the
// int8 GEMM quant.cpp prefers; nullptr until use_onednn loads it
using dnnl_gemm_u8s8s32_t = int (*)(char, char, char, std::int64_t, std::int64_t,
                                    std::int64_t, float, const std::uint8_t*, std::int64_t,
                                    std::uint8_t, const std::int8_t*, std::int64_t,
                                    std::int8_t, float, std::int32_t*, std::int64_t,
                                    const std::int32_t*);
extern dnnl_gemm_u8s8s32_t dnnl_gemm_u8s8s32;

}  // namespace torcia_blas

inline void gemv(CBLAS_TRANSPOSE t, blasint m, blasint n, const float* a, blasint lda,
                 const float* x, blasint incx, float beta, float* y, blasint incy,
                 float alpha) {
  torcia_blas::table.sgemv(CblasRowMajor, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

inline void gemv(CBLAS_TRANSPOSE t, blasint m, blasint n, const double* a, blasint lda,
                 const double* x, blasint incx, double beta, double* y, blasint incy,
                 double alpha) {
  torcia_blas::table.dgemv(CblasRowMajor, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

inline void gemm_call(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k,
                      const float* a, blasint lda, const float* b, blasint ldb, float beta,
                      float* c, blasint ldc, float alpha) {
  torcia_blas::table.sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                           ldc);
}

inline void gemm_call(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k,
                      const double* a, blasint lda, const double* b, blasint ldb, double beta,
                      double* c, blasint ldc, double alpha) {
  torcia_blas::table.dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                           ldc);
}

// C = alpha A B + beta C. A product with one row (a decoding step's projections) or one
// column is a matrix-vector product: GEMV, which OpenBLAS runs 3-9x faster than its GEMM of
// that shape (a 1 x 768 by 768 x 2304 product: 0.52 -> 0.18 ms on one thread), and
// PyTorch calls too
template <typename T>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k, const T* a,
          blasint lda, const T* b, blasint ldb, T beta, T* c, blasint ldc, T alpha = T(1)) {
  if (m == 1 && n > 1 && k > 0) {
    // c (1, n) = a (1, k) op(b): op(b)^T a, a's elements lda apart when it is transposed
    gemv(tb == CblasNoTrans ? CblasTrans : CblasNoTrans, tb == CblasNoTrans ? k : n,
         tb == CblasNoTrans ? n : k, b, ldb, a, ta == CblasNoTrans ? 1 : lda, beta, c, 1,
         alpha);
    return;
  }
  if (n == 1 && m > 1 && k > 0) {
    // c (m, 1) = op(a) b (k, 1), c's elements ldc apart
    gemv(ta, ta == CblasNoTrans ? m : k, ta == CblasNoTrans ? k : m, a, lda, b,
         tb == CblasNoTrans ? ldb : 1, beta, c, ldc, alpha);
    return;
  }
  gemm_call(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, alpha);
}

// count products C_i = A_i B_i + beta C_i, operand i at A + i * sa (and B, C alike), in one
// call: the library's small-matrix path without a call's overhead per matrix (64 products
// of 64x64x32 on OpenBLAS: 1.8x faster than a call each).
template <typename T>
void gemm_batch_strided(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k,
                        const T* a, blasint lda, blasint sa, const T* b, blasint ldb, blasint sb,
                        T beta, T* c, blasint ldc, blasint sc, blasint count);

template <>
inline void gemm_batch_strided<float>(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m,
                                      blasint n, blasint k, const float* a, blasint lda,
                                      blasint sa, const float* b, blasint ldb, blasint sb,
                                      float beta, float* c, blasint ldc, blasint sc,
                                      blasint count) {
  torcia_blas::table.sgemm_strided(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, sa, b, ldb,
                                   sb, beta, c, ldc, sc, count);
}

template <>
inline void gemm_batch_strided<double>(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m,
                                       blasint n, blasint k, const double* a, blasint lda,
                                       blasint sa, const double* b, blasint ldb, blasint sb,
                                       double beta, double* c, blasint ldc, blasint sc,
                                       blasint count) {
  torcia_blas::table.dgemm_strided(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, sa, b, ldb,
                                   sb, beta, c, ldc, sc, count);
}
