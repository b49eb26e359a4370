// tests/unit/eval/test_haystack.cpp — context rendering: needles at the boundary nearest their
// depth (checked by brute force over all boundaries), exact offsets, stable order at one
// boundary; the sentence-end rule on hand-written words; the word streams (noise cycles, the train noise's runs, the
// natural text starts sentences where a sentence ended).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "eval/haystack.h"
#include "testing/harness.h"

namespace kascade::eval {
namespace {

TEST(EvalHaystack, EndsSentence) {
  for (const char* w : {"end.", "really?", "Stop!", "said.\"", "(done.)", "it.'", "Ah!\""}) EXPECT_TRUE(ends_sentence(w)) << w;
  for (const char* w : {"Mr.", "Mrs.", "Dr.", "St.", "(Mr.", "word", "comma,", "semi;", "", "\"", "dash--"}) {
    EXPECT_FALSE(ends_sentence(w)) << w;
  }
}

// Items "p0".."p{n-1}"; boundaries after items whose index is in `ends`.
struct TestItems {
  std::vector<std::string> names;
  std::vector<bool> ends;
  PieceSource source() const {
    return PieceSource{[this](int64_t i) { return std::string_view(names[static_cast<size_t>(i)]); },
                       [this](int64_t i) { return static_cast<bool>(ends[static_cast<size_t>(i)]); },
                       [](int64_t) -> std::string_view { return " "; }};
  }
};

TEST(EvalHaystack, NeedlesGoToTheNearestBoundary) {
  auto rng = testing::rng_for_test();
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 60);
    TestItems items;
    for (int64_t i = 0; i < n; ++i) {
      items.names.push_back(std::string("p").append(std::to_string(i)));
      items.ends.push_back(rng() % 4 == 0);
    }
    std::vector<int64_t> boundaries = {0};
    for (int64_t i = 0; i < n; ++i) {
      if (i + 1 == n || items.ends[static_cast<size_t>(i)]) boundaries.push_back(i + 1);
    }
    std::vector<Insertion> ins;
    const int k = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < k; ++j) {
      ins.push_back(Insertion{std::string("NEEDLE").append(std::to_string(j)), static_cast<double>(rng() % 1001) / 1000.0, j == 0});
    }
    const RenderedContext r = render_context(items.source(), n, ins);
    ASSERT_EQ(r.needles.size(), ins.size());
    for (int j = 0; j < k; ++j) {
      const auto& p = r.needles[static_cast<size_t>(j)];
      EXPECT_EQ(p.text, ins[static_cast<size_t>(j)].text);
      EXPECT_EQ(p.queried, j == 0);
      EXPECT_EQ(r.text.substr(static_cast<size_t>(p.char_offset), p.text.size()), p.text);
      // Items before the needle, counted in the text (items are the tokens starting with 'p').
      int64_t before = 0;
      bool at_token_start = true;
      for (size_t c = 0; c < static_cast<size_t>(p.char_offset); ++c) {
        if (at_token_start && r.text[c] == 'p') ++before;
        at_token_start = r.text[c] == ' ';
      }
      EXPECT_DOUBLE_EQ(p.depth, static_cast<double>(before) / static_cast<double>(n));
      // Brute force: no boundary is strictly closer to the requested position.
      const double target = ins[static_cast<size_t>(j)].depth * static_cast<double>(n);
      for (const int64_t b : boundaries) {
        EXPECT_LE(std::abs(static_cast<double>(before) - target), std::abs(static_cast<double>(b) - target) + 1e-9);
      }
      EXPECT_TRUE(std::find(boundaries.begin(), boundaries.end(), before) != boundaries.end());
    }
  }
}

TEST(EvalHaystack, SameBoundaryKeepsInsertionOrder) {
  TestItems items{{"a", "b", "c", "d"}, {false, false, false, false}};
  // No boundary inside: everything goes to 0 or 4.
  const std::vector<Insertion> ins = {{"X1", 0.3, true}, {"X2", 0.1, false}, {"X3", 0.9, false}, {"X4", 0.6, false}};
  const RenderedContext r = render_context(items.source(), 4, ins);
  EXPECT_EQ(r.text, "X1 X2 a b c d X3 X4");
  EXPECT_EQ(r.needles[0].char_offset, 0);
  EXPECT_EQ(r.needles[1].char_offset, 3);
  EXPECT_DOUBLE_EQ(r.needles[2].depth, 1.0);
  EXPECT_EQ(r.needles[3].char_offset, 17);
}

