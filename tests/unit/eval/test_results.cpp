// tests/unit/eval/test_results.cpp — the eval results table: aggregation, JSON and markdown output
// against golden files whose numbers were computed by hand (tests/data/eval/results_small.*),
// JSON round trip, input validation, and scripts/plot_eval.py run on the golden JSON (skipped
// when python3 or matplotlib is missing) with the PNG header checked; scripts/plot_sweep.py's table
// checked against hand-computed cells.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "eval/results.h"
#include "testing/harness.h"

namespace kascade::eval {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string kData = std::string(KASCADE_TEST_DATA_DIR) + "/eval/";

// The table of results_small.*: per-sample scores chosen so that every mean is exact in binary.
ResultsTable small_table() {
  ResultsTable t;
  EXPECT_TRUE(t.add_sample("niah_single_1", 2048, "dense", 1.0, 1.0).ok());
  EXPECT_TRUE(t.add_sample("niah_single_1", 2048, "kascade", 1.0, 0.25).ok());
  EXPECT_TRUE(t.add_sample("niah_single_1", 2048, "dense", 1.0, 1.0).ok());
  EXPECT_TRUE(t.add_sample("niah_single_1", 2048, "kascade", 0.0, 0.125).ok());
  EXPECT_TRUE(t.add_sample("vt", 2048, "dense", 0.75, 1.0).ok());
  EXPECT_TRUE(t.add_sample("vt", 2048, "kascade", 0.5, 0.25).ok());
  EXPECT_TRUE(t.add_sample("vt", 4096, "dense", 0.25, 1.0).ok());
  EXPECT_TRUE(t.add_sample("niah_single_1", 4096, "dense", 1.0, 1.0).ok());
  // Two kascade samples at 4096 added as one pre-aggregated cell.
  EXPECT_TRUE(t.add_cell(ResultCell{"niah_single_1", 4096, "kascade", 2, 1.0, 0.125}).ok());
  return t;
}

const std::map<std::string, std::string> kMeta = {{"model", "kascade-tiny"},
                                                  {"command", "kascade eval --tasks niah_single_1,vt"}};

TEST(EvalResults, AggregatesCells) {
  const ResultsTable t = small_table();
  EXPECT_EQ(t.tasks(), (std::vector<std::string>{"niah_single_1", "vt"}));
  EXPECT_EQ(t.policies(), (std::vector<std::string>{"dense", "kascade"}));
  EXPECT_EQ(t.lengths(), (std::vector<int64_t>{2048, 4096}));
  const auto cells = t.cells();
  ASSERT_EQ(cells.size(), 7u);
  EXPECT_EQ(cells[1].policy, "kascade");
  EXPECT_EQ(cells[1].samples, 2);
  EXPECT_DOUBLE_EQ(cells[1].accuracy, 0.5);
  EXPECT_DOUBLE_EQ(cells[1].keys_attended, 0.1875);
}

TEST(EvalResults, JsonMatchesGolden) {
  EXPECT_EQ(small_table().to_json(kMeta), read_file(kData + "results_small.json"));
}

TEST(EvalResults, MarkdownMatchesGolden) {
  EXPECT_EQ(small_table().to_markdown(), read_file(kData + "results_small.md"));
}

TEST(EvalResults, JsonRoundTrip) {
  auto back = ResultsTable::from_json(read_file(kData + "results_small.json"));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->to_json(kMeta), read_file(kData + "results_small.json"));
  EXPECT_EQ(back->to_markdown(), read_file(kData + "results_small.md"));
  // Merging another run of the same cell weights by samples.
  ASSERT_TRUE(back->add_cell(ResultCell{"vt", 4096, "dense", 3, 1.0, 1.0}).ok());
  for (const auto& c : back->cells()) {
    if (c.task == "vt" && c.length == 4096) {
      EXPECT_EQ(c.samples, 4);
      EXPECT_DOUBLE_EQ(c.accuracy, (0.25 + 3.0) / 4.0);
    }
  }
}

