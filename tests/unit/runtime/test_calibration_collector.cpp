// test_calibration_collector.cpp — the calibration statistics collected inside the model forward
// (src/runtime/calibration_collector.h over src/calibrate/collector.h) on the tiny Llama checkpoint
// of tests/data/hf/ (random weights: mechanics only):
//   - similarity: a tap policy copies every layer's q, K, V and output as the runtime ran them; the
//     test recomputes every unit's pooled scores in fp64 (test_collector_reference.h), the Top-k_cal
//     mass ratios, the per-prompt min over prefill tiles t >= 1 and decode steps, and the mean over
//     prompts, and compares with what the collector produced;
//   - importance: recomputed from the observed x / attn rows;
//   - unit counts (tiles, decode steps) and the greedy tokens (the dense stats forward generates
//     what the dense runtime generates);
//   - the sparse stats forward: every layer attends its own Top-k_cal (checked as sets against the
//     fp64 scores) plus local keys, outputs against fp64 attention over those keys;
//   - anchors re-derived from a saved file (`--from-stats`) equal those of the full run;
//   - refusals: a chunk that splits tiles, a prompt without any unit;
//   - scripts/plot_calibration.py draws both PNGs from a collected file and refuses an imported one
//     (skipped without python3 + matplotlib).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kascade/calibration.h"
#include "runtime/calibration_collector.h"
#include "testing/harness.h"
#include "unit/calibrate/test_collector_reference.h"

namespace kascade::runtime {
namespace {

using testing::CapturedLayer;

constexpr int32_t kTile = 16;
constexpr int64_t kCal = 8;

std::string llama_dir() { return std::string(KASCADE_TEST_DATA_DIR) + "/hf/llama_tiny"; }

std::unique_ptr<Runtime> make_runtime(int32_t chunk) {
  RuntimeOptions o;
  o.model_path = llama_dir();
  o.chunk_size = chunk;
  o.attention.tile_size = kTile;
  auto rt = Runtime::create(o);
  EXPECT_TRUE(rt.ok()) << rt.status().to_string();
  return rt.ok() ? std::move(rt).value() : nullptr;
}

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 37 + salt * 11 + 3) % 512));
  return p;
}

// Forwards every call to the recording policy and copies what each layer saw and wrote.
class TapPolicy final : public AttentionPolicy {
 public:
  TapPolicy(std::unique_ptr<AttentionPolicy> inner, std::vector<CapturedLayer>* sink)
      : inner_(std::move(inner)), sink_(sink) {}
  const PolicyConfig& config() const override { return inner_->config(); }
  Status begin_forward(const ForwardInfo& info) override {
    mode_ = info.mode;
    return inner_->begin_forward(info);
  }
  Status attention(int32_t layer, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                   const AttentionOutput& out) override {
    KC_RETURN_IF_ERROR(inner_->attention(layer, q, kv, params, out));
    CapturedLayer c = testing::capture_layer(mode_, layer, q, kv, params, out);
    KC_ASSIGN_OR_RETURN(c.rows, inner_->snapshot_indices());
    sink_->push_back(std::move(c));
    return ok_status();
  }
  Result<LayerRole> role(int32_t layer, ForwardMode mode) const override { return inner_->role(layer, mode); }
  const AttendedStatistics& statistics() const override { return inner_->statistics(); }
  void reset_statistics() override { inner_->reset_statistics(); }
  Result<IndexSnapshot> snapshot_indices() const override { return inner_->snapshot_indices(); }
  int64_t planned_decode_row_width() const override { return inner_->planned_decode_row_width(); }

 private:
  std::unique_ptr<AttentionPolicy> inner_;
  std::vector<CapturedLayer>* sink_;
  ForwardMode mode_ = ForwardMode::kPrefill;
};

struct Observation {
  int32_t layer;
  std::vector<float> x, attn;
};

// What one prompt's run saw.
struct PromptCapture {
  std::vector<CapturedLayer> layers;
  std::vector<Observation> observations;
};

struct TappedRun {
  CalibrationRunResult result;
  std::vector<PromptCapture> prompts;
};

