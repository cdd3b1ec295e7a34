#include "collectives/layout.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tpnode::collectives {

Layout::Layout(std::vector<int> ranks_per_node) : ranks_(std::move(ranks_per_node)) {
  if (ranks_.empty() || ranks_.size() > static_cast<size_t>(kMaxNodes)) return;
  for (int r : ranks_) {
    if (r < 1 || r > kMaxRanksPerNode) return;
  }
  // At most kMaxNodes * kMaxRanksPerNode = 2^26 ranks: the sums fit an int.
  first_.reserve(ranks_.size() + 1);
  first_.push_back(0);
  for (int r : ranks_) first_.push_back(first_.back() + r);
}

Layout Layout::uniform(int nodes, int ranks_per_node) {
  if (nodes < 0 || nodes > kMaxNodes) {
    fail(ErrorCode::kInvalidArgument, "a layout of {} nodes: need 0..{}", nodes, kMaxNodes);
  }
  return Layout(std::vector<int>(static_cast<size_t>(nodes), ranks_per_node));
}

std::string Layout::text() const {
  return fmt::format("{}", fmt::join(ranks_, ","));
}

bool Layout::sameOnEveryNode() const {
  return wellFormed() &&
         std::all_of(ranks_.begin(), ranks_.end(), [&](int r) { return r == ranks_.front(); });
}

std::optional<LayoutRefusal> Layout::refusal(std::string_view flag) const {
  if (ranks_.empty()) {
    return LayoutRefusal{ErrorCode::kInvalidArgument,
                         fmt::format("{} is empty: give the tp of every node", flag)};
  }
  if (ranks_.size() > static_cast<size_t>(kMaxNodes)) {
    return LayoutRefusal{ErrorCode::kInvalidArgument, fmt::format("{} lists {} nodes: at most {}",
                                                                  flag, ranks_.size(), kMaxNodes)};
  }
  for (int tp : ranks_) {
    if (tp < 1 || tp > kMaxRanksPerNode) {
      return LayoutRefusal{ErrorCode::kInvalidArgument,
                           fmt::format("{} {}: a node's tp must be 1..{}, not {}", flag, text(),
                                       kMaxRanksPerNode, tp)};
    }
  }
  if (!sameOnEveryNode()) {
    return LayoutRefusal{
        ErrorCode::kUnsupported,
        fmt::format("{} {}: nodes with different tp degrees are not supported yet (the "
                    "hierarchical all-reduce pairs local rank r of every node); give every node "
                    "the same tp, e.g. --tp {}",
                    flag, text(), ranks_.front())};
  }
  return std::nullopt;
}

void Layout::checkWellFormed() const {
  if (!wellFormed()) throw Error(ErrorCode::kInvalidArgument, refusal()->message);
}

void Layout::checkNode(int node) const {
  checkWellFormed();
  if (node < 0 || node >= nodes()) {
    fail(ErrorCode::kInvalidArgument, "node {} outside a {}-node topology", node, nodes());
  }
}

int Layout::worldSize() const {
  checkWellFormed();
  return first_.back();
}

int Layout::ranksOf(int node) const {
  checkNode(node);
  return ranks_[static_cast<size_t>(node)];
}

int Layout::firstRankOf(int node) const {
  checkNode(node);
  return first_[static_cast<size_t>(node)];
}

int Layout::globalRank(int node, int local) const {
  const int ranks = ranksOf(node);
  if (local < 0 || local >= ranks) {
    fail(ErrorCode::kInvalidArgument, "local rank {} outside a node of {} rank(s)", local, ranks);
  }
  return first_[static_cast<size_t>(node)] + local;
}

int Layout::nodeOf(int global) const {
  const int world = worldSize();
  if (global < 0 || global >= world) {
    fail(ErrorCode::kInvalidArgument, "global rank {} outside a group of {}", global, world);
  }
  // The last node whose first rank is <= global (first_ is strictly increasing).
  const auto after = std::upper_bound(first_.begin(), first_.end(), global);
  return static_cast<int>(after - first_.begin()) - 1;
}

int Layout::localRankOf(int global) const {
  return global - first_[static_cast<size_t>(nodeOf(global))];
}

std::string Layout::describe() const {
  if (!wellFormed()) return text();
  std::string out = fmt::format("{} node{}, {} rank{}:", nodes(), nodes() == 1 ? "" : "s",
                                worldSize(), worldSize() == 1 ? "" : "s");
  for (int n = 0; n < nodes(); ++n) {
    const int first = firstRankOf(n), last = first + ranksOf(n) - 1;
    out += fmt::format(
        "{} node {} global rank{}", n == 0 ? "" : ",", n,
        first == last ? fmt::format(" {}", first) : fmt::format("s {}..{}", first, last));
  }
  return out;
}

}  // namespace tpnode::collectives
