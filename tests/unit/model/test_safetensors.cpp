// test_safetensors.cpp — safetensors reading and writing (src/model/safetensors.cpp,
// src/model/safetensors_writer.cpp).
// References: files written by transformers' save_pretrained (tests/data/model/, with per-tensor
// sums recorded by torch in tiny_checkpoints.json); round trips of random tensors compared bit for
// bit; hand-written headers, one per validation rule, each expected to fail with its own message;
// every truncation of a valid file.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "model/safetensors.h"
#include "model/safetensors_writer.h"
#include "model_test_util.h"
#include "testing/harness.h"

namespace kascade {
namespace {

using nlohmann::json;
using testing::model_data_dir;

// 8-byte little-endian length + header + `data_bytes` zero bytes.
std::vector<uint8_t> file_with_header(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> bytes(8 + header.size() + data_bytes, 0);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  if (!header.empty()) std::memcpy(bytes.data() + 8, header.data(), header.size());
  return bytes;
}

struct OwnedTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  NamedTensor named() const { return {name, TensorView{bytes.data(), dtype, shape}}; }
};

OwnedTensor random_tensor(std::mt19937_64& rng, std::string name, DType dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  OwnedTensor t{std::move(name), dtype, std::move(shape), {}};
  t.bytes = testing::pack_as(testing::random_floats(rng, static_cast<size_t>(n), -2.0f, 2.0f, dtype), dtype);
  return t;
}

std::vector<OwnedTensor> sample_tensors(std::mt19937_64& rng) {
  std::vector<OwnedTensor> t;
  t.push_back(random_tensor(rng, "a.half", DType::kF16, {3, 5}));
  t.push_back(random_tensor(rng, "b.float", DType::kF32, {7}));
  t.push_back(random_tensor(rng, "c.bf16", DType::kBF16, {2, 3, 4}));
  t.push_back(random_tensor(rng, "d.empty", DType::kF32, {0, 4}));
  t.push_back(random_tensor(rng, "e.scalar", DType::kF32, {}));
  t.push_back(random_tensor(rng, "f.odd", DType::kBF16, {1}));
  return t;
}

std::vector<NamedTensor> named(const std::vector<OwnedTensor>& owned) {
  std::vector<NamedTensor> out;
  for (const OwnedTensor& t : owned) out.push_back(t.named());
  return out;
}

void expect_same_tensor(const TensorView& got, const OwnedTensor& want) {
  EXPECT_EQ(got.dtype, want.dtype) << want.name;
  EXPECT_EQ(got.shape, want.shape) << want.name;
  ASSERT_EQ(got.nbytes(), want.bytes.size()) << want.name;
  if (!want.bytes.empty()) {
    EXPECT_EQ(std::memcmp(got.data, want.bytes.data(), want.bytes.size()), 0) << want.name;
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>(got.data) % dtype_size(got.dtype), 0u) << want.name << " misaligned";
}

TEST(Safetensors, RoundTripInMemory) {
  auto rng = testing::rng_for_test();
  const std::vector<OwnedTensor> tensors = sample_tensors(rng);
  const std::vector<NamedTensor> views = named(tensors);
  Result<std::vector<uint8_t>> bytes = serialize_safetensors(views, {{"format", "pt"}, {"note", "é ✓"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  Result<SafetensorsFile> file = SafetensorsFile::from_bytes(*bytes, "memory");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->header().data_start % 8, 0u);
  EXPECT_EQ(file->header().metadata.at("note"), "é ✓");
  EXPECT_EQ(file->header().tensors.size(), tensors.size());
  for (const OwnedTensor& t : tensors) {
    Result<TensorView> v = file->view(t.name);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    expect_same_tensor(*v, t);
  }
  Result<TensorView> missing = file->view("nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
}

TEST(Safetensors, RoundTripThroughMappedFileAndCheckpoint) {
  auto rng = testing::rng_for_test();
  const std::vector<OwnedTensor> tensors = sample_tensors(rng);
  testing::ScratchDir dir;
  ASSERT_TRUE(write_safetensors_file(dir.path() / "x.safetensors", named(tensors)).ok());
  Result<SafetensorsFile> file = SafetensorsFile::open(dir.path() / "x.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  for (const OwnedTensor& t : tensors) expect_same_tensor(*file->view(t.name), t);
  // The file and the in-memory serialisation are the same bytes.
  Result<std::vector<uint8_t>> bytes = serialize_safetensors(named(tensors));
  ASSERT_TRUE(bytes.ok());
  const std::string on_disk = testing::read_file_text(dir.path() / "x.safetensors");
  EXPECT_EQ(on_disk, std::string(bytes->begin(), bytes->end()));

  // Views stay valid after the checkpoint that made them is gone, as long as its storage is held.
  TensorView view;
  {
    Result<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::open(dir.path() / "x.safetensors");
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    EXPECT_EQ(ck->tensor_names().size(), tensors.size());
    auto keep = ck->files()[0].storage();
    view = *ck->view("c.bf16");
    ck = Result<SafetensorsCheckpoint>(not_found("dropped"));
    expect_same_tensor(view, tensors[2]);
  }
}

TEST(Safetensors, ShardedRoundTrip) {
  auto rng = testing::rng_for_test();
  std::vector<OwnedTensor> tensors;
  for (int i = 0; i < 9; ++i)
    tensors.push_back(random_tensor(rng, "layer." + std::to_string(i), i % 2 ? DType::kBF16 : DType::kF32, {4, 8}));
  testing::ScratchDir dir;
  Result<std::vector<std::string>> written = write_safetensors_checkpoint(dir.path(), named(tensors), 300);
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  ASSERT_GE(written->size(), 4u);  // ≥ 3 shards + index
  EXPECT_EQ(written->back(), "model.safetensors.index.json");
  for (const auto& path : {dir.path(), dir.path() / "model.safetensors.index.json"}) {
    Result<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::open(path);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    EXPECT_EQ(ck->files().size(), written->size() - 1);
    EXPECT_EQ(ck->tensor_names().size(), tensors.size());
    for (const OwnedTensor& t : tensors) expect_same_tensor(*ck->view(t.name), t);
  }
  // A single shard is written as model.safetensors.
  testing::ScratchDir single;
  written = write_safetensors_checkpoint(single.path(), named(tensors), uint64_t{1} << 30);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, std::vector<std::string>{"model.safetensors"});
  Result<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::open(single.path());
  ASSERT_TRUE(ck.ok());
  EXPECT_EQ(ck->tensor_names().size(), tensors.size());
}

TEST(Safetensors, ReadsFilesWrittenByTransformers) {
  const json summary = testing::read_model_fixture("tiny_checkpoints.json");
  for (const char* name : {"tiny_llama_sharded", "tiny_qwen3_tied"}) {
    SCOPED_TRACE(name);
    Result<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::open(model_data_dir() / name);
    ASSERT_TRUE(ck.ok()) << ck.status().to_string();
    const json& expected = summary[name];
    EXPECT_EQ(ck->tensor_names().size(), expected.size());
    for (auto it = expected.begin(); it != expected.end(); ++it) {
      SCOPED_TRACE(it.key());
      const SafetensorsFile* file = ck->file_of(it.key());
      ASSERT_NE(file, nullptr);
      EXPECT_NE(file->label().find((*it)["file"].get<std::string>()), std::string::npos);
      Result<TensorView> v = ck->view(it.key());
      ASSERT_TRUE(v.ok());
      EXPECT_EQ(v->shape, (*it)["shape"].get<std::vector<int64_t>>());
      const std::string dtype = (*it)["dtype"].get<std::string>();
      EXPECT_EQ(v->dtype, dtype == "bfloat16" ? DType::kBF16 : dtype == "float16" ? DType::kF16 : DType::kF32);
      double sum = 0.0, sum_sq = 0.0;
      for (int64_t i = 0; i < v->numel(); ++i) {
        const double x = v->load(i);
        sum += x;
        sum_sq += x * x;
      }
      EXPECT_NEAR(sum, (*it)["sum"].get<double>(), 1e-9 * std::max(1.0, sum_sq));
      EXPECT_NEAR(sum_sq, (*it)["sum_sq"].get<double>(), 1e-9 * sum_sq);
      const std::vector<double> first = (*it)["first"].get<std::vector<double>>();
      for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(v->load(static_cast<int64_t>(i)), first[i]);
    }
    EXPECT_EQ(ck->files()[0].header().metadata.at("format"), "pt");
  }
}

struct BadHeader {
  std::string what;
  std::vector<uint8_t> file;
  StatusCode code;
  std::string must_mention;
};

BadHeader bad(std::string what, const std::string& header, size_t data_bytes, std::string must_mention,
              StatusCode code = StatusCode::kDataLoss) {
  return {std::move(what), file_with_header(header, data_bytes), code, std::move(must_mention)};
}

TEST(Safetensors, EveryValidationRuleHasItsError) {
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::vector<BadHeader> cases = {
      {"shorter than 8 bytes", {1, 0, 0}, StatusCode::kDataLoss, "8-byte header length"},
      bad("unknown dtype", R"({"t":{"dtype":"Q9","shape":[2],"data_offsets":[0,8]}})", 8, "unknown dtype 'Q9'"),
      bad("unsupported dtype", R"({"t":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8, "I64",
          StatusCode::kUnsupported),
      bad("dtype not string", R"({"t":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8, "dtype is not a string"),
      bad("does not start with {", R"( {"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8, "'{'"),
      bad("empty header", "", 8, "'{'"),
      bad("invalid JSON", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8, "not valid JSON"),
      bad("trailing garbage", "{" + ok_entry + "} x", 8, "not valid JSON"),
      bad("trailing NUL padding", "{" + ok_entry + "}" + std::string(3, '\0'), 8, "NUL byte"),
      bad("invalid UTF-8", "{\"t\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "not valid JSON"),
      bad("duplicate tensor", "{" + ok_entry + "," + ok_entry + "}", 8, "duplicate key 't'"),
      bad("duplicate field", R"({"t":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8,
          "duplicate key 'dtype'"),
      bad("too deep", R"({"t":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})", 8, "nesting"),
      bad("entry not object", R"({"t":[1,2]})", 0, "not an object"),
      bad("unknown field", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8,
          "unknown field 'x'"),
      bad("missing shape", R"({"t":{"dtype":"F32","data_offsets":[0,8]}})", 8, "has no 'shape'"),
      bad("missing offsets", R"({"t":{"dtype":"F32","shape":[2]}})", 8, "has no 'data_offsets'"),
      bad("missing dtype", R"({"t":{"shape":[2],"data_offsets":[0,8]}})", 8, "has no 'dtype'"),
      bad("shape not list", R"({"t":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", 8, "shape is not a list"),
      bad("negative dim", R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "dimension"),
      bad("fractional dim", R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8, "dimension"),
      bad("dim above int64", R"({"t":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,8]}})", 8,
          "dimension"),
      bad("shape overflows", R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})", 8,
          "needs more bytes"),
      bad("offsets not pair", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}})", 8, "pair"),
      bad("offsets negative", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8, "pair"),
      bad("offsets beyond uint64", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551616]}})", 8,
          "pair"),
      bad("offsets reversed", R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8, "outside"),
      bad("offsets beyond data", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 8, "outside"),
      bad("offsets near uint64 max",
          R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,18446744073709551615]}})", 8,
          "outside"),
      bad("size mismatch", R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 12, "needs 12"),
      bad("overlap",
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
          12, "overlap"),
      bad("hole",
          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
          12, "holes"),
      bad("hole at start", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "holes"),
      bad("trailing data", "{" + ok_entry + "}", 12, "after the last tensor"),
      bad("metadata not object", R"({"__metadata__":"x"})", 0, "__metadata__"),
      bad("metadata value not string", R"({"__metadata__":{"k":1}})", 0, "__metadata__"),
      bad("header is a list", "[1]", 0, "'{'"),
  };
  // Misaligned: pad the header so that the data section starts at 2 mod 4.
  std::string misaligned = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  while ((8 + misaligned.size()) % 4 != 2) misaligned += ' ';
  cases.push_back(bad("misaligned", misaligned, 4, "not a multiple", StatusCode::kUnsupported));
  // Header length edits on a valid file.
  std::vector<uint8_t> valid = file_with_header("{" + ok_entry + "}", 8);
  std::vector<uint8_t> huge = valid;
  std::memset(huge.data(), 0xff, 8);
  cases.push_back({"header length 2^64-1", huge, StatusCode::kDataLoss, "exceeds the limit"});
  std::vector<uint8_t> beyond = valid;
  beyond[0] = static_cast<uint8_t>(valid.size());
  cases.push_back({"header length beyond file", beyond, StatusCode::kDataLoss, "truncated file"});
  std::vector<uint8_t> limit = valid;
  const uint64_t over = kSafetensorsMaxHeaderBytes + 1;
  for (int i = 0; i < 8; ++i) limit[static_cast<size_t>(i)] = static_cast<uint8_t>(over >> (8 * i));
  cases.push_back({"header length over 100 MB", limit, StatusCode::kDataLoss, "exceeds the limit"});

  for (const BadHeader& c : cases) {
    SCOPED_TRACE(c.what);
    Result<SafetensorsFile> file = SafetensorsFile::from_bytes(c.file, "case.safetensors");
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), c.code) << file.status().to_string();
    EXPECT_NE(file.status().message().find(c.must_mention), std::string::npos) << file.status().to_string();
    EXPECT_NE(file.status().message().find("case.safetensors"), std::string::npos);
  }
}

