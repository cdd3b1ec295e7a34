// Driver's loop-thread state, shared by driver.cc and driver_inspection.cc (private to the
// Driver: only those two files include it). Everything here is touched by the loop thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "node/driver.h"

namespace tpnode::node {

struct Driver::Session {
  std::unique_ptr<mesh::Mesh> mesh;     // null for a single node
  std::unique_ptr<mesh::Mesh> metered;  // counts the collectives' traffic over `mesh`
  std::shared_ptr<collectives::NodeGroup> group;
  std::unique_ptr<RankSet> ranks;
};

struct Driver::Active {
  uint64_t id = 0;
  GenerationRequest request;
  std::function<void(const TokenEvent&)> on_event;
  std::unique_ptr<model::Sampler> sampler;
  Sequence* seq = nullptr;  // owned by the scheduler
  bool all_logits = false;
  std::vector<float> logits;  // kept rows when all_logits
  std::chrono::steady_clock::time_point first_step{}, first_token{}, last_token{};
  bool started = false;
  bool feeding_last = false;
  bool final_sent = false;  // the one event with finished == true has gone out  // all_logits: the
                            // last token is fed for its row, not sampled
  int64_t sampled = 0;
  std::vector<TapResult> taps;  // one per requested tap, filled during the prompt
  bool state_taps = false;      // a residual / attn_out / mlp_out tap
  bool logits_tap = false;
};

}  // namespace tpnode::node
