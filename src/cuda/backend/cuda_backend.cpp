// src/cuda/backend/cuda_backend.cpp — CudaBackend (cuda_backend.h): memory, each decode op mapped
// onto the plan/run kernels of src/cuda/attention and src/cuda/kascade (plans from
// DecodePlanCache) or the baseline selectors (quest_select.h, lessismore_select.h), and each
// prefill op onto src/cuda/prefill/prefill_ops.h (plans from PrefillPlanCache).
// Tested by tests/cuda/test_backend_ops.cpp, test_backend_policies.cpp and test_backend_prefill.cpp.
#include "cuda/backend/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/backend/backend_checks.h"
#include "cuda/backend/decode_plan_cache.h"
#include "cuda/backend/device_memory.h"
#include "cuda/backend/lessismore_select.h"
#include "cuda/backend/oracle_prefill_select.h"
#include "cuda/backend/prefill_plan_cache.h"
#include "cuda/backend/quest_select.h"
#include "cuda/common/cuda_status.h"
#include "cuda/common/device_errors.h"
#include "cuda/common/plan_support.h"
#include "cuda/prefill/prefill_errors.h"
#include "cuda/prefill/prefill_ops.h"

namespace kascade {

using cuda::DecodeKey;
using cuda::DecodePlanCache;
using cuda::PrefillKey;
using cuda::PrefillPlanCache;

struct CudaBackend::State {
  explicit State(const CudaBackendOptions& o)
      : options(o),
        plans(o.max_seq_len, o.budget, options_stream(o), o.programmatic_launch),
        prefill_plans(o.max_batch, o.max_seq_len, options_stream(o)),
        k_host(static_cast<size_t>(o.max_batch)) {}

  CudaBackendOptions options;
  DecodePlanCache plans;
  PrefillPlanCache prefill_plans;
  BackendBuffer k_device;               // [max_batch] int32: the selection sizes of the current op
  BackendBuffer error_word;             // uint32: DeviceError bits of the baseline kernels
  // Error checks in two halves (enqueue_error_check / finish_error_check), per slot: the words
  // copied (device addresses), whether the finish is pending, and the pinned host copies
  // ([kErrorCheckSlots][kMaxErrorWords] uint32, allocated with the backend).
  static constexpr size_t kMaxErrorWords = 256;
  std::vector<uint32_t*> error_words[kErrorCheckSlots];
  bool error_check_pending[kErrorCheckSlots] = {};
  BackendBuffer host_errors;
  cuda::GrowingDeviceBuffer scratch_o;  // [max_batch, H, d]: dense output of a selection-only anchor
  cuda::QuestSelector quest;
  cuda::LessIsMoreSelector lessismore;
  cuda::OraclePrefillSelector oracle_prefill;
  std::vector<int32_t> k_host;          // [max_batch] pageable staging of k_per_seq
  int64_t allocations = 0;              // besides the plans' workspaces
  // CUDA graph passes (cuda_backend.h): the current pass, the nesting of ops that compose other
  // ops (only the outermost records), this pass's trace and sizes, the captured step's trace.
  cuda::GraphPass pass = cuda::GraphPass::kNone;
  int32_t pass_depth = 0;
  cuda::OpTrace trace;
  cuda::OpTrace captured_trace;
  bool has_capture = false;  // a capture pass ended since the backend was made
  cuda::StagedSizes staged;

  // True for the outermost op of a graph pass: it records its arguments.
  bool tracing() const { return pass != cuda::GraphPass::kNone && pass_depth == 0; }
  // False in a check pass: the op recorded its arguments and launches nothing.
  bool launching() const { return pass != cuda::GraphPass::kCheck; }
  // Unsupported inside a graph pass, for the ops that are not graph-safe.
  Status eager_only(const char* op) const {
    if (pass == cuda::GraphPass::kNone) return ok_status();
    return unsupported("cuda backend: ", op, " is not graph-safe and cannot run inside a CUDA graph ",
                       pass == cuda::GraphPass::kCapture ? "capture" : "check", " pass");
  }

  cudaStream_t stream() const { return options_stream(options); }

