#include <gtest/gtest.h>

#include "common/error.h"
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

TEST(PlacementTest, RefusesGpuRanksAndBadDevicesWithTheFix) {
  Options o;
  o.tp = 2;
  o.backend = "cuda";
  EXPECT_NE(refusal(o).find("--backend cuda"), std::string::npos);
  EXPECT_NE(refusal(o).find("--backend cpu"), std::string::npos);
  o.backend = "tpu";
  EXPECT_NE(refusal(o).find("'tpu'"), std::string::npos);
  o.backend = "auto";
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

}  // namespace
}  // namespace tpnode::node
