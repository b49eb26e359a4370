// safetensors.cpp — safetensors header validation, read-only memory mapping and sharded
// checkpoints (src/model/safetensors.h). Every size is checked before it is used in arithmetic, so
// no input can overflow an offset or index outside the file.
// Tested by tests/unit/model/test_safetensors.cpp and tests/unit/model/test_safetensors_fuzz.cpp.
#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace kascade {
namespace {

using nlohmann::json;

// Thrown from the JSON parser callback to stop at a duplicate key or excessive nesting.
struct StrictJsonError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Parses `text` as JSON, refusing NUL bytes, duplicate object keys and nesting deeper than `max_depth`.
// Returns the error text in `error` (and a null json) on failure.
json parse_strict_json(std::string_view text, size_t max_depth, std::string& error) {
  // nlohmann's parser stops at a NUL byte as if the input ended there; a JSON text has none.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    error = "NUL byte at offset " + std::to_string(nul);
    return json();
  }
  std::vector<std::optional<std::set<std::string>>> stack;  // one entry per open object / array
  auto callback = [&](int /*depth*/, json::parse_event_t event, json& parsed) -> bool {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (stack.size() >= max_depth)
          throw StrictJsonError("nesting deeper than " + std::to_string(max_depth) + " levels");
        if (event == json::parse_event_t::object_start) {
          stack.emplace_back(std::set<std::string>());
        } else {
          stack.emplace_back(std::nullopt);
        }
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case json::parse_event_t::key:
        if (!stack.empty() && stack.back().has_value()) {
          const std::string& key = parsed.get_ref<const std::string&>();
          if (!stack.back()->insert(key).second) {
            std::string shown = key.size() > 80 ? key.substr(0, 77) + "..." : key;
            throw StrictJsonError("duplicate key '" + shown + "'");
          }
        }
        break;
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const StrictJsonError& e) {
    error = e.what();
  } catch (const json::exception& e) {
    error = e.what();
  }
  return json();
}

std::string shorten(std::string_view s) {
  if (s.size() <= 80) return std::string(s);
  return std::string(s.substr(0, 77)) + "...";
}

// Reads a non-negative integer that fits in uint64.
std::optional<uint64_t> as_u64(const json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return static_cast<uint64_t>(value.get<int64_t>());
  return std::nullopt;
}

// The format's dtype names. Known names other than F32/F16/BF16 are Unsupported, others DataLoss.
Result<DType> dtype_from_safetensors_name(const std::string& name, const std::string& tensor) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  static const char* const kOther[] = {"BOOL", "U8", "I8", "I16", "U16", "I32", "U32", "I64", "U64", "F64",
                                       "F8_E5M2", "F8_E4M3", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"};
  for (const char* other : kOther)
    if (name == other)
      return unsupported("tensor '", shorten(tensor), "' has dtype ", name, "; kascade reads F32, F16 and BF16");
  return data_loss("tensor '", shorten(tensor), "' has unknown dtype '", shorten(name), "'");
}

