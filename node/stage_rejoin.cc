#include "node/stage_rejoin.h"

#include <spdlog/spdlog.h>

#include "node/host_memory.h"
#include "node/mesh_setup.h"
#include "node/split_probe.h"

namespace tpnode::node {

int agreeOnChosenStages(const Options& o, const LoadedModel& model, const std::atomic<bool>* cancel,
                        std::optional<std::chrono::milliseconds> connect_timeout,
                        const AdoptStages& adopt) {
  // The probe mesh of startup: its fingerprint is that of the options before the choice.
  Options before = o;
  before.pp = 1;
  mesh::MeshOptions mo = makeMeshOptions(before, model.identity, {kSplitProbePhase});
  mo.cancel = cancel;
  if (connect_timeout) mo.connect_timeout = *connect_timeout;
  // The stages are already chosen: nothing is measured again (a node 0 restarted since, which
  // chooses anew, gets the figures this node was given, else unknown).
  RankRates declared;
  declared.read_bytes_per_s = o.split_rank_read_gbps * 1e9;
  declared.macs_per_s = o.split_rank_gmacs * 1e9;
  return agreeOnStages(
      mo, offeredHostMemory(o.host_memory_gib), [&] { return declared; },
      [&](const FormationFigures&) {
        spdlog::info("[driver] --split auto: re-forming with the {} stage(s) chosen at startup",
                     o.pp);
        return o.pp;
      },
      [&](int stages) -> std::string {
        if (stages == o.pp) return {};  // loaded already
        spdlog::warn(
            "[worker] --split auto: node 0 now runs {} stage(s) (it was restarted and chose "
            "again); this node loaded {}: loading node 0's stages",
            stages, o.pp);
        return adopt ? adopt(stages) : std::string();
      });
}

}  // namespace tpnode::node