Result<TappedRun> run_tapped(Runtime& rt, const std::vector<CalibrationPrompt>& prompts,
                             CalibrationRunOptions options) {
  TappedRun run;
  PromptCapture current;
  const int64_t hidden = rt.config().hidden_size;
  options.taps.wrap_policy = [&](std::unique_ptr<AttentionPolicy> inner) -> std::unique_ptr<AttentionPolicy> {
    return std::make_unique<TapPolicy>(std::move(inner), &current.layers);
  };
  options.taps.observe = [&](int32_t layer, const float* x, const float* attn, int64_t tokens) {
    current.observations.push_back(
        {layer, std::vector<float>(x, x + tokens * hidden), std::vector<float>(attn, attn + tokens * hidden)});
    return ok_status();
  };
  KC_ASSIGN_OR_RETURN(run.result, collect_calibration_stats(rt, prompts, options, [&](const CalibrationProgress&) {
                        run.prompts.push_back(std::move(current));
                        current = PromptCapture{};
                      }));
  return run;
}

// Each prompt's sim (min over its units), recomputed from the captures; include_decode false
// leaves the decode steps out.
std::vector<std::vector<double>> prompt_sims(const TappedRun& run, int32_t N, int32_t G, bool include_decode = true) {
  std::vector<std::vector<double>> sims;
  for (const PromptCapture& p : run.prompts) {
    std::vector<testing::ReferenceUnit> units;
    for (const CapturedLayer& c : p.layers) {
      if (c.mode == ForwardMode::kDecode && !include_decode) continue;
      for (auto& u : testing::reference_units(c, kTile)) units.push_back(std::move(u));
    }
    sims.push_back(testing::prompt_similarity(units, N, G, kCal));
  }
  return sims;
}

std::vector<double> mean_of(const std::vector<std::vector<double>>& sims) {
  std::vector<double> mean(sims[0].size(), 0.0);
  for (const auto& s : sims)
    for (size_t i = 0; i < s.size(); ++i) mean[i] += s[i] / static_cast<double>(sims.size());
  return mean;
}

// The expected statistics, recomputed from the captures.
calib::CalibrationStats expected_stats(const TappedRun& run, int32_t N, int32_t G, int64_t hidden) {
  calib::CalibrationStats s;
  s.num_layers = N;
  s.num_kv_heads = G;
  s.num_prompts = static_cast<int64_t>(run.prompts.size());
  s.similarity = mean_of(prompt_sims(run, N, G));
  s.importance.assign(static_cast<size_t>(N), 0.0);
  for (const PromptCapture& p : run.prompts) {
    std::vector<double> sum(static_cast<size_t>(N), 0.0);
    std::vector<int64_t> tokens(static_cast<size_t>(N), 0);
    for (const Observation& o : p.observations) {
      sum[static_cast<size_t>(o.layer)] += testing::reference_importance_sum(o.x, o.attn, hidden);
      tokens[static_cast<size_t>(o.layer)] += static_cast<int64_t>(o.x.size()) / hidden;
    }
    for (int32_t l = 0; l < N; ++l)
      s.importance[static_cast<size_t>(l)] += sum[static_cast<size_t>(l)] /
                                              static_cast<double>(tokens[static_cast<size_t>(l)]) /
                                              static_cast<double>(run.prompts.size());
  }
  return s;
}

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

void expect_stats_near(const calib::CalibrationStats& got, const calib::CalibrationStats& want) {
  ASSERT_EQ(got.similarity.size(), want.similarity.size());
  ASSERT_EQ(got.importance.size(), want.importance.size());
  EXPECT_EQ(got.num_prompts, want.num_prompts);
  for (size_t i = 0; i < got.similarity.size(); ++i)
    EXPECT_NEAR(got.similarity[i], want.similarity[i], 1e-4) << "sim entry " << i;
  for (size_t l = 0; l < got.importance.size(); ++l)
    EXPECT_NEAR(got.importance[l], want.importance[l], 1e-9 + 1e-9 * std::abs(want.importance[l])) << "w layer " << l;
}

const std::vector<CalibrationPrompt>& two_prompts() {
  static const std::vector<CalibrationPrompt> prompts = {{"a", prompt_of(77, 1)}, {"b", prompt_of(50, 2)}};
  return prompts;
}

CalibrationRunOptions options_for(calib::StatsForward forward, int32_t decode_tokens) {
  CalibrationRunOptions o;
  o.k_cal = kCal;
  o.forward = forward;
  o.decode_tokens = decode_tokens;
  o.stop_at_eos = false;
  return o;
}

