// test_policy_config.cpp — configuration, schedule and misuse (kascade/policy.h):
//   - bad configs and schedules are refused with a message naming the problem;
//   - schedule helpers: anchor(l), identity schedules, relative-depth layer sets;
//   - each policy's per-layer roles against tables written from DESIGN.md §2.4 (including the
//     Llama-depth OmniKV / LessIsMore layouts at N = 32);
//   - misuse at run time (no begin_forward, decode with several queries, a reuse layer before
//     its anchor, mismatched shapes) and a backend that refuses an op are reported, not crashed
//     (refused when the mode that needs the op runs).
#include <gtest/gtest.h>

#include <string>

#include "kascade/policy.h"
#include "policy/cpu_backend.h"
#include "policy_fixture.h"
#include "testing/harness.h"

namespace kascade::testing {
namespace {

PolicyConfig base_config(const std::string& name, int32_t num_layers = 6) {
  PolicyConfig config;
  config.name = name;
  config.num_layers = num_layers;
  config.num_heads = 8;
  config.num_kv_heads = 2;
  config.head_dim = 32;
  return config;
}

::testing::AssertionResult refused_with(const PolicyConfig& config, const std::string& fragment) {
  auto policy = make_policy(config, make_cpu_backend());
  if (policy.ok()) return ::testing::AssertionFailure() << "config accepted";
  const std::string& message = policy.status().message();
  if (message.find(fragment) == std::string::npos) {
    return ::testing::AssertionFailure() << "message '" << message << "' does not mention '" << fragment << "'";
  }
  return ::testing::AssertionSuccess();
}

TEST(PolicyConfig, RefusesUnknownNamesAndBadSizes) {
  EXPECT_TRUE(refused_with(base_config("kascade-turbo"), "unknown attention policy 'kascade-turbo'"));
  EXPECT_TRUE(refused_with(base_config("kascade-turbo"), "kascade-pooled"));  // lists the accepted names
  PolicyConfig c = base_config("dense");
  c.num_layers = 0;
  EXPECT_TRUE(refused_with(c, "num_layers is 0"));
  c = base_config("dense");
  c.num_kv_heads = 3;
  EXPECT_TRUE(refused_with(c, "num_heads 8 is not a multiple of num_kv_heads 3"));
  c = base_config("dense");
  c.head_dim = 0;
  EXPECT_TRUE(refused_with(c, "head_dim is 0"));
  c = base_config("streaming");
  c.tile_size = 0;
  EXPECT_TRUE(refused_with(c, "tile_size is 0"));
  c = base_config("quest");
  c.quest_page_size = 0;
  EXPECT_TRUE(refused_with(c, "quest_page_size is 0"));
  c = base_config("streaming");
  c.streaming_sinks = -1;
  EXPECT_TRUE(refused_with(c, "streaming_sinks is -1"));
  c = base_config("oracle");
  c.budget.rho_ppm = 0;
  EXPECT_TRUE(refused_with(c, "policy 'oracle'"));
  EXPECT_FALSE(make_policy(base_config("dense"), nullptr).ok());
  for (const std::string& name : policy_names()) {
    PolicyConfig ok = base_config(name);
    ok.schedule = *identity_schedule({0, 3}, 6, 2);
    EXPECT_TRUE(make_policy(ok, make_cpu_backend()).ok()) << name;
  }
}

TEST(PolicyConfig, KascadeWithoutScheduleSaysHowToMakeOne) {
  for (const std::string name : {"kascade", "kascade-noremap", "kascade-pooled", "kascade-decode"}) {
    EXPECT_TRUE(refused_with(base_config(name),
                             "needs a calibration file (kascade calibrate ...) or --anchors for an identity head map"))
        << name;
  }
}

TEST(PolicyConfig, RefusesInvalidSchedules) {
  PolicyConfig c = base_config("kascade");
  c.schedule = *identity_schedule({0, 2}, 6, 2);
  c.schedule.anchors = {1, 2};
  EXPECT_TRUE(refused_with(c, "layer 0 must be an anchor"));
  c.schedule.anchors = {0, 4, 2};
  EXPECT_TRUE(refused_with(c, "strictly ascending"));
  c.schedule.anchors = {0, 6};
  EXPECT_TRUE(refused_with(c, "anchor 6 is outside the model's layers 0..5"));
  c.schedule.anchors = {0, 2};
  c.schedule.head_map.pop_back();
  EXPECT_TRUE(refused_with(c, "head map has 11 entries; expected num_layers x num_kv_heads = 6 x 2 = 12"));
  c.schedule = *identity_schedule({0, 2}, 6, 2);
  c.schedule.head_map[3 * 2 + 1] = 2;
  EXPECT_TRUE(refused_with(c, "head map [layer 3][kv head 1] is 2; expected a KV head in [0, 2)"));
  c.schedule = *identity_schedule({0, 2}, 6, 2);
  c.schedule.head_map[2 * 2 + 0] = 1;
  EXPECT_TRUE(refused_with(c, "anchor layer 2 must map every KV head to itself"));
  // Anchors alone: enough for the variants that ignore head maps, not for kascade.
  c.schedule.anchors = {0, 2};
  c.schedule.head_map.clear();
  EXPECT_TRUE(refused_with(c, "head map has 0 entries"));
  c.name = "kascade-noremap";
  EXPECT_TRUE(make_policy(c, make_cpu_backend()).ok());
  c.name = "kascade-pooled";
  EXPECT_TRUE(make_policy(c, make_cpu_backend()).ok());
}

TEST(Schedule, AnchorOfALayerIsTheLargestAnchorAtOrBelowIt) {
  const Schedule s = *identity_schedule({0, 3, 7}, 10, 4);
  const std::vector<int32_t> expected = {0, 0, 0, 3, 3, 3, 3, 7, 7, 7};
  for (int32_t l = 0; l < 10; ++l) EXPECT_EQ(*schedule_anchor(s, l), expected[static_cast<size_t>(l)]) << l;
  EXPECT_FALSE(schedule_anchor(s, -1).ok());
  EXPECT_FALSE(schedule_anchor(Schedule{}, 2).ok());
  for (int32_t l = 0; l < 10; ++l) {
    for (int32_t g = 0; g < 4; ++g) EXPECT_EQ(s.head_map[static_cast<size_t>(l) * 4 + g], g);
  }
  EXPECT_FALSE(identity_schedule({2, 3}, 10, 4).ok());
  EXPECT_TRUE(validate_schedule(s, 10, 4).ok());
  EXPECT_FALSE(validate_schedule(s, 10, 2).ok());
}

TEST(Schedule, RelativeDepthLayersRoundHalfUp) {
  using V = std::vector<int32_t>;
  EXPECT_EQ(relative_depth_layers(32, {2, 8, 18}), (V{2, 8, 18}));
  EXPECT_EQ(relative_depth_layers(32, {2, 13}), (V{2, 13}));
  EXPECT_EQ(relative_depth_layers(36, {2, 8, 18}), (V{2, 9, 20}));   // 2.25, 9, 20.25
  EXPECT_EQ(relative_depth_layers(6, {2, 8, 18}), (V{0, 2, 3}));     // 0.375, 1.5, 3.375
  EXPECT_EQ(relative_depth_layers(8, {2, 8, 18}), (V{1, 2, 5}));     // 0.5, 2, 4.5
  EXPECT_EQ(relative_depth_layers(2, {2, 8, 18}), (V{0, 1}));        // 0.125, 0.5, 1.125 (duplicates dropped)
}

// Roles as a string, one letter per layer: D dense, S dense-anchor, A anchor, R reuse.
std::string roles(const PolicyConfig& config, ForwardMode mode) {
  auto policy = make_policy(config, make_cpu_backend());
  EXPECT_TRUE(policy.ok()) << policy.status().to_string();
  if (!policy.ok()) return "";
  std::string out;
  for (int32_t l = 0; l < config.num_layers; ++l) {
    switch (*(*policy)->role(l, mode)) {
      case LayerRole::kDense: out += 'D'; break;
      case LayerRole::kDenseAnchor: out += 'S'; break;
      case LayerRole::kAnchor: out += 'A'; break;
      case LayerRole::kReuse: out += 'R'; break;
    }
  }
  return out;
}

TEST(PolicyRoles, EveryPolicyMatchesItsDesignTable) {
  const auto prefill = ForwardMode::kPrefill, decode = ForwardMode::kDecode;
  PolicyConfig k = base_config("kascade");
  k.schedule = *identity_schedule({0, 2, 5}, 6, 2);
  EXPECT_EQ(roles(k, prefill), "SRARRA");
  EXPECT_EQ(roles(k, decode), "SRARRA");
  k.name = "kascade-pooled";
  EXPECT_EQ(roles(k, prefill), "SRARRA");
  k.name = "kascade-decode";
  EXPECT_EQ(roles(k, prefill), "DDDDDD");
  EXPECT_EQ(roles(k, decode), "SRARRA");
  EXPECT_EQ(roles(base_config("dense"), decode), "DDDDDD");
  EXPECT_EQ(roles(base_config("oracle"), prefill), "DAAAAA");
  EXPECT_EQ(roles(base_config("oracle"), decode), "DAAAAA");
  EXPECT_EQ(roles(base_config("streaming"), prefill), "RRRRRR");
  EXPECT_EQ(roles(base_config("streaming"), decode), "RRRRRR");
  EXPECT_EQ(roles(base_config("quest"), prefill), "DDDDDD");
  EXPECT_EQ(roles(base_config("quest"), decode), "DDAAAA");
  EXPECT_EQ(roles(base_config("omnikv"), prefill), "DDDDDD");
  EXPECT_EQ(roles(base_config("lessismore"), prefill), "DDDDDD");
  // Llama-3.1-8B depth: OmniKV filters 2, 8, 18 (each followed by a dense layer), layers 0–1 dense.
  EXPECT_EQ(roles(base_config("omnikv", 32), decode), "DDSDRRRRSDRRRRRRRRSDRRRRRRRRRRRR");
  // LessIsMore selection layers 2 and 13; layers before 2 dense.
  EXPECT_EQ(roles(base_config("lessismore", 32), decode), "DDSRRRRRRRRRRSRRRRRRRRRRRRRRRRRR");
  // Small N: OmniKV filters {0, 2, 3}.
  EXPECT_EQ(roles(base_config("omnikv", 6), decode), "SDSSDR");
  auto policy = make_policy(base_config("dense"), make_cpu_backend());
  ASSERT_TRUE(policy.ok());
  EXPECT_FALSE((*policy)->role(6, decode).ok());
  EXPECT_FALSE((*policy)->role(-1, decode).ok());
}

class PolicyMisuse : public ::testing::Test {
 protected:
  PolicyMisuse() : rng_(rng_for_test()), problem_(rng_, ProblemShape{}, {40, 9}) {}
  std::unique_ptr<AttentionPolicy> kascade() {
    PolicyConfig config = config_for(problem_, "kascade");
    config.schedule = *identity_schedule({0, 2}, 5, 2);
    return std::move(make_policy(config, make_cpu_backend())).value();
  }
  Status layer(AttentionPolicy& policy, const Call& call, int32_t l, int32_t num_heads_override = 0) {
    out_.assign(static_cast<size_t>(call.total_q) * 8 * 32, 0.0f);
    AttentionOutput out;
    out.o = out_.data();
    AttentionParams params;
    params.scale = problem_.scale();
    QueryBatch q = problem_.queries(call, l);
    if (num_heads_override) q.num_heads = num_heads_override;
    return policy.attention(l, q, problem_.kv(call, l), params, out);
  }
  std::mt19937_64 rng_;
  Problem problem_;
  std::vector<float> out_;
};

TEST_F(PolicyMisuse, AttentionBeforeBeginForwardIsRefused) {
  auto policy = kascade();
  const Status s = layer(*policy, problem_.decode_last(), 0);
  EXPECT_NE(s.message().find("without a successful begin_forward"), std::string::npos) << s.to_string();
}

TEST_F(PolicyMisuse, DecodeWithSeveralQueriesPointsToPrefillMode) {
  auto policy = kascade();
  Call call = problem_.prefill_all();
  call.mode = ForwardMode::kDecode;
  const Status s = policy->begin_forward(call.info());
  EXPECT_NE(s.message().find("use prefill mode"), std::string::npos) << s.to_string();
  // The failed begin_forward leaves no call open.
  EXPECT_NE(layer(*policy, call, 0).message().find("begin_forward"), std::string::npos);
}

TEST_F(PolicyMisuse, BadLengthsAndShapesAreRefused) {
  auto policy = kascade();
  Call call = problem_.decode_last();
  ForwardInfo info = call.info();
  info.batch = 0;
  EXPECT_NE(policy->begin_forward(info).message().find("batch is 0"), std::string::npos);
  std::vector<int32_t> kv = {0, 9};
  info = call.info();
  info.kv_lens = kv.data();
  EXPECT_NE(policy->begin_forward(info).message().find("expected 1 <= q_len <= kv_len"), std::string::npos);
  ASSERT_TRUE(policy->begin_forward(call.info()).ok());
  const Status heads = layer(*policy, call, 0, 4);
  EXPECT_NE(heads.message().find("configured for 8"), std::string::npos) << heads.to_string();
  EXPECT_NE(heads.message().find("decode layer 0"), std::string::npos) << heads.to_string();
  EXPECT_FALSE(layer(*policy, call, 5).ok());  // layers 0..4
}

TEST_F(PolicyMisuse, ReuseLayerBeforeItsAnchorIsRefused) {
  auto policy = kascade();
  const Call call = problem_.decode_last();
  ASSERT_TRUE(policy->begin_forward(call.info()).ok());
  const Status s = layer(*policy, call, 1);  // reuses anchor 0, which has not run
  EXPECT_NE(s.message().find("selected by layer 0, which has not run"), std::string::npos) << s.to_string();
  ASSERT_TRUE(layer(*policy, call, 0).ok());
  ASSERT_TRUE(layer(*policy, call, 1).ok());
  // A new call drops the previous call's rows.
  ASSERT_TRUE(policy->begin_forward(call.info()).ok());
  EXPECT_FALSE(layer(*policy, call, 1).ok());
  auto snap = policy->snapshot_indices();
  ASSERT_TRUE(snap.ok());
  EXPECT_FALSE(snap->valid);
}

// A CPU backend that cannot run the prefill oracle (as the CUDA backend).
class NoOracleBackend : public AttentionBackend {
 public:
  const char* name() const override { return "no-oracle"; }
  Status supports(BackendOp op, const AttentionShape& shape) const override {
    if (op == BackendOp::kSelectPrefillOracle) return unsupported("the prefill oracle needs the full score matrix");
    return cpu_.supports(op, shape);
  }
  Result<BackendBuffer> allocate(size_t bytes) override { return cpu_.allocate(bytes); }
  Status copy_from_host(void* d, const void* s, size_t n) override { return cpu_.copy_from_host(d, s, n); }
  Status copy_to_host(void* d, const void* s, size_t n) override { return cpu_.copy_to_host(d, s, n); }
  Status dense(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p, const AttentionOutput& o) override {
    return cpu_.dense(q, kv, p, o);
  }
  Status sparse_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p, const DecodeIndexRows& r,
                       const int32_t* m, const AttentionOutput& o) override {
    return cpu_.sparse_decode(q, kv, p, r, m, o);
  }
  Status sparse_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p, const PrefillIndexRows& r,
                        const int32_t* m, const AttentionOutput& o) override {
    return cpu_.sparse_prefill(q, kv, p, r, m, o);
  }
  Status select_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p, const ScorePooling& s,
                       const int32_t* k, const DecodeIndexRows& r) override {
    return cpu_.select_decode(q, kv, p, s, k, r);
  }
  Status select_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p, const ScorePooling& s,
                        const PrefillIndexRows& r) override {
    return cpu_.select_prefill(q, kv, p, s, r);
  }
  Status select_prefill_oracle(const QueryBatch&, const PagedKv&, const AttentionParams&,
                               const PrefillIndexRows&) override {
    return unsupported("the prefill oracle needs the full score matrix");
  }
  Status select_quest_decode(const QueryBatch& q, const PagedKv& kv, int32_t page, const int32_t* k,
                             const DecodeIndexRows& r) override {
    return cpu_.select_quest_decode(q, kv, page, k, r);
  }
  Status select_lessismore_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& p, const int32_t* k,
                                  int32_t sinks, const DecodeIndexRows& r) override {
    return cpu_.select_lessismore_decode(q, kv, p, k, sinks, r);
  }

 private:
  CpuBackend cpu_;
};

