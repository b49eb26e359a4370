// test_calibration_file.cpp — the calibration file (src/calibrate/calibration_json.cpp,
// calibration_validate.cpp, json_fields.cpp): write → read → equal (collected and imported, as
// text and through a file), re-deriving anchor sets from a file's statistics, and one case per
// malformed input (missing key, wrong type, wrong shape, bad anchors, bad head map, non-finite
// number, version mismatch, unknown key, syntax error), each refused with a message that names
// the field. Refined anchor sets (src/calibrate/refined_sets.cpp, the extension of
// docs/spec-notes.md): apply_refinement and its refusals, their round trip, the shipped (older)
// file loading and re-written byte for byte, every malformed refinement field, and the --from-stats
// carry-over (kept when the DP set is the one the climb started from, dropped otherwise).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kascade/calibration.h"
#include "testing/harness.h"

namespace kascade::calib {
namespace {

using OJson = nlohmann::ordered_json;
constexpr int32_t kN = 5;
constexpr int32_t kG = 2;

CalibrationStats random_stats(std::mt19937_64& rng) {
  CalibrationStats s;
  s.num_layers = kN;
  s.num_kv_heads = kG;
  s.num_prompts = 17;
  s.similarity.assign(kN * kN * kG * kG, 0.0);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int a = 0; a < kN; ++a) {
    for (int b = a; b < kN; ++b) {
      for (int i = 0; i < kG * kG; ++i) s.similarity[(a * kN + b) * kG * kG + i] = a == b && i % (kG + 1) == 0 ? 1.0 : u(rng);
    }
  }
  s.importance.resize(kN);
  for (double& w : s.importance) w = u(rng) * 0.3;
  return s;
}

ModelIdentity test_model() {
  ModelIdentity m;
  m.name = "kascade-tiny";
  m.path = "models/kascade-tiny";
  m.num_layers = kN;
  m.num_kv_heads = kG;
  m.num_heads = 4;
  m.head_dim = 16;
  return m;
}

CalibrationFile collected_file() {
  auto rng = testing::rng_for_test();
  DevSetInfo dev;
  dev.description = "synthetic \"dev\" set, 17 prompts";
  dev.decode_steps_per_prompt = 32;
  CollectionSettings c;
  c.forward = StatsForward::kSparse;
  c.k_cal = 24;
  auto file = build_calibration_file(test_model(), dev, c, random_stats(rng), default_anchor_counts(kN), 0);
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  return std::move(file).value();
}

CalibrationFile imported_file() {
  CalibrationFile f;
  f.source = CalibrationSource::kImported;
  f.model = test_model();
  f.imported_from = "head_mappings/tiny_layers_0_2.npy";
  AnchorSet set;
  set.anchors = {0, 2};
  set.head_map = {0, 1, 1, 1, 0, 1, 0, 0, 1, 0};
  f.anchor_sets.push_back(set);
  f.default_num_anchors = 2;
  return f;
}

std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return (std::filesystem::path(::testing::TempDir()) /
          (std::string("kascade_calibrate_") + info->name() + "_" + name))
      .string();
}

TEST(CalibrationFile, BuiltFileHasDerivedSetsAndDefault) {
  const CalibrationFile f = collected_file();
  ASSERT_EQ(f.anchor_sets.size(), 4u);  // counts 2..5 for 5 layers
  EXPECT_EQ(f.default_num_anchors, 5);
  for (size_t i = 0; i < f.anchor_sets.size(); ++i) {
    EXPECT_EQ(f.anchor_sets[i].anchors.size(), i + 2);
    EXPECT_NE(f.find_anchor_set(static_cast<int32_t>(i + 2)), nullptr);
  }
  EXPECT_EQ(f.find_anchor_set(7), nullptr);
  // The default is the count nearest 5: with counts {2, 3} it is 3.
  auto small = build_calibration_file(f.model, *f.dev_set, *f.collection, *f.stats, std::vector<int32_t>{3, 2}, 0);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->default_num_anchors, 3);
  EXPECT_EQ(small->anchor_sets[0].anchors.size(), 2u) << "sets are sorted by count";
  EXPECT_FALSE(build_calibration_file(f.model, *f.dev_set, *f.collection, *f.stats, std::vector<int32_t>{2, 3}, 4).ok())
      << "a default count without a set";
}

TEST(CalibrationFile, RoundTripsExactly) {
  for (const CalibrationFile& f : {collected_file(), imported_file()}) {
    auto text = calibration_to_json(f);
    ASSERT_TRUE(text.ok()) << text.status().to_string();
    auto back = parse_calibration_json(*text);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_TRUE(*back == f) << *text;
    auto again = calibration_to_json(*back);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, *text);

    const std::string path = temp_path(calibration_source_name(f.source));
    Status s = write_calibration_file(f, path);
    ASSERT_TRUE(s.ok()) << s.to_string();
    auto from_disk = read_calibration_file(path);
    ASSERT_TRUE(from_disk.ok()) << from_disk.status().to_string();
    EXPECT_TRUE(*from_disk == f);
    std::remove(path.c_str());
  }
}

