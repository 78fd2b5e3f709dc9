#include "core/id_index.h"

#include "absl/strings/str_cat.h"

namespace bandit {

IdIndex IdIndex::OfDistinct(std::span<const std::string> ids) {
  IdIndex index;
  index.position_.reserve(ids.size());
  for (int i = 0; i < static_cast<int>(ids.size()); ++i) index.position_.emplace(ids[i], i);
  return index;
}

std::optional<int> IdIndex::Find(absl::string_view id) const {
  auto it = position_.find(id);
  if (it == position_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<int> IdIndex::Position(absl::string_view field, absl::string_view id,
                                      absl::string_view among) const {
  if (auto found = Find(id)) return *found;
  return absl::InvalidArgumentError(
      absl::StrCat(field, " '", id, "' is not the id of one of ", among));
}

absl::Status IdIndex::Append(absl::string_view id,
                             absl::FunctionRef<std::string(int)> field_of) {
  const int at = size();
  if (auto [it, fresh] = position_.emplace(id, at); !fresh)
    return absl::InvalidArgumentError(
        absl::StrCat(field_of(at), " '", id, "' repeats ", field_of(it->second)));
  return absl::OkStatus();
}

bool IdIndex::TryAppend(absl::string_view id) { return position_.emplace(id, size()).second; }

void IdIndex::Erase(int position) {
  // Linear in the number of ids, as erasing from the list the positions index is.
  for (auto it = position_.begin(); it != position_.end();) {
    if (it->second == position) {
      position_.erase(it++);
    } else {
      if (it->second > position) --it->second;
      ++it;
    }
  }
}

}  // namespace bandit
