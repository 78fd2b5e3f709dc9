// Minimal structured-ish logging to stderr (this Abseil release predates absl/log).
#pragma once

#include <cstdio>
#include <ctime>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace bandit::server {

template <typename... Args>
void Log(const char* level, const Args&... args) {
  const std::string line =
      absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()), " ",
                   level, " ", args..., "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
}

#define BANDIT_LOG_INFO(...) ::bandit::server::Log("INFO", __VA_ARGS__)
#define BANDIT_LOG_WARN(...) ::bandit::server::Log("WARN", __VA_ARGS__)
#define BANDIT_LOG_ERROR(...) ::bandit::server::Log("ERROR", __VA_ARGS__)

}  // namespace bandit::server