TEST(CalibrationFile, NamesTheAxesAndMarksImports) {
  auto text = calibration_to_json(collected_file());
  ASSERT_TRUE(text.ok());
  const OJson j = OJson::parse(*text);
  EXPECT_EQ(j["statistics"]["similarity"]["axes"],
            OJson({"anchor_layer", "reuse_layer", "anchor_kv_head", "reuse_kv_head"}));
  EXPECT_EQ(j["source"], "collected");
  EXPECT_EQ(j["collection"]["forward"], "sparse");
  EXPECT_TRUE(j["statistics"]["similarity"]["values"][3][1].is_null());
  EXPECT_EQ(j["statistics"]["similarity"]["values"][1][3].size(), static_cast<size_t>(kG));
  auto imported = calibration_to_json(imported_file());
  ASSERT_TRUE(imported.ok());
  const OJson k = OJson::parse(*imported);
  EXPECT_EQ(k["source"], "imported");
  EXPECT_FALSE(k.contains("statistics"));
  EXPECT_FALSE(k["anchor_sets"][0].contains("objective"));
}

TEST(CalibrationFile, FromStatsDerivesOtherCountsWithoutTheModel) {
  const CalibrationFile f = collected_file();
  auto back = parse_calibration_json(*calibration_to_json(f));
  ASSERT_TRUE(back.ok());
  auto sets = derive_anchor_sets(*back->stats, std::vector<int32_t>{1, 3});
  ASSERT_TRUE(sets.ok());
  EXPECT_EQ((*sets)[0].anchors, std::vector<int32_t>{0});
  EXPECT_EQ((*sets)[1], *f.find_anchor_set(3));
}

// ---- malformed input ----

void expect_refused(const std::string& text, const std::vector<std::string>& needles, const std::string& label) {
  auto parsed = parse_calibration_json(text);
  ASSERT_FALSE(parsed.ok()) << label << ": accepted";
  for (const std::string& needle : needles) {
    EXPECT_NE(parsed.status().message().find(needle), std::string::npos)
        << label << ": message \"" << parsed.status().message() << "\" does not contain \"" << needle << "\"";
  }
}

struct Mutation {
  std::string label;
  std::function<void(OJson&)> apply;
  std::vector<std::string> needles;
};

OJson::json_pointer ptr(const std::string& p) { return OJson::json_pointer(p); }

Mutation erase_key(const std::string& pointer, const std::string& field) {
  return {"erase " + pointer,
          [pointer](OJson& j) {
            const auto p = ptr(pointer);
            j[p.parent_pointer()].erase(p.back());
          },
          {field}};
}

Mutation set_value(const std::string& pointer, OJson value, std::vector<std::string> needles) {
  return {"set " + pointer + " = " + value.dump(), [pointer, value](OJson& j) { j[ptr(pointer)] = value; },
          std::move(needles)};
}

void run_mutations(const CalibrationFile& f, const std::vector<Mutation>& mutations) {
  auto text = calibration_to_json(f);
  ASSERT_TRUE(text.ok());
  const OJson base = OJson::parse(*text);
  for (const Mutation& m : mutations) {
    OJson j = base;
    m.apply(j);
    expect_refused(j.dump(), m.needles, m.label);
  }
}

TEST(CalibrationFileMalformed, MissingKeys) {
  std::vector<Mutation> cases;
  for (const std::string key :
       {"format", "version", "source", "model", "model.name", "model.path", "model.num_layers", "model.num_kv_heads",
        "model.num_heads", "model.head_dim", "dev_set", "dev_set.description", "dev_set.decode_steps_per_prompt",
        "collection", "collection.rho_ppm", "collection.k_min", "collection.tile_size", "collection.k_cal",
        "collection.forward", "statistics", "statistics.num_prompts", "statistics.similarity",
        "statistics.similarity.axes", "statistics.similarity.values", "statistics.importance",
        "statistics.importance.axes", "statistics.importance.values", "anchor_sets", "default_num_anchors"}) {
    std::string pointer = "/" + key;
    for (char& c : pointer) c = c == '.' ? '/' : c;
    cases.push_back(erase_key(pointer, key));
  }
  for (const std::string key : {"num_anchors", "anchors", "objective", "head_map"}) {
    cases.push_back(erase_key("/anchor_sets/1/" + key, "anchor_sets[1]." + key));
  }
  cases.push_back(erase_key("/anchor_sets/1/head_map/axes", "anchor_sets[1].head_map.axes"));
  cases.push_back(erase_key("/anchor_sets/1/head_map/values", "anchor_sets[1].head_map.values"));
  run_mutations(collected_file(), cases);
  // An imported file must name its source.
  run_mutations(imported_file(), {erase_key("/imported_from", "imported_from")});
}

