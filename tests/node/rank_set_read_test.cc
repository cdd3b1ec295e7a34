// RankSet::gatherTensor in one process (4 local ranks, no mesh): every tensor comes back as the
// file's bytes, also when the all-gather runs in many small chunks (read_chunk_bytes), and a
// read between two steps does not change the next step's logits.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "collectives/hierarchical.h"
#include "model/config.h"
#include "model/gguf.h"
#include "node/rank_set.h"
#include "tools/test_model.h"

namespace tpnode::node {
namespace {

TEST(RankSetReadTest, GatheredTensorsEqualTheFileInAnyChunking) {
  tools::TestModelShape shape;
  shape.type = model::TensorType::kQ8_0;
  shape.dim = 256;
  shape.ffn = 512;
  shape.heads = 8;
  shape.kv_heads = 2;  // tp 4: KV heads replicated
  const auto path = std::filesystem::temp_directory_path() /
                    ("tpnode_rank_set_read_" + std::to_string(::getpid()) + ".gguf");
  tools::writeTestModel(shape, path.string());
  auto file = model::GgufFile::open(path.string());
  const model::ModelConfig config = model::readModelConfig(file->metadata());
  const model::ShardPlan plan = model::planShards(config, model::tensorDescs(file->metadata()), 4);
  for (size_t chunk : {size_t{64} << 20, size_t{998}}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    auto group = collectives::NodeGroup::create(nullptr, 4, collectives::CollectiveOptions{});
    RankSetOptions options;
    options.read_chunk_bytes = chunk;
    options.ctx = 64;
    options.slots = 2;
    RankSet ranks(*file, config, plan, group, options);
    std::vector<model::BatchToken> batch = {{1, 0, 0, true}, {5, 1, 0, true}};
    std::vector<float> before, after;
    ranks.run(batch, before);
    for (size_t i = 0; i < plan.shards.size(); ++i) {
      const model::TensorShard& shard = plan.shards[i];
      ASSERT_EQ(ranks.readRefusal(shard), "") << shard.tensor.name;
      std::vector<uint8_t> got = ranks.gatherTensor(shard);
      std::span<const uint8_t> want = file->tensorData(file->metadata().tensors[i]);
      ASSERT_EQ(got.size(), want.size()) << shard.tensor.name;
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0) << shard.tensor.name;
      EXPECT_TRUE(ranks.gatherTensor(shard, /*assemble=*/false).empty());
    }
    ranks.run(std::vector<model::BatchToken>{{1, 0, 1, true}, {5, 1, 1, true}}, after);
    EXPECT_EQ(before, after) << "a read changed the forward";
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tpnode::node