TEST(PolicyBackend, PolicyNeedingAnOpTheBackendLacksIsRefusedWhenThatModeRuns) {
  auto backend = std::make_shared<NoOracleBackend>();
  // The oracle's prefill needs select_prefill_oracle; its decode does not: the policy is made for
  // decode, and its prefill is refused by name (test_policy_support.cpp covers every op and policy).
  auto oracle = make_policy(base_config("oracle"), backend);
  ASSERT_TRUE(oracle.ok()) << oracle.status().to_string();
  std::mt19937_64 rng = rng_for_test();
  ProblemShape shape;
  shape.num_layers = 6;
  shape.head_dim = 32;
  const Problem problem(rng, shape, {40});
  const Status prefill = (*oracle)->begin_forward(problem.prefill_all().info());
  EXPECT_EQ(prefill.code(), StatusCode::kUnsupported);
  EXPECT_NE(prefill.message().find("needs select_prefill_oracle on the no-oracle backend for prefill"),
            std::string::npos)
      << prefill.to_string();
  EXPECT_TRUE((*oracle)->begin_forward(problem.decode_last().info()).ok());
  PolicyConfig k = base_config("kascade");
  k.schedule = *identity_schedule({0, 2}, 6, 2);
  EXPECT_TRUE(make_policy(k, backend).ok());
  EXPECT_TRUE(make_policy(base_config("quest"), backend).ok());
}

}  // namespace
}  // namespace kascade::testing
