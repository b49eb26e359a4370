// test_forward_session_pipeline.cpp — the default pipelined decode of runtime::ForwardSession
// (src/runtime/forward_session.h: submit_decode / collect_decode run each call at submit), on a
// stand-in session whose step_sample is a known function of its inputs (token' = 2·token + sequence):
//   - given tokens reach step_sample, fed tokens are the previous submitted call's samples of the same
//     sequence (in any order, a sequence dropped in between), results come back oldest first;
//   - two calls in flight at most; a fed sequence the previous call did not sample, collect with
//     nothing in flight and a null output are refused with messages naming the problem.
// The runtime's pipelined loop itself is tested in test_runtime_generate.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/forward_session.h"
#include "testing/harness.h"

namespace kascade::runtime {
namespace {

class StandInSession final : public ForwardSession {
 public:
  Status step(ForwardMode, const std::vector<CallItem>&, std::vector<float>*) override {
    return unsupported("stand-in: step is not used");
  }
  Status step_sample(ForwardMode mode, const std::vector<CallItem>& items, const SamplerConfig&,
                     std::span<const double> uniforms, std::vector<int32_t>* tokens) override {
    EXPECT_EQ(mode, ForwardMode::kDecode);
    EXPECT_EQ(uniforms.size(), items.size());
    tokens->clear();
    for (const CallItem& item : items) {
      inputs.push_back(item.tokens[0]);
      tokens->push_back(2 * item.tokens[0] + item.sequence);
    }
    return ok_status();
  }
  ForwardTimings timings() const override { return {}; }
  std::vector<int32_t> inputs;  // every token step_sample saw, in order
};

TEST(ForwardSessionPipeline, FedTokensAreThePreviousCallsSamples) {
  StandInSession session;
  const SamplerConfig sampler;
  const std::vector<double> two(2, 0.0), one(1, 0.0);
  KC_ASSERT_OK(session.submit_decode({{0, 5, false}, {1, 7, false}}, sampler, two));  // samples 10, 15
  KC_ASSERT_OK(session.submit_decode({{1, 0, true}, {0, 0, true}}, sampler, two));    // fed 15, 10 -> 31, 20
  std::vector<int32_t> tokens;
  KC_ASSERT_OK(session.collect_decode(&tokens));
  EXPECT_EQ(tokens, (std::vector<int32_t>{10, 15}));
  KC_ASSERT_OK(session.submit_decode({{0, 0, true}}, sampler, one));  // fed 20 (sequence 1 dropped) -> 40
  KC_ASSERT_OK(session.collect_decode(&tokens));
  EXPECT_EQ(tokens, (std::vector<int32_t>{31, 20}));
  KC_ASSERT_OK(session.collect_decode(&tokens));
  EXPECT_EQ(tokens, (std::vector<int32_t>{40}));
  EXPECT_EQ(session.inputs, (std::vector<int32_t>{5, 7, 15, 10, 20}));
}

TEST(ForwardSessionPipeline, RefusesMisuseWithMessages) {
  StandInSession session;
  const SamplerConfig sampler;
  const std::vector<double> one(1, 0.0);
  std::vector<int32_t> tokens;
  Status st = session.collect_decode(&tokens);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("no decode call is in flight"), std::string::npos) << st.message();
  st = session.submit_decode({{3, 0, true}}, sampler, one);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("sequence 3 is fed but the previous decode call sampled no token for it"),
            std::string::npos)
      << st.message();
  KC_ASSERT_OK(session.submit_decode({{0, 1, false}}, sampler, one));
  KC_ASSERT_OK(session.submit_decode({{0, 0, true}}, sampler, one));
  st = session.submit_decode({{0, 0, true}}, sampler, one);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("two decode calls are in flight"), std::string::npos) << st.message();
  st = session.collect_decode(nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("tokens is null"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace kascade::runtime
