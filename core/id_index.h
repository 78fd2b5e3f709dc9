// The one lookup from a string id to its position in a list: an arm set's arm ids, a request's
// named actions, a multi-slot request's slot ids. Duplicates and unknown ids are refused with
// the same INVALID_ARGUMENT wording wherever ids are looked up.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace bandit {

class IdIndex {
 public:
  IdIndex() = default;
  // An empty index with room for `expected` ids (a request's ids are appended without rehashing).
  explicit IdIndex(int expected) { position_.reserve(static_cast<size_t>(expected)); }

  // Indexes `ids`, which the caller knows to be distinct (e.g. an arm set read back from a
  // state it saved); a repeat keeps its first position.
  static IdIndex OfDistinct(std::span<const std::string> ids);

  int size() const { return static_cast<int>(position_.size()); }
  bool empty() const { return position_.empty(); }
  std::optional<int> Find(absl::string_view id) const;
  // The position of `id`; INVALID_ARGUMENT "<field> '<id>' is not the id of one of <among>".
  absl::StatusOr<int> Position(absl::string_view field, absl::string_view id,
                               absl::string_view among) const;

  // `id` at position size(). A repeat is refused and changes nothing: INVALID_ARGUMENT
  // "<field_of(size())> '<id>' repeats <field_of(p)>", p its earlier position (field_of names
  // the request field at a position, e.g. "actions[3].id").
  absl::Status Append(absl::string_view id, absl::FunctionRef<std::string(int)> field_of);
  // As Append, for a caller that has checked Find(id) itself: false (no change) on a repeat.
  bool TryAppend(absl::string_view id);
  // Drops the id at `position`; the ids after it move down by one.
  void Erase(int position);

 private:
  absl::flat_hash_map<std::string, int> position_;
};

}  // namespace bandit
