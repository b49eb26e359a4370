// safetensors_writer.cpp — safetensors files and sharded checkpoints (src/model/safetensors_writer.h).
// Tested by tests/unit/model/test_safetensors.cpp (everything written is read back by the
// validating reader, values compared).
#include "model/safetensors_writer.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "model/safetensors.h"

namespace kascade {
namespace {

using nlohmann::json;

Status check_tensors(std::span<const NamedTensor> tensors) {
  std::set<std::string> names;
  for (const NamedTensor& t : tensors) {
    if (t.name == "__metadata__") return invalid_argument("a tensor cannot be named __metadata__");
    if (!names.insert(t.name).second) return invalid_argument("tensor name '", t.name, "' appears twice");
    for (int64_t d : t.view.shape)
      if (d < 0) return invalid_argument("tensor '", t.name, "' has a negative dimension: ", shape_to_string(t.view.shape));
    if (t.view.data == nullptr && t.view.numel() != 0) return invalid_argument("tensor '", t.name, "' has no data");
  }
  return ok_status();
}

// Tensors in file order: 4-byte dtypes first, then 2-byte ones (stable), so each is aligned.
std::vector<const NamedTensor*> file_order(std::span<const NamedTensor> tensors) {
  std::vector<const NamedTensor*> order;
  for (const NamedTensor& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const NamedTensor* a, const NamedTensor* b) {
    return dtype_size(a->view.dtype) > dtype_size(b->view.dtype);
  });
  return order;
}

// The 8-byte length followed by the space-padded JSON header.
std::string encode_header(const std::vector<const NamedTensor*>& order,
                          const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const NamedTensor* t : order) {
    const uint64_t bytes = t->view.nbytes();
    header[t->name] = {{"dtype", safetensors_dtype_name(t->view.dtype)},
                       {"shape", t->view.shape},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace

Result<std::vector<uint8_t>> serialize_safetensors(std::span<const NamedTensor> tensors,
                                                   const std::map<std::string, std::string>& metadata) {
  KC_RETURN_IF_ERROR(check_tensors(tensors));
  const std::vector<const NamedTensor*> order = file_order(tensors);
  const std::string header = encode_header(order, metadata);
  std::vector<uint8_t> bytes(header.begin(), header.end());
  for (const NamedTensor* t : order) {
    const auto* data = static_cast<const uint8_t*>(t->view.data);
    if (t->view.nbytes() > 0) bytes.insert(bytes.end(), data, data + t->view.nbytes());
  }
  return bytes;
}

Status write_safetensors_file(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                              const std::map<std::string, std::string>& metadata) {
  KC_RETURN_IF_ERROR(check_tensors(tensors));
  const std::vector<const NamedTensor*> order = file_order(tensors);
  const std::string header = encode_header(order, metadata);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return io_error("cannot create ", path.string());
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  for (const NamedTensor* t : order)
    out.write(static_cast<const char*>(t->view.data), static_cast<std::streamsize>(t->view.nbytes()));
  out.close();
  if (!out) return io_error("cannot write ", path.string());
  return ok_status();
}

Result<std::vector<std::string>> write_safetensors_checkpoint(const std::filesystem::path& dir,
                                                              std::span<const NamedTensor> tensors,
                                                              uint64_t max_shard_bytes) {
  KC_CHECK_ARG(max_shard_bytes > 0, "max_shard_bytes must be positive");
  KC_RETURN_IF_ERROR(check_tensors(tensors));
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return not_found("directory ", dir.string(), " does not exist");
  // Greedy split in the given order, as transformers' save_pretrained does.
  std::vector<std::vector<NamedTensor>> shards(1);
  uint64_t shard_bytes = 0;
  uint64_t total = 0;
  for (const NamedTensor& t : tensors) {
    const uint64_t bytes = t.view.nbytes();
    if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(t);
    shard_bytes += bytes;
    total += bytes;
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  std::vector<std::string> written;
  if (shards.size() == 1) {
    KC_RETURN_IF_ERROR(write_safetensors_file(dir / "model.safetensors", shards[0], metadata));
    written.push_back("model.safetensors");
    return written;
  }
  json weight_map = json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    KC_RETURN_IF_ERROR(write_safetensors_file(dir / name, shards[s], metadata));
    for (const NamedTensor& t : shards[s]) weight_map[t.name] = name;
    written.push_back(name);
  }
  const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const std::string text = index.dump(2) + "\n";
  std::ofstream out(dir / "model.safetensors.index.json", std::ios::binary | std::ios::trunc);
  if (!out) return io_error("cannot create ", (dir / "model.safetensors.index.json").string());
  out << text;
  out.close();
  if (!out) return io_error("cannot write ", (dir / "model.safetensors.index.json").string());
  written.push_back("model.safetensors.index.json");
  return written;
}

}  // namespace kascade
