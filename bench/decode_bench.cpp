// bench/decode_bench.cpp — kascade_bench_decode: times the CUDA decode kernels of issue 5 on the
// GPU against the read-bandwidth roof measured in the same run (cuDNN dense decode is timed by
// bench/cudnn_decode.py; bench/decode_report.py joins both into the docs/perf.md table).
//
// For each shape (llama: H=32, G=8, d=128; d64: H=32, G=8, d=64), dtype, batch B, length L and
// layout (contiguous: one page per sequence; paged: 16-key pages shuffled across the cache):
//   dense    dense split-KV decode over all L keys;
//   anchor0  layer-0 anchor: dense output + pooled scores (R = G) + exact Top-k(10 %);
//   anchor   anchor of a later layer: exact LSE + pooled scores + Top-k + sparse output;
//   reuse    sparse decode over the anchor's rows through a head map (g -> g+1 mod G);
//   topk     (breakdown) the radix Top-k alone over the anchor's pooled scores, first pass included;
//   dense_s0.5x, dense_s2x, dense_s4x, reuse_s0.5x, reuse_s2x, reuse_s4x  (experiments) the planned splits
//                times 1/2 (at least 1), 2 and 4.
// Each op is captured in a CUDA graph (one replay = one decode step of that layer, B = 1 too),
// replayed after an L2 flush outside the timed region, timed with CUDA events; the median of --reps
// replays is reported with the bytes the op must move at least. --flush picks the flush: write (default:
// a 256 MB memset, which leaves the L2 full of dirty lines that the timed op's reads must write back),
// read (a 256 MB read: the L2 holds clean lines, as after the weight-streaming GEMMs of a decode step) or
// none (warm L2). bench/cudnn_decode.py takes the same option.
//   kascade_bench_decode [--shapes llama,d64] [--dtypes f16,bf16] [--batches 1,8,64]
//                        [--lens 8192,32768,131072] [--layouts contiguous,paged] [--reps 15]
//                        [--topk auto|chunked|rows] [--topk-cluster 0|1|2|4|8] [--flush write|read|none]
//                        [--pool-fusion separate|fused] [--warmup-ms 50] [--json results.json]
// --warmup-ms: the untimed replays before each op's timed ones last at least this long (and are at least 2).
// --topk forces the Top-k kernels of the anchors and of the stand-alone Top-k (default: the plan's choice);
// --topk-cluster the row kernel's CTAs per row (default 0: the plan's); --pool-fusion runs the anchors'
// pooling and Top-k as two kernels (separate, the default) or one (fused: cuda::PoolFusion).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_check.h"
#include "bench_device.h"
#include "bench_timer.h"
#include "cuda/attention/dense_decode.h"
#include "cuda/common/device_errors.h"
#include "cuda/kascade/anchor_decode.h"
#include "cuda/kascade/radix_topk.h"
#include "cuda/kascade/sparse_decode.h"
#include "kascade/budget.h"