  Status activate() const {
    KC_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));
    return ok_status();
  }

  // Copies the host sizes into k_device (through pageable staging, so the caller's array is free
  // again when this returns).
  Result<const int32_t*> upload_k(const int32_t* k_per_seq, int32_t batch) {
    if (pass != cuda::GraphPass::kNone) {
      // Staged by the outermost op of the pass; upload_graph_inputs() copies it before each launch.
      if (!staged.staged()) return internal_error("cuda backend: a selection inside a graph pass without staged sizes");
      return k_device.as<const int32_t>();
    }
    std::copy(k_per_seq, k_per_seq + batch, k_host.begin());
    KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(k_device.data(), k_host.data(), batch * sizeof(int32_t),
                                            cudaMemcpyHostToDevice, stream()));
    return k_device.as<const int32_t>();
  }

  Result<void*> selection_output(const DecodeKey& key) {
    const size_t bytes = static_cast<size_t>(options.max_batch) * key.num_heads * key.head_dim * dtype_size(key.dtype);
    KC_RETURN_IF_ERROR(scratch_o.ensure(bytes, "the selection-only scratch output", &allocations));
    return scratch_o.data();
  }

  // The checks shared by the score-based selections: pooling, rows, sizes.
  Status check_selection(const QueryBatch& q, const ScorePooling& pooling, const int32_t* k_per_seq,
                         const DecodeIndexRows& rows, const char* op) const {
    KC_CHECK_ARG(pooling.num_rows >= 1 && q.num_heads % pooling.num_rows == 0, op, ": pooling.num_rows is ",
                 pooling.num_rows, "; it must divide the ", q.num_heads, " query heads");
    KC_RETURN_IF_ERROR(cuda::check_rows(rows, q.batch, pooling.num_rows, op));
    return cuda::check_k_per_seq(k_per_seq, q.batch, rows.k_max, op);
  }

  // One anchor pipeline run: selection into `rows` (granularity of the plan) and the output.
  Status run_anchor(const DecodeKey& key, const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                    const ScorePooling& pooling, const int32_t* k_per_seq, const DecodeIndexRows& rows,
                    bool dense_output, const int32_t* head_map, const AttentionOutput& out) {
    KC_ASSIGN_OR_RETURN(const DecodePlanCache::Anchor* anchor, plans.anchor(key, pooling, dense_output));
    KC_ASSIGN_OR_RETURN(const int32_t* k_device, upload_k(k_per_seq, q.batch));
    DecodeIndexRows own = rows;
    own.granularity = anchor->plan.granularity;
    cuda::AnchorRunExtras extras;
    extras.k_per_seq = k_device;
    extras.head_map = dense_output ? nullptr : head_map;
    return cuda::anchor_decode(anchor->plan, q, kv, params, own, out, extras, anchor->workspace.data(), stream());
  }

  // The plan and workspace of a prefill call that passed check_prefill_call; selecting ops pass
  // the rows' tile size.
  Result<PrefillPlanCache::Planned> prefill_plan(PrefillKey key, bool selection, int32_t tile_size) {
    key.selection = selection;
    key.tile_size = selection ? tile_size : 1;
    return prefill_plans.plan(key);
  }
};

namespace {

Status in_op(Status status, const char* op) {
  if (!status.ok()) status.with_context(std::string("cuda backend, ") + op);
  return status;
}

}  // namespace

Result<std::shared_ptr<CudaBackend>> CudaBackend::create(const CudaBackendOptions& options) {
  KC_RETURN_IF_ERROR(validate_cuda_backend_options(options));
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return unsupported("cuda backend: no CUDA device is available (",
                       error != cudaSuccess ? cudaGetErrorString(error) : "the runtime reports 0 devices",
                       "); use --device cpu");
  }
  KC_CHECK_ARG(options.device < count, "cuda backend: device is ", options.device, "; this machine has ", count,
               " CUDA device(s)");
  if (options.programmatic_launch) {
    KC_ASSIGN_OR_RETURN(const bool sm90, cuda::detail::device_has_sm90_launch_features(options.device));
    if (!sm90)
      return unsupported("cuda backend: programmatic_launch needs compute capability 9.0 or newer (device ",
                         options.device, " is older)");
  }
  auto state = std::make_unique<State>(options);
  KC_RETURN_IF_ERROR(state->activate());
  KC_ASSIGN_OR_RETURN(state->k_device,
                      cuda::device_allocate(static_cast<size_t>(options.max_batch) * sizeof(int32_t), "k_per_seq"));
  KC_ASSIGN_OR_RETURN(state->error_word, cuda::device_allocate(sizeof(uint32_t), "the baseline error word"));
  KC_ASSIGN_OR_RETURN(state->host_errors,
                      cuda::pinned_host_allocate(kErrorCheckSlots * State::kMaxErrorWords * sizeof(uint32_t),
                                                 "the error words' host copies"));
  state->allocations = 2;
  KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(state->error_word.data(), 0, sizeof(uint32_t), options_stream(options)));
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(options_stream(options)));
  return std::shared_ptr<CudaBackend>(new CudaBackend(std::move(state)));
}

