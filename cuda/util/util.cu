/**
 * @file @brief Small kernels the library needs beside the products: for now the stream hold of the timing
 * (src/timing.rs), which keeps the GPU busy while the host enqueues every timed run, so that the runs execute
 * back to back and no event pair brackets host time.
 */

/// @brief Spins one thread for `ns` nanoseconds of the GPU's global timer, then returns.
extern "C" __global__ void __launch_bounds__(1) ts_hold_stream(unsigned long long ns) {
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) return;
    __nanosleep(1000);
  }
}
