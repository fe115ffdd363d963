// The team of the parallel regions whose split is fixed by the shape alone (elementwise
// spans, a sum's partial sums, an optimizer's spans, a softmax's or a norm's rows, pooling
// planes, im2col taps, an embedding gradient's columns): each result is the same on any
// number of threads, so the load may choose it. All of OpenMP's
// (torcia's) threads, or one while the machine is crowded (torcia_cpu/_blas.py's
// crowded(), which sets it through set_crowded): a thread that another process keeps off
// its core holds the region's end until it gets one, and on the loaded 2-core machine
// (load average 5) every such op ran slower on two threads than on one, whatever the size
// (a 65536-element ReLU 7 -> 11 us, a 1M-element GELU 481 -> 507 us).
#pragma once

#include <atomic>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace torcia_team {

inline std::atomic<bool> crowded{false};

// threads for a region whose split is fixed by the shape alone
inline int fixed_split() {
#ifdef _OPENMP
  return crowded.load(std::memory_order_relaxed) ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace torcia_team
