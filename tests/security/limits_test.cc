// Every configurable limit (ServiceLimits / InstanceLimits, set by banditd's --max_* flags) is
// enforced with the documented code: request shapes INVALID_ARGUMENT, server capacity
// RESOURCE_EXHAUSTED. In-process, with a manual clock; a refused request changes nothing.
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/service/decision_service.h"
#include "tests/server/server_test_util.h"

namespace bandit::server {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
namespace v1 = bandit::v1;

using testing::Create;

ServiceLimits SmallLimits() {
  ServiceLimits l;
  l.max_instances = 3;
  l.max_batch_items = 4;
  l.max_page_size = 5;
  l.instance.max_candidates = 6;
  l.instance.max_vector_size = 8;
  l.instance.max_feature_dim = 8;
  l.instance.max_arms = 10;
  l.instance.max_arms_per_request = 4;
  l.instance.max_pending_capacity = 50;
  l.instance.max_name_length = 12;
  return l;
}

class LimitsTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  DecisionService svc_{&clock_, SmallLimits()};

  absl::Status Make(const std::string& name, const std::string& config) {
    v1::Instance out;
    return svc_.CreateInstance(Create(name, config), &out);
  }
  int64_t Rounds(const std::string& name) {
    v1::GetInstanceRequest req;
    req.set_name(name);
    v1::Instance out;
    EXPECT_TRUE(svc_.GetInstance(req, &out).ok());
    return out.stats().rounds();
  }
  static v1::SelectRequest LinSelect(const std::string& name, int candidates, int dim) {
    v1::SelectRequest req;
    req.set_instance(name);
    for (int c = 0; c < candidates; ++c) {
      auto* v = req.add_candidates();
      for (int i = 0; i < dim; ++i) v->add_values(0.1 * (c + i));
    }
    return req;
  }
};

TEST_F(LimitsTest, NumberOfInstances) {
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(Make(n, "policy { ucb1 {} num_arms: 2 }").ok());
  const absl::Status s = Make("d", "policy { ucb1 {} num_arms: 2 }");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(svc_.registry().size(), 3);
  // Deleting one frees a slot.
  v1::DeleteInstanceRequest del;
  del.set_name("a");
  ASSERT_TRUE(svc_.DeleteInstance(del).ok());
  EXPECT_TRUE(Make("d", "policy { ucb1 {} num_arms: 2 }").ok());
}

TEST_F(LimitsTest, ImportCountsAgainstInstances) {
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(Make(n, "policy { ucb1 {} num_arms: 2 }").ok());
  v1::ExportInstanceRequest ex;
  ex.set_name("a");
  v1::ExportInstanceResponse snap;
  ASSERT_TRUE(svc_.ExportInstance(ex, &snap).ok());
  v1::ImportInstanceRequest im;
  im.set_name("e");
  im.set_snapshot(snap.snapshot());
  v1::Instance out;
  EXPECT_EQ(svc_.ImportInstance(im, &out).code(), StatusCode::kResourceExhausted);
}

TEST_F(LimitsTest, NameLength) {
  EXPECT_TRUE(Make(std::string(12, 'n'), "policy { ucb1 {} num_arms: 2 }").ok());
  const absl::Status s = Make(std::string(13, 'n'), "policy { ucb1 {} num_arms: 2 }");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("at most 12"), absl::string_view::npos) << s;
  // Import under a too-long name is refused the same way.
  v1::ExportInstanceRequest ex;
  ex.set_name(std::string(12, 'n'));
  v1::ExportInstanceResponse snap;
  ASSERT_TRUE(svc_.ExportInstance(ex, &snap).ok());
  v1::ImportInstanceRequest im;
  im.set_name(std::string(20, 'm'));
  im.set_snapshot(snap.snapshot());
  v1::Instance out;
  EXPECT_EQ(svc_.ImportInstance(im, &out).code(), StatusCode::kInvalidArgument);
}