TEST(CalibrationFileMalformed, WrongTypes) {
  run_mutations(
      collected_file(),
      {
          set_value("/format", 1, {"format", "expected a string"}),
          set_value("/version", "1", {"version", "expected an integer"}),
          set_value("/version", 1.5, {"version", "expected an integer"}),
          set_value("/source", true, {"source"}),
          set_value("/model", OJson::array(), {"model", "expected an object"}),
          set_value("/model/name", 7, {"model.name", "expected a string"}),
          set_value("/model/num_layers", "5", {"model.num_layers", "expected an integer"}),
          set_value("/model/num_layers", 5.5, {"model.num_layers", "expected an integer"}),
          set_value("/model/num_kv_heads", nullptr, {"model.num_kv_heads"}),
          set_value("/model/head_dim", OJson::object(), {"model.head_dim"}),
          set_value("/dev_set/description", OJson::array(), {"dev_set.description"}),
          set_value("/dev_set/decode_steps_per_prompt", true, {"dev_set.decode_steps_per_prompt"}),
          set_value("/collection/rho_ppm", 0.1, {"collection.rho_ppm"}),
          set_value("/collection/forward", 1, {"collection.forward"}),
          set_value("/statistics", "none", {"statistics", "expected an object"}),
          set_value("/statistics/num_prompts", "17", {"statistics.num_prompts"}),
          set_value("/statistics/similarity/values/0/1/0/1", "0.5", {"statistics.similarity.values[0][1][0][1]", "a number"}),
          set_value("/statistics/similarity/values/2/4/1/0", nullptr, {"statistics.similarity.values[2][4][1][0]"}),
          set_value("/statistics/importance/values/2", nullptr, {"statistics.importance.values[2]", "a number"}),
          set_value("/statistics/importance/values", 0.5, {"statistics.importance.values", "an array"}),
          set_value("/anchor_sets", OJson::object(), {"anchor_sets", "an array"}),
          set_value("/anchor_sets/0", 2, {"anchor_sets[0]", "an object"}),
          set_value("/anchor_sets/0/anchors", OJson{{"a", 1}}, {"anchor_sets[0].anchors", "an array"}),
          set_value("/anchor_sets/0/anchors/1", "1", {"anchor_sets[0].anchors[1]", "an integer"}),
          set_value("/anchor_sets/0/objective", "high", {"anchor_sets[0].objective", "a number"}),
          set_value("/anchor_sets/2/head_map/values/3/1", 1.5, {"anchor_sets[2].head_map.values[3][1]", "an integer"}),
          set_value("/anchor_sets/2/head_map/values/3", 1, {"anchor_sets[2].head_map.values[3]", "an array"}),
          set_value("/default_num_anchors", "5", {"default_num_anchors", "an integer"}),
      });
}

TEST(CalibrationFileMalformed, WrongValuesAndUnknownKeys) {
  run_mutations(collected_file(),
                {
                    set_value("/format", "kascade-calib", {"format", "kascade-calibration"}),
                    set_value("/source", "guessed", {"source", "guessed"}),
                    set_value("/model/num_layers", 0, {"model.num_layers"}),
                    set_value("/model/num_heads", 3, {"model.num_heads", "multiple"}),
                    set_value("/collection/forward", "fast", {"collection.forward", "fast"}),
                    set_value("/collection/k_cal", 0, {"collection.k_cal"}),
                    set_value("/collection/rho_ppm", 2000000, {"collection.rho_ppm"}),
                    set_value("/collection/tile_size", -32, {"collection.tile_size"}),
                    set_value("/dev_set/decode_steps_per_prompt", -1, {"dev_set.decode_steps_per_prompt"}),
                    set_value("/statistics/num_prompts", 0, {"statistics.num_prompts"}),
                    set_value("/statistics/similarity/values/0/1/0/1", -0.25, {"statistics.similarity[0][1][0][1]"}),
                    set_value("/default_num_anchors", 7, {"default_num_anchors", "7"}),
                    set_value("/imported_from", "x.npy", {"imported_from"}),
                    set_value("/model/extra", 1, {"model.extra", "not a known key"}),
                    set_value("/anchor_sets/0/notes", "x", {"anchor_sets[0].notes", "not a known key"}),
                    set_value("/statistic", OJson::object(), {"statistic", "not a known key"}),
                });
}