CudaBackend::CudaBackend(std::unique_ptr<State> state) : state_(std::move(state)) {}

CudaBackend::~CudaBackend() {
  if (state_ && state_->activate().ok()) (void)cudaStreamSynchronize(state_->stream());  // no free under a running kernel
}

const CudaBackendOptions& CudaBackend::options() const { return state_->options; }

int64_t CudaBackend::internal_allocations() const {
  return state_->allocations + state_->plans.allocations() + state_->prefill_plans.allocations();
}

Status CudaBackend::supports(BackendOp op, const AttentionShape& shape) const { return cuda_backend_supports(op, shape); }

namespace {
Status check_error_slot(int slot) {
  KC_CHECK_ARG(slot >= 0 && slot < CudaBackend::kErrorCheckSlots, "cuda backend: error check slot ", slot,
               " outside [0, ", CudaBackend::kErrorCheckSlots, ")");
  return ok_status();
}
}  // namespace

Status CudaBackend::check_device_errors() {
  constexpr int kOwnSlot = kErrorCheckSlots - 1;
  KC_RETURN_IF_ERROR(enqueue_error_check(kOwnSlot));
  const Status synced = cuda::cuda_status(cudaStreamSynchronize(state_->stream()), "cudaStreamSynchronize");
  const Status reported = finish_error_check(kOwnSlot);  // always: it ends the pending check
  KC_RETURN_IF_ERROR(synced);
  return reported;
}

Status CudaBackend::enqueue_error_check(int slot) {
  KC_RETURN_IF_ERROR(state_->eager_only("enqueue_error_check"));
  KC_RETURN_IF_ERROR(check_error_slot(slot));
  KC_CHECK_ARG(!state_->error_check_pending[slot], "cuda backend: enqueue_error_check(", slot,
               ") twice without finish_error_check");
  KC_RETURN_IF_ERROR(state_->activate());
  std::vector<uint32_t*>& words = state_->error_words[slot];
  words.clear();
  state_->plans.error_words(&words);
  if (uint32_t* prefill = state_->prefill_plans.error_word(); prefill != nullptr) words.push_back(prefill);
  words.push_back(state_->error_word.as<uint32_t>());
  if (words.size() > State::kMaxErrorWords)
    return internal_error("cuda backend: ", words.size(), " error words (workspaces); the host copies hold ",
                          State::kMaxErrorWords);
  uint32_t* host = state_->host_errors.as<uint32_t>() + static_cast<size_t>(slot) * State::kMaxErrorWords;
  for (size_t i = 0; i < words.size(); ++i) {
    KC_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(host + i, words[i], sizeof(uint32_t), cudaMemcpyDeviceToHost, state_->stream()));
    KC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(words[i], 0, sizeof(uint32_t), state_->stream()));
  }
  state_->error_check_pending[slot] = true;
  return ok_status();
}

Status CudaBackend::finish_error_check(int slot) {
  KC_RETURN_IF_ERROR(check_error_slot(slot));
  KC_CHECK_ARG(state_->error_check_pending[slot], "cuda backend: finish_error_check(", slot,
               ") without enqueue_error_check");
  state_->error_check_pending[slot] = false;
  uint32_t bits = state_->prefill_plans.take_carried_errors();
  const uint32_t* host = state_->host_errors.as<uint32_t>() + static_cast<size_t>(slot) * State::kMaxErrorWords;
  for (size_t i = 0; i < state_->error_words[slot].size(); ++i) bits |= host[i];
  if (bits == 0) return ok_status();
  // describe_prefill_errors names the shared decode bits too.
  return out_of_range("cuda backend: the kernels met bad device data since the last check (",
                      cuda::describe_prefill_errors(bits),
                      "); the results of those ops are unspecified. Check kv_lens against max_seq_len ",
                      state_->options.max_seq_len,
                      ", cu_q_lens, block tables, index rows (prefill: tile_base and row_offsets) and head maps");
}

