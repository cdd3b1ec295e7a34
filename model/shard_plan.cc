#include "model/shard_plan.h"

#include <fmt/format.h>

#include <map>

#include "common/check.h"
#include "common/error.h"
#include "model/gguf.h"

namespace tpnode::model {
namespace {

// The part of a layer tensor's name after "blk.N.", or the whole name.
std::string role(const std::string& name) {
  if (name.rfind("blk.", 0) == 0) {
    size_t dot = name.find('.', 4);
    if (dot != std::string::npos) return name.substr(dot + 1);
  }
  return name;
}

// A stacked expert tensor (ffn_gate_exps, ffn_up_exps, ffn_down_exps).
bool isExpertRole(const std::string& r) {
  return r == "ffn_gate_exps.weight" || r == "ffn_up_exps.weight" || r == "ffn_down_exps.weight";
}

// Why `tp` cannot split this tensor, or "" when it can. `moe`: kSlice or kExpert.
std::string refusal(const ModelConfig& c, const TensorDesc& t, int tp, TensorShard& out,
                    HeadLayout head = HeadLayout::kAuto, MoePlacement moe = MoePlacement::kSlice) {
  out.tensor = t;
  out.kind = ShardKind::kReplicate;
  out.pieces = 1;
  if (tp == 1) return {};
  const std::string r = role(t.name);
  if (moe == MoePlacement::kExpert && isExpertRole(r)) {
    out.kind = ShardKind::kSplitExperts;
    out.pieces = tp;
    if (t.experts < static_cast<uint64_t>(tp)) {
      return fmt::format("{} experts are fewer than the {} ranks (each needs a whole expert)",
                         t.experts, tp);
    }
    return {};
  }
  auto splitRows = [&](int64_t units, const char* what) -> std::string {
    out.kind = ShardKind::kSplitRows;
    out.pieces = tp;
    if (units % tp != 0) return fmt::format("{} {} do not divide by {}", units, what, tp);
    return {};
  };
  if (r == "attn_q.weight" || r == "attn_q.bias") return splitRows(c.n_head, "attention heads");
  if (r == "ffn_gate.weight" || r == "ffn_up.weight") return splitRows(c.n_ff, "ffn rows");
  if (r == "attn_k.weight" || r == "attn_k.bias" || r == "attn_v.weight" || r == "attn_v.bias") {
    out.kind = ShardKind::kSplitRows;
    if (c.n_head_kv % tp == 0) {
      out.pieces = tp;
    } else if (tp % c.n_head_kv == 0) {
      out.pieces = static_cast<int>(c.n_head_kv);  // replicated kv heads
    } else {
      return fmt::format("{} kv heads neither divide by {} nor divide it", c.n_head_kv, tp);
    }
    return {};
  }
  if (r == "attn_output.weight" || r == "ffn_down.weight" || r == "ffn_down_exps.weight" ||
      r == "ffn_down_shexp.weight") {
    out.kind = ShardKind::kSplitCols;
    out.pieces = tp;
    if (t.cols % static_cast<uint64_t>(tp) != 0) {
      return fmt::format("{} input columns do not divide by {}", t.cols, tp);
    }
    const TensorTypeInfo& info = tensorTypeInfo(t.type);
    if ((t.cols / tp) % info.block_size != 0) {
      return fmt::format("{} input columns per rank would cut a {} block of {}", t.cols / tp,
                         info.name, info.block_size);
    }
    return {};
  }
  if (r == "ffn_gate_exps.weight" || r == "ffn_up_exps.weight") {
    return splitRows(c.n_ff_exp, "expert ffn rows");
  }
  if (r == "ffn_gate_shexp.weight" || r == "ffn_up_shexp.weight") {
    return splitRows(c.n_ff_shexp, "shared expert ffn rows");
  }
  if (t.name == "output.weight" && c.n_vocab % tp == 0 && head != HeadLayout::kReplicated) {
    out.kind = ShardKind::kSplitRows;  // vocab-parallel head
    out.pieces = tp;
  }
  return {};
}

// Why placement `moe` (kSlice or kExpert) cannot place this model's experts over tp, or "".
std::string moeRefusal(const ModelConfig& c, const std::vector<TensorDesc>& tensors, int tp,
                       MoePlacement moe) {
  for (const TensorDesc& t : tensors) {
    TensorShard s;
    if (!isExpertRole(role(t.name))) continue;
    if (std::string why = refusal(c, t, tp, s, HeadLayout::kAuto, moe); !why.empty()) {
      return fmt::format("'{}' ({} [{} x {} x {}]): {}", t.name, tensorTypeName(t.type), t.experts,
                         t.rows / t.experts, t.cols, why);
    }
  }
  return {};
}

// The placement planShards uses for `moe` (kSlice for dense models and tp 1), and why; throws
// when a forced placement, or both, cannot work.
MoePlacement resolveMoe(const ModelConfig& c, const std::vector<TensorDesc>& tensors, int tp,
                        MoePlacement moe, std::string& reason) {
  if (!c.isMoe()) return MoePlacement::kSlice;
  if (tp == 1) {
    reason = "one rank holds every expert whole";
    return moe == MoePlacement::kExpert ? MoePlacement::kExpert : MoePlacement::kSlice;
  }
  const std::string slice_why = moeRefusal(c, tensors, tp, MoePlacement::kSlice);
  const std::string expert_why = moeRefusal(c, tensors, tp, MoePlacement::kExpert);
  const std::string slicing = fmt::format(
      "expert slicing: every rank holds {} of the {} rows of each of the {} experts and computes "
      "that part of every selected expert",
      c.n_ff_exp / tp, c.n_ff_exp, c.n_expert);
  const std::string parallel = fmt::format(
      "expert parallel: every rank holds {}{} whole experts of the {} and computes the selected "
      "ones it owns",
      c.n_expert / tp, c.n_expert % tp != 0 ? " or " + std::to_string(c.n_expert / tp + 1) : "",
      c.n_expert);
  switch (moe) {
    case MoePlacement::kSlice:
      if (!slice_why.empty()) {
        fail(ErrorCode::kInvalidArgument,
             "--moe-placement slice: cannot slice the experts over tp={}: {}; {}", tp, slice_why,
             expert_why.empty() ? "--moe-placement expert works (whole experts per rank)"
                                : "expert parallel does not work either: " + expert_why);
      }
      reason = slicing + " (--moe-placement slice)";
      return MoePlacement::kSlice;
    case MoePlacement::kExpert:
      if (!expert_why.empty()) {
        fail(ErrorCode::kInvalidArgument, "--moe-placement expert over tp={}: {}; {}", tp,
             expert_why,
             slice_why.empty() ? "--moe-placement slice works (1/tp of every expert per rank)"
                               : "expert slicing does not work either: " + slice_why);
      }
      reason = parallel + " (--moe-placement expert)";
      return MoePlacement::kExpert;
    case MoePlacement::kAuto:
      break;
  }
  if (slice_why.empty()) {
    reason = slicing + " (auto: the slices keep whole quantization blocks)";
    return MoePlacement::kSlice;
  }
  if (expert_why.empty()) {
    reason = parallel + " (auto: slicing cannot, " + slice_why + ")";
    return MoePlacement::kExpert;
  }
  fail(ErrorCode::kInvalidArgument,
       "cannot place the experts over tp={}: slicing: {}; expert parallel: {}; tp degrees that "
       "work for this model: {}",
       tp, slice_why, expert_why, fmt::join(workingTpDegrees(c, tensors), ", "));
}

std::string humanBytes(uint64_t b) {
  if (b >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", b / double(uint64_t{1} << 30));
  if (b >= (uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", b / double(uint64_t{1} << 20));
  return fmt::format("{:.1f} KiB", b / 1024.0);
}

}  // namespace

Slice TensorShard::sliceFor(int rank, int tp) const {
  const uint64_t rows = tensor.rows / tensor.experts;  // per expert
  Slice s{0, rows, 0, tensor.cols, 0, tensor.experts};
  if (kind == ShardKind::kReplicate) return s;
  uint64_t piece = static_cast<uint64_t>(rank) * pieces / tp;
  if (kind == ShardKind::kSplitRows && rows == 1) {  // a bias: split its elements
    uint64_t n = tensor.cols / pieces;
    s.col_begin = piece * n;
    s.col_end = s.col_begin + n;
  } else if (kind == ShardKind::kSplitExperts) {  // whole experts, a balanced map
    s.expert_begin = static_cast<uint64_t>(rank) * tensor.experts / tp;
    s.expert_end = static_cast<uint64_t>(rank + 1) * tensor.experts / tp;
  } else if (kind == ShardKind::kSplitRows) {
    uint64_t n = rows / pieces;
    s.row_begin = piece * n;
    s.row_end = s.row_begin + n;
  } else {
    uint64_t n = tensor.cols / pieces;
    s.col_begin = piece * n;
    s.col_end = s.col_begin + n;
  }
  return s;
}

uint64_t TensorShard::bytesFor(int rank, int tp) const {
  Slice s = sliceFor(rank, tp);
  return rowBytes(tensor.type, s.col_end - s.col_begin) * (s.row_end - s.row_begin) *
         (s.expert_end - s.expert_begin);
}

const TensorShard& ShardPlan::find(const std::string& name) const {
  for (const TensorShard& s : shards) {
    if (s.tensor.name == name) return s;
  }
  TP_CHECK(false, "tensor {} is not in the shard plan", name);
  __builtin_unreachable();
}

uint64_t ShardPlan::rankBytes(int rank) const {
  uint64_t b = 0;
  for (const TensorShard& s : shards) {
    // A replicated untied head lives on rank 0 only (see HeadLayout).
    if (s.tensor.name == "output.weight" && !vocab_parallel_head && rank != 0) continue;
    b += s.bytesFor(rank, tp);
  }
  return b;
}

uint64_t ShardPlan::totalBytes() const {
  // The whole tensors (bytesFor() slices by the plan's pieces whatever tp it is given).
  uint64_t b = 0;
  for (const TensorShard& s : shards) b += rowBytes(s.tensor.type, s.tensor.cols) * s.tensor.rows;
  return b;
}

std::string ShardPlan::describe() const {
  // One line per (role, kind): layer tensors are grouped across layers.
  std::map<std::string, std::pair<const TensorShard*, int>> groups;
  std::vector<std::string> order;
  for (const TensorShard& s : shards) {
    std::string r = role(s.tensor.name);
    auto [it, inserted] = groups.try_emplace(r, &s, 0);
    if (inserted) order.push_back(r);
    ++it->second.second;
  }
  std::string out = fmt::format("shard plan for tp={}:\n", tp);
  for (const std::string& r : order) {
    const auto& [s, count] = groups[r];
    const char* kind = s->kind == ShardKind::kReplicate   ? "replicate"
                       : s->kind == ShardKind::kSplitRows ? "split rows"
                       : s->kind == ShardKind::kSplitCols ? "split cols"
                                                          : "experts";
    Slice sl = s->sliceFor(0, tp);
    const uint64_t e = s->tensor.experts;  // stacked experts: [experts x rows x cols]
    const std::string lead = e > 1 ? fmt::format("{} x ", e) : "";
    const std::string lead0 = e > 1 ? fmt::format("{} x ", sl.expert_end - sl.expert_begin) : "";
    out += fmt::format("  {:<24} x{:<3} {:<5} [{}{} x {}] {:<10} rank 0: [{}{} x {}]{}\n", r, count,
                       tensorTypeName(s->tensor.type), lead, s->tensor.rows / e, s->tensor.cols,
                       kind, lead0, sl.row_end - sl.row_begin, sl.col_end - sl.col_begin,
                       s->pieces < tp && s->kind != ShardKind::kReplicate
                           ? fmt::format(" ({} pieces, replicated x{})", s->pieces, tp / s->pieces)
                           : "");
  }
  if (!moe_reason.empty()) out += fmt::format("  experts: {}\n", moe_reason);
  out += fmt::format("  output head: {}\n",
                     vocab_parallel_head ? "vocab-parallel (logits all-gathered)"
                                         : "replicated (global rank 0 computes every logit)");
  if (tp == 1) {
    out += fmt::format("  rank 0: {} (the whole model)\n", humanBytes(rankBytes(0)));
  }
  const TensorShard* experts = nullptr;  // expert parallel: which experts each rank holds
  for (const TensorShard& s : shards) {
    if (s.kind == ShardKind::kSplitExperts) {
      experts = &s;
      break;
    }
  }
  for (int r = 0; r < tp && tp > 1; ++r) {
    std::string held;
    if (experts != nullptr) {
      const Slice sl = experts->sliceFor(r, tp);
      held = fmt::format(", experts {}..{}", sl.expert_begin, sl.expert_end - 1);
    }
    out += fmt::format("  rank {}: {} of {} ({:.1f}%){}\n", r, humanBytes(rankBytes(r)),
                       humanBytes(totalBytes()), 100.0 * rankBytes(r) / double(totalBytes()), held);
  }
  return out;
}

std::vector<TensorDesc> tensorDescs(const GgufMetadata& meta) {
  std::vector<TensorDesc> out;
  for (const GgufTensorInfo& t : meta.tensors) {
    const bool stacked = t.n_dims >= 3 && t.ne[3] == 1;  // [cols, rows, experts]
    out.push_back({t.name, t.type, t.ne[0], t.rows(), stacked ? t.ne[2] : 1});
  }
  return out;
}

MoePlacement parseMoePlacement(const std::string& text) {
  if (text == "auto") return MoePlacement::kAuto;
  if (text == "slice") return MoePlacement::kSlice;
  if (text == "expert") return MoePlacement::kExpert;
  fail(ErrorCode::kInvalidArgument, "--moe-placement '{}' is not one of auto, slice, expert", text);
}

HeadLayout parseHeadLayout(const std::string& text) {
  if (text == "auto") return HeadLayout::kAuto;
  if (text == "vocab-parallel") return HeadLayout::kVocabParallel;
  if (text == "replicated") return HeadLayout::kReplicated;
  fail(ErrorCode::kInvalidArgument, "--head '{}' is not one of auto, vocab-parallel, replicated",
       text);
}

ShardPlan planShards(const ModelConfig& c, const std::vector<TensorDesc>& tensors, int tp,
                     HeadLayout head, MoePlacement moe) {
  if (tp < 1) fail(ErrorCode::kInvalidArgument, "--tp {} must be at least 1", tp);
  if (head == HeadLayout::kVocabParallel && tp > 1 && c.n_vocab % tp != 0) {
    fail(ErrorCode::kInvalidArgument,
         "--head vocab-parallel: the vocabulary of {} tokens does not divide by tp={}; use "
         "--head replicated (or auto)",
         c.n_vocab, tp);
  }
  ShardPlan plan;
  plan.tp = tp;
  for (const TensorDesc& t : tensors) {  // the dense tensors first: their refusal names the tp
    TensorShard s;
    if (isExpertRole(role(t.name))) continue;
    if (std::string why = refusal(c, t, tp, s, head); !why.empty()) {
      fail(ErrorCode::kInvalidArgument,
           "cannot split tensor '{}' ({} {} x {}) over tp={}: {}; tp degrees that work for this "
           "model: {}",
           t.name, tensorTypeName(t.type), t.rows, t.cols, tp, why,
           fmt::join(workingTpDegrees(c, tensors, 64, moe), ", "));
    }
  }
  plan.moe = resolveMoe(c, tensors, tp, moe, plan.moe_reason);
  for (const TensorDesc& t : tensors) {
    TensorShard s;
    std::string why = refusal(c, t, tp, s, head, plan.moe);
    if (!why.empty()) {
      std::vector<int> ok = workingTpDegrees(c, tensors, 64, moe);
      fail(ErrorCode::kInvalidArgument,
           "cannot split tensor '{}' ({} {} x {}) over tp={}: {}; tp degrees that work for this "
           "model: {}",
           t.name, tensorTypeName(t.type), t.rows, t.cols, tp, why, fmt::join(ok, ", "));
    }
    if (t.name == "output.weight") plan.vocab_parallel_head = s.kind == ShardKind::kSplitRows;
    plan.shards.push_back(std::move(s));
  }
  if (c.tied_output) {  // rows of token_embd
    plan.vocab_parallel_head = c.n_vocab % tp == 0 && head != HeadLayout::kReplicated;
  }
  return plan;
}

std::vector<int> workingTpDegrees(const ModelConfig& c, const std::vector<TensorDesc>& tensors,
                                  int max_tp, MoePlacement moe) {
  auto works = [&](int tp, MoePlacement placement) {
    for (const TensorDesc& t : tensors) {
      TensorShard s;
      if (!refusal(c, t, tp, s, HeadLayout::kAuto, placement).empty()) return false;
    }
    return true;
  };
  std::vector<int> ok;
  for (int tp = 1; tp <= max_tp; ++tp) {
    const bool good = moe == MoePlacement::kAuto && c.isMoe()
                          ? works(tp, MoePlacement::kSlice) || works(tp, MoePlacement::kExpert)
                          : works(tp, moe == MoePlacement::kExpert ? moe : MoePlacement::kSlice);
    if (good) ok.push_back(tp);
  }
  return ok;
}

}  // namespace tpnode::model