TEST(CalibrationFileMalformed, EmptyNameWithPathIsAcceptedButNoIdentityIsNot) {
  auto text = calibration_to_json(collected_file());
  ASSERT_TRUE(text.ok());
  OJson j = OJson::parse(*text);
  j["model"]["name"] = "";
  EXPECT_TRUE(parse_calibration_json(j.dump()).ok());
  j["model"]["path"] = "";
  expect_refused(j.dump(), {"model", "name and path"}, "no identity");
}

TEST(CalibrationFileMalformed, WrongShapes) {
  const CalibrationFile f = collected_file();
  const OJson sim_block = OJson::parse(*calibration_to_json(f))["statistics"]["similarity"]["values"][0][2];
  run_mutations(
      f,
      {
          {"sim rows", [](OJson& j) { j["statistics"]["similarity"]["values"].erase(4); },
           {"statistics.similarity.values has 4 elements; expected 5"}},
          {"sim cols", [](OJson& j) { j["statistics"]["similarity"]["values"][1].push_back(nullptr); },
           {"statistics.similarity.values[1] has 6 elements; expected 5"}},
          {"sim ga", [](OJson& j) { j["statistics"]["similarity"]["values"][0][2].push_back(OJson{0.5, 0.5}); },
           {"statistics.similarity.values[0][2] has 3 elements; expected 2"}},
          {"sim gb", [](OJson& j) { j["statistics"]["similarity"]["values"][0][2][1].erase(1); },
           {"statistics.similarity.values[0][2][1] has 1 elements; expected 2"}},
          {"sim lower triangle filled", [sim_block](OJson& j) { j["statistics"]["similarity"]["values"][3][1] = sim_block; },
           {"statistics.similarity.values[3][1]", "expected null"}},
          {"sim upper triangle null", [](OJson& j) { j["statistics"]["similarity"]["values"][1][3] = nullptr; },
           {"statistics.similarity.values[1][3]", "an array"}},
          {"sim axes transposed",
           [](OJson& j) {
             j["statistics"]["similarity"]["axes"] = {"anchor_layer", "reuse_layer", "reuse_kv_head", "anchor_kv_head"};
           },
           {"statistics.similarity.axes"}},
          {"importance length", [](OJson& j) { j["statistics"]["importance"]["values"].push_back(0.1); },
           {"statistics.importance.values has 6 elements; expected 5"}},
          {"importance axes", [](OJson& j) { j["statistics"]["importance"]["axes"] = {"layers"}; },
           {"statistics.importance.axes"}},
          {"head map rows", [](OJson& j) { j["anchor_sets"][1]["head_map"]["values"].erase(0); },
           {"anchor_sets[1].head_map.values has 4 elements; expected 5"}},
          {"head map cols", [](OJson& j) { j["anchor_sets"][1]["head_map"]["values"][2].push_back(0); },
           {"anchor_sets[1].head_map.values[2] has 3 elements; expected 2"}},
          {"head map axes", [](OJson& j) { j["anchor_sets"][1]["head_map"]["axes"] = {"kv_head", "layer"}; },
           {"anchor_sets[1].head_map.axes"}},
          {"no anchor sets", [](OJson& j) { j["anchor_sets"] = OJson::array(); }, {"anchor_sets is empty"}},
      });
}

// The first reuse (non-anchor) layer of a set.
int32_t first_reuse_layer(const AnchorSet& set) {
  for (int32_t l = 0; l < kN; ++l) {
    if (std::find(set.anchors.begin(), set.anchors.end(), l) == set.anchors.end()) return l;
  }
  return -1;
}

TEST(CalibrationFileMalformed, BadAnchorsAndHeadMaps) {
  const CalibrationFile f = collected_file();
  const int32_t reuse = first_reuse_layer(f.anchor_sets[1]);  // the 3-anchor set
  ASSERT_GE(reuse, 1);
  const std::string reuse_row = "/anchor_sets/1/head_map/values/" + std::to_string(reuse);
  run_mutations(
      f,
      {
          set_value("/anchor_sets/1/anchors", {0, 3, 2}, {"anchor_sets[1].anchors", "strictly ascending"}),
          set_value("/anchor_sets/1/anchors", {0, 2, 2}, {"anchor_sets[1].anchors", "strictly ascending"}),
          set_value("/anchor_sets/1/anchors", {1, 2, 3}, {"anchor_sets[1].anchors", "layer 0"}),
          set_value("/anchor_sets/1/anchors", {0, 2, 5}, {"anchor_sets[1].anchors", "out of range"}),
          set_value("/anchor_sets/1/anchors", {0, -1, 2}, {"anchor_sets[1].anchors"}),
          set_value("/anchor_sets/1/num_anchors", 4, {"anchor_sets[1].num_anchors", "anchor_sets[1].anchors"}),
          {"sets out of order", [](OJson& j) { std::swap(j["anchor_sets"][0], j["anchor_sets"][1]); },
           {"anchor_sets[1].num_anchors", "ascending"}},
          {"duplicate count", [](OJson& j) { j["anchor_sets"][1] = j["anchor_sets"][0]; },
           {"anchor_sets[1].num_anchors", "distinct"}},
          set_value(reuse_row + "/1", -1, {"anchor_sets[1]", "head_map[" + std::to_string(reuse) + "][1]", "out of range"}),
          set_value(reuse_row + "/0", kG, {"anchor_sets[1]", "head_map[" + std::to_string(reuse) + "][0]", "out of range"}),
          set_value("/anchor_sets/1/head_map/values/0/0", 1, {"anchor_sets[1]", "head_map[0][0]", "identity"}),
          set_value("/anchor_sets/3/head_map/values/4/1", 0, {"anchor_sets[3]", "head_map[4][1]", "identity"}),
          set_value("/anchor_sets/1/head_map/values/0/0", 4294967296LL, {"anchor_sets[1].head_map.values[0][0]"}),
      });
}

