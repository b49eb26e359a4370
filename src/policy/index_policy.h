// src/policy/index_policy.h — the one implementation of AttentionPolicy (kascade/policy.h): it
// runs a PolicyProgram (policy_program.h) over an AttentionBackend. Per forward call it plans the
// index state on the host (decode: rows [batch, R, k_max] with k(n) per sequence; prefill: CSR
// rows planned by src/ref/prefill_rows.h or oracle_plan.h), keeps it in backend memory, lets
// selecting layers overwrite it and reuse layers read it, and counts attended keys from host-side
// lengths. make_policy (kascade/policy.h) builds it.
// Tested by tests/unit/policy/test_policy.cpp, test_baselines.cpp and test_statistics.cpp.
#pragma once

#include <memory>

#include "kascade/backend.h"
#include "kascade/policy.h"

namespace kascade::policy {

// Validates the config, builds its program, checks the backend supports every op the program
// uses, and uploads the head maps.
Result<std::unique_ptr<AttentionPolicy>> make_index_policy(const PolicyConfig& config,
                                                           std::shared_ptr<AttentionBackend> backend);

}  // namespace kascade::policy
