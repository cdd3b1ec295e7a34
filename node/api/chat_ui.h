// The one-page chat UI served at / (node/api/ui/chat.html, compiled in by CMake).
#pragma once

#include <string_view>

namespace tpnode::node::api {

std::string_view chatUiHtml();

}  // namespace tpnode::node::api