TEST(CalibrationFileMalformed, NonFiniteNumbers) {
  // In the text: a literal that overflows double, and NaN; the message names the field being read.
  const CalibrationFile f = collected_file();
  OJson j = OJson::parse(*calibration_to_json(f));
  const double marker = 0.1234567890123;
  const std::string marker_text = OJson(marker).dump();
  struct TextCase {
    std::string pointer, field;
  };
  for (const TextCase& c : {TextCase{"/statistics/similarity/values/0/1/0/1", "statistics.similarity.values[0][1][0][1]"},
                            TextCase{"/statistics/importance/values/3", "statistics.importance.values[3]"},
                            TextCase{"/anchor_sets/2/objective", "anchor_sets[2].objective"}}) {
    for (const std::string bad : {"1e999", "-1e999", "NaN", "Infinity"}) {
      OJson k = j;
      k[ptr(c.pointer)] = marker;
      std::string text = k.dump(1);
      const size_t at = text.find(marker_text);
      ASSERT_NE(at, std::string::npos);
      text.replace(at, marker_text.size(), bad);
      expect_refused(text, {c.field}, c.pointer + " = " + bad);
    }
  }
  // In memory: the writer refuses non-finite statistics and objectives, naming the field.
  const double inf = std::numeric_limits<double>::infinity();
  struct MemoryCase {
    std::function<void(CalibrationFile&)> apply;
    std::string field;
  };
  for (const MemoryCase& c : {
           MemoryCase{[](CalibrationFile& g) { g.stats->similarity[1 * kG * kG + 1] = std::nan(""); },
                      "statistics.similarity[0][1][0][1]"},
           MemoryCase{[&](CalibrationFile& g) { g.stats->importance[2] = -inf; }, "statistics.importance[2]"},
           MemoryCase{[&](CalibrationFile& g) { g.anchor_sets[0].objective = inf; }, "anchor_sets[0].objective"},
       }) {
    CalibrationFile g = f;
    c.apply(g);
    auto text = calibration_to_json(g);
    ASSERT_FALSE(text.ok()) << c.field;
    EXPECT_NE(text.status().message().find(c.field), std::string::npos) << text.status().message();
    const std::string path = temp_path("nonfinite.json");
    Status s = write_calibration_file(g, path);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s.message();
    EXPECT_FALSE(std::filesystem::exists(path)) << "nothing is written for an invalid file";
  }
}

TEST(CalibrationFileMalformed, VersionMismatch) {
  auto text = calibration_to_json(collected_file());
  ASSERT_TRUE(text.ok());
  for (int64_t version : {0, 2, 99}) {
    OJson j = OJson::parse(*text);
    j["version"] = version;
    auto parsed = parse_calibration_json(j.dump());
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(parsed.status().message().find("version is " + std::to_string(version)), std::string::npos)
        << parsed.status().message();
  }
}

TEST(CalibrationFileMalformed, SourceRules) {
  // A collected file without statistics (only imported files may omit them) and an imported file
  // carrying statistics or objectives.
  run_mutations(collected_file(), {erase_key("/statistics", "statistics"),
                                   set_value("/source", "imported", {"imported"})});
  CalibrationFile with_stats = imported_file();
  auto text = calibration_to_json(imported_file());
  ASSERT_TRUE(text.ok());
  OJson j = OJson::parse(*text);
  OJson collected = OJson::parse(*calibration_to_json(collected_file()));
  OJson k = j;
  k["statistics"] = collected["statistics"];
  expect_refused(k.dump(), {"statistics", "imported"}, "imported with statistics");
  k = j;
  k["anchor_sets"][0]["objective"] = 1.0;
  expect_refused(k.dump(), {"anchor_sets[0].objective", "imported"}, "imported with objective");
  with_stats.stats = collected_file().stats;
  EXPECT_FALSE(calibration_to_json(with_stats).ok());
}

