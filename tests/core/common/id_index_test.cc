// IdIndex: the one id -> position lookup (arm sets, named actions, slot ids). Positions checked
// against the list they index; exact messages for a repeated and an unknown id.
#include "core/id_index.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

std::string ActionField(int i) { return absl::StrCat("actions[", i, "].id"); }

TEST(IdIndex, PositionsAreTheListsOrder) {
  const std::vector<std::string> ids = {"b", "a", "c-1", "0"};
  IdIndex index;
  for (const auto& id : ids) ASSERT_TRUE(index.Append(id, ActionField).ok());
  ASSERT_EQ(index.size(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(index.Find(ids[i]), i) << ids[i];
  EXPECT_EQ(index.Find("d"), std::nullopt);
  EXPECT_EQ(index.Find(""), std::nullopt);
  const IdIndex same = IdIndex::OfDistinct(ids);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(same.Find(ids[i]), i);
}

TEST(IdIndex, ARepeatIsRefusedNamingBothFieldsAndChangesNothing) {
  IdIndex index;
  for (const char* id : {"x", "y", "z"}) ASSERT_TRUE(index.Append(id, ActionField).ok());
  const absl::Status s = index.Append("y", ActionField);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "actions[3].id 'y' repeats actions[1].id");
  EXPECT_EQ(index.size(), 3);
  EXPECT_EQ(index.Find("y"), 1);
  EXPECT_FALSE(index.TryAppend("x"));
  EXPECT_EQ(index.size(), 3);
  EXPECT_TRUE(index.TryAppend("w"));
  EXPECT_EQ(index.Find("w"), 3);
}

TEST(IdIndex, AnUnknownIdIsRefusedNamingTheFieldAndWhatItShouldBeAmong) {
  const IdIndex index = IdIndex::OfDistinct(std::vector<std::string>{"red", "green"});
  auto at = index.Position("excluded_actions[0]", "green", "the instance's arms");
  ASSERT_TRUE(at.ok());
  EXPECT_EQ(*at, 1);
  auto missing = index.Position("excluded_actions[1]", "purple", "the instance's arms");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.status().message(),
            "excluded_actions[1] 'purple' is not the id of one of the instance's arms");
}

// Erase keeps every remaining id at its position in the list with that entry erased.
TEST(IdIndex, EraseShiftsLaterPositionsLikeTheList) {
  std::vector<std::string> ids;
  IdIndex index;
  for (int i = 0; i < 9; ++i) {
    ids.push_back(absl::StrCat("arm", i));
    ASSERT_TRUE(index.TryAppend(ids.back()));
  }
  for (int erase : {4, 0, 6, 2}) {
    const std::string gone = ids[erase];
    ids.erase(ids.begin() + erase);
    index.Erase(erase);
    ASSERT_EQ(index.size(), static_cast<int>(ids.size()));
    EXPECT_EQ(index.Find(gone), std::nullopt);
    for (int i = 0; i < static_cast<int>(ids.size()); ++i) EXPECT_EQ(index.Find(ids[i]), i);
  }
  // A new id goes after the remaining ones.
  ASSERT_TRUE(index.Append("new", ActionField).ok());
  EXPECT_EQ(index.Find("new"), static_cast<int>(ids.size()));
}

}  // namespace
}  // namespace bandit
