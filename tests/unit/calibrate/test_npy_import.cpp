// test_npy_import.cpp — the .npy reader (src/calibrate/npy_reader.cpp) on files the test writes
// byte by byte (magic, version, little-endian header length, the header dict as numpy writes it,
// padding, little-endian data), its refusals (float dtypes, big-endian, Fortran order, wrong ndim,
// truncated or trailing data, bad magic or version), and the import of a published head map
// (src/calibrate/head_map_import.cpp) into an "imported" calibration file that round-trips.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kascade/calibration.h"

namespace kascade::calib {
namespace {

// Appends `bytes` bytes of v, little-endian (or big-endian), one byte at a time.
void put(std::vector<uint8_t>& out, uint64_t v, int bytes, bool big_endian = false) {
  for (int i = 0; i < bytes; ++i) {
    const int shift = 8 * (big_endian ? bytes - 1 - i : i);
    out.push_back(static_cast<uint8_t>((v >> shift) & 0xFF));
  }
}

// A .npy file: magic, version major.minor, header length (2 bytes for 1.0, 4 for 2.0/3.0), the
// header dict padded with spaces and ending in '\n' so the data starts on a 64-byte boundary.
std::vector<uint8_t> npy_bytes(const std::string& dict, const std::vector<uint8_t>& data, int major = 1,
                               int minor = 0) {
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), static_cast<uint8_t>(minor)};
  const size_t length_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  while ((8 + length_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  put(out, header.size(), static_cast<int>(length_bytes));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::vector<uint8_t> int_data(const std::vector<int64_t>& values, int item_bytes, bool big_endian = false) {
  std::vector<uint8_t> out;
  for (int64_t v : values) put(out, static_cast<uint64_t>(v), item_bytes, big_endian);
  return out;
}

std::string dict_for(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
}

// A published-style map: 6 layers, 4 KV heads, anchors {0, 2, 4}; anchor rows are the identity.
const std::vector<int32_t> kAnchors = {0, 2, 4};
const std::vector<int64_t> kMap = {0, 1, 2, 3,   // layer 0 (anchor)
                                   0, 0, 0, 0,   // layer 1
                                   0, 1, 2, 3,   // layer 2 (anchor)
                                   1, 1, 3, 1,   // layer 3
                                   0, 1, 2, 3,   // layer 4 (anchor)
                                   2, 2, 2, 2};  // layer 5

ModelIdentity model_6x4() {
  ModelIdentity m;
  m.name = "published/llama-like";
  m.num_layers = 6;
  m.num_kv_heads = 4;
  m.num_heads = 16;
  m.head_dim = 64;
  return m;
}

std::string temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return (std::filesystem::path(::testing::TempDir()) / (std::string("kascade_npy_") + info->name() + "_" + name))
      .string();
}

TEST(NpyReader, ReadsLittleEndianInt32AndInt64) {
  const std::vector<int64_t> values = {0, 1, -1, 7, 2147483647, -2147483648LL};
  for (int item : {4, 8}) {
    for (int major : {1, 2, 3}) {
      const auto bytes = npy_bytes(dict_for(item == 4 ? "<i4" : "<i8", "(3, 2)"), int_data(values, item), major);
      auto m = parse_npy_int_matrix(bytes);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      EXPECT_EQ(m->rows, 3);
      EXPECT_EQ(m->cols, 2);
      EXPECT_EQ(m->values, values) << "item " << item << " version " << major;
    }
  }
  // int64 beyond the int32 range.
  const std::vector<int64_t> wide = {int64_t{1} << 40, -(int64_t{1} << 50)};
  auto m = parse_npy_int_matrix(npy_bytes(dict_for("<i8", "(1, 2)"), int_data(wide, 8)));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->values, wide);
}

TEST(NpyReader, AcceptsHeaderVariants) {
  const std::vector<int64_t> values = {4, 5, 6};
  // Other key order, double quotes, no trailing comma, Python 2 long suffixes, 16-byte alignment.
  for (const std::string& dict : {std::string("{'shape': (1, 3), 'fortran_order': False, 'descr': '<i4'}"),
                                  std::string("{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (1L, 3L)}"),
                                  std::string("{'descr':'<i4','fortran_order':False,'shape':(1,3),}")}) {
    auto m = parse_npy_int_matrix(npy_bytes(dict, int_data(values, 4)));
    ASSERT_TRUE(m.ok()) << dict << ": " << m.status().to_string();
    EXPECT_EQ(m->values, values);
  }
  std::vector<uint8_t> unpadded = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  const std::string header = dict_for("<i4", "(1, 1)") + "\n";
  put(unpadded, header.size(), 2);
  unpadded.insert(unpadded.end(), header.begin(), header.end());
  put(unpadded, 9, 4);
  auto m = parse_npy_int_matrix(unpadded);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->values, std::vector<int64_t>{9});
}

