// bench/prefill/prefill_bench.cpp — kascade_bench_prefill: times the CUDA prefill kernels of issue 6
// on the GPU (cuDNN SDPA causal prefill is timed by bench/prefill/cudnn_prefill.py in the same
// device session; bench/prefill/prefill_report.py joins both into the docs/perf.md table).
//
// One sequence (B = 1) of L tokens, prompt = the whole sequence, Llama-3.1-8B attention shape
// (H = 32, G = 8, d = 128), fp16 and bf16, K/V contiguous (one page) or paged (16-key pages
// shuffled across the cache). Top-k budget 10 % rolling (k_min 128), T = 32, R = G rows per tile.
// Kernels (rows of the JSON output):
//   dense      dense causal prefill (o + lse);
//   anchor0    layer-0 anchor: dense output + pooled scores + Top-k into the compact rows;
//   anchor     anchor of a later layer: LSE pass + pooled scores + Top-k + sparse output;
//   reuse      sparse prefill over the anchor's rows (identity head map);
//   lse        (breakdown) the LSE pass alone;
//   select     (breakdown) select_prefill: LSE pass + every wave's pooling and Top-k.
// Each is timed with CUDA events after an L2 flush (a 256 MB memset outside the timed region); the
// median of --reps runs is reported with TFLOP/s of the FLOPs the kernel executes (causal pairs
// only; 2·d per score for Q·Kᵀ and 2·d for P·V; sparse counts its gathered + local keys), and for
// the anchors the device memory of selection: the plan's scratch (LSE + one wave of scores) and the
// compact index rows. The device error word is checked after every configuration; the JSON is
// rewritten after every configuration, so a run cut short keeps what it measured.
// Every kernel runs in four forced variants (PrefillPlanOptions::kernels): Q·Kᵀ on mma.sync
// ("mma", PrefillKernels::kMma), on sm_90a warpgroup MMAs issued synchronously ("wgmma"), and
// "ws": dense prefill, the LSE pass and sparse prefill (reuse, the anchor's sparse output: K/V rows
// gathered key by key) on the warp-specialised sm_90a mainloop with cp.async producers (pooling and
// Top-k stay on mma.sync), and "ws_tma": the same with the TMA K/V producer for the causal passes
// and the warp-specialised pooled-score kernel where the layout allows TMA (contiguous K/V and pages
// of a multiple of 128 keys, --page; cp.async / mma.sync pooling otherwise). "auto" (not in the
// default list) is what the ops run by default: on sm_90a builds on Hopper the ws_tma kernels where
// the layout allows TMA and the ws sparse kernel on every layout, else mma.sync. So the rows reuse,
// anchor and anchor0 of --variants mma,ws_tma,auto compare the old loop with the new kernels. The
// sm_90a variants are skipped where the plan refuses them.
//   kascade_bench_prefill [--lens 8192,32768,65536,131072] [--dtypes f16,bf16]
//                         [--layouts contiguous,paged] [--page 16] [--variants mma,wgmma,ws,ws_tma,auto]
//                         [--kernels dense,lse,select,anchor0,anchor,reuse] [--reps 10] [--json results.json]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_check.h"
#include "bench_device.h"
#include "bench_timer.h"
#include "cuda/prefill/prefill_errors.h"
#include "cuda/prefill/prefill_ops.h"
#include "cuda/prefill/prefill_stages.h"
#include "kascade/budget.h"
#include "ref/prefill_rows.h"

