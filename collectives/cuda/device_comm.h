// DeviceComm: the all-reduce of GPU ranks, on device memory. It is the CPU ranks' composition
// (docs/collectives.md, "One composition": a local op, an inter-node op, the result on every
// local rank) with the GPU transports as the local ops (collectives/cuda/device_local_op.h): NCCL,
// CUDA peer-to-peer copies + an add kernel, or host staging through pinned memory. Across nodes the
// inter-node op is either the host Communicator (the TCP mesh), staged through pinned host
// buffers, or — where every node has GPU ranks and NCCL passes its startup check — one NCCL
// communicator over all GPU ranks of all nodes that does the whole all-reduce (InterTransport,
// collectives/cuda/inter_transport.h).
//
// Contract
// - One DeviceComm per GPU rank, used only by that rank's thread. The rank's device is current
//   (cudaSetDevice) on that thread whenever it calls in.
// - allReduceSum(data, count, stream): data is `count` f32 in device memory of this rank's
//   device. The reduction is ordered on `stream` after the work already enqueued there. It
//   may return before the result is in `data` (NCCL, peer transports) or after (host
//   staging); either way work enqueued on `stream` afterwards sees the result.
// - Every rank of the group calls the same collectives in the same order with the same count.
// - Determinism: every rank ends with bit-identical values (each transport sums in a fixed
//   order: docs/gpu-collectives.md). Different transports may differ in the last bits.
// - capturable(): whether allReduceSum may be recorded into a CUDA graph on `stream` (NCCL on
//   one node: yes; the peer transport: no, its ranks meet at a host barrier — device-side
//   flags are not done, see docs/gpu-collectives.md; host staging: no, it synchronises; across
//   nodes over the mesh: no, the inter-node op goes through the host; across nodes over
//   NCCL: yes).
// - count <= the group's max_count, else Error(kInvalidArgument) before any work; count 0 is a
//   no-op.
// - Failure: a peer lost on the mesh throws Error(kPeerLost) as the host Communicator does;
//   a CUDA or NCCL failure throws Error naming the call.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/cuda/inter_transport.h"

namespace tpnode::collectives::cuda {

enum class Transport { kAuto, kNccl, kP2p, kHost };
std::string_view transportName(Transport t);  // "auto", "nccl", "p2p", "host"
// Parses "auto|nccl|p2p|host"; Error(kInvalidArgument) naming `what` and the value otherwise.
Transport parseTransport(std::string_view value, std::string_view what);

class DeviceComm {
 public:
  virtual ~DeviceComm() = default;
  virtual int rank() const = 0;  // global rank
  virtual int size() const = 0;  // global group size
  virtual void allReduceSum(float* data, size_t count, cudaStream_t stream) = 0;
  virtual bool capturable() const = 0;
  virtual Transport transport() const = 0;
};

// What the startup self-test found, for the log and /metrics.
struct TransportReport {
  Transport chosen = Transport::kHost;
  std::string reason;  // "measured fastest: nccl 9.1 us, p2p 14.2 us, host 41.0 us (16 KiB)"
  std::vector<std::string> demoted;  // "p2p 0<->1: pattern mismatch at element 17" etc.
  // Across nodes: the TCP mesh or one NCCL communicator over all GPU ranks (kMesh on one node).
  InterTransport inter = InterTransport::kMesh;
  std::string inter_reason;  // "measured nccl 20.1 us, mesh 95.0 us (16 KiB)", "one node", ...
};

// How the GPU ranks of different nodes reduce (ignored on one node).
struct InterOptions {
  // auto: NCCL across nodes when it passes its check on every rank and measures faster than
  // the mesh, else the mesh (logged with the reason); nccl: NCCL or Error(kUnsupported);
  // mesh: the TCP mesh.
  InterTransport requested = InterTransport::kAuto;
  // ncclCommInitRankConfig waits at most this long for the other ranks, then aborts.
  std::chrono::milliseconds init_timeout{60000};
};

// The local GPU ranks of one node: builds the DeviceComm of each local rank over the given
// host Communicators (one per local rank, from NodeGroup::communicator; used for the
// inter-node op and for host staging) and devices (devices[r] = CUDA device of local rank
// r; a device may repeat: two ranks on one GPU, then NCCL is not offered).
//
// create() is called once per node from one thread, before the rank threads start; it
// enables peer access for each pair that reports it, checks each transport with a round trip
// of a known pattern (a pair that fails or corrupts data is demoted to host staging and
// logged), verifies NCCL with a real all-reduce of known values, and — for kAuto — measures
// the transports that passed on `probe_bytes` and picks the fastest. A forced transport that
// is unavailable is Error(kUnsupported) naming it and why. On several nodes it then chooses the
// inter-node transport (`inter`): every rank of every node runs the same check steps over its
// host Communicator (the mesh is the control plane) and takes the same decision; `create`
// must therefore be called on every node with the same kind of group (GPU ranks everywhere).
class DeviceGroup {
 public:
  static std::unique_ptr<DeviceGroup> create(std::vector<Communicator*> host_comms,
                                             std::vector<int> devices, Transport requested,
                                             size_t max_count, size_t probe_bytes = 16 << 10,
                                             InterOptions inter = {});
  virtual ~DeviceGroup() = default;
  virtual std::unique_ptr<DeviceComm> communicator(int local_rank) = 0;
  virtual const TransportReport& report() const = 0;
};

}  // namespace tpnode::collectives::cuda
