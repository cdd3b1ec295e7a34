#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "common/byte_order.h"
#include "common/error.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "tests/model/reference_data.h"

namespace tpnode::model {
namespace {

std::vector<uint8_t> f32Bytes(size_t n, float v) {
  std::vector<uint8_t> b(n * 4);
  for (size_t i = 0; i < n; ++i) std::memcpy(&b[i * 4], &v, 4);
  return b;
}

GgufWriter sampleWriter() {
  GgufWriter w;
  w.setString("general.architecture", "llama");
  w.setU32("llama.block_count", 2);
  w.setI32("some.int", -7);
  w.setF32("llama.rope.freq_base", 10000.0f);
  w.setBool("tokenizer.ggml.add_bos_token", true);
  w.setStringArray("tokenizer.ggml.tokens", {"<unk>", "a", "", "bc"});
  w.setF32Array("tokenizer.ggml.scores", {0.f, -1.f, -2.5f, 3.f});
  w.setI32Array("tokenizer.ggml.token_type", {2, 1, 1, 1});
  w.addTensor("a", TensorType::kF32, {4, 2}, f32Bytes(8, 1.5f));
  w.addTensor("b", TensorType::kQ8_0, {32}, std::vector<uint8_t>(34, 1));
  return w;
}

// Finds `needle` in `b` (for patching serialized headers).
size_t findBytes(const std::vector<uint8_t>& b, std::string_view needle) {
  auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end());
  EXPECT_NE(it, b.end()) << needle;
  return static_cast<size_t>(it - b.begin());
}

void expectInvalid(const std::vector<uint8_t>& b, std::string_view mention) {
  try {
    parseGguf(b);
    FAIL() << "parsed a malformed file; expected mention of " << mention;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidData) << e.what();
    EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
  }
}

