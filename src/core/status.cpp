// status.cpp — names and formatting of Status (include/kascade/status.h).
// Tested by tests/unit/core/test_core.cpp.
#include "kascade/status.h"

namespace kascade {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kUnsupported: return "Unsupported";
    case StatusCode::kDataLoss: return "DataLoss";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kIoError: return "IoError";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status& Status::with_context(const std::string& context) {
  if (!ok()) message_ = context + ": " + message_;
  return *this;
}

}  // namespace kascade
