// Sampler: picks the next token from a row of logits; one per sequence, on the rank that owns
// sampling (global rank 0), never on workers.
//
// Contract
// - Not thread-safe: one sequence's sampler is used by one thread at a time (the step loop).
// - Steps, in llama.cpp's default order: penalties -> top-k -> top-p -> min-p -> temperature ->
//   draw. temperature <= 0 is greedy: the argmax after penalties, ties to the lowest id.
// - Penalties: repeat_penalty with llama.cpp's semantics over the last repeat_last_n tokens of
//   prompt and output (a logit > 0 is divided by it, one <= 0 multiplied); presence and
//   frequency penalties with OpenAI's semantics over the generated tokens only
//   (logit -= count * frequency_penalty + (count > 0) * presence_penalty).
// - Deterministic: the same seed, params, prompt and logits give the same tokens on every
//   machine (std::mt19937_64 and an explicit uniform draw; ties broken by the lowest id).
// - Logprobs are those of the model (log-softmax of the raw logits row, before penalties and
//   temperature), as the OpenAI API reports them.
// - No allocation per step: all buffers are sized in the constructor and reused.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/vocab.h"

namespace tpnode::model {

struct SamplingParams {
  float temperature = 1.0f;        // <= 0: greedy
  int32_t top_k = 0;               // 0: off
  float top_p = 1.0f;              // 1: off
  float min_p = 0.0f;              // 0: off
  float repeat_penalty = 1.0f;     // 1: off
  int32_t repeat_last_n = 64;      // window of repeat_penalty; -1: everything seen
  float presence_penalty = 0.0f;   // OpenAI, -2..2
  float frequency_penalty = 0.0f;  // OpenAI, -2..2
  uint64_t seed = 0;
  bool logprobs = false;     // compute the chosen token's logprob (costs one pass over the row)
  int32_t top_logprobs = 0;  // alternatives reported per step (> 0 implies logprobs)
};

struct TokenLogprob {
  TokenId id = -1;
  float logprob = 0.0f;
};

// Throws Error(kInvalidArgument) naming the parameter when one is out of range (for checking a
// request before it is queued; the Sampler constructor checks the same).
void checkSamplingParams(const SamplingParams& params);

class Sampler {
 public:
  // Throws Error(kInvalidArgument) naming the parameter when one is out of range. top_logprobs
  // above n_vocab is clamped to it.
  Sampler(const SamplingParams& params, int32_t n_vocab);

  // Records prompt tokens (they count for repeat_penalty, not for presence/frequency).
  void acceptPrompt(std::span<const TokenId> ids);
  // Records a generated token that did not come from sample() (e.g. forced).
  void accept(TokenId id);

  // Picks the next token from `logits` (n_vocab values, finite or -inf) and records it as
  // generated. Throws Error(kInvalidArgument) when the row has the wrong size.
  TokenId sample(std::span<const float> logits);

  // Of the last sample(), when logprobs or top_logprobs are asked for (else 0 and empty): the
  // chosen token's logprob and the top_logprobs most likely tokens, best first (ties: lowest
  // id). Valid until the next sample().
  float chosenLogprob() const { return chosen_logprob_; }
  std::span<const TokenLogprob> topLogprobs() const { return top_; }

  const SamplingParams& params() const { return params_; }

  // The ids the last non-greedy sample() drew from (after top-k, top-p, min-p), in no
  // particular order. For tests and diagnostics.
  void lastCandidates(std::vector<TokenId>& out) const;

 private:
  struct Candidate {
    float logit;
    TokenId id;
    float p;  // unnormalised probability (scratch of top-p and the draw)
  };

  void record(TokenId id, bool generated);
  const float* applyPenalties(std::span<const float> logits);
  TokenId draw();
  bool truncating() const;  // top-k, top-p or min-p cut the candidate set
  TokenId drawAll(const float* logits);
  void computeLogprobs(std::span<const float> logits, TokenId chosen);
  void truncateTopK(size_t k);
  void truncateTopP();
  void truncateMinP();

  SamplingParams params_;
  int32_t n_vocab_;
  std::mt19937_64 rng_;
  // Memory: a sampler is made per request when it is admitted, queued ones included, so it
  // holds O(prompt + generated) state; the vocabulary-sized scratch (work_, cand_) is
  // allocated at the first sample().
  struct Counts {
    int32_t window = 0;     // occurrences in the repeat window
    int32_t generated = 0;  // times generated
  };
  std::vector<float> work_;         // penalised logits
  std::vector<Candidate> cand_;     // the candidate set of the current step
  std::vector<float> probs_;        // drawAll(): unnormalised probabilities of the whole row
  std::vector<double> block_sums_;  // drawAll(): their sums per block of 1024
  std::vector<TokenId> window_;     // ring buffer of the repeat window
  size_t window_next_ = 0;
  size_t window_size_ = 0;
  // Tokens with a nonzero count (entries that drop to zero are erased at the next penalty pass).
  std::unordered_map<TokenId, Counts> counts_;
  float chosen_logprob_ = 0.0f;
  std::vector<TokenLogprob> top_;
};

}  // namespace tpnode::model
