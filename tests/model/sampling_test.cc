// Sampler: greedy, truncations, penalties, determinism and logprobs. The statistical tests
// draw with fixed seeds and bound each frequency by 5 standard deviations of the exact
// binomial, so a wrong distribution fails while a right one passes with certainty.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "common/error.h"
#include "model/fast_exp.h"
#include "model/sampling.h"

namespace tpnode::model {
namespace {

std::vector<float> logitsOf(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(p > 0 ? static_cast<float>(std::log(p)) : -INFINITY);
  return l;
}

// Draws n tokens (each from the same logits) and checks frequencies against `expect`.
void expectDistribution(const SamplingParams& params, const std::vector<float>& logits,
                        const std::vector<double>& expect, int n = 20000) {
  Sampler s(params, static_cast<int32_t>(logits.size()));
  std::vector<int> count(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++count[static_cast<size_t>(s.sample(logits))];
  for (size_t t = 0; t < expect.size(); ++t) {
    const double mean = n * expect[t];
    const double sd = std::sqrt(n * expect[t] * (1 - expect[t]));
    EXPECT_NEAR(count[t], mean, 5 * sd + 1e-9) << "token " << t;
  }
}

SamplingParams plain(uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = seed;
  p.repeat_last_n = 0;
  return p;
}

TEST(SamplingTest, GreedyTakesArgmaxTiesToLowestId) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p, 5);
  EXPECT_EQ(s.sample(std::vector<float>{1, 3, 2, 3, -1}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{-INFINITY, -2, -2, -5, -3}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{7, 7, 7, 7, 7}), 0);
}

// The greedy pick as a plain loop: strict >, so ties keep the lowest id and NaN never wins
// (unless it is the first value, which nothing then beats).
size_t scalarArgmax(const std::vector<float>& x) {
  size_t best = 0;
  for (size_t i = 1; i < x.size(); ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

TEST(SamplingTest, GreedyIsThePlainLoopsArgmaxOnEveryRowShape) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f};
  int rows = 0;
  for (size_t n : {1, 2, 3, 4, 5, 15, 16, 17, 31, 33, 64, 100, 1000, 262144}) {
    for (int pattern = 0; pattern < 6; ++pattern) {
      std::vector<float> x(n);
      for (float& v : x) {
        // 0, 4, 5: distinct values; 1: few distinct values (ties); 2, 3: specials sprinkled in.
        v = pattern == 1 ? static_cast<float>(rng() % 3) : normal(rng);
        if ((pattern == 2 || pattern == 3) && rng() % 8 == 0) v = specials[rng() % 5];
      }
      if (pattern == 3) x[0] = NAN;
      if (pattern == 4) x.back() = 1e30f;                      // the max in the tail
      if (pattern == 5 && n > 1) x[n / 2] = x[n - 1] = 1e30f;  // tied maxima far apart
      SamplingParams p;
      p.temperature = 0;
      Sampler s(p, static_cast<int32_t>(n));
      const size_t want = scalarArgmax(x);
      EXPECT_EQ(static_cast<size_t>(firstArgmax(x.data(), static_cast<int32_t>(n))), want)
          << "n " << n << " pattern " << pattern;
      EXPECT_EQ(static_cast<size_t>(s.sample(x)), want) << "n " << n << " pattern " << pattern;
      if (!std::isnan(x[0])) {
        EXPECT_EQ(maxOf(x.data(), n), x[want]) << "n " << n << " pattern " << pattern;
      }
      ++rows;
    }
  }
  EXPECT_EQ(rows, 14 * 6);
}

TEST(SamplingTest, TemperatureOneFollowsSoftmax) {
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  expectDistribution(plain(), logitsOf(probs), probs);
}

TEST(SamplingTest, TemperatureSharpensAndFlattens) {
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  for (const float temp : {0.5f, 2.0f}) {
    std::vector<double> expect;
    double z = 0;
    for (double p : probs) z += std::pow(p, 1.0 / temp);
    for (double p : probs) expect.push_back(std::pow(p, 1.0 / temp) / z);
    SamplingParams params = plain(7);
    params.temperature = temp;
    expectDistribution(params, logitsOf(probs), expect);
  }
}

// The untruncated draw works in blocks of 1024 tokens: a vocabulary of several blocks, with the
// mass in different blocks, a block's first and last token, the vocabulary's last token and a
// long tail of small probabilities, and tokens at -inf that must never be drawn.
TEST(SamplingTest, WholeVocabularyDrawFollowsSoftmaxAcrossBlocks) {
  const size_t n = 5000;
  std::vector<double> probs(n, 0.0);
  probs[3] = 0.3;
  probs[1023] = 0.2;
  probs[1024] = 0.1;
  probs[2500] = 0.15;
  probs[n - 1] = 0.05;
  const double tail = 0.2 / 1900;  // tokens 100..999 and 3000..3999; 4000..4998 stay at 0
  for (size_t i = 100; i < 1000; ++i) probs[i] = tail;
  for (size_t i = 3000; i < 4000; ++i) probs[i] = tail;
  double z = 0;
  for (double p : probs) z += p;
  for (double& p : probs) p /= z;
  for (const float temp : {1.0f, 0.8f}) {
    std::vector<double> expect;
    double zt = 0;
    for (double p : probs) zt += p > 0 ? std::pow(p, 1.0 / temp) : 0;
    for (double p : probs) expect.push_back(p > 0 ? std::pow(p, 1.0 / temp) / zt : 0);
    SamplingParams params = plain(11);
    params.temperature = temp;
    Sampler s(params, static_cast<int32_t>(n));
    std::vector<int> count(n, 0);
    const int draws = 20000;
    const std::vector<float> logits = logitsOf(probs);
    for (int i = 0; i < draws; ++i) ++count[static_cast<size_t>(s.sample(logits))];
    for (size_t t : {size_t{3}, size_t{1023}, size_t{1024}, size_t{2500}, n - 1}) {
      const double mean = draws * expect[t];
      const double sd = std::sqrt(draws * expect[t] * (1 - expect[t]));
      EXPECT_NEAR(count[t], mean, 5 * sd) << "token " << t << " temperature " << temp;
    }
    for (size_t t = 0; t < n; ++t) {
      if (probs[t] == 0) {
        EXPECT_EQ(count[t], 0) << "token " << t << " has probability 0";
      }
    }
  }
}

TEST(SamplingTest, TopKTopPMinPTruncate) {
  const std::vector<double> probs = {0.05, 0.5, 0.15, 0.3};
  SamplingParams k = plain(2);
  k.top_k = 2;  // keeps 0.5 and 0.3
  expectDistribution(k, logitsOf(probs), {0, 0.625, 0, 0.375});
  SamplingParams p = plain(3);
  p.top_p = 0.7f;  // 0.5 + 0.3 reaches 0.7
  expectDistribution(p, logitsOf(probs), {0, 0.625, 0, 0.375});
  p.top_p = 0.85f;  // needs 0.15 too
  expectDistribution(p, logitsOf(probs), {0, 0.5 / 0.95, 0.15 / 0.95, 0.3 / 0.95});
  SamplingParams m = plain(4);
  m.min_p = 0.2f;  // p >= 0.1 stays
  expectDistribution(m, logitsOf(probs), {0, 0.5 / 0.95, 0.15 / 0.95, 0.3 / 0.95});
  m.min_p = 1.0f;  // only the best
  expectDistribution(m, logitsOf(probs), {0, 1, 0, 0}, 200);
}

TEST(SamplingTest, TopPOnLargeVocabularyKeepsTheExactPrefix) {
  // 5000 tokens: one of 0.6, then a flat tail; top_p 0.9 keeps the head and part of the tail.
  const int n = 5000;
  std::vector<double> probs(n, 0.4 / (n - 1));
  probs[4321] = 0.6;
  SamplingParams p = plain(5);
  p.top_p = 0.9f;
  Sampler s(p, n);
  const auto logits = logitsOf(probs);
  int head = 0;
  std::map<int, int> tail_ids;
  for (int i = 0; i < 1000; ++i) {
    const TokenId t = s.sample(logits);
    if (t == 4321) {
      ++head;
    } else {
      ++tail_ids[t];
    }
  }
  // Kept: the head and the first ~3750 tail tokens (ties by lowest id): p(head) = 0.6 / 0.9.
  const double expect = 1000 * 0.6 / 0.9;
  EXPECT_NEAR(head, expect, 5 * std::sqrt(1000 * (0.6 / 0.9) * (0.3 / 0.9)));
  ASSERT_FALSE(tail_ids.empty());
  EXPECT_LT(tail_ids.rbegin()->first, 3800);  // ids past the cut never appear
}

// The candidate sets of top-k, top-p and min-p equal a brute-force sort on random rows with
// many ties (logits rounded to 1/8).
TEST(SamplingTest, TruncationsMatchBruteForce) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = trial % 2 ? 3000 : 200;
    std::vector<float> logits(n);
    for (float& l : logits) l = std::round(normal(rng) * 8.0f) / 8.0f;
    std::vector<TokenId> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](TokenId a, TokenId b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    double z = 0;
    for (float l : logits) z += std::exp(static_cast<double>(l) - logits[order[0]]);
    const auto prefix = [&](size_t k) {
      std::vector<TokenId> ids(order.begin(), order.begin() + static_cast<ptrdiff_t>(k));
      std::sort(ids.begin(), ids.end());
      return ids;
    };
    const auto kept = [&](const SamplingParams& p) {
      Sampler s(p, n);
      s.sample(logits);
      std::vector<TokenId> ids;
      s.lastCandidates(ids);
      std::sort(ids.begin(), ids.end());
      return ids;
    };
    SamplingParams p = plain(static_cast<uint64_t>(trial));
    p.top_p = 0.05f + 0.9f * static_cast<float>(trial) / 40.0f;
    size_t k = 0;
    for (double cum = 0; k < order.size();) {
      cum += std::exp(static_cast<double>(logits[order[k]]) - logits[order[0]]) / z;
      ++k;
      if (cum >= p.top_p) break;
    }
    EXPECT_EQ(kept(p), prefix(k)) << "top_p " << p.top_p << " n " << n;
    p = plain(1);
    p.top_k = 1 + trial * 7;
    EXPECT_EQ(kept(p), prefix(std::min<size_t>(static_cast<size_t>(p.top_k), order.size())))
        << "top_k " << p.top_k;
    p = plain(1);
    p.min_p = 0.02f * static_cast<float>(trial % 10 + 1);
    size_t m = 0;
    while (m < order.size() &&
           logits[order[m]] >= logits[order[0]] + std::log(static_cast<double>(p.min_p))) {
      ++m;
    }
    EXPECT_EQ(kept(p).size(), m) << "min_p " << p.min_p;
  }
}

