#include "node/settings_binding.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/check.h"
#include "common/error.h"
#include "model/kv_cache.h"
#include "node/field_binding.h"

namespace tpnode::node {
namespace {

static_assert(std::is_same_v<size_t, uint64_t>, "api_max_body binds as a uint64_t member");

using Member =
    std::variant<std::string Options::*, int Options::*, double Options::*, bool Options::*,
                 uint64_t Options::*, CudaGraphs Options::*, Backend Options::*,
                 LocalTransport Options::*, InterTransport Options::*, WireFormatFlag Options::*,
                 HeadFlag Options::*, SplitFlag Options::*, MoePlacementFlag Options::*,
                 LogLevel Options::*, std::vector<int> Options::*,
                 std::vector<std::string> Options::*>;

struct Binding {
  std::string_view flag;
  Member member;
};

// Every kCluster and kNode flag of common/settings_table.cc, in its order.
const Binding kBindings[] = {
    {"config", &Options::config_file},
    {"node-id", &Options::node_id},
    {"peers", &Options::peers},
    {"mesh-listen", &Options::mesh_listen},
    {"tp", &Options::tp},
    {"tp-layout", &Options::tp_layout},
    {"devices", &Options::devices},
    {"backend", &Options::backend},
    {"local-transport", &Options::local_transport},
    {"inter-transport", &Options::inter_transport},
    {"cuda-graphs", &Options::cuda_graphs},
    {"connect-timeout", &Options::connect_timeout_s},
    {"liveness-timeout", &Options::liveness_timeout_s},
    {"step-timeout", &Options::step_timeout_s},
    {"rejoin-timeout", &Options::rejoin_timeout_s},
    {"sockets-per-peer", &Options::sockets_per_peer},
    {"mesh-spin-us", &Options::mesh_spin_us},
    {"wire-format", &Options::wire_format},
    {"head", &Options::head},
    {"pp", &Options::pp},
    {"split", &Options::split},
    {"pp-layers", &Options::pp_layers},
    {"host-memory", &Options::host_memory_gib},
    {"split-rank-read", &Options::split_rank_read_gbps},
    {"split-rank-macs", &Options::split_rank_gmacs},
    {"moe-placement", &Options::moe_placement},
    {"mesh-hold", &Options::mesh_hold_s},
    {"cluster-secret-file", &Options::cluster_secret_file},
    {"insecure", &Options::insecure},
    {"tls-cert", &Options::tls_cert},
    {"tls-key", &Options::tls_key},
    {"tls-ca", &Options::tls_ca},
    {"model", &Options::model},
    {"alias", &Options::alias},
    {"prompt", &Options::prompt},
    {"prompt-ids", &Options::prompt_ids},
    {"n-predict", &Options::n_predict},
    {"ignore-eos", &Options::ignore_eos},
    {"temp", &Options::temperature},
    {"top-k", &Options::top_k},
    {"top-p", &Options::top_p},
    {"min-p", &Options::min_p},
    {"repeat-penalty", &Options::repeat_penalty},
    {"seed", &Options::seed},
    {"threads", &Options::threads},
    {"ctx-size", &Options::ctx_size},
    {"kv-block-size", &Options::kv_block_size},
    {"kv-blocks", &Options::kv_blocks},
    {"json", &Options::json},
    {"dump-logits", &Options::dump_logits},
    {"host", &Options::host},
    {"port", &Options::port},
    {"parallel", &Options::parallel},
    {"prefix-cache", &Options::prefix_cache},
    {"api-key", &Options::api_keys},
    {"api-key-file", &Options::api_key_file},
    {"api-tls-cert", &Options::api_tls_cert},
    {"api-tls-key", &Options::api_tls_key},
    {"api-max-body", &Options::api_max_body},
    {"max-connections", &Options::max_connections},
    {"max-tap-requests", &Options::max_tap_requests},
    {"max-tap-bytes", &Options::max_tap_bytes},
    {"kv-cache-redis-url", &Options::kv_cache_redis_url},
    {"kv-cache-redis-ttl", &Options::kv_cache_redis_ttl_s},
    {"redis-timeout", &Options::redis_timeout_s},
    {"responses-store-redis-url", &Options::responses_store_redis_url},
    {"responses-store-ttl", &Options::responses_store_ttl_s},
    {"responses-store-max-bytes", &Options::responses_store_max_bytes},
    {"log-level", &Options::log_level},
};

}  // namespace

CudaGraphs parseCudaGraphs(std::string_view text) {
  if (text == "on" || text == "1") return CudaGraphs::kOn;
  if (text == "off" || text == "0") return CudaGraphs::kOff;
  fail(ErrorCode::kInvalidArgument, "--cuda-graphs '{}' is not on or off", text);
}

void throwInvalidChoice(std::string_view flag, std::string_view text, const std::string& choices) {
  fail(ErrorCode::kInvalidArgument, "{} '{}' is not {}", flag, text, choices);
}

int Options::kvBlocks() const {
  if (kv_blocks > 0) return kv_blocks;
  return std::max(1, parallel) *
         static_cast<int>(model::kvBlocksFor(std::max(1, ctx_size), std::max(1, kv_block_size)));
}

std::string_view cudaGraphsName(CudaGraphs value) {
  return value == CudaGraphs::kOff ? "off" : "on";
}

void setOption(Options& o, std::string_view flag, std::string_view text, settings::Source source,
               std::string_view where) {
  const settings::Setting* s = settings::findFlag(flag);
  TP_CHECK(s != nullptr, "--{} is not in common/settings_table.cc", flag);
  const std::string checked = settings::parseSettingText(*s, text, source, where);
  o.set_flags.insert(std::string(flag));
  std::visit(
      [&](auto member) {
        using T = std::remove_cvref_t<decltype(o.*member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          o.*member = checked;
        } else if constexpr (std::is_same_v<T, bool>) {
          o.*member = checked == "true";
        } else if constexpr (std::is_same_v<T, CudaGraphs>) {
          o.*member = parseCudaGraphs(checked);
        } else if constexpr (std::is_enum_v<T>) {
          o.*member = parseEnum<T>("--" + std::string(flag), checked);
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
          o.*member = parseIntList(std::string(where), checked);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          (o.*member).push_back(checked);
        } else {
          o.*member = checkedValue<T>(checked, where);
        }
      },
      bindingOf(kBindings, flag).member);
}

std::string optionText(const Options& o, std::string_view flag) {
  return std::visit(
      [&](auto member) -> std::string {
        using T = std::remove_cvref_t<decltype(o.*member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return o.*member;
        } else if constexpr (std::is_same_v<T, bool>) {
          return o.*member ? "true" : "false";
        } else if constexpr (std::is_same_v<T, CudaGraphs>) {
          return std::string(cudaGraphsName(o.*member));
        } else if constexpr (std::is_enum_v<T>) {
          return std::string(enumName(o.*member));
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
          return fmt::format("{}", fmt::join(o.*member, ","));
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          return fmt::format("{}", fmt::join(o.*member, ","));
        } else {
          return fmt::format("{}", o.*member);
        }
      },
      bindingOf(kBindings, flag).member);
}

bool isBound(std::string_view flag) {
  return bindingCount(flag) > 0;
}

int bindingCount(std::string_view flag) {
  int n = 0;
  for (const Binding& b : kBindings) n += b.flag == flag ? 1 : 0;
  return n;
}

}  // namespace tpnode::node
