// TLS and token auth over the wire against the real banditd: every auth outcome (no token,
// unknown token, malformed header, too-low role, right role) on every BanditService RPC; TLS
// with and without client certificates; mutual TLS refusing clients without (or with a foreign)
// certificate; health open without a token; tokens absent from logs and metrics.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>

#include <grpcpp/client_context.h>
#include <gtest/gtest.h>

#include "client/cpp/bandit_client.h"
#include "server/api/auth.h"
#include "tests/integration/server_process.h"
#include "tests/security/test_certs.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

using absl::StatusCode;
using client::BanditClient;
using client::ClientOptions;
using testing::HttpGet;
using testing::ServerProcess;
using testing::TestCerts;
namespace v1 = bandit::v1;

const std::string kAdmin = "adm-0123456789abcdef0123456789abcdef";
const std::string kWriter = "wri-0123456789abcdef0123456789abcdef";
const std::string kReader = "rea-0123456789abcdef0123456789abcdef";
const std::string kUnknown = "unk-0123456789abcdef0123456789abcdef";

std::string Shell(const std::string& cmd, int* exit_code) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  const int st = pclose(p);
  *exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    certs_ = new TestCerts(TestCerts::Make());
    tokens_file_ = certs_->dir + "/tokens";
    std::ofstream f(tokens_file_);
    f << "# role token label\n"
      << "admin  " << kAdmin << "  ops\n"
      << "writer " << kWriter << " app\n"
      << "reader " << kReader << "  dash\n";
    f.close();
    chmod(tokens_file_.c_str(), 0600);
  }
  static void TearDownTestSuite() {
    certs_->Remove();
    delete certs_;
  }
  void SetUp() override { ASSERT_TRUE(certs_->ok) << certs_->error; }

  static std::string Pem(const std::string& path) { return TestCerts::Read(path); }

  ClientOptions Tls(const std::string& token = "") {
    ClientOptions o;
    o.tls_root_certs = Pem(certs_->ca_pem);
    o.tls_server_name = "localhost";
    o.token = token;
    o.deadline = std::chrono::milliseconds(5000);
    return o;
  }

  static TestCerts* certs_;
  static std::string tokens_file_;
};
TestCerts* SecurityTest::certs_ = nullptr;
std::string SecurityTest::tokens_file_;

