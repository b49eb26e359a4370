// tests/cuda/test_prefill_plan.cpp — the host half of the prefill ops, no GPU needed:
// supports_prefill refusals (dtype, head dim, group size, tile rows), the tile-slot bound the
// anchor's waves must cover (against brute force over start offsets), the plan's layout (waves
// cover every slot, regions aligned and disjoint, selection memory at 128K bounded by the budget
// and far below the paper's O(n²/T) score buffer), the kernel choice (options → plan → per-call
// kernel from the K/V layout, hand-enumerated), the TMA producer's eligible K/V layouts, run-time
// refusals of bad views (each naming the field, before any device work), and the names of the
// device error bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/common/device_errors.h"
#include "cuda/prefill/causal_launch.h"
#include "cuda/prefill/prefill_errors.h"
#include "cuda/prefill/prefill_ops.h"
#include "cuda/prefill/prefill_shapes.h"
#include "cuda/prefill/ws_tensor_map.h"

namespace kascade::cuda {
namespace {

PrefillShape llama_shape(int32_t n) {
  PrefillShape s;
  s.dtype = DType::kBF16;
  s.batch = 1;
  s.num_heads = 32;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.max_total_q = n;
  s.max_q_len = n;
  s.max_kv_len = n;
  return s;
}

TEST(PrefillPlan, SupportsRefusesWhatIsNotBuilt) {
  EXPECT_TRUE(supports_prefill(llama_shape(1000)).ok());
  PrefillShape s = llama_shape(1000);
  s.dtype = DType::kF32;
  EXPECT_EQ(supports_prefill(s).code(), StatusCode::kInvalidArgument);
  s = llama_shape(1000);
  s.head_dim = 96;
  Status st = supports_prefill(s);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("head_dim is 96"), std::string::npos) << st.message();
  s = llama_shape(1000);
  s.num_kv_heads = 2;  // g = 16
  st = supports_prefill(s);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("group size is 16"), std::string::npos) << st.message();
  s = llama_shape(1000);
  s.num_kv_heads = 5;  // 32 % 5 != 0
  EXPECT_EQ(supports_prefill(s).code(), StatusCode::kInvalidArgument);
  s = llama_shape(1000);
  s.num_kv_heads = 4;  // g = 8
  s.tile_size = 64;    // 512 rows per tile
  EXPECT_EQ(supports_prefill(s).code(), StatusCode::kUnsupported);
  s.tile_size = 32;  // 256 rows: allowed
  EXPECT_TRUE(supports_prefill(s).ok());
  s = llama_shape(1000);
  s.max_kv_len = 10;  // shorter than max_q_len
  EXPECT_EQ(supports_prefill(s).code(), StatusCode::kInvalidArgument);
}

// The most tiles q_len positions can touch, by brute force over the start position.
int64_t brute_force_tiles(int64_t q_len, int64_t tile_size) {
  int64_t best = 0;
  for (int64_t start = 0; start < 3 * tile_size; ++start) {
    if (q_len == 0) break;
    best = std::max(best, (start + q_len - 1) / tile_size - start / tile_size + 1);
  }
  return best;
}

TEST(PrefillPlan, TileSlotBoundsMatchBruteForce) {
  for (int64_t tile_size : {1, 2, 7, 32}) {
    for (int64_t q_len = 0; q_len <= 200; ++q_len) {
      ASSERT_EQ(prefill::max_tiles_per_sequence(q_len, tile_size), brute_force_tiles(q_len, tile_size))
          << "q_len " << q_len << " tile " << tile_size;
    }
  }
  // A call's slots: any split of max_total_q over the batch stays within the bound.
  for (int64_t tile_size : {1, 5, 32}) {
    for (int64_t total = 1; total <= 70; total += 3) {
      const int64_t batch = 3;
      const int64_t bound = prefill::max_call_slots(batch, total, total, tile_size);
      for (int64_t a = 0; a <= total; ++a) {
        for (int64_t b = 0; a + b <= total; ++b) {
          const int64_t slots = brute_force_tiles(a, tile_size) + brute_force_tiles(b, tile_size) +
                                brute_force_tiles(total - a - b, tile_size);
          ASSERT_LE(slots, bound) << "split " << a << "+" << b << "+" << total - a - b << " tile " << tile_size;
        }
      }
    }
  }
}