TEST_F(LimitsTest, FeatureDimensionInConfig) {
  EXPECT_TRUE(Make("lin8", "policy { linucb { dimension: 8 } }").ok());
  const absl::Status s = Make("lin9", "policy { linucb { dimension: 9 } }");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("config.policy.linucb.dimension is 9"), absl::string_view::npos) << s;
  // A huge dimension is refused before any allocation (would be 8e18 bytes for A^-1).
  EXPECT_EQ(Make("huge", "policy { linucb { dimension: 2000000000 } }").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Make("glb", "policy { glb_omd { dimension: 100 } }").code(),
            StatusCode::kInvalidArgument);
}

// A size field not called `dimension` is caught too: OKS's support budget sizes a
// budget x budget kernel matrix per kernel.
TEST_F(LimitsTest, EverySizeFieldIsCheckedWhateverItsName) {
  const char* oks =
      "policy { oks { dimension: 2 kernels { kind: GAUSSIAN bandwidth: 1 } support_budget: %d } }";
  EXPECT_TRUE(Make("oks8", absl::StrFormat(oks, 8)).ok());
  const absl::Status s = Make("oks9", absl::StrFormat(oks, 9));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("config.policy.oks.support_budget is 9"), absl::string_view::npos)
      << s;
  EXPECT_EQ(svc_.registry().size(), 1);
}

// Every integer field of every policy config is classified as a size (checked against a
// limit) or explicitly not one, by its (bandit.v1.size) option in the protos.
TEST(SizeFields, EveryPolicyConfigIntegerFieldIsClassified) {
  const std::vector<std::string> unclassified = UnclassifiedPolicyConfigFields();
  EXPECT_TRUE(unclassified.empty()) << "unclassified: " << absl::StrJoin(unclassified, ", ");
}

TEST_F(LimitsTest, FeatureDimensionOfRequestVectors) {
  ASSERT_TRUE(Make("lin", "policy { linucb { dimension: 8 } }").ok());
  v1::Decision d;
  ASSERT_TRUE(svc_.Select(LinSelect("lin", 2, 8), &d).ok());
  const absl::Status s = svc_.Select(LinSelect("lin", 2, 9), &d);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("at most 8"), absl::string_view::npos) << s;
  // Direct update features and embedding are capped the same way.
  v1::UpdateRequest up;
  up.set_instance("lin");
  up.set_reward(1);
  for (int i = 0; i < 9; ++i) up.mutable_direct()->add_features(0.5);
  v1::UpdateResponse ur;
  EXPECT_EQ(svc_.Update(up, &ur).code(), StatusCode::kInvalidArgument);
  up.clear_direct();
  up.set_event_id(d.event_id());
  for (int i = 0; i < 9; ++i) up.add_embedding(0.5);
  EXPECT_EQ(svc_.Update(up, &ur).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Rounds("lin"), 1);
}

TEST_F(LimitsTest, CandidatesPerSelect) {
  ASSERT_TRUE(Make("lin", "policy { linucb { dimension: 2 } }").ok());
  v1::Decision d;
  EXPECT_TRUE(svc_.Select(LinSelect("lin", 6, 2), &d).ok());
  const absl::Status s = svc_.Select(LinSelect("lin", 7, 2), &d);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("candidates has 7 entries, expected at most 6"),
            absl::string_view::npos)
      << s;
  EXPECT_EQ(Rounds("lin"), 1);
}

