// GEMM on the scipy-openblas32 wheel's OpenBLAS (row-major), one template for float and
// double: C = A B + beta C, A (m, k) and B (k, n) each possibly transposed.
#pragma once

#include <cblas.h>

template <typename T>
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n, blasint k, const T* a,
          blasint lda, const T* b, blasint ldb, T beta, T* c, blasint ldc);

template <>
inline void gemm<float>(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n,
                        blasint k, const float* a, blasint lda, const float* b, blasint ldb,
                        float beta, float* c, blasint ldc) {
  scipy_cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

template <>
inline void gemm<double>(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m, blasint n,
                         blasint k, const double* a, blasint lda, const double* b, blasint ldb,
                         double beta, double* c, blasint ldc) {
  scipy_cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// count products C_i = A_i B_i + beta C_i, operand i at A + i * sa (and B, C alike), in one
// call: OpenBLAS's small-matrix path without a call's overhead per matrix (64 products of
// 64x64x32: 1.8x faster than a call each).
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
  scipy_cblas_sgemm_batch_strided(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, sa, b, ldb, sb,
                                  beta, c, ldc, sc, count);
}

template <>
inline void gemm_batch_strided<double>(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint m,
                                       blasint n, blasint k, const double* a, blasint lda,
                                       blasint sa, const double* b, blasint ldb, blasint sb,
                                       double beta, double* c, blasint ldc, blasint sc,
                                       blasint count) {
  scipy_cblas_dgemm_batch_strided(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, sa, b, ldb, sb,
                                  beta, c, ldc, sc, count);
}