TEST(CalibrationFileMalformed, SyntaxErrorsAndFiles) {
  auto text = calibration_to_json(collected_file());
  ASSERT_TRUE(text.ok());
  expect_refused("", {"JSON error"}, "empty");
  expect_refused(text->substr(0, text->size() / 2), {"JSON error at statistics"}, "truncated");
  expect_refused("[1, 2]", {"the document", "an object"}, "array document");
  expect_refused("{\"format\": \"kascade-calibration\", \"version\": 1,}", {"JSON error"}, "trailing comma");

  auto missing = read_calibration_file(temp_path("does_not_exist.json"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("does_not_exist.json"), std::string::npos);

  const std::string path = temp_path("bad.json");
  {
    OJson j = OJson::parse(*text);
    j["anchor_sets"][0]["anchors"] = {0, 0};
    std::ofstream(path) << j.dump();
  }
  auto bad = read_calibration_file(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("anchor_sets[0].anchors"), std::string::npos) << bad.status().message();
  std::remove(path.c_str());
}

// ---- refined sets (the extension of docs/spec-notes.md) ----

HillClimbResult fake_climb(const std::vector<int32_t>& start, const std::vector<int32_t>& best,
                           const AgreementScore& start_score, const AgreementScore& best_score) {
  HillClimbResult c;
  c.start = {start, start_score};
  c.best = {best, best_score};
  c.rounds.resize(2);  // the file records how many rounds were scanned
  c.local_optimum = true;
  c.sets_scored = 9;
  return c;
}

const RefineSettings kSettings{8, 2, 3};  // tokens, prompts, max_rounds

std::vector<int32_t> first_neighbour(const CalibrationFile& f, int32_t k, size_t which = 0) {
  auto n = anchor_swap_neighbours(f.find_anchor_set(k)->anchors, kN);
  EXPECT_TRUE(n.ok() && n->size() > which);
  return (*n)[which];
}

// The 3-anchor DP set replaced by its first neighbour, which scores better.
CalibrationFile refined_file() {
  CalibrationFile f = collected_file();
  const HillClimbResult c =
      fake_climb(f.find_anchor_set(3)->anchors, first_neighbour(f, 3), AgreementScore{3, 10, 0.5}, AgreementScore{7, 10, 0.25});
  const Status s = apply_refinement(f, c, kSettings);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return f;
}

TEST(CalibrationFileRefinement, ApplyReplacesTheDpSetAndRecordsIt) {
  const CalibrationFile before = collected_file();
  const CalibrationFile f = refined_file();
  const AnchorSet& dp = *before.find_anchor_set(3);
  const AnchorSet& set = *f.find_anchor_set(3);
  EXPECT_EQ(set.anchors, first_neighbour(before, 3));
  EXPECT_NE(set.anchors, dp.anchors);
  EXPECT_EQ(set.head_map, build_head_map(*f.stats, set.anchors).value());
  const std::vector<double> W = layer_scores(*f.stats).value();
  EXPECT_EQ(*set.objective, anchor_objective(W, kN, set.anchors).value());
  ASSERT_TRUE(set.refinement.has_value());
  const AnchorRefinement want{.dp_anchors = dp.anchors,
                              .dp_objective = *dp.objective,
                              .agreement = 0.7,  // 7 of 10, as the climb's best scored
                              .kl = 0.25,
                              .dp_agreement = 0.3,
                              .dp_kl = 0.5,
                              .tokens = 8,
                              .prompts = 2,
                              .steps = 10,
                              .max_rounds = 3,
                              .rounds = 2,
                              .local_optimum = true,
                              .sets_scored = 9};
  EXPECT_TRUE(*set.refinement == want) << calibration_to_json(f).value();
  for (int32_t k : {2, 4, 5}) EXPECT_EQ(*f.find_anchor_set(k), *before.find_anchor_set(k)) << k << " anchors";
  EXPECT_EQ(f.default_num_anchors, before.default_num_anchors);
}

TEST(CalibrationFileRefinement, ApplyRefusesWhatItCannotRecordAndLeavesTheFile) {
  const CalibrationFile base = collected_file();
  const std::vector<int32_t> dp = base.find_anchor_set(3)->anchors;
  const std::vector<int32_t> other = first_neighbour(base, 3);
  struct Case {
    std::string label;
    HillClimbResult climb;
    RefineSettings settings;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"start is not the DP set", fake_climb(first_neighbour(base, 3, 1), other, AgreementScore{1, 10, 1}, AgreementScore{2, 10, 1}),
       kSettings, "the DP set"},
      {"ends below its start", fake_climb(dp, other, AgreementScore{5, 10, 0.1}, AgreementScore{4, 10, 0.0}), kSettings,
       "scores below"},
      {"different positions", fake_climb(dp, other, AgreementScore{5, 10, 0.1}, AgreementScore{6, 11, 0.0}), kSettings,
       "same positions"},
      {"no set of that count", fake_climb({0}, {0}, AgreementScore{1, 2, 0}, AgreementScore{1, 2, 0}), kSettings,
       "no anchor set with 1"},
      {"best has another count", fake_climb(dp, {0, 1}, AgreementScore{1, 2, 0}, AgreementScore{2, 2, 0}), kSettings, "not 3"},
      {"tokens 0", fake_climb(dp, other, AgreementScore{1, 2, 0}, AgreementScore{2, 2, 0}), RefineSettings{0, 2, 3},
       "anchor_sets[1].refinement.tokens"},
  };
  for (const Case& c : cases) {
    CalibrationFile f = base;
    const Status s = apply_refinement(f, c.climb, c.settings);
    ASSERT_FALSE(s.ok()) << c.label;
    EXPECT_NE(s.message().find(c.needle), std::string::npos) << c.label << ": " << s.message();
    EXPECT_EQ(f, base) << c.label << ": the file changed";
  }
  CalibrationFile twice = refined_file();
  const HillClimbResult again = fake_climb(twice.find_anchor_set(3)->anchors, dp, AgreementScore{1, 2, 0}, AgreementScore{1, 2, 0});
  EXPECT_FALSE(apply_refinement(twice, again, kSettings).ok()) << "a set is refined once";
  CalibrationFile imported = imported_file();
  const Status s = apply_refinement(imported, fake_climb({0, 2}, {0, 1}, AgreementScore{1, 2, 0}, AgreementScore{2, 2, 0}), kSettings);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("imported"), std::string::npos) << s.message();
}

