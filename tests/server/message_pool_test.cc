// The pooled messages of the per-round RPCs. ReusedMessageAllocator: a released holder comes
// back with empty messages that keep their buffers (a request of the same shape parses into
// them without allocating), messages that ran over the bound are replaced, the pool is bounded.
// ArenaMessageAllocator: messages live on an arena, reset for each call.
#include "server/api/message_pool.h"

#include <string>

#include <gtest/gtest.h>

#include "bandit/v1/service.pb.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

// A named Select of `actions` actions whose feature documents are `bytes` long each.
std::string NamedSelect(int actions, size_t bytes) {
  bandit::v1::SelectRequest req;
  req.set_instance("some-instance");
  req.set_context(std::string(bytes, 'c'));
  for (int i = 0; i < actions; ++i) {
    auto* a = req.add_actions();
    a->set_id("action-" + std::to_string(i) + "-with-a-long-enough-id");
    a->set_features(std::string(bytes, static_cast<char>('a' + i % 26)));
  }
  return req.SerializeAsString();
}

using Reused = ReusedMessageAllocator<bandit::v1::SelectRequest, bandit::v1::Decision>;

TEST(ReusedMessageAllocator, ReleasedHolderComesBackEmptyWithItsBuffers) {
  Reused alloc(/*max_kept_bytes=*/1 << 20, /*max_pooled=*/4);
  const std::string wire = NamedSelect(50, 200);
  auto* h = alloc.AllocateMessages();
  EXPECT_EQ(h->request()->GetArena(), nullptr);  // on the heap, cleared between calls
  ASSERT_TRUE(h->request()->ParseFromString(wire));
  h->response()->set_event_id(std::string(100, 'e'));
  h->response()->add_ranking()->set_id("action-0-with-a-long-enough-id");
  const char* features_buffer = h->request()->actions(49).features().data();
  const char* context_buffer = h->request()->context().data();
  h->Release();
  EXPECT_EQ(alloc.pooled(), 1u);

  auto* again = alloc.AllocateMessages();
  ASSERT_EQ(again, h);  // the pooled holder is reused ...
  EXPECT_EQ(alloc.pooled(), 0u);
  // ... with empty messages, nothing of the last call's left ...
  EXPECT_EQ(again->request()->actions_size(), 0);
  EXPECT_TRUE(again->request()->instance().empty());
  EXPECT_TRUE(again->request()->context().empty());
  EXPECT_TRUE(again->response()->event_id().empty());
  EXPECT_EQ(again->response()->ranking_size(), 0);
  // ... that parse a request of the same shape into the buffers of the last one.
  const std::string next = NamedSelect(50, 190);
  ASSERT_TRUE(again->request()->ParseFromString(next));
  EXPECT_EQ(again->request()->actions(49).features().data(), features_buffer);
  EXPECT_EQ(again->request()->context().data(), context_buffer);
  EXPECT_EQ(again->request()->SerializeAsString(), next);
  again->Release();
}

TEST(ReusedMessageAllocator, MessagesOverTheBoundAreReplaced) {
  Reused alloc(/*max_kept_bytes=*/64 << 10, /*max_pooled=*/4);
  auto* h = alloc.AllocateMessages();
  const bandit::v1::SelectRequest* first = h->request();
  ASSERT_TRUE(h->request()->ParseFromString(NamedSelect(100, 1000)));  // ~100 KB
  h->Release();
  auto* again = alloc.AllocateMessages();
  ASSERT_EQ(again, h);
  EXPECT_NE(again->request(), first);  // a fresh message: the large one's buffers are gone
  EXPECT_EQ(again->request()->actions_size(), 0);
  EXPECT_EQ(again->request()->context().capacity(), std::string().capacity());
  // One under the bound keeps its message.
  ASSERT_TRUE(again->request()->ParseFromString(NamedSelect(10, 100)));
  const bandit::v1::SelectRequest* kept = again->request();
  again->Release();
  EXPECT_EQ(alloc.AllocateMessages()->request(), kept);
}

TEST(ReusedMessageAllocator, PoolKeepsAtMostMaxPooledHolders) {
  Reused alloc(/*max_kept_bytes=*/1 << 20, /*max_pooled=*/2);
  auto* a = alloc.AllocateMessages();
  auto* b = alloc.AllocateMessages();
  auto* c = alloc.AllocateMessages();
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  a->Release();
  b->Release();
  c->Release();  // deleted, not pooled
  EXPECT_EQ(alloc.pooled(), 2u);
}

using OnArena = ArenaMessageAllocator<bandit::v1::RoundRequest, bandit::v1::RoundResponse>;

TEST(ArenaMessageAllocator, MessagesLiveOnAnArenaAndComeBackEmpty) {
  OnArena alloc(/*block_bytes=*/4096, /*max_pooled=*/4);
  auto* h = alloc.AllocateMessages();
  ASSERT_NE(h->request()->GetArena(), nullptr);
  EXPECT_EQ(h->request()->GetArena(), h->response()->GetArena());
  // Far more than the 4 KB first block: the arena spills into further blocks.
  ASSERT_TRUE(h->request()->mutable_select()->ParseFromString(NamedSelect(50, 200)));
  h->response()->mutable_decision()->set_event_id("0123456789abcdef-1");
  const auto* arena = h->request()->GetArena();
  h->Release();
  EXPECT_EQ(alloc.pooled(), 1u);

  auto* again = alloc.AllocateMessages();
  EXPECT_EQ(again, h);  // the pooled holder is reused ...
  EXPECT_EQ(again->request()->GetArena(), arena);
  // ... with fresh messages, not the previous call's.
  EXPECT_FALSE(again->request()->has_select());
  EXPECT_FALSE(again->response()->has_decision());
  // And it serves a second large request correctly after the reset.
  const std::string next = NamedSelect(60, 300);
  ASSERT_TRUE(again->request()->mutable_select()->ParseFromString(next));
  EXPECT_EQ(again->request()->select().SerializeAsString(), next);
  again->Release();
}

TEST(ArenaMessageAllocator, PoolKeepsAtMostMaxPooledHolders) {
  OnArena alloc(/*block_bytes=*/1024, /*max_pooled=*/2);
  auto* a = alloc.AllocateMessages();
  auto* b = alloc.AllocateMessages();
  auto* c = alloc.AllocateMessages();
  a->Release();
  b->Release();
  c->Release();  // deleted, not pooled
  EXPECT_EQ(alloc.pooled(), 2u);
}

}  // namespace
}  // namespace bandit::server