// Whether a schedule's unit lies in [0, row_blocks) × [0, consumers) × [0, batch).
::testing::AssertionResult CoordsInRange(const prefill::WsUnitCoords& at, int64_t row_blocks, int consumers,
                                         int batch) {
  if (at.row_block < 0 || at.row_block >= row_blocks || at.kv_head < 0 || at.kv_head >= consumers || at.b < 0 ||
      at.b >= batch) {
    return ::testing::AssertionFailure() << "(row block " << at.row_block << ", consumer " << at.kv_head
                                         << ", sequence " << at.b << ") outside " << row_blocks << " × " << consumers
                                         << " × " << batch;
  }
  return ::testing::AssertionSuccess();
}

// The warp-specialised kernels' persistent schedule (prefill_params.h: ws_unit_coords, prefill_shapes.h:
// dense_row_blocks, ws_grid_ctas): every (row block, KV group, sequence) is taken exactly once over
// all CTAs, row blocks never increase along a CTA's walk (longest key lists first), and the grid
// never exceeds the units or the multiprocessors.
TEST(PrefillPlan, WarpSpecializedScheduleCoversEveryUnitOnce) {
  for (const auto& [max_q_len, group, kv_heads, batch, sms] :
       {std::tuple{1000, 4, 8, 1, 132}, std::tuple{1, 1, 1, 1, 132}, std::tuple{4097, 8, 2, 3, 7},
        std::tuple{129, 3, 4, 5, 132}}) {
    const int64_t row_blocks = prefill::dense_row_blocks(max_q_len, group);
    ASSERT_EQ(row_blocks, (int64_t{max_q_len} * group + 127) / 128);
    const int64_t units = row_blocks * kv_heads * batch;
    const int ctas = prefill::ws_grid_ctas(units, sms);
    ASSERT_GE(ctas, 1);
    ASSERT_LE(ctas, std::min<int64_t>(units, sms));
    std::vector<int> seen(static_cast<size_t>(units), 0);
    for (int cta = 0; cta < ctas; ++cta) {
      int last_block = static_cast<int>(row_blocks);
      for (int64_t u = cta; u < units; u += ctas) {
        const prefill::WsUnitCoords at =
            prefill::ws_unit_coords(static_cast<int>(u), static_cast<int>(row_blocks), kv_heads, batch);
        ASSERT_TRUE(CoordsInRange(at, row_blocks, kv_heads, batch)) << "unit " << u;
        ASSERT_LE(at.row_block, last_block) << "unit " << u << " of CTA " << cta;
        last_block = at.row_block;
        ++seen[(static_cast<size_t>(at.row_block) * batch + at.b) * kv_heads + at.kv_head];
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "unit " << i;
  }
}

// The sparse (gathered) kernel's schedule (prefill_params.h: ws_gathered_unit_coords): every (row
// block, row consumer, sequence) is taken exactly once; units come one (sequence, consumer) at a time,
// so a window of consecutive units (the CTAs in flight) spans at most two consumers; within a
// consumer, row blocks go from the last to the first.
TEST(PrefillPlan, WarpSpecializedGatheredScheduleWalksOneConsumerAtATime) {
  for (const auto& [row_blocks, consumers, batch] :
       {std::tuple{4096, 8, 1}, std::tuple{1, 1, 1}, std::tuple{33, 32, 3}, std::tuple{7, 4, 5}}) {
    const int units = row_blocks * consumers * batch;
    std::vector<int> seen(static_cast<size_t>(units), 0);
    prefill::WsUnitCoords previous{};
    for (int u = 0; u < units; ++u) {
      const prefill::WsUnitCoords at = prefill::ws_gathered_unit_coords(u, row_blocks, consumers);
      ASSERT_TRUE(CoordsInRange(at, row_blocks, consumers, batch)) << "unit " << u;
      if (u > 0 && at.kv_head == previous.kv_head && at.b == previous.b) {
        ASSERT_EQ(at.row_block, previous.row_block - 1) << "unit " << u;
      } else {
        ASSERT_EQ(at.row_block, row_blocks - 1) << "unit " << u << " starts a consumer at its last row block";
      }
      previous = at;
      ++seen[(static_cast<size_t>(at.b) * consumers + at.kv_head) * row_blocks + at.row_block];
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "unit " << i;
  }
}

// The warp-specialised pooled-score kernel's schedule (prefill_params.h: ws_pool_unit_coords): every
// (wave slot, KV group, key chunk) is taken exactly once over all CTAs, and the chunks cover every
// key tile of the longest candidate list exactly once.
TEST(PrefillPlan, WarpSpecializedPoolScheduleCoversEveryUnitOnce) {
  for (const auto& [wave_slots, kv_heads, max_kv_len, sms] :
       {std::tuple{64, 8, 131072, 132}, std::tuple{1, 1, 1, 132}, std::tuple{9, 2, 4097, 7}, std::tuple{3, 4, 2048, 5}}) {
    const int key_tiles = (max_kv_len + prefill::kWsBlockKeys - 1) / prefill::kWsBlockKeys;
    const int chunks = (key_tiles + prefill::kWsPoolChunkTiles - 1) / prefill::kWsPoolChunkTiles;
    const int64_t units = int64_t{wave_slots} * kv_heads * chunks;
    const int ctas = prefill::ws_grid_ctas(units, sms);
    std::vector<int> seen(static_cast<size_t>(units), 0);
    std::vector<int> tile_seen(static_cast<size_t>(wave_slots) * kv_heads * key_tiles, 0);
    for (int cta = 0; cta < ctas; ++cta) {
      for (int64_t u = cta; u < units; u += ctas) {
        const prefill::WsPoolUnitCoords at = prefill::ws_pool_unit_coords(static_cast<int>(u), wave_slots, kv_heads);
        ASSERT_GE(at.slot, 0);
        ASSERT_LT(at.slot, wave_slots);
        ASSERT_GE(at.group, 0);
        ASSERT_LT(at.group, kv_heads);
        ASSERT_GE(at.chunk, 0);
        ASSERT_LT(at.chunk, chunks);
        ++seen[(static_cast<size_t>(at.chunk) * kv_heads + at.group) * wave_slots + at.slot];
        const int t0 = at.chunk * prefill::kWsPoolChunkTiles;
        for (int t = t0; t < std::min(key_tiles, t0 + prefill::kWsPoolChunkTiles); ++t) {
          ++tile_seen[(static_cast<size_t>(at.slot) * kv_heads + at.group) * key_tiles + t];
        }
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "unit " << i;
    for (size_t i = 0; i < tile_seen.size(); ++i) ASSERT_EQ(tile_seen[i], 1) << "key tile " << i;
  }
}

// The forced kernel variants reach the plan as given (whether or not the warp-specialised kernels
// are ready: plan_prefill refuses them where they cannot run), with the multiprocessor count of the
// persistent grids and the same workspace for every variant.
TEST(PrefillPlan, LayoutKeepsForcedKernelsAndMultiprocessors) {
  PrefillShape shape = llama_shape(4096);
  shape.batch = 2;
  shape.max_kv_len = 8192;
  PrefillPlanOptions options;
  options.kernels = PrefillKernels::kMma;
  auto reference = layout_prefill_plan(shape, options, 132, 1, /*warp_specialized_ready=*/true);
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  EXPECT_EQ(reference->kernels, PrefillKernels::kMma);
  EXPECT_FALSE(reference->uses_wgmma());
  for (const PrefillKernels forced : {PrefillKernels::kWgmma, PrefillKernels::kWarpSpecialized,
                                      PrefillKernels::kWarpSpecializedTma}) {
    for (const bool ready : {false, true}) {
      SCOPED_TRACE(std::string(prefill_kernels_name(forced)) + (ready ? ", ws ready" : ", ws not ready"));
      options.kernels = forced;
      auto plan = layout_prefill_plan(shape, options, 132, 1, ready);
      ASSERT_TRUE(plan.ok()) << plan.status().to_string();
      EXPECT_EQ(plan->kernels, forced);
      EXPECT_EQ(plan->uses_wgmma(), forced == PrefillKernels::kWgmma);
      EXPECT_EQ(plan->num_sms, 132);
      EXPECT_EQ(plan->workspace.total_bytes, reference->workspace.total_bytes);
    }
  }
}

// The default options ask for the automatic choice; the plan keeps it only where the
// warp-specialised kernels are ready (sm_90 device, sm_90a code), else it is plain mma.sync.
TEST(PrefillPlan, DefaultKernelsAreAutomaticWhereTheWarpSpecializedFamilyIsReady) {
  EXPECT_EQ(PrefillPlanOptions{}.kernels, PrefillKernels::kAuto);
  auto hopper = layout_prefill_plan(llama_shape(4096), PrefillPlanOptions{}, 132, 1, /*warp_specialized_ready=*/true);
  ASSERT_TRUE(hopper.ok()) << hopper.status().to_string();
  EXPECT_EQ(hopper->kernels, PrefillKernels::kAuto);
  EXPECT_FALSE(hopper->uses_wgmma());
  auto other = layout_prefill_plan(llama_shape(4096), PrefillPlanOptions{}, 108, 1, /*warp_specialized_ready=*/false);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_EQ(other->kernels, PrefillKernels::kMma);
  EXPECT_FALSE(other->uses_wgmma());
  // The device-free default argument is "not ready" (what the backend tests' CPU layouts rely on).
  auto unspecified = layout_prefill_plan(llama_shape(4096), PrefillPlanOptions{}, 132, 1);
  ASSERT_TRUE(unspecified.ok());
  EXPECT_EQ(unspecified->kernels, PrefillKernels::kMma);
  EXPECT_EQ(hopper->workspace.total_bytes, other->workspace.total_bytes);

  PrefillPlanOptions bad;
  bad.kernels = static_cast<PrefillKernels>(17);
  auto refused = layout_prefill_plan(llama_shape(4096), bad, 132, 1, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().to_string().find("options.kernels"), std::string::npos) << refused.status().to_string();
}

// The per-call choice, hand-enumerated for every plan kernel setting × TMA eligibility: the
// automatic choice never runs the cp.async producer; the forced variants run what they name.
TEST(PrefillPlan, ChooseCausalKernelTable) {
  using prefill::CausalKernel;
  const struct {
    PrefillKernels kernels;
    bool eligible;
    CausalKernel want;
  } cases[] = {
      {PrefillKernels::kAuto, true, CausalKernel::kWarpSpecializedTma},
      {PrefillKernels::kAuto, false, CausalKernel::kMma},
      {PrefillKernels::kMma, true, CausalKernel::kMma},
      {PrefillKernels::kMma, false, CausalKernel::kMma},
      {PrefillKernels::kWgmma, true, CausalKernel::kWgmma},
      {PrefillKernels::kWgmma, false, CausalKernel::kWgmma},
      {PrefillKernels::kWarpSpecialized, true, CausalKernel::kWarpSpecialized},
      {PrefillKernels::kWarpSpecialized, false, CausalKernel::kWarpSpecialized},
      {PrefillKernels::kWarpSpecializedTma, true, CausalKernel::kWarpSpecializedTma},
      {PrefillKernels::kWarpSpecializedTma, false, CausalKernel::kWarpSpecialized},
  };
  for (const auto& c : cases) {
    PrefillPlan plan;
    plan.kernels = c.kernels;
    SCOPED_TRACE(std::string(prefill_kernels_name(c.kernels)) + (c.eligible ? ", TMA-eligible" : ", not eligible"));
    EXPECT_STREQ(prefill::causal_kernel_name(prefill::choose_causal_kernel(plan, c.eligible)),
                 prefill::causal_kernel_name(c.want));
  }
}

// From options to the kernel of a call, through the layout's eligibility (the H200 measurements in
// prefill_plan.h): default options on a ready device run ws_tma for contiguous K/V and 128-key pages
// and mma.sync for 16-key pages or misaligned bases; on a device without the family, mma.sync always.
TEST(PrefillPlan, AutomaticKernelFollowsTheCallsLayout) {
  alignas(16) static unsigned char cache[64];
  prefill::CallArgs call;
  call.v = cache;
  call.num_kv_heads = 8;
  call.num_pages = 1024;
  using prefill::CausalKernel;
  const struct {
    int32_t page_size, pages_per_seq, k_offset;
    CausalKernel on_ready, forced_tma;
  } layouts[] = {
      {131072, 1, 0, CausalKernel::kWarpSpecializedTma, CausalKernel::kWarpSpecializedTma},  // contiguous
      {128, 1024, 0, CausalKernel::kWarpSpecializedTma, CausalKernel::kWarpSpecializedTma},
      {256, 512, 0, CausalKernel::kWarpSpecializedTma, CausalKernel::kWarpSpecializedTma},
      {16, 1024, 0, CausalKernel::kMma, CausalKernel::kWarpSpecialized},
      {64, 1024, 0, CausalKernel::kMma, CausalKernel::kWarpSpecialized},
      {128, 1024, 8, CausalKernel::kMma, CausalKernel::kWarpSpecialized},  // K base not 16-byte aligned
  };
  auto ready = layout_prefill_plan(llama_shape(131072), PrefillPlanOptions{}, 132, 1, /*warp_specialized_ready=*/true);
  auto not_ready = layout_prefill_plan(llama_shape(131072), PrefillPlanOptions{}, 132, 1, false);
  PrefillPlanOptions force_tma;
  force_tma.kernels = PrefillKernels::kWarpSpecializedTma;
  auto forced = layout_prefill_plan(llama_shape(131072), force_tma, 132, 1, true);
  ASSERT_TRUE(ready.ok() && not_ready.ok() && forced.ok());
  for (const auto& l : layouts) {
    SCOPED_TRACE("page " + std::to_string(l.page_size) + ", pages/seq " + std::to_string(l.pages_per_seq) +
                 ", k offset " + std::to_string(l.k_offset));
    call.page_size = l.page_size;
    call.max_pages_per_seq = l.pages_per_seq;
    call.num_pages = l.pages_per_seq == 1 ? 1 : 1024;
    call.k = cache + l.k_offset;
    const bool eligible = prefill::ws_tma_eligible(call, 128);
    EXPECT_STREQ(prefill::causal_kernel_name(prefill::choose_causal_kernel(*ready, eligible)),
                 prefill::causal_kernel_name(l.on_ready));
    EXPECT_STREQ(prefill::causal_kernel_name(prefill::choose_causal_kernel(*not_ready, eligible)), "mma");
    EXPECT_STREQ(prefill::causal_kernel_name(prefill::choose_causal_kernel(*forced, eligible)),
                 prefill::causal_kernel_name(l.forced_tma));
  }
}

// The sparse pass and the pooled-score wave, hand-enumerated for every plan kernel setting × layout
// eligibility: the automatic choice runs the warp-specialised sparse kernel whenever its gather can
// address the cache (any page size) and the warp-specialised pooled-score kernel only where TMA can
// read K; the cp.async-producer variant (ws) keeps the pooling on mma.sync.
TEST(PrefillPlan, ChooseSparseAndPoolKernelTables) {
  using prefill::CausalKernel;
  const struct {
    PrefillKernels kernels;
    bool eligible;
    CausalKernel sparse, pool;
  } cases[] = {
      {PrefillKernels::kAuto, true, CausalKernel::kWarpSpecialized, CausalKernel::kWarpSpecializedTma},
      {PrefillKernels::kAuto, false, CausalKernel::kMma, CausalKernel::kMma},
      {PrefillKernels::kMma, true, CausalKernel::kMma, CausalKernel::kMma},
      {PrefillKernels::kMma, false, CausalKernel::kMma, CausalKernel::kMma},
      {PrefillKernels::kWgmma, true, CausalKernel::kWgmma, CausalKernel::kWgmma},
      {PrefillKernels::kWgmma, false, CausalKernel::kWgmma, CausalKernel::kWgmma},
      {PrefillKernels::kWarpSpecialized, true, CausalKernel::kWarpSpecialized, CausalKernel::kMma},
      {PrefillKernels::kWarpSpecialized, false, CausalKernel::kMma, CausalKernel::kMma},
      {PrefillKernels::kWarpSpecializedTma, true, CausalKernel::kWarpSpecialized, CausalKernel::kWarpSpecializedTma},
      {PrefillKernels::kWarpSpecializedTma, false, CausalKernel::kMma, CausalKernel::kMma},
  };
  for (const auto& c : cases) {
    PrefillPlan plan;
    plan.kernels = c.kernels;
    SCOPED_TRACE(std::string(prefill_kernels_name(c.kernels)) + (c.eligible ? ", eligible" : ", not eligible"));
    EXPECT_STREQ(prefill::causal_kernel_name(prefill::choose_sparse_kernel(plan, c.eligible)),
                 prefill::causal_kernel_name(c.sparse));
    EXPECT_STREQ(prefill::causal_kernel_name(prefill::choose_pool_kernel(plan, c.eligible)),
                 prefill::causal_kernel_name(c.pool));
  }
  // A plan that resolved kAuto to mma.sync (no sm_90a code or not Hopper) never picks a ws kernel.
  auto not_ready = layout_prefill_plan(llama_shape(4096), PrefillPlanOptions{}, 132, 1, false);
  ASSERT_TRUE(not_ready.ok());
  EXPECT_STREQ(prefill::causal_kernel_name(prefill::choose_sparse_kernel(*not_ready, true)), "mma");
  EXPECT_STREQ(prefill::causal_kernel_name(prefill::choose_pool_kernel(*not_ready, true)), "mma");
}

// The gathering producer addresses cache rows (page · page_size + slot) as int32.
TEST(PrefillPlan, GatherEligibleLayouts) {
  prefill::CallArgs call;
  for (const auto& [pages, page_size, kv_heads, want] :
       {std::tuple{1, 131072, 8, true}, std::tuple{1 << 20, 16, 8, true}, std::tuple{(1 << 27) - 1, 16, 1, true},
        std::tuple{1 << 27, 16, 1, false}, std::tuple{1 << 24, 256, 1, false}, std::tuple{(1 << 23) - 1, 256, 1, true},
        std::tuple{(1 << 24) - 1, 16, 8, true}, std::tuple{1 << 24, 16, 8, false},
        std::tuple{(1 << 20) - 1, 256, 8, true}, std::tuple{1 << 20, 256, 8, false}}) {
    SCOPED_TRACE(std::to_string(pages) + " pages of " + std::to_string(page_size) + ", " + std::to_string(kv_heads) +
                 " KV heads");
    call.num_pages = pages;
    call.page_size = page_size;
    call.num_kv_heads = kv_heads;
    EXPECT_EQ(prefill::ws_gather_eligible(call), want);
  }
}

// The variant names the benchmark's --variants takes.
TEST(PrefillPlan, KernelNames) {
  EXPECT_STREQ(prefill_kernels_name(PrefillKernels::kAuto), "auto");
  EXPECT_STREQ(prefill_kernels_name(PrefillKernels::kMma), "mma");
  EXPECT_STREQ(prefill_kernels_name(PrefillKernels::kWgmma), "wgmma");
  EXPECT_STREQ(prefill_kernels_name(PrefillKernels::kWarpSpecialized), "ws");
  EXPECT_STREQ(prefill_kernels_name(PrefillKernels::kWarpSpecializedTma), "ws_tma");
}

// Which K/V layouts the TMA producer takes (hand-enumerated): a 128-key tile must lie in one page
// (page size a multiple of 128, or one page per sequence), bases 16-byte aligned, head dim 64/128.
TEST(PrefillPlan, TmaEligibleLayouts) {
  alignas(16) static unsigned char cache[64];
  prefill::CallArgs call;
  call.k = cache;
  call.v = cache;
  call.num_kv_heads = 8;
  call.num_pages = 100;
  call.max_pages_per_seq = 10;
  for (const auto& [page, pages_per_seq, head_dim, k_offset, want] :
       {std::tuple{128, 10, 128, 0, true}, std::tuple{256, 10, 64, 0, true}, std::tuple{16, 10, 128, 0, false},
        std::tuple{64, 10, 128, 0, false}, std::tuple{1000, 1, 128, 0, true}, std::tuple{1000, 2, 128, 0, false},
        std::tuple{128, 10, 96, 0, false}, std::tuple{128, 10, 128, 8, false}}) {
    SCOPED_TRACE("page " + std::to_string(page) + ", pages/seq " + std::to_string(pages_per_seq) + ", d " +
                 std::to_string(head_dim) + ", k offset " + std::to_string(k_offset));
    call.page_size = page;
    call.max_pages_per_seq = pages_per_seq;
    call.k = cache + k_offset;
    EXPECT_EQ(prefill::ws_tma_eligible(call, head_dim), want);
  }
}

TEST(PrefillPlan, LayoutAt128KBoundsSelectionMemory) {
  const int32_t n = 131072;
  auto plan = layout_prefill_plan(llama_shape(n), PrefillPlanOptions{}, 132, 1);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const int64_t slots = prefill::max_call_slots(1, n, n, 32);
  EXPECT_GE(int64_t{plan->slot_capacity()}, slots);
  EXPECT_EQ(plan->tiles_in_flight, 64);  // 256 MiB / (8 groups × 128K × 4 bytes)
  EXPECT_EQ(plan->num_waves, (slots + 63) / 64);
  // Score scratch + LSE: 256 MiB + 16 MiB, against the paper's G × n/T × n fp16 scores (8.6 GB).
  const size_t paper_bytes = size_t(8) * (n / 32) * n * 2;
  EXPECT_LE(plan->selection_scratch_bytes(), (size_t{256} << 20) + size_t(n) * 32 * 4 + 1024);
  EXPECT_LT(plan->selection_scratch_bytes() * 30, paper_bytes);
  EXPECT_EQ(plan->workspace.error_flags % 256, 0u);
  EXPECT_EQ(plan->workspace.lse % 256, 0u);
  EXPECT_EQ(plan->workspace.scores % 256, 0u);
  EXPECT_GE(plan->workspace.scores, plan->workspace.lse + size_t(n) * 32 * 4);
  EXPECT_GE(plan->workspace.total_bytes,
            plan->workspace.scores + size_t(plan->tiles_in_flight) * 8 * plan->score_stride * 4);
  EXPECT_GE(plan->score_stride, n);
  EXPECT_EQ(plan->score_stride % 4, 0);

  // Without selection the workspace is only the error word.
  auto dense_only = layout_prefill_plan(llama_shape(n), PrefillPlanOptions{false}, 132, 1);
  ASSERT_TRUE(dense_only.ok());
  EXPECT_LE(dense_only->workspace.total_bytes, 256u);

  // Forced waves and splits are honoured; small problems get splits to fill the GPU.
  PrefillPlanOptions forced;
  forced.tiles_in_flight = 3;
  forced.key_splits = 5;
  auto small = layout_prefill_plan(llama_shape(1000), forced, 132, 1);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->tiles_in_flight, 3);
  EXPECT_EQ(small->key_splits, 5);
  EXPECT_GE(int64_t{small->slot_capacity()}, prefill::max_call_slots(1, 1000, 1000, 32));
  auto automatic = layout_prefill_plan(llama_shape(1000), PrefillPlanOptions{}, 132, 1);
  ASSERT_TRUE(automatic.ok());
  EXPECT_GE(int64_t{automatic->key_splits} * automatic->tiles_in_flight * 8, 2 * 132);
}

// Fake device addresses: every call below fails its host-side checks before touching them.
void* fake(uintptr_t address) { return reinterpret_cast<void*>(address); }

struct Views {
  QueryBatch q;
  PagedKv kv;
  AttentionOutput out;
  AttentionParams params;
  PrefillIndexRows rows;
};

Views valid_views(const PrefillShape& s) {
  Views v;
  v.q.q = fake(0x10000);
  v.q.dtype = s.dtype;
  v.q.batch = s.batch;
  v.q.total_q = s.max_total_q;
  v.q.num_heads = s.num_heads;
  v.q.head_dim = s.head_dim;
  v.q.cu_q_lens = static_cast<const int32_t*>(fake(0x20000));
  v.kv.k = fake(0x30000);
  v.kv.v = fake(0x40000);
  v.kv.dtype = s.dtype;
  v.kv.num_pages = 64;
  v.kv.page_size = 16;
  v.kv.num_kv_heads = s.num_kv_heads;
  v.kv.head_dim = s.head_dim;
  v.kv.block_table = static_cast<const int32_t*>(fake(0x50000));
  v.kv.max_pages_per_seq = (s.max_kv_len + 15) / 16;
  v.kv.kv_lens = static_cast<const int32_t*>(fake(0x60000));
  v.out.o = fake(0x70000);
  v.out.dtype = s.dtype;
  v.params.scale = 0.125f;
  v.rows.indices = static_cast<int32_t*>(fake(0x80000));
  v.rows.row_offsets = static_cast<int64_t*>(fake(0x90000));
  v.rows.tile_base = static_cast<int32_t*>(fake(0xA0000));
  v.rows.batch = s.batch;
  v.rows.num_rows = s.num_kv_heads;
  v.rows.tile_size = s.tile_size;
  return v;
}

TEST(PrefillPlan, OpsRefuseBadViewsNamingTheField) {
  const PrefillShape s = llama_shape(1000);
  auto plan = layout_prefill_plan(s, PrefillPlanOptions{}, 132, 1);
  ASSERT_TRUE(plan.ok());
  void* ws = fake(0xB0000);
  ScorePooling pooling;
  pooling.num_rows = s.num_kv_heads;
  struct Case {
    const char* what;
    void (*mutate)(Views&);
    const char* field;
  };
  const Case cases[] = {
      {"null q", [](Views& v) { v.q.q = nullptr; }, "q.q"},
      {"dtype mismatch", [](Views& v) { v.kv.dtype = DType::kF16; }, "kv.dtype"},
      {"head dim mismatch", [](Views& v) { v.q.head_dim = 64; }, "q.head_dim"},
      {"too many queries", [](Views& v) { v.q.total_q = 1001; }, "q.total_q"},
      {"misaligned k", [](Views& v) { v.kv.k = fake(0x30008); }, "kv.k"},
      {"narrow block table", [](Views& v) { v.kv.max_pages_per_seq = 10; }, "kv.max_pages_per_seq"},
      {"zero scale", [](Views& v) { v.params.scale = 0.0f; }, "params.scale"},
      {"null o", [](Views& v) { v.out.o = nullptr; }, "out.o"},
      {"out dtype", [](Views& v) { v.out.dtype = DType::kF32; }, "out.dtype"},
  };
  for (const Case& c : cases) {
    Views v = valid_views(s);
    c.mutate(v);
    const Status st = dense_prefill(*plan, v.q, v.kv, v.params, v.out, ws, nullptr);
    EXPECT_FALSE(st.ok()) << c.what;
    EXPECT_NE(st.message().find(c.field), std::string::npos) << c.what << ": " << st.message();
  }
  const Case row_cases[] = {
      {"rows batch", [](Views& v) { v.rows.batch = 2; }, "rows.batch"},
      {"rows tile size", [](Views& v) { v.rows.tile_size = 16; }, "rows.tile_size"},
      {"rows without local keys", [](Views& v) { v.rows.include_local = false; }, "include_local"},
      {"rows per head", [](Views& v) { v.rows.granularity = IndexGranularity::kPerQueryHead; }, "per-KV-group"},
      {"rows count", [](Views& v) { v.rows.num_rows = 4; }, "rows.num_rows"},
  };
  for (const Case& c : row_cases) {
    Views v = valid_views(s);
    c.mutate(v);
    const Status st = select_prefill(*plan, v.q, v.kv, v.params, pooling, v.rows, ws, nullptr);
    EXPECT_FALSE(st.ok()) << c.what;
    EXPECT_NE(st.message().find(c.field), std::string::npos) << c.what << ": " << st.message();
  }
  {
    Views v = valid_views(s);
    ScorePooling three;
    three.num_rows = 3;  // does not divide G = 8
    v.rows.num_rows = 3;
    const Status st = select_prefill(*plan, v.q, v.kv, v.params, three, v.rows, ws, nullptr);
    EXPECT_NE(st.message().find("pooling.num_rows"), std::string::npos) << st.message();
  }
  {
    Views v = valid_views(s);
    v.rows.granularity = IndexGranularity::kPerQueryHead;
    v.rows.num_rows = s.num_heads;
    const Status st = sparse_prefill(*plan, v.q, v.kv, v.params, v.rows, static_cast<const int32_t*>(fake(0xC0000)),
                                     v.out, ws, nullptr);
    EXPECT_NE(st.message().find("head_map must be null"), std::string::npos) << st.message();
  }
  {
    auto dense_only = layout_prefill_plan(s, PrefillPlanOptions{false}, 132, 1);
    ASSERT_TRUE(dense_only.ok());
    Views v = valid_views(s);
    const Status st = anchor_prefill(*dense_only, v.q, v.kv, v.params, pooling, v.rows, AnchorOutput::kDense, nullptr,
                                     v.out, ws, nullptr);
    EXPECT_NE(st.message().find("without selection"), std::string::npos) << st.message();
  }
}

TEST(PrefillPlan, ErrorBitsHaveNames) {
  EXPECT_EQ(describe_prefill_errors(0), "none");
  EXPECT_NE(describe_prefill_errors(kPrefillErrorTileBase).find("tile_base"), std::string::npos);
  EXPECT_NE(describe_prefill_errors(kPrefillErrorQueries).find("cu_q_lens"), std::string::npos);
  const std::string both = describe_prefill_errors(uint32_t{kErrorPage} | uint32_t{kPrefillErrorSelect});
  EXPECT_NE(both.find("page id"), std::string::npos) << both;
  EXPECT_NE(both.find("Top-k"), std::string::npos) << both;
  EXPECT_NE(describe_prefill_errors(1u << 30).find("unknown"), std::string::npos);
}

}  // namespace
}  // namespace kascade::cuda