TEST(Safetensors, AcceptsWhatTheSpecAllows) {
  // Entries in any order, trailing spaces, empty header, zero-size tensors anywhere, __metadata__.
  const std::string header =
      R"({"b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},"__metadata__":{"k":"v"},)"
      R"("z":{"dtype":"F16","shape":[0],"data_offsets":[12,12]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string padded = header + std::string((8 - header.size() % 8) % 8 + 8, ' ');
  Result<SafetensorsFile> file = SafetensorsFile::from_bytes(file_with_header(padded, 12), "ok");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_EQ(file->header().tensors.size(), 3u);
  EXPECT_EQ(file->header().tensors[0].name, "a");  // sorted by offset
  EXPECT_EQ(file->header().tensors[1].name, "b");
  EXPECT_EQ(file->header().tensors[2].name, "z");
  EXPECT_EQ(file->header().metadata.at("k"), "v");
  Result<SafetensorsFile> empty = SafetensorsFile::from_bytes(file_with_header("{}      ", 0), "empty");
  ASSERT_TRUE(empty.ok()) << empty.status().to_string();
  EXPECT_TRUE(empty->header().tensors.empty());
}

TEST(Safetensors, EveryTruncationIsRefused) {
  auto rng = testing::rng_for_test();
  Result<std::vector<uint8_t>> bytes = serialize_safetensors(named(sample_tensors(rng)));
  ASSERT_TRUE(bytes.ok());
  for (size_t len = 0; len < bytes->size(); ++len) {
    std::vector<uint8_t> cut(bytes->begin(), bytes->begin() + static_cast<std::ptrdiff_t>(len));
    Result<SafetensorsFile> file = SafetensorsFile::from_bytes(std::move(cut), "cut");
    ASSERT_FALSE(file.ok()) << "length " << len;
    EXPECT_EQ(file.status().code(), StatusCode::kDataLoss) << file.status().to_string();
  }
}

