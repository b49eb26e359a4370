// tests/cuda/test_gpu_runtime_graph.cpp — the decode step captured in a CUDA graph
// (src/cuda/model/decode_graph.h, cuda_session.h, the backend's graph passes in cuda_backend.h).
//
// Without a GPU (they run wherever the CUDA tests are built):
//   GraphPassTrace.*  the op trace changes with every argument it must pin (pointers, sizes, row
//                     width, head map, pooling) and not otherwise; staged selection sizes must agree
//                     across the ops of a step; which policies are graph-safe; when two steps
//                     share a graph.
// On the GPU (skipped without one):
//   GpuBackendGraphPass.*  inside a pass the backend refuses what is not graph-safe (allocate,
//     copies, error checks, nested passes) with Unsupported, a check pass matches only after a
//     capture, and the backend is eager again after end_graph_pass.
// Also on the GPU, kascade-tiny with its real weights (tests/unit/runtime/
// tiny_model_case.h: two task-suite prompts of ~1.5K and ~1K tokens, chunks of 512):
//   GpuRuntimeGraph.TeacherForcedLogitsEqualEager/{dense,kascade}: teacher-forced decode with
//     continuations of 12 and 7 tokens, so the batch is 2 sequences of different lengths for 7
//     steps, then 1 (a second composition: eager warm-up, capture, replays). The reference is the
//     same run with --no-cuda-graph. Graph and eager launch the same kernels with the same inputs,
//     so they agree exactly unless a kernel is itself run-to-run nondeterministic; the tolerance is
//     therefore 4 x the deviation between two eager runs (measured, printed; 0 when the kernels
//     are deterministic) + 1e-6 of max |logit|. A stale input in a replay (a position, a kv_len, a
//     selection size, a block table) moves logits by O(max |logit|), far above it. Every row's
//     argmax must agree wherever the eager top-2 margin exceeds 1e-3 of max |logit|. The statistics
//     must show the path taken: 2 eager steps (one per composition), >= 2 captures, >= 5 replays,
//     no trace mismatch.
//   GpuRuntimeGraph.GenerationEqualsEager/{dense,kascade}: greedy and sampled (temperature 0.8,
//     top-p 0.9: the uniforms are uploaded before each launch) generation of 16 tokens per
//     sequence, graph vs eager: equal tokens on the prefix where two eager runs agree (all of it
//     when the kernels are deterministic; at least 8 tokens per sequence asserted).
//   GpuRuntimeGraph.PipelinedGenerationEqualsStepByStep/{dense,kascade}: pipelined decode (step t + 1
//     launched before step t's tokens are read, its tokens copied on the device) vs the step-by-step
//     loop, both with graphs: equal tokens where two step-by-step runs agree; with deterministic
//     kernels also equal finish reasons and step / token counts; greedy, a stop token that ends a
//     sequence mid-way, sampled.
//   GpuRuntimeGraph.LayerObserverRunsStepByStep/{dense,kascade}: with a layer observer (what calibrate
//     sets) the session cannot pipeline, so generate under the default pipelined_decode runs step by
//     step (GenerateStats::pipelined_decode false) instead of failing, and the observer sees every
//     layer of every call.
//   GpuRuntimeGraph.ProgrammaticLaunchLeavesLogitsUnchanged/{dense,kascade}: with programmatic dependent
//     launch (RuntimeOptions::programmatic_launch), graph and eager, small-m linear layers and cuBLAS,
//     the teacher-forced logits equal those without it (bound as above).
//   GpuRuntimeGraph.BaselinesAndSwitchRunEagerlyWithAReason: streaming (not graph-safe) and
//     --no-cuda-graph decode eagerly, and say why.
// Run all of them: kascade_cuda_tests --gtest_filter='*GraphPass*:*GpuRuntimeGraph*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/backend/cuda_backend.h"
#include "cuda/backend/graph_pass.h"
#include "cuda/model/decode_graph.h"
#include "cuda_test_support.h"
#include "kascade/runtime.h"
#include "unit/runtime/tiny_model_case.h"

