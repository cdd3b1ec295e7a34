#include "tools/tptopo/report.h"

#include <algorithm>

#include <fmt/format.h>

namespace tpnode::tptopo {

std::string_view verdictName(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kSkipped:
      return "skipped";
    case Verdict::kDegraded:
      return "degraded";
    case Verdict::kFailed:
      break;
  }
  return "failed";
}

Verdict worst(Verdict a, Verdict b) {
  return static_cast<int>(a) >= static_cast<int>(b) ? a : b;
}

namespace {

Check linkCheck(const LinkResult& l) {
  Check c{"link", fmt::format("link {}-{}", l.a, l.b), l.verdict, ""};
  if (!l.error.empty()) {
    c.detail = l.error;
  } else if (l.measured) {
    c.detail = fmt::format(
        "rtt p50 {:.1f} us, p99 {:.1f} us ({} rounds); bandwidth {:.2f} GB/s {}->{}, {:.2f} GB/s "
        "{}->{}",
        l.rtt_us_p50, l.rtt_us_p99, l.rtt_rounds, l.gbps_ab, l.a, l.b, l.gbps_ba, l.b, l.a);
  } else {
    c.detail = "held up (measured by the lower node)";
  }
  return c;
}

}  // namespace

void finish(Report& r) {
  std::vector<Check> checks;
  for (const HostReport& h : r.hosts) checks.insert(checks.end(), h.checks.begin(), h.checks.end());
  for (const Check& c : r.checks) checks.push_back(c);  // the run's own (mesh, reports)
  for (const LinkResult& l : r.links) checks.push_back(linkCheck(l));
  const AllReduceResult& ar = r.allreduce;
  if (!ar.ran) {
    checks.push_back({"allreduce", "cluster", Verdict::kSkipped,
                      ar.error.empty() ? "one rank: nothing to reduce" : ar.error});
  } else {
    std::string detail = ar.error;
    if (detail.empty()) {
      int ok = static_cast<int>(std::count_if(ar.cases.begin(), ar.cases.end(),
                                              [](const AllReduceCase& c) { return c.ok; }));
      detail =
          fmt::format("{} of {} sizes correct on {} global rank(s)", ok, ar.cases.size(), ar.ranks);
    }
    checks.push_back({"allreduce", "cluster", ar.verdict, detail});
  }
  r.checks = std::move(checks);
  r.verdict = Verdict::kSkipped;
  for (const Check& c : r.checks) r.verdict = worst(r.verdict, c.verdict);
  switch (r.verdict) {
    case Verdict::kOk:
    case Verdict::kSkipped:
      r.exit_code = kExitOk;
      break;
    case Verdict::kDegraded:
      r.exit_code = kExitDegraded;
      break;
    case Verdict::kFailed:
      r.exit_code = kExitFailed;
      break;
  }
}

}  // namespace tpnode::tptopo