TEST(GgufTest, RoundTripsMetadataAndTensors) {
  std::vector<uint8_t> b = sampleWriter().serialize();
  GgufMetadata m = parseGguf(b);
  EXPECT_EQ(m.version, 3u);
  EXPECT_EQ(m.getString("general.architecture"), "llama");
  EXPECT_EQ(m.getInt("llama.block_count"), 2);
  EXPECT_EQ(m.getInt("some.int"), -7);
  EXPECT_FLOAT_EQ(m.getFloat("llama.rope.freq_base"), 10000.0f);
  EXPECT_FLOAT_EQ(m.getFloat("llama.block_count"), 2.0f);
  EXPECT_TRUE(m.getBool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(m.getStringArray("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"<unk>", "a", "", "bc"}));
  EXPECT_EQ(m.getFloatArray("tokenizer.ggml.scores"), (std::vector<float>{0.f, -1.f, -2.5f, 3.f}));
  EXPECT_EQ(m.getIntArray("tokenizer.ggml.token_type"), (std::vector<int64_t>{2, 1, 1, 1}));
  EXPECT_EQ(m.getIntOr("missing", 5), 5);
  ASSERT_EQ(m.tensors.size(), 2u);
  const GgufTensorInfo& a = m.tensor("a");
  EXPECT_EQ(a.ne[0], 4u);
  EXPECT_EQ(a.ne[1], 2u);
  EXPECT_EQ(a.n_bytes, 32u);
  EXPECT_EQ(a.offset % 32, 0u);
  EXPECT_EQ(a.offset, m.data_offset);
  float v;
  std::memcpy(&v, &b[a.offset], 4);
  EXPECT_EQ(v, 1.5f);
  const GgufTensorInfo& q = m.tensor("b");
  EXPECT_EQ(q.type, TensorType::kQ8_0);
  EXPECT_EQ(q.n_bytes, 34u);
  EXPECT_EQ(q.offset, m.data_offset + 32);
}

TEST(GgufTest, CustomAlignment) {
  GgufWriter w = sampleWriter();
  w.setAlignment(64);
  GgufMetadata m = parseGguf(w.serialize());
  EXPECT_EQ(m.alignment, 64u);
  EXPECT_EQ(m.data_offset % 64, 0u);
  EXPECT_EQ(m.tensor("b").offset, m.data_offset + 64);
}

TEST(GgufTest, TypedGettersNameTheKey) {
  GgufMetadata m = parseGguf(sampleWriter().serialize());
  try {
    m.getString("llama.block_count");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidData);
    EXPECT_NE(std::string(e.what()).find("llama.block_count"), std::string::npos);
  }
  EXPECT_THROW(m.getInt("llama.context_length"), Error);
  EXPECT_THROW(m.getStringArray("tokenizer.ggml.scores"), Error);
  EXPECT_THROW(m.getIntArray("tokenizer.ggml.scores"), Error);
  EXPECT_THROW(m.tensor("nope"), Error);
}

TEST(GgufTest, RejectsBadMagicAndVersion) {
  std::vector<uint8_t> b = sampleWriter().serialize();
  auto bad = b;
  bad[0] = 'X';
  expectInvalid(bad, "magic");
  expectInvalid(bad, "starts with the 4 bytes \"GGUF\"");
  bad = b;
  storeLE32(&bad[4], 1);
  expectInvalid(bad, "version 1");
  storeLE32(&bad[4], 4);
  expectInvalid(bad, "version 4");
}

TEST(GgufTest, RejectsEveryTruncation) {
  std::vector<uint8_t> b = sampleWriter().serialize();
  GgufMetadata m = parseGguf(b);
  // Every prefix shorter than the end of the last tensor must fail cleanly.
  uint64_t end = m.tensor("b").offset + m.tensor("b").n_bytes;
  for (size_t n = 0; n < end; ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<long>(n));
    EXPECT_THROW(parseGguf(cut), Error) << "prefix " << n;
  }
}

TEST(GgufTest, RejectsHugeCounts) {
  std::vector<uint8_t> b = sampleWriter().serialize();
  auto bad = b;
  storeLE64(&bad[16], uint64_t{1} << 60);
  expectInvalid(bad, "metadata count");
  bad = b;
  storeLE64(&bad[8], uint64_t{1} << 60);
  expectInvalid(bad, "tensor count");
  bad = b;  // string length of the first key
  storeLE64(&bad[24], ~uint64_t{0});
  expectInvalid(bad, "metadata key");
  bad = b;  // array length of the token list
  size_t at = findBytes(bad, "tokenizer.ggml.tokens") + 21 + 4 + 4;
  storeLE64(&bad[at], uint64_t{1} << 62);
  expectInvalid(bad, "tokenizer.ggml.tokens");
}

TEST(GgufTest, RejectsUnknownTypes) {
  std::vector<uint8_t> b = sampleWriter().serialize();
  auto bad = b;
  size_t at = findBytes(bad, "llama.block_count") + 17;
  storeLE32(&bad[at], 99);
  expectInvalid(bad, "llama.block_count");
  bad = b;  // tensor "a": name(8+1) n_dims(4) ne(16) type
  at = findBytes(bad, std::string_view("\x01\0\0\0\0\0\0\0a\x02\0\0\0", 13)) + 9 + 4 + 16;
  storeLE32(&bad[at], 77);
  expectInvalid(bad, "'a': unknown ggml type 77");
  bad = b;
  storeLE32(&bad[at - 20], 9);
  expectInvalid(bad, "'a': 9 dimensions");
}

TEST(GgufTest, RejectsOffsetsOutsideTheFileAndOverlaps) {
  std::vector<uint8_t> b = sampleWriter().serialize();
  size_t at_b = findBytes(b, std::string_view("\x01\0\0\0\0\0\0\0b\x01\0\0\0", 13)) + 9 + 4 + 8 + 4;
  auto bad = b;
  storeLE64(&bad[at_b], 1u << 20);
  expectInvalid(bad, "'b'");
  bad = b;
  storeLE64(&bad[at_b], ~uint64_t{0} - 31);
  expectInvalid(bad, "'b'");
  bad = b;
  storeLE64(&bad[at_b], 0);
  expectInvalid(bad, "overlap");
  bad = b;
  storeLE64(&bad[at_b], 33);
  expectInvalid(bad, "aligned");
  // The tensor shape overflows.
  bad = b;
  size_t at_ne = findBytes(b, std::string_view("\x01\0\0\0\0\0\0\0a\x02\0\0\0", 13)) + 9 + 4;
  storeLE64(&bad[at_ne + 8], uint64_t{1} << 62);
  expectInvalid(bad, "'a'");
}

TEST(GgufTest, RejectsDuplicateKeysAndBlockMisfits) {
  GgufWriter w;
  w.setU32("k", 1);
  w.setU32("k", 2);
  expectInvalid(w.serialize(), "'k' appears twice");
  // A Q8_0 row of 32 patched to 16 elements cuts a block.
  std::vector<uint8_t> b = sampleWriter().serialize();
  size_t at = findBytes(b, std::string_view("\x01\0\0\0\0\0\0\0b\x01\0\0\0", 13)) + 9 + 4;
  storeLE64(&b[at], 16);
  expectInvalid(b, "'b': row of 16");
}

TEST(GgufTest, OpensAFileAndNamesItInErrors) {
  std::string path = testing::TempDir() + "gguf_test.gguf";
  sampleWriter().writeFile(path);
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->metadata().getString("general.architecture"), "llama");
  auto data = f->tensorData(f->metadata().tensor("a"));
  ASSERT_EQ(data.size(), 32u);
  float v;
  std::memcpy(&v, data.data() + 4, 4);
  EXPECT_EQ(v, 1.5f);
  std::FILE* fp = std::fopen(path.c_str(), "r+b");
  std::fputc('Z', fp);
  std::fclose(fp);
  try {
    GgufFile::open(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  try {
    GgufFile::open(path + ".missing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
  }
}

// Resident KiB of the mapping that starts at `p` (/proc/self/smaps), -1 when none does.
long residentKiB(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto start = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2) {  // a mapping's first line
      in = lo == start;
    } else if (in && line.rfind("Rss:", 0) == 0) {
      return std::stol(line.substr(4));
    }
  }
  return -1;
}

TEST(GgufTest, ReleasingResidentPagesKeepsTheBytesReadable) {
  const std::string path = testing::TempDir() + "gguf_release_test.gguf";
  constexpr size_t kFloats = size_t{2} << 20;  // 8 MiB of tensor data
  GgufWriter w = sampleWriter();
  w.addTensor("big", TensorType::kF32, {kFloats}, f32Bytes(kFloats, 2.5f));
  w.writeFile(path);
  auto f = GgufFile::open(path);
  const auto big = f->tensorData(f->metadata().tensor("big"));
  const auto sum = [&] {
    double s = 0;
    for (size_t i = 0; i < kFloats; i += 1024) {  // one float per 4 KiB page
      float v;
      std::memcpy(&v, big.data() + 4 * i, 4);
      s += v;
    }
    return s;
  };
  const double expected = 2.5 * (kFloats / 1024);
  EXPECT_EQ(sum(), expected);
  const long before = residentKiB(f->bytes().data());
  ASSERT_GE(before, 7 * 1024) << "the pages read above are mapped";
  f->releaseResidentPages();
  EXPECT_LT(residentKiB(f->bytes().data()), 64) << "was " << before << " KiB";
  EXPECT_EQ(sum(), expected) << "the bytes read back from the page cache";
  EXPECT_GE(residentKiB(f->bytes().data()), 7 * 1024);
  std::remove(path.c_str());
}

TEST(GgufTest, ParsesTheReferenceModels) {
  auto f = GgufFile::open(testing_support::referenceModel("llama-tiny-q4_k"));
  const GgufMetadata& m = f->metadata();
  EXPECT_EQ(m.getString("general.architecture"), "llama");
  EXPECT_EQ(m.getStringArray("tokenizer.ggml.tokens").size(), 1024u);
  EXPECT_EQ(m.tensor("blk.0.attn_q.weight").type, TensorType::kQ4_K);
  EXPECT_EQ(m.tensor("output_norm.weight").type, TensorType::kF32);
  auto q = GgufFile::open(testing_support::referenceModel("qwen2-tiny-f32"));
  EXPECT_EQ(q->metadata().getString("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(q->metadata().getStringArray("tokenizer.ggml.merges").size(), 1024u - 256 - 3);
}

}  // namespace
}  // namespace tpnode::model
