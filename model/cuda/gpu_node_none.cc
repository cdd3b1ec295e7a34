// GpuNode in a build without CUDA: no devices, and GPU ranks are refused with the fix.
#include "common/error.h"
#include "model/cuda/gpu_node.h"

namespace tpnode::model {

bool gpuBackendBuilt() {
  return false;
}

int visibleCudaDevices(std::string* why) {
  if (why != nullptr) {
    *why = "this tpnode was built without CUDA (cmake found no nvcc, or -DTPNODE_CUDA=OFF)";
  }
  return 0;
}

std::unique_ptr<GpuNode> GpuNode::create(std::vector<collectives::Communicator*>,
                                         const GpuNodeOptions&) {
  fail(ErrorCode::kUnsupported,
       "--backend cuda: this tpnode was built without CUDA; rebuild with the CUDA toolkit "
       "installed (cmake -DTPNODE_CUDA=ON) or use --backend cpu");
}

}  // namespace tpnode::model
