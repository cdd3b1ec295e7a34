#include "tools/tptopo/report_table.h"

#include <fmt/format.h>

namespace tpnode::tptopo {
namespace {

std::string sizeText(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

void hosts(const Report& r, std::string& out) {
  out += "Hosts\n";
  for (const HostReport& h : r.hosts) {
    const CpuInfo& c = h.cpu;
    out += fmt::format(
        "  node {} ({}): {}; {} core(s), {} allowed, {} NUMA node(s); kernels {}; memory copy "
        "{:.1f} GB/s, read {:.1f} GB/s\n",
        h.node, h.hostname, c.model, c.cores, c.allowed_cores, c.numa_nodes, c.simd,
        c.mem_copy_gbps, c.mem_read_gbps);
    const CudaInfo& g = h.cuda;
    if (!g.available) {
      out += fmt::format("    CUDA: no CUDA device: {}\n", g.reason);
      continue;
    }
    out += fmt::format("    CUDA driver {}, runtime {}, NCCL {}\n", g.driver_version,
                       g.runtime_version, g.nccl_version);
    for (const GpuDevice& d : g.devices) {
      out += fmt::format("    gpu {}: {}, {:.1f} GiB, compute {}, PCI {}\n", d.index, d.name,
                         static_cast<double>(d.memory_bytes) / (1 << 30), d.compute_capability,
                         d.pci_bus_id);
    }
    for (const P2pPair& p : g.p2p) {
      out += fmt::format("    p2p {}->{}: access {}, round trip {}, {:.1f} GB/s, {:.1f} us{}\n",
                         p.src, p.dst, p.access ? "yes" : "no", p.roundtrip_ok ? "ok" : "WRONG",
                         p.bandwidth_gbps, p.latency_us, p.demoted ? " (demoted)" : "");
    }
    for (const StagingBandwidth& s : g.staging) {
      out += fmt::format("    staging gpu {}: host->device {:.1f} GB/s, device->host {:.1f} GB/s\n",
                         s.device, s.h2d_gbps, s.d2h_gbps);
    }
    if (g.nccl.ran) {
      out += g.nccl.ok ? fmt::format("    nccl: {} device(s), {}: {:.0f} us, busbw {:.1f} GB/s\n",
                                     g.nccl.devices, sizeText(g.nccl.bytes), g.nccl.time_us,
                                     g.nccl.busbw_gbps)
                       : fmt::format("    nccl: FAILED: {}\n", g.nccl.error);
    }
  }
}

const LinkResult* findLink(const Report& r, int i, int j) {
  const int a = std::min(i, j), b = std::max(i, j);
  for (const LinkResult& l : r.links) {
    if (l.a == a && l.b == b) return &l;
  }
  return nullptr;
}

// One N x N matrix; `cell` formats the link (i, j) seen from row i.
template <typename Cell>
void matrix(const Report& r, const std::string& title, Cell&& cell, std::string& out) {
  out += title + "\n        ";
  for (int j = 0; j < r.nodes; ++j) out += fmt::format("{:>10}", fmt::format("node {}", j));
  out += "\n";
  for (int i = 0; i < r.nodes; ++i) {
    out += fmt::format("  node {}", i);
    for (int j = 0; j < r.nodes; ++j) {
      const LinkResult* l = i == j ? nullptr : findLink(r, i, j);
      std::string text = i == j ? "-" : l == nullptr ? "?" : cell(*l, i);
      out += fmt::format("{:>10}", text);
    }
    out += "\n";
  }
}

void links(const Report& r, std::string& out) {
  if (r.nodes < 2) return;
  // A failed link shows "failed"; a degraded one its figures with a '*'.
  auto cell = [](const LinkResult& l, std::string figures) {
    if (l.verdict == Verdict::kFailed) return std::string("failed");
    return l.verdict == Verdict::kDegraded ? figures + "*" : figures;
  };
  matrix(
      r, "Link round trips, 64-byte messages, p50 / p99 (microseconds; * degraded)",
      [&](const LinkResult& l, int) {
        return cell(l, fmt::format("{:.0f}/{:.0f}", l.rtt_us_p50, l.rtt_us_p99));
      },
      out);
  matrix(
      r, "Link bandwidth, row -> column (GB/s; * degraded)",
      [&](const LinkResult& l, int from) {
        return cell(l, fmt::format("{:.2f}", from == l.a ? l.gbps_ab : l.gbps_ba));
      },
      out);
}

void allReduce(const Report& r, std::string& out) {
  const AllReduceResult& ar = r.allreduce;
  if (!ar.ran) return;
  out += fmt::format("Hierarchical all-reduce, {} global rank(s): {}\n", ar.ranks,
                     verdictName(ar.verdict));
  if (!ar.error.empty()) out += "  error: " + ar.error + "\n";
  for (const AllReduceCase& c : ar.cases) {
    out += fmt::format("  {:>8}  {:>6}/{:<6}  {}\n", sizeText(c.bytes), c.hier, c.inter, c.detail);
  }
  for (const AllReduceBench& b : ar.bench) {
    out += fmt::format(
        "  {:>8}  {:>6}/{:<6}  p50 {:.1f} us over {} runs, algbw {:.3f} GB/s, busbw {:.3f} GB/s\n",
        sizeText(b.bytes), b.hier, b.inter, b.us_p50, b.iterations, b.algbw_gbps, b.busbw_gbps);
  }
}

void plan(const Report& r, std::string& out) {
  const PlanInfo& p = r.plan;
  if (!p.ran) return;
  out += fmt::format(
      "Plans of --split auto for {} (--parallel {}): links {:.0f} us round trip, "
      "{:.3f} GB/s (slowest); rank {:.2f} GB/s read, {:.1f} GMAC/s ({})\n",
      p.model, p.parallel, p.rtt_us, p.link_gbps, p.rank_read_gbps, p.rank_gmacs,
      p.rank_rates_source);
  if (!p.error.empty()) out += "  error: " + p.error + "\n";
  for (const PlanCandidate& c : p.candidates) {
    const char* mark = c.chosen ? "*" : " ";
    if (!c.refused.empty()) {
      out += fmt::format("  {} {:<34} refused: {}\n", mark, c.name, c.refused);
      continue;
    }
    out += fmt::format(
        "  {} {:<34} layers {:<16} batch 1 {:.1f} tok/s ({:.2f} ms), {} seq {:.1f} "
        "tok/s\n",
        mark, c.name, c.layers, c.batch1_tokens_per_s, c.batch1_step_ms, p.parallel,
        c.batch_tokens_per_s);
  }
  out += "  chosen: " + (p.chosen.empty() ? std::string("none") : p.chosen) + "\n";
}

}  // namespace

std::string formatReport(const Report& r) {
  std::string out =
      fmt::format("tptopo: {} ({} node(s)), report of node {}\n\n", r.mode, r.nodes, r.node_id);
  hosts(r, out);
  out += "\n";
  links(r, out);
  if (r.nodes > 1) out += "\n";
  allReduce(r, out);
  if (r.allreduce.ran) out += "\n";
  plan(r, out);
  if (r.plan.ran) out += "\n";
  out += "Layout: " + r.layout.description;
  if (!r.layout.runnable) out += " (tpnode would refuse it: " + r.layout.refusal + ")";
  out += "\n";
  out += "Transport tpnode would use: " + r.transport.description + "\n\n";
  out += "Checks\n";
  for (const Check& c : r.checks) {
    out += fmt::format("  {:<9} {:<22} {:<16} {}\n", verdictName(c.verdict), c.name, c.scope,
                       c.detail);
  }
  out += fmt::format("\nverdict: {} (exit code {})\n", verdictName(r.verdict), r.exit_code);
  return out;
}

}  // namespace tpnode::tptopo