Status CudaBackend::finish_op(Status status) {
  if (!status.ok() || !state_->options.check_errors_every_op) return status;
  return check_device_errors();
}

// ---- memory ----

Result<BackendBuffer> CudaBackend::allocate(size_t bytes) {
  KC_RETURN_IF_ERROR(state_->eager_only("allocate"));
  KC_CHECK_ARG(bytes >= 1, "cuda backend: allocate of 0 bytes");
  KC_RETURN_IF_ERROR(state_->activate());
  return cuda::device_allocate(bytes, "allocate()");
}

Status CudaBackend::copy_from_host(void* dst, const void* src, size_t bytes) {
  KC_RETURN_IF_ERROR(state_->eager_only("copy_from_host"));
  if (bytes == 0) return ok_status();
  KC_CHECK_ARG(dst != nullptr && src != nullptr, "cuda backend: copy_from_host of ", bytes,
               " bytes with a null pointer");
  KC_RETURN_IF_ERROR(state_->activate());
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, state_->stream()));
  // From pageable memory the runtime stages the bytes before returning; from pinned memory the copy
  // reads src later, so wait: the caller may reuse src as soon as this returns.
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, src) != cudaSuccess) {
    (void)cudaGetLastError();
    attributes.type = cudaMemoryTypeUnregistered;
  }
  if (attributes.type == cudaMemoryTypeHost) KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(state_->stream()));
  return ok_status();
}

Status CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  KC_RETURN_IF_ERROR(state_->eager_only("copy_to_host"));
  if (bytes == 0) return ok_status();
  KC_CHECK_ARG(dst != nullptr && src != nullptr, "cuda backend: copy_to_host of ", bytes,
               " bytes with a null pointer");
  KC_RETURN_IF_ERROR(state_->activate());
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, state_->stream()));
  KC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(state_->stream()));
  return check_device_errors();
}

// ---- attention ----

Status CudaBackend::dense(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                          const AttentionOutput& out) {
  constexpr const char* kOp = "dense";
  KC_RETURN_IF_ERROR(state_->activate());
  if (!cuda::is_decode_call(q)) {
    KC_RETURN_IF_ERROR(state_->eager_only("dense prefill"));
    KC_ASSIGN_OR_RETURN(const PrefillKey prefill, cuda::check_prefill_call(q, kv, state_->options, kOp));
    auto planned = state_->prefill_plan(prefill, /*selection=*/false, 1);
    if (!planned.ok()) return in_op(planned.status(), kOp);
    return finish_op(in_op(
        cuda::dense_prefill(*planned->plan, q, kv, params, out, planned->workspace, state_->stream()), kOp));
  }
  KC_ASSIGN_OR_RETURN(const DecodeKey key, cuda::check_decode_call(q, kv, state_->options, kOp));
  if (state_->tracing()) {
    state_->trace.add_op(cuda::TracedOp::kDense);
    state_->trace.add_query(q);
    state_->trace.add_kv(kv);
    state_->trace.add_params(params);
    state_->trace.add_output(out);
  }
  if (!state_->launching()) return ok_status();
  KC_ASSIGN_OR_RETURN(const DecodePlanCache::Dense* plan, state_->plans.dense(key));
  return finish_op(
      in_op(cuda::dense_decode(plan->plan, q, kv, params, out, plan->workspace.data(), state_->stream()), kOp));
}