// One call of every BanditService RPC with a minimal request; returns the status code.
std::map<std::string, std::function<StatusCode(BanditClient&)>> EveryRpc() {
  std::map<std::string, std::function<StatusCode(BanditClient&)>> rpcs;
  auto raw = [](auto call) {
    return [call](BanditClient& c) {
      grpc::ClientContext ctx;
      c.Prepare(&ctx);
      return static_cast<StatusCode>(call(c.stub(), &ctx).error_code());
    };
  };
  rpcs["CreateInstance"] = [](BanditClient& c) {
    v1::CreateInstanceRequest r;
    r.set_name("probe");
    r.mutable_config()->mutable_policy()->mutable_ucb1();
    r.mutable_config()->mutable_policy()->set_num_arms(2);
    return c.CreateInstance(r).status().code();
  };
  rpcs["GetInstance"] = [](BanditClient& c) { return c.GetInstance("main").status().code(); };
  rpcs["ListInstances"] = [](BanditClient& c) { return c.ListInstances(0, "").status().code(); };
  rpcs["DeleteInstance"] = [](BanditClient& c) { return c.DeleteInstance("nosuch").code(); };
  rpcs["ResetInstance"] = [](BanditClient& c) { return c.ResetInstance("nosuch").status().code(); };
  rpcs["AddArms"] = [](BanditClient& c) {
    v1::AddArmsRequest r;
    r.set_name("nosuch");
    r.add_arms()->set_id("z");
    return c.AddArms(r).status().code();
  };
  rpcs["RemoveArms"] = [](BanditClient& c) {
    v1::RemoveArmsRequest r;
    r.set_name("nosuch");
    r.add_arm_ids("z");
    return c.RemoveArms(r).status().code();
  };
  rpcs["SetMixtureReference"] = [](BanditClient& c) {
    v1::SetMixtureReferenceRequest r;
    r.set_name("nosuch");
    r.add_embeddings()->add_values(0.5);
    return c.SetMixtureReference(r).status().code();
  };
  rpcs["AddShadow"] = [](BanditClient& c) {
    v1::AddShadowRequest r;
    r.set_name("nosuch");
    r.set_shadow("s");
    r.mutable_config()->mutable_policy()->mutable_ucb1();
    return c.AddShadow(r).status().code();
  };
  rpcs["RemoveShadow"] = [](BanditClient& c) {
    v1::RemoveShadowRequest r;
    r.set_name("nosuch");
    r.set_shadow("s");
    return c.RemoveShadow(r).status().code();
  };
  rpcs["PromoteShadow"] = [](BanditClient& c) {
    v1::PromoteShadowRequest r;
    r.set_name("nosuch");
    r.set_shadow("s");
    return c.PromoteShadow(r).status().code();
  };
  rpcs["ConfigureInstance"] = [](BanditClient& c) {
    v1::ConfigureInstanceRequest r;
    r.set_name("nosuch");
    r.set_learning_mode(v1::APPRENTICE);
    return c.ConfigureInstance(r).status().code();
  };
  rpcs["Select"] = [](BanditClient& c) {
    v1::SelectRequest r;
    r.set_instance("main");
    return c.Select(r).status().code();
  };
  rpcs["Activate"] = [](BanditClient& c) {
    v1::ActivateRequest r;
    r.set_instance("main");
    r.set_event_id("nosuch");
    return c.Activate(r).status().code();
  };
  rpcs["Update"] = [](BanditClient& c) {
    v1::UpdateRequest r;
    r.set_instance("main");
    r.mutable_direct()->set_arm_id("0");
    r.set_reward(1);
    return c.Update(r).status().code();
  };
  rpcs["SelectBatch"] = [](BanditClient& c) {
    v1::SelectBatchRequest r;
    r.add_requests()->set_instance("main");
    return c.SelectBatch(r).status().code();
  };
  rpcs["UpdateBatch"] = [](BanditClient& c) {
    v1::UpdateBatchRequest r;
    auto* u = r.add_requests();
    u->set_instance("main");
    u->mutable_direct()->set_arm_id("1");
    u->set_reward(0);
    return c.UpdateBatch(r).status().code();
  };
  rpcs["SnapshotInstances"] = raw([](v1::BanditService::Stub& s, grpc::ClientContext* ctx) {
    v1::SnapshotInstancesRequest r;
    v1::SnapshotInstancesResponse resp;
    return s.SnapshotInstances(ctx, r, &resp);
  });
  rpcs["ExportInstance"] = raw([](v1::BanditService::Stub& s, grpc::ClientContext* ctx) {
    v1::ExportInstanceRequest r;
    r.set_name("main");
    v1::ExportInstanceResponse resp;
    return s.ExportInstance(ctx, r, &resp);
  });
  rpcs["ExportDecisionLog"] = [](BanditClient& c) {
    v1::ExportDecisionLogRequest r;
    r.set_name("main");
    return c.ExportDecisionLog(r, [](const v1::LoggedDecision&) { return absl::OkStatus(); })
        .code();
  };
  // Each request on the stream is checked as its unary call: the answer carries the code.
  rpcs["Rounds"] = [](BanditClient& c) {
    auto stream = c.OpenRoundStream("main");
    if (!stream.ok()) return stream.status().code();
    v1::RoundRequest r;
    r.mutable_select()->set_instance("main");
    if (absl::Status sent = (*stream)->Send(r); !sent.ok()) return sent.code();
    auto answer = (*stream)->Receive();
    if (!answer.ok()) return answer.status().code();
    const StatusCode code = bandit::client::StatusOf(*answer).code();
    return code != StatusCode::kOk ? code : (*stream)->Close().code();
  };
  rpcs["SetLearningPolicy"] = raw([](v1::BanditService::Stub& s, grpc::ClientContext* ctx) {
    v1::SetLearningPolicyRequest r;
    r.set_name("main");
    r.set_arguments("--cb_explore_adf");
    v1::Instance resp;
    return s.SetLearningPolicy(ctx, r, &resp);
  });
  rpcs["CreateEvaluation"] = raw([](v1::BanditService::Stub& s, grpc::ClientContext* ctx) {
    v1::CreateEvaluationRequest r;
    r.set_instance("main");
    r.set_name("e");
    r.set_end_ms(1);
    v1::Evaluation resp;
    return s.CreateEvaluation(ctx, r, &resp);
  });
  rpcs["GetEvaluation"] = raw([](v1::BanditService::Stub& s, grpc::ClientContext* ctx) {
    v1::GetEvaluationRequest r;
    r.set_instance("main");
    r.set_id("nosuch");
    v1::Evaluation resp;
    return s.GetEvaluation(ctx, r, &resp);
  });
  rpcs["ListEvaluations"] = raw([](v1::BanditService::Stub& s, grpc::ClientContext* ctx) {
    v1::ListEvaluationsRequest r;
    r.set_instance("main");
    v1::ListEvaluationsResponse resp;
    return s.ListEvaluations(ctx, r, &resp);
  });
  rpcs["DeleteEvaluation"] = raw([](v1::BanditService::Stub& s, grpc::ClientContext* ctx) {
    v1::DeleteEvaluationRequest r;
    r.set_instance("main");
    r.set_id("nosuch");
    v1::DeleteEvaluationResponse resp;
    return s.DeleteEvaluation(ctx, r, &resp);
  });
  rpcs["ImportInstance"] = raw([](v1::BanditService::Stub& s, grpc::ClientContext* ctx) {
    v1::ImportInstanceRequest r;
    r.set_snapshot("not a snapshot");
    v1::Instance resp;
    return s.ImportInstance(ctx, r, &resp);
  });
  return rpcs;
}

