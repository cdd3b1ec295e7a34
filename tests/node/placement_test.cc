#include <gtest/gtest.h>

#include "common/error.h"
#include "model/cuda/gpu_node.h"
#include "node/placement.h"

namespace tpnode::node {
namespace {

std::string refusal(const Options& o) {
  try {
    resolvePlacement(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PlacementTest, RefusesBadCpuDevicesWithTheFix) {
  Options o;
  o.tp = 2;
  o.backend = Backend::kCpu;  // "tpu" is refused when parsed (settings_binding_test)
  o.devices = "0";
  EXPECT_NE(refusal(o).find("lists 1 device(s) but --tp is 2"), std::string::npos) << refusal(o);
  o.devices = "0,4096";
  EXPECT_NE(refusal(o).find("CPU 4096 does not exist"), std::string::npos) << refusal(o);
  o.devices = "0,0";
  EXPECT_EQ(refusal(o), "");
  EXPECT_EQ(resolvePlacement(o).cpu_of_rank, (std::vector<int>{0, 0}));
  o.devices.clear();
  o.tp = 100000;  // more ranks than any host has cores
  EXPECT_NE(refusal(o).find("--tp 100000 but this host has"), std::string::npos) << refusal(o);
  EXPECT_NE(refusal(o).find("--devices 0,"), std::string::npos) << refusal(o);
}

TEST(PlacementTest, GpuRanksNeedDevicesAndSayHowMany) {
  std::string why;
  const int visible = model::visibleCudaDevices(&why);
  Options o;
  o.tp = 2;
  o.backend = Backend::kCuda;
  if (visible == 0) {
    // No device here: --backend cuda is refused with the reason and the fix; auto is CPU.
    EXPECT_NE(refusal(o).find("--backend cuda"), std::string::npos) << refusal(o);
    EXPECT_NE(refusal(o).find("--backend cpu"), std::string::npos) << refusal(o);
    o.backend = Backend::kAuto;
    EXPECT_FALSE(resolvePlacement(o).gpu);
    return;
  }
  o.tp = visible + 1;
  const std::string r = refusal(o);
  EXPECT_NE(r.find("--tp " + std::to_string(visible + 1) + " needs"), std::string::npos) << r;
  EXPECT_NE(r.find(std::to_string(visible) + (visible == 1 ? " is visible" : " are visible")),
            std::string::npos)
      << r;
  o.devices = "0,0";
  o.tp = 2;
  Placement p = resolvePlacement(o);
  EXPECT_TRUE(p.gpu);
  EXPECT_EQ(p.gpu_of_rank, (std::vector<int>{0, 0}));
  o.devices = "0," + std::to_string(visible);
  EXPECT_NE(refusal(o).find("CUDA device " + std::to_string(visible) + " does not exist"),
            std::string::npos)
      << refusal(o);
}

}  // namespace
}  // namespace tpnode::node