namespace kascade::testing {
namespace {

using cuda::DecodeGraphKey;
using cuda::OpTrace;
using cuda::StagedSizes;

// ---- host-side rules (no GPU) ----

struct Views {
  QueryBatch q;
  PagedKv kv;
  AttentionParams params;
  DecodeIndexRows rows;
  AttentionOutput out;
};

Views sample_views() {
  static int32_t ints[64];
  static char memory[1024];
  Views v;
  v.q = QueryBatch{memory, DType::kBF16, 2, 2, 8, 64, ints};
  v.kv = PagedKv{memory + 64, memory + 128, DType::kBF16, 100, 16, 2, 64, ints + 4, 7, ints + 12};
  v.params.scale = 0.125f;
  v.rows = DecodeIndexRows{ints + 20, ints + 40, 2, 2, 160, IndexGranularity::kPerKvGroup};
  v.out = AttentionOutput{memory + 256, DType::kBF16, nullptr};
  return v;
}

OpTrace trace_of(const Views& v, const int32_t* head_map) {
  OpTrace t;
  t.add_op(cuda::TracedOp::kSparseDecode);
  t.add_query(v.q);
  t.add_kv(v.kv);
  t.add_params(v.params);
  t.add_rows(v.rows);
  t.add_pointer(head_map);
  t.add_output(v.out);
  return t;
}

TEST(GraphPassTrace, EqualArgumentsGiveEqualTracesAndEveryPinnedFieldChangesIt) {
  const Views base = sample_views();
  int32_t map[2] = {1, 0};
  const OpTrace reference = trace_of(base, map);
  EXPECT_TRUE(trace_of(sample_views(), map) == reference);
  std::vector<std::pair<const char*, Views>> changed;
  Views v = base;
  v.q.batch = 1;
  changed.push_back({"q.batch", v});
  v = base;
  v.q.cu_q_lens = base.q.cu_q_lens + 1;
  changed.push_back({"q.cu_q_lens", v});
  v = base;
  v.kv.k = static_cast<const char*>(base.kv.k) + 2;
  changed.push_back({"kv.k", v});
  v = base;
  v.kv.kv_lens = base.kv.kv_lens + 1;
  changed.push_back({"kv.kv_lens", v});
  v = base;
  v.kv.max_pages_per_seq = 8;
  changed.push_back({"kv.max_pages_per_seq", v});
  v = base;
  v.params.scale = 0.126f;
  changed.push_back({"params.scale", v});
  v = base;
  v.rows.k_max = 161;
  changed.push_back({"rows.k_max", v});
  v = base;
  v.rows.indices = base.rows.indices + 1;
  changed.push_back({"rows.indices", v});
  v = base;
  v.rows.granularity = IndexGranularity::kPerQueryHead;
  changed.push_back({"rows.granularity", v});
  v = base;
  v.out.o = static_cast<char*>(base.out.o) + 2;
  changed.push_back({"out.o", v});
  for (const auto& [what, views] : changed) EXPECT_FALSE(trace_of(views, map) == reference) << what;
  EXPECT_FALSE(trace_of(base, map + 1) == reference) << "head map pointer";
  EXPECT_FALSE(trace_of(base, nullptr) == reference) << "identity head map";
  OpTrace other_op;
  other_op.add_op(cuda::TracedOp::kAnchorDecode);
  OpTrace sparse_op;
  sparse_op.add_op(cuda::TracedOp::kSparseDecode);
  EXPECT_FALSE(other_op == sparse_op);
  OpTrace pooled_sum, pooled_max;
  pooled_sum.add_pooling(ScorePooling{2, ScoreReduce::kSum});
  pooled_max.add_pooling(ScorePooling{2, ScoreReduce::kMax});
  EXPECT_FALSE(pooled_sum == pooled_max);
}

TEST(GraphPassTrace, StagedSizesMustAgreeWithinAStep) {
  StagedSizes staged;
  EXPECT_FALSE(staged.staged());
  const int32_t k[3] = {128, 154, 301};
  KC_ASSERT_OK(staged.stage(k, 3, "anchor_decode"));
  EXPECT_TRUE(staged.staged());
  EXPECT_EQ(staged.sizes(), (std::vector<int32_t>{128, 154, 301}));
  KC_ASSERT_OK(staged.stage(k, 3, "anchor_decode"));  // the next anchor of the step
  const int32_t other[3] = {128, 155, 301};
  const Status differs = staged.stage(other, 3, "anchor_decode");
  EXPECT_EQ(differs.code(), StatusCode::kUnsupported) << differs.to_string();
  EXPECT_FALSE(staged.stage(k, 2, "anchor_decode").ok()) << "a different batch";
  EXPECT_FALSE(staged.stage(nullptr, 3, "anchor_decode").ok());
  staged.clear();
  KC_ASSERT_OK(staged.stage(other, 3, "anchor_decode"));
  EXPECT_EQ(staged.sizes()[1], 155);
}

TEST(GraphPassTrace, GraphSafePolicies) {
  PolicyConfig config;
  for (const std::string& name : policy_names()) {
    config.name = name;
    const Status safe = cuda::graph_safe_policy(config);
    const bool expected = name == "dense" || name == "kascade" || name == "kascade-noremap" ||
                          name == "kascade-pooled" || name == "kascade-decode";
    EXPECT_EQ(safe.ok(), expected) << name << ": " << safe.to_string();
    if (!expected) {
      EXPECT_EQ(safe.code(), StatusCode::kUnsupported);
      EXPECT_NE(safe.message().find(name), std::string::npos) << safe.message();
    }
  }
  // The row width the graphs key on is the policy's own (planned_decode_row_width, tested with the
  // policies in tests/unit/policy/test_policy.cpp).
}

TEST(GraphPassTrace, StepsShareAGraphOnlyWithTheSameCompositionAndRowWidth) {
  DecodeGraphKey a;
  a.sequences = {0, 1};
  a.logit_slots = {0, 1};
  a.sample = true;
  a.rows_k_max = 154;
  DecodeGraphKey b = a;
  EXPECT_TRUE(a == b);
  b.rows_k_max = 155;
  EXPECT_TRUE(a.same_composition(b));
  EXPECT_FALSE(a == b);
  b = a;
  b.sequences = {1, 0};
  EXPECT_FALSE(a.same_composition(b));
  b = a;
  b.logit_slots = {1};
  EXPECT_FALSE(a.same_composition(b));
  b = a;
  b.sampling.temperature = 0.8f;
  EXPECT_FALSE(a.same_composition(b));
  b = a;
  b.sample = false;
  EXPECT_FALSE(a.same_composition(b));
}

// ---- on the GPU ----

TEST(GpuBackendGraphPass, RefusesWhatIsNotGraphSafeAndComparesTraces) {
  KC_SKIP_WITHOUT_GPU();
  CudaBackendOptions options;
  options.max_batch = 2;
  options.max_seq_len = 256;
  auto backend = CudaBackend::create(options);
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  CudaBackend& b = **backend;
  auto buffer = b.allocate(64);
  ASSERT_TRUE(buffer.ok()) << buffer.status().to_string();
  int32_t host[4] = {1, 2, 3, 4};
  KC_ASSERT_OK(b.begin_graph_pass(cuda::GraphPass::kCheck));
  EXPECT_FALSE(b.begin_graph_pass(cuda::GraphPass::kCapture).ok()) << "nested pass";
  EXPECT_EQ(b.allocate(64).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(b.copy_from_host(buffer->data(), host, sizeof(host)).code(), StatusCode::kUnsupported);
  EXPECT_EQ(b.copy_to_host(host, buffer->data(), sizeof(host)).code(), StatusCode::kUnsupported);
  EXPECT_EQ(b.check_device_errors().code(), StatusCode::kUnsupported);
  EXPECT_FALSE(b.upload_graph_inputs().ok()) << "inside a pass";
  auto same = b.end_graph_pass();
  ASSERT_TRUE(same.ok()) << same.status().to_string();
  EXPECT_FALSE(*same) << "nothing was captured yet";
  // An empty capture pass, then an empty check pass: equal traces.
  KC_ASSERT_OK(b.begin_graph_pass(cuda::GraphPass::kCapture));
  auto kept = b.end_graph_pass();
  ASSERT_TRUE(kept.ok() && *kept);
  KC_ASSERT_OK(b.begin_graph_pass(cuda::GraphPass::kCheck));
  same = b.end_graph_pass();
  ASSERT_TRUE(same.ok() && *same);
  EXPECT_FALSE(b.end_graph_pass().ok()) << "no pass to end";
  // Eager again: everything works.
  KC_ASSERT_OK(b.copy_from_host(buffer->data(), host, sizeof(host)));
  KC_ASSERT_OK(b.upload_graph_inputs());
  int32_t back[4] = {};
  KC_ASSERT_OK(b.copy_to_host(back, buffer->data(), sizeof(back)));
  EXPECT_EQ(back[3], 4);
  CudaBackendOptions checking = options;
  checking.check_errors_every_op = true;
  auto synchronising = CudaBackend::create(checking);
  ASSERT_TRUE(synchronising.ok());
  EXPECT_EQ((*synchronising)->begin_graph_pass(cuda::GraphPass::kCapture).code(), StatusCode::kUnsupported);
}

// ---- on the GPU: kascade-tiny, graph vs eager ----

RuntimeOptions tiny_options(const std::string& policy, bool graph) {
  RuntimeOptions o = policy == "kascade" ? tiny::kascade_options(Device::kCuda) : tiny::options(Device::kCuda);
  o.cuda_graph = graph;
  return o;
}

std::vector<TeacherForcedInput> decode_inputs(const std::vector<std::vector<int32_t>>& prompts) {
  std::vector<TeacherForcedInput> in(2);
  const size_t lengths[2] = {12, 7};  // the batch shrinks from 2 to 1 after 7 steps
  for (size_t s = 0; s < 2; ++s) {
    in[s].prompt = prompts[s];
    // Continue with the prompt's own text (a plausible continuation: clear margins).
    for (size_t i = 0; i < lengths[s]; ++i) in[s].continuation.push_back(prompts[s][100 + 3 * i]);
    in[s].first_logit_position = static_cast<int64_t>(prompts[s].size()) - 1;
  }
  return in;
}

struct TeacherRun {
  std::vector<TeacherForcedOutput> out;
  CudaGraphStats graph;
};

Result<TeacherRun> teacher_run(const RuntimeOptions& o, const std::vector<TeacherForcedInput>& in) {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::create(o));
  TeacherRun run;
  KC_ASSIGN_OR_RETURN(run.out, rt->teacher_forced(in));
  run.graph = rt->last_cuda_graph_stats();
  return run;
}

// Per the whole run: max |a - b| / max |b| over every sequence's rows (NaN on a shape mismatch or
// a non-finite value).
double deviation(const std::vector<TeacherForcedOutput>& a, const std::vector<TeacherForcedOutput>& b) {
  double worst = 0, scale = 0;
  if (a.size() != b.size()) return std::nan("");
  for (size_t s = 0; s < a.size(); ++s) {
    if (a[s].logits.size() != b[s].logits.size()) return std::nan("");
    scale = std::max(scale, tiny::max_abs(b[s].logits));
    for (size_t i = 0; i < a[s].logits.size(); ++i) {
      if (!std::isfinite(a[s].logits[i])) return std::nan("");
      worst = std::max(worst, std::fabs(static_cast<double>(a[s].logits[i]) - b[s].logits[i]));
    }
  }
  return scale > 0 ? worst / scale : std::nan("");
}

// The eager run of `policy` on `in` and its run-to-run deviation (a second eager run against it):
// the reference and the noise floor of the comparisons below.
struct EagerReference {
  TeacherRun run;
  double noise = 0;
};

Result<EagerReference> eager_reference(const std::string& policy, const std::vector<TeacherForcedInput>& in) {
  EagerReference ref;
  KC_ASSIGN_OR_RETURN(ref.run, teacher_run(tiny_options(policy, false), in));
  KC_ASSIGN_OR_RETURN(const TeacherRun again, teacher_run(tiny_options(policy, false), in));
  ref.noise = deviation(again.out, ref.run.out);
  return ref;
}

class GpuRuntimeGraph : public ::testing::TestWithParam<std::string> {};

TEST_P(GpuRuntimeGraph, TeacherForcedLogitsEqualEager) {
  KC_SKIP_WITHOUT_GPU();
  auto prompts = tiny::prompts();
  ASSERT_TRUE(prompts.ok()) << prompts.status().to_string();
  const std::vector<TeacherForcedInput> in = decode_inputs(*prompts);
  auto reference = eager_reference(GetParam(), in);
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  const TeacherRun* eager = &reference->run;
  auto graph = teacher_run(tiny_options(GetParam(), true), in);
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();

  const CudaGraphStats& g = graph->graph;
  std::printf("[ measured ] %s: %lld eager, %lld captured, %lld replayed, %lld mismatches; %s\n", GetParam().c_str(),
              static_cast<long long>(g.eager_steps), static_cast<long long>(g.captures),
              static_cast<long long>(g.replays), static_cast<long long>(g.trace_mismatches), g.eager_reason.c_str());
  EXPECT_TRUE(g.enabled) << g.eager_reason;
  EXPECT_EQ(g.eager_steps, 2) << "one warm-up step per batch composition (2 sequences, then 1)";
  EXPECT_GE(g.captures, 2);
  EXPECT_GE(g.replays, 5);
  EXPECT_EQ(g.trace_mismatches, 0);
  EXPECT_EQ(g.eager_steps + g.captures + g.replays, 12) << "12 decode calls";
  EXPECT_FALSE(eager->graph.enabled);
  EXPECT_EQ(eager->graph.eager_steps, 12);

  const double noise = reference->noise;
  const double got = deviation(graph->out, eager->out);
  const double tolerance = 4 * noise + 1e-6;
  std::printf("[ measured ] %s: max |dlogit| / max |logit|: graph vs eager %.3g, eager vs eager %.3g (bound %.3g)\n",
              GetParam().c_str(), got, noise, tolerance);
  ASSERT_TRUE(std::isfinite(noise));
  EXPECT_LE(got, tolerance) << "NaN: non-finite logits or a shape mismatch";
  for (size_t s = 0; s < in.size(); ++s) {
    const auto& want = eager->out[s];
    const auto& have = graph->out[s];
    ASSERT_EQ(have.rows, want.rows);
    ASSERT_EQ(want.rows, static_cast<int64_t>(in[s].continuation.size()) + 1);
    const int64_t v = static_cast<int64_t>(want.logits.size()) / want.rows;
    const double scale = tiny::max_abs(want.logits);
    for (int64_t r = 0; r < want.rows; ++r) {
      const tiny::RowTop2 w = tiny::top2(want.logits.data() + r * v, v);
      if (w.margin <= 1e-3 * scale) continue;
      EXPECT_EQ(tiny::top2(have.logits.data() + r * v, v).best, w.best) << "sequence " << s << " row " << r;
    }
  }
}

struct GenerationRun {
  std::vector<std::vector<int32_t>> tokens;
  CudaGraphStats graph;
};

Result<GenerationRun> generation_run(const RuntimeOptions& o, const std::vector<std::vector<int32_t>>& prompts,
                                     const SamplerConfig& sampler) {
  KC_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::create(o));
  GenerateOptions g;
  g.max_new_tokens = 16;
  g.stop_at_eos = false;
  g.sampler = sampler;
  KC_ASSIGN_OR_RETURN(const GenerateResult result, rt->generate(prompts, g));
  GenerationRun run;
  for (const auto& s : result.sequences) run.tokens.push_back(s.tokens);
  run.graph = result.stats.cuda_graph;
  return run;
}

TEST_P(GpuRuntimeGraph, GenerationEqualsEager) {
  KC_SKIP_WITHOUT_GPU();
  auto prompts = tiny::prompts();
  ASSERT_TRUE(prompts.ok()) << prompts.status().to_string();
  SamplerConfig greedy;
  SamplerConfig sampled;
  sampled.temperature = 0.8f;
  sampled.top_p = 0.9f;
  sampled.seed = 5;
  for (const SamplerConfig& sampler : {greedy, sampled}) {
    SCOPED_TRACE(sampler.temperature > 0 ? "sampled" : "greedy");
    auto eager = generation_run(tiny_options(GetParam(), false), *prompts, sampler);
    ASSERT_TRUE(eager.ok()) << eager.status().to_string();
    auto eager_again = generation_run(tiny_options(GetParam(), false), *prompts, sampler);
    ASSERT_TRUE(eager_again.ok()) << eager_again.status().to_string();
    auto graph = generation_run(tiny_options(GetParam(), true), *prompts, sampler);
    ASSERT_TRUE(graph.ok()) << graph.status().to_string();
    EXPECT_TRUE(graph->graph.enabled) << graph->graph.eager_reason;
    EXPECT_GE(graph->graph.replays, 10) << "15 decode steps: 1 eager, >= 1 capture, the rest replays";
    EXPECT_EQ(graph->graph.trace_mismatches, 0);
    for (size_t s = 0; s < prompts->size(); ++s) {
      const auto& a = eager->tokens[s];
      const auto& b = eager_again->tokens[s];
      size_t agree = 0;
      while (agree < a.size() && agree < b.size() && a[agree] == b[agree]) ++agree;
      std::printf("[ measured ] %s, sequence %zu: eager runs agree on %zu of %zu tokens\n", GetParam().c_str(), s, agree,
                  a.size());
      EXPECT_GE(agree, 8u) << "too few tokens to compare: eager runs diverge early";
      ASSERT_GE(graph->tokens[s].size(), agree);
      for (size_t i = 0; i < agree; ++i) EXPECT_EQ(graph->tokens[s][i], a[i]) << "sequence " << s << " token " << i;
    }
  }
}

// Pipelined decode (submit_decode / collect_decode: step t + 1 launched, its tokens copied on the
// device from step t's samples, before step t's tokens are read) against the step-by-step loop, both
// through CUDA graphs: the same tokens and finish reasons where two step-by-step runs agree, with a
// stop token that ends one sequence mid-way (its row in the step already launched is dropped).
TEST_P(GpuRuntimeGraph, PipelinedGenerationEqualsStepByStep) {
  KC_SKIP_WITHOUT_GPU();
  auto prompts = tiny::prompts();
  ASSERT_TRUE(prompts.ok()) << prompts.status().to_string();
  RuntimeOptions plain_options = tiny_options(GetParam(), true);
  plain_options.pipelined_decode = false;
  RuntimeOptions piped_options = plain_options;
  piped_options.pipelined_decode = true;
  auto plain_rt = Runtime::create(plain_options);
  auto piped_rt = Runtime::create(piped_options);
  ASSERT_TRUE(plain_rt.ok()) << plain_rt.status().to_string();
  ASSERT_TRUE(piped_rt.ok()) << piped_rt.status().to_string();
  GenerateOptions g;
  g.max_new_tokens = 16;
  g.stop_at_eos = false;
  auto free_run = (*plain_rt)->generate(*prompts, g);
  ASSERT_TRUE(free_run.ok()) << free_run.status().to_string();
  GenerateOptions stopping = g;
  stopping.stop_tokens = {free_run->sequences[1].tokens[5]};
  GenerateOptions sampled = g;
  sampled.sampler.temperature = 0.8f;
  sampled.sampler.top_p = 0.9f;
  sampled.sampler.seed = 5;
  for (const GenerateOptions& options : {g, stopping, sampled}) {
    SCOPED_TRACE(std::to_string(options.stop_tokens.size()) + " stop tokens, temperature " +
                 std::to_string(options.sampler.temperature));
    auto a = (*plain_rt)->generate(*prompts, options);
    auto a_again = (*plain_rt)->generate(*prompts, options);
    auto b = (*piped_rt)->generate(*prompts, options);
    ASSERT_TRUE(a.ok() && a_again.ok()) << a.status().to_string() << a_again.status().to_string();
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_TRUE(b->stats.cuda_graph.enabled) << b->stats.cuda_graph.eager_reason;
    EXPECT_EQ(b->stats.cuda_graph.trace_mismatches, 0);
    EXPECT_FALSE(a->stats.pipelined_decode);
    EXPECT_TRUE(b->stats.pipelined_decode);
    bool all_agree = true;
    for (size_t s = 0; s < prompts->size(); ++s) {
      const auto& want = a->sequences[s].tokens;
      const auto& again = a_again->sequences[s].tokens;
      size_t agree = 0;
      while (agree < want.size() && agree < again.size() && want[agree] == again[agree]) ++agree;
      const bool whole = agree == want.size() && want.size() == again.size();  // e.g. ended by the stop token
      EXPECT_TRUE(whole || agree >= 5u) << "too few tokens to compare: step-by-step runs diverge early (" << agree
                                        << " of " << want.size() << ")";
      all_agree = all_agree && whole;
      ASSERT_GE(b->sequences[s].tokens.size(), std::min(agree, want.size()));
      for (size_t i = 0; i < agree; ++i) EXPECT_EQ(b->sequences[s].tokens[i], want[i]) << "sequence " << s << " token " << i;
    }
    if (all_agree) {  // deterministic kernels: everything the caller sees must be equal
      for (size_t s = 0; s < prompts->size(); ++s) {
        EXPECT_EQ(b->sequences[s].tokens, a->sequences[s].tokens) << "sequence " << s;
        EXPECT_EQ(b->sequences[s].finish, a->sequences[s].finish) << "sequence " << s;
      }
      EXPECT_EQ(b->stats.decode_steps, a->stats.decode_steps);
      EXPECT_EQ(b->stats.decode_tokens, a->stats.decode_tokens);
    }
  }
}

TEST_P(GpuRuntimeGraph, LayerObserverRunsStepByStep) {
  KC_SKIP_WITHOUT_GPU();
  auto prompts = tiny::prompts();
  ASSERT_TRUE(prompts.ok()) << prompts.status().to_string();
  RuntimeOptions options = tiny_options(GetParam(), true);
  ASSERT_TRUE(options.pipelined_decode) << "the default this test is about";
  auto rt = Runtime::create(options);
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  const int32_t layers = (*rt)->config().num_hidden_layers;
  std::vector<int64_t> calls_per_layer(static_cast<size_t>(layers), 0);
  (*rt)->set_layer_observer([&](int32_t layer, const float*, const float*, int64_t) -> Status {
    if (layer < 0 || layer >= layers) return invalid_argument("observer: layer ", layer, " out of range");
    ++calls_per_layer[static_cast<size_t>(layer)];
    return ok_status();
  });
  GenerateOptions g;
  g.max_new_tokens = 4;
  g.stop_at_eos = false;
  auto run = (*rt)->generate({(*prompts)[1]}, g);
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  EXPECT_FALSE(run->stats.pipelined_decode);
  EXPECT_EQ(run->sequences[0].tokens.size(), 4u);
  EXPECT_EQ(run->stats.decode_steps, 3) << "4 tokens: the first from the prefill, 3 decode steps";
  for (int32_t l = 0; l < layers; ++l)
    EXPECT_EQ(calls_per_layer[static_cast<size_t>(l)], calls_per_layer[0]) << "layer " << l;
  EXPECT_GE(calls_per_layer[0], 1 + run->stats.decode_steps) << "every prefill chunk and decode step observed";
}

// Programmatic dependent launch (RuntimeOptions::programmatic_launch) lets each of the forward pass's
// own kernels start while its predecessor finishes; every such kernel waits for it before touching
// anything it may write, so the results must not move: the same teacher-forced logits as without it,
// captured (graph) and eager, with the small-m linear layers (whose weights are prefetched before the
// wait) and with cuBLAS. Bound as above: 4 x the eager-vs-eager deviation + 1e-6 of max |logit|.
TEST_P(GpuRuntimeGraph, ProgrammaticLaunchLeavesLogitsUnchanged) {
  KC_SKIP_WITHOUT_GPU();
  KC_SKIP_BELOW_SM90("programmatic dependent launch");
  auto prompts = tiny::prompts();
  ASSERT_TRUE(prompts.ok()) << prompts.status().to_string();
  const std::vector<TeacherForcedInput> in = decode_inputs(*prompts);
  auto reference = eager_reference(GetParam(), in);
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  const double noise = reference->noise;
  ASSERT_TRUE(std::isfinite(noise));
  for (const bool graph : {true, false}) {
    for (const bool small_m : {true, false}) {
      RuntimeOptions o = tiny_options(GetParam(), graph);
      o.small_m_linear = small_m;
      RuntimeOptions plain = o;
      o.programmatic_launch = true;
      auto with = teacher_run(o, in);
      ASSERT_TRUE(with.ok()) << with.status().to_string();
      auto without = teacher_run(plain, in);
      ASSERT_TRUE(without.ok()) << without.status().to_string();
      const double got = deviation(with->out, without->out);
      std::printf("[ measured ] %s, %s, %s: max |dlogit| / max |logit| with vs without PDL %.3g (eager noise %.3g)\n",
                  GetParam().c_str(), graph ? "graph" : "eager", small_m ? "small-m linear" : "cuBLAS", got, noise);
      EXPECT_LE(got, 4 * noise + 1e-6) << (graph ? "graph" : "eager") << (small_m ? ", small-m" : ", cuBLAS");
      EXPECT_EQ(with->graph.enabled, graph) << with->graph.eager_reason;
      EXPECT_EQ(with->graph.trace_mismatches, 0);
      if (graph) {
        EXPECT_GE(with->graph.replays, 5);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, GpuRuntimeGraph, ::testing::Values("dense", "kascade"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(GpuRuntimeGraphEager, BaselinesAndSwitchRunEagerlyWithAReason) {
  KC_SKIP_WITHOUT_GPU();
  auto prompts = tiny::prompts();
  ASSERT_TRUE(prompts.ok()) << prompts.status().to_string();
  RuntimeOptions streaming = tiny_options("dense", true);
  streaming.attention.policy = "streaming";
  auto run = generation_run(streaming, *prompts, SamplerConfig{});
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  EXPECT_FALSE(run->graph.enabled);
  EXPECT_EQ(run->graph.captures + run->graph.replays, 0);
  EXPECT_EQ(run->graph.eager_steps, 15);
  EXPECT_NE(run->graph.eager_reason.find("streaming"), std::string::npos) << run->graph.eager_reason;
  auto off = generation_run(tiny_options("kascade", false), *prompts, SamplerConfig{});
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_FALSE(off->graph.enabled);
  EXPECT_NE(off->graph.eager_reason.find("--no-cuda-graph"), std::string::npos) << off->graph.eager_reason;
}

}  // namespace
}  // namespace kascade::testing
