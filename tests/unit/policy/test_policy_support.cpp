// test_policy_support.cpp — make_policy's backend check, per forward mode (src/policy/index_policy.h):
//   - policy_backend_ops: the ops every policy calls in prefill and in decode, against a table
//     written by hand from DESIGN.md §2.4 (and the one-layer oracle, whose prefill selects nothing);
//   - against a backend that refuses exactly one op (supports() and the op itself; every call to it
//     is counted), for every op and every policy: a policy that needs the op in both modes is
//     refused at creation naming both; otherwise it is made, begin_forward of a mode that needs the
//     op is refused naming the policy, op, backend and mode (and attention() after it too), the
//     refused op is never called, and every other mode runs and gives exactly the outputs of the
//     same policy over the plain CPU backend (no silent fallback to other ops).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kascade/policy.h"
#include "policy/cpu_backend.h"
#include "policy/index_policy.h"
#include "policy_fixture.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

constexpr BackendOp kAllOps[] = {BackendOp::kDense,          BackendOp::kSelectDecode,
                                 BackendOp::kSelectPrefill,  BackendOp::kSparseDecode,
                                 BackendOp::kSparsePrefill,  BackendOp::kSelectPrefillOracle,
                                 BackendOp::kSelectQuestDecode, BackendOp::kSelectLessIsMoreDecode};

const char* const kPolicies[] = {"dense",     "kascade", "kascade-noremap", "kascade-pooled", "kascade-decode",
                                 "oracle",    "streaming", "quest",         "omnikv",         "lessismore"};

using OpSet = std::set<BackendOp>;

// DESIGN.md §2.4 for 6 layers (anchors {0, 3}; omnikv filters {0, 2, 3}, layer 5 reuses;
// lessismore selections {0, 2}, the others reuse): what each policy runs in prefill and decode.
struct ModeOps {
  OpSet prefill, decode;
};
const std::map<std::string, ModeOps>& expected_ops() {
  using B = BackendOp;
  const OpSet kascade_prefill = {B::kDense, B::kSelectPrefill, B::kSparsePrefill};
  const OpSet kascade_decode = {B::kDense, B::kSelectDecode, B::kSparseDecode};
  static const std::map<std::string, ModeOps> table = {
      {"dense", {{B::kDense}, {B::kDense}}},
      {"kascade", {kascade_prefill, kascade_decode}},
      {"kascade-noremap", {kascade_prefill, kascade_decode}},
      {"kascade-pooled", {kascade_prefill, kascade_decode}},
      {"kascade-decode", {{B::kDense}, kascade_decode}},  // dense prefill
      // Oracle: layer 0 dense, the others select their own rows and attend them.
      {"oracle", {{B::kDense, B::kSelectPrefillOracle, B::kSparsePrefill}, kascade_decode}},
      // Streaming: every layer attends the rows made at begin_forward; no dense layer.
      {"streaming", {{B::kSparsePrefill}, {B::kSparseDecode}}},
      {"quest", {{B::kDense}, {B::kDense, B::kSelectQuestDecode, B::kSparseDecode}}},
      {"omnikv", {{B::kDense}, kascade_decode}},
      {"lessismore", {{B::kDense}, {B::kDense, B::kSelectLessIsMoreDecode, B::kSparseDecode}}},
  };
  return table;
}

constexpr int32_t kLayers = 6;

PolicyConfig config_named(const Problem& problem, const std::string& name, int32_t num_layers = kLayers) {
  PolicyConfig config = config_for(problem, name);
  config.num_layers = num_layers;
  if (name.rfind("kascade", 0) == 0) {
    auto schedule = identity_schedule({0, 3}, num_layers, problem.shape().num_kv_heads);
    EXPECT_TRUE(schedule.ok()) << schedule.status().to_string();
    config.schedule = *schedule;
  }
  return config;
}

ProblemShape problem_shape() {
  ProblemShape shape;
  shape.num_layers = kLayers;
  shape.num_heads = 8;
  shape.num_kv_heads = 2;
  shape.head_dim = 32;
  return shape;
}

// The CPU backend, except that `refused` is refused by supports() and by the op itself; calls to
// the refused op are counted.
class RefusingBackend final : public AttentionBackend {
 public:
  explicit RefusingBackend(BackendOp refused)
      : refused_(refused), name_(std::string("refuses-") + backend_op_name(refused)) {}
  const char* name() const override { return name_.c_str(); }
  int refused_calls() const { return refused_calls_; }