Status CudaBackend::sparse_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                  const DecodeIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) {
  constexpr const char* kOp = "sparse_decode";
  KC_RETURN_IF_ERROR(state_->activate());
  KC_ASSIGN_OR_RETURN(const DecodeKey key, cuda::check_decode_call(q, kv, state_->options, kOp));
  KC_RETURN_IF_ERROR(cuda::check_rows(rows, q.batch, rows.num_rows, kOp));
  if (state_->tracing()) {
    state_->trace.add_op(cuda::TracedOp::kSparseDecode);
    state_->trace.add_query(q);
    state_->trace.add_kv(kv);
    state_->trace.add_params(params);
    state_->trace.add_rows(rows);
    state_->trace.add_pointer(head_map);
    state_->trace.add_output(out);
  }
  if (!state_->launching()) return ok_status();
  KC_ASSIGN_OR_RETURN(const DecodePlanCache::Sparse* plan, state_->plans.sparse(key, rows.granularity));
  return finish_op(in_op(cuda::sparse_decode(plan->plan, q, kv, params, rows, head_map, out,
                                             plan->workspace.data(), state_->stream()),
                         kOp));
}

Status CudaBackend::sparse_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                   const PrefillIndexRows& rows, const int32_t* head_map, const AttentionOutput& out) {
  constexpr const char* kOp = "sparse_prefill";
  KC_RETURN_IF_ERROR(state_->eager_only(kOp));
  KC_RETURN_IF_ERROR(state_->activate());
  KC_ASSIGN_OR_RETURN(const PrefillKey key, cuda::check_prefill_call(q, kv, state_->options, kOp));
  auto planned = state_->prefill_plan(key, /*selection=*/false, 1);
  if (!planned.ok()) return in_op(planned.status(), kOp);
  return finish_op(in_op(cuda::sparse_prefill(*planned->plan, q, kv, params, rows, head_map, out, planned->workspace,
                                              state_->stream()),
                         kOp));
}

// ---- selection ----

Status CudaBackend::select_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                  const ScorePooling& pooling, const int32_t* k_per_seq, const DecodeIndexRows& rows) {
  constexpr const char* kOp = "select_decode";
  KC_RETURN_IF_ERROR(state_->activate());
  KC_ASSIGN_OR_RETURN(const DecodeKey key, cuda::check_decode_call(q, kv, state_->options, kOp));
  KC_RETURN_IF_ERROR(state_->check_selection(q, pooling, k_per_seq, rows, kOp));
  if (state_->tracing()) {
    state_->trace.add_op(cuda::TracedOp::kSelectDecode);
    state_->trace.add_query(q);
    state_->trace.add_kv(kv);
    state_->trace.add_params(params);
    state_->trace.add_pooling(pooling);
    state_->trace.add_rows(rows);
    KC_RETURN_IF_ERROR(state_->staged.stage(k_per_seq, q.batch, kOp));
  }
  if (!state_->launching()) return ok_status();
  // The anchor pipeline with a dense output into scratch: the scoring pass then also reads V, the
  // price of one plan shared with the layer-0 anchors.
  KC_ASSIGN_OR_RETURN(void* scratch, state_->selection_output(key));
  const AttentionOutput out{scratch, key.dtype, nullptr};
  return finish_op(in_op(state_->run_anchor(key, q, kv, params, pooling, k_per_seq, rows, /*dense_output=*/true,
                                            nullptr, out),
                         kOp));
}

Status CudaBackend::select_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                   const ScorePooling& pooling, const PrefillIndexRows& rows) {
  constexpr const char* kOp = "select_prefill";
  KC_RETURN_IF_ERROR(state_->eager_only(kOp));
  KC_RETURN_IF_ERROR(state_->activate());
  KC_ASSIGN_OR_RETURN(const PrefillKey key, cuda::check_prefill_call(q, kv, state_->options, kOp));
  auto planned = state_->prefill_plan(key, /*selection=*/true, rows.tile_size);
  if (!planned.ok()) return in_op(planned.status(), kOp);
  return finish_op(in_op(
      cuda::select_prefill(*planned->plan, q, kv, params, pooling, rows, planned->workspace, state_->stream()), kOp));
}

Status CudaBackend::select_prefill_oracle(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                          const PrefillIndexRows& rows) {
  constexpr const char* kOp = "select_prefill_oracle";
  KC_RETURN_IF_ERROR(state_->eager_only(kOp));
  KC_RETURN_IF_ERROR(state_->activate());
  KC_RETURN_IF_ERROR(cuda::check_prefill_call(q, kv, state_->options, kOp).status());
  // Each query is a decode step of select_decode (oracle_prefill_select.h).
  return finish_op(in_op(state_->oracle_prefill.run(*this, q, kv, params, rows, state_->options.max_batch,
                                                    &state_->allocations, state_->stream()),
                         kOp));
}

