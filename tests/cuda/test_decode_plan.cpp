// tests/cuda/test_decode_plan.cpp — supports() refusals of the decode kernels (host-only: these run
// on the CPU-only CI machine too) and split planning on the GPU (skipped without a device).
#include <gtest/gtest.h>

#include <string>

#include "cuda/attention/decode_plan.h"
#include "cuda/attention/dense_decode.h"
#include "cuda/common/device_errors.h"
#include "cuda_test_support.h"
#include "testing/status_assertions.h"

namespace kascade::cuda {
namespace {

using ::kascade::testing::refused_naming;

DecodeShape llama_shape() {
  DecodeShape s;
  s.dtype = DType::kBF16;
  s.batch = 8;
  s.num_heads = 32;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.page_size = 16;
  s.max_seq_len = 131072;
  return s;
}

TEST(SupportsDecode, AcceptsTheShapesItIsBuiltFor) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    for (int d : {64, 128}) {
      for (int g : {1, 2, 3, 4, 5, 6, 7, 8}) {
        DecodeShape s = llama_shape();
        s.dtype = dtype;
        s.head_dim = d;
        s.num_kv_heads = 4;
        s.num_heads = 4 * g;
        EXPECT_TRUE(supports_decode(s).ok()) << supports_decode(s).to_string();
      }
    }
  }
  DecodeShape contiguous = llama_shape();
  contiguous.page_size = 131072;  // one page per sequence
  EXPECT_TRUE(supports_decode(contiguous).ok());
}

TEST(SupportsDecode, RefusesGroupSizesAboveEightNamingTheValue) {
  DecodeShape s = llama_shape();
  s.num_heads = 36;
  s.num_kv_heads = 4;
  EXPECT_TRUE(refused_naming(supports_decode(s), StatusCode::kUnsupported, "GQA group size is 9"));
  s.num_heads = 64;
  s.num_kv_heads = 2;
  EXPECT_TRUE(refused_naming(supports_decode(s), StatusCode::kUnsupported, "GQA group size is 32"));
}

TEST(SupportsDecode, RefusesUnbuiltHeadDimsDtypesAndPageSizes) {
  DecodeShape s = llama_shape();
  s.head_dim = 96;
  EXPECT_TRUE(refused_naming(supports_decode(s), StatusCode::kUnsupported, "head_dim is 96"));
  s = llama_shape();
  s.dtype = DType::kF32;
  EXPECT_TRUE(refused_naming(supports_decode(s), StatusCode::kUnsupported, "dtype is f32"));
  s = llama_shape();
  s.page_size = 24;
  EXPECT_TRUE(refused_naming(supports_decode(s), StatusCode::kUnsupported, "page_size is 24"));
  s.page_size = 8;
  EXPECT_TRUE(refused_naming(supports_decode(s), StatusCode::kUnsupported, "page_size is 8"));
}

TEST(SupportsDecode, RefusesInconsistentHeadCountsAndSizes) {
  DecodeShape s = llama_shape();
  s.num_heads = 30;  // not a multiple of G = 8
  EXPECT_TRUE(refused_naming(supports_decode(s), StatusCode::kInvalidArgument, "num_heads is 30"));
  s = llama_shape();
  s.batch = 0;
  EXPECT_TRUE(refused_naming(supports_decode(s), StatusCode::kInvalidArgument, "batch is 0"));
  s = llama_shape();
  s.max_seq_len = 0;
  EXPECT_TRUE(refused_naming(supports_decode(s), StatusCode::kInvalidArgument, "max_seq_len is 0"));
}

TEST(DeviceErrors, DescribesEveryBit) {
  EXPECT_EQ(describe_device_errors(0), "none");
  EXPECT_EQ(describe_device_errors(kErrorKvLen), "kv_len out of range");
  EXPECT_EQ(describe_device_errors(kErrorIndex | kErrorPage), "index entry out of range, page id out of range");
  EXPECT_EQ(describe_device_errors(kErrorRowLen | kErrorHeadMap), "index row length out of range, head_map entry out of range");
  EXPECT_EQ(describe_device_errors(1u << 20), "unknown bits");
}

TEST(DecodePlan, SplitsFillTheGpuForOneSequenceAndStayWholeForLargeBatches) {
  KC_SKIP_WITHOUT_GPU();
  DecodeShape s = llama_shape();
  s.batch = 1;
  auto one = plan_dense_decode(s);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  // B = 1, G = 8: at least one CTA per multiprocessor.
  EXPECT_GE(static_cast<int64_t>(one->pass.num_splits) * s.num_kv_heads, sms);
  s.batch = 64;
  auto many = plan_dense_decode(s);
  ASSERT_TRUE(many.ok());
  EXPECT_LE(many->pass.num_splits, 2);
  // Workspace: header first, partials sized by the split count.
  EXPECT_EQ(many->workspace.error_flags, 0u);
  EXPECT_GE(many->workspace.total_bytes,
            static_cast<size_t>(s.batch) * many->pass.num_splits * s.num_heads * s.head_dim * sizeof(float));
  // Short plans never split below 256 keys per chunk.
  s.batch = 1;
  s.max_seq_len = 300;
  auto short_plan = plan_dense_decode(s);
  ASSERT_TRUE(short_plan.ok());
  EXPECT_LE(short_plan->pass.num_splits, 2);
}

}  // namespace
}  // namespace kascade::cuda
