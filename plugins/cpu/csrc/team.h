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

#include <algorithm>
#include <atomic>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace torcia_team {

// Elements per span (an OpenMP task) of those regions: PyTorch's internal grain size, so
// that a tensor of fewer elements stays on the calling thread.
constexpr std::int64_t kGrain = 1 << 15;

inline std::atomic<bool> crowded{false};

// threads for a region whose split is fixed by the shape alone
inline int fixed_split() {
#ifdef _OPENMP
  return crowded.load(std::memory_order_relaxed) ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

// body(lo, hi) over the rows [lo, hi) of a (rows, width) block, in blocks of about kGrain
// elements, on the team where there are several (the caller holds no GIL)
template <typename Body>
void for_row_blocks(std::int64_t rows, std::int64_t width, Body body) {
  const std::int64_t per = std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(1, width));
  const std::int64_t blocks = (rows + per - 1) / per;
#pragma omp parallel for num_threads(fixed_split()) schedule(static) if (blocks > 1)
  for (std::int64_t c = 0; c < blocks; ++c) body(c * per, std::min(rows, (c + 1) * per));
}

}  // namespace torcia_team
