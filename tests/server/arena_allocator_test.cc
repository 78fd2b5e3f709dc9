// ArenaMessageAllocator: messages live on an arena, a released holder is reused with fresh
// (empty) messages, spilled blocks do not leak into the next use, the pool is bounded.
#include "server/api/arena_allocator.h"

#include <gtest/gtest.h>

#include "bandit/v1/service.pb.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using Alloc = ArenaMessageAllocator<bandit::v1::SelectRequest, bandit::v1::Decision>;

void FillLarge(bandit::v1::SelectRequest* req, int candidates, int d) {
  req->set_instance("some-instance");
  for (int i = 0; i < candidates; ++i) {
    auto* c = req->add_candidates();
    for (int j = 0; j < d; ++j) c->add_values(i + 0.001 * j);
  }
}

TEST(ArenaMessageAllocator, MessagesLiveOnAnArenaAndComeBackEmpty) {
  Alloc alloc(/*block_bytes=*/4096, /*max_pooled=*/4);
  auto* h = alloc.AllocateMessages();
  ASSERT_NE(h->request()->GetArena(), nullptr);
  EXPECT_EQ(h->request()->GetArena(), h->response()->GetArena());
  // Far more than the 4 KB first block: the arena spills into further blocks.
  FillLarge(h->request(), 200, 20);
  h->response()->set_event_id("0123456789abcdef-1");
  ASSERT_EQ(h->request()->candidates_size(), 200);
  const auto* arena = h->request()->GetArena();
  h->Release();
  EXPECT_EQ(alloc.pooled(), 1u);

  auto* again = alloc.AllocateMessages();
  EXPECT_EQ(again, h);  // the pooled holder is reused ...
  EXPECT_EQ(alloc.pooled(), 0u);
  EXPECT_EQ(again->request()->GetArena(), arena);
  // ... with fresh messages, not the previous call's.
  EXPECT_EQ(again->request()->candidates_size(), 0);
  EXPECT_TRUE(again->request()->instance().empty());
  EXPECT_TRUE(again->response()->event_id().empty());
  // And it serves a second large request correctly after the reset.
  FillLarge(again->request(), 150, 30);
  EXPECT_EQ(again->request()->candidates(149).values(29), 149 + 0.029);
  again->Release();
}

TEST(ArenaMessageAllocator, PoolKeepsAtMostMaxPooledHolders) {
  Alloc alloc(/*block_bytes=*/1024, /*max_pooled=*/2);
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

}  // namespace
}  // namespace bandit::server
