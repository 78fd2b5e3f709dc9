// The fsync policy, named as Redis names it.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace bandit::server {

// always: a write is acknowledged once it is durable (group commit). everysec: made durable at
// least once a second. none: the OS decides.
enum class Durability { kAlways, kEverySec, kNone };
absl::StatusOr<Durability> ParseDurability(const std::string& text);
const char* DurabilityName(Durability d);

}  // namespace bandit::server
