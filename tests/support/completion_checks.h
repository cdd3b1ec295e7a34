// Checks on OpenAI completion answers (the parsed JSON bodies of /v1/completions) that the
// serving tests share.
//
// Contract
// - expectSameCompletion(a, b, tol): the two answers' first choices have the same text and
//   token_logprobs of the same length, each within `tol` of the other (gtest failures name the
//   token). Both answers must have been asked for with "logprobs".
#pragma once

#include <gtest/gtest.h>

#include <cstddef>

#include <nlohmann/json.hpp>

namespace tpnode::testing_support {

inline void expectSameCompletion(const nlohmann::json& a, const nlohmann::json& b, double tol) {
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);
  const auto& x = a["choices"][0]["logprobs"]["token_logprobs"];
  const auto& y = b["choices"][0]["logprobs"]["token_logprobs"];
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(x[i].get<double>(), y[i].get<double>(), tol) << "token " << i;
  }
}

}  // namespace tpnode::testing_support
