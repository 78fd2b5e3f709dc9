#include "server/server_options.h"

#include <cmath>

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/dimension_limits.h"

namespace bandit::server {

ServiceLimits DefaultServerLimits() {
  ServiceLimits limits;
  // The dense policies' own cap (core/dimension_limits.h) is the default vector limit.
  limits.instance.max_feature_dim = kMaxDenseDimension;
  limits.instance.max_vector_size = kMaxDenseDimension;
  // 2^22 coordinates: feature_space.bits 22 for the diagonal-covariance policies.
  limits.instance.max_diagonal_feature_dim = int64_t{1} << 22;
  limits.instance.max_arms = 100'000;
  return limits;
}

const ServerOptions& DefaultServerOptions() {
  static const ServerOptions* const defaults = new ServerOptions();
  return *defaults;
}

std::string HostName() {
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  return name;
}

absl::StatusOr<ServerOptions> SanitizeOptions(ServerOptions o) {
  if (o.storage != "file" && o.storage != "postgres")
    return absl::InvalidArgumentError(
        absl::StrCat("--storage=", o.storage, " is not one of file, postgres"));
  if (o.storage == "postgres" && o.postgres_dsn.empty())
    return absl::InvalidArgumentError(
        "--storage=postgres needs --postgres_dsn (a libpq connection string)");
  ServiceLimits& limits = o.limits;
  const features::InputLimits& named = limits.instance.named;
  if (named.max_features < 1 || named.max_namespaces < 1 || named.max_depth < 1 ||
      named.max_string_bytes < 1 || named.max_json_bytes < 1 || named.max_terms < 1)
    return absl::InvalidArgumentError(
        "every --max_named_* and --max_json_* limit must be at least 1");
  if (limits.max_instances < 1 || limits.max_batch_items < 1 || limits.max_page_size < 1 ||
      limits.instance.max_feature_dim < 1 || limits.instance.max_diagonal_feature_dim < 1 ||
      limits.instance.max_candidates < 1 || limits.instance.max_arms < 1 ||
      limits.instance.max_arms_per_request < 1 || limits.instance.max_pending_capacity < 1 ||
      limits.instance.max_name_length < 1 || limits.instance.max_name_length > 128)
    return absl::InvalidArgumentError(
        "every --max_* limit must be at least 1 (and --max_name_length at most 128)");
  if (limits.instance.max_shadows < 0 || limits.instance.max_shadows > kMaxShadows)
    return absl::InvalidArgumentError(absl::StrCat("--max_shadows=", limits.instance.max_shadows,
                                                   " is out of range, expected 0..", kMaxShadows,
                                                   " (0 refuses every AddShadow)"));
  if (limits.max_memory_bytes < 0)
    return absl::InvalidArgumentError(absl::StrCat("--max_memory_bytes=", limits.max_memory_bytes,
                                                   " is negative, expected 0 (no limit) or more"));
  if (o.evaluation_threads < 1 || o.evaluation_threads > 64)
    return absl::InvalidArgumentError(absl::StrCat(
        "--evaluation_threads=", o.evaluation_threads, " is out of range, expected 1..64"));
  if (!(o.evaluation_cpu_seconds > 0) || !std::isfinite(o.evaluation_cpu_seconds))
    return absl::InvalidArgumentError(absl::StrCat("--evaluation_cpu_seconds=",
                                                   o.evaluation_cpu_seconds,
                                                   " is out of range, expected a positive number"));
  if (o.http_threads < 1 || o.http_threads > kMaxHttpThreads)
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_threads=", o.http_threads, " is out of range, expected 1..", kMaxHttpThreads));
  if (o.http_io_threads < 1 || o.http_io_threads > kMaxHttpIoThreads)
    return absl::InvalidArgumentError(absl::StrCat("--http_io_threads=", o.http_io_threads,
                                                   " is out of range, expected 1..",
                                                   kMaxHttpIoThreads));
  for (const auto& [flag, ms] : {std::pair<const char*, int64_t>{"--http_header_timeout_ms",
                                                                   o.http_header_timeout_ms},
                                 {"--http_body_timeout_ms", o.http_body_timeout_ms},
                                 {"--http_idle_timeout_ms", o.http_idle_timeout_ms},
                                 {"--http_write_timeout_ms", o.http_write_timeout_ms}})
    if (ms < 1 || ms > kMaxHttpTimeoutMs)
      return absl::InvalidArgumentError(absl::StrCat(flag, "=", ms,
                                                     " is out of range, expected 1..",
                                                     kMaxHttpTimeoutMs, " (milliseconds)"));
  if (o.http_max_connections < 1 || o.http_max_connections > kMaxHttpConnections)
    return absl::InvalidArgumentError(absl::StrCat("--http_max_connections=",
                                                   o.http_max_connections,
                                                   " is out of range, expected 1..",
                                                   kMaxHttpConnections));
  if (o.http_max_connections_per_address < 1 ||
      o.http_max_connections_per_address > o.http_max_connections)
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_max_connections_per_address=", o.http_max_connections_per_address,
        " is out of range, expected 1..", o.http_max_connections, " (--http_max_connections)"));
  if (o.forward_deadline_ms < 1)
    return absl::InvalidArgumentError(absl::StrCat("--forward_deadline_ms=", o.forward_deadline_ms,
                                                   " is out of range, expected at least 1"));
  // One request vector is at most one feature dimension long.
  limits.instance.max_vector_size = limits.instance.max_feature_dim;
  limits.max_message_bytes = o.max_message_bytes;
  o.personalizer.max_json_depth = static_cast<int>(named.max_depth);
  if (o.cluster) {
    if (!o.persistent || o.storage != "postgres")
      return absl::InvalidArgumentError(
          "--cluster needs --storage=postgres: the nodes share one PostgreSQL database");
    if (o.durability != Durability::kAlways)
      return absl::InvalidArgumentError(absl::StrCat(
          "--cluster needs --durability=always (got ", DurabilityName(o.durability),
          "): a change is acknowledged only once its fenced COMMIT returned, so a node that "
          "lost an instance's lease never acknowledges a change the new owner does not have"));
    if (o.node_id.empty()) {
      const std::string port = o.listen.substr(o.listen.rfind(':') + 1);
      o.node_id = absl::StrCat(HostName(), "-", port == "0" ? absl::StrCat("pid", getpid()) : port);
    }
  }
  return o;
}

}  // namespace bandit::server
