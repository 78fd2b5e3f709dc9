// banditd: hosts named bandit instances over gRPC.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/synchronization/mutex.h"
#include "server/env/log.h"
#include "server/server.h"
#include "server/server_flags.h"

namespace {

// Every flag's default is the option's (server/server_options.h, the one place defaults live).
const bandit::server::ServerOptions& D() { return bandit::server::DefaultServerOptions(); }

}  // namespace

#define BANDIT_DEFINE_FLAG(type, name, option, help) ABSL_FLAG(type, name, D().option, help);
#define BANDIT_DEFINE_PARSED_FLAG(name, default_text, option, parse, help) \
  ABSL_FLAG(std::string, name, default_text, help);
BANDIT_SERVER_FLAGS(BANDIT_DEFINE_FLAG)
BANDIT_PARSED_SERVER_FLAGS(BANDIT_DEFINE_PARSED_FLAG)
#undef BANDIT_DEFINE_FLAG
#undef BANDIT_DEFINE_PARSED_FLAG
// Not an option of the server: main writes the file once the server has started.
ABSL_FLAG(std::string, port_file, "",
          "If set, write the bound gRPC and metrics ports to this file (\"GRPC METRICS\\n\"; "
          "\"GRPC METRICS HTTP\\n\" with --http_listen)");

namespace {

// The options the flags give, or the first parsed flag's refusal (in the list's order).
absl::StatusOr<bandit::server::ServerOptions> OptionsFromFlags() {
  bandit::server::ServerOptions options;
#define BANDIT_COPY_FLAG(type, name, option, help) options.option = absl::GetFlag(FLAGS_##name);
#define BANDIT_PARSE_FLAG(name, default_text, option, parse, help) \
  {                                                                \
    auto parsed = parse(absl::GetFlag(FLAGS_##name));              \
    if (!parsed.ok()) return parsed.status();                      \
    options.option = *parsed;                                      \
  }
  BANDIT_SERVER_FLAGS(BANDIT_COPY_FLAG)
  BANDIT_PARSED_SERVER_FLAGS(BANDIT_PARSE_FLAG)
#undef BANDIT_COPY_FLAG
#undef BANDIT_PARSE_FLAG
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("banditd: the Bandit Decision Service");
  absl::ParseCommandLine(argc, argv);
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex::Lock (ours and gRPC's)
  // maintains the deadlock-detection graph: ~3% of the CPU under load. It is a debugging aid;
  // release builds of Abseil have it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  // Block the shutdown signals in every thread (threads inherit the mask), then wait for them
  // synchronously on the main thread: no work inside a signal handler.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto options = OptionsFromFlags();
  if (!options.ok()) {
    BANDIT_LOG_ERROR(options.status().message());
    return 2;
  }
  // Flags that do not fit together exit 2, as flags that do not parse; Start sanitizes again
  // (the same function), for in-process callers.
  auto sane = bandit::server::SanitizeOptions(*std::move(options));
  if (!sane.ok()) {
    BANDIT_LOG_ERROR(sane.status().message());
    return 2;
  }
  auto server = bandit::server::BanditServer::Start(*sane);
  if (!server.ok()) {
    BANDIT_LOG_ERROR("banditd failed to start: ", server.status().ToString());
    return 1;
  }
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      // The HTTP port only when it is on: readers of the two-number form keep working.
      if ((*server)->http_port() != 0)
        std::fprintf(f, "%d %d %d\n", (*server)->port(), (*server)->metrics_port(),
                     (*server)->http_port());
      else
        std::fprintf(f, "%d %d\n", (*server)->port(), (*server)->metrics_port());
      std::fclose(f);
      std::rename(tmp.c_str(), port_file.c_str());
    }
  }
  int sig = 0;
  sigwait(&signals, &sig);
  BANDIT_LOG_INFO("received signal ", sig);
  (*server)->Shutdown();
  return 0;
}
