// dummy_weights.h — random weights of the right shapes for any config (`--dummy-weights`, as
// serving engines offer for benchmarks).
//
// Every tensor of expected_weights(config) is allocated in `dtype` and filled like a freshly
// initialised transformers model: linear and embedding weights ~ normal(0, initializer_range)
// (0.02 by default), RMSNorm weights (input / post-attention / final / q / k norms) = 1, so
// activations stay finite through any depth. Values depend only on (seed, tensor name, element
// index): a 64-bit counter hash (splitmix64) feeds a Box–Muller transform, so results are the same
// on every machine and for any thread count. Tested by tests/unit/model/test_dummy_weights.cpp.
#pragma once

#include <cstdint>

#include "kascade/dtype.h"
#include "kascade/model_config.h"
#include "kascade/status.h"
#include "kascade/weights.h"

namespace kascade {

// ResourceExhausted when the weights would not fit in the machine's physical memory.
Result<Weights> make_dummy_weights(const ModelConfig& config, DType dtype, uint64_t seed);

}  // namespace kascade
