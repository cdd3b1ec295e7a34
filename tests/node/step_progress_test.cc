// The step progress messages (node/step_progress.h): round trips, and hostile bytes refused
// with the code the wire protocol documents.
#include "node/step_progress.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/byte_order.h"
#include "common/error.h"

namespace tpnode::node {
namespace {

ErrorCode codeOf(auto&& decode) {
  try {
    decode();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "decoded without an error";
  return ErrorCode::kInternal;
}

TEST(StepProgressTest, QueryAndReportRoundTrip) {
  const auto q = encodeProgressQuery({ProgressKind::kProbe, 7, 2});
  ProgressQuery back = decodeProgressQuery(q);
  EXPECT_EQ(back.kind, ProgressKind::kProbe);
  EXPECT_EQ(back.probe, 7u);
  EXPECT_EQ(back.node, 2u);
  EXPECT_EQ(loadLE32(reinterpret_cast<const uint8_t*>(q.data())), 0x51505054u);  // "TPPQ"

  const auto r = encodeProgressReport({7, 3, 1'000'000'000'000ULL, 999'999'999'999ULL});
  ProgressReport rb = decodeProgressReport(r);
  EXPECT_EQ(rb.probe, 7u);
  EXPECT_EQ(rb.node, 3u);
  EXPECT_EQ(rb.received, 1'000'000'000'000ULL);
  EXPECT_EQ(rb.begun, 999'999'999'999ULL);
}

TEST(StepProgressTest, HostileBytesAreRefused) {
  auto q = encodeProgressQuery({ProgressKind::kProbe, 1, 0});
  auto* qp = reinterpret_cast<uint8_t*>(q.data());
  for (size_t n = 0; n < q.size(); ++n) {  // truncated
    EXPECT_EQ(codeOf([&] { decodeProgressQuery(std::span(q.data(), n)); }), ErrorCode::kInvalidData)
        << n;
  }
  std::vector<std::byte> longer(q.begin(), q.end());
  longer.push_back(std::byte{0});
  EXPECT_EQ(codeOf([&] { decodeProgressQuery(longer); }), ErrorCode::kInvalidData);
  auto bad = q;
  storeLE32(reinterpret_cast<uint8_t*>(bad.data()), 0x43535054);  // a step command's magic
  EXPECT_EQ(codeOf([&] { decodeProgressQuery(bad); }), ErrorCode::kInvalidData);
  bad = q;
  storeLE16(reinterpret_cast<uint8_t*>(bad.data()) + 4, 2);  // another version
  EXPECT_EQ(codeOf([&] { decodeProgressQuery(bad); }), ErrorCode::kMismatch);
  for (uint16_t kind : {0, 2, 0xffff}) {
    storeLE16(qp + 6, kind);
    EXPECT_EQ(codeOf([&] { decodeProgressQuery(q); }), ErrorCode::kInvalidData) << kind;
  }

  auto r = encodeProgressReport({1, 1, 5, 5});
  auto* rp = reinterpret_cast<uint8_t*>(r.data());
  EXPECT_EQ(codeOf([&] { decodeProgressReport(std::span(r.data(), 31)); }),
            ErrorCode::kInvalidData);
  EXPECT_EQ(codeOf([&] { decodeProgressReport(q); }), ErrorCode::kInvalidData);  // a query
  storeLE16(rp + 6, 1);                                                          // reserved
  EXPECT_EQ(codeOf([&] { decodeProgressReport(r); }), ErrorCode::kInvalidData);
  storeLE16(rp + 6, 0);
  storeLE64(rp + 24, 6);  // begun 6 > received 5
  EXPECT_EQ(codeOf([&] { decodeProgressReport(r); }), ErrorCode::kInvalidData);
}

}  // namespace
}  // namespace tpnode::node