void expect_refused(const std::vector<uint8_t>& bytes, const std::string& needle, const std::string& label) {
  auto m = parse_npy_int_matrix(bytes);
  ASSERT_FALSE(m.ok()) << label;
  EXPECT_NE(m.status().message().find(needle), std::string::npos)
      << label << ": \"" << m.status().message() << "\" lacks \"" << needle << "\"";
}

TEST(NpyReader, RefusesEverythingElse) {
  const std::vector<int64_t> six = {0, 1, 2, 3, 4, 5};
  expect_refused(npy_bytes(dict_for("<f4", "(2, 3)"), int_data(six, 4)), "'<f4' is not supported", "float32");
  expect_refused(npy_bytes(dict_for("<f8", "(2, 3)"), int_data(six, 8)), "'<f8' is not supported", "float64");
  expect_refused(npy_bytes(dict_for("<u4", "(2, 3)"), int_data(six, 4)), "'<u4'", "uint32");
  expect_refused(npy_bytes(dict_for("|i1", "(2, 3)"), std::vector<uint8_t>(6, 1)), "'|i1'", "int8");
  expect_refused(npy_bytes(dict_for(">i4", "(2, 3)"), int_data(six, 4, true)), "big-endian", "big-endian int32");
  expect_refused(npy_bytes(dict_for(">i8", "(2, 3)"), int_data(six, 8, true)), "big-endian", "big-endian int64");
  expect_refused(npy_bytes(dict_for("<i4", "(2, 3)", true), int_data(six, 4)), "Fortran", "fortran order");
  expect_refused(npy_bytes(dict_for("<i4", "(6,)"), int_data(six, 4)), "shape (6,) has 1 dimensions", "1-D");
  expect_refused(npy_bytes(dict_for("<i4", "(1, 2, 3)"), int_data(six, 4)), "has 3 dimensions", "3-D");
  expect_refused(npy_bytes(dict_for("<i4", "()"), int_data({7}, 4)), "has 0 dimensions", "0-D");
  expect_refused(npy_bytes(dict_for("<i4", "(2, 3)"), int_data({0, 1, 2, 3, 4}, 4)), "truncated", "short data");
  expect_refused(npy_bytes(dict_for("<i4", "(2, 3)"), int_data({0, 1, 2, 3, 4, 5, 6}, 4)), "trailing", "long data");
  expect_refused(npy_bytes(dict_for("<i4", "(2, 3)"), int_data(six, 4), 4, 0), "version 4.0", "version 4");
  expect_refused(npy_bytes(dict_for("<i4", "(2, 3)"), int_data(six, 4), 1, 1), "version 1.1", "version 1.1");
  expect_refused(npy_bytes("{'descr': '<i4', 'shape': (2, 3), }", int_data(six, 4)), "'fortran_order' is missing",
                 "missing key");
  expect_refused(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), 'extra': True}", int_data(six, 4)),
                 "unknown key 'extra'", "extra key");
  expect_refused(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': [2, 3]}", int_data(six, 4)),
                 ".npy header", "list shape");
  expect_refused(npy_bytes("{'descr': '<i4', 'fortran_order': 0, 'shape': (2, 3)}", int_data(six, 4)), ".npy header",
                 "numeric fortran_order");
  expect_refused(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3)", int_data(six, 4)), ".npy header",
                 "unterminated dict");
  std::vector<uint8_t> bad_magic = npy_bytes(dict_for("<i4", "(2, 3)"), int_data(six, 4));
  bad_magic[1] = 'X';
  expect_refused(bad_magic, "not a NumPy file", "magic");
  expect_refused(std::vector<uint8_t>{0x93, 'N', 'U'}, "not a NumPy file", "tiny");
  std::vector<uint8_t> long_header = npy_bytes(dict_for("<i4", "(2, 3)"), {});
  long_header[8] = 0xFF;
  long_header[9] = 0x7F;
  expect_refused(long_header, "runs past the end", "header length");
}

