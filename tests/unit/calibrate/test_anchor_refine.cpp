// test_anchor_refine.cpp — the refinement's local search (src/calibrate/anchor_refine.cpp) with
// synthetic scorers, against independent references:
//   - the swap neighbourhood equals the filter "K-sets with layer 0 sharing K − 1 anchors" over every
//     K-set of up to 8 layers (bitmask enumeration), (K − 1)(N − K) of them, lexicographic;
//   - a unimodal objective (overlap with a target set, KL tie-break): from every start the climb ends
//     at the brute-force optimum over all K-sets;
//   - random objectives: the climb ends at a set no neighbour beats (checked by brute force over its
//     neighbourhood), each move goes to the best neighbour, scores rise, every set is scored once,
//     and on some seeds that local optimum is not the global one (the climb is local);
//   - the round limit, ties (agreement as fractions, then KL, then the first set), the score order,
//     empty neighbourhoods, progress counts, scorer errors and refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kascade/calibration.h"
#include "testing/harness.h"

namespace kascade::calib {
namespace {

using Set = std::vector<int32_t>;

// Every K-subset of 0..N-1 that holds layer 0, ascending, by bitmask.
std::vector<Set> all_sets_with_zero(int32_t N, int32_t K) {
  std::vector<Set> out;
  for (uint32_t mask = 0; mask < (1u << N); ++mask) {
    if ((mask & 1u) == 0 || __builtin_popcount(mask) != K) continue;
    Set s;
    for (int32_t l = 0; l < N; ++l)
      if (mask & (1u << l)) s.push_back(l);
    out.push_back(s);
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t shared(const Set& a, const Set& b) {
  size_t n = 0;
  for (int32_t x : a) n += std::count(b.begin(), b.end(), x);
  return n;
}

std::vector<Set> filtered_neighbours(const Set& a, int32_t N) {
  std::vector<Set> out;
  for (const Set& b : all_sets_with_zero(N, static_cast<int32_t>(a.size())))
    if (shared(a, b) + 1 == a.size()) out.push_back(b);
  return out;
}

// A scorer over a fixed table that counts how often each set is asked for.
struct TableScorer {
  std::map<Set, AgreementScore> table;
  std::map<Set, int> calls;
  AnchorScorer fn() {
    return [this](std::span<const int32_t> anchors) -> Result<AgreementScore> {
      const Set s(anchors.begin(), anchors.end());
      calls[s] += 1;
      const auto it = table.find(s);
      if (it == table.end()) return internal_error("no score for this set");
      return it->second;
    };
  }
};

TEST(AnchorRefine, NeighbourhoodIsEverySetSharingAllButOneAnchor) {
  int64_t checked = 0;
  for (int32_t N = 1; N <= 8; ++N) {
    for (int32_t K = 1; K <= N; ++K) {
      for (const Set& a : all_sets_with_zero(N, K)) {
        auto got = anchor_swap_neighbours(a, N);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        EXPECT_EQ(*got, filtered_neighbours(a, N)) << "N " << N << " anchors " << format_anchors(a);
        EXPECT_EQ(static_cast<int32_t>(got->size()), (K - 1) * (N - K));
        EXPECT_TRUE(std::is_sorted(got->begin(), got->end()));
        for (const Set& b : *got) {
          EXPECT_TRUE(validate_anchors(b, N).ok()) << format_anchors(b);
          EXPECT_EQ(b.front(), 0) << "layer 0 stays an anchor";
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 255);  // sum over N of 2^(N-1) sets holding layer 0
  EXPECT_FALSE(anchor_swap_neighbours(Set{1, 2}, 4).ok()) << "layer 0 missing";
  EXPECT_FALSE(anchor_swap_neighbours(Set{0, 3, 2}, 4).ok()) << "not ascending";
  EXPECT_FALSE(anchor_swap_neighbours(Set{0, 4}, 4).ok()) << "out of range";
}

TEST(AnchorRefine, ScoreOrderComparesAgreementAsFractionsThenKl) {
  EXPECT_TRUE(better_agreement(AgreementScore{2, 3, 9.0}, AgreementScore{3, 5, 0.0}));   // 2/3 > 3/5
  EXPECT_FALSE(better_agreement(AgreementScore{3, 5, 0.0}, AgreementScore{2, 3, 9.0}));
  EXPECT_TRUE(better_agreement(AgreementScore{2, 6, 0.5}, AgreementScore{1, 3, 0.6}));   // equal fractions: KL decides
  EXPECT_FALSE(better_agreement(AgreementScore{1, 3, 0.6}, AgreementScore{2, 6, 0.5}));
  EXPECT_FALSE(better_agreement(AgreementScore{1, 3, 0.5}, AgreementScore{1, 3, 0.5}));  // equal: not better
  EXPECT_DOUBLE_EQ((AgreementScore{3, 4, 0}.agreement()), 0.75);
  EXPECT_EQ((AgreementScore{0, 0, 0}.agreement()), 0.0);
}

// Overlap with `target` (steps K), a KL that is lowest at the target: unimodal over the swap graph.
std::map<Set, AgreementScore> overlap_table(int32_t N, int32_t K, const Set& target, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.1, 1.0);
  std::vector<double> weight(static_cast<size_t>(N));
  for (double& w : weight) w = u(rng);
  std::map<Set, AgreementScore> table;
  for (const Set& s : all_sets_with_zero(N, K)) {
    double kl = 0.0;
    for (int32_t l : s)
      if (std::find(target.begin(), target.end(), l) == target.end()) kl += weight[static_cast<size_t>(l)];
    table[s] = AgreementScore{static_cast<int64_t>(shared(s, target)), K, kl};
  }
  return table;
}

TEST(AnchorRefine, UnimodalObjectiveClimbsToTheBruteForceOptimumFromEveryStart) {
  const int32_t N = 7;
  int64_t climbs = 0;
  for (int32_t K = 1; K <= 5; ++K) {
    auto rng = testing::rng_for_test(static_cast<uint64_t>(K));
    std::vector<Set> sets = all_sets_with_zero(N, K);
    const Set target = sets[std::uniform_int_distribution<size_t>(0, sets.size() - 1)(rng)];
    TableScorer scorer;
    scorer.table = overlap_table(N, K, target, rng);
    // Brute force over every K-set.
    Set best = sets.front();
    for (const Set& s : sets)
      if (better_agreement(scorer.table[s], scorer.table[best])) best = s;
    ASSERT_EQ(best, target);
    for (const Set& start : sets) {
      scorer.calls.clear();
      auto climb = hill_climb_anchors(start, N, /*max_rounds=*/K + 1, scorer.fn());
      ASSERT_TRUE(climb.ok()) << climb.status().to_string();
      EXPECT_EQ(climb->best.anchors, best) << "K " << K << " from " << format_anchors(start);
      EXPECT_TRUE(climb->local_optimum);
      EXPECT_EQ(climb->start.anchors, start);
      EXPECT_EQ(climb->start.score, scorer.table[start]);
      EXPECT_EQ(climb->best.score, scorer.table[best]);
      // One move per anchor outside the target (each swap gains one), then one scan that stops.
      const size_t moves = start == best ? 0 : static_cast<size_t>(K) - shared(start, best);
      EXPECT_EQ(climb->rounds.size(), K == 1 || K == N ? 0 : moves + 1) << format_anchors(start);
      ++climbs;
    }
  }
  EXPECT_EQ(climbs, 1 + 6 + 15 + 20 + 15);
}

TEST(AnchorRefine, RandomObjectivesStopAtALocalOptimumScoringEachSetOnce) {
  const int32_t N = 8;
  int not_global = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    auto rng = testing::rng_for_test(seed);
    const int32_t K = std::uniform_int_distribution<int32_t>(2, 5)(rng);
    const std::vector<Set> sets = all_sets_with_zero(N, K);
    TableScorer scorer;
    const int64_t steps = 20;
    std::uniform_int_distribution<int64_t> matches(0, steps);
    std::uniform_real_distribution<double> kl(0.0, 2.0);
    for (const Set& s : sets) scorer.table[s] = AgreementScore{matches(rng), steps, kl(rng)};
    const Set start = sets[std::uniform_int_distribution<size_t>(0, sets.size() - 1)(rng)];
    auto climb = hill_climb_anchors(start, N, /*max_rounds=*/100, scorer.fn());
    ASSERT_TRUE(climb.ok()) << climb.status().to_string();
    ASSERT_TRUE(climb->local_optimum) << "seed " << seed;
    for (const Set& b : filtered_neighbours(climb->best.anchors, N))
      EXPECT_FALSE(better_agreement(scorer.table[b], climb->best.score)) << "seed " << seed << " " << format_anchors(b);
    // Each round scans the neighbourhood of the previous round's set and moves to its best member.
    Set current = start;
    for (size_t r = 0; r < climb->rounds.size(); ++r) {
      const ClimbRound& round = climb->rounds[r];
      EXPECT_EQ(round.from, current);
      std::vector<Set> scanned;
      for (const ScoredAnchors& c : round.candidates) {
        scanned.push_back(c.anchors);
        EXPECT_EQ(c.score, scorer.table[c.anchors]);
      }
      EXPECT_EQ(scanned, filtered_neighbours(current, N));
      for (size_t i = 0; i < round.candidates.size(); ++i) {
        EXPECT_FALSE(better_agreement(round.candidates[i].score, round.candidates[round.best].score));
        if (i < round.best) {
          EXPECT_TRUE(better_agreement(round.candidates[round.best].score, round.candidates[i].score));
        }
      }
      const bool last = r + 1 == climb->rounds.size();
      EXPECT_EQ(round.moved, !last);
      if (round.moved) {
        EXPECT_TRUE(better_agreement(round.candidates[round.best].score, scorer.table[current]));
        current = round.candidates[round.best].anchors;
      }
    }
    EXPECT_EQ(current, climb->best.anchors);
    for (const auto& [set, n] : scorer.calls) EXPECT_EQ(n, 1) << "scored twice: " << format_anchors(set);
    EXPECT_EQ(climb->sets_scored, static_cast<int64_t>(scorer.calls.size()));
    Set global = sets.front();
    for (const Set& s : sets)
      if (better_agreement(scorer.table[s], scorer.table[global])) global = s;
    not_global += climb->best.anchors != global ? 1 : 0;
  }
  EXPECT_GT(not_global, 0) << "random objectives should trap a local search somewhere";
}

TEST(AnchorRefine, RoundLimitStopsAfterThatManyMoves) {
  const int32_t N = 8, K = 4;
  auto rng = testing::rng_for_test();
  TableScorer scorer;
  const Set target = {0, 5, 6, 7};
  scorer.table = overlap_table(N, K, target, rng);
  const Set start = {0, 1, 2, 3};
  auto one = hill_climb_anchors(start, N, 1, scorer.fn());
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->rounds.size(), 1u);
  EXPECT_FALSE(one->local_optimum) << "it moved and had no round left to check";
  EXPECT_EQ(shared(one->best.anchors, target), 2u);
  EXPECT_EQ(one->sets_scored, 1 + (K - 1) * (N - K));
  auto none = hill_climb_anchors(start, N, 0, scorer.fn());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->rounds.empty());
  EXPECT_EQ(none->best.anchors, start);
  EXPECT_EQ(none->sets_scored, 1);
  auto three = hill_climb_anchors(start, N, 3, scorer.fn());
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->best.anchors, target);
  EXPECT_FALSE(three->local_optimum) << "three moves used the three rounds";
}

TEST(AnchorRefine, TiesKeepTheCurrentSetAndPickTheFirstNeighbour) {
  const int32_t N = 4;  // two anchors: sets {0,1}, {0,2}, {0,3}
  TableScorer scorer;
  scorer.table[{0, 1}] = AgreementScore{1, 2, 0.5};
  scorer.table[{0, 2}] = AgreementScore{2, 4, 0.5};  // the same fraction and KL: not better
  scorer.table[{0, 3}] = AgreementScore{1, 2, 0.5};
  auto tie = hill_climb_anchors(Set{0, 1}, N, 3, scorer.fn());
  ASSERT_TRUE(tie.ok());
  EXPECT_EQ(tie->best.anchors, (Set{0, 1}));
  EXPECT_TRUE(tie->local_optimum);
  ASSERT_EQ(tie->rounds.size(), 1u);
  EXPECT_EQ(tie->rounds[0].best, 0u) << "equal neighbours: the first in lexicographic order";
  EXPECT_FALSE(tie->rounds[0].moved);
  scorer.table[{0, 2}] = AgreementScore{1, 2, 0.25};  // same agreement, lower KL: better
  scorer.table[{0, 3}] = AgreementScore{1, 2, 0.25};
  auto kl = hill_climb_anchors(Set{0, 1}, N, 3, scorer.fn());
  ASSERT_TRUE(kl.ok());
  EXPECT_EQ(kl->best.anchors, (Set{0, 2}));
}

TEST(AnchorRefine, EmptyNeighbourhoodsProgressErrorsAndRefusals) {
  TableScorer scorer;
  scorer.table[{0}] = AgreementScore{1, 1, 0.0};
  scorer.table[{0, 1, 2}] = AgreementScore{1, 1, 0.0};
  for (const Set& s : {Set{0}, Set{0, 1, 2}}) {
    auto c = hill_climb_anchors(s, 3, 3, scorer.fn());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(c->rounds.empty());
    EXPECT_TRUE(c->local_optimum);
    EXPECT_EQ(c->best.anchors, s);
  }

  // Progress: at the start of a round, the sets not scored before; then one call per set scored.
  const int32_t N = 6, K = 3;
  auto rng = testing::rng_for_test();
  TableScorer climb;
  climb.table = overlap_table(N, K, Set{0, 4, 5}, rng);
  std::vector<HillClimbProgress> seen;
  auto c = hill_climb_anchors(Set{0, 1, 2}, N, 5, climb.fn(), [&](const HillClimbProgress& p) { seen.push_back(p); });
  ASSERT_TRUE(c.ok());
  std::set<Set> scored = {{0, 1, 2}};
  size_t at = 0;
  for (size_t r = 0; r < c->rounds.size(); ++r) {
    int64_t fresh = 0;
    for (const Set& b : filtered_neighbours(c->rounds[r].from, N)) fresh += scored.count(b) == 0 ? 1 : 0;
    ASSERT_LT(at, seen.size());
    EXPECT_EQ(seen[at].round, static_cast<int32_t>(r + 1));
    EXPECT_EQ(seen[at].max_rounds, 5);
    EXPECT_EQ(seen[at].scored_in_round, 0);
    EXPECT_EQ(seen[at].to_score_in_round, fresh);
    for (int64_t i = 1; i <= fresh; ++i) {
      ASSERT_LT(at + static_cast<size_t>(i), seen.size());
      EXPECT_EQ(seen[at + static_cast<size_t>(i)].scored_in_round, i);
    }
    at += static_cast<size_t>(fresh) + 1;
    for (const ScoredAnchors& cand : c->rounds[r].candidates) scored.insert(cand.anchors);
  }
  EXPECT_EQ(at, seen.size());
  EXPECT_EQ(seen.back().sets_scored, c->sets_scored);

  // A scorer error comes back naming the set.
  TableScorer partial;
  partial.table[{0, 1, 2}] = AgreementScore{1, 2, 0.0};
  auto failed = hill_climb_anchors(Set{0, 1, 2}, N, 1, partial.fn());
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().to_string().find("scoring anchors 0,1,3"), std::string::npos)
      << failed.status().to_string();
  EXPECT_FALSE(hill_climb_anchors(Set{0, 1, 2}, N, -1, climb.fn()).ok());
  EXPECT_FALSE(hill_climb_anchors(Set{1, 2}, N, 1, climb.fn()).ok());
  EXPECT_FALSE(hill_climb_anchors(Set{0, 1}, N, 1, AnchorScorer{}).ok());
  EXPECT_EQ(format_anchors(Set{0, 2, 10}), "0,2,10");
  EXPECT_EQ(parse_refine_method("agreement").value(), RefineMethod::kAgreement);
  EXPECT_EQ(parse_refine_method("none").value(), RefineMethod::kNone);
  EXPECT_FALSE(parse_refine_method("accuracy").ok());
}

}  // namespace
}  // namespace kascade::calib
