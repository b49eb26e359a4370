// bench/bench_timer.h — what the CUDA benchmarks share for timing: an owning device allocation,
// a timer that captures an op in a CUDA graph and times its replays with CUDA events, after a warm-up
// (warmup_ms) and each after an L2 flush outside the timed region (write: a 256 MB memset, leaving dirty
// lines; read: a 256 MB read, clean lines; none: warm L2), and the read-bandwidth roof (a 4 GiB read-only
// reduction with 16-byte loads). Used by kascade_bench_decode and kascade_bench_linear (exercised by
// every run of them).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "bench_check.h"
#include "bench_device.h"

namespace kascade::bench {

// Owning device allocation.
struct Device {
  void* p = nullptr;
  explicit Device(size_t bytes) { BENCH_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16))); }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  template <typename T>
  T* as() const { return static_cast<T*>(p); }
};

struct Timer {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  static constexpr size_t kFlushBytes = size_t{256} << 20;
  Device flush{kFlushBytes};
  Device flush_sink{sizeof(unsigned long long)};
  std::string flush_mode = "write";
  Timer() {
    BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    BENCH_CHECK(cudaEventCreate(&start));
    BENCH_CHECK(cudaEventCreate(&stop));
  }
  // Warm-up before the timed replays: at least 2 replays and at least this many milliseconds of them
  // (--warmup-ms). With a count of 2 alone (--warmup-ms 0), the first op of a cell reads slow: dense at B = 8,
  // 128K was 1.19-1.20x cuDNN with 0 ms and 1.011-1.012x with 50 ms, two runs each in turns on an H100
  // (docs/perf.md, "the warm-up check", 2026-12-07): the GPU still ramps its clocks after the cell's setup.
  double warmup_ms = 50.0;
  // Median (and min) microseconds of `reps` replays, each after an L2 flush.
  std::pair<double, double> time_graph(cudaGraphExec_t exec, int reps) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 1000; ++i) {  // the cap: 1000 replays of even a 1 us op is far past any ramp
      BENCH_CHECK(cudaGraphLaunch(exec, stream));
      BENCH_CHECK(cudaStreamSynchronize(stream));
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (i >= 1 && ms >= warmup_ms) break;
    }
    std::vector<double> us;
    for (int r = 0; r < reps; ++r) {
      if (flush_mode == "write") BENCH_CHECK(cudaMemsetAsync(flush.p, r & 0xff, kFlushBytes, stream));
      if (flush_mode == "read") BENCH_CHECK(read_all(flush.p, kFlushBytes, flush_sink.as<unsigned long long>(), stream));
      BENCH_CHECK(cudaEventRecord(start, stream));
      BENCH_CHECK(cudaGraphLaunch(exec, stream));
      BENCH_CHECK(cudaEventRecord(stop, stream));
      BENCH_CHECK(cudaEventSynchronize(stop));
      float ms = 0.0f;
      BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
      us.push_back(ms * 1000.0);
    }
    std::sort(us.begin(), us.end());
    return {us[us.size() / 2], us.front()};
  }
  template <typename Fn>
  cudaGraphExec_t capture(Fn&& fn) {
    cudaGraph_t graph = nullptr;
    BENCH_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const Status st = fn(stream);
    BENCH_CHECK(cudaStreamEndCapture(stream, &graph));
    BENCH_OK(st);
    cudaGraphExec_t exec = nullptr;
    BENCH_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    BENCH_CHECK(cudaGraphDestroy(graph));
    return exec;
  }
};

// GB/s of the median of `reps` timed reads of 4 GiB (after two untimed ones).
inline double measure_read_roof(Timer& timer, int reps) {
  const size_t bytes = size_t{4} << 30;
  Device data(bytes), sink(sizeof(unsigned long long));
  BENCH_CHECK(fill_random_16bit(data.p, bytes / 2, false, 7, 1.0f, timer.stream));
  BENCH_CHECK(cudaStreamSynchronize(timer.stream));
  std::vector<double> us;
  for (int r = 0; r < reps + 2; ++r) {
    BENCH_CHECK(cudaEventRecord(timer.start, timer.stream));
    BENCH_CHECK(read_all(data.p, bytes, sink.as<unsigned long long>(), timer.stream));
    BENCH_CHECK(cudaEventRecord(timer.stop, timer.stream));
    BENCH_CHECK(cudaEventSynchronize(timer.stop));
    float ms = 0.0f;
    BENCH_CHECK(cudaEventElapsedTime(&ms, timer.start, timer.stop));
    if (r >= 2) us.push_back(ms * 1000.0);
  }
  std::sort(us.begin(), us.end());
  return static_cast<double>(bytes) / (us[us.size() / 2] * 1e-6) / 1e9;
}

}  // namespace kascade::bench
