// ctest deploy_prometheus_integration: the real banditd and a real Prometheus server on loopback.
// Prometheus runs deploy/prometheus/prometheus.yml and alerts.yml (targets and intervals rewritten
// for the test), scraping banditd's /metrics every 200 ms. The test sends a known number of
// selects and updates with known rewards and reported optima, then reads everything back through
// Prometheus' HTTP API: counts, reward sums and regret must equal what was sent. Estimated regret
// is compared with an in-process replica of the same policy (same config and seed) fed the same
// sequence. Finally every dashboard query and alert rule is evaluated by this Prometheus.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/cpp/bandit_client.h"
#include "core/registry.h"
#include "tests/common/temp_dir.h"
#include "tests/integration/server_process.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = bandit::v1;
using bandit::testing::EnvOr;
using bandit::testing::ServerProcess;
using nlohmann::json;

std::string SourceDir() { return EnvOr("BANDIT_SOURCE_DIR", "."); }

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// Minimal HTTP/1.0 GET on 127.0.0.1. Returns {status, body}; status 0 when unreachable.
std::pair<int, std::string> HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return {0, ""};
  }
  const std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return {0, ""};
  }
  std::string resp;
  char buf[65536];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) resp.append(buf, n);
  close(fd);
  const auto sp = resp.find(' ');
  const auto body = resp.find("\r\n\r\n");
  if (sp == std::string::npos || body == std::string::npos) return {0, ""};
  return {std::atoi(resp.c_str() + sp + 1), resp.substr(body + 4)};
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// A Prometheus server running the deploy/ configuration against one banditd metrics port.
class PrometheusProcess {
 public:
  explicit PrometheusProcess(int banditd_metrics_port) {
    dir_ = bandit::testing::NewTempDir("deploy-prom");
    const std::string deploy = SourceDir() + "/deploy/prometheus";
    fs::copy_file(deploy + "/alerts.yml", dir_ + "/alerts.yml");
    for (int attempt = 0; attempt < 3 && port_ == 0; ++attempt) {
      const int port = FreePort();
      std::string config = ReadFile(deploy + "/prometheus.yml");
      const std::string before = config;
      config = absl::StrReplaceAll(
          config, {{"banditd:9464", absl::StrCat("127.0.0.1:", banditd_metrics_port)},
                   {"localhost:9090", absl::StrCat("127.0.0.1:", port)},
                   {"scrape_interval: 5s", "scrape_interval: 200ms"},
                   {"evaluation_interval: 15s", "evaluation_interval: 500ms"}});
      rewritten_ =
          config != before && config.find("200ms") != std::string::npos &&
          config.find("500ms") != std::string::npos &&
          config.find(absl::StrCat("127.0.0.1:", banditd_metrics_port)) != std::string::npos;
      std::ofstream(dir_ + "/prometheus.yml") << config;
      std::vector<std::string> args = {
          EnvOr("PROMETHEUS", "prometheus"), "--config.file=" + dir_ + "/prometheus.yml",
          "--storage.tsdb.path=" + dir_ + "/data",
          absl::StrCat("--web.listen-address=127.0.0.1:", port), "--log.level=warn"};
      pid_ = fork();
      if (pid_ == 0) {
        const std::string log = dir_ + "/prometheus.log";
        freopen(log.c_str(), "a", stderr);
        freopen(log.c_str(), "a", stdout);
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execvp(argv[0], argv.data());
        _exit(127);
      }
      for (int i = 0; i < 300; ++i) {  // up to 30 s
        if (HttpGet(port, "/-/ready").first == 200) {
          port_ = port;
          break;
        }
        int status;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          break;  // e.g. the port was taken meanwhile: try another
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (port_ == 0) Stop();
    }
  }
  ~PrometheusProcess() {
    Stop();
    fs::remove_all(dir_);
  }
  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  int port() const { return port_; }
  bool rewritten() const { return rewritten_; }
  std::string Log() const { return ReadFile(dir_ + "/prometheus.log"); }

  // Instant query; returns the parsed "data" object or nullopt (with the error in *error).
  std::optional<json> Query(const std::string& expr, std::string* error = nullptr) const {
    auto [code, body] = HttpGet(port_, "/api/v1/query?query=" + UrlEncode(expr));
    json j = json::parse(body, nullptr, false);
    if (code != 200 || j.is_discarded() || j.value("status", "") != "success") {
      if (error) *error = absl::StrCat("HTTP ", code, ": ", body);
      return std::nullopt;
    }
    return j["data"];
  }
  // Prometheus hands targets to the scrape manager a few seconds after start; wait for the first
  // successful scrape of banditd.
  bool WaitUntilScraping() const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      if (Value(R"(up{job="banditd"})") == 1.0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  // The value of a query that must return exactly one sample; nullopt otherwise.
  std::optional<double> Value(const std::string& expr) const {
    auto d = Query(expr);
    if (!d || (*d)["resultType"] != "vector" || (*d)["result"].size() != 1) return std::nullopt;
    return std::stod((*d)["result"][0]["value"][1].get<std::string>());
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool rewritten_ = false;
};

struct Expected {
  int64_t decisions = 0, updates = 0, rejected = 0, pending = 0;
  double reward_sum = 0, pseudo_regret = 0, estimated_regret = 0;
};

class DeployPrometheusTest : public ::testing::Test {
 protected:
  // Creates `name` with `config` and an identical in-process replica of its policy.
  void Create(const std::string& name, v1::InstanceConfig config) {
    v1::CreateInstanceRequest req;
    req.set_name(name);
    *req.mutable_config() = config;
    auto created = client_->CreateInstance(req);
    ASSERT_TRUE(created.ok()) << created.status();
    auto replica = bandit::CreatePolicy(created->config().policy(), created->config().seed());
    ASSERT_TRUE(replica.ok()) << replica.status();
    replicas_[name] = *std::move(replica);
  }

  // One Select on the server and on the replica (which must choose the same arm).
  v1::Decision Select(const std::string& name) {
    v1::SelectRequest req;
    req.set_instance(name);
    auto d = client_->Select(req);
    EXPECT_TRUE(d.ok()) << d.status();
    auto local = replicas_[name]->Select(bandit::SelectContext{});
    EXPECT_TRUE(local.ok()) << local.status();
    if (!d.ok() || !local.ok()) return {};
    EXPECT_EQ(d->arm_index(), local->arm) << "replica diverged from the server";
    auto& e = expected_[name];
    ++e.decisions;
    ++e.pending;
    if (std::isfinite(local->estimated_gap)) e.estimated_regret += local->estimated_gap;
    local_[d->event_id()] = *std::move(local);
    return *d;
  }

  void Update(const std::string& name, const v1::Decision& d, double reward,
              std::optional<double> best, std::optional<double> expected) {
    v1::UpdateRequest req;
    req.set_instance(name);
    req.set_event_id(d.event_id());
    req.set_reward(reward);
    if (best) req.set_best_expected_reward(*best);
    if (expected) req.set_expected_reward(*expected);
    auto r = client_->Update(req);
    ASSERT_TRUE(r.ok()) << r.status();
    const bandit::Decision& local = local_[d.event_id()];
    bandit::Observation obs;
    obs.arm = local.arm;
    obs.arm_id = local.arm_id;
    obs.memo = local.memo;
    obs.reward = reward;
    ASSERT_TRUE(replicas_[name]->Update(obs).ok());
    auto& e = expected_[name];
    ++e.updates;
    --e.pending;
    e.reward_sum += reward;
    if (best) e.pseudo_regret += *best - (expected ? *expected : reward);
  }

  std::unique_ptr<bandit::client::BanditClient> client_;
  std::map<std::string, std::unique_ptr<bandit::Policy>> replicas_;
  std::map<std::string, bandit::Decision> local_;
  std::map<std::string, Expected> expected_;
};

TEST_F(DeployPrometheusTest, CountsRewardsAndRegretSeenThroughPrometheusEqualWhatWasSent) {
  ServerProcess server;
  ASSERT_TRUE(server.running()) << server.Log();
  PrometheusProcess prom(server.metrics_port());
  ASSERT_TRUE(prom.rewritten()) << "deploy/prometheus/prometheus.yml no longer has the "
                                   "'banditd:9464', 'scrape_interval: 5s' and "
                                   "'evaluation_interval: 15s' this test rewrites";
  ASSERT_NE(prom.port(), 0) << "Prometheus did not become ready:\n" << prom.Log();
  ASSERT_TRUE(prom.WaitUntilScraping()) << "Prometheus never scraped banditd:\n" << prom.Log();
  client_ = std::make_unique<bandit::client::BanditClient>(server.target());

  // Two instances: UCB1 (deterministic) and epsilon-greedy (random, seeded).
  v1::InstanceConfig ucb;
  ucb.mutable_policy()->mutable_ucb1();
  ucb.mutable_policy()->set_num_arms(3);
  ucb.set_seed(7);
  ASSERT_NO_FATAL_FAILURE(Create("prom-ucb1", ucb));
  v1::InstanceConfig eps;
  eps.mutable_policy()->mutable_epsilon_greedy()->set_epsilon(0.3);
  eps.mutable_policy()->set_num_arms(4);
  eps.set_seed(11);
  ASSERT_NO_FATAL_FAILURE(Create("prom-eps", eps));

  // Arm means are dyadic so every sum below is exact in binary floating point.
  const double ucb_means[] = {0.25, 0.5, 0.75};
  for (int t = 0; t < 40; ++t) {
    const v1::Decision d = Select("prom-ucb1");
    if (t >= 30) continue;  // the last 10 decisions stay pending
    const double mean = ucb_means[d.arm_index()];
    const double reward = (t % 4 == 0) ? mean + 0.25 : mean - 0.125;  // known noise
    ASSERT_NO_FATAL_FAILURE(Update("prom-ucb1", d, reward, 0.75, mean));
  }
  const double eps_means[] = {0.5, 0.125, 0.875, 0.25};
  std::vector<v1::Decision> eps_decisions;
  for (int t = 0; t < 25; ++t) {
    const v1::Decision d = Select("prom-eps");
    eps_decisions.push_back(d);
    const double mean = eps_means[d.arm_index()];
    const double reward = (t % 3 == 0) ? 1.0 : 0.0;
    if (t % 5 == 4) {  // no optimum reported: no pseudo-regret for this round
      ASSERT_NO_FATAL_FAILURE(Update("prom-eps", d, reward, std::nullopt, std::nullopt));
    } else if (t % 5 == 3) {  // optimum reported without expected_reward: regret uses the reward
      ASSERT_NO_FATAL_FAILURE(Update("prom-eps", d, reward, 0.875, std::nullopt));
    } else {
      ASSERT_NO_FATAL_FAILURE(Update("prom-eps", d, reward, 0.875, mean));
    }
  }
  // Rejected rewards: 3 unknown event ids (NOT_FOUND), 2 duplicates (FAILED_PRECONDITION).
  for (int i = 0; i < 5; ++i) {
    v1::UpdateRequest req;
    req.set_instance("prom-eps");
    req.set_event_id(i < 3 ? absl::StrCat("no-such-event-", i) : eps_decisions[i].event_id());
    req.set_reward(1.0);
    auto r = client_->Update(req);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(),
              i < 3 ? absl::StatusCode::kNotFound : absl::StatusCode::kFailedPrecondition);
    ++expected_["prom-eps"].rejected;
  }
  // Sanity of the scenario itself: regret is not trivially zero.
  ASSERT_GT(expected_["prom-ucb1"].pseudo_regret, 0);
  ASSERT_GT(expected_["prom-ucb1"].estimated_regret, 0);
  ASSERT_GT(expected_["prom-eps"].pseudo_regret, 0);

  // Wait until Prometheus has scraped the final state (last counters to move).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto scraped = [&] {
    auto a = prom.Value(R"(sum(bandit_rpc_duration_seconds_count{method="Update"}))");
    auto b = prom.Value(R"(bandit_instance_rejected_rewards_total{instance="prom-eps"})");
    return a && *a == 60 && b && *b == 5;
  };
  while (!scraped() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(scraped()) << "Prometheus never saw the final counts:\n" << prom.Log();

  auto near = [](double want) {
    return ::testing::DoubleNear(want, 1e-9 * std::max(1.0, std::abs(want)));
  };
  for (const auto& [name, e] : expected_) {
    SCOPED_TRACE(name);
    const std::string sel = absl::StrCat("{instance=\"", name, "\"}");
    auto v = [&](const std::string& metric) {
      auto x = prom.Value(metric + sel);
      EXPECT_TRUE(x.has_value()) << metric << sel << " has no single sample";
      return x.value_or(std::nan(""));
    };
    EXPECT_EQ(v("bandit_instance_decisions_total"), e.decisions);
    EXPECT_EQ(v("bandit_instance_updates_total"), e.updates);
    EXPECT_EQ(v("bandit_instance_pending_decisions"), e.pending);
    EXPECT_EQ(v("bandit_instance_rejected_rewards_total"), e.rejected);
    EXPECT_EQ(v("bandit_instance_expired_decisions_total"), 0);
    EXPECT_THAT(v("bandit_instance_reward_sum"), near(e.reward_sum));
    EXPECT_THAT(v("bandit_instance_pseudo_regret"), near(e.pseudo_regret));
    EXPECT_THAT(v("bandit_instance_estimated_regret"), near(e.estimated_regret));
    EXPECT_GT(v("bandit_instance_state_bytes"), 0);
  }
  EXPECT_EQ(prom.Value(R"(bandit_instance_info{instance="prom-ucb1",policy="ucb1"})"), 1.0);
  EXPECT_EQ(prom.Value(R"(bandit_instance_info{instance="prom-eps",policy="epsilon_greedy"})"),
            1.0);
  EXPECT_EQ(prom.Value("bandit_instances"), 2.0);

  // RPC counts by method and code (histogram _count), and the +Inf bucket agrees.
  auto rpc = [&](const std::string& method, const std::string& code) {
    return prom.Value(absl::StrCat("sum(bandit_rpc_duration_seconds_count{method=\"", method,
                                   "\",code=\"", code, "\"})"));
  };
  EXPECT_EQ(rpc("CreateInstance", "OK"), 2.0);
  EXPECT_EQ(rpc("Select", "OK"), 65.0);
  EXPECT_EQ(rpc("Update", "OK"), 55.0);
  EXPECT_EQ(rpc("Update", "NOT_FOUND"), 3.0);
  EXPECT_EQ(rpc("Update", "FAILED_PRECONDITION"), 2.0);
  EXPECT_EQ(
      prom.Value(R"(sum(bandit_rpc_duration_seconds_bucket{method="Select",code="OK",le="+Inf"}))"),
      65.0);
  auto select_sum = prom.Value(R"(sum(bandit_rpc_duration_seconds_sum{method="Select"}))");
  ASSERT_TRUE(select_sum.has_value());
  EXPECT_GT(*select_sum, 0);
  EXPECT_EQ(prom.Value("bandit_build_info"), 1.0);
  EXPECT_EQ(prom.Value(R"(up{job="banditd"})"), 1.0);
}

// Every dashboard panel query and template variable is valid PromQL for a real Prometheus and,
// except for metrics that only some instances, the storage layer or cluster nodes export, returns
// series from a live banditd (check_dashboard.py checks the cluster names on a cluster node). Every alert rule evaluates without error.
TEST_F(DeployPrometheusTest, DashboardQueriesAndAlertRulesEvaluate) {
  ServerProcess server;
  ASSERT_TRUE(server.running()) << server.Log();
  PrometheusProcess prom(server.metrics_port());
  ASSERT_NE(prom.port(), 0) << "Prometheus did not become ready:\n" << prom.Log();
  ASSERT_TRUE(prom.WaitUntilScraping()) << "Prometheus never scraped banditd:\n" << prom.Log();
  client_ = std::make_unique<bandit::client::BanditClient>(server.target());
  v1::InstanceConfig ucb;
  ucb.mutable_policy()->mutable_ucb1();
  ucb.mutable_policy()->set_num_arms(3);
  ASSERT_NO_FATAL_FAILURE(Create("dash", ucb));
  v1::UpdateRequest bad;  // one error so the error-ratio panel has a non-OK series
  bad.set_instance("dash");
  bad.set_event_id("missing");
  ASSERT_FALSE(client_->Update(bad).ok());
  // Traffic for a few seconds so rate() windows hold several scrapes.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  for (int t = 0; std::chrono::steady_clock::now() < until; ++t) {
    const v1::Decision d = Select("dash");
    ASSERT_NO_FATAL_FAILURE(Update("dash", d, t % 2, 0.75, 0.5));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  const json dash = json::parse(ReadFile(SourceDir() + "/deploy/grafana/dashboards/bandit.json"));
  std::vector<std::pair<std::string, std::string>> exprs;  // (panel title, expr)
  for (const auto& p : dash["panels"])
    for (const auto& t : p.value("targets", json::array()))
      exprs.emplace_back(p["title"].get<std::string>(), t["expr"].get<std::string>());
  ASSERT_GE(exprs.size(), 20u);
  // Prometheus needs a few scrapes inside the rate window before every rate() has two samples.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  for (const auto& [title, raw] : exprs) {
    const std::string expr = absl::StrReplaceAll(
        raw, {{"$__rate_interval", "5s"}, {"$instance", ".*"}, {"$method", ".*"}});
    SCOPED_TRACE(absl::StrCat(title, ": ", expr));
    std::string error;
    auto data = prom.Query(expr, &error);
    ASSERT_TRUE(data.has_value()) << error;
    const bool optional_series =
        expr.find("bandit_instance_summary") != std::string::npos ||  // mixtures only
        expr.find("bandit_snapshot_") != std::string::npos ||         // storage layer
        expr.find("bandit_journal_") != std::string::npos ||
        expr.find("bandit_last_snapshot_") != std::string::npos ||
        expr.find("bandit_storage_errors_total") != std::string::npos ||
        expr.find("bandit_cluster_") != std::string::npos;  // --cluster nodes only
    if (!optional_series) {
      EXPECT_FALSE((*data)["result"].empty()) << "no series";
    }
  }
  for (const auto& v : dash["templating"]["list"]) {
    // label_values(metric, label): the metric must have series carrying the label.
    const std::string q = v["query"]["query"];
    const auto open = q.find('('), comma = q.find(','), close = q.find(')');
    ASSERT_NE(close, std::string::npos) << q;
    const std::string metric = q.substr(open + 1, comma - open - 1);
    std::string label = q.substr(comma + 1, close - comma - 1);
    label.erase(0, label.find_first_not_of(' '));
    auto data = prom.Query(absl::StrCat("count by (", label, ") (", metric, ")"));
    ASSERT_TRUE(data.has_value()) << q;
    EXPECT_FALSE((*data)["result"].empty()) << q;
    for (const auto& r : (*data)["result"]) EXPECT_TRUE(r["metric"].contains(label)) << q;
  }

  // Rules: wait until every rule has been evaluated at least once; all must be healthy.
  json groups;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    auto [code, body] = HttpGet(prom.port(), "/api/v1/rules");
    json j = json::parse(body, nullptr, false);
    ASSERT_EQ(code, 200) << body;
    groups = j["data"]["groups"];
    bool all = !groups.empty();
    for (const auto& g : groups)
      for (const auto& r : g["rules"]) all = all && r.value("health", "") != "unknown";
    if (all || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  int rules = 0;
  for (const auto& g : groups)
    for (const auto& r : g["rules"]) {
      ++rules;
      EXPECT_EQ(r.value("health", ""), "ok") << r.dump();
      EXPECT_NE(r.value("state", ""), "firing") << r.dump();
    }
  // Every rule in deploy/prometheus/alerts.yml was loaded.
  const std::string alerts = ReadFile(SourceDir() + "/deploy/prometheus/alerts.yml");
  int listed = 0;
  for (size_t at = alerts.find("- alert:"); at != std::string::npos;
       at = alerts.find("- alert:", at + 1))
    ++listed;
  EXPECT_GE(listed, 8);
  EXPECT_EQ(rules, listed);
}

}  // namespace