TEST(FastExpTest, AccurateAndLaneConsistent) {
  double worst = 0;
  for (float x = -86.9f; x <= 0.0f; x += 0.0137f) {
    const double e = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::fabs(expNonPositive(x) - e) / e);
  }
  EXPECT_LT(worst, 5e-7);
  EXPECT_EQ(expNonPositive(0.0f), 1.0f);
  EXPECT_EQ(expNonPositive(-INFINITY), 0.0f);
  EXPECT_EQ(expNonPositive(NAN), 0.0f);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (const size_t n : {1u, 3u, 4u, 7u, 1023u, 1024u, 1029u, 5000u}) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    const float max = *std::max_element(x.begin(), x.end());
    EXPECT_EQ(maxOf(x.data(), n), max) << n;
    double want = 0;
    for (float v : x) want += std::exp(static_cast<double>(v) - max);
    EXPECT_NEAR(sumExp(x.data(), n, max), want, want * 1e-6) << n;
  }
}

TEST(SamplingTest, SameSeedSameTokens) {
  const auto logits = logitsOf({0.25, 0.25, 0.25, 0.25});
  const auto run = [&](uint64_t seed) {
    Sampler s(plain(seed), 4);
    std::vector<TokenId> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(logits));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(SamplingTest, RepeatPenaltyLlamaCppSemantics) {
  SamplingParams p;
  p.temperature = 0;
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 2;
  Sampler s(p, 3);
  s.acceptPrompt(std::vector<TokenId>{0});
  // Token 0 seen: 3.0 / 2 = 1.5 < 2.5.
  EXPECT_EQ(s.sample(std::vector<float>{3.0f, 2.5f, 0.0f}), 1);
  // Window {0, 1}: negative logits are multiplied: -1 * 2 = -2 < -1.5.
  EXPECT_EQ(s.sample(std::vector<float>{-1.0f, -1.0f, -1.5f}), 2);
  // Window {1, 2}: token 0 has left it and is not penalised any more.
  EXPECT_EQ(s.sample(std::vector<float>{3.0f, 3.5f, 3.5f}), 0);
}

TEST(SamplingTest, PresenceAndFrequencyCountGeneratedTokensOnly) {
  SamplingParams p;
  p.temperature = 0;
  p.repeat_last_n = 0;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(p, 3);
  s.acceptPrompt(std::vector<TokenId>{1, 1, 1});  // the prompt does not count
  EXPECT_EQ(s.sample(std::vector<float>{0.0f, 1.0f, 0.9f}), 1);
  // Token 1 once: 1.0 - 0.25 - 0.5 = 0.25 < 0.9.
  EXPECT_EQ(s.sample(std::vector<float>{0.0f, 1.0f, 0.9f}), 2);
  // Token 2 once (0.9 - 0.75 = 0.15) vs token 1 once (1.1 - 0.75 = 0.35).
  EXPECT_EQ(s.sample(std::vector<float>{0.0f, 1.1f, 0.9f}), 1);
  // Token 1 twice: 2.0 - 2 * 0.25 - 0.5 = 1.0 beats 1.2 - 0.75 = 0.45.
  EXPECT_EQ(s.sample(std::vector<float>{0.0f, 2.0f, 1.2f}), 1);
  // Token 1 three times: 2.0 - 0.75 - 0.5 = 0.75 loses to 1.6 - 0.75 = 0.85 (the frequency
  // term grows with the count; presence alone would leave token 1 at 1.5).
  EXPECT_EQ(s.sample(std::vector<float>{0.0f, 2.0f, 1.6f}), 2);
}

TEST(SamplingTest, LogprobsOfTheModelDistribution) {
  SamplingParams p;
  p.temperature = 0;
  p.top_logprobs = 3;  // implies logprobs
  p.repeat_penalty = 1.5f;
  Sampler s(p, 5);
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  EXPECT_EQ(s.sample(logits), 1);
  double z = 0;
  for (float l : logits) z += std::exp(l);
  EXPECT_NEAR(s.chosenLogprob(), 3.0 - std::log(z), 1e-5);
  ASSERT_EQ(s.topLogprobs().size(), 3u);
  EXPECT_EQ(s.topLogprobs()[0].id, 1);
  EXPECT_EQ(s.topLogprobs()[1].id, 3);
  EXPECT_EQ(s.topLogprobs()[2].id, 2);
  EXPECT_NEAR(s.topLogprobs()[2].logprob, 2.0 - std::log(z), 1e-5);
  // Next step: token 1 is penalised for sampling, but logprobs stay the model's.
  EXPECT_EQ(s.sample(logits), 3);
  EXPECT_NEAR(s.topLogprobs()[0].logprob, 3.0 - std::log(z), 1e-5);
  EXPECT_EQ(s.topLogprobs()[0].id, 1);
  SamplingParams off;
  off.temperature = 0;
  Sampler quiet(off, 5);
  quiet.sample(logits);
  EXPECT_EQ(quiet.chosenLogprob(), 0.0f);
  EXPECT_TRUE(quiet.topLogprobs().empty());
  off.logprobs = true;
  Sampler chosen_only(off, 5);
  chosen_only.sample(logits);
  EXPECT_NEAR(chosen_only.chosenLogprob(), 3.0 - std::log(z), 1e-5);
  EXPECT_TRUE(chosen_only.topLogprobs().empty());
}

TEST(SamplingTest, RejectsBadParameters) {
  const auto refused = [](SamplingParams p) {
    try {
      Sampler s(p, 10);
      return false;
    } catch (const Error& e) {
      return e.code() == ErrorCode::kInvalidArgument;
    }
  };
  SamplingParams p;
  p.temperature = -1;
  EXPECT_TRUE(refused(p));
  p = {};
  p.top_p = 1.5f;
  EXPECT_TRUE(refused(p));
  p = {};
  p.top_k = -3;
  EXPECT_TRUE(refused(p));
  p = {};
  p.repeat_penalty = 0;
  EXPECT_TRUE(refused(p));
  p = {};
  p.top_logprobs = -1;
  EXPECT_TRUE(refused(p));
  p.top_logprobs = 11;  // more than n_vocab: clamped
  EXPECT_FALSE(refused(p));
  EXPECT_EQ(Sampler(p, 10).params().top_logprobs, 10);
  p = {};
  p.min_p = 2;
  EXPECT_THROW(checkSamplingParams(p), Error);
  EXPECT_FALSE(refused(SamplingParams{}));
  Sampler s(SamplingParams{}, 4);
  EXPECT_THROW(s.sample(std::vector<float>{1, 2, 3}), Error);
  EXPECT_THROW(s.accept(4), Error);
}

}  // namespace
}  // namespace tpnode::model
