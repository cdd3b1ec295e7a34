#include "node/rank_set_options.h"

#include <algorithm>

namespace tpnode::node {

RankSetOptions rankSetOptions(const Options& o, const Placement& placement) {
  RankSetOptions ro;
  ro.threads = o.threads;
  ro.slots = std::max(1, o.parallel);
  ro.ctx = o.ctx_size;
  ro.cpu_of_rank = placement.cpu_of_rank;
  ro.gpu_of_rank = placement.gpu_of_rank;
  ro.local_transport = o.local_transport;
  ro.inter_transport = o.inter_transport;
  ro.cuda_graphs = o.cuda_graphs != "off" && o.cuda_graphs != "0";
  return ro;
}

}  // namespace tpnode::node
