// Tensor reads (model/tensor_read.h) without a cluster: every rank's slice is turned back into
// GGUF bytes, the slices are concatenated as an all-gather would, and the assembled tensor must
// equal the file's bytes exactly, for every tensor of the reference models and of
// generated models that cover what the reference set does not (K-quants split at tp > 1, F16 /
// BF16 matrices, tied heads, KV heads replicated for tp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/kernels/cpu/quantize.h"
#include "model/npy.h"
#include "model/tensor_read.h"
#include "model/weights.h"
#include "tests/model/reference_data.h"
#include "tools/test_model.h"

namespace tpnode::model {
namespace {

// Checks every tensor of `path` under tp; returns the number of tensors checked.
int checkModel(const std::string& path, int tp, HeadLayout head = HeadLayout::kAuto,
               MoePlacement moe = MoePlacement::kAuto) {
  auto file = GgufFile::open(path);
  const ModelConfig config = readModelConfig(file->metadata());
  const ShardPlan plan = planShards(config, tensorDescs(file->metadata()), tp, head, moe);
  std::vector<RankWeights> ranks;
  for (int r = 0; r < tp; ++r) ranks.push_back(loadRankWeights(*file, config, plan, r));
  int checked = 0;
  for (size_t i = 0; i < plan.shards.size(); ++i) {
    const TensorShard& shard = plan.shards[i];
    const GgufTensorInfo& info = file->metadata().tensors[i];
    EXPECT_EQ(info.name, shard.tensor.name);
    EXPECT_EQ(readRefusal(ranks[0], shard), "") << shard.tensor.name;
    // The all-gather: slices padded to the largest one's even size, in rank order (equal but
    // for whole experts per rank, whose counts may differ by one). A replicated tensor passes
    // through from rank 0 (a replicated head lives there alone).
    std::vector<std::vector<uint8_t>> slices;
    size_t largest = 0;
    for (int r = 0; r < tp; ++r) {
      const bool own = shard.kind != ShardKind::kReplicate || r == 0;
      slices.push_back(shardBytes(ranks[static_cast<size_t>(own ? r : 0)], shard));
      largest = std::max(largest, slices.back().size());
    }
    const size_t stride = (largest + 1) & ~size_t{1};
    std::vector<uint8_t> gathered(stride * static_cast<size_t>(tp), 0xAB);
    for (int r = 0; r < tp; ++r) {
      if (shard.kind != ShardKind::kSplitExperts) {
        EXPECT_EQ(slices[static_cast<size_t>(r)].size(), slices[0].size());
      }
      std::memcpy(gathered.data() + static_cast<size_t>(r) * stride,
                  slices[static_cast<size_t>(r)].data(), slices[static_cast<size_t>(r)].size());
    }
    std::vector<uint8_t> full = assembleTensor(shard, tp, gathered.data(), stride);
    std::span<const uint8_t> want = file->tensorData(info);
    EXPECT_EQ(full.size(), want.size()) << shard.tensor.name;
    EXPECT_TRUE(full.size() == want.size() &&
                std::memcmp(full.data(), want.data(), want.size()) == 0)
        << shard.tensor.name << " differs from the file at tp=" << tp;
    // npy: dequantised with the file's type, element order kept.
    std::vector<float> f = dequantizeTensor(info.type, full.data(), info.rows(), info.ne[0]);
    std::vector<float> row(info.ne[0]);
    const size_t rb = rowBytes(info.type, info.ne[0]);
    const uint64_t last = info.rows() - 1;
    kernels::dequantizeRow(info.type, want.data() + last * rb, row.data(),
                           static_cast<int64_t>(info.ne[0]));
    EXPECT_EQ(std::memcmp(row.data(), f.data() + last * info.ne[0], rb == 0 ? 0 : row.size() * 4),
              0)
        << shard.tensor.name;
    ++checked;
  }
  return checked;
}

TEST(TensorReadTest, ReferenceModelsEveryTensorEveryTp) {
  int tensors = 0;
  for (const auto& e : std::filesystem::directory_iterator(testing_support::referenceModelDir())) {
    if (e.path().extension() != ".gguf") continue;
    for (int tp : {1, 2, 4}) {
      try {
        tensors += checkModel(e.path().string(), tp);
      } catch (const Error& err) {  // the shape cannot be split over tp: planShards says so
        EXPECT_NE(std::string(err.what()).find("cannot split"), std::string::npos) << err.what();
      }
    }
  }
  EXPECT_GT(tensors, 100);
}

TEST(TensorReadTest, GeneratedModelsCoverQuantsTiedHeadsAndKvReplication) {
  struct Case {
    const char* type;
    int64_t dim, ffn, heads, kv;
    bool tied;
    const char* arch;
  };
  const Case cases[] = {
      {"q4_k", 1024, 1024, 8, 2, false, "llama"}, {"q6_k", 1024, 1024, 8, 2, false, "llama"},
      {"f16", 256, 512, 4, 2, true, "qwen2"},     {"bf16", 256, 512, 8, 4, false, "llama"},
      {"q8_0", 256, 512, 4, 1, false, "qwen3"},   {"q4_0", 256, 512, 8, 8, true, "llama"}};
  const auto dir =
      std::filesystem::temp_directory_path() / ("tpnode_tensor_read_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const Case& c : cases) {
    tools::TestModelShape s;
    s.arch = c.arch;
    s.type = tools::parseTensorType(c.type);
    s.dim = c.dim;
    s.ffn = c.ffn;
    s.heads = c.heads;
    s.kv_heads = c.kv;
    s.tied = c.tied;
    s.vocab = 512;
    if (s.arch != "llama") s.rope_base = 1e6f;
    const std::string path = (dir / (std::string(c.type) + ".gguf")).string();
    tools::writeTestModel(s, path);
    for (int tp : {2, 4}) {
      SCOPED_TRACE(std::string(c.type) + " tp=" + std::to_string(tp));
      EXPECT_GT(checkModel(path, tp), 10);
      EXPECT_GT(checkModel(path, tp, HeadLayout::kReplicated), 10);  // --head replicated
    }
  }
  std::filesystem::remove_all(dir);
}

// Mixture of experts: every expert tensor read back whole under both placements, with the
// experts split unevenly (8 experts over 3 ranks: 2, 3, 3) and qwen2moe's shared expert.
TEST(TensorReadTest, ExpertTensorsUnderBothPlacements) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tpnode_tensor_read_moe_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  tools::TestModelShape s;
  s.arch = "qwen2moe";
  s.type = TensorType::kQ8_0;
  s.dim = 192;
  s.heads = 6;
  s.kv_heads = 6;
  s.ffn = 384;
  s.vocab = 510;
  s.experts = 8;
  s.experts_used = 2;
  s.expert_ffn = 192;
  s.rope_base = 1e6f;
  const std::string path = (dir / "qwen2moe.gguf").string();
  tools::writeTestModel(s, path);
  for (int tp : {2, 3}) {
    SCOPED_TRACE("tp=" + std::to_string(tp));
    EXPECT_GT(checkModel(path, tp, HeadLayout::kAuto, MoePlacement::kSlice), 20);
    EXPECT_GT(checkModel(path, tp, HeadLayout::kAuto, MoePlacement::kExpert), 20);
  }
  std::filesystem::remove_all(dir);
}

TEST(TensorReadTest, UnknownTensorIsRefusedBeforeAnyCollective) {
  RankWeights w;
  TensorShard s;
  s.tensor.name = "blk.99.attn_q.weight";
  EXPECT_NE(readRefusal(w, s), "");
  s.tensor.name = "blk.x.attn_q.weight";
  EXPECT_NE(readRefusal(w, s), "");
  EXPECT_THROW(shardBytes(w, s), Error);
}

TEST(TensorReadTest, NpyBytesCarryGgufPyShape) {
  GgufTensorInfo info;
  info.n_dims = 2;
  info.ne[0] = 3;
  info.ne[1] = 2;
  EXPECT_EQ(numpyShape(info), (std::vector<uint64_t>{2, 3}));
  info.n_dims = 1;
  info.ne[1] = 1;
  EXPECT_EQ(numpyShape(info), (std::vector<uint64_t>{3}));
  const float v[6] = {1, 2, 3, 4, 5, 6};
  std::string b = npyBytes(v, {2, 3});
  EXPECT_EQ(b.size() % 64, 24u);  // header padded to 64 bytes, then 24 data bytes
  EXPECT_NE(b.find("'shape': (2, 3)"), std::string::npos);
  EXPECT_NE(npyBytes(v, {3}).find("'shape': (3,)"), std::string::npos);
  EXPECT_EQ(std::memcmp(b.data() + b.size() - 24, v, 24), 0);
}

}  // namespace
}  // namespace tpnode::model