TEST(Safetensors, OpenRefusesMissingOddAndEmptyFiles) {
  testing::ScratchDir dir;
  Result<SafetensorsFile> missing = SafetensorsFile::open(dir.path() / "none.safetensors");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("none.safetensors"), std::string::npos);
  Result<SafetensorsFile> directory = SafetensorsFile::open(dir.path());
  EXPECT_EQ(directory.status().code(), StatusCode::kInvalidArgument);
  testing::write_file_text(dir.path() / "empty.safetensors", "");
  Result<SafetensorsFile> empty = SafetensorsFile::open(dir.path() / "empty.safetensors");
  EXPECT_EQ(empty.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(empty.status().message().find("empty.safetensors"), std::string::npos);
  Result<SafetensorsCheckpoint> no_weights = SafetensorsCheckpoint::open(dir.path());
  EXPECT_EQ(no_weights.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_weights.status().message().find("model.safetensors"), std::string::npos);
  Result<SafetensorsCheckpoint> no_path = SafetensorsCheckpoint::open(dir.path() / "absent");
  EXPECT_EQ(no_path.status().code(), StatusCode::kNotFound);
}

TEST(Safetensors, IndexValidation) {
  struct Case {
    const char* text;
    const char* must_mention;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"metadata": {}})", "weight_map"},
           {R"({"weight_map": []})", "weight_map"},
           {R"({"weight_map": {}})", "empty"},
           {R"({"weight_map": {"a": 3}})", "not a file name"},
           {R"({"weight_map": {"a": "../x.safetensors"}})", "plain file name"},
           {R"({"weight_map": {"a": "sub/x.safetensors"}})", "plain file name"},
           {R"({"weight_map": {"a": ".."}})", "plain file name"},
           {R"({"weight_map": {"a": ""}})", "plain file name"},
           {R"({"weight_map": {"a": "x", "a": "y"}})", "duplicate key"},
           {R"({"weight_map": )", "not valid JSON"},
       }) {
    SCOPED_TRACE(c.text);
    auto map = parse_safetensors_index(c.text);
    ASSERT_FALSE(map.ok());
    EXPECT_EQ(map.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(map.status().message().find(c.must_mention), std::string::npos) << map.status().to_string();
  }
}