Result<SafetensorsTensorInfo> parse_tensor_entry(const std::string& name, const json& entry, uint64_t data_size) {
  const std::string shown = shorten(name);
  if (!entry.is_object()) return data_loss("header entry of tensor '", shown, "' is not an object");
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    if (it.key() != "dtype" && it.key() != "shape" && it.key() != "data_offsets")
      return data_loss("tensor '", shown, "' has unknown field '", shorten(it.key()), "'");
  }
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key)) return data_loss("tensor '", shown, "' has no '", key, "'");

  SafetensorsTensorInfo info;
  info.name = name;
  const json& dtype = entry.at("dtype");
  if (!dtype.is_string()) return data_loss("tensor '", shown, "': dtype is not a string");
  KC_ASSIGN_OR_RETURN(info.dtype, dtype_from_safetensors_name(dtype.get<std::string>(), name));

  const json& shape = entry.at("shape");
  if (!shape.is_array()) return data_loss("tensor '", shown, "': shape is not a list");
  // numel × element size, refusing any product beyond the data section (which also rules out overflow).
  uint64_t bytes = dtype_size(info.dtype);
  bool zero = false;
  for (const json& dim : shape) {
    std::optional<uint64_t> d = as_u64(dim);
    if (!d || *d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return data_loss("tensor '", shown, "': shape ", shorten(shape.dump()), " has a dimension that is not a non-negative integer");
    info.shape.push_back(static_cast<int64_t>(*d));
    if (*d == 0) zero = true;
  }
  if (zero) {
    bytes = 0;
  } else {
    for (int64_t d : info.shape) {
      if (bytes > data_size / static_cast<uint64_t>(d))
        return data_loss("tensor '", shown, "': shape ", shape_to_string(info.shape),
                         " needs more bytes than the data section holds (", data_size, ")");
      bytes *= static_cast<uint64_t>(d);
    }
  }

  const json& offsets = entry.at("data_offsets");
  std::optional<uint64_t> begin, end;
  if (offsets.is_array() && offsets.size() == 2) {
    begin = as_u64(offsets[0]);
    end = as_u64(offsets[1]);
  }
  if (!begin || !end)
    return data_loss("tensor '", shown, "': data_offsets ", shorten(offsets.dump()),
                     " is not a pair of non-negative integers");
  if (*begin > *end || *end > data_size)
    return data_loss("tensor '", shown, "': data_offsets [", *begin, ", ", *end,
                     "] lie outside the data section of ", data_size, " bytes");
  if (*end - *begin != bytes)
    return data_loss("tensor '", shown, "': data_offsets span ", *end - *begin, " bytes but shape ",
                     shape_to_string(info.shape), " of ", safetensors_dtype_name(info.dtype), " needs ", bytes);
  info.begin = *begin;
  info.end = *end;
  return info;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
  }
  return "?";
}

Result<SafetensorsHeader> parse_safetensors_header(std::span<const uint8_t> file) {
  if (file.size() < 8)
    return data_loss("file is ", file.size(), " bytes; a safetensors file starts with an 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file[static_cast<size_t>(i)];
  const uint64_t after_length = file.size() - 8;
  if (header_len > kSafetensorsMaxHeaderBytes)
    return data_loss("header length ", header_len, " exceeds the limit of ", kSafetensorsMaxHeaderBytes, " bytes");
  if (header_len > after_length)
    return data_loss("header length ", header_len, " exceeds the ", after_length,
                     " bytes that follow the length field (truncated file?)");
  if (header_len < 2 || file[8] != '{') return data_loss("header does not start with '{'");

  const std::string_view text(reinterpret_cast<const char*>(file.data() + 8), static_cast<size_t>(header_len));
  std::string error;
  // root object → tensor entry → shape list: 3 levels; __metadata__ values are strings.
  json root = parse_strict_json(text, 3, error);
  if (!error.empty()) return data_loss("header is not valid JSON: ", error);
  if (!root.is_object()) return data_loss("header is not a JSON object");

  SafetensorsHeader header;
  header.data_start = 8 + header_len;
  const uint64_t data_size = file.size() - header.data_start;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return data_loss("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return data_loss("__metadata__ value of '", shorten(m.key()), "' is not a string");
        header.metadata.emplace(m.key(), m->get<std::string>());
      }
      continue;
    }
    KC_ASSIGN_OR_RETURN(SafetensorsTensorInfo info, parse_tensor_entry(it.key(), *it, data_size));
    header.tensors.push_back(std::move(info));
  }

  std::sort(header.tensors.begin(), header.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;  // the data section is covered exactly up to here
  const SafetensorsTensorInfo* previous = nullptr;
  for (const SafetensorsTensorInfo& t : header.tensors) {
    if (t.begin < covered)
      return data_loss("tensors '", shorten(previous->name), "' [", previous->begin, ", ", previous->end, ") and '",
                       shorten(t.name), "' [", t.begin, ", ", t.end, ") overlap");
    if (t.begin > covered)
      return data_loss("bytes [", covered, ", ", t.begin,
                       ") of the data section belong to no tensor (the format allows no holes)");
    covered = t.end;
    previous = &t;
  }
  if (covered != data_size)
    return data_loss("the data section has ", data_size - covered, " bytes after the last tensor (at ", covered,
                     "); the format allows no trailing data");
  for (const SafetensorsTensorInfo& t : header.tensors) {
    if ((header.data_start + t.begin) % dtype_size(t.dtype) != 0)
      return unsupported("tensor '", shorten(t.name), "' starts at file offset ", header.data_start + t.begin,
                         ", not a multiple of its ", dtype_size(t.dtype), "-byte element size");
  }
  return header;
}