server::Role Needs(const std::string& rpc) {
  if (rpc == "GetInstance" || rpc == "ListInstances" || rpc == "GetEvaluation" ||
      rpc == "ListEvaluations")
    return server::Role::kReader;
  if (rpc == "Select" || rpc == "Update" || rpc == "Activate" || rpc == "SelectBatch" ||
      rpc == "UpdateBatch" || rpc == "Rounds")
    return server::Role::kWriter;
  return server::Role::kAdmin;
}

TEST_F(SecurityTest, EveryRpcEveryAuthOutcomeOverTls) {
  ServerProcess server({"--tls_cert=" + certs_->server_pem, "--tls_key=" + certs_->server_key,
                        "--tokens_file=" + tokens_file_});
  ASSERT_TRUE(server.running()) << server.Log();
  {
    BanditClient admin(server.target(), Tls(kAdmin));
    v1::CreateInstanceRequest r;
    r.set_name("main");
    r.mutable_config()->mutable_policy()->mutable_ucb1();
    r.mutable_config()->mutable_policy()->set_num_arms(2);
    ASSERT_TRUE(admin.CreateInstance(r).ok());
  }
  const auto rpcs = EveryRpc();
  ASSERT_EQ(rpcs.size(), static_cast<size_t>(server::Rpc::kCount));

  // Health stays open for load balancers: no token needed.
  BanditClient anon(server.target(), Tls());
  auto health = anon.Health();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, grpc::health::v1::HealthCheckResponse::SERVING);

  BanditClient unknown(server.target(), Tls(kUnknown));
  BanditClient reader(server.target(), Tls(kReader));
  BanditClient writer(server.target(), Tls(kWriter));
  BanditClient admin(server.target(), Tls(kAdmin));
  for (const auto& [name, call] : rpcs) {
    SCOPED_TRACE(name);
    EXPECT_EQ(call(anon), StatusCode::kUnauthenticated);
    EXPECT_EQ(call(unknown), StatusCode::kUnauthenticated);
    const server::Role need = Needs(name);
    for (auto [client, role] :
         {std::pair{&reader, server::Role::kReader}, std::pair{&writer, server::Role::kWriter},
          std::pair{&admin, server::Role::kAdmin}}) {
      SCOPED_TRACE(server::RoleName(role));
      const StatusCode code = call(*client);
      if (static_cast<int>(role) < static_cast<int>(need)) {
        EXPECT_EQ(code, StatusCode::kPermissionDenied);
      } else {
        // Authorized: whatever the request logic says, never an auth code.
        EXPECT_NE(code, StatusCode::kUnauthenticated);
        EXPECT_NE(code, StatusCode::kPermissionDenied);
        EXPECT_NE(code, StatusCode::kUnavailable);
      }
    }
  }
  // The right role really does the work.
  v1::SelectRequest sel;
  sel.set_instance("main");
  auto d = writer.Select(sel);
  ASSERT_TRUE(d.ok()) << d.status();
  v1::UpdateRequest up;
  up.set_instance("main");
  up.set_event_id(d->event_id());
  up.set_reward(1);
  EXPECT_TRUE(writer.Update(up).ok());
  auto got = reader.GetInstance("main");
  ASSERT_TRUE(got.ok());
  EXPECT_GE(got->stats().updates(), 1);

  // A malformed header is UNAUTHENTICATED, and the message never echoes a token.
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Basic " + kAdmin);
  v1::GetInstanceRequest gr;
  gr.set_name("main");
  v1::Instance gi;
  grpc::Status st = reader.stub().GetInstance(&ctx, gr, &gi);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(st.error_message().find(kAdmin), std::string::npos);
  // PERMISSION_DENIED names the token's label, not the token.
  v1::CreateInstanceRequest cr;
  cr.set_name("x");
  auto denied = writer.CreateInstance(cr);
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(denied.status().message().find("'app'"), absl::string_view::npos) << denied.status();
  EXPECT_EQ(denied.status().message().find(kWriter), absl::string_view::npos);

  // Tokens appear neither in metrics nor in the log.
  const std::string metrics = HttpGet(server.metrics_port(), "/metrics");
  EXPECT_NE(metrics.find("code=\"UNAUTHENTICATED\""), std::string::npos);
  EXPECT_NE(metrics.find("code=\"PERMISSION_DENIED\""), std::string::npos);
  server.Stop(SIGTERM);
  const std::string log = server.Log();
  EXPECT_NE(log.find("auth: 3 tokens"), std::string::npos) << log;
  EXPECT_NE(log.find("tls=on"), std::string::npos) << log;
  for (const std::string& t : {kAdmin, kWriter, kReader, kUnknown}) {
    EXPECT_EQ(metrics.find(t), std::string::npos);
    EXPECT_EQ(log.find(t), std::string::npos);
  }
}

