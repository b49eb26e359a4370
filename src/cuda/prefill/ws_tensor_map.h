// src/cuda/prefill/ws_tensor_map.h — TMA tensor maps of the K and V caches for the warp-specialised
// prefill mainloop's TMA producer (ws_attention_kernel.cuh, kTma = true). Each map views a cache
// [num_pages · page_size cache rows][G][d] (16-bit elements) as a 3-D tensor (d, G, rows) with a box
// of 64 elements × 1 head × 128 rows and 128-byte swizzle: one box = one [128][64] column block of
// a key tile in the swizzle<> layout the wgmma descriptors read (prefill_device.cuh).
// Encoded on the host through cuTensorMapEncodeTiled obtained from cudaGetDriverEntryPointByVersion
// (no -lcuda link). Tested through the TMA variant of the prefill tests (tests/cuda/test_prefill_*.cpp,
// PrefillVariant::kWarpSpecializedTma) and the host-side eligibility checks in test_prefill_plan.cpp.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/prefill/prefill_params.h"
#include "kascade/status.h"

namespace kascade::cuda::prefill {

// Kernel parameter of the TMA kernels (__grid_constant__): the K and V maps.
struct WsKvMaps {
  CUtensorMap k;
  CUtensorMap v;
};

// Whether the TMA producer can serve this call: 16-byte-aligned K/V bases and a layout where a
// 128-key tile lies in one page (page size a multiple of 128, or one page per sequence).
bool ws_tma_eligible(const CallArgs& call, int head_dim);

// Encodes both maps for `call` (head_dim 64 or 128, 16-bit elements). Fails with a Status naming
// the problem when the call is not eligible or the driver refuses the encoding.
Status encode_ws_kv_maps(const CallArgs& call, int head_dim, WsKvMaps& maps);

}  // namespace kascade::cuda::prefill
