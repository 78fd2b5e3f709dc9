#include "server/storage/durability.h"

#include "absl/strings/str_cat.h"

namespace bandit::server {

absl::StatusOr<Durability> ParseDurability(const std::string& text) {
  if (text == "always") return Durability::kAlways;
  if (text == "everysec") return Durability::kEverySec;
  if (text == "none") return Durability::kNone;
  return absl::InvalidArgumentError(
      absl::StrCat("--durability=", text, " is not one of always, everysec, none"));
}

const char* DurabilityName(Durability d) {
  switch (d) {
    case Durability::kAlways:
      return "always";
    case Durability::kEverySec:
      return "everysec";
    case Durability::kNone:
      return "none";
  }
  return "?";
}

}  // namespace bandit::server
