// The LSTM cell's step and its derivative over one row of hidden units: shared by the
// cell kernels (kernels.cpp) and the whole-layer loop (lstm.cpp).
#pragma once

#include <cstdint>

#include "vecmath.h"

using std::int64_t;

template <typename T>
static TORCIA_INLINE T sigmoid(T x) {
  return T(1) / (T(1) + exp_approx(-x));
}

template <typename T>
static TORCIA_INLINE T tanh_(T x) {
  return T(2) * sigmoid(T(2) * x) - T(1);
}

// One row of lstm_cell; restrict lets the compiler vectorize the loop without a runtime
// overlap check it gives up on.
template <typename T>
TORCIA_CLONES_WIDE static void lstm_cell_row(const T* __restrict__ gates, const T* __restrict__ c,
                          T* __restrict__ act, T* __restrict__ h, T* __restrict__ c_new,
                          int64_t hd) {
  for (int64_t k = 0; k < hd; ++k) {
    const T i = sigmoid(gates[k]), f = sigmoid(gates[hd + k]);
    const T g = tanh_(gates[2 * hd + k]), o = sigmoid(gates[3 * hd + k]);
    const T cv = f * c[k] + i * g;
    act[k] = i;
    act[hd + k] = f;
    act[2 * hd + k] = g;
    act[3 * hd + k] = o;
    c_new[k] = cv;
    h[k] = o * tanh_(cv);
  }
}

template <typename T>
TORCIA_CLONES_WIDE static void lstm_cell_backward_row(const T* __restrict__ gh, const T* __restrict__ gc,
                                   const T* __restrict__ act, const T* __restrict__ c,
                                   const T* __restrict__ c_new, T* __restrict__ g_gates,
                                   T* __restrict__ g_c, int64_t hd) {
  for (int64_t k = 0; k < hd; ++k) {
    const T i = act[k], f = act[hd + k], g = act[2 * hd + k], o = act[3 * hd + k];
    const T tc = tanh_(c_new[k]);
    const T dc = gc[k] + gh[k] * o * (T(1) - tc * tc);
    g_gates[k] = dc * g * i * (T(1) - i);
    g_gates[hd + k] = dc * c[k] * f * (T(1) - f);
    g_gates[2 * hd + k] = dc * i * (T(1) - g * g);
    g_gates[3 * hd + k] = gh[k] * tc * o * (T(1) - o);
    g_c[k] = dc * f;
  }
}
