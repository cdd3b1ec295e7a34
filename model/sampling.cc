#include "model/sampling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "model/fast_exp.h"

namespace tpnode::model {
namespace {

// Best first: higher logit, then lower id.
bool better(float la, TokenId a, float lb, TokenId b) {
  return la > lb || (la == lb && a < b);
}

void checkRange(bool ok, std::string_view name, double value, std::string_view range) {
  if (!ok)
    fail(ErrorCode::kInvalidArgument, "sampling parameter {} = {} is outside {}", name, value,
         range);
}

}  // namespace

void checkSamplingParams(const SamplingParams& p) {
  checkRange(p.temperature >= 0 && std::isfinite(p.temperature), "temperature", p.temperature,
             "[0, inf)");
  checkRange(p.top_k >= 0, "top_k", p.top_k, "[0, n_vocab] (0: off)");
  checkRange(p.top_p >= 0 && p.top_p <= 1, "top_p", p.top_p, "[0, 1]");
  checkRange(p.min_p >= 0 && p.min_p <= 1, "min_p", p.min_p, "[0, 1]");
  checkRange(p.repeat_penalty > 0 && std::isfinite(p.repeat_penalty), "repeat_penalty",
             p.repeat_penalty, "(0, inf)");
  checkRange(p.repeat_last_n >= -1, "repeat_last_n", p.repeat_last_n, "[-1, inf) (-1: all)");
  checkRange(std::isfinite(p.presence_penalty), "presence_penalty", p.presence_penalty,
             "finite values");
  checkRange(std::isfinite(p.frequency_penalty), "frequency_penalty", p.frequency_penalty,
             "finite values");
  checkRange(p.top_logprobs >= 0, "top_logprobs", p.top_logprobs, "[0, n_vocab]");
}

Sampler::Sampler(const SamplingParams& p, int32_t n_vocab)
    : params_(p), n_vocab_(n_vocab), rng_(p.seed) {
  if (n_vocab <= 0) fail(ErrorCode::kInvalidArgument, "sampler needs n_vocab > 0, got {}", n_vocab);
  checkSamplingParams(p);
  params_.top_logprobs = std::min(p.top_logprobs, n_vocab);
  if (p.repeat_last_n > 0) window_.assign(static_cast<size_t>(p.repeat_last_n), -1);
  top_.reserve(static_cast<size_t>(params_.top_logprobs));
}

void Sampler::record(TokenId id, bool generated) {
  if (id < 0 || id >= n_vocab_) {
    fail(ErrorCode::kInvalidArgument, "token id {} is outside the vocabulary [0, {})", id,
         n_vocab_);
  }
  if (params_.repeat_last_n != 0) {
    if (!window_.empty()) {
      if (window_size_ == window_.size()) {
        --counts_[window_[window_next_]].window;  // the oldest leaves the window
      } else {
        ++window_size_;
      }
      window_[window_next_] = id;
      window_next_ = (window_next_ + 1) % window_.size();
    }
    ++counts_[id].window;
  }
  if (generated) ++counts_[id].generated;
}

void Sampler::acceptPrompt(std::span<const TokenId> ids) {
  for (const TokenId id : ids) record(id, false);
}

void Sampler::accept(TokenId id) {
  record(id, true);
}

const float* Sampler::applyPenalties(std::span<const float> logits) {
  const SamplingParams& p = params_;
  const bool repeat = p.repeat_penalty != 1.0f;
  const bool openai = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if ((!repeat && !openai) || counts_.empty()) return logits.data();
  work_.assign(logits.begin(), logits.end());
  for (auto it = counts_.begin(); it != counts_.end();) {
    const auto [id, counts] = *it;
    if (counts.window == 0 && counts.generated == 0) {  // left the window, never generated
      it = counts_.erase(it);
      continue;
    }
    ++it;
    float& l = work_[static_cast<size_t>(id)];
    if (repeat && counts.window > 0) l = l <= 0 ? l * p.repeat_penalty : l / p.repeat_penalty;
    if (openai && counts.generated > 0) {
      l -= static_cast<float>(counts.generated) * p.frequency_penalty + p.presence_penalty;
    }
  }
  return work_.data();
}

TokenId Sampler::sample(std::span<const float> logits) {
  if (logits.size() != static_cast<size_t>(n_vocab_)) {
    fail(ErrorCode::kInvalidArgument, "logits row has {} values, the vocabulary {}", logits.size(),
         n_vocab_);
  }
  const float* l = applyPenalties(logits);
  TokenId chosen = 0;
  if (params_.temperature <= 0) {
    chosen = firstArgmax(l, n_vocab_);  // ties: the lowest id
  } else if (!truncating()) {
    chosen = drawAll(l);
  } else {
    cand_.clear();
    cand_.reserve(static_cast<size_t>(n_vocab_));
    for (TokenId i = 0; i < n_vocab_; ++i) cand_.push_back(Candidate{l[i], i, 0.0f});
    if (params_.top_k > 0) truncateTopK(static_cast<size_t>(params_.top_k));
    if (params_.top_p < 1.0f) truncateTopP();
    if (params_.min_p > 0.0f) truncateMinP();
    chosen = draw();
  }
  chosen_logprob_ = 0.0f;
  top_.clear();
  if (params_.logprobs || params_.top_logprobs > 0) computeLogprobs(logits, chosen);
  record(chosen, true);
  return chosen;
}

void Sampler::lastCandidates(std::vector<TokenId>& out) const {
  out.clear();
  if (!truncating()) {  // drawAll() draws from the whole vocabulary
    for (TokenId i = 0; i < n_vocab_; ++i) out.push_back(i);
    return;
  }
  for (const Candidate& c : cand_) out.push_back(c.id);
}

bool Sampler::truncating() const {
  return (params_.top_k > 0 && params_.top_k < n_vocab_) || params_.top_p < 1.0f ||
         params_.min_p > 0.0f;
}

// Softmax of logit / temperature over the whole row, then one uniform draw; the common case
// (OpenAI's defaults: temperature only) without building the candidate list. Probabilities
// are computed 4 lanes at a time into probs_ with per-block sums in double (a fixed order);
// the draw finds the block where the running sum passes the target, then the token inside it.
TokenId Sampler::drawAll(const float* l) {
  constexpr size_t kBlock = 1024;
  const size_t n = static_cast<size_t>(n_vocab_);
  const float max_logit = maxOf(l, n);
  TokenId best = 0;
  while (l[best] != max_logit && static_cast<size_t>(best) + 1 < n) ++best;
  if (!std::isfinite(max_logit)) return best;  // every logit is -inf (or NaN)
  const float inv_t = 1.0f / params_.temperature;
  probs_.resize(n);
  block_sums_.clear();
  double sum = 0;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t end = std::min(n, b + kBlock);
    Float4 lane{};
    size_t i = b;
    for (; i + 4 <= end; i += 4) {
      const Float4 p = expNonPositive4((load4(l + i) - max_logit) * inv_t);
      std::memcpy(probs_.data() + i, &p, sizeof(p));
      lane += p;
    }
    double block = 0;
    for (int j = 0; j < 4; ++j) block += lane[j];
    for (; i < end; ++i) {
      probs_[i] = expNonPositive((l[i] - max_logit) * inv_t);
      block += probs_[i];
    }
    block_sums_.push_back(block);
    sum += block;
  }
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;  // [0, 1)
  double target = u * sum;
  for (size_t k = 0; k < block_sums_.size(); ++k) {
    if (target >= block_sums_[k] && k + 1 < block_sums_.size()) {
      target -= block_sums_[k];
      continue;
    }
    double cum = 0;
    const size_t end = std::min(n, (k + 1) * kBlock);
    size_t last = n;  // the block's last token with p > 0
    for (size_t i = k * kBlock; i < end; ++i) {
      if (probs_[i] <= 0) continue;
      cum += probs_[i];
      last = i;
      if (target < cum) return static_cast<TokenId>(i);
    }
    // Rounding: the sequential sum fell just short of the block sum.
    return last < n ? static_cast<TokenId>(last) : best;
  }
  return best;
}