namespace tpnode::model {
namespace {

// tools/test_model.h's F32 twin holds exactly the quantised model's weight values (the GPU
// tests compare against CPU ranks on it as exact f32 math).
TEST(TestModelTwinTest, F32TwinHoldsTheDequantisedValues) {
  for (const char* type : {"q4_k", "q6_k", "q8_0", "bf16"}) {
    tools::TestModelShape s;
    s.type = tools::parseTensorType(type);
    s.dim = 256;
    s.ffn = 512;
    const std::string q = ::testing::TempDir() + "twin_q.gguf";
    const std::string f = ::testing::TempDir() + "twin_f.gguf";
    tools::writeTestModel(s, q);
    s.f32_twin = true;
    tools::writeTestModel(s, f);
    auto qf = GgufFile::open(q);
    auto ff = GgufFile::open(f);
    for (const char* name : {"blk.0.attn_q.weight", "blk.1.ffn_down.weight", "output.weight"}) {
      const GgufTensorInfo* qt = qf->metadata().findTensor(name);
      const GgufTensorInfo* ft = ff->metadata().findTensor(name);
      ASSERT_NE(qt, nullptr);
      ASSERT_NE(ft, nullptr);
      EXPECT_EQ(ft->type, TensorType::kF32) << type << " " << name;
      EXPECT_EQ(qt->type, s.type) << type << " " << name;
      const int64_t n = static_cast<int64_t>(qt->ne[0] * qt->ne[1]);
      std::vector<float> deq(static_cast<size_t>(n));
      kernels::dequantizeRow(qt->type, qf->tensorData(*qt).data(), deq.data(), n);
      ASSERT_EQ(ff->tensorData(*ft).size(), deq.size() * sizeof(float));
      EXPECT_EQ(0, std::memcmp(ff->tensorData(*ft).data(), deq.data(), deq.size() * 4))
          << type << " " << name;
    }
    std::filesystem::remove(q);
    std::filesystem::remove(f);
  }
}

}  // namespace
}  // namespace tpnode::model
