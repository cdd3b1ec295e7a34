// gtest main for every tpnode test:
// - makes TPNODE_BIN (the tpnode executable) and TPNODE_SOURCE_DIR (the repository) available as
//   environment variables unless the caller already set them;
// - gives the process a scratch directory of its own (mkdtemp under the system temp directory)
//   and points TEST_TMPDIR (::testing::TempDir()) and TMPDIR (std::filesystem::
//   temp_directory_path(), mkdtemp callers, the tpnode processes a test starts) at it, so no test
//   writes a fixed name in /tmp and tests of one executable that ctest runs at once (one process
//   per test) never share a file. Removed when every test passed; kept, and its path printed,
//   when one failed (the logs and models are there to look at).
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace {

// The process's scratch directory, or "" when none could be made (the tests then use the
// caller's temp directory, as before).
std::string makeScratchDir() {
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) return {};
  std::string pattern = (base / "tpnode-test-XXXXXX").string();
  return ::mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
}

}  // namespace

int main(int argc, char** argv) {
  setenv("TPNODE_BIN", TPNODE_TEST_BIN, /*overwrite=*/0);
  setenv("TPNODE_SOURCE_DIR", TPNODE_TEST_SOURCE_DIR, 0);
  const std::string scratch = makeScratchDir();
  if (!scratch.empty()) {
    setenv("TEST_TMPDIR", scratch.c_str(), 1);
    setenv("TMPDIR", scratch.c_str(), 1);
  }
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (!scratch.empty()) {
    if (rc == 0) {
      std::error_code ec;
      std::filesystem::remove_all(scratch, ec);
    } else {
      std::fprintf(stderr, "[tpnode test] scratch directory kept: %s\n", scratch.c_str());
    }
  }
  return rc;
}
