// src/cuda/prefill/prefill_launch.h — the cudaError_t launchers each prefill .cu file exports:
// attention (dense_prefill_kernels.cu, lse_prefill_kernels.cu, sparse_prefill_kernels.cu), pooled
// scores (pooled_scores_kernels.cu), the warp-specialised dense / LSE kernels (ws_attention_kernels.cu),
// sparse kernel (ws_sparse_kernels.cu) and pooled-score kernel (ws_pooled_scores_kernels.cu), and the
// per-tile Top-k (tile_topk_kernels.cu). They speak
// CUDA only, so the .cu files need no host library headers; prefill_ops.cpp wraps them into
// Status-returning ops. An unbuilt (element type, head dim) returns cudaErrorInvalidValue (the ops
// refuse it first with a Status naming the value). Tested through the ops (tests/cuda/).
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/prefill/prefill_params.h"
#include "cuda/prefill/ws_tensor_map.h"

namespace kascade::cuda::prefill {

// Attention kernels; grid as documented at AttentionArgs. wgmma: Q·Kᵀ on sm_90a warpgroup MMAs.
cudaError_t launch_dense_attention(ElementType type, int head_dim, bool wgmma, const AttentionArgs& args, dim3 grid,
                                   cudaStream_t stream);
cudaError_t launch_lse_attention(ElementType type, int head_dim, bool wgmma, const AttentionArgs& args, dim3 grid,
                                 cudaStream_t stream);
cudaError_t launch_sparse_attention(ElementType type, int head_dim, bool wgmma, const AttentionArgs& args, dim3 grid,
                                    cudaStream_t stream);

// Warp-specialised sm_90a dense / LSE kernels (ws_attention_kernels.cu): a persistent grid of
// `ctas` CTAs (ws_grid_ctas in prefill_shapes.h) walking args.row_blocks × G × batch units.
// maps: null for the cp.async producer; else the K/V tensor maps of args.call (ws_tensor_map.h) for
// the TMA producer.
cudaError_t launch_ws_dense_attention(ElementType type, int head_dim, const AttentionArgs& args, const WsKvMaps* maps,
                                      int ctas, cudaStream_t stream);
cudaError_t launch_ws_lse_attention(ElementType type, int head_dim, const AttentionArgs& args, const WsKvMaps* maps,
                                    int ctas, cudaStream_t stream);
// Warp-specialised sm_90a sparse prefill (ws_sparse_kernels.cu): persistent grid of `ctas` CTAs
// walking args.row_blocks (tile slots per sequence × row_blocks_per_tile) × consumers × batch units;
// K/V rows gathered by cp.async (any page size; head rows (cache row · G + kv_head) < 2^31: ws_gather_eligible).
cudaError_t launch_ws_sparse_attention(ElementType type, int head_dim, const AttentionArgs& args, int ctas,
                                       cudaStream_t stream);
// Warp-specialised sm_90a pooled scores of one wave (ws_pooled_scores_kernels.cu): persistent grid
// of `ctas` CTAs walking args.wave_slots × G × args.key_chunks units; K by the TMA producer (maps of
// args.call, ws_tensor_map.h; the layout must be ws_tma_eligible).
cudaError_t launch_ws_pooled_scores(ElementType type, int head_dim, const PoolArgs& args, const WsKvMaps& maps,
                                    int ctas, cudaStream_t stream);

// Pooled scores of one wave; m_tiles = 1 (rows of a tile <= 128) or 2 (<= 256).
cudaError_t launch_pooled_scores(ElementType type, int head_dim, int m_tiles, bool wgmma, const PoolArgs& args,
                                 dim3 grid, cudaStream_t stream);

// Top-k of one wave; grid (tiles_in_flight, R).
cudaError_t launch_tile_topk(const TopkArgs& args, dim3 grid, cudaStream_t stream);

// Raise a kernel's dynamic shared-memory limit (needed once per process before its first launch
// with more than 48 KB); the pooled-score one also reports how many CTAs fit on a multiprocessor.
// With wgmma they fail (cudaErrorInvalidDeviceFunction) when the build holds no sm_90a code.
cudaError_t prepare_dense_attention(ElementType type, int head_dim, bool wgmma);
cudaError_t prepare_lse_attention(ElementType type, int head_dim, bool wgmma);
cudaError_t prepare_sparse_attention(ElementType type, int head_dim, bool wgmma);
// Every warp-specialised kernel of (type, head_dim): dense, LSE, sparse, pooled scores;
// cudaErrorInvalidDeviceFunction without sm_90a code.
cudaError_t prepare_ws_attention(ElementType type, int head_dim);
cudaError_t prepare_ws_sparse_attention(ElementType type, int head_dim);
cudaError_t prepare_ws_pooled_scores(ElementType type, int head_dim);
cudaError_t prepare_pooled_scores(ElementType type, int head_dim, int m_tiles, bool wgmma, int* ctas_per_sm);

}  // namespace kascade::cuda::prefill
