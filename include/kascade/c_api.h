/* kascade/c_api.h — a C interface to kascade, for programs written in C, or in Python through ctypes
 * (python/kascade, which passes numpy arrays' or torch tensors' data pointers), at two levels:
 *   - policies (the engine level): the engine owns its paged KV cache and calls, per forward call,
 *     begin_forward once and attention once per layer, exactly as the C++ AttentionPolicy
 *     (kascade/policy.h) is used;
 *   - the runtime (kascade/runtime.h): a model directory in, tokens or text out.
 *
 *   kascade_backend* b;  kascade_backend_cpu(&b);          // or kascade_backend_cuda(...)
 *   kascade_policy_config c;  kascade_policy_config_init(&c);  c.name = "kascade"; ...
 *   kascade_policy* p;  kascade_policy_create(b, &c, &p);
 *   kascade_policy_begin_forward(p, KASCADE_DECODE, batch, q_lens, kv_lens);   // host arrays
 *   for (layer ...) kascade_policy_attention(p, layer, &q, &kv, scale, o, lse);
 *
 * Memory: the views' pointers live in the backend's memory (host for the CPU backend, device for
 * CUDA), with the layouts of kascade/attention.h: q [total_q, num_heads, head_dim], K and V
 * [num_pages, page_size, num_kv_heads, head_dim], block_table [batch, max_pages_per_seq], kv_lens
 * [batch], cu_q_lens [batch + 1], o like q (same dtype), lse [total_q, num_heads] fp32 or NULL.
 * Errors: every call returns a kascade_status (0 = OK); kascade_last_error() gives the message of the
 * calling thread's last failure, naming the argument or value at fault. No call throws or aborts.
 * Handles: a policy keeps its backend alive; destroy each handle once (NULL is ignored).
 * Implementation: src/capi/c_api.cpp, built as the shared library libkascade_c. Tested by
 * tests/python/test_c_api.py (through python/kascade on the CPU backend, against a numpy reference),
 * tests/python/test_c_api_cuda.py (the CUDA backend on torch tensors; skips without torch or a GPU) and
 * tests/scripts/test_install.sh (the installed library, its Python binding, examples/c_decode.c). */
#ifndef KASCADE_C_API_H
#define KASCADE_C_API_H

#include <stdint.h>

#if defined(_WIN32)
#define KASCADE_C_EXPORT __declspec(dllexport)
#else
#define KASCADE_C_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define KASCADE_C_API_VERSION 1

/* The values of kascade::StatusCode (kascade/status.h). */
typedef enum {
  KASCADE_OK = 0,
  KASCADE_INVALID_ARGUMENT = 1,
  KASCADE_OUT_OF_RANGE = 2,
  KASCADE_NOT_FOUND = 3,
  KASCADE_UNSUPPORTED = 4,
  KASCADE_DATA_LOSS = 5,
  KASCADE_RESOURCE_EXHAUSTED = 6,
  KASCADE_INTERNAL = 7,
  KASCADE_IO_ERROR = 8,
} kascade_status;

typedef enum { KASCADE_F32 = 0, KASCADE_F16 = 1, KASCADE_BF16 = 2 } kascade_dtype;
typedef enum { KASCADE_PREFILL = 0, KASCADE_DECODE = 1 } kascade_mode;
/* Layer roles (kascade::LayerRole): dense, dense output + selection, selection + own rows, reuse. */
typedef enum { KASCADE_ROLE_DENSE = 0, KASCADE_ROLE_DENSE_ANCHOR = 1, KASCADE_ROLE_ANCHOR = 2, KASCADE_ROLE_REUSE = 3 } kascade_role;

typedef struct kascade_backend kascade_backend;
typedef struct kascade_policy kascade_policy;

/* kascade::PolicyConfig; kascade_policy_config_init sets the defaults noted. */
typedef struct {
  const char* name;         /* one of the policy names of kascade/policy.h ("dense") */
  int32_t num_layers;       /* N */
  int32_t num_heads;        /* H */
  int32_t num_kv_heads;     /* G, H % G == 0 */
  int32_t head_dim;         /* d */
  double topk_fraction;     /* rho of the budget k(n) = max(k_min, ceil(rho n)) capped at n (0.10) */
  int64_t k_min;            /* (128) */
  int32_t tile_size;        /* prefill tile T (32) */
  int32_t rolling;          /* 1: rolling prefill budget k(s_t) (1) */
  const int32_t* anchors;   /* kascade variants: ascending layers, anchors[0] == 0 (NULL) */
  int32_t num_anchors;      /* (0) */
  const int32_t* head_map;  /* kascade variants: [num_layers, num_kv_heads] row-major, the anchor KV head
                               each layer's KV head reads (a calibration file's head_map); NULL: identity */
  const char* calibration_file;    /* kascade variants, instead of anchors / head_map: a file made by
                                      `kascade calibrate` (or --import-npy) for this shape (NULL) */
  int32_t calibration_num_anchors; /* its anchor set with this many anchors; 0: the file's default (0) */
} kascade_policy_config;

