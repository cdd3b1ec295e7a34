// gtest main for every tpnode test: makes TPNODE_BIN (the tpnode executable) and
// TPNODE_SOURCE_DIR (the repository) available as environment variables unless the caller
// already set them.
#include <cstdlib>

#include <gtest/gtest.h>

int main(int argc, char** argv) {
  setenv("TPNODE_BIN", TPNODE_TEST_BIN, /*overwrite=*/0);
  setenv("TPNODE_SOURCE_DIR", TPNODE_TEST_SOURCE_DIR, 0);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
