// src/policy/index_policy.h — the one implementation of AttentionPolicy (kascade/policy.h): it
// runs a PolicyProgram (policy_program.h) over an AttentionBackend. Per forward call it plans the
// index state on the host (decode: rows [batch, R, k_max] with k(n) per sequence; prefill: CSR
// rows planned by src/ref/prefill_rows.h or oracle_plan.h), keeps it in backend memory, lets
// selecting layers overwrite it and reuse layers read it, and counts attended keys from host-side
// lengths. make_policy (kascade/policy.h) builds it.
//
// Backend support is checked per forward mode, over the ops the program calls in that mode
// (policy_backend_ops). make_policy refuses a policy only when the backend refuses an op of every
// mode (nothing could run); a policy whose ops of one mode are refused is made, and begin_forward
// of that mode returns the refusal (kUnsupported from the backend, "policy 'oracle' needs
// select_prefill_oracle on the cuda backend for prefill: ...") before anything runs — never a crash
// and never a fallback to other ops. So the decode-only use of a policy whose prefill the backend
// cannot run (the oracle on CUDA) works, and its prefill is refused by name.
// Tested by tests/unit/policy/test_policy.cpp, test_baselines.cpp, test_statistics.cpp and
// test_policy_support.cpp.
#pragma once

#include <memory>
#include <vector>

#include "kascade/backend.h"
#include "kascade/policy.h"

namespace kascade::policy {

// The backend ops the policy `config` calls in `mode`, each once, in the order of first use over
// the layers (kDense, the selection op, the sparse op of the mode). anchor_prefill / anchor_decode
// count as their selection op plus dense or sparse output. Refuses an invalid config.
Result<std::vector<BackendOp>> policy_backend_ops(const PolicyConfig& config, ForwardMode mode);

// OK when `backend` supports (for the config's shape) every op of policy_backend_ops(config, mode);
// otherwise the backend's refusal of the first one, with context "policy '<name>' needs <op> on the
// <backend> backend for <mode>". A runtime can ask this before it starts a prefill.
Status check_mode_support(const PolicyConfig& config, const AttentionBackend& backend, ForwardMode mode);

// Validates the config, builds its program, checks the backend's support per mode (refusing the
// policy when no mode can run: the message gives both modes' refusals), and uploads the head maps.
Result<std::unique_ptr<AttentionPolicy>> make_index_policy(const PolicyConfig& config,
                                                           std::shared_ptr<AttentionBackend> backend);

}  // namespace kascade::policy
