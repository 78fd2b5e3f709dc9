// The decision log over the wire, against the real banditd: the server-streaming export spans
// several chunks and returns every decision in order, equal to what Select answered; refusals
// come back with their exact codes; a restart (SIGTERM, final snapshot) keeps the log; banditctl
// writes it as DSJSON and bandit-ope evaluates that file.
#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cpp/bandit_client.h"
#include "client/cpp/decision_log_format.h"
#include "tests/integration/server_process.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
using bandit::client::BanditClient;
using bandit::testing::EnvOr;
using bandit::testing::ServerProcess;
namespace v1 = bandit::v1;

std::vector<v1::LoggedDecision> Export(BanditClient& client, v1::ExportDecisionLogRequest req,
                                       absl::Status* status = nullptr) {
  std::vector<v1::LoggedDecision> out;
  absl::Status s = client.ExportDecisionLog(req, [&](const v1::LoggedDecision& d) {
    out.push_back(d);
    return absl::OkStatus();
  });
  if (status != nullptr) {
    *status = s;
  } else {
    EXPECT_TRUE(s.ok()) << s;
  }
  return out;
}

TEST(DecisionLogExport, StreamsEveryDecisionInOrderAcrossChunksAndRestarts) {
  ServerProcess server({"--durability=always"});
  ASSERT_TRUE(server.running()) << server.Log();
  BanditClient client(server.target());
  v1::CreateInstanceRequest create;
  create.set_name("k");
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "policy { epsilon_greedy { epsilon: 0.25 } num_arms: 4 } decision_log { enabled: true }",
      create.mutable_config()));
  ASSERT_TRUE(client.CreateInstance(create).ok());
  create.set_name("plain");
  create.mutable_config()->clear_decision_log();
  ASSERT_TRUE(client.CreateInstance(create).ok());
  std::vector<v1::Decision> decisions;
  v1::SelectBatchRequest batch;
  for (int i = 0; i < 100; ++i) batch.add_requests()->set_instance("k");
  for (int b = 0; b < 7; ++b) {  // 700 decisions: more than one 512-decision chunk
    auto r = client.SelectBatch(batch);
    ASSERT_TRUE(r.ok()) << r.status();
    v1::UpdateBatchRequest ups;
    for (const auto& d : r->decisions()) {
      decisions.push_back(d);
      auto* up = ups.add_requests();
      up->set_instance("k");
      up->set_event_id(d.event_id());
      up->set_reward(d.arm_index() == 2 ? 1.0 : 0.0);
    }
    ASSERT_TRUE(client.UpdateBatch(ups).ok());
  }
  v1::ExportDecisionLogRequest req;
  req.set_name("k");
  const auto log = Export(client, req);
  ASSERT_EQ(log.size(), decisions.size());
  for (size_t i = 0; i < log.size(); ++i) {
    EXPECT_EQ(log[i].event_id(), decisions[i].event_id());
    EXPECT_EQ(log[i].chosen_index(), decisions[i].arm_index());
    EXPECT_EQ(log[i].propensity(), decisions[i].propensity());
    EXPECT_EQ(log[i].outcome(), v1::OUTCOME_REWARDED);
    EXPECT_EQ(log[i].reward(), decisions[i].arm_index() == 2 ? 1.0 : 0.0);
  }

  absl::Status s;
  req.set_name("nope");
  Export(client, req, &s);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  req.set_name("plain");
  Export(client, req, &s);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s;
  req.set_name("k");
  req.set_since_ms(10);
  req.set_until_ms(5);
  Export(client, req, &s);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  req.Clear();
  req.set_name("k");

  // banditctl writes DSJSON, one line per decision; bandit-ope reads it.
  const std::string dsjson = server.dir() + "/k.dsjson";
  const std::string cmd = EnvOr("BANDITCTL", "build/bin/banditctl") +
                          " --target=" + server.target() + " log k --format=dsjson > " + dsjson +
                          " 2>/dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream f(dsjson);
  std::string line;
  size_t lines = 0;
  for (; std::getline(f, line); ++lines) {
    auto parsed = client::ParseDsjson(line);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    ASSERT_LT(lines, log.size());
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*parsed, log[lines]));
  }
  EXPECT_EQ(lines, log.size());
  const std::string candidate = server.dir() + "/uniform.txtpb";
  std::ofstream(candidate) << "policy { epsilon_greedy { epsilon: 1.0 } num_arms: 4 }";
  const std::string ope = EnvOr("BANDIT_OPE", "build/bin/bandit-ope") + " --log=" + dsjson +
                          " --json=" + server.dir() + "/ope.json " + candidate + " >/dev/null 2>&1";
  EXPECT_EQ(std::system(ope.c_str()), 0);
  EXPECT_TRUE(std::ifstream(server.dir() + "/ope.json").good());

  // banditctl evaluates the same log on the server (its job reads it across chunks): the online
  // policy's figures are the logged rewards, uniform choice's their reweighting.
  double paid = 0, uniform = 0;
  for (const auto& d : log) {
    paid += d.reward();
    uniform += 0.25 / d.propensity() * d.reward();
  }
  const std::string evaluation = server.dir() + "/evaluation.json";
  const std::string evaluate =
      EnvOr("BANDITCTL", "build/bin/banditctl") + " --target=" + server.target() +
      " --json evaluate k --since=0 --until=" +
      absl::StrCat(absl::ToUnixMillis(absl::Now() + absl::Hours(1))) +
      " --evaluation_name=all --wait > " + evaluation + " 2>/dev/null";
  ASSERT_EQ(std::system(evaluate.c_str()), 0);
  std::stringstream printed;
  printed << std::ifstream(evaluation).rdbuf();
  v1::Evaluation e;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(printed.str(), &e).ok()) << printed.str();
  EXPECT_EQ(e.status(), v1::EVALUATION_COMPLETED) << e.error();
  EXPECT_EQ(e.events(), static_cast<int64_t>(log.size()));
  for (const auto& r : e.results()) {
    if (r.source() == v1::POLICY_SOURCE_ONLINE)
      EXPECT_NEAR(r.total().ips_numerator(), paid, 1e-9 * paid);
    if (r.source() == v1::POLICY_SOURCE_RANDOM)
      EXPECT_NEAR(r.total().ips_numerator(), uniform, 1e-9 * uniform);
  }
  EXPECT_EQ(e.results_size(), 3);

  // A graceful restart keeps the log exactly.
  ASSERT_EQ(server.Stop(SIGTERM), 0) << server.Log();
  server.Start({"--durability=always"});
  ASSERT_TRUE(server.running()) << server.Log();
  BanditClient again(server.target());
  const auto after = Export(again, req);
  ASSERT_EQ(after.size(), log.size());
  for (size_t i = 0; i < log.size(); ++i)
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(after[i], log[i])) << i;
}

}  // namespace
}  // namespace bandit
