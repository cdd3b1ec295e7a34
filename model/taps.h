// Activation taps: copies of hidden states taken during a forward pass, for inspection.
//
// Points (per layer L, for each tapped token, all of width n_embd):
//   attn_out  the attention block's output after its all-reduce (and gemma3's post-attention
//             norm), i.e. what is added to the residual stream;
//   mlp_out   the same for the feed-forward block;
//   residual  the residual stream after layer L (the input of layer L+1; after the last layer
//             it is what the final norm and the output head see).
//   logits    (not taken here: the head's all-gathered rows, see node/driver.cc).
// After the all-reduces every rank holds the same full vector, so a tap needs no collective:
// one rank (global rank 0) copies the rows. Values are identical for every tp layout up to the
// all-reduce summation order (the parity tolerance).
// A pipeline split (node/stage_pipeline.h): the stage that holds layer L takes its taps
// (RankModel::forwardLayers, its first rank) and sends them to node 0 with the step's result.
//
// Threading: a TapSink is filled by one rank thread during forward() and read after it returns.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tpnode::model {

enum class TapPoint : uint8_t { kResidual, kAttnOut, kMlpOut, kLogits };

inline std::string_view tapPointName(TapPoint point) {
  switch (point) {
    case TapPoint::kResidual:
      return "residual";
    case TapPoint::kAttnOut:
      return "attn_out";
    case TapPoint::kMlpOut:
      return "mlp_out";
    case TapPoint::kLogits:
      return "logits";
  }
  return "?";
}

inline std::optional<TapPoint> parseTapPoint(std::string_view name) {
  for (TapPoint p :
       {TapPoint::kResidual, TapPoint::kAttnOut, TapPoint::kMlpOut, TapPoint::kLogits}) {
    if (tapPointName(p) == name) return p;
  }
  return std::nullopt;
}

struct TapSpec {
  int layer = 0;
  TapPoint point = TapPoint::kResidual;
  friend bool operator==(const TapSpec&, const TapSpec&) = default;
};

// What forward() records: for each spec (residual / attn_out / mlp_out), the rows of the batch
// tokens marked `tap`, in batch order: rows[i] holds n_tapped x n_embd floats.
struct TapSink {
  std::vector<TapSpec> specs;
  std::vector<std::vector<float>> rows;  // resized by forward() to specs.size()
};

}  // namespace tpnode::model