TEST(EvalHaystack, EmptyHaystackAndItemSeparators) {
  const RenderedContext empty = render_context(item_pieces([](int64_t) { return std::string_view("x"); }, ", "), 0,
                                               std::vector<Insertion>{{"N", 0.5, true}});
  EXPECT_EQ(empty.text, "N");
  EXPECT_DOUBLE_EQ(empty.needles[0].depth, 0.0);
  const std::vector<std::string> names = {"a", "b", "c"};
  const RenderedContext r = render_context(
      item_pieces([&](int64_t i) { return std::string_view(names[static_cast<size_t>(i)]); }, ", "), 3,
      std::vector<Insertion>{{"Q", 0.34, true}});
  EXPECT_EQ(r.text, "a, Q, b, c");
  EXPECT_DOUBLE_EQ(r.needles[0].depth, 1.0 / 3.0);
}

TEST(EvalHaystack, NoiseStreamCycles) {
  const WordStream& s = WordStream::get(Split::kEval, HaystackKind::kNoise);
  EXPECT_EQ(s.period(), 19);  // "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
  EXPECT_EQ(s.word(0, 0), "The");
  EXPECT_EQ(s.word(0, 3), "green.");
  EXPECT_TRUE(s.sentence_end(0, 3));
  EXPECT_FALSE(s.sentence_end(0, 2));
  EXPECT_EQ(s.word(0, 18), "again.");
  EXPECT_EQ(s.word(0, 19), "The");
  EXPECT_EQ(s.word(5, 14), "The");  // wraps
  EXPECT_EQ(s.word(3, -4), "again.");  // negative offsets wrap too
  EXPECT_TRUE(s.sentence_end(0, 18));
  EXPECT_FALSE(s.paragraph_end(0, 18));
  EXPECT_TRUE(s.source_contains("sky is blue"));
  ASSERT_EQ(s.sentence_count(), 5u);
  EXPECT_EQ(s.sentence(0), "The grass is green.");
  EXPECT_EQ(s.sentence(4), "There and back again.");
}

