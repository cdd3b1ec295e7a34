// The one table of tpnode's settings: every command-line flag, every TPNODE_* environment
// variable and every YAML key, declared once with its type, default, choices or range and help
// (NCCL's param.h, as a table). Everything else is generated from it or checked against it:
// the CLI and --help (node/cli.cc, node/settings_cli.h), the YAML reader
// (node/cluster_config.cc), docs/cluster.md's flag table and YAML reference
// (tests/common/settings_test.cc). tools/tptopo's own flags are rows of it (Scope::kTptopo);
// a tool whose flags share tpnode's names with other defaults and no environment variable
// (tools/tpbench) declares them in a table of its own made of the same rows, generated and
// checked the same way (Scope::kTpbench).
//
// Contract
// - settingsTable() is constant data with static storage; every function here is safe from any
//   thread.
// - envValue() is the product's only reader of the environment (node, model, collectives, mesh,
//   tools): lower layers read their environment-only knobs (TPNODE_COLL_*, TPNODE_CPU_ISA, ...)
//   through it; tests read theirs through tests/support/test_env.h. Asking for a variable the
//   table does not declare is a bug (Error kInternal).
// - parseSettingText() checks text against a setting's type and choices (and, for YAML values,
//   its range) and throws Error(kInvalidArgument) naming the source (`--tp`, `TPNODE_TP`,
//   `cluster.threads`) and the accepted values. Callers convert the checked text themselves.
// - Precedence, applied by node/: command line > environment > YAML file > default.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tpnode::settings {

enum class Type {
  kString,
  kPath,        // a file; in the YAML file relative to the file's folder, "~/" = $HOME
  kInt,         // a signed integer
  kUInt,        // a non-negative integer (64 bits)
  kDouble,      // a number
  kBool,        // a flag without value on the command line; true/false/1/0/on/off elsewhere
  kChoice,      // one of `choices`
  kStringList,  // repeatable on the command line
};

// Who reads a setting.
enum class Scope {
  kCluster,  // tpnode and the tools that join its mesh (tools/tptopo): node/cli_flags.h
  kNode,     // tpnode only
  kTptopo,   // tools/tptopo only (docs/tptopo.md)
  kEnv,      // an environment variable without a flag (read with envValue())
  kTpbench,  // tools/tpbench's own table (tools/tpbench/bench_flags.h; docs/tpbench.md)
};

struct Setting {
  std::string_view flag;        // long name without dashes; empty for kEnv
  std::string_view short_name;  // "-m", or empty
  std::string_view env;    // the environment variable (TPNODE_<FLAG> unless an exception); empty:
                           // none (only in a tool's own table)
  std::string_view yaml;   // "cluster.step_timeout_s"; empty: not a YAML key
  std::string_view group;  // the --help section
  Scope scope = Scope::kNode;
  Type type = Type::kString;
  std::string_view default_text;  // as --help and the docs show it; empty: none
  std::string_view help;
  std::span<const std::string_view> choices = {};  // kChoice
  // YAML values outside [min, max] are refused (the command line keeps its consumers' checks,
  // e.g. --port 0 picks a free port). Only for kInt, kUInt and kDouble; min_exclusive: > min.
  double min = -1e300;
  double max = 1e300;
  bool min_exclusive = false;
};

// Every setting, in --help order.
std::span<const Setting> settingsTable();

// The setting with long flag name `flag` ("step-timeout"), or nullptr.
const Setting* findFlag(std::string_view flag);
// The setting read from environment variable `env`, or nullptr.
const Setting* findEnv(std::string_view env);
// The setting at YAML path `path` ("api.max_connections"), or nullptr.
const Setting* findYaml(std::string_view path);

// TPNODE_<FLAG>: upper case, '-' -> '_'.
std::string defaultEnvName(std::string_view flag);

// The value of declared environment variable `env`; nullopt when unset or empty. The product's
// only read of the environment. Error(kInternal) when `env` is not in the table.
std::optional<std::string> envValue(std::string_view env);

// Where a value came from, for messages and for the range check.
enum class Source { kCommandLine, kEnvironment, kYaml };

// Checks `text` against `setting` and returns it normalized (booleans as "true"/"false").
// `where` names the value in messages ("--tp", "TPNODE_TP", "file.yaml line 3: cluster.tp").
std::string parseSettingText(const Setting& setting, std::string_view text, Source source,
                             std::string_view where);

// The range check parseSettingText() applies to YAML values, for any checked text of a kInt,
// kUInt or kDouble `setting` (the tools check their rows' ranges on every source); a no-op for
// other types. Error(kInvalidArgument) naming `where`.
void checkRange(const Setting& setting, std::string_view checked_text, std::string_view where);

// "auto, cpu or cuda".
std::string choiceList(const Setting& setting);

// docs/cluster.md's generated blocks: the flag table (every setting with a flag or an
// environment variable) and the YAML reference (every setting with a YAML key).
std::string flagTableMarkdown();
std::string yamlReferenceMarkdown();
// A tool's flag table (docs/tptopo.md, docs/tpbench.md): flag, environment variable (the column
// only when a row has one), default, meaning with the accepted range or choices.
std::string toolFlagTableMarkdown(std::span<const Setting* const> rows);

}  // namespace tpnode::settings