void Sampler::truncateTopK(size_t k) {
  if (k >= cand_.size()) return;
  const auto order = [](const Candidate& a, const Candidate& b) {
    return better(a.logit, a.id, b.logit, b.id);
  };
  std::nth_element(cand_.begin(), cand_.begin() + static_cast<ptrdiff_t>(k), cand_.end(), order);
  cand_.resize(k);
}

// Keeps the smallest best-first prefix whose probability reaches top_p (at least one token),
// in linear time. Buckets of 0.5 logit below the maximum decide most candidates at once: those
// in buckets above the one where the mass reaches top_p are kept, those below dropped. Inside
// that bucket, halve the undecided range with nth_element and keep or drop the better half by
// its mass; only the last <= 64 candidates are sorted.
void Sampler::truncateTopP() {
  const auto order = [](const Candidate& a, const Candidate& b) {
    return better(a.logit, a.id, b.logit, b.id);
  };
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const Candidate& c : cand_) max_logit = std::max(max_logit, c.logit);
  constexpr int kBuckets = 64;
  const auto bucketOf = [max_logit](float logit) {
    const float d = (max_logit - logit) * 2.0f;
    return d < kBuckets - 1 ? static_cast<int>(d) : kBuckets - 1;  // NaN, inf: the last
  };
  std::array<double, kBuckets> bucket_mass{};
  double sum = 0;
  for (Candidate& c : cand_) {
    c.p = expNonPositive(c.logit - max_logit);
    sum += c.p;
    bucket_mass[static_cast<size_t>(bucketOf(c.logit))] += c.p;
  }
  double need = params_.top_p * sum;  // mass still to cover, unnormalised
  int cut = 0;                        // the bucket where the prefix ends
  while (cut < kBuckets - 1 && bucket_mass[static_cast<size_t>(cut)] < need) {
    need -= bucket_mass[static_cast<size_t>(cut)];
    ++cut;
  }
  auto lo = std::partition(cand_.begin(), cand_.end(),
                           [&](const Candidate& c) { return bucketOf(c.logit) < cut; });
  auto hi =
      std::partition(lo, cand_.end(), [&](const Candidate& c) { return bucketOf(c.logit) == cut; });
  while (hi - lo > 64) {
    const auto mid = lo + (hi - lo) / 2;
    std::nth_element(lo, mid, hi, order);  // [lo, mid) is the better half
    double mass = 0;
    for (auto it = lo; it != mid; ++it) mass += it->p;
    if (mass >= need) {
      hi = mid;
    } else {
      need -= mass;
      lo = mid;
    }
  }
  std::sort(lo, hi, order);
  double cum = 0;
  for (auto it = lo; it != hi; ++it) {
    cum += it->p;
    if (cum >= need) {
      cand_.erase(it + 1, cand_.end());
      return;
    }
  }
  cand_.erase(hi, cand_.end());  // rounding: the undecided range is all kept
}