  Status supports(BackendOp op, const AttentionShape& shape) const override {
    if (op == refused_) return unsupported("this test backend does not run ", backend_op_name(op));
    return cpu_.supports(op, shape);
  }
  Result<BackendBuffer> allocate(size_t bytes) override { return cpu_.allocate(bytes); }
  Status copy_from_host(void* d, const void* s, size_t n) override { return cpu_.copy_from_host(d, s, n); }
  Status copy_to_host(void* d, const void* s, size_t n) override { return cpu_.copy_to_host(d, s, n); }
  Status dense(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p, const AttentionOutput& o) override {
    if (refuse(BackendOp::kDense)) return refusal();
    return cpu_.dense(q, kv, p, o);
  }
  Status sparse_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p, const DecodeIndexRows& r,
                       const int32_t* m, const AttentionOutput& o) override {
    if (refuse(BackendOp::kSparseDecode)) return refusal();
    return cpu_.sparse_decode(q, kv, p, r, m, o);
  }
  Status sparse_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p, const PrefillIndexRows& r,
                        const int32_t* m, const AttentionOutput& o) override {
    if (refuse(BackendOp::kSparsePrefill)) return refusal();
    return cpu_.sparse_prefill(q, kv, p, r, m, o);
  }
  Status select_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p, const ScorePooling& s,
                       const int32_t* k, const DecodeIndexRows& r) override {
    if (refuse(BackendOp::kSelectDecode)) return refusal();
    return cpu_.select_decode(q, kv, p, s, k, r);
  }
  Status select_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p, const ScorePooling& s,
                        const PrefillIndexRows& r) override {
    if (refuse(BackendOp::kSelectPrefill)) return refusal();
    return cpu_.select_prefill(q, kv, p, s, r);
  }
  Status select_prefill_oracle(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p,
                               const PrefillIndexRows& r) override {
    if (refuse(BackendOp::kSelectPrefillOracle)) return refusal();
    return cpu_.select_prefill_oracle(q, kv, p, r);
  }
  Status select_quest_decode(const QueryBatch& q, const PagedKv& kv, int32_t page, const int32_t* k,
                             const DecodeIndexRows& r) override {
    if (refuse(BackendOp::kSelectQuestDecode)) return refusal();
    return cpu_.select_quest_decode(q, kv, page, k, r);
  }
  Status select_lessismore_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p, const int32_t* k,
                                  int32_t sinks, const DecodeIndexRows& r) override {
    if (refuse(BackendOp::kSelectLessIsMoreDecode)) return refusal();
    return cpu_.select_lessismore_decode(q, kv, p, k, sinks, r);
  }

 private:
  bool refuse(BackendOp op) {
    if (op != refused_) return false;
    ++refused_calls_;
    return true;
  }
  Status refusal() const { return unsupported(name_, ": called anyway"); }

  BackendOp refused_;
  std::string name_;
  int refused_calls_ = 0;
  CpuBackend cpu_;
};

::testing::AssertionResult names(const Status& status, const std::string& needle) {
  if (status.ok()) return ::testing::AssertionFailure() << "accepted; expected a refusal naming '" << needle << "'";
  if (status.code() != StatusCode::kUnsupported) return ::testing::AssertionFailure() << status.to_string();
  if (status.message().find(needle) == std::string::npos)
    return ::testing::AssertionFailure() << "'" << status.message() << "' does not name '" << needle << "'";
  return ::testing::AssertionSuccess();
}

std::string needs(const std::string& policy, BackendOp op, const char* mode) {
  return "policy '" + policy + "' needs " + backend_op_name(op) + " on the refuses-" + backend_op_name(op) +
         " backend for " + mode;
}

TEST(PolicyBackendOps, EveryPolicyCallsTheOpsOfDesign) {
  std::mt19937_64 rng = rng_for_test();
  const Problem problem(rng, problem_shape(), {8});
  for (const char* name : kPolicies) {
    SCOPED_TRACE(name);
    const ModeOps& want = expected_ops().at(name);
    auto prefill = policy::policy_backend_ops(config_named(problem, name), ForwardMode::kPrefill);
    auto decode = policy::policy_backend_ops(config_named(problem, name), ForwardMode::kDecode);
    ASSERT_TRUE(prefill.ok() && decode.ok());
    EXPECT_EQ(OpSet(prefill->begin(), prefill->end()), want.prefill);
    EXPECT_EQ(OpSet(decode->begin(), decode->end()), want.decode);
    EXPECT_EQ(prefill->size(), want.prefill.size()) << "an op listed twice";
    EXPECT_EQ(decode->size(), want.decode.size()) << "an op listed twice";
  }
  // A one-layer oracle is layer 0 only (dense): its prefill needs no oracle selection.
  auto one_layer = policy::policy_backend_ops(config_named(problem, "oracle", 1), ForwardMode::kPrefill);
  ASSERT_TRUE(one_layer.ok());
  EXPECT_EQ(OpSet(one_layer->begin(), one_layer->end()), OpSet{BackendOp::kDense});
  PolicyConfig bad = config_named(problem, "dense");
  bad.name = "no-such-policy";
  EXPECT_FALSE(policy::policy_backend_ops(bad, ForwardMode::kDecode).ok());
}