TEST(CalibrationCollector, DenseStatisticsEqualAnFp64RecomputationFromTheSameInputs) {
  auto rt = make_runtime(32);  // chunks of 2 tiles: prompt "a" arrives in 3 prefill calls
  ASSERT_NE(rt, nullptr);
  auto run = run_tapped(*rt, two_prompts(), options_for(calib::StatsForward::kDense, 6));
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  ASSERT_EQ(run->prompts.size(), 2u);
  const int32_t N = 4, G = 2;
  const int64_t hidden = rt->config().hidden_size;

  // Units: tiles t >= 1 ((77 - 1) / 16 = 4 and (50 - 1) / 16 = 3), 5 decode steps per prompt.
  EXPECT_EQ(run->result.prefill_units, 7);
  EXPECT_EQ(run->result.decode_units, 10);
  EXPECT_EQ(run->result.prompt_tokens, 127);
  EXPECT_EQ(run->result.generated_tokens, 12);

  const calib::CalibrationStats want = expected_stats(*run, N, G, hidden);
  expect_stats_near(run->result.stats, want);
  // Anchor layers recover their own Top-k exactly.
  for (int32_t l = 0; l < N; ++l)
    for (int32_t g = 0; g < G; ++g) EXPECT_DOUBLE_EQ(run->result.stats.sim(l, l, g, g), 1.0);

  // The recomputation discriminates: leaving the decode steps out, or taking one min over all
  // prompts instead of the mean of per-prompt minima, gives different numbers.
  EXPECT_GT(max_abs_difference(mean_of(prompt_sims(*run, N, G, /*include_decode=*/false)), want.similarity), 1e-3);
  const auto per_prompt = prompt_sims(*run, N, G);
  std::vector<double> global_min = per_prompt[0];
  for (size_t i = 0; i < global_min.size(); ++i) global_min[i] = std::min(per_prompt[0][i], per_prompt[1][i]);
  EXPECT_GT(max_abs_difference(global_min, want.similarity), 1e-3);

  // The dense stats forward is the dense model: same greedy tokens as the dense runtime.
  auto dense = make_runtime(32);
  ASSERT_NE(dense, nullptr);
  GenerateOptions g;
  g.max_new_tokens = 6;
  g.stop_at_eos = false;
  for (size_t p = 0; p < 2; ++p) {
    auto gen = dense->generate({two_prompts()[p].tokens}, g);
    ASSERT_TRUE(gen.ok());
    EXPECT_EQ(run->result.generated[p], gen->sequences[0].tokens) << "prompt " << p;
  }
}