namespace kascade::bench {
namespace {

constexpr int32_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kTile = 32, kPage = 16;

// The plan's kernels for a --variants name (the names of cuda::prefill_kernels_name); none for others.
std::optional<cuda::PrefillKernels> kernels_of_variant(const std::string& name) {
  for (const cuda::PrefillKernels k : {cuda::PrefillKernels::kMma, cuda::PrefillKernels::kWgmma,
                                       cuda::PrefillKernels::kWarpSpecialized,
                                       cuda::PrefillKernels::kWarpSpecializedTma, cuda::PrefillKernels::kAuto}) {
    if (name == cuda::prefill_kernels_name(k)) return k;
  }
  return std::nullopt;
}

struct Options {
  std::vector<int32_t> lens = {8192, 32768, 65536, 131072};
  std::vector<DType> dtypes = {DType::kF16, DType::kBF16};
  std::vector<std::string> layouts = {"contiguous", "paged"};
  // mma.sync / sm_90a wgmma / warp-specialised (cp.async producer) / warp-specialised with TMA K/V
  std::vector<std::string> variants = {"mma", "wgmma", "ws", "ws_tma"};
  std::vector<std::string> kernels = {"dense", "lse", "select", "anchor0", "anchor", "reuse"};
  int32_t page = kPage;  // keys per page of the paged layout
  int reps = 10;
  std::string json_path;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) parts.push_back(item);
  }
  return parts;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--lens" && has_value) {
      o.lens.clear();
      for (const auto& s : split(argv[++i])) o.lens.push_back(std::stoi(s));
    } else if (arg == "--dtypes" && has_value) {
      o.dtypes.clear();
      for (const auto& s : split(argv[++i])) {
        auto d = parse_dtype(s);
        if (!d.ok() || *d == DType::kF32) {
          std::fprintf(stderr, "--dtypes takes f16 and bf16, got %s\n", s.c_str());
          std::exit(2);
        }
        o.dtypes.push_back(*d);
      }
    } else if (arg == "--layouts" && has_value) {
      o.layouts = split(argv[++i]);
      for (const auto& l : o.layouts) {
        if (l != "contiguous" && l != "paged") {
          std::fprintf(stderr, "--layouts takes contiguous and paged, got %s\n", l.c_str());
          std::exit(2);
        }
      }
    } else if (arg == "--variants" && has_value) {
      o.variants = split(argv[++i]);
      for (const auto& v : o.variants) {
        if (!kernels_of_variant(v).has_value()) {
          std::fprintf(stderr, "--variants takes mma, wgmma, ws, ws_tma and auto, got %s\n", v.c_str());
          std::exit(2);
        }
      }
    } else if (arg == "--kernels" && has_value) {
      o.kernels = split(argv[++i]);
      for (const auto& k : o.kernels) {
        if (k != "dense" && k != "lse" && k != "select" && k != "anchor0" && k != "anchor" && k != "reuse") {
          std::fprintf(stderr, "--kernels takes dense, lse, select, anchor0, anchor and reuse, got %s\n", k.c_str());
          std::exit(2);
        }
      }
    } else if (arg == "--page" && has_value) {
      o.page = std::atoi(argv[++i]);
      if (o.page < 1) {
        std::fprintf(stderr, "--page takes a positive number of keys\n");
        std::exit(2);
      }
    } else if (arg == "--reps" && has_value) {
      o.reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json" && has_value) {
      o.json_path = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: kascade_bench_prefill [--lens 8192,...] [--dtypes f16,bf16] "
                   "[--layouts contiguous,paged] [--page 16] [--variants mma,wgmma,ws,ws_tma,auto] "
                   "[--kernels dense,lse,select,anchor0,anchor,reuse] [--reps 10] [--json out.json]\n");
      std::exit(2);
    }
  }
  return o;
}

using DeviceMemory = Device;  // bench_timer.h

struct Record {
  std::string kernel, dtype, layout, variant;
  int32_t len = 0;
  double ms = 0, ms_min = 0, flops = 0, selection_scratch_bytes = 0, index_bytes = 0;
};

// Median and minimum of `reps` timed runs of fn, each after an L2 flush.
template <typename Fn>
std::pair<double, double> time_ms(Fn&& fn, int reps, void* flush, size_t flush_bytes) {
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  fn();  // warm-up
  BENCH_CHECK(cudaDeviceSynchronize());
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    BENCH_CHECK(cudaMemsetAsync(flush, r & 0xFF, flush_bytes, nullptr));
    BENCH_CHECK(cudaEventRecord(start, nullptr));
    fn();
    BENCH_CHECK(cudaEventRecord(stop, nullptr));
    BENCH_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    BENCH_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  BENCH_CHECK(cudaEventDestroy(start));
  BENCH_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front()};
}

