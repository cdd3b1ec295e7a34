// api-fake-server: the HTTP API in front of the FakeEngine test double, for the Python client
// tests and the browser test (built with the tests only; never a way to serve a model).
//   api-fake-server [--host H] [--port P] [--api-key-file F] [--token-delay-ms N] [--ctx-size N]
//                   [--tls-cert C --tls-key K]
// Prints "listening on port N" on stdout once it accepts connections; stops on SIGINT/SIGTERM.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/log.h"
#include "node/api/api_server.h"
#include "tests/node/api/fake_engine.h"

using namespace tpnode::node::api;

int main(int argc, char** argv) {
  ApiOptions api;
  api.port = 0;
  testing::FakeEngineOptions fake;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "api-fake-server: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--host") {
      api.host = next();
    } else if (arg == "--port") {
      api.port = static_cast<uint16_t>(std::stoi(next()));
    } else if (arg == "--api-key-file") {
      api.api_keys = loadApiKeys(next());
    } else if (arg == "--token-delay-ms") {
      fake.token_delay = std::chrono::milliseconds(std::stoi(next()));
    } else if (arg == "--ctx-size") {
      fake.context_length = std::stoi(next());
    } else if (arg == "--tls-cert") {
      api.tls_cert_file = next();
    } else if (arg == "--tls-key") {
      api.tls_key_file = next();
    } else {
      std::fprintf(stderr, "api-fake-server: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  tpnode::initLogging("info", "fake");
  // Block the stop signals in every thread; main waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  testing::FakeEngine engine(fake);
  ApiServer server(engine, api);
  try {
    server.start();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "api-fake-server: %s\n", e.what());
    return 1;
  }
  std::printf("listening on port %u\n", static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  server.stop();
  return 0;
}
