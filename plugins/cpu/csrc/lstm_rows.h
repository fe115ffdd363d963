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

// One row of lstm_cell over hd units; restrict lets the compiler vectorize the loop without
// a runtime overlap check it gives up on. The four gates of a unit lie gs apart in gates
// and as apart in act (hd for a whole row; the layer's H where a thread takes a slice of
// the units).
template <typename T>
TORCIA_CLONES_WIDE static void lstm_cell_row(const T* __restrict__ gates, int64_t gs,
                                             const T* __restrict__ c, T* __restrict__ act,
                                             int64_t as, T* __restrict__ h,
                                             T* __restrict__ c_new, int64_t hd) {
  for (int64_t k = 0; k < hd; ++k) {
    const T i = sigmoid(gates[k]), f = sigmoid(gates[gs + k]);
    const T g = tanh_(gates[2 * gs + k]), o = sigmoid(gates[3 * gs + k]);
    const T cv = f * c[k] + i * g;
    act[k] = i;
    act[as + k] = f;
    act[2 * as + k] = g;
    act[3 * as + k] = o;
    c_new[k] = cv;
    h[k] = o * tanh_(cv);
  }
}

// Its derivative over hd units, the gates s apart in act and in g_gates.
template <typename T>
TORCIA_CLONES_WIDE static void lstm_cell_backward_row(const T* __restrict__ gh,
                                                      const T* __restrict__ gc,
                                                      const T* __restrict__ act,
                                                      const T* __restrict__ c,
                                                      const T* __restrict__ c_new,
                                                      T* __restrict__ g_gates,
                                                      T* __restrict__ g_c, int64_t hd,
                                                      int64_t s) {
  for (int64_t k = 0; k < hd; ++k) {
    const T i = act[k], f = act[s + k], g = act[2 * s + k], o = act[3 * s + k];
    const T tc = tanh_(c_new[k]);
    const T dc = gc[k] + gh[k] * o * (T(1) - tc * tc);
    g_gates[k] = dc * g * i * (T(1) - i);
    g_gates[s + k] = dc * c[k] * f * (T(1) - f);
    g_gates[2 * s + k] = dc * i * (T(1) - g * g);
    g_gates[3 * s + k] = gh[k] * tc * o * (T(1) - o);
    g_c[k] = dc * f;
  }
}