TEST(EvalResults, RejectsBadInput) {
  ResultsTable t;
  EXPECT_FALSE(t.add_sample("", 2048, "dense", 1.0, 1.0).ok());
  EXPECT_FALSE(t.add_sample("vt", 0, "dense", 1.0, 1.0).ok());
  EXPECT_FALSE(t.add_sample("vt", 2048, "", 1.0, 1.0).ok());
  EXPECT_FALSE(t.add_sample("vt", 2048, "dense", 1.5, 1.0).ok());
  EXPECT_FALSE(t.add_sample("vt", 2048, "dense", 1.0, -0.1).ok());
  EXPECT_FALSE(t.add_sample("vt", 2048, "dense", std::nan(""), 1.0).ok());
  EXPECT_FALSE(t.add_cell(ResultCell{"vt", 2048, "dense", 0, 1.0, 1.0}).ok());
  EXPECT_TRUE(t.empty());
  EXPECT_FALSE(ResultsTable::from_json("not json").ok());
  EXPECT_FALSE(ResultsTable::from_json("{\"format\": \"other\", \"version\": 1, \"cells\": []}").ok());
  EXPECT_FALSE(ResultsTable::from_json("{\"format\": \"kascade-eval-results\", \"version\": 2, \"cells\": []}").ok());
  auto bad_cell = ResultsTable::from_json(
      "{\"format\": \"kascade-eval-results\", \"version\": 1, \"cells\": [{\"task\": \"vt\", \"length\": 10}]}");
  ASSERT_FALSE(bad_cell.ok());
  EXPECT_NE(bad_cell.status().message().find("cell 0"), std::string::npos);
  EXPECT_FALSE(write_text_file("/nonexistent-dir/x.json", "{}").ok());
}

TEST(EvalResults, PlotScriptWritesAPng) {
  if (std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 with matplotlib is not available";
  }
  const auto dir = testing::test_temp_path("plot");
  std::filesystem::create_directories(dir);
  const std::string png = (dir / "plot.png").string();
  const std::string cmd = "python3 " + std::string(KASCADE_SOURCE_DIR) + "/scripts/plot_eval.py " + kData +
                          "results_small.json " + png + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string bytes = read_file(png);
  ASSERT_GT(bytes.size(), 1000u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // IHDR width and height (big-endian at bytes 16..23): a 3-panel figure is wider than tall.
  auto be32 = [&](size_t at) {
    return (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at])) << 24) |
           (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 1])) << 16) |
           (static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + 2])) << 8) | static_cast<uint8_t>(bytes[at + 3]);
  };
  EXPECT_GT(be32(16), 2 * be32(20));
  EXPECT_GT(be32(20), 200u);
  // A malformed input is refused with status 2.
  const std::string bad = (dir / "bad.json").string();
  ASSERT_TRUE(write_text_file(bad, "{\"format\": \"nope\"}").ok());
  const int rc = std::system(("python3 " + std::string(KASCADE_SOURCE_DIR) + "/scripts/plot_eval.py " + bad + " " +
                              (dir / "bad.png").string() + " >/dev/null 2>&1").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
TEST(EvalResults, SweepScriptTabulatesPointsAgainstReference) {
  if (std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 with matplotlib is not available";
  }
  const auto dir = testing::test_temp_path("sweep");
  std::filesystem::create_directories(dir);
  // Point "2": a kascade-only run with other scores than results_small.json's kascade (point "1").
  ResultsTable second;
  ASSERT_TRUE(second.add_sample("niah_single_1", 2048, "kascade", 1.0, 0.25).ok());
  ASSERT_TRUE(second.add_sample("vt", 2048, "kascade", 0.0, 0.5).ok());
  const std::string second_json = (dir / "second.json").string();
  ASSERT_TRUE(write_text_file(second_json, second.to_json(kMeta)).ok());
  const std::string script = "python3 " + std::string(KASCADE_SOURCE_DIR) + "/scripts/plot_sweep.py --name anchors ";
  const std::string prefix = (dir / "sweep").string();
  const std::string cmd = script + "--out " + prefix + " --reference dense=" + kData + "results_small.json 1=" + kData +
                          "results_small.json 2=" + second_json + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string md = read_file(prefix + ".md");
  // 2048 tokens: per task (point 1, point 2, dense), then the averages over the two tasks.
  EXPECT_NE(md.find("| niah_single_1 | 50.0 | 100.0 | 100.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| vt | 50.0 | 0.0 | 75.0 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| **average** | **50.0** | **50.0** | **87.5** |"), std::string::npos) << md;
  EXPECT_NE(md.find("| keys attended (%) | 21.9 | 37.5 | 100.0 |"), std::string::npos) << md;
  // 4096 tokens: point 2 has no cell there.
  EXPECT_NE(md.find("| niah_single_1 | 100.0 | — | 100.0 |"), std::string::npos) << md;
  EXPECT_EQ(read_file(prefix + ".png").substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  // A point holding two sparse policies is refused with status 2.
  ResultsTable two;
  ASSERT_TRUE(two.add_sample("vt", 2048, "kascade", 1.0, 0.25).ok());
  ASSERT_TRUE(two.add_sample("vt", 2048, "quest", 1.0, 0.25).ok());
  const std::string two_json = (dir / "two.json").string();
  ASSERT_TRUE(write_text_file(two_json, two.to_json(kMeta)).ok());
  const int rc = std::system((script + "--out " + prefix + "2 1=" + two_json + " >/dev/null 2>&1").c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 2);
  std::filesystem::remove_all(dir);
}

}  // namespace kascade::eval
