// safetensors.h — reading safetensors files (memory-mapped, read-only) and sharded checkpoints.
//
// Format (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of JSON
// header, then the data section. The header maps each tensor name to {"dtype", "shape",
// "data_offsets": [begin, end]} (offsets relative to the data section) and may hold a
// "__metadata__" object of string → string. The parser trusts nothing and returns DataLoss naming
// the problem for: a file shorter than 8 bytes; N beyond the file or above 100 MB; a header that is
// not a JSON object starting with '{' (trailing spaces allowed, as the spec pads with them);
// invalid JSON or UTF-8; a NUL byte; duplicate keys; nesting deeper than a header needs; a tensor entry without
// exactly dtype / shape / data_offsets; an unknown dtype name; a negative or non-integer dimension;
// a shape whose byte size overflows; offsets that are not two integers with begin <= end <= data
// size; end − begin != numel × element size; overlapping tensors; and, as the spec and the
// reference implementation require, a data section that the tensors do not cover exactly (no
// holes, nothing after the last tensor). The order of entries in the header is free. Known dtypes
// other than F32 / F16 / BF16 (I64, F64, F8_E4M3, ...) and tensors not aligned to their element
// size in the file are refused as Unsupported, naming the tensor.
// A sharded checkpoint is a model.safetensors.index.json whose "weight_map" maps every tensor to a
// shard file in the same directory; the index and the shards must agree exactly.
// Files are mapped read-only and private; as with any mapping, a file truncated by another process
// while mapped makes later reads fault (SIGBUS) — checkpoints are expected to stay unchanged.
// Tested by tests/unit/model/test_safetensors.cpp (round trips, every validation path, files
// written by transformers) and tests/unit/model/test_safetensors_fuzz.cpp (thousands of random
// corruptions: each returns OK or a clear error, never crashes; run under ASan).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kascade/dtype.h"
#include "kascade/status.h"
#include "kascade/weights.h"

namespace kascade {

// Largest header accepted (the reference implementation's limit).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets in the data section: [begin, end)
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t data_start = 0;                      // file offset of the data section: 8 + N
  std::vector<SafetensorsTensorInfo> tensors;   // sorted by (begin, end)
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// "F32", "F16", "BF16" (the format's names).
const char* safetensors_dtype_name(DType dtype);

// Parses and validates the header of the safetensors file whose complete contents are `file`.
Result<SafetensorsHeader> parse_safetensors_header(std::span<const uint8_t> file);

// One safetensors file with its validated header. Copies share the underlying bytes (a read-only
// memory mapping, or an owned buffer), which live as long as any copy does.
class SafetensorsFile {
 public:
  // Maps `path` read-only and validates it; errors carry the path.
  static Result<SafetensorsFile> open(const std::filesystem::path& path);
  // Takes ownership of the bytes of a whole file (tests, in-memory checkpoints).
  static Result<SafetensorsFile> from_bytes(std::vector<uint8_t> bytes, std::string label);

  const std::string& label() const { return label_; }  // the path, or the label given
  const SafetensorsHeader& header() const { return header_; }
  // The entry named `name`, or null.
  const SafetensorsTensorInfo* find(std::string_view name) const;
  // A view of the tensor named `name` (NotFound naming it and the file otherwise).
  Result<TensorView> view(std::string_view name) const;
  TensorView view(const SafetensorsTensorInfo& info) const;
  // The shared owner of the bytes (keeps views valid).
  std::shared_ptr<const void> storage() const { return storage_; }

 private:
  std::shared_ptr<const void> storage_;
  std::span<const uint8_t> bytes_;
  std::string label_;
  SafetensorsHeader header_;
  std::unordered_map<std::string, size_t> index_;  // name → position in header_.tensors
};

// All tensors of a checkpoint: one file, or the shards of an index.
class SafetensorsCheckpoint {
 public:
  // `path`: a directory (model.safetensors if present, else model.safetensors.index.json, as
  // transformers looks for them), a .safetensors file, or an index .json file.
  static Result<SafetensorsCheckpoint> open(const std::filesystem::path& path);
  // A checkpoint of files already open (tests); tensor names must be unique across them.
  static Result<SafetensorsCheckpoint> from_files(std::vector<SafetensorsFile> files);

  const std::vector<SafetensorsFile>& files() const { return files_; }
  // Every tensor name, sorted.
  std::vector<std::string> tensor_names() const;
  // The file holding `name`, or null.
  const SafetensorsFile* file_of(std::string_view name) const;
  Result<TensorView> view(std::string_view name) const;

 private:
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t, std::less<>> owner_;  // tensor name → index in files_
};

// Reads a model.safetensors.index.json: weight_map as tensor → shard file name (plain names only,
// no directories). Exposed for tests.
Result<std::map<std::string, std::string>> parse_safetensors_index(std::string_view json_text);

}  // namespace kascade
