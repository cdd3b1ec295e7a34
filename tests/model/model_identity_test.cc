// model/model_identity.h: the identity changes with the weights, not only with the header.
#include "model/model_identity.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/mesh/process.h"
#include "tools/test_model.h"

namespace tpnode::model {
namespace {

class ModelIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = mesh::test::makeTempDir("tpnode-identity-");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, uint64_t seed) {
    tools::TestModelShape shape;
    shape.type = TensorType::kQ8_0;
    shape.seed = seed;
    const std::string path = dir_ + "/" + name;
    tools::writeTestModel(shape, path);
    return path;
  }
  static std::string field(const std::string& identity, const std::string& key) {
    const size_t at = identity.find(key + "=");
    if (at == std::string::npos) return {};
    const size_t end = identity.find(';', at);
    return identity.substr(at, end == std::string::npos ? std::string::npos : end - at);
  }

  std::string dir_;
};

TEST_F(ModelIdentityTest, SameFileSameIdentity) {
  const std::string path = write("a.gguf", 1);
  EXPECT_EQ(modelIdentity(*GgufFile::open(path)), modelIdentity(*GgufFile::open(path)));
}

// Same metadata, tensor table and size, other weights: the header hash cannot tell them apart.
TEST_F(ModelIdentityTest, OtherWeightsBehindTheSameHeaderGiveAnotherIdentity) {
  const std::string a = modelIdentity(*GgufFile::open(write("a.gguf", 1)));
  const std::string b = modelIdentity(*GgufFile::open(write("b.gguf", 2)));
  ASSERT_EQ(field(a, "header_sha256"), field(b, "header_sha256"));
  ASSERT_EQ(field(a, "bytes"), field(b, "bytes"));
  EXPECT_NE(field(a, "weights_sha256"), field(b, "weights_sha256"));
  EXPECT_NE(a, b);
}

// One byte in the middle of the largest tensor changes the identity.
TEST_F(ModelIdentityTest, OneByteInTheMiddleOfATensorChangesIt) {
  const std::string path = write("a.gguf", 1);
  auto file = GgufFile::open(path);
  const std::string before = modelIdentity(*file);
  GgufTensorInfo largest;
  for (const auto& t : file->metadata().tensors) {
    if (t.n_bytes > largest.n_bytes) largest = t;
  }
  ASSERT_GT(largest.n_bytes, 3 * kIdentitySampleBytes);
  file.reset();
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[largest.offset + largest.n_bytes / 2] ^= 1;
  const std::string changed = dir_ + "/changed.gguf";
  std::ofstream(changed, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_NE(modelIdentity(*GgufFile::open(changed)), before);
}

}  // namespace
}  // namespace tpnode::model
