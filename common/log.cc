#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "common/error.h"

namespace tpnode {

void initLogging(std::string_view level, std::string_view tag) {
  auto lvl = spdlog::level::from_str(std::string(level));
  if (lvl == spdlog::level::off && level != "off") {
    fail(ErrorCode::kInvalidArgument,
         "--log-level '{}' is not a level; use trace, debug, info, warn, error or off", level);
  }
  auto logger = spdlog::stderr_color_mt("tpnode");
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  std::string pattern = "[%H:%M:%S.%e] [%^%L%$]";
  if (!tag.empty()) pattern += fmt::format(" [{}]", tag);
  pattern += " %v";
  spdlog::set_pattern(pattern);
  spdlog::flush_on(spdlog::level::info);
}

}  // namespace tpnode