TEST_F(LimitsTest, ArmsInConfigAndAfterAddArms) {
  EXPECT_EQ(Make("k11", "policy { ucb1 {} num_arms: 11 }").code(), StatusCode::kInvalidArgument);
  std::string eleven = "policy { ucb1 {} ";
  for (int i = 0; i < 11; ++i) eleven += "arms { id: 'a" + std::to_string(i) + "' } ";
  EXPECT_EQ(Make("k11b", eleven + "}").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(Make("k", "policy { ucb1 {} num_arms: 8 }").ok());
  v1::AddArmsRequest add;
  add.set_name("k");
  for (int i = 0; i < 3; ++i) add.add_arms()->set_id("x" + std::to_string(i));
  v1::Instance out;
  // 8 + 3 > 10: the server's capacity for this instance, nothing added.
  const absl::Status s = svc_.AddArms(add, &out);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
  v1::GetInstanceRequest get;
  get.set_name("k");
  ASSERT_TRUE(svc_.GetInstance(get, &out).ok());
  EXPECT_EQ(out.arm_ids_size(), 8);
  add.mutable_arms()->RemoveLast();
  EXPECT_TRUE(svc_.AddArms(add, &out).ok());
  EXPECT_EQ(out.arm_ids_size(), 10);
}

TEST_F(LimitsTest, ArmsPerRequest) {
  ASSERT_TRUE(Make("k", "policy { ucb1 {} num_arms: 2 }").ok());
  v1::AddArmsRequest add;
  add.set_name("k");
  for (int i = 0; i < 5; ++i) add.add_arms()->set_id("x" + std::to_string(i));
  v1::Instance out;
  EXPECT_EQ(svc_.AddArms(add, &out).code(), StatusCode::kInvalidArgument);
  v1::RemoveArmsRequest rm;
  rm.set_name("k");
  for (int i = 0; i < 5; ++i) rm.add_arm_ids("0");
  EXPECT_EQ(svc_.RemoveArms(rm, &out).code(), StatusCode::kInvalidArgument);
}

TEST_F(LimitsTest, BatchSize) {
  ASSERT_TRUE(Make("k", "policy { ucb1 {} num_arms: 2 }").ok());
  v1::SelectBatchRequest sb;
  for (int i = 0; i < 5; ++i) sb.add_requests()->set_instance("k");
  v1::SelectBatchResponse sr;
  EXPECT_EQ(svc_.SelectBatch(sb, &sr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sr.decisions_size(), 0);
  EXPECT_EQ(Rounds("k"), 0);
  sb.mutable_requests()->RemoveLast();
  ASSERT_TRUE(svc_.SelectBatch(sb, &sr).ok());
  EXPECT_EQ(Rounds("k"), 4);
  v1::UpdateBatchRequest ub;
  for (int i = 0; i < 5; ++i) {
    auto* u = ub.add_requests();
    u->set_instance("k");
    u->set_event_id(sr.decisions(i % 4).event_id());
  }
  v1::UpdateBatchResponse ur;
  EXPECT_EQ(svc_.UpdateBatch(ub, &ur).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ur.responses_size(), 0);
}

TEST_F(LimitsTest, PendingCapacity) {
  EXPECT_EQ(Make("p", "policy { ucb1 {} num_arms: 2 } pending { capacity: 51 }").code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(Make("p", "policy { ucb1 {} num_arms: 2 } pending { capacity: 3 }").ok());
  v1::SelectRequest req;
  req.set_instance("p");
  v1::Decision d;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(svc_.Select(req, &d).ok());
  const std::string last = d.event_id();
  const absl::Status s = svc_.Select(req, &d);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(Rounds("p"), 3);
  // A reward frees a slot.
  v1::UpdateRequest up;
  up.set_instance("p");
  up.set_event_id(last);
  up.set_reward(1);
  v1::UpdateResponse ur;
  ASSERT_TRUE(svc_.Update(up, &ur).ok());
  EXPECT_TRUE(svc_.Select(req, &d).ok());
}

TEST_F(LimitsTest, PageSize) {
  ASSERT_TRUE(Make("k", "policy { ucb1 {} num_arms: 2 }").ok());
  v1::ListInstancesRequest req;
  v1::ListInstancesResponse resp;
  req.set_page_size(5);
  EXPECT_TRUE(svc_.ListInstances(req, &resp).ok());
  req.set_page_size(6);
  EXPECT_EQ(svc_.ListInstances(req, &resp).code(), StatusCode::kInvalidArgument);
  req.set_page_size(-1);
  EXPECT_EQ(svc_.ListInstances(req, &resp).code(), StatusCode::kInvalidArgument);
}

// Defaults (no flags) keep the historical behaviour: huge configs are not refused by size, so
// recovery, which builds instances with default limits, never refuses what was once accepted.
TEST(DefaultLimits, AreThoseRecoveryAssumes) {
  InstanceLimits d;
  EXPECT_GE(d.max_feature_dim, std::numeric_limits<int32_t>::max());
  EXPECT_GE(d.max_arms, std::numeric_limits<int32_t>::max());
  EXPECT_EQ(d.max_name_length, 128);
}

}  // namespace
}  // namespace bandit::server
