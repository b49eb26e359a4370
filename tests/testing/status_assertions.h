// tests/testing/status_assertions.h — a gtest assertion on refusals: the Status failed with the
// expected code and its message names the problem (contains `needle`). Header-only; used by the
// CUDA tests (tests/cuda/test_backend_*.cpp, test_decode_plan.cpp), whose refusal checks exercise
// it on both outcomes (accepted calls and refusals).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kascade/status.h"

namespace kascade::testing {

inline ::testing::AssertionResult refused_naming(const Status& status, StatusCode code, const std::string& needle) {
  if (status.ok()) return ::testing::AssertionFailure() << "accepted; expected a refusal naming '" << needle << "'";
  if (status.code() != code) return ::testing::AssertionFailure() << "wrong code: " << status.to_string();
  if (status.message().find(needle) == std::string::npos)
    return ::testing::AssertionFailure() << "message does not name '" << needle << "': " << status.message();
  return ::testing::AssertionSuccess();
}

}  // namespace kascade::testing