/* kascade::QueryBatch and kascade::PagedKv (kascade/attention.h). */
typedef struct {
  const void* q;
  int32_t dtype; /* kascade_dtype */
  int32_t batch;
  int32_t total_q;
  int32_t num_heads;
  int32_t head_dim;
  const int32_t* cu_q_lens;
} kascade_query;

typedef struct {
  const void* k;
  const void* v;
  int32_t dtype; /* kascade_dtype */
  int32_t num_pages;
  int32_t page_size;
  int32_t num_kv_heads;
  int32_t head_dim;
  const int32_t* block_table;
  int32_t max_pages_per_seq;
  const int32_t* kv_lens;
} kascade_paged_kv;

KASCADE_C_EXPORT int32_t kascade_c_api_version(void);
/* 1 when this library has the CUDA backend compiled in (a GPU may still be missing). */
KASCADE_C_EXPORT int32_t kascade_has_cuda(void);
/* The message of this thread's last failed call ("" when none failed). Valid until the thread's next call. */
KASCADE_C_EXPORT const char* kascade_last_error(void);

KASCADE_C_EXPORT int32_t kascade_backend_cpu(kascade_backend** out);
/* stream: a cudaStream_t (NULL: the legacy default stream), e.g. torch.cuda.current_stream().cuda_stream.
 * max_batch / max_seq_len bound every later call (plans are sized by them), and every block table given to it
 * must have room for max_seq_len keys: max_pages_per_seq >= ceil(max_seq_len / page_size) (so a captured decode step
 * stays valid as the lengths grow; unused entries are never read). */
KASCADE_C_EXPORT int32_t kascade_backend_cuda(int32_t device, void* stream, int32_t max_batch, int32_t max_seq_len,
                                              kascade_backend** out);
KASCADE_C_EXPORT void kascade_backend_destroy(kascade_backend* backend);

/* CUDA graphs of decode steps (the CUDA backend; the CPU backend refuses with KASCADE_UNSUPPORTED). The
 * policy's host work (plans, statistics) runs every step; the kernels are replayed. Inputs the graph reads
 * (q, K/V, block table, kv_lens, cu_q_lens, outputs) must stay at the addresses they had at capture.
 *   capture:      begin_forward; begin_graph_pass(KASCADE_GRAPH_CAPTURE); capture every layer's attention on
 *                 the backend's stream; end_graph_pass(&kept); upload_graph_inputs; launch the graph.
 *   every replay: begin_forward (the new lengths); begin_graph_pass(KASCADE_GRAPH_CHECK); attention for every
 *                 layer (host only: nothing is launched); end_graph_pass(&same); if same: upload_graph_inputs
 *                 and launch, else capture again (the index rows grew past the captured width, or the batch
 *                 composition changed).
 * Run the first step of a batch composition eagerly (outside any pass) so its plans are made before a capture.
 * Inside a pass only decode attention of the graph-safe policies (dense, kascade variants) is allowed. */
typedef enum { KASCADE_GRAPH_CAPTURE = 1, KASCADE_GRAPH_CHECK = 2 } kascade_graph_pass;
KASCADE_C_EXPORT int32_t kascade_backend_begin_graph_pass(kascade_backend* backend, int32_t pass);
/* *result: capture pass — 1 (the trace is kept); check pass — 1 when the step's ops equal the captured ones. */
KASCADE_C_EXPORT int32_t kascade_backend_end_graph_pass(kascade_backend* backend, int32_t* result);
/* Ends a pass whose step failed (its trace is dropped, an earlier capture kept). */
KASCADE_C_EXPORT void kascade_backend_abort_graph_pass(kascade_backend* backend);
/* Copies the Top-k sizes the last pass staged into the buffer the captured selections read; before each launch. */
KASCADE_C_EXPORT int32_t kascade_backend_upload_graph_inputs(kascade_backend* backend);

KASCADE_C_EXPORT void kascade_policy_config_init(kascade_policy_config* config);
KASCADE_C_EXPORT int32_t kascade_policy_create(kascade_backend* backend, const kascade_policy_config* config,
                                               kascade_policy** out);
