// The pooled messages of the per-round RPCs. ReusedMessageAllocator: a released holder comes
// back with empty messages that keep their buffers (a request of the same shape parses into
// them without allocating), messages that ran over the bound are replaced, the pool is bounded.
// RoundMessages: the same for the Rounds stream, whose requests alternate kinds in a oneof.
#include "server/api/message_pool.h"

#include <string>

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>
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

grpc::ByteBuffer Wire(const bandit::v1::RoundRequest& req) {
  grpc::ByteBuffer buffer;
  bool own = false;
  EXPECT_TRUE(grpc::SerializationTraits<bandit::v1::RoundRequest>::Serialize(req, &buffer, &own)
                  .ok());
  return buffer;
}

bandit::v1::RoundRequest RoundSelect(int actions, size_t bytes) {
  bandit::v1::RoundRequest req;
  EXPECT_TRUE(req.mutable_select()->ParseFromString(NamedSelect(actions, bytes)));
  return req;
}

bandit::v1::RoundRequest RoundUpdate(const std::string& event_id) {
  bandit::v1::RoundRequest req;
  req.mutable_update()->set_instance("some-instance");
  req.mutable_update()->set_event_id(event_id);
  req.mutable_update()->set_reward(1);
  return req;
}

TEST(RoundMessages, EachKindParsesIntoTheBuffersOfTheLastOfItsKind) {
  RoundMessages::Pool pool(/*max_kept_bytes=*/1 << 20, /*max_pooled=*/4);
  RoundMessages* m = pool.Allocate();
  grpc::ByteBuffer first = Wire(RoundSelect(50, 200));
  ASSERT_TRUE(m->Parse(&first).ok());
  ASSERT_TRUE(m->request()->has_select());
  m->LendResult();
  m->response()->mutable_decision()->set_event_id(std::string(100, 'e'));
  const char* features_buffer = m->request()->select().actions(49).features().data();
  const char* event_id_buffer = m->response()->decision().event_id().data();
  m->Release();

  // An Update in between: parsed as one, the Select's buffers kept aside.
  m = pool.Allocate();
  EXPECT_EQ(pool.pooled(), 0u);
  EXPECT_FALSE(m->request()->has_select());
  EXPECT_FALSE(m->response()->has_decision());
  const bandit::v1::RoundRequest update = RoundUpdate("0123456789abcdef-1");
  grpc::ByteBuffer second = Wire(update);
  ASSERT_TRUE(m->Parse(&second).ok());
  EXPECT_EQ(m->request()->SerializeAsString(), update.SerializeAsString());
  m->LendResult();
  EXPECT_FALSE(m->response()->has_decision());
  m->response()->mutable_update();
  m->Release();

  // The next Select parses into the first one's buffers, its answer into the first answer's.
  m = pool.Allocate();
  const bandit::v1::RoundRequest select = RoundSelect(50, 190);
  grpc::ByteBuffer third = Wire(select);
  ASSERT_TRUE(m->Parse(&third).ok());
  EXPECT_EQ(m->request()->SerializeAsString(), select.SerializeAsString());
  EXPECT_EQ(m->request()->select().actions(49).features().data(), features_buffer);
  m->LendResult();
  ASSERT_TRUE(m->response()->has_decision());
  EXPECT_TRUE(m->response()->decision().event_id().empty());
  m->response()->mutable_decision()->mutable_event_id()->assign(90, 'f');
  EXPECT_EQ(m->response()->decision().event_id().data(), event_id_buffer);
  m->Release();
}

TEST(RoundMessages, ParsesWhatProtobufParses) {
  RoundMessages::Pool pool;
  // Warm the holder's kept Select, then payloads that name one kind first and another last (the
  // oneof's last field wins), an empty one, and one that is not a message.
  RoundMessages* m = pool.Allocate();
  grpc::ByteBuffer warm = Wire(RoundSelect(3, 20));
  ASSERT_TRUE(m->Parse(&warm).ok());
  m->Release();
  const std::string select_then_update =
      RoundSelect(3, 20).SerializeAsString() + RoundUpdate("e-1").SerializeAsString();
  const std::string update_then_select =
      RoundUpdate("e-2").SerializeAsString() + RoundSelect(2, 10).SerializeAsString();
  for (const std::string& payload : {select_then_update, update_then_select, std::string()}) {
    bandit::v1::RoundRequest expected;
    ASSERT_TRUE(expected.ParseFromString(payload));
    grpc::Slice slice(payload);
    grpc::ByteBuffer buffer(&slice, 1);
    m = pool.Allocate();
    ASSERT_TRUE(m->Parse(&buffer).ok());
    EXPECT_EQ(m->request()->SerializeAsString(), expected.SerializeAsString());
    m->LendResult();
    m->Release();
  }
  grpc::Slice junk(std::string("\x0a\xff\xff\xff\xff\x0f"));
  grpc::ByteBuffer bad(&junk, 1);
  m = pool.Allocate();
  EXPECT_FALSE(m->Parse(&bad).ok());
  m->Release();
  // The holder serves a good request after a bad one.
  m = pool.Allocate();
  const bandit::v1::RoundRequest select = RoundSelect(4, 30);
  grpc::ByteBuffer good = Wire(select);
  ASSERT_TRUE(m->Parse(&good).ok());
  EXPECT_EQ(m->request()->SerializeAsString(), select.SerializeAsString());
  m->Release();
}

TEST(RoundMessages, MessagesOverTheBoundAreNotKept) {
  RoundMessages::Pool pool(/*max_kept_bytes=*/64 << 10, /*max_pooled=*/4);
  RoundMessages* m = pool.Allocate();
  grpc::ByteBuffer large = Wire(RoundSelect(100, 1000));  // ~100 KB
  ASSERT_TRUE(m->Parse(&large).ok());
  m->Release();
  m = pool.Allocate();
  grpc::ByteBuffer small = Wire(RoundSelect(10, 100));
  ASSERT_TRUE(m->Parse(&small).ok());
  // Parsed into a fresh Select (the large one was deleted); this one is kept for the next.
  const bandit::v1::SelectRequest* small_select = &m->request()->select();
  EXPECT_EQ(m->request()->select().actions_size(), 10);
  EXPECT_LT(m->request()->select().context().capacity(), 1000u);
  m->Release();
  m = pool.Allocate();
  grpc::ByteBuffer again = Wire(RoundSelect(10, 100));
  ASSERT_TRUE(m->Parse(&again).ok());
  EXPECT_EQ(&m->request()->select(), small_select);
  m->Release();
}

TEST(RoundMessages, PoolKeepsAtMostMaxPooledHolders) {
  RoundMessages::Pool pool(/*max_kept_bytes=*/1 << 20, /*max_pooled=*/2);
  RoundMessages* a = pool.Allocate();
  RoundMessages* b = pool.Allocate();
  RoundMessages* c = pool.Allocate();
  EXPECT_NE(a, b);
  a->Release();
  b->Release();
  c->Release();  // deleted, not pooled
  EXPECT_EQ(pool.pooled(), 2u);
}

}  // namespace
}  // namespace bandit::server