// ---- SafetensorsFile ----

Result<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  const std::string label = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return not_found("safetensors file ", label, " does not exist");
    return io_error("cannot open ", label, ": ", errno_text());
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Status status = io_error("cannot stat ", label, ": ", errno_text());
    ::close(fd);
    return status;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument(label, " is not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return data_loss(label, ": file is ", size, " bytes; a safetensors file starts with an 8-byte header length");
  }
  void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (addr == MAP_FAILED) return io_error("cannot map ", label, ": ", std::strerror(map_errno));

  SafetensorsFile file;
  file.storage_ = std::shared_ptr<const void>(addr, [size](const void* p) { ::munmap(const_cast<void*>(p), size); });
  file.bytes_ = std::span<const uint8_t>(static_cast<const uint8_t*>(addr), size);
  file.label_ = label;
  Result<SafetensorsHeader> header = parse_safetensors_header(file.bytes_);
  if (!header.ok()) {
    Status status = header.status();
    return status.with_context(label);
  }
  file.header_ = std::move(header).value();
  for (size_t i = 0; i < file.header_.tensors.size(); ++i) file.index_.emplace(file.header_.tensors[i].name, i);
  return file;
}

Result<SafetensorsFile> SafetensorsFile::from_bytes(std::vector<uint8_t> bytes, std::string label) {
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  SafetensorsFile file;
  file.bytes_ = std::span<const uint8_t>(owned->data(), owned->size());
  file.storage_ = std::move(owned);
  file.label_ = std::move(label);
  Result<SafetensorsHeader> header = parse_safetensors_header(file.bytes_);
  if (!header.ok()) {
    Status status = header.status();
    return status.with_context(file.label_);
  }
  file.header_ = std::move(header).value();
  for (size_t i = 0; i < file.header_.tensors.size(); ++i) file.index_.emplace(file.header_.tensors[i].name, i);
  return file;
}

const SafetensorsTensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

TensorView SafetensorsFile::view(const SafetensorsTensorInfo& info) const {
  TensorView v;
  v.data = bytes_.data() + header_.data_start + info.begin;
  v.dtype = info.dtype;
  v.shape = info.shape;
  return v;
}

Result<TensorView> SafetensorsFile::view(std::string_view name) const {
  const SafetensorsTensorInfo* info = find(name);
  if (info == nullptr) return not_found("tensor '", name, "' is not in ", label_);
  return view(*info);
}

// ---- index and checkpoint ----

Result<std::map<std::string, std::string>> parse_safetensors_index(std::string_view json_text) {
  std::string error;
  json root = parse_strict_json(json_text, 8, error);
  if (!error.empty()) return data_loss("index is not valid JSON: ", error);
  if (!root.is_object() || !root.contains("weight_map") || !root.at("weight_map").is_object())
    return data_loss("index has no 'weight_map' object");
  std::map<std::string, std::string> map;
  for (auto it = root.at("weight_map").begin(); it != root.at("weight_map").end(); ++it) {
    if (!it->is_string()) return data_loss("index: weight_map entry of '", shorten(it.key()), "' is not a file name");
    const std::string file = it->get<std::string>();
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos ||
        file.find('\\') != std::string::npos || file.find('\0') != std::string::npos)
      return data_loss("index: shard '", shorten(file), "' of tensor '", shorten(it.key()),
                       "' is not a plain file name in the checkpoint directory");
    map.emplace(it.key(), file);
  }
  if (map.empty()) return data_loss("index: weight_map is empty");
  return map;
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::from_files(std::vector<SafetensorsFile> files) {
  SafetensorsCheckpoint checkpoint;
  checkpoint.files_ = std::move(files);
  for (size_t f = 0; f < checkpoint.files_.size(); ++f) {
    for (const SafetensorsTensorInfo& t : checkpoint.files_[f].header().tensors) {
      auto [it, inserted] = checkpoint.owner_.emplace(t.name, f);
      if (!inserted)
        return data_loss("tensor '", shorten(t.name), "' is in both ", checkpoint.files_[it->second].label(), " and ",
                         checkpoint.files_[f].label());
    }
  }
  return checkpoint;
}

