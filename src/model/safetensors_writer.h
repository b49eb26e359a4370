// safetensors_writer.h — writing safetensors files and sharded checkpoints (as transformers'
// save_pretrained lays them out), e.g. to save dummy weights or to build test checkpoints.
//
// Layout: the 8-byte header length, the JSON header padded with spaces to a multiple of 8 bytes,
// then the tensors back to back, F32 before F16/BF16 (stable otherwise), so every tensor is aligned
// to its element size. Sharded: model-0000i-of-0000n.safetensors files of at most max_shard_bytes
// of tensor data each (a larger tensor gets a shard of its own) and model.safetensors.index.json
// with {"metadata": {"total_size"}, "weight_map"}.
// Tested by tests/unit/model/test_safetensors.cpp (round trips through the reader, and files the
// reader must accept byte for byte as transformers writes them).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kascade/status.h"
#include "kascade/weights.h"

namespace kascade {

// The bytes of a safetensors file holding `tensors` (names unique and not "__metadata__"; each view
// with non-negative dims and data unless empty) and `metadata`.
Result<std::vector<uint8_t>> serialize_safetensors(std::span<const NamedTensor> tensors,
                                                   const std::map<std::string, std::string>& metadata = {});

// Writes the same bytes to `path` (streamed, tensor by tensor).
Status write_safetensors_file(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                              const std::map<std::string, std::string>& metadata = {});

// Writes `tensors` into the existing directory `dir`: model.safetensors when they fit in one shard
// of max_shard_bytes, otherwise shards plus model.safetensors.index.json. Returns the file names
// written.
Result<std::vector<std::string>> write_safetensors_checkpoint(const std::filesystem::path& dir,
                                                              std::span<const NamedTensor> tensors,
                                                              uint64_t max_shard_bytes);

}  // namespace kascade