TEST(CalibrationCollector, SparseStatsForwardAttendsItsOwnTopKCalAndLocalKeys) {
  auto rt = make_runtime(48);
  ASSERT_NE(rt, nullptr);
  const std::vector<CalibrationPrompt> prompts = {{"s", prompt_of(70, 3)}};
  auto run = run_tapped(*rt, prompts, options_for(calib::StatsForward::kSparse, 4));
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  const int32_t N = 4, G = 2, H = 4, d = 32;
  expect_stats_near(run->result.stats, expected_stats(*run, N, G, rt->config().hidden_size));
  EXPECT_EQ(rt->policy().role(0, ForwardMode::kPrefill).value(), LayerRole::kAnchor);

  int64_t checked_rows = 0;
  for (const CapturedLayer& c : run->prompts[0].layers) {
    ASSERT_TRUE(c.rows.valid) << "layer " << c.layer;
    const auto units = testing::reference_units(c, kTile);
    // The keys query qi of head h attends, from the policy's rows (checked against fp64 Top-k first).
    std::vector<std::vector<int64_t>> row_keys;  // [unit slot * G + g]
    if (c.mode == ForwardMode::kDecode) {
      ASSERT_EQ(c.rows.k_max, std::min<int64_t>(kCal, c.kv_len));
      for (int32_t g = 0; g < G; ++g) {
        std::vector<int32_t> got(c.rows.indices.begin() + g * c.rows.k_max,
                                 c.rows.indices.begin() + (g + 1) * c.rows.k_max);
        const double* row = units[0].scores.data() + static_cast<size_t>(g) * c.kv_len;
        const auto want64 = testing::reference_topk(row, c.kv_len, c.rows.k_max);
        std::vector<int32_t> want(want64.begin(), want64.end());
        std::vector<float> scores(row, row + c.kv_len);
        EXPECT_TRUE(testing::topk_sets_equivalent(got, want, scores, 1e-5));
        ++checked_rows;
        const std::vector<int64_t> keys(got.begin(), got.end());
        for (int32_t h = g * (H / G); h < (g + 1) * (H / G); ++h) {
          const auto o = testing::reference_attention(c, 0, h, keys);
          for (int32_t e = 0; e < d; ++e) EXPECT_NEAR(c.out[static_cast<size_t>(h) * d + e], o[e], 1e-4);
        }
      }
      continue;
    }
    const int64_t first_tile = c.start() / kTile;
    for (int32_t qi = 0; qi < c.q_len; ++qi) {
      const int64_t pos = c.start() + qi;
      const int64_t t = pos / kTile;
      const int64_t slot = t - first_tile;
      for (int32_t g = 0; g < G; ++g) {
        const size_t r = static_cast<size_t>(slot * G + g);
        std::vector<int32_t> got(c.rows.indices.begin() + c.rows.row_offsets[r],
                                 c.rows.indices.begin() + c.rows.row_offsets[r + 1]);
        ASSERT_EQ(static_cast<int64_t>(got.size()), std::min<int64_t>(kCal, t * kTile));
        if (t >= 1 && pos % kTile == 0) {  // check each row once, at the tile's first query
          const testing::ReferenceUnit* unit = nullptr;
          for (const auto& u : units)
            if (u.id == t) unit = &u;
          ASSERT_NE(unit, nullptr);
          const double* row = unit->scores.data() + static_cast<size_t>(g) * unit->num_candidates;
          const auto want64 = testing::reference_topk(row, unit->num_candidates, static_cast<int64_t>(got.size()));
          std::vector<int32_t> want(want64.begin(), want64.end());
          std::vector<float> scores(row, row + unit->num_candidates);
          EXPECT_TRUE(testing::topk_sets_equivalent(got, want, scores, 1e-5)) << "tile " << t << " group " << g;
          ++checked_rows;
        }
        std::vector<int64_t> keys(got.begin(), got.end());
        for (int64_t j = t * kTile; j <= pos; ++j) keys.push_back(j);
        for (int32_t h = g * (H / G); h < (g + 1) * (H / G); ++h) {
          const auto o = testing::reference_attention(c, qi, h, keys);
          for (int32_t e = 0; e < d; ++e)
            EXPECT_NEAR(c.out[(static_cast<size_t>(qi) * H + h) * d + e], o[e], 1e-4)
                << "layer " << c.layer << " position " << pos << " head " << h;
        }
      }
    }
  }
  // 4 layers x 2 groups x (4 prefill tiles t >= 1 + 3 decode steps).
  EXPECT_EQ(checked_rows, 4 * 2 * (4 + 3));
  // Sparse layers attend fewer keys than the causal range once tiles have more than k_cal candidates.
  const AttendedCount prefill = rt->policy().statistics().total(ForwardMode::kPrefill);
  EXPECT_LT(prefill.attended, prefill.causal);
}

TEST(CalibrationCollector, AnchorsRederivedFromTheSavedFileEqualTheFullRun) {
  auto rt = make_runtime(32);
  ASSERT_NE(rt, nullptr);
  auto run = collect_calibration_stats(*rt, two_prompts(), options_for(calib::StatsForward::kDense, 4));
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  calib::ModelIdentity model{"llama_tiny", llama_dir(), 4, 2, 4, 32};
  calib::CollectionSettings collection;
  collection.tile_size = kTile;
  collection.k_cal = kCal;
  const std::vector<int32_t> counts = {2, 3, 4};
  auto file =
      calib::build_calibration_file(model, calib::DevSetInfo{"two prompts", 4}, collection, run->stats, counts, 0);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const std::string path = testing::test_temp_path("from_stats.json").string();
  ASSERT_TRUE(calib::write_calibration_file(*file, path).ok());
  auto saved = calib::read_calibration_file(path);
  ASSERT_TRUE(saved.ok()) << saved.status().to_string();
  ASSERT_TRUE(saved->stats.has_value());
  EXPECT_EQ(*saved->stats, run->stats);  // the statistics survive the file exactly
  // --from-stats for all counts, and for one count alone.
  auto all = calib::derive_anchor_sets(*saved->stats, counts);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, file->anchor_sets);
  const std::vector<int32_t> three = {3};
  auto one = calib::derive_anchor_sets(*saved->stats, three);
  ASSERT_TRUE(one.ok());
  ASSERT_NE(file->find_anchor_set(3), nullptr);
  EXPECT_EQ((*one)[0], *file->find_anchor_set(3));
  // The chosen sets are optimal: brute force over the same layer scores reaches the same objective.
  auto w = calib::layer_scores(run->stats);
  ASSERT_TRUE(w.ok());
  for (const auto& set : file->anchor_sets) {
    auto brute = calib::select_anchors_brute_force(*w, 4, static_cast<int32_t>(set.anchors.size()));
    ASSERT_TRUE(brute.ok());
    EXPECT_NEAR(*set.objective, brute->objective, 1e-12);
  }
  std::filesystem::remove(path);
}