Status CudaBackend::select_quest_decode(const QueryBatch& q, const PagedKv& kv, int32_t page_size,
                                        const int32_t* k_per_seq, const DecodeIndexRows& rows) {
  constexpr const char* kOp = "select_quest_decode";
  KC_RETURN_IF_ERROR(state_->eager_only(kOp));
  KC_RETURN_IF_ERROR(state_->activate());
  KC_ASSIGN_OR_RETURN(const DecodeKey key, cuda::check_decode_call(q, kv, state_->options, kOp));
  KC_RETURN_IF_ERROR(cuda::check_rows(rows, q.batch, q.num_heads, kOp));
  KC_RETURN_IF_ERROR(cuda::check_k_per_seq(k_per_seq, q.batch, rows.k_max, kOp));
  KC_ASSIGN_OR_RETURN(const int32_t* k_device, state_->upload_k(k_per_seq, q.batch));
  return finish_op(in_op(state_->quest.run(key, q, kv, page_size, k_device, rows, state_->options.max_batch,
                                           state_->options.max_seq_len, state_->error_word.as<uint32_t>(),
                                           &state_->allocations, state_->stream()),
                         kOp));
}

Status CudaBackend::select_lessismore_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                             const int32_t* k_per_seq, int32_t num_sinks,
                                             const DecodeIndexRows& rows) {
  constexpr const char* kOp = "select_lessismore_decode";
  KC_RETURN_IF_ERROR(state_->eager_only(kOp));
  KC_RETURN_IF_ERROR(state_->activate());
  KC_ASSIGN_OR_RETURN(const DecodeKey key, cuda::check_decode_call(q, kv, state_->options, kOp));
  KC_RETURN_IF_ERROR(cuda::check_rows(rows, q.batch, 1, kOp));
  KC_CHECK_ARG(k_per_seq != nullptr, kOp, ": k_per_seq must be non-null");
  return finish_op(in_op(state_->lessismore.run(state_->plans, key, q, kv, params, k_per_seq, num_sinks, rows,
                                                state_->k_device.as<int32_t>(), state_->options.max_batch,
                                                state_->options.max_seq_len, &state_->allocations,
                                                state_->stream()),
                         kOp));
}

// ---- fused anchors ----

Status CudaBackend::anchor_decode(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                  const ScorePooling& pooling, const int32_t* k_per_seq, const DecodeIndexRows& rows,
                                  AnchorOutput output, const int32_t* head_map, const AttentionOutput& out) {
  constexpr const char* kOp = "anchor_decode";
  KC_RETURN_IF_ERROR(state_->activate());
  KC_ASSIGN_OR_RETURN(const DecodeKey key, cuda::check_decode_call(q, kv, state_->options, kOp));
  KC_RETURN_IF_ERROR(state_->check_selection(q, pooling, k_per_seq, rows, kOp));
  if (state_->tracing()) {
    state_->trace.add_op(cuda::TracedOp::kAnchorDecode);
    state_->trace.add_query(q);
    state_->trace.add_kv(kv);
    state_->trace.add_params(params);
    state_->trace.add_pooling(pooling);
    state_->trace.add_rows(rows);
    state_->trace.add(static_cast<uint64_t>(output));
    state_->trace.add_pointer(head_map);
    state_->trace.add_output(out);
    KC_RETURN_IF_ERROR(state_->staged.stage(k_per_seq, q.batch, kOp));
  }
  if (!state_->launching()) return ok_status();
  const bool dense_output = output == AnchorOutput::kDense;
  if (!dense_output) {
    // The fused sparse output reads the fresh rows as sparse_decode would only when the layouts
    // agree; otherwise compose select_decode + sparse_decode (which validate the rest).
    const int32_t r = pooling.num_rows, h = key.num_heads, g = key.num_kv_heads;
    const bool per_head = r == h && h != g;
    const bool fused = per_head ? rows.granularity == IndexGranularity::kPerQueryHead && head_map == nullptr
                                : (rows.granularity == IndexGranularity::kPerKvGroup || h == g) && g % r == 0 &&
                                      (head_map != nullptr || r == g);
    if (!fused) {
      // The composed ops run inside this one: only this op is recorded in a graph pass.
      ++state_->pass_depth;
      Status composed = AttentionBackend::anchor_decode(q, kv, params, pooling, k_per_seq, rows, output, head_map, out);
      --state_->pass_depth;
      return composed;
    }
  }
  return finish_op(
      in_op(state_->run_anchor(key, q, kv, params, pooling, k_per_seq, rows, dense_output, head_map, out), kOp));
}

