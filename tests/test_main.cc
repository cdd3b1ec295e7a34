// gtest main for every tpnode test: makes TPNODE_BIN (the tpnode executable),
// TPNODE_SOURCE_DIR (the repository) and TPNODE_SHARED_DIR (../shared, the reference material)
// available as environment variables unless the caller already set them.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  setenv("TPNODE_BIN", TPNODE_TEST_BIN, /*overwrite=*/0);
  setenv("TPNODE_SOURCE_DIR", TPNODE_TEST_SOURCE_DIR, 0);
  const std::string shared = std::string(TPNODE_TEST_SOURCE_DIR) + "/../shared";
  if (std::filesystem::exists(shared + "/reference"))
    setenv("TPNODE_SHARED_DIR", shared.c_str(), 0);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