// The train noise mixes runs of a short repeated cycle (like the dev and eval noise, 5 sentences
// repeated) with unrepeated runs: windows of 60 sentences are found of both kinds, with every cycle
// length 3..8 among the repeated ones, the runs differ from each other, some cycles are the train
// book's sentences (openings other than The / A / An), the grammar's sentences open with an adverb or a
// particle now and then but never as the dev noise's do, and no word holds two capitals in a row (vt's
// variables are five capitals).
TEST(EvalHaystack, TrainNoiseMixesRepeatedCyclesAndUnrepeatedRuns) {
  const WordStream& s = WordStream::get(Split::kTrain, HaystackKind::kNoise);
  std::vector<std::string_view> sentences;
  for (size_t i = 0; i < s.sentence_count(); ++i) sentences.push_back(s.sentence(i));
  ASSERT_GT(sentences.size(), 20000u);
  // The smallest period <= 8 of sentences [b, b + 60), or 0 for none.
  auto window_period = [&](size_t b) {
    for (size_t p = 1; p <= 8; ++p) {
      bool periodic = true;
      for (size_t i = b + p; periodic && i < b + 60; ++i) periodic = sentences[i] == sentences[i - p];
      if (periodic) return static_cast<int>(p);
    }
    return 0;
  };
  for (int64_t i = 0; i < s.period(); ++i) {
    const std::string_view w = s.word(0, i);
    for (size_t c = 1; c < w.size(); ++c) ASSERT_FALSE(std::isupper(w[c - 1]) && std::isupper(w[c])) << w;
  }
  std::set<int> periods;
  std::set<std::string_view> cycle_openings;
  int book_cycles = 0;
  int unrepeated = 0;
  for (size_t b = 0; b + 60 < sentences.size(); b += 500) {
    const int p = window_period(b);
    if (p == 0) {
      ++unrepeated;
    } else {
      periods.insert(p);
      cycle_openings.insert(sentences[b]);
      const std::string_view first = sentences[b].substr(0, sentences[b].find(' '));
      book_cycles += first != "The" && first != "A" && first != "An";
    }
  }
  for (int p = 3; p <= 8; ++p) EXPECT_TRUE(periods.count(p)) << "no repeated run of period " << p;
  EXPECT_EQ(*periods.begin(), 3);  // a cycle of 1 or 2 sentences would not read like the dev noise
  EXPECT_GT(unrepeated, 5);
  EXPECT_GT(cycle_openings.size(), 30u);
  EXPECT_GT(book_cycles, 5);
  // The grammar's other openers: an adverb before the subject ("Quietly the hill sleeps."), a particle before a pronoun
  // ("Up they climb."); never the dev noise's own ("Slowly the day fades.", "On we walk.").
  // An adverb-first sentence is counted when its rest is itself a sentence of the stream ("The hill sleeps."), a
  // particle-first one when it has three words with a pronoun second.
  const std::set<std::string_view> all(sentences.begin(), sentences.end());
  int adverb_first = 0, particle_first = 0;
  for (const std::string_view sentence : sentences) {
    const size_t space = sentence.find(' ');
    ASSERT_NE(space, std::string_view::npos) << sentence;
    if (sentence.substr(0, 4) != "The " && sentence.substr(space, 5) == " the ") {
      adverb_first += all.count("The " + std::string(sentence.substr(space + 5))) > 0;
    }
    for (const std::string_view pronoun : {" they ", " she ", " he ", " you ", " I "}) {
      particle_first += sentence.find(pronoun) == space && std::count(sentence.begin(), sentence.end(), ' ') == 2;
    }
    EXPECT_NE(sentence.substr(0, 7), "Slowly ");
  }
  EXPECT_GT(adverb_first, 1000);
  EXPECT_GT(particle_first, 300);
  // No sentence of the dev or eval noise.
  EXPECT_FALSE(s.source_contains("On we walk."));
  EXPECT_FALSE(s.source_contains("The road is long."));
  EXPECT_FALSE(s.source_contains("The sky is blue."));
}

TEST(EvalHaystack, NaturalStreamStartsAtSentences) {
  for (const Split split : {Split::kTrain, Split::kDev, Split::kEval}) {
    const WordStream& s = WordStream::get(split, HaystackKind::kNatural);
    EXPECT_GT(s.period(), 25000);  // ~160 KB of prose
    DetRng rng(5);
    for (int i = 0; i < 20; ++i) {
      const int64_t start = s.random_sentence_start(rng);
      ASSERT_GE(start, 0);
      ASSERT_LT(start, s.period());
      EXPECT_TRUE(s.sentence_end(start, -1) || start == 0) << split_name(split) << " " << start;
    }
    // The stream's last word closes a paragraph, so the wrap starts a new one.
    EXPECT_TRUE(s.paragraph_end(0, s.period() - 1));
    // sentence(i) holds the words from one sentence start to the next sentence end, in order, and no line break.
    size_t sentence = 0;
    std::string words;
    for (int64_t i = 0; i < s.period() && sentence < 300; ++i) {
      if (!words.empty()) words.push_back(' ');
      words.append(s.word(0, i));
      if (!s.sentence_end(0, i)) continue;
      std::string text(s.sentence(sentence));
      EXPECT_EQ(text.find('\n'), std::string::npos) << text;
      for (size_t d; (d = text.find("  ")) != std::string::npos;) text.erase(d, 1);
      EXPECT_EQ(text, words) << split_name(split) << " sentence " << sentence;
      ++sentence;
      words.clear();
    }
    EXPECT_TRUE(s.sentence(s.sentence_count() - 1).ends_with(s.word(0, s.period() - 1)));  // the last one
  }
  EXPECT_TRUE(WordStream::get(Split::kEval, HaystackKind::kNatural).source_contains("Kellynch"));
  EXPECT_FALSE(WordStream::get(Split::kTrain, HaystackKind::kNatural).source_contains("Kellynch"));
}

}  // namespace
}  // namespace kascade::eval
