// src/cuda/backend/oracle_prefill_select.cpp — the prefill oracle composed from select_decode
// (oracle_prefill_select.h). Tested by tests/cuda/test_backend_prefill.cpp.
#include "cuda/backend/oracle_prefill_select.h"

#include <algorithm>

#include "cuda/common/cuda_status.h"
#include "kascade/dtype.h"

namespace kascade::cuda {

namespace {

template <typename T>
Status download(std::vector<T>* host, const T* device, size_t count, const char* what, cudaStream_t stream) {
  KC_CHECK_ARG(device != nullptr, "select_prefill_oracle: ", what, " must be non-null");
  host->resize(count);
  if (count == 0) return ok_status();
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host->data(), device, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
  return ok_status();
}

}  // namespace

Result<std::vector<OracleQuery>> plan_oracle_queries(const std::vector<int32_t>& cu_q_lens,
                                                     const std::vector<int32_t>& kv_lens,
                                                     const std::vector<int32_t>& tile_base,
                                                     const std::vector<int64_t>& row_offsets, int32_t num_heads) {
  const int32_t H = num_heads;
  const size_t B = kv_lens.size();
  KC_CHECK_ARG(H >= 1, "select_prefill_oracle: ", H, " query heads");
  KC_CHECK_ARG(cu_q_lens.size() == B + 1 && tile_base.size() == B + 1, "select_prefill_oracle: ", B,
               " sequences with ", cu_q_lens.size(), " cu_q_lens and ", tile_base.size(), " tile_base entries");
  const int64_t num_slots = tile_base[B];
  KC_CHECK_ARG(num_slots == cu_q_lens[B], "select_prefill_oracle: rows hold ", num_slots,
               " tile slots; with tile_size 1 the call's ", cu_q_lens[B], " queries need one each");
  KC_CHECK_ARG(static_cast<int64_t>(row_offsets.size()) == num_slots * H + 1, "select_prefill_oracle: ",
               row_offsets.size(), " row offsets for ", num_slots, " slots of ", H, " rows");
  std::vector<OracleQuery> queries(static_cast<size_t>(cu_q_lens[B]));
  for (size_t b = 0; b < B; ++b) {
    const int32_t q_len = cu_q_lens[b + 1] - cu_q_lens[b];
    KC_CHECK_ARG(q_len >= 0 && q_len <= kv_lens[b], "select_prefill_oracle: sequence ", b, " has ", q_len,
                 " queries and ", kv_lens[b], " keys");
    KC_CHECK_ARG(tile_base[b + 1] - tile_base[b] == q_len, "select_prefill_oracle: sequence ", b, " has ", q_len,
                 " queries but ", tile_base[b + 1] - tile_base[b], " tile slots (tile_size 1: one per query)");
    for (int32_t t = 0; t < q_len; ++t) {
      OracleQuery& query = queries[static_cast<size_t>(cu_q_lens[b] + t)];
      query.sequence = static_cast<int32_t>(b);
      query.position = kv_lens[b] - q_len + t;
      query.slot = tile_base[b] + t;
      const int64_t* off = row_offsets.data() + query.slot * H;
      const int64_t k = off[1] - off[0];
      for (int32_t h = 1; h < H; ++h) {
        KC_CHECK_ARG(off[h + 1] - off[h] == k, "select_prefill_oracle: query ", t, " of sequence ", b, " has rows of ",
                     k, " and ", off[h + 1] - off[h], " keys; every head of a query must hold the same count");
      }
      KC_CHECK_ARG(k >= 0 && k <= query.position + 1, "select_prefill_oracle: query ", t, " of sequence ", b,
                   " (position ", query.position, ") has rows of ", k, " keys; expected 0..", query.position + 1);
      query.k = static_cast<int32_t>(k);
    }
  }
  return queries;
}

Status OraclePrefillSelector::run(AttentionBackend& select, const QueryBatch& q, const PagedKv& kv,
                                  const AttentionParams& params, const PrefillIndexRows& rows, int32_t max_batch,
                                  int64_t* allocations, cudaStream_t stream) {
  const int32_t B = q.batch, H = q.num_heads, P = kv.max_pages_per_seq;
  KC_CHECK_ARG(rows.tile_size == 1 && !rows.include_local && rows.granularity == IndexGranularity::kPerQueryHead &&
                   rows.num_rows == H,
               "select_prefill_oracle: rows need tile_size 1, no local keys, one row per query head (", H,
               "); got tile_size ", rows.tile_size, ", include_local ", rows.include_local, ", num_rows ",
               rows.num_rows);
  KC_CHECK_ARG(rows.batch == B, "select_prefill_oracle: rows.batch is ", rows.batch, "; the call has ", B,
               " sequences");
  KC_CHECK_ARG(rows.indices != nullptr && rows.row_offsets != nullptr,
               "select_prefill_oracle: rows.indices and rows.row_offsets must be non-null");
  KC_CHECK_ARG(max_batch >= 1, "select_prefill_oracle: max_batch is ", max_batch, "; expected >= 1");

  // The call's lengths, block table and planned rows, on the host.
  KC_RETURN_IF_ERROR(download(&cu_q_lens_, q.cu_q_lens, static_cast<size_t>(B) + 1, "cu_q_lens", stream));
  KC_RETURN_IF_ERROR(download(&kv_lens_, kv.kv_lens, static_cast<size_t>(B), "kv_lens", stream));
  KC_RETURN_IF_ERROR(download(&tile_base_, rows.tile_base, static_cast<size_t>(B) + 1, "rows.tile_base", stream));
  KC_RETURN_IF_ERROR(download(&block_table_, kv.block_table, static_cast<size_t>(B) * P, "block_table", stream));
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  const int64_t num_slots = tile_base_[static_cast<size_t>(B)];
  KC_CHECK_ARG(num_slots == q.total_q, "select_prefill_oracle: rows hold ", num_slots, " tile slots; with tile_size 1 ",
               "the call's ", q.total_q, " queries need one each");  // before sizing the row_offsets copy
  KC_RETURN_IF_ERROR(download(&row_offsets_, rows.row_offsets, static_cast<size_t>(num_slots) * H + 1,
                              "rows.row_offsets", stream));
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));

  KC_ASSIGN_OR_RETURN(const std::vector<OracleQuery> queries,
                      plan_oracle_queries(cu_q_lens_, kv_lens_, tile_base_, row_offsets_, H));
  k_per_query_.resize(queries.size());
  for (size_t g = 0; g < queries.size(); ++g) k_per_query_[g] = queries[g].k;
  if (q.total_q == 0) return ok_status();
  const size_t q_row_bytes = static_cast<size_t>(H) * q.head_dim * dtype_size(q.dtype);
  ScorePooling pooling;
  pooling.num_rows = H;  // each query head's own p
  pooling.reduce = ScoreReduce::kSum;
  // The chunk layout of the widest chunk, allocated once before any chunk runs (a reallocation
  // between chunks would free memory the previous chunk's kernels may still read).
  const auto layout = [&](int32_t C, int32_t k_max) {
    struct Layout {
      size_t kv, table, indices, lens, total;
    } l;
    l.kv = static_cast<size_t>(C) + 1;
    l.table = l.kv + C;
    l.indices = l.table + static_cast<size_t>(C) * P;
    l.lens = l.indices + static_cast<size_t>(C) * H * k_max;
    l.total = l.lens + static_cast<size_t>(C) * H;
    return l;
  };
  const int32_t widest_k = std::max(1, *std::max_element(k_per_query_.begin(), k_per_query_.end()));
  KC_RETURN_IF_ERROR(chunk_.ensure(layout(std::min(max_batch, q.total_q), widest_k).total * sizeof(int32_t),
                                   "the prefill oracle's chunk of decode calls", allocations));
  int32_t* device = chunk_.as<int32_t>();
  table_sequences_.clear();  // nothing of this call on the device yet
  for (int32_t g0 = 0; g0 < q.total_q; g0 += max_batch) {
    const int32_t C = std::min(max_batch, q.total_q - g0);
    int32_t k_max = 1;
    for (int32_t c = 0; c < C; ++c) k_max = std::max(k_max, k_per_query_[static_cast<size_t>(g0 + c)]);
    const auto l = layout(C, k_max);
    chunk_sequences_.resize(static_cast<size_t>(C));
    chunk_host_.resize(l.indices);
    for (int32_t c = 0; c < C; ++c) {
      const OracleQuery& query = queries[static_cast<size_t>(g0 + c)];
      chunk_sequences_[static_cast<size_t>(c)] = query.sequence;
      chunk_host_[l.kv + c] = query.position + 1;
    }
    if (chunk_sequences_ == table_sequences_) {
      // Same sequences in the same slots as the chunk before (the usual case: one long prompt):
      // cu_q_lens and the block table on the device are still right; only the lengths move.
      KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device + l.kv, chunk_host_.data() + l.kv, C * sizeof(int32_t),
                                              cudaMemcpyHostToDevice, stream));
    } else {
      for (int32_t c = 0; c <= C; ++c) chunk_host_[static_cast<size_t>(c)] = c;
      for (int32_t c = 0; c < C; ++c) {
        std::copy_n(block_table_.begin() + static_cast<ptrdiff_t>(chunk_sequences_[static_cast<size_t>(c)]) * P, P,
                    chunk_host_.begin() + static_cast<ptrdiff_t>(l.table + static_cast<size_t>(c) * P));
      }
      KC_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(device, chunk_host_.data(), l.indices * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
      table_sequences_ = chunk_sequences_;
    }

    QueryBatch step = q;  // C decode steps: query g0 + c against its i + 1 keys
    step.q = static_cast<const char*>(q.q) + static_cast<size_t>(g0) * q_row_bytes;
    step.batch = C;
    step.total_q = C;
    step.cu_q_lens = device;
    PagedKv step_kv = kv;
    step_kv.block_table = device + l.table;
    step_kv.kv_lens = device + l.kv;
    DecodeIndexRows step_rows;
    step_rows.indices = device + l.indices;
    step_rows.row_lens = device + l.lens;
    step_rows.batch = C;
    step_rows.num_rows = H;
    step_rows.k_max = k_max;
    step_rows.granularity = IndexGranularity::kPerQueryHead;
    KC_RETURN_IF_ERROR(select.select_decode(step, step_kv, params, pooling, k_per_query_.data() + g0, step_rows));

    // Query g0 + c's H rows of k keys: consecutive in the CSR rows (row = slot * H + h).
    for (int32_t c = 0; c < C; ++c) {
      const size_t g = static_cast<size_t>(g0 + c);
      const int32_t k = k_per_query_[g];
      if (k == 0) continue;
      const int64_t slot = queries[g].slot;
      KC_CUDA_RETURN_IF_ERROR(cudaMemcpy2DAsync(rows.indices + row_offsets_[static_cast<size_t>(slot * H)],
                                                k * sizeof(int32_t), step_rows.indices + static_cast<size_t>(c) * H * k_max,
                                                static_cast<size_t>(k_max) * sizeof(int32_t), k * sizeof(int32_t), H,
                                                cudaMemcpyDeviceToDevice, stream));
    }
  }
  return ok_status();
}

}  // namespace kascade::cuda
