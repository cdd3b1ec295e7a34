// An emulated NCCL: the subset collectives/cuda uses (ncclCommInitAll for the local transport;
// the unique id, non-blocking ncclCommInitRankConfig, ncclCommGetAsyncError and ncclCommAbort
// for NCCL across nodes; ncclAllReduce of f32 sums), over the emulated CUDA runtime
// (cuda_runtime.h here), so that the NCCL paths' host-side logic — the inter-node check, its
// decision, the fallback and the forced refusal — runs in CI (device_comm_emulated_nccl_test).
// Like real NCCL it refuses two ranks of one communicator on the same device ("Duplicate GPU
// detected"), on every rank, once all ranks have joined. An all-reduce sums in rank order.
// It says nothing about real NCCL: device_comm_test on a GPU does.
#pragma once
#include <cstddef>

#include "cuda_runtime.h"

enum ncclResult_t {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};
enum ncclDataType_t { ncclFloat = 7 };
enum ncclRedOp_t { ncclSum = 0 };
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
struct ncclComm;
typedef ncclComm* ncclComm_t;
typedef struct {
  int blocking;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER \
  { 1 }

const char* ncclGetErrorString(ncclResult_t);
const char* ncclGetLastError(ncclComm_t);
ncclResult_t ncclGetUniqueId(ncclUniqueId*);
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist);
ncclResult_t ncclCommInitRankConfig(ncclComm_t*, int nranks, ncclUniqueId, int rank, ncclConfig_t*);
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t*);
ncclResult_t ncclCommDestroy(ncclComm_t);
ncclResult_t ncclCommAbort(ncclComm_t);
ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t, ncclRedOp_t,
                           ncclComm_t, cudaStream_t);