TEST(CalibrationFileRefinement, RoundTripsAndOlderFilesLoadAndRewriteByteForByte) {
  const CalibrationFile f = refined_file();
  auto text = calibration_to_json(f);
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  auto back = parse_calibration_json(*text);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, f);
  EXPECT_EQ(calibration_to_json(*back).value(), *text);
  const OJson j = OJson::parse(*text);
  EXPECT_EQ(j["anchor_sets"][1]["refinement"]["dp_anchors"], OJson(f.find_anchor_set(3)->refinement->dp_anchors));
  EXPECT_EQ(j["anchor_sets"][1]["refinement"]["method"], "agreement");
  for (size_t i : {0u, 2u, 3u}) EXPECT_FALSE(j["anchor_sets"][i].contains("refinement")) << i;
  EXPECT_EQ(calibration_to_json(collected_file()).value().find("refinement"), std::string::npos)
      << "a file without refined sets is written as before";

  // A file written before refinements existed (c22's first calibration, DP sets only): it loads, and the
  // writer reproduces it exactly.
  const auto read_bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << path;
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string older = read_bytes(std::string(KASCADE_SOURCE_DIR) + "/tests/data/calibration/kascade_tiny_c22_dp_only.json");
  auto old = parse_calibration_json(older);
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  for (const AnchorSet& set : old->anchor_sets) EXPECT_FALSE(set.refinement.has_value());
  EXPECT_EQ(calibration_to_json(*old).value(), older);

  // The shipped file (refined default set, written on the GPU) loads and rewrites byte for byte too.
  const std::string shipped = read_bytes(std::string(KASCADE_SOURCE_DIR) + "/models/kascade-tiny/kascade_calibration.json");
  auto current = parse_calibration_json(shipped);
  ASSERT_TRUE(current.ok()) << current.status().to_string();
  EXPECT_EQ(calibration_to_json(*current).value(), shipped);
}

