// Work split into a fixed grid, run by whichever threads of a team are on a core: `stages`
// stages of `slices` slices each, where stage i starts once every slice of stage i - 1 is
// done (an LSTM layer's time steps, its hidden units split into slices).
//
// Threads take (stage, slice) tickets in order, so the split, and with it every result,
// depends on the grid alone, never on which thread ran a slice. A thread that gets no core
// for a while (other processes on a shared machine) takes no tickets, and the others run
// its slices: a fixed split with a barrier a stage would wait for it at every stage
// instead. libgomp's barrier spins only briefly before it sleeps (the plugin's spin count,
// torcia_cpu/__init__.py), and then the last thread wakes the early one through the kernel
// at every stage, more than a step's work on a loaded machine. Here a thread waiting on a
// stage spins for a bounded time first (where it finishes within it, no system call at
// all), then sleeps on a futex.
#pragma once

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace torcia_stages {

class Grid {
 public:
  Grid(std::int64_t stages, int slices) : slices_(slices), total_(stages * slices) {
    if (slices < 1 || stages < 0 || stages * slices >= INT_MAX)
      throw std::runtime_error("stages: a grid of 1 to 2^31 - 1 slices");
  }

  // Called by every thread of the team: runs work(stage, slice) for tickets until none are
  // left.
  template <typename Work>
  void run(Work&& work) {
    for (;;) {
      const std::int64_t k = next_.fetch_add(1, std::memory_order_relaxed);
      if (k >= total_) return;
      const std::int64_t stage = k / slices_;
      wait_for(static_cast<int>(stage * slices_));
      work(stage, static_cast<int>(k % slices_));
      // seq_cst against a sleeper's count (wait_for): either it sees this count before
      // sleeping, or this sees the sleeper and wakes it
      const int done = done_.fetch_add(1, std::memory_order_seq_cst) + 1;
      if (done % slices_ == 0 && sleepers_.load(std::memory_order_seq_cst) > 0) wake();
    }
  }

 private:
  // long enough for a partner's slice of a step to finish, short against a scheduler
  // slice (milliseconds)
  static constexpr std::chrono::microseconds kSpin{50};

  // returns once `target` slices are done (every slice of the stages before)
  void wait_for(int target) {
    if (done_.load(std::memory_order_acquire) >= target) return;
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 1;; ++i) {
      pause();
      if (done_.load(std::memory_order_acquire) >= target) return;
      if (i % 64 == 0 && std::chrono::steady_clock::now() > until) break;
    }
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    for (;;) {
      const int seen = done_.load(std::memory_order_seq_cst);
      if (seen >= target) break;
      sleep(seen);
    }
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }

  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
  }

  // until woken, or at once where the count is no longer `seen`
  void sleep(int seen) {
#if defined(__linux__)
    syscall(SYS_futex, reinterpret_cast<int*>(&done_), FUTEX_WAIT_PRIVATE, seen, nullptr,
            nullptr, 0);
#else
    (void)seen;
    std::this_thread::yield();
#endif
  }

  void wake() {
#if defined(__linux__)
    syscall(SYS_futex, reinterpret_cast<int*>(&done_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
            nullptr, 0);
#endif
  }

  const int slices_;
  const std::int64_t total_;
  std::atomic<std::int64_t> next_{0};
  std::atomic<int> done_{0};
  std::atomic<int> sleepers_{0};
};

static_assert(std::atomic<int>::is_always_lock_free && sizeof(std::atomic<int>) == sizeof(int),
              "the futex word is a plain int");

}  // namespace torcia_stages
