// kascade/status.h — the library's error type.
//
// Every public function that can fail returns a Status (or a Result<T>) that names the problem:
// which argument, what was expected, what was given. Nothing in the library calls exit() or
// asserts on user input; tools turn a failed Status into a message and a non-zero exit code.
// Tested by tests/unit/core/test_core.cpp.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace kascade {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // wrong shape, bad parameter, malformed input
  kOutOfRange,        // index or length outside what the caller declared
  kNotFound,          // missing file, unknown name
  kUnsupported,       // a valid request this build or device does not support
  kDataLoss,          // corrupt or truncated file
  kResourceExhausted, // does not fit in memory
  kInternal,          // a bug in kascade (an invariant broke)
  kIoError,           // the operating system refused a read or write
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: q.head_dim is 96; built head dims are 64 and 128"
  std::string to_string() const;

  // Prefixes the message with context ("layer 3: ...") and returns *this.
  Status& with_context(const std::string& context);

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status ok_status() { return Status(); }

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

// Builders: invalid_argument("q.head_dim is ", d, "; expected 64 or 128").
template <typename... Args>
Status invalid_argument(Args&&... args) {
  return Status(StatusCode::kInvalidArgument, detail::concat(std::forward<Args>(args)...));
}
template <typename... Args>
Status out_of_range(Args&&... args) {
  return Status(StatusCode::kOutOfRange, detail::concat(std::forward<Args>(args)...));
}
template <typename... Args>
Status not_found(Args&&... args) {
  return Status(StatusCode::kNotFound, detail::concat(std::forward<Args>(args)...));
}
template <typename... Args>
Status unsupported(Args&&... args) {
  return Status(StatusCode::kUnsupported, detail::concat(std::forward<Args>(args)...));
}
template <typename... Args>
Status data_loss(Args&&... args) {
  return Status(StatusCode::kDataLoss, detail::concat(std::forward<Args>(args)...));
}
template <typename... Args>
Status resource_exhausted(Args&&... args) {
  return Status(StatusCode::kResourceExhausted, detail::concat(std::forward<Args>(args)...));
}
template <typename... Args>
Status internal_error(Args&&... args) {
  return Status(StatusCode::kInternal, detail::concat(std::forward<Args>(args)...));
}
template <typename... Args>
Status io_error(Args&&... args) {
  return Status(StatusCode::kIoError, detail::concat(std::forward<Args>(args)...));
}

// Result<T>: a value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status)  // NOLINT(google-explicit-constructor)
      : status_(status.ok() ? internal_error("Result constructed from an OK status without a value")
                            : std::move(status)) {}
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace kascade

#define KASCADE_CONCAT_INNER_(a, b) a##b
#define KASCADE_CONCAT_(a, b) KASCADE_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define KC_RETURN_IF_ERROR(expr)                          \
  do {                                                    \
    ::kascade::Status kc_status_ = (expr);                \
    if (!kc_status_.ok()) return kc_status_;              \
  } while (0)

// `KC_ASSIGN_OR_RETURN(auto x, make_x());`
#define KC_ASSIGN_OR_RETURN(lhs, expr) \
  KC_ASSIGN_OR_RETURN_IMPL_(KASCADE_CONCAT_(kc_result_, __LINE__), lhs, expr)
#define KC_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

// Argument check that survives release builds: returns InvalidArgument naming the condition.
#define KC_CHECK_ARG(cond, ...)                                                         \
  do {                                                                                  \
    if (!(cond)) return ::kascade::invalid_argument(__VA_ARGS__);                        \
  } while (0)