// Runs every layer of `call` over `policy` (run_policy fails the test on any error).
RunResult run_all(AttentionPolicy& policy, const Problem& problem, const Call& call) {
  RunResult result;
  run_policy(policy, problem, call, /*snapshots=*/false, &result);
  return result;
}

TEST(PolicySupport, RefusedOpRefusesExactlyTheModesThatCallIt) {
  std::mt19937_64 rng = rng_for_test();
  const Problem problem(rng, problem_shape(), {45, 70});
  // Prefill: a tile-aligned first chunk and an unaligned second; decode: the last position.
  const Call prefill = problem.call(ForwardMode::kPrefill, {0, 0}, {32, 64});
  const Call prefill_rest = problem.call(ForwardMode::kPrefill, {32, 64}, {44, 69});
  const Call decode = problem.decode_last();
  const std::vector<const Call*> calls = {&prefill, &prefill_rest, &decode};
  for (const char* name : kPolicies) {
    const PolicyConfig config = config_named(problem, name);
    // The outputs of the policy over the plain CPU backend, per call.
    auto reference = make_policy(config, make_cpu_backend());
    ASSERT_TRUE(reference.ok()) << reference.status().to_string();
    std::vector<RunResult> want;
    for (const Call* call : calls) want.push_back(run_all(**reference, problem, *call));
    for (BackendOp op : kAllOps) {
      SCOPED_TRACE(std::string(name) + " over a backend refusing " + backend_op_name(op));
      const ModeOps& table = expected_ops().at(name);
      const bool in_prefill = table.prefill.count(op) != 0, in_decode = table.decode.count(op) != 0;
      auto backend = std::make_shared<RefusingBackend>(op);
      auto made = make_policy(config, backend);
      if (in_prefill && in_decode) {
        ASSERT_FALSE(made.ok()) << "needs the refused op in both modes; expected a refusal at creation";
        EXPECT_TRUE(names(made.status(), "can run in no forward mode on the refuses-"));
        EXPECT_TRUE(names(made.status(), needs(name, op, "prefill")));
        EXPECT_TRUE(names(made.status(), needs(name, op, "decode")));
        EXPECT_TRUE(names(policy::check_mode_support(config, *backend, ForwardMode::kDecode),
                          needs(name, op, "decode")));
        continue;
      }
      ASSERT_TRUE(made.ok()) << made.status().to_string();
      AttentionPolicy& policy = **made;
      for (size_t c = 0; c < calls.size(); ++c) {
        const Call& call = *calls[c];
        const bool refused = call.mode == ForwardMode::kPrefill ? in_prefill : in_decode;
        const char* mode = forward_mode_name(call.mode);
        SCOPED_TRACE(std::string(mode) + " call " + std::to_string(c));
        EXPECT_EQ(policy::check_mode_support(config, *backend, call.mode).ok(), !refused);
        if (refused) {
          EXPECT_TRUE(names(policy.begin_forward(call.info()), needs(name, op, mode)));
          AttentionParams params;
          params.scale = problem.scale();
          const size_t rows = static_cast<size_t>(call.total_q) * problem.shape().num_heads;
          std::vector<float> o(rows * problem.shape().head_dim), lse(rows);
          const Status after = policy.attention(0, problem.queries(call, 0), problem.kv(call, 0), params,
                                                AttentionOutput{o.data(), DType::kF32, lse.data()});
          EXPECT_EQ(after.code(), StatusCode::kInvalidArgument) << after.to_string();
          EXPECT_NE(after.message().find("without a successful begin_forward"), std::string::npos)
              << after.to_string();
          continue;
        }
        const RunResult got = run_all(policy, problem, call);
        ASSERT_EQ(got.o.size(), static_cast<size_t>(kLayers));
        ASSERT_EQ(want[c].o.size(), static_cast<size_t>(kLayers));
        for (int32_t l = 0; l < kLayers; ++l) {
          EXPECT_EQ(got.o[l], want[c].o[l]) << "layer " << l << ": outputs differ from the plain CPU backend's";
          EXPECT_EQ(got.lse[l], want[c].lse[l]) << "layer " << l;
        }
      }
      EXPECT_EQ(backend->refused_calls(), 0) << "the refused op was called";
    }
  }
}

TEST(PolicySupport, OneLayerOracleNeedsNoOracleSelection) {
  std::mt19937_64 rng = rng_for_test();
  ProblemShape shape = problem_shape();
  shape.num_layers = 1;
  const Problem problem(rng, shape, {40});
  auto backend = std::make_shared<RefusingBackend>(BackendOp::kSelectPrefillOracle);
  auto oracle = make_policy(config_named(problem, "oracle", 1), backend);
  ASSERT_TRUE(oracle.ok()) << oracle.status().to_string();
  RunResult result;
  EXPECT_TRUE(run_policy(**oracle, problem, problem.prefill_all(), false, &result));
  EXPECT_EQ(backend->refused_calls(), 0);
}

}  // namespace
}  // namespace kascade::testing