TEST(NpyReader, ReadsFromAFile) {
  const std::string path = temp_path("map.npy");
  const auto bytes = npy_bytes(dict_for("<i4", "(6, 4)"), int_data(kMap, 4));
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
  auto m = read_npy_int_matrix(path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->values, kMap);
  std::remove(path.c_str());
  auto missing = read_npy_int_matrix(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(path), std::string::npos);
}

TEST(HeadMapImport, MakesAnImportedFileThatRoundTrips) {
  const std::string path = temp_path("published.npy");
  const auto bytes = npy_bytes(dict_for("<i8", "(6, 4)"), int_data(kMap, 8));
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                              static_cast<std::streamsize>(bytes.size()));
  auto file = import_head_map_file(path, kAnchors, model_6x4());
  std::remove(path.c_str());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->source, CalibrationSource::kImported);
  EXPECT_EQ(file->imported_from, path);
  EXPECT_FALSE(file->stats.has_value());
  EXPECT_FALSE(file->dev_set.has_value());
  EXPECT_FALSE(file->collection.has_value());
  ASSERT_EQ(file->anchor_sets.size(), 1u);
  EXPECT_EQ(file->default_num_anchors, 3);
  EXPECT_EQ(file->anchor_sets[0].anchors, kAnchors);
  EXPECT_FALSE(file->anchor_sets[0].objective.has_value());
  EXPECT_EQ(file->anchor_sets[0].head_map, std::vector<int32_t>(kMap.begin(), kMap.end()));

  auto text = calibration_to_json(*file);
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  auto back = parse_calibration_json(*text);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE(*back == *file);
}

TEST(HeadMapImport, RefusesMapsThatDoNotFit) {
  NpyIntMatrix m{6, 4, kMap};
  const ModelIdentity model = model_6x4();
  ASSERT_TRUE(import_head_map(m, kAnchors, model, "ok.npy").ok());
  auto expect_refused_import = [&](const NpyIntMatrix& map, const std::vector<int32_t>& anchors,
                                   const ModelIdentity& mdl, const std::string& needle) {
    auto f = import_head_map(map, anchors, mdl, "published.npy");
    ASSERT_FALSE(f.ok()) << needle;
    EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status().message();
    EXPECT_NE(f.status().message().find("published.npy"), std::string::npos) << f.status().message();
  };
  NpyIntMatrix not_identity = m;
  not_identity.values[2 * 4 + 1] = 3;  // anchor layer 2, head 1 → 3
  expect_refused_import(not_identity, kAnchors, model, "head_map[2][1] = 3");
  expect_refused_import(m, {0, 1, 4}, model, "head_map[1][1] = 0");  // layer 1 is no identity row
  NpyIntMatrix out_of_range = m;
  out_of_range.values[5 * 4 + 3] = 4;
  expect_refused_import(out_of_range, kAnchors, model, "head_map[5][3] = 4");
  out_of_range.values[5 * 4 + 3] = -1;
  expect_refused_import(out_of_range, kAnchors, model, "head_map[5][3] = -1");
  ModelIdentity other = model;
  other.num_kv_heads = 8;
  other.num_heads = 32;
  expect_refused_import(m, kAnchors, other, "shape [6, 4]");
  other = model;
  other.num_layers = 7;
  expect_refused_import(m, kAnchors, other, "shape [6, 4]");
  expect_refused_import(m, {2, 4}, model, "layer 0");
  expect_refused_import(m, {0, 4, 2}, model, "ascending");
  expect_refused_import(m, {0, 6}, model, "out of range");
  NpyIntMatrix short_values = m;
  short_values.values.pop_back();
  expect_refused_import(short_values, kAnchors, model, "holds 23 values");
}

}  // namespace
}  // namespace kascade::calib