void run_config(const Options& opt, DType dtype, const std::string& layout, const std::string& variant, int32_t n,
                void* flush, size_t flush_bytes, std::vector<Record>& out) {
  const bool bf16 = dtype == DType::kBF16;
  const int32_t page = layout == "paged" ? opt.page : n;
  const int32_t pages = (n + page - 1) / page;
  const size_t q_elems = size_t(n) * kHeads * kHeadDim;
  const size_t kv_elems = size_t(pages) * page * kKvHeads * kHeadDim;
  DeviceMemory q(q_elems * 2), o(q_elems * 2), lse(size_t(n) * kHeads * 4), k(kv_elems * 2), v(kv_elems * 2);
  BENCH_CHECK(fill_random_16bit(q.p, q_elems, bf16, 1, 1.0f, nullptr));
  BENCH_CHECK(fill_random_16bit(k.p, kv_elems, bf16, 2, 1.0f, nullptr));
  BENCH_CHECK(fill_random_16bit(v.p, kv_elems, bf16, 3, 1.0f, nullptr));
  std::vector<int32_t> table(pages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(7));
  const std::vector<int32_t> cu = {0, n}, lens = {n};
  DeviceMemory table_d(table.size() * 4), cu_d(8), lens_d(4);
  BENCH_CHECK(cudaMemcpy(table_d.p, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemcpy(cu_d.p, cu.data(), 8, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemcpy(lens_d.p, lens.data(), 4, cudaMemcpyHostToDevice));

  QueryBatch qb;
  qb.q = q.p;
  qb.dtype = dtype;
  qb.batch = 1;
  qb.total_q = n;
  qb.num_heads = kHeads;
  qb.head_dim = kHeadDim;
  qb.cu_q_lens = cu_d.as<int32_t>();
  PagedKv kv;
  kv.k = k.p;
  kv.v = v.p;
  kv.dtype = dtype;
  kv.num_pages = pages;
  kv.page_size = page;
  kv.num_kv_heads = kKvHeads;
  kv.head_dim = kHeadDim;
  kv.block_table = table_d.as<int32_t>();
  kv.max_pages_per_seq = pages;
  kv.kv_lens = lens_d.as<int32_t>();
  AttentionParams params;
  params.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  const AttentionOutput result{o.p, dtype, lse.as<float>()};

  cuda::PrefillShape shape;
  shape.dtype = dtype;
  shape.batch = 1;
  shape.num_heads = kHeads;
  shape.num_kv_heads = kKvHeads;
  shape.head_dim = kHeadDim;
  shape.max_total_q = n;
  shape.max_q_len = n;
  shape.max_kv_len = n;
  shape.tile_size = kTile;
  cuda::PrefillPlanOptions plan_options;
  plan_options.kernels = *kernels_of_variant(variant);
  auto plan = cuda::plan_prefill(shape, plan_options);
  if (plan.status().code() == StatusCode::kUnsupported) {
    std::printf("variant %s skipped: %s\n", variant.c_str(), plan.status().to_string().c_str());
    return;
  }
  BENCH_OK(plan.status());
  DeviceMemory workspace(plan->workspace.total_bytes);
  BENCH_OK(cuda::initialize_prefill_workspace(*plan, workspace.p, nullptr));

  // Rolling Top-k rows, 10 % with k_min 128, one row per KV group and tile.
  const Budget budget;
  auto row_plan = ref::plan_prefill_rows(&n, &n, 1, kTile, kKvHeads, budget, /*rolling=*/true);
  BENCH_OK(row_plan.status());
  const int64_t total_indices = row_plan->total_indices();
  DeviceMemory indices(size_t(total_indices) * 4), offsets(row_plan->row_offsets.size() * 8),
      tile_base(row_plan->tile_base.size() * 4);
  BENCH_CHECK(cudaMemcpy(offsets.p, row_plan->row_offsets.data(), row_plan->row_offsets.size() * 8,
                         cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemcpy(tile_base.p, row_plan->tile_base.data(), row_plan->tile_base.size() * 4,
                         cudaMemcpyHostToDevice));
  PrefillIndexRows rows;
  rows.indices = indices.as<int32_t>();
  rows.row_offsets = offsets.as<int64_t>();
  rows.tile_base = tile_base.as<int32_t>();
  rows.batch = 1;
  rows.num_rows = kKvHeads;
  rows.tile_size = kTile;
  ScorePooling pooling;
  pooling.num_rows = kKvHeads;
  const double index_bytes = double(total_indices) * 4 + double(row_plan->row_offsets.size()) * 8 +
                             double(row_plan->tile_base.size()) * 4;

  // Executed FLOPs.
  const double per_score = 2.0 * kHeadDim * kHeads;  // one of Q·Kᵀ or P·V, all heads
  const double causal = double(n) * (n + 1) / 2;
  double sparse_keys = 0, pooled_keys = 0;  // Σ over queries of attended keys; Σ over tiles T·s_t pooled
  for (int64_t t = 0; t < row_plan->num_slots(); ++t) {
    const int64_t s_t = t * kTile, k_t = row_plan->row_offsets[t * kKvHeads + 1] - row_plan->row_offsets[t * kKvHeads];
    const int64_t queries = std::min<int64_t>(kTile, n - s_t);
    sparse_keys += double(queries) * k_t + double(queries) * (queries + 1) / 2;
    if (k_t > 0 && k_t < s_t) pooled_keys += double(queries) * s_t;
  }
  const double dense_flops = 2 * per_score * causal, lse_flops = per_score * causal;
  const double reuse_flops = 2 * per_score * sparse_keys, pool_flops = per_score * pooled_keys;

  auto wanted = [&](const char* kernel) {
    return std::find(opt.kernels.begin(), opt.kernels.end(), kernel) != opt.kernels.end();
  };
  auto record = [&](const std::string& kernel, std::pair<double, double> t, double flops, bool selection) {
    Record r;
    r.kernel = kernel;
    r.dtype = dtype_name(dtype);
    r.layout = layout;
    r.variant = variant;
    r.len = n;
    r.ms = t.first;
    r.ms_min = t.second;
    r.flops = flops;
    if (selection) {
      r.selection_scratch_bytes = double(plan->selection_scratch_bytes());
      r.index_bytes = index_bytes;
    }
    std::printf("%-8s %-5s %-4s %-10s L=%-7d %9.3f ms (min %9.3f)  %7.1f TFLOP/s%s\n", kernel.c_str(),
                variant.c_str(), r.dtype.c_str(), layout.c_str(), n, r.ms, r.ms_min, flops / (r.ms * 1e-3) / 1e12,
                selection ? ("  selection memory " + std::to_string((r.selection_scratch_bytes + index_bytes) / 1e9) +
                             " GB")
                                .c_str()
                          : "");
    std::fflush(stdout);
    out.push_back(r);
  };

  void* ws = workspace.p;
  if (wanted("dense"))
    record("dense", time_ms([&] { BENCH_OK(cuda::dense_prefill(*plan, qb, kv, params, result, ws, nullptr)); },
                            opt.reps, flush, flush_bytes),
           dense_flops, false);
  if (wanted("lse"))
    record("lse", time_ms([&] {
             BENCH_OK(cuda::prefill_lse(*plan, qb, kv, params, cuda::prefill_lse_scratch(*plan, ws), ws, nullptr));
           }, opt.reps, flush, flush_bytes),
           lse_flops, false);
  if (wanted("select"))
    record("select",
           time_ms([&] { BENCH_OK(cuda::select_prefill(*plan, qb, kv, params, pooling, rows, ws, nullptr)); }, opt.reps,
                   flush, flush_bytes),
           lse_flops + pool_flops, true);
  if (wanted("anchor0"))
    record("anchor0", time_ms([&] {
             BENCH_OK(cuda::anchor_prefill(*plan, qb, kv, params, pooling, rows, AnchorOutput::kDense, nullptr, result, ws,
                                           nullptr));
           }, opt.reps, flush, flush_bytes),
           dense_flops + pool_flops, true);
  if (wanted("anchor"))
    record("anchor", time_ms([&] {
             BENCH_OK(cuda::anchor_prefill(*plan, qb, kv, params, pooling, rows, AnchorOutput::kSparse, nullptr, result,
                                           ws, nullptr));
           }, opt.reps, flush, flush_bytes),
           lse_flops + pool_flops + reuse_flops, true);
  if (wanted("reuse"))
    record("reuse", time_ms([&] {
             BENCH_OK(cuda::sparse_prefill(*plan, qb, kv, params, rows, nullptr, result, ws, nullptr));
           }, opt.reps, flush, flush_bytes),
           reuse_flops, false);
  auto errors = cuda::read_prefill_errors(*plan, ws, nullptr);
  BENCH_OK(errors.status());
  if (*errors != 0) {
    std::fprintf(stderr, "device errors: %s\n", cuda::describe_prefill_errors(*errors).c_str());
    std::exit(1);
  }
}

void write_json(const std::string& path, const std::vector<Record>& records) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::fprintf(f, "{\"gpu\": \"%s\", \"shape\": {\"H\": %d, \"G\": %d, \"d\": %d, \"T\": %d}, \"records\": [\n",
               prop.name, kHeads, kKvHeads, kHeadDim, kTile);
  for (size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    std::fprintf(f,
                 "  {\"kernel\": \"%s\", \"variant\": \"%s\", \"dtype\": \"%s\", \"layout\": \"%s\", \"L\": %d, "
                 "\"ms\": %.6f, \"ms_min\": %.6f, \"flops\": %.6e, \"selection_scratch_bytes\": %.0f, "
                 "\"index_bytes\": %.0f}%s\n",
                 r.kernel.c_str(), r.variant.c_str(), r.dtype.c_str(), r.layout.c_str(), r.len, r.ms, r.ms_min, r.flops,
                 r.selection_scratch_bytes, r.index_bytes, i + 1 < records.size() ? "," : "");
  }
  std::fprintf(f, "]}\n");
  std::fclose(f);
}

}  // namespace
}  // namespace kascade::bench

int main(int argc, char** argv) {
  using namespace kascade::bench;
  const Options opt = parse(argc, argv);
  const size_t flush_bytes = size_t{256} << 20;
  void* flush = nullptr;
  BENCH_CHECK(cudaMalloc(&flush, flush_bytes));
  std::vector<Record> records;
  for (kascade::DType dtype : opt.dtypes) {
    for (const std::string& layout : opt.layouts) {
      for (int32_t n : opt.lens) {
        for (const std::string& variant : opt.variants) {
          run_config(opt, dtype, layout, variant, n, flush, flush_bytes, records);
          if (!opt.json_path.empty()) write_json(opt.json_path, records);  // partial results survive a timeout
        }
      }
    }
  }
  cudaFree(flush);
  return 0;
}