TEST(CalibrationFileRefinement, MalformedRefinementsAreRefusedNamingTheField) {
  const CalibrationFile f = refined_file();
  const std::string r = "/anchor_sets/1/refinement/";
  const std::string field = "anchor_sets[1].refinement";
  std::vector<Mutation> cases;
  for (const std::string key : {"method", "dp_anchors", "dp_objective", "agreement", "kl", "dp_agreement", "dp_kl",
                                "tokens", "prompts", "steps", "max_rounds", "rounds", "local_optimum", "sets_scored"}) {
    cases.push_back(erase_key(r + key, field + "." + key));
  }
  const double objective = *f.find_anchor_set(3)->objective;
  const std::vector<int32_t> own = f.find_anchor_set(3)->anchors;
  for (Mutation m : {
           set_value(r + "method", "accuracy", {field + ".method", "accuracy"}),
           set_value(r + "agreement", 1.5, {field + ".agreement", "[0, 1]"}),
           set_value(r + "dp_agreement", -0.1, {field + ".dp_agreement"}),
           set_value(r + "kl", -1.0, {field + ".kl", ">= 0"}),
           set_value(r + "dp_kl", "x", {field + ".dp_kl", "a number"}),
           set_value(r + "dp_anchors", {0, 1}, {field + ".dp_anchors", "anchor count"}),
           set_value(r + "dp_anchors", {1, 2, 3}, {field + ".dp_anchors", "layer 0"}),
           set_value(r + "agreement", 0.2, {field, "scores below the DP set"}),
           {"same agreement, higher KL",
            [r](OJson& j) {
              j[ptr(r + "agreement")] = 0.3;
              j[ptr(r + "kl")] = 0.75;
            },
            {field, "scores below the DP set"}},
           set_value(r + "steps", 17, {field + ".steps"}),
           set_value(r + "steps", 1, {field + ".steps"}),
           set_value(r + "rounds", 4, {field + ".rounds"}),
           set_value(r + "tokens", 0, {field + ".tokens"}),
           set_value(r + "prompts", 0, {field + ".prompts"}),
           set_value(r + "max_rounds", -1, {field + ".max_rounds"}),
           set_value(r + "sets_scored", 0, {field + ".sets_scored"}),
           set_value(r + "local_optimum", 1, {field + ".local_optimum", "true or false"}),
           set_value(r + "dp_objective", objective - 1.0, {field + ".dp_objective", "maximises"}),
           set_value(r + "dp_anchors", own, {field, "is the DP set but their scores differ"}),
           set_value(r + "notes", "x", {field + ".notes", "not a known key"}),
       }) {
    cases.push_back(std::move(m));
  }
  run_mutations(f, cases);
  // An imported file has no statistics to refine with.
  OJson imported = OJson::parse(*calibration_to_json(imported_file()));
  imported["anchor_sets"][0]["refinement"] = OJson::parse(*calibration_to_json(f))["anchor_sets"][1]["refinement"];
  imported["anchor_sets"][0]["refinement"]["dp_anchors"] = {0, 1};
  expect_refused(imported.dump(), {"anchor_sets[0].refinement", "imported"}, "imported with a refinement");
}

TEST(CalibrationFileRefinement, FromStatsCarriesRefinementsWhoseDpSetIsUnchanged) {
  const CalibrationFile saved = refined_file();
  const std::vector<int32_t> all = default_anchor_counts(kN);
  auto derived = build_calibration_file(saved.model, *saved.dev_set, *saved.collection, *saved.stats, all, 0);
  ASSERT_TRUE(derived.ok());
  EXPECT_NE(*derived, saved) << "the DP alone gives the DP set";
  auto notes = carry_refinements(saved, *derived);
  ASSERT_TRUE(notes.ok()) << notes.status().to_string();
  ASSERT_EQ(notes->size(), 1u);
  EXPECT_NE((*notes)[0].find("carried over"), std::string::npos) << (*notes)[0];
  EXPECT_EQ(*derived, saved);

  // Without the count, or when the DP now gives another set, the refinement is dropped.
  auto fewer = build_calibration_file(saved.model, *saved.dev_set, *saved.collection, *saved.stats,
                                      std::vector<int32_t>{2, 4}, 0);
  ASSERT_TRUE(fewer.ok());
  const CalibrationFile fewer_before = *fewer;
  notes = carry_refinements(saved, *fewer);
  ASSERT_TRUE(notes.ok());
  ASSERT_EQ(notes->size(), 1u);
  EXPECT_NE((*notes)[0].find("dropped"), std::string::npos) << (*notes)[0];
  EXPECT_EQ(*fewer, fewer_before);

  CalibrationFile stale = saved;  // as if the statistics had given another DP set when it was refined
  stale.anchor_sets[1].refinement->dp_anchors = first_neighbour(collected_file(), 3, 1);
  auto again = build_calibration_file(saved.model, *saved.dev_set, *saved.collection, *saved.stats, all, 0);
  ASSERT_TRUE(again.ok());
  notes = carry_refinements(stale, *again);
  ASSERT_TRUE(notes.ok());
  ASSERT_EQ(notes->size(), 1u);
  EXPECT_NE((*notes)[0].find("DP now gives"), std::string::npos) << (*notes)[0];
  EXPECT_EQ(*again->find_anchor_set(3), *collected_file().find_anchor_set(3));

  CalibrationFile plain = collected_file();
  notes = carry_refinements(collected_file(), plain);
  ASSERT_TRUE(notes.ok());
  EXPECT_TRUE(notes->empty());
  EXPECT_EQ(plain, collected_file());
}

}  // namespace
}  // namespace kascade::calib
