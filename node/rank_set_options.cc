#include "node/rank_set_options.h"

#include <algorithm>
#include <string>

#include "node/scheduler.h"

namespace tpnode::node {

RankSetOptions rankSetOptions(const Options& o, const Placement& placement) {
  RankSetOptions ro;
  ro.threads = o.threads;
  ro.slots = std::max(1, o.parallel);
  ro.ctx = o.ctx_size;
  ro.kv_block_size = o.kv_block_size;
  ro.kv_blocks = o.kvBlocks();
  ro.cpu_of_rank = placement.cpu_of_rank;
  ro.gpu_of_rank = placement.gpu_of_rank;
  ro.local_transport = std::string(enumName(o.local_transport));
  ro.inter_transport = std::string(enumName(o.inter_transport));
  ro.cuda_graphs = o.cuda_graphs == CudaGraphs::kOn;
  ro.reserve_tokens = SchedulerOptions{}.max_step_tokens;  // no step the driver sends is larger
  return ro;
}

}  // namespace tpnode::node