namespace {

Result<std::string> read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot open ", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return io_error("cannot read ", path.string());
  return text.str();
}

Result<SafetensorsCheckpoint> open_sharded(const std::filesystem::path& index_path) {
  KC_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path));
  Result<std::map<std::string, std::string>> map = parse_safetensors_index(text);
  if (!map.ok()) {
    Status status = map.status();
    return status.with_context(index_path.string());
  }
  const std::filesystem::path dir = index_path.parent_path();
  std::map<std::string, size_t> shard_index;  // shard file name → position in files
  std::vector<SafetensorsFile> files;
  for (const auto& [tensor, shard] : *map) {
    if (shard_index.count(shard)) continue;
    Result<SafetensorsFile> file = SafetensorsFile::open(dir / shard);
    if (!file.ok()) {
      Status status = file.status();
      return status.with_context("shard '" + shard + "' of " + index_path.string());
    }
    shard_index.emplace(shard, files.size());
    files.push_back(std::move(file).value());
  }
  // The index and the shards must agree exactly.
  for (const auto& [tensor, shard] : *map) {
    const SafetensorsFile& file = files[shard_index.at(shard)];
    if (file.find(tensor) == nullptr)
      return data_loss(index_path.string(), ": tensor '", shorten(tensor), "' is mapped to ", file.label(),
                       ", which does not hold it");
  }
  for (const SafetensorsFile& file : files) {
    for (const SafetensorsTensorInfo& t : file.header().tensors) {
      auto it = map->find(t.name);
      if (it == map->end())
        return data_loss(index_path.string(), ": ", file.label(), " holds tensor '", shorten(t.name),
                         "', which the index does not list");
      if (files[shard_index.at(it->second)].label() != file.label())
        return data_loss(index_path.string(), ": tensor '", shorten(t.name), "' is in ", file.label(),
                         " but the index maps it to '", it->second, "'");
    }
  }
  return SafetensorsCheckpoint::from_files(std::move(files));
}

}  // namespace

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::open(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    const std::filesystem::path single = path / "model.safetensors";
    const std::filesystem::path index = path / "model.safetensors.index.json";
    if (std::filesystem::exists(single, ec)) return open(single);
    if (std::filesystem::exists(index, ec)) return open_sharded(index);
    return not_found("no model.safetensors or model.safetensors.index.json in ", path.string());
  }
  if (!std::filesystem::exists(path, ec)) return not_found("checkpoint ", path.string(), " does not exist");
  if (path.extension() == ".json") return open_sharded(path);
  KC_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  std::vector<SafetensorsFile> files;
  files.push_back(std::move(file));
  return from_files(std::move(files));
}

std::vector<std::string> SafetensorsCheckpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(owner_.size());
  for (const auto& [name, file] : owner_) names.push_back(name);
  return names;
}

const SafetensorsFile* SafetensorsCheckpoint::file_of(std::string_view name) const {
  auto it = owner_.find(name);
  return it == owner_.end() ? nullptr : &files_[it->second];
}

Result<TensorView> SafetensorsCheckpoint::view(std::string_view name) const {
  const SafetensorsFile* file = file_of(name);
  if (file == nullptr) return not_found("tensor '", name, "' is not in the checkpoint");
  return file->view(name);
}

}  // namespace kascade