namespace kascade::bench {
namespace {

struct Shape {
  std::string name;
  int32_t num_heads, num_kv_heads, head_dim;
};

struct Options {
  std::vector<std::string> shapes = {"llama", "d64"};
  std::vector<std::string> dtypes = {"f16", "bf16"};
  std::vector<int32_t> batches = {1, 8, 64};
  std::vector<int32_t> lens = {8192, 32768, 131072};
  std::vector<std::string> layouts = {"contiguous", "paged"};
  int reps = 15;
  double mem_limit_gb = 110.0;
  cuda::TopkAlgorithm topk = cuda::TopkAlgorithm::kAuto;
  int32_t topk_cluster = 0;
  std::string flush = "write";  // the L2 flush before each timed replay: write | read | none
  double warmup_ms = 50.0;       // untimed replays before each op's timed ones, at least this long
  cuda::PoolFusion pool_fusion = cuda::PoolFusion::kSeparate;
  std::string json;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--shapes") o.shapes = split(value);
    else if (key == "--dtypes") o.dtypes = split(value);
    else if (key == "--batches") { o.batches.clear(); for (auto& v : split(value)) o.batches.push_back(std::stoi(v)); }
    else if (key == "--lens") { o.lens.clear(); for (auto& v : split(value)) o.lens.push_back(std::stoi(v)); }
    else if (key == "--layouts") o.layouts = split(value);
    else if (key == "--reps") o.reps = std::stoi(value);
    else if (key == "--mem-limit-gb") o.mem_limit_gb = std::stod(value);
    else if (key == "--warmup-ms") {
      o.warmup_ms = std::stod(value);
      if (!(o.warmup_ms >= 0.0 && o.warmup_ms <= 10000.0)) {
        std::fprintf(stderr, "--warmup-ms is '%s'; expected milliseconds in [0, 10000]\n", value.c_str());
        std::exit(2);
      }
    }
    else if (key == "--json") o.json = value;
    else if (key == "--topk") {
      if (value == "auto") o.topk = cuda::TopkAlgorithm::kAuto;
      else if (value == "chunked") o.topk = cuda::TopkAlgorithm::kChunked;
      else if (value == "rows") o.topk = cuda::TopkAlgorithm::kByRows;
      else { std::fprintf(stderr, "--topk is '%s'; expected auto, chunked or rows\n", value.c_str()); std::exit(2); }
    }
    else if (key == "--topk-cluster") o.topk_cluster = std::stoi(value);
    else if (key == "--pool-fusion") {
      if (value == "separate") o.pool_fusion = cuda::PoolFusion::kSeparate;
      else if (value == "fused") o.pool_fusion = cuda::PoolFusion::kFused;
      else { std::fprintf(stderr, "--pool-fusion is '%s'; expected separate or fused\n", value.c_str()); std::exit(2); }
    }
    else if (key == "--flush") {
      if (value != "write" && value != "read" && value != "none") {
        std::fprintf(stderr, "--flush is '%s'; expected write, read or none\n", value.c_str());
        std::exit(2);
      }
      o.flush = value;
    }
    else { std::fprintf(stderr, "unknown option %s\n", key.c_str()); std::exit(2); }
  }
  return o;
}

struct Result {
  std::string shape, dtype, layout, op;
  int32_t batch, len;
  double median_us, min_us, bytes, gbps, roof_fraction;
  int32_t splits;
};

void run_config(const Shape& shape, DType dtype, int32_t batch, int32_t len, const std::string& layout,
                const Options& opt, double roof_gbps, Timer& timer, std::vector<Result>& results) {
  const int32_t h = shape.num_heads, g = shape.num_kv_heads, d = shape.head_dim;
  const bool paged = layout == "paged";
  const int32_t page_size = paged ? 16 : len;
  const int32_t pages_per_seq = len / page_size;
  const int32_t num_pages = batch * pages_per_seq;
  const double kv_bytes = 2.0 * batch * static_cast<double>(len) * g * d * 2;
  const double logits_bytes = static_cast<double>(batch) * h * len * 4;
  if ((kv_bytes + 2.2 * logits_bytes) / 1e9 > opt.mem_limit_gb) {
    std::printf("skip %s %s B=%d L=%d %s: %.1f GB\n", shape.name.c_str(), dtype_name(dtype), batch, len,
                layout.c_str(), (kv_bytes + 2.2 * logits_bytes) / 1e9);
    return;
  }
  const size_t kv_elems = static_cast<size_t>(num_pages) * page_size * g * d;
  Device k(kv_elems * 2), v(kv_elems * 2), q(static_cast<size_t>(batch) * h * d * 2);
  const bool bf16 = dtype == DType::kBF16;
  BENCH_CHECK(fill_random_16bit(k.p, kv_elems, bf16, 1, 2.0f, timer.stream));
  BENCH_CHECK(fill_random_16bit(v.p, kv_elems, bf16, 2, 1.0f, timer.stream));
  BENCH_CHECK(fill_random_16bit(q.p, static_cast<size_t>(batch) * h * d, bf16, 3, 2.0f, timer.stream));
  std::vector<int32_t> table(num_pages);
  std::iota(table.begin(), table.end(), 0);
  if (paged) std::shuffle(table.begin(), table.end(), std::mt19937_64(11));
  std::vector<int32_t> lens(batch, len), head_map(g);
  for (int32_t i = 0; i < g; ++i) head_map[i] = (i + 1) % g;
  Device table_d(table.size() * 4), lens_d(lens.size() * 4), map_d(head_map.size() * 4);
  BENCH_CHECK(cudaMemcpy(table_d.p, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemcpy(lens_d.p, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaMemcpy(map_d.p, head_map.data(), head_map.size() * 4, cudaMemcpyHostToDevice));
  BENCH_CHECK(cudaDeviceSynchronize());

  QueryBatch qb;
  qb.q = q.p;
  qb.dtype = dtype;
  qb.batch = batch;
  qb.total_q = batch;
  qb.num_heads = h;
  qb.head_dim = d;
  PagedKv kv;
  kv.k = k.p;
  kv.v = v.p;
  kv.dtype = dtype;
  kv.num_pages = num_pages;
  kv.page_size = page_size;
  kv.num_kv_heads = g;
  kv.head_dim = d;
  kv.block_table = table_d.as<int32_t>();
  kv.max_pages_per_seq = pages_per_seq;
  kv.kv_lens = lens_d.as<int32_t>();
  AttentionParams params;
  params.scale = 1.0f / std::sqrt(static_cast<float>(d));

  cuda::DecodeShape s{dtype, batch, h, g, d, page_size, len};
  auto dense_plan = cuda::plan_dense_decode(s);
  BENCH_OK(dense_plan.status());
  cuda::AnchorOptions a0_opts;
  a0_opts.pooling.num_rows = g;
  a0_opts.dense_output = true;
  a0_opts.topk_algorithm = opt.topk;
  a0_opts.topk_row_cluster = opt.topk_cluster;
  a0_opts.pool_fusion = opt.pool_fusion;
  auto a0_plan = cuda::plan_anchor_decode(s, a0_opts);
  BENCH_OK(a0_plan.status());
  cuda::AnchorOptions a_opts = a0_opts;
  a_opts.dense_output = false;
  auto a_plan = cuda::plan_anchor_decode(s, a_opts);
  BENCH_OK(a_plan.status());
  const int32_t k_max = a_plan->k_max;
  auto r_plan = cuda::plan_sparse_decode(s, IndexGranularity::kPerKvGroup, k_max);
  BENCH_OK(r_plan.status());

  Device dense_ws(dense_plan->workspace.total_bytes), a0_ws(a0_plan->workspace.total_bytes),
      a_ws(a_plan->workspace.total_bytes), r_ws(r_plan->workspace.total_bytes);
  BENCH_OK(cuda::initialize_workspace(dense_plan->workspace, dense_ws.p, timer.stream));
  BENCH_OK(cuda::initialize_workspace(a0_plan->workspace, a0_ws.p, timer.stream));
  BENCH_OK(cuda::initialize_workspace(a_plan->workspace, a_ws.p, timer.stream));
  BENCH_OK(cuda::initialize_workspace(r_plan->workspace, r_ws.p, timer.stream));
  const size_t rows_elems = static_cast<size_t>(batch) * g * k_max;
  Device rows0(rows_elems * 4), lens0(static_cast<size_t>(batch) * g * 4), rows1(rows_elems * 4),
      lens1(static_cast<size_t>(batch) * g * 4);
  Device o(static_cast<size_t>(batch) * h * d * 2), lse(static_cast<size_t>(batch) * h * 4);
  AttentionOutput out{o.p, dtype, lse.as<float>()};
  DecodeIndexRows r0{rows0.as<int32_t>(), lens0.as<int32_t>(), batch, g, k_max, IndexGranularity::kPerKvGroup};
  DecodeIndexRows r1{rows1.as<int32_t>(), lens1.as<int32_t>(), batch, g, k_max, IndexGranularity::kPerKvGroup};

  cudaGraphExec_t dense_exec = timer.capture([&](cudaStream_t st) {
    return cuda::dense_decode(*dense_plan, qb, kv, params, out, dense_ws.p, st);
  });
  cudaGraphExec_t a0_exec = timer.capture([&](cudaStream_t st) {
    return cuda::anchor_decode(*a0_plan, qb, kv, params, r0, out, cuda::AnchorRunExtras{}, a0_ws.p, st);
  });
  cudaGraphExec_t a_exec = timer.capture([&](cudaStream_t st) {
    return cuda::anchor_decode(*a_plan, qb, kv, params, r1, out, cuda::AnchorRunExtras{}, a_ws.p, st);
  });
  cudaGraphExec_t r_exec = timer.capture([&](cudaStream_t st) {
    return cuda::sparse_decode(*r_plan, qb, kv, params, r1, map_d.as<int32_t>(), out, r_ws.p, st);
  });
  // Fills r1 before the reuse layer reads it, and the pooled scores the stand-alone Top-k reads (the
  // fused pooling writes them only when asked).
  cuda::AnchorRunExtras with_scores;
  with_scores.write_pooled_scores = true;
  BENCH_OK(cuda::anchor_decode(*a_plan, qb, kv, params, r1, out, with_scores, a_ws.p, timer.stream));
  BENCH_CHECK(cudaStreamSynchronize(timer.stream));
  // Breakdown and split experiments: the Top-k alone (counting its own first digit) over the
  // anchor's pooled scores, and dense / reuse with 2x and 4x the planned splits.
  Device rows2(rows_elems * 4), lens2(static_cast<size_t>(batch) * g * 4), flags(16);
  BENCH_CHECK(cudaMemset(flags.p, 0, 16));
  auto topk_scratch_bytes = cuda::radix_topk_scratch_bytes(batch, g, len);
  BENCH_OK(topk_scratch_bytes.status());
  Device topk_scratch(*topk_scratch_bytes);
  BENCH_CHECK(cudaMemset(topk_scratch.p, 0, *topk_scratch_bytes));
  DecodeIndexRows r2{rows2.as<int32_t>(), lens2.as<int32_t>(), batch, g, k_max, IndexGranularity::kPerKvGroup};
  cudaGraphExec_t topk_exec = timer.capture([&](cudaStream_t st) {
    return cuda::radix_topk_decode(cuda::anchor_pooled_scores(*a_plan, a_ws.p), a_plan->logits_stride, kv.kv_lens,
                                   batch, len, a_opts.budget, nullptr, r2, topk_scratch.p, flags.as<uint32_t>(), st,
                                   opt.topk, opt.topk_cluster);
  });
  struct Variant {
    std::string name;
    int32_t splits;
    cudaGraphExec_t exec;
  };
  std::vector<Variant> variants;
  std::vector<std::unique_ptr<Device>> variant_ws;
  // Split experiments: the planned splits times num / den, within [1, 256].
  struct SplitScale {
    const char* label;
    int32_t num, den;
  };
  for (const SplitScale scale : {SplitScale{"0.5", 1, 2}, SplitScale{"2", 2, 1}, SplitScale{"4", 4, 1}}) {
    const auto scaled_splits = [&](int32_t planned) { return std::clamp(planned * scale.num / scale.den, 1, 256); };
    cuda::DenseDecodePlan dense_v = *dense_plan;
    dense_v.pass.num_splits = scaled_splits(dense_plan->pass.num_splits);
    dense_v.workspace = cuda::detail::layout_workspace(s, dense_v.pass.num_splits, 0, 0);
    variant_ws.push_back(std::make_unique<Device>(dense_v.workspace.total_bytes));
    void* dws = variant_ws.back()->p;
    BENCH_OK(cuda::initialize_workspace(dense_v.workspace, dws, timer.stream));
    variants.push_back({std::string("dense_s") + scale.label + "x", dense_v.pass.num_splits, timer.capture([&, dense_v, dws](cudaStream_t st) {
      return cuda::dense_decode(dense_v, qb, kv, params, out, dws, st);
    })});
    cuda::SparseDecodePlan reuse_v = *r_plan;
    reuse_v.pass.num_splits = scaled_splits(r_plan->pass.num_splits);
    reuse_v.workspace = cuda::detail::layout_workspace(s, reuse_v.pass.num_splits, 0, 0);
    variant_ws.push_back(std::make_unique<Device>(reuse_v.workspace.total_bytes));
    void* rws = variant_ws.back()->p;
    BENCH_OK(cuda::initialize_workspace(reuse_v.workspace, rws, timer.stream));
    variants.push_back({std::string("reuse_s") + scale.label + "x", reuse_v.pass.num_splits, timer.capture([&, reuse_v, rws](cudaStream_t st) {
      return cuda::sparse_decode(reuse_v, qb, kv, params, r1, map_d.as<int32_t>(), out, rws, st);
    })});
  }

  const double k_rows = static_cast<double>(budget_k(len, a_opts.budget));
  const double row_bytes = static_cast<double>(d) * 2;  // one K or V row of one KV head
  const double sparse_bytes = 2.0 * batch * g * k_rows * row_bytes + batch * g * k_rows * 4;
  const double k_bytes = kv_bytes / 2;
  const double scores_bytes = 2.0 * logits_bytes + static_cast<double>(batch) * g * len * 4 * 2;
  struct Op {
    const char* name;
    cudaGraphExec_t exec;
    double bytes;
    int32_t splits;
  };
  std::vector<Op> ops = {{"dense", dense_exec, kv_bytes, dense_plan->pass.num_splits},
                         {"anchor0", a0_exec, kv_bytes + scores_bytes, a0_plan->scoring.num_splits},
                         {"anchor", a_exec, k_bytes + scores_bytes + sparse_bytes, a_plan->scoring.num_splits},
                         {"reuse", r_exec, sparse_bytes, r_plan->pass.num_splits},
                         {"topk", topk_exec, 4.0 * batch * g * len * 4, 1}};
  for (const Variant& v : variants)
    ops.push_back(Op{v.name.c_str(), v.exec, v.name.rfind("dense", 0) == 0 ? kv_bytes : sparse_bytes, v.splits});
  for (const Op& op : ops) {
    const auto [median, best] = timer.time_graph(op.exec, opt.reps);
    const double gbps = op.bytes / (median * 1e-6) / 1e9;
    results.push_back(Result{shape.name, dtype_name(dtype), layout, op.name, batch, len, median, best, op.bytes, gbps,
                             gbps / roof_gbps, op.splits});
    std::printf("%-6s %-5s B=%-3d L=%-7d %-10s %-8s %10.1f us  %7.0f GB/s  %5.1f %% roof  splits %d\n",
                shape.name.c_str(), dtype_name(dtype), batch, len, layout.c_str(), op.name, median, gbps,
                100.0 * gbps / roof_gbps, op.splits);
    std::fflush(stdout);
  }
  for (auto* plan_ws : {&dense_plan->workspace, &a0_plan->workspace, &a_plan->workspace, &r_plan->workspace}) {
    void* ws = plan_ws == &dense_plan->workspace ? dense_ws.p
               : plan_ws == &a0_plan->workspace  ? a0_ws.p
               : plan_ws == &a_plan->workspace   ? a_ws.p
                                                 : r_ws.p;
    auto errors = cuda::read_device_errors(*plan_ws, ws, timer.stream);
    BENCH_OK(errors.status());
    if (*errors != 0) std::printf("DEVICE ERRORS: %s\n", cuda::describe_device_errors(*errors).c_str());
  }
  uint32_t topk_flags = 0;
  BENCH_CHECK(cudaMemcpy(&topk_flags, flags.p, 4, cudaMemcpyDeviceToHost));
  if (topk_flags != 0) std::printf("DEVICE ERRORS (topk): %s\n", cuda::describe_device_errors(topk_flags).c_str());
  for (const Op& op : ops) BENCH_CHECK(cudaGraphExecDestroy(op.exec));
}

int main_impl(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  cudaDeviceProp prop{};
  BENCH_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  Timer timer;
  timer.flush_mode = opt.flush;
  timer.warmup_ms = opt.warmup_ms;
  std::printf("L2 flush before each timed replay: %s\n", opt.flush.c_str());
  const double roof_before = measure_read_roof(timer, 10);
  std::printf("read roof (4 GiB read-only reduction): %.0f GB/s\n", roof_before);
  const std::vector<Shape> all_shapes = {{"llama", 32, 8, 128}, {"d64", 32, 8, 64}};
  std::vector<Result> results;
  for (const std::string& shape_name : opt.shapes) {
    const Shape* shape = nullptr;
    for (const Shape& s : all_shapes) if (s.name == shape_name) shape = &s;
    if (!shape) { std::fprintf(stderr, "unknown shape %s\n", shape_name.c_str()); return 2; }
    for (const std::string& dt : opt.dtypes) {
      auto dtype = parse_dtype(dt);
      BENCH_OK(dtype.status());
      for (int32_t len : opt.lens)
        for (int32_t batch : opt.batches)
          for (const std::string& layout : opt.layouts)
            run_config(*shape, *dtype, batch, len, layout, opt, roof_before, timer, results);
    }
  }
  const double roof_after = measure_read_roof(timer, 10);
  std::printf("read roof after the run: %.0f GB/s\n", roof_after);
  if (!opt.json.empty()) {
    FILE* f = std::fopen(opt.json.c_str(), "w");
    if (!f) { std::perror(opt.json.c_str()); return 1; }
    std::fprintf(f,
                 "{\"device\": \"%s\", \"flush\": \"%s\", \"warmup_ms\": %.1f, \"pool_fusion\": \"%s\", "
                 "\"read_roof_gbps\": [%.1f, %.1f], \"results\": [\n",
                 prop.name, opt.flush.c_str(), opt.warmup_ms,
                 opt.pool_fusion == cuda::PoolFusion::kFused ? "fused" : "separate", roof_before, roof_after);
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::fprintf(f,
                   "  {\"shape\": \"%s\", \"dtype\": \"%s\", \"layout\": \"%s\", \"op\": \"%s\", \"batch\": %d, "
                   "\"len\": %d, \"median_us\": %.3f, \"min_us\": %.3f, \"bytes\": %.0f, \"gbps\": %.1f, "
                   "\"roof_fraction\": %.4f, \"splits\": %d}%s\n",
                   r.shape.c_str(), r.dtype.c_str(), r.layout.c_str(), r.op.c_str(), r.batch, r.len, r.median_us,
                   r.min_us, r.bytes, r.gbps, r.roof_fraction, r.splits, i + 1 < results.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}

}  // namespace
}  // namespace kascade::bench

int main(int argc, char** argv) { return kascade::bench::main_impl(argc, argv); }
