// The generated blocks of the docs (tests only): the text between `<!-- begin NAME (generated
// ...) -->` and `<!-- end NAME -->` of a file under docs/, which a test compares with what the
// settings tables generate (and prints on a mismatch, to paste into the doc).
#pragma once

#include <string>

#include "tests/support/read_file.h"
#include "tests/support/test_env.h"

namespace tpnode::testing_support {

// The block `name` of `doc`, or "(missing block)".
inline std::string generatedBlock(const std::string& doc, const std::string& name) {
  const std::string begin = "<!-- begin " + name + " (generated";
  const std::string end = "<!-- end " + name + " -->";
  const size_t b = doc.find(begin);
  const size_t e = doc.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) return "(missing block)";
  const size_t start = doc.find('\n', b) + 1;
  return doc.substr(start, e - start);
}

// The text of `relative` (e.g. "docs/cluster.md") in the repository (TPNODE_SOURCE_DIR, set by
// tests/test_main.cc); "" when unreadable.
inline std::string sourceFile(const std::string& relative) {
  const auto src = testEnv("TPNODE_SOURCE_DIR");
  return src ? readFile(*src + "/" + relative) : std::string();
}

}  // namespace tpnode::testing_support