KASCADE_C_EXPORT void kascade_policy_destroy(kascade_policy* policy);
/* q_lens, kv_lens: host arrays of `batch` entries (decode: q_lens all 1). */
KASCADE_C_EXPORT int32_t kascade_policy_begin_forward(kascade_policy* policy, int32_t mode, int32_t batch,
                                                      const int32_t* q_lens, const int32_t* kv_lens);
/* One layer of the current call; o has q's dtype; lse may be NULL. scale: the softmax scale (1/sqrt(d)). */
KASCADE_C_EXPORT int32_t kascade_policy_attention(kascade_policy* policy, int32_t layer, const kascade_query* q,
                                                  const kascade_paged_kv* kv, float scale, void* o, float* lse);
KASCADE_C_EXPORT int32_t kascade_policy_layer_role(const kascade_policy* policy, int32_t layer, int32_t mode,
                                                   int32_t* role);
/* Keys attended by `layer` (-1: all layers) in `mode`, summed over the calls since the policy was made:
 * attended and causal counts of (query, head, key) triples (kascade::AttendedCount). */
KASCADE_C_EXPORT int32_t kascade_policy_keys_attended(const kascade_policy* policy, int32_t mode, int32_t layer,
                                                      int64_t* attended, int64_t* causal);

/* ---- the runtime (kascade/runtime.h): a whole model, tokenizer to generated tokens ---- */

typedef struct kascade_runtime kascade_runtime;

/* kascade::RuntimeOptions; kascade_runtime_options_init sets the defaults noted. */
typedef struct {
  const char* model_path;       /* a model directory: config.json, safetensors, tokenizer.json */
  int32_t device;               /* 0: CPU, 1: CUDA (0) */
  int32_t cuda_device;          /* (0) */
  int32_t cuda_dtype;           /* CUDA activations, weights and KV cache: KASCADE_BF16 or KASCADE_F16 (bf16) */
  int32_t max_batch;            /* CUDA: most sequences per generate (8) */
  int64_t max_context;          /* longest prompt + generation; 0: the config's max_position_embeddings (0) */
  const char* policy;           /* attention policy ("dense") */
  const char* calibration_file; /* kascade variants; NULL: <model dir>/kascade_calibration.json when it exists */
  int32_t num_anchors;          /* the file's anchor set with this many anchors; 0: its default (0) */
  double topk_fraction;         /* (0.10) */
} kascade_runtime_options;

KASCADE_C_EXPORT void kascade_runtime_options_init(kascade_runtime_options* options);
KASCADE_C_EXPORT int32_t kascade_runtime_create(const kascade_runtime_options* options, kascade_runtime** out);
KASCADE_C_EXPORT void kascade_runtime_destroy(kascade_runtime* runtime);
/* One line: architecture, size, dtypes, policy and its anchors. Owned by the runtime. */
KASCADE_C_EXPORT const char* kascade_runtime_describe(kascade_runtime* runtime);
/* The model's tokenizer. encode: up to `capacity` ids; *count = the number of ids, and KASCADE_OUT_OF_RANGE
 * when it exceeds capacity (call again with a larger buffer). decode: up to `capacity` bytes including the
 * terminating NUL; *length = the text's bytes, KASCADE_OUT_OF_RANGE when length + 1 > capacity. */
KASCADE_C_EXPORT int32_t kascade_runtime_encode(kascade_runtime* runtime, const char* text, int32_t add_special_tokens,
                                                int32_t* ids, int64_t capacity, int64_t* count);
KASCADE_C_EXPORT int32_t kascade_runtime_decode(kascade_runtime* runtime, const int32_t* ids, int64_t count,
                                                char* text, int64_t capacity, int64_t* length);
/* Generates for `batch` prompts, prompt b = prompts[offsets[b] .. offsets[b + 1]) (offsets: batch + 1 entries,
 * offsets[0] = 0). Sampling as kascade::SamplerConfig (temperature 0: greedy); stops at the model's EOS.
 * tokens: [batch, max_new_tokens], -1 after each sequence's end; counts: [batch] tokens generated. */
KASCADE_C_EXPORT int32_t kascade_runtime_generate(kascade_runtime* runtime, const int32_t* prompts,
                                                  const int64_t* offsets, int32_t batch, int32_t max_new_tokens,
                                                  float temperature, int32_t top_k, float top_p, uint64_t seed,
                                                  int32_t* tokens, int32_t* counts);
/* The last generate's share of keys attended (prefill, decode; NaN when the phase did not run) and its
 * prefill / decode seconds. */
KASCADE_C_EXPORT int32_t kascade_runtime_last_stats(kascade_runtime* runtime, double* prefill_keys, double* decode_keys,
                                                    double* prefill_seconds, double* decode_seconds);

#ifdef __cplusplus
}
#endif

#endif /* KASCADE_C_API_H */