TEST(Safetensors, ShardsMustAgreeWithTheIndex) {
  auto rng = testing::rng_for_test();
  std::vector<OwnedTensor> tensors;
  for (const char* name : {"t0", "t1", "t2", "t3"}) tensors.push_back(random_tensor(rng, name, DType::kF32, {16}));
  testing::ScratchDir dir;
  ASSERT_TRUE(write_safetensors_checkpoint(dir.path(), named(tensors), 128).ok());  // shards {t0, t1}, {t2, t3}
  const auto index_path = dir.path() / "model.safetensors.index.json";
  const json index = json::parse(testing::read_file_text(index_path));
  ASSERT_EQ(index["weight_map"].size(), 4u);
  const std::string shard0 = index["weight_map"]["t0"];
  const std::string shard1 = index["weight_map"]["t2"];
  ASSERT_NE(shard0, shard1);
  ASSERT_EQ(index["weight_map"]["t3"], shard1);

  auto expect_refused = [&](const json& edited, StatusCode code, const std::string& must_mention) {
    testing::write_file_text(index_path, edited.dump());
    Result<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::open(dir.path());
    ASSERT_FALSE(ck.ok());
    EXPECT_EQ(ck.status().code(), code) << ck.status().to_string();
    EXPECT_NE(ck.status().message().find(must_mention), std::string::npos) << ck.status().to_string();
  };
  json e = index;
  e["weight_map"]["t0"] = shard1;  // t0 is in shard0
  expect_refused(e, StatusCode::kDataLoss, "'t0'");
  e = index;
  e["weight_map"].erase("t3");  // a shard holds a tensor the index does not list
  expect_refused(e, StatusCode::kDataLoss, "'t3'");
  e = index;
  e["weight_map"]["ghost"] = shard0;
  expect_refused(e, StatusCode::kDataLoss, "'ghost'");
  e = index;
  e["weight_map"]["t2"] = "model-missing.safetensors";
  expect_refused(e, StatusCode::kNotFound, "model-missing.safetensors");
  // A corrupt shard is named in the error.
  testing::write_file_text(index_path, index.dump());
  std::string shard_bytes = testing::read_file_text(dir.path() / shard1);
  shard_bytes.resize(shard_bytes.size() - 1);
  testing::write_file_text(dir.path() / shard1, shard_bytes);
  Result<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::open(dir.path());
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(ck.status().message().find(shard1), std::string::npos) << ck.status().to_string();

  // Two files holding the same tensor.
  Result<std::vector<uint8_t>> a = serialize_safetensors(named({tensors[0]}));
  ASSERT_TRUE(a.ok());
  std::vector<SafetensorsFile> files;
  files.push_back(*SafetensorsFile::from_bytes(*a, "first"));
  files.push_back(*SafetensorsFile::from_bytes(*a, "second"));
  Result<SafetensorsCheckpoint> dup = SafetensorsCheckpoint::from_files(std::move(files));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("'t0'"), std::string::npos);
}

TEST(Safetensors, WriterRefusesBadInput) {
  float x = 1.0f;
  std::vector<NamedTensor> dup = {{"a", {&x, DType::kF32, {1}}}, {"a", {&x, DType::kF32, {1}}}};
  EXPECT_EQ(serialize_safetensors(dup).status().code(), StatusCode::kInvalidArgument);
  std::vector<NamedTensor> reserved = {{"__metadata__", {&x, DType::kF32, {1}}}};
  EXPECT_NE(serialize_safetensors(reserved).status().message().find("__metadata__"), std::string::npos);
  std::vector<NamedTensor> negative = {{"n", {&x, DType::kF32, {-1}}}};
  EXPECT_NE(serialize_safetensors(negative).status().message().find("negative"), std::string::npos);
  std::vector<NamedTensor> no_data = {{"n", {nullptr, DType::kF32, {3}}}};
  EXPECT_NE(serialize_safetensors(no_data).status().message().find("no data"), std::string::npos);
  testing::ScratchDir dir;
  EXPECT_EQ(write_safetensors_checkpoint(dir.path() / "absent", named({}), 10).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(write_safetensors_checkpoint(dir.path(), named({}), 0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kascade