// Keeps tokens with p >= min_p * p_max, i.e. logit >= max_logit + log(min_p).
void Sampler::truncateMinP() {
  float max_logit = -std::numeric_limits<float>::infinity();
  for (const Candidate& c : cand_) max_logit = std::max(max_logit, c.logit);
  const float threshold = max_logit + std::log(params_.min_p);
  size_t kept = 0;
  for (const Candidate& c : cand_) {
    if (c.logit >= threshold) cand_[kept++] = c;
  }
  cand_.resize(kept);
}

// Softmax of logit / temperature over the candidates, then one uniform draw.
TokenId Sampler::draw() {
  const float inv_t = 1.0f / params_.temperature;
  float max_logit = -std::numeric_limits<float>::infinity();
  TokenId best = cand_.front().id;
  for (const Candidate& c : cand_) {
    if (better(c.logit, c.id, max_logit, best)) {
      max_logit = c.logit;
      best = c.id;
    }
  }
  if (!std::isfinite(max_logit)) return best;  // every candidate is -inf
  double sum = 0;
  for (Candidate& c : cand_) {
    c.p = expNonPositive((c.logit - max_logit) * inv_t);
    sum += c.p;
  }
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;  // [0, 1)
  const double target = u * sum;
  double cum = 0;
  for (const Candidate& c : cand_) {
    cum += c.p;
    if (target < cum) return c.id;
  }
  return best;  // rounding at the very end of the range
}

void Sampler::computeLogprobs(std::span<const float> logits, TokenId chosen) {
  const float max_logit = maxOf(logits.data(), logits.size());
  const double sum = sumExp(logits.data(), logits.size(), max_logit);
  const auto lse = static_cast<float>(max_logit + std::log(sum));
  chosen_logprob_ = logits[chosen] - lse;

  top_.clear();
  const size_t n = static_cast<size_t>(params_.top_logprobs);
  if (n == 0) return;
  // A min-heap on "better" of the n best so far; its top is the worst kept.
  const auto worse = [](const TokenLogprob& a, const TokenLogprob& b) {
    return better(a.logprob, a.id, b.logprob, b.id);
  };
  for (TokenId i = 0; i < n_vocab_; ++i) {
    const TokenLogprob t{i, logits[i]};
    if (top_.size() < n) {
      top_.push_back(t);
      std::push_heap(top_.begin(), top_.end(), worse);
    } else if (better(t.logprob, t.id, top_.front().logprob, top_.front().id)) {
      std::pop_heap(top_.begin(), top_.end(), worse);
      top_.back() = t;
      std::push_heap(top_.begin(), top_.end(), worse);
    }
  }
  std::sort_heap(top_.begin(), top_.end(), worse);
  for (TokenLogprob& t : top_) t.logprob -= lse;
}

}  // namespace tpnode::model
