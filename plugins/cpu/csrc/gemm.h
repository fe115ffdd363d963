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