TEST_F(SecurityTest, TlsRefusesPlaintextAndForeignCa) {
  ServerProcess server({"--tls_cert=" + certs_->server_pem, "--tls_key=" + certs_->server_key});
  ASSERT_TRUE(server.running()) << server.Log();
  ClientOptions fast;
  fast.deadline = std::chrono::milliseconds(1500);
  // Plaintext client against a TLS port.
  BanditClient plain(server.target(), fast);
  EXPECT_EQ(plain.ListInstances(0, "").status().code(), StatusCode::kUnavailable);
  // A client that trusts another CA rejects the server's certificate.
  ClientOptions foreign = Tls();
  foreign.tls_root_certs = Pem(certs_->rogue_ca_pem);
  foreign.deadline = fast.deadline;
  EXPECT_EQ(BanditClient(server.target(), foreign).ListInstances(0, "").status().code(),
            StatusCode::kUnavailable);
  // TLS without client certificates: the right CA works; a client certificate is not needed
  // but also not refused.
  EXPECT_TRUE(BanditClient(server.target(), Tls()).ListInstances(0, "").ok());
  ClientOptions with_cert = Tls();
  with_cert.tls_client_cert = Pem(certs_->client_pem);
  with_cert.tls_client_key = Pem(certs_->client_key);
  EXPECT_TRUE(BanditClient(server.target(), with_cert).ListInstances(0, "").ok());
}

