// test_kv_cache.cpp — the paged KV cache (src/runtime/kv_cache.h) against a dense shadow copy:
// random interleavings of sequence creation, growth, writes to every layer, release and page
// reuse; every row read back through the cache's own read() and through the PagedKv view's
// address arithmetic (src/ref/views.h) must equal the shadow (rounded to the cache dtype).
// Also: all-or-nothing reservation, capacity errors and configuration validation.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "ref/views.h"
#include "runtime/kv_cache.h"
#include "testing/harness.h"

namespace kascade::runtime {
namespace {

using kascade::testing::random_floats;
using kascade::testing::rng_for_test;

KvCacheConfig small_config(DType dtype) {
  KvCacheConfig c;
  c.num_layers = 3;
  c.num_kv_heads = 2;
  c.head_dim = 4;
  c.page_size = 4;
  c.num_pages = 40;
  c.dtype = dtype;
  return c;
}

class KvCacheDtypes : public ::testing::TestWithParam<DType> {};

TEST_P(KvCacheDtypes, MatchesDenseShadowThroughRandomLifetimes) {
  const DType dtype = GetParam();
  const KvCacheConfig config = small_config(dtype);
  auto created = PagedKvCache::create(config);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  PagedKvCache& cache = **created;
  const int64_t row = config.num_kv_heads * config.head_dim;
  auto rng = rng_for_test();
  // shadow[seq][layer] = k rows then v rows, rounded to dtype: [len, G, d] each.
  std::map<int32_t, std::vector<std::vector<float>>> shadow_k, shadow_v;
  for (int step = 0; step < 200; ++step) {
    const int action = static_cast<int>(rng() % 10);
    if (action == 0 || shadow_k.empty()) {
      const int32_t seq = cache.add_sequence();
      shadow_k[seq].assign(config.num_layers, {});
      shadow_v[seq].assign(config.num_layers, {});
      continue;
    }
    auto it = shadow_k.begin();
    std::advance(it, rng() % shadow_k.size());
    const int32_t seq = it->first;
    if (action == 1) {
      const int free_before = cache.free_pages();
      const int64_t cap = *cache.capacity(seq);
      ASSERT_TRUE(cache.release_sequence(seq).ok());
      EXPECT_EQ(cache.free_pages(), free_before + cap / config.page_size);
      shadow_k.erase(seq);
      shadow_v.erase(seq);
      continue;
    }
    // Append 1..9 rows to every layer.
    const int64_t len = *cache.length(seq);
    const int64_t count = 1 + static_cast<int64_t>(rng() % 9);
    const Status reserved = cache.reserve(seq, len + count);
    if (!reserved.ok()) {
      EXPECT_EQ(reserved.code(), StatusCode::kResourceExhausted);
      EXPECT_EQ(*cache.length(seq), len);
      continue;
    }
    for (int32_t layer = 0; layer < config.num_layers; ++layer) {
      const auto k = random_floats(rng, count * row, -2.0f, 2.0f, dtype);
      const auto v = random_floats(rng, count * row, -2.0f, 2.0f, dtype);
      ASSERT_TRUE(cache.write(layer, seq, len, count, k.data(), v.data()).ok());
      auto& sk = shadow_k[seq][layer];
      auto& sv = shadow_v[seq][layer];
      sk.insert(sk.end(), k.begin(), k.end());
      sv.insert(sv.end(), v.begin(), v.end());
    }
    ASSERT_TRUE(cache.commit_length(seq, len + count).ok());
  }
  ASSERT_FALSE(shadow_k.empty());
  // Read back every live sequence through read() and through a PagedKv view.
  std::vector<int32_t> seqs;
  std::vector<int64_t> lens;
  std::vector<int32_t> kv_lens;
  for (const auto& [seq, layers] : shadow_k) {
    seqs.push_back(seq);
    lens.push_back(*cache.length(seq));
    kv_lens.push_back(static_cast<int32_t>(lens.back()));
  }
  auto tables = cache.block_tables(seqs, lens);
  ASSERT_TRUE(tables.ok()) << tables.status().to_string();
  std::vector<float> k(row), v(row);
  for (int32_t layer = 0; layer < config.num_layers; ++layer) {
    auto kv = cache.view(layer, *tables, kv_lens.data());
    ASSERT_TRUE(kv.ok());
    for (size_t b = 0; b < seqs.size(); ++b) {
      const auto& sk = shadow_k[seqs[b]][layer];
      const auto& sv = shadow_v[seqs[b]][layer];
      ASSERT_EQ(static_cast<int64_t>(sk.size()), lens[b] * row);
      for (int64_t pos = 0; pos < lens[b]; ++pos) {
        ASSERT_TRUE(cache.read(layer, seqs[b], pos, k.data(), v.data()).ok());
        for (int32_t g = 0; g < config.num_kv_heads; ++g) {
          const int64_t off = ref::kv_offset(*kv, static_cast<int32_t>(b), pos, g);
          for (int32_t c = 0; c < config.head_dim; ++c) {
            const int64_t i = pos * row + g * config.head_dim + c;
            ASSERT_EQ(k[g * config.head_dim + c], sk[i]);
            ASSERT_EQ(v[g * config.head_dim + c], sv[i]);
            ASSERT_EQ(load_as_float(kv->k, dtype, off + c), sk[i]);
            ASSERT_EQ(load_as_float(kv->v, dtype, off + c), sv[i]);
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KvCache, KvCacheDtypes, ::testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(KvCache, ReservationIsAllOrNothingAndPagesAreReused) {
  KvCacheConfig config = small_config(DType::kF32);
  config.num_pages = 5;
  auto cache = std::move(PagedKvCache::create(config)).value();
  const int32_t a = cache->add_sequence();
  const int32_t b = cache->add_sequence();
  ASSERT_TRUE(cache->reserve(a, 9).ok());  // 3 pages
  EXPECT_EQ(cache->free_pages(), 2);
  const Status s = cache->reserve(b, 13);  // needs 4 pages, 2 free
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("needs 4 more pages"), std::string::npos) << s.message();
  EXPECT_EQ(*cache->capacity(b), 0);
  EXPECT_EQ(cache->free_pages(), 2);
  ASSERT_TRUE(cache->release_sequence(a).ok());
  EXPECT_EQ(cache->free_pages(), 5);
  ASSERT_TRUE(cache->reserve(b, 13).ok());
  EXPECT_EQ(*cache->capacity(b), 16);
  EXPECT_FALSE(cache->length(a).ok());  // released ids are invalid
  const int32_t c = cache->add_sequence();
  EXPECT_EQ(c, a);  // the slot is reused
  EXPECT_EQ(*cache->length(c), 0);
}

TEST(KvCache, RefusesWritesBeyondCapacityAndBadArguments) {
  auto cache = std::move(PagedKvCache::create(small_config(DType::kF32))).value();
  const int32_t s = cache->add_sequence();
  ASSERT_TRUE(cache->reserve(s, 4).ok());
  std::vector<float> rows(5 * 8, 1.0f);
  EXPECT_TRUE(cache->write(0, s, 0, 4, rows.data(), rows.data()).ok());
  EXPECT_FALSE(cache->write(0, s, 1, 4, rows.data(), rows.data()).ok());
  EXPECT_FALSE(cache->write(3, s, 0, 1, rows.data(), rows.data()).ok());
  EXPECT_FALSE(cache->write(0, s + 7, 0, 1, rows.data(), rows.data()).ok());
  EXPECT_FALSE(cache->commit_length(s, 5).ok());
  const std::vector<int32_t> seqs = {s};
  const std::vector<int64_t> too_long = {5};
  EXPECT_FALSE(cache->block_tables(seqs, too_long).ok());
  const std::vector<int64_t> fits = {3};
  auto tables = cache->block_tables(seqs, fits);
  ASSERT_TRUE(tables.ok());
  EXPECT_EQ(tables->max_pages_per_seq, 1);
}

TEST(KvCache, BlockTablesArePaddedWithMinusOne) {
  auto cache = std::move(PagedKvCache::create(small_config(DType::kF32))).value();
  const int32_t a = cache->add_sequence();
  const int32_t b = cache->add_sequence();
  ASSERT_TRUE(cache->reserve(a, 10).ok());  // pages 0, 1, 2
  ASSERT_TRUE(cache->reserve(b, 2).ok());   // page 3
  const std::vector<int32_t> seqs = {a, b};
  const std::vector<int64_t> lens = {10, 2};
  auto t = cache->block_tables(seqs, lens);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->max_pages_per_seq, 3);
  EXPECT_EQ(t->table, (std::vector<int32_t>{0, 1, 2, 3, -1, -1}));
}

TEST(KvCache, RefusesBadConfigurations) {
  KvCacheConfig c = small_config(DType::kF32);
  c.page_size = 12;
  EXPECT_EQ(PagedKvCache::create(c).status().code(), StatusCode::kInvalidArgument);
  c = small_config(DType::kF32);
  c.num_pages = 0;
  EXPECT_FALSE(PagedKvCache::create(c).ok());
  c = small_config(DType::kF32);
  c.num_pages = 1 << 30;
  c.head_dim = 1 << 20;
  EXPECT_EQ(PagedKvCache::create(c).status().code(), StatusCode::kResourceExhausted);
  c.head_dim = 256;  // 3 · 2^30 · 4 · 2 · 256 · 4 · 2 bytes = 48 TiB: more than any machine here
  const Status big = PagedKvCache::create(c).status();
  EXPECT_EQ(big.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(big.message().find("exceeds the machine's"), std::string::npos) << big.message();
  EXPECT_EQ(kv_cache_bytes(small_config(DType::kBF16)), 2LL * 3 * 40 * 4 * 2 * 4 * 2);
}

}  // namespace
}  // namespace kascade::runtime