TEST(CalibrationCollector, RefusesSplitTilesAndPromptsWithoutUnits) {
  auto split = make_runtime(24);  // 24 is not a multiple of the tile size 16
  ASSERT_NE(split, nullptr);
  auto r1 = collect_calibration_stats(*split, two_prompts(), options_for(calib::StatsForward::kDense, 2));
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.status().message().find("multiple of the tile size"), std::string::npos) << r1.status().to_string();

  auto rt = make_runtime(32);
  ASSERT_NE(rt, nullptr);
  // 10 tokens: only tile 0; one generated token is never fed back: no unit at all.
  const std::vector<CalibrationPrompt> short_prompt = {{"tiny prompt", prompt_of(10, 4)}};
  auto r2 = collect_calibration_stats(*rt, short_prompt, options_for(calib::StatsForward::kDense, 1));
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("tiny prompt"), std::string::npos) << r2.status().to_string();
  EXPECT_NE(r2.status().message().find("no usable unit"), std::string::npos) << r2.status().to_string();
  // With decode steps the same prompt has units.
  auto r3 = collect_calibration_stats(*rt, short_prompt, options_for(calib::StatsForward::kDense, 3));
  ASSERT_TRUE(r3.ok()) << r3.status().to_string();
  EXPECT_EQ(r3->prefill_units, 0);
  EXPECT_EQ(r3->decode_units, 2);

  const std::vector<CalibrationPrompt> none;
  EXPECT_FALSE(collect_calibration_stats(*rt, none, options_for(calib::StatsForward::kDense, 1)).ok());
  const std::vector<CalibrationPrompt> empty = {{"empty", {}}};
  EXPECT_FALSE(collect_calibration_stats(*rt, empty, options_for(calib::StatsForward::kDense, 1)).ok());
}

TEST(CalibrationCollector, PlotScriptDrawsSimilarityAndImportance) {
  if (std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 with matplotlib is not available";
  }
  auto rt = make_runtime(32);
  ASSERT_NE(rt, nullptr);
  auto run = collect_calibration_stats(*rt, two_prompts(), options_for(calib::StatsForward::kDense, 2));
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  calib::ModelIdentity model{"llama_tiny", llama_dir(), 4, 2, 4, 32};
  const std::vector<int32_t> counts = {2, 3};
  auto file = calib::build_calibration_file(model, calib::DevSetInfo{"two prompts", 2}, calib::CollectionSettings{},
                                            run->stats, counts, 0);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const auto dir = testing::test_temp_path("calib_plot");
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "calib.json").string();
  ASSERT_TRUE(calib::write_calibration_file(*file, path).ok());
  const std::string script = std::string(KASCADE_SOURCE_DIR) + "/scripts/plot_calibration.py ";
  const std::string cmd = "python3 " + script + path + " " + (dir / "plots").string() + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const char* name : {"similarity.png", "importance.png"}) {
    std::ifstream png(dir / "plots" / name, std::ios::binary);
    std::string header(8, '\0');
    png.read(header.data(), 8);
    EXPECT_EQ(header, std::string("\x89PNG\r\n\x1a\n", 8)) << name;
  }
  // An imported file has no statistics: exit status 2.
  const std::vector<int32_t> anchors = {0, 2};
  calib::NpyIntMatrix map{4, 2, {0, 1, 1, 1, 0, 1, 0, 0}};
  auto imported = calib::import_head_map(map, anchors, model, "test");
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  ASSERT_TRUE(calib::write_calibration_file(*imported, path).ok());
  const int rc = std::system(("python3 " + script + path + " " + (dir / "p2").string() + " >/dev/null 2>&1").c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 2) << rc;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kascade::runtime