TEST_F(SecurityTest, MutualTlsRequiresAClientCertificateFromTheClientCa) {
  ServerProcess server({"--tls_cert=" + certs_->server_pem, "--tls_key=" + certs_->server_key,
                        "--tls_client_ca=" + certs_->ca_pem, "--tokens_file=" + tokens_file_});
  ASSERT_TRUE(server.running()) << server.Log();
  ClientOptions no_cert = Tls(kAdmin);
  no_cert.deadline = std::chrono::milliseconds(1500);
  EXPECT_EQ(BanditClient(server.target(), no_cert).ListInstances(0, "").status().code(),
            StatusCode::kUnavailable);
  ClientOptions rogue = no_cert;
  rogue.tls_client_cert = Pem(certs_->rogue_client_pem);
  rogue.tls_client_key = Pem(certs_->rogue_client_key);
  EXPECT_EQ(BanditClient(server.target(), rogue).ListInstances(0, "").status().code(),
            StatusCode::kUnavailable);
  ClientOptions good = Tls(kReader);
  good.tls_client_cert = Pem(certs_->client_pem);
  good.tls_client_key = Pem(certs_->client_key);
  BanditClient ok_client(server.target(), good);
  EXPECT_TRUE(ok_client.ListInstances(0, "").ok());
  // mTLS and tokens are independent: a valid certificate does not lift the role check.
  v1::CreateInstanceRequest cr;
  cr.set_name("x");
  EXPECT_EQ(ok_client.CreateInstance(cr).status().code(), StatusCode::kPermissionDenied);
  ClientOptions no_token = good;
  no_token.token.clear();
  EXPECT_EQ(BanditClient(server.target(), no_token).ListInstances(0, "").status().code(),
            StatusCode::kUnauthenticated);
  server.Stop(SIGTERM);
  EXPECT_NE(server.Log().find("tls=mutual"), std::string::npos);
}

TEST_F(SecurityTest, BanditctlTlsAndToken) {
  ServerProcess server({"--tls_cert=" + certs_->server_pem, "--tls_key=" + certs_->server_key,
                        "--tokens_file=" + tokens_file_});
  ASSERT_TRUE(server.running()) << server.Log();
  const std::string ctl = absl::StrCat(testing::EnvOr("BANDITCTL", "build/bin/banditctl"),
                                       " --target=", server.target(), " --tls_ca=", certs_->ca_pem,
                                       " --tls_server_name=localhost");
  int code = 0;
  std::string out = Shell(
      ctl + " --token=" + kAdmin + " create c1 --config='policy { ucb1 {} num_arms: 2 }'", &code);
  EXPECT_EQ(code, 0) << out;
  out = Shell("BANDIT_TOKEN=" + kReader + " " + ctl + " get c1", &code);
  EXPECT_EQ(code, 0) << out;
  out = Shell(ctl + " list", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("UNAUTHENTICATED"), std::string::npos) << out;
  out = Shell(ctl + " --token=" + kReader + " delete c1", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("PERMISSION_DENIED"), std::string::npos) << out;
  out = Shell(ctl + " health", &code);  // open without a token
  EXPECT_EQ(code, 0) << out;
}

TEST_F(SecurityTest, WarnsWhenListeningBeyondLoopbackWithoutTls) {
  {
    ServerProcess server({"--listen=0.0.0.0:0"});
    ASSERT_TRUE(server.running()) << server.Log();
    server.Stop(SIGTERM);
    EXPECT_NE(server.Log().find("WITHOUT TLS"), std::string::npos) << server.Log();
    EXPECT_NE(server.Log().find("WITHOUT authentication"), std::string::npos);
  }
  {
    ServerProcess server({"--listen=0.0.0.0:0", "--tls_cert=" + certs_->server_pem,
                          "--tls_key=" + certs_->server_key, "--tokens_file=" + tokens_file_});
    ASSERT_TRUE(server.running()) << server.Log();
    server.Stop(SIGTERM);
    EXPECT_EQ(server.Log().find("WARN"), std::string::npos) << server.Log();
  }
  {
    ServerProcess server(std::vector<std::string>{});  // the loopback default: no warning
    ASSERT_TRUE(server.running());
    server.Stop(SIGTERM);
    EXPECT_EQ(server.Log().find("WARN"), std::string::npos) << server.Log();
  }
}

TEST_F(SecurityTest, BadSecurityConfigRefusesToStart) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--tls_cert=" + certs_->server_pem},  // no key
        std::vector<std::string>{"--tls_cert=/nonexistent", "--tls_key=/nonexistent"},
        std::vector<std::string>{"--tls_key=" + certs_->server_key},  // key alone
        std::vector<std::string>{"--tokens_file=/nonexistent"},
        std::vector<std::string>{"--max_feature_dim=0"}}) {
    ServerProcess server(args);
    EXPECT_FALSE(server.running()) << args[0];
  }
}

}  // namespace
}  // namespace bandit