Status CudaBackend::anchor_prefill(const QueryBatch& q, const PagedKv& kv, const AttentionParams& params,
                                   const ScorePooling& pooling, const PrefillIndexRows& rows, AnchorOutput output,
                                   const int32_t* head_map, const AttentionOutput& out) {
  constexpr const char* kOp = "anchor_prefill";
  KC_RETURN_IF_ERROR(state_->eager_only(kOp));
  KC_RETURN_IF_ERROR(state_->activate());
  KC_ASSIGN_OR_RETURN(const PrefillKey key, cuda::check_prefill_call(q, kv, state_->options, kOp));
  auto planned = state_->prefill_plan(key, /*selection=*/true, rows.tile_size);
  if (!planned.ok()) return in_op(planned.status(), kOp);
  return finish_op(in_op(cuda::anchor_prefill(*planned->plan, q, kv, params, pooling, rows, output, head_map, out,
                                              planned->workspace, state_->stream()),
                         kOp));
}

// ---- CUDA graph passes ----

Status CudaBackend::begin_graph_pass(cuda::GraphPass pass) {
  KC_CHECK_ARG(pass != cuda::GraphPass::kNone, "cuda backend: begin_graph_pass(kNone)");
  KC_CHECK_ARG(state_->pass == cuda::GraphPass::kNone, "cuda backend: begin_graph_pass inside another graph pass");
  if (state_->options.check_errors_every_op)
    return unsupported("cuda backend: check_errors_every_op synchronises after every op, which a CUDA graph cannot "
                       "capture");
  state_->pass = pass;
  state_->pass_depth = 0;
  state_->trace.clear();
  state_->staged.clear();
  return ok_status();
}

Result<bool> CudaBackend::end_graph_pass() {
  const cuda::GraphPass pass = state_->pass;
  KC_CHECK_ARG(pass != cuda::GraphPass::kNone, "cuda backend: end_graph_pass without begin_graph_pass");
  state_->pass = cuda::GraphPass::kNone;
  if (pass == cuda::GraphPass::kCapture) {
    state_->captured_trace = state_->trace;
    state_->has_capture = true;
    return true;
  }
  return state_->has_capture && state_->trace == state_->captured_trace;
}

void CudaBackend::abort_graph_pass() {
  state_->pass = cuda::GraphPass::kNone;
  state_->pass_depth = 0;
  state_->trace.clear();
}

Status CudaBackend::upload_graph_inputs() {
  KC_CHECK_ARG(state_->pass == cuda::GraphPass::kNone, "cuda backend: upload_graph_inputs inside a graph pass");
  if (!state_->staged.staged()) return ok_status();
  const std::vector<int32_t>& sizes = state_->staged.sizes();
  KC_CHECK_ARG(static_cast<int32_t>(sizes.size()) <= state_->options.max_batch, "cuda backend: ", sizes.size(),
               " staged sizes exceed max_batch ", state_->options.max_batch);
  KC_RETURN_IF_ERROR(state_->activate());
  // The sizes are copied into a pageable staging array first, so the copy is staged by the driver
  // before this returns and the next pass may restage them.
  std::copy(sizes.begin(), sizes.end(), state_->k_host.begin());
  KC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(state_->k_device.data(), state_->k_host.data(),
                                          sizes.size() * sizeof(int32_t), cudaMemcpyHostToDevice, state_->stream()));
  return ok_status();
}

Result<std::shared_ptr<AttentionBackend>> make_cuda_backend(const CudaBackendOptions& options) {
  KC_ASSIGN_OR_RETURN(std::shared_ptr<CudaBackend> backend, CudaBackend::create(options));
  return std::shared_ptr<AttentionBackend>(std::move(backend));
}

}  // namespace kascade
