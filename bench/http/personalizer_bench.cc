// bandit-personalizer-bench: the same Rank over Personalizer's HTTP API and over gRPC's Select,
// against one running banditd (--http_listen), phases alternating in one run: requests per
// second and latency percentiles at a fixed number of requests in flight.
//
//   bandit-personalizer-bench --grpc=127.0.0.1:50051 --http_port=8080 --actions=50
//       --inflight=64 --seconds=10 --config='policy { linucb {} } feature_space { bits: 8 ... }'
//       [--server_pid=PID: also the server's CPU time per request, per phase]
//
// Each transport gets its own instance of `--config` (created here over gRPC), and every
// request carries the same JSON: a context of 3 namespaces and `--actions` actions of 4
// features each. Rewards are not sent (the pending table holds the decisions).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/text_format.h>
#include <httplib.h>
#include <unistd.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/cpp/bandit_client.h"
#include "server/api/http/personalizer_defaults.h"

ABSL_FLAG(std::string, grpc, "127.0.0.1:50051", "banditd gRPC address");
ABSL_FLAG(int, http_port, 8080, "banditd --http_listen port (127.0.0.1)");
ABSL_FLAG(int, actions, 50, "actions per Rank");
ABSL_FLAG(int, inflight, 64, "requests in flight (one thread and connection each)");
ABSL_FLAG(double, seconds, 10, "duration of each phase");
ABSL_FLAG(int, rounds, 2, "phases per transport (alternating HTTP, gRPC)");
ABSL_FLAG(bool, http_nodelay, true,
          "TCP_NODELAY on the HTTP clients' sockets, as gRPC sets on its own (cpp-httplib's client "
          "leaves Nagle on: it writes the headers and the body apart, and the body waits for the "
          "server's delayed ACK of the headers, 40 ms on Linux)");
ABSL_FLAG(int, server_pid, 0,
          "banditd's process id: each phase also reports the server's CPU time per request "
          "(user + system, from /proc), which other load on the machine does not change much");
ABSL_FLAG(std::string, config, "",
          "text-format InstanceConfig of both instances (empty = Personalizer's defaults, "
          "server/api/http/personalizer_defaults.h)");

namespace {

using Clock = std::chrono::steady_clock;

// HTTP requests that failed, by cause (printed to stderr after each HTTP phase).
// The cause says whether the request was its connection's first (every thread opens its
// connection at once when the phase starts) and whether it ended in the phase's first second.
absl::Mutex failures_mu;
std::map<std::string, int64_t> failures ABSL_GUARDED_BY(failures_mu);
std::atomic<Clock::rep> phase_start{0};

std::string Context(int user) {
  return absl::StrCat("[{\"User\":{\"kind\":\"k", user % 7, "\",\"age\":", 20 + user % 50,
                      "}},{\"Device\":{\"os\":\"os", user % 3, "\"}},{\"Time\":{\"hour\":\"h",
                      user % 24, "\"}}]");
}

std::string ActionFeatures(int a) {
  return absl::StrCat("[{\"Item\":{\"id\":\"item", a, "\",\"topic\":\"t", a % 9,
                      "\",\"words\":", 100 + a, ",\"fresh\":", a % 2 == 0 ? "true" : "false",
                      "}}]");
}

// CPU seconds (user + system) process `pid` has used, from /proc/PID/stat; 0 if unknown.
double CpuSeconds(int pid) {
  if (pid <= 0) return 0;
  std::FILE* f = std::fopen(absl::StrCat("/proc/", pid, "/stat").c_str(), "r");
  if (f == nullptr) return 0;
  char buf[4096] = {0};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr || n == 0) return 0;
  unsigned long long utime = 0, stime = 0;
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                  &stime) != 2)
    return 0;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct Result {
  double seconds = 0;
  std::vector<double> latencies_ms;
  int64_t errors = 0;
};

template <typename Call>
Result Run(int inflight, double seconds, Call call) {
  std::vector<std::vector<double>> lat(inflight);
  std::atomic<int64_t> errors{0};
  const auto start = Clock::now();
  phase_start = start.time_since_epoch().count();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(seconds));
  std::vector<std::thread> threads;
  for (int i = 0; i < inflight; ++i)
    threads.emplace_back([&, i] {
      auto state = call.Open();
      for (int n = 0; Clock::now() < end; ++n) {
        const auto t0 = Clock::now();
        const bool ok = call.Once(state, i * 1000003 + n);
        lat[i].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        if (!ok) ++errors;
      }
    });
  for (auto& t : threads) t.join();
  Result r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (auto& l : lat) r.latencies_ms.insert(r.latencies_ms.end(), l.begin(), l.end());
  std::sort(r.latencies_ms.begin(), r.latencies_ms.end());
  r.errors = errors;
  return r;
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int actions = absl::GetFlag(FLAGS_actions);
  const int inflight = absl::GetFlag(FLAGS_inflight);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const int port = absl::GetFlag(FLAGS_http_port);
  bandit::v1::InstanceConfig config = bandit::server::http::PersonalizerDefaultConfig();
  if (const std::string text = absl::GetFlag(FLAGS_config); !text.empty()) {
    config.Clear();
    if (!google::protobuf::TextFormat::ParseFromString(text, &config)) {
      std::fprintf(stderr, "--config is not a text-format bandit.v1.InstanceConfig\n");
      return 2;
    }
  }
  bandit::client::BanditClient admin(absl::GetFlag(FLAGS_grpc));
  const std::string suffix = absl::StrCat(::getpid());
  const std::string http_instance = "bench-http-" + suffix, grpc_instance = "bench-grpc-" + suffix;
  for (const std::string& name : {http_instance, grpc_instance}) {
    bandit::v1::CreateInstanceRequest req;
    req.set_name(name);
    *req.mutable_config() = config;
    if (auto s = admin.CreateInstance(req); !s.ok()) {
      std::fprintf(stderr, "CreateInstance %s: %s\n", name.c_str(), s.status().ToString().c_str());
      return 1;
    }
  }
  std::vector<std::string> features(actions);
  for (int a = 0; a < actions; ++a) features[a] = ActionFeatures(a);

  struct Http {
    int port;
    bool nodelay;
    std::string path;
    const std::vector<std::string>* features;
    // One thread's client and the requests answered since it last (re)connected: a failure
    // closes the connection and the next request opens a new one.
    struct Conn {
      std::unique_ptr<httplib::Client> client;
      int64_t answered = 0;
    };
    Conn Open() const {
      Conn c{std::make_unique<httplib::Client>("127.0.0.1", port)};
      c.client->set_keep_alive(true);
      c.client->set_read_timeout(60, 0);
      c.client->set_tcp_nodelay(nodelay);
      return c;
    }
    bool Once(Conn& c, int n) const {
      std::string body = absl::StrCat("{\"contextFeatures\":", Context(n), ",\"actions\":[");
      for (size_t a = 0; a < features->size(); ++a)
        absl::StrAppend(&body, a ? "," : "", "{\"id\":\"item", a, "\",\"features\":",
                        (*features)[a], "}");
      body += "]}";
      auto r = c.client->Post(path.c_str(), body, "application/json");
      const int64_t answered = c.answered;
      c.answered = r ? answered + 1 : 0;
      if (r && r->status == 201) return true;
      // What failed, for the report: the client library's error, or the status answered; whether
      // it was the connection's first request (a connection refused before it served, whatever
      // the time the failure showed) and whether it ended in the phase's first second.
      const bool first_second =
          Clock::now() - Clock::time_point(Clock::duration(phase_start.load())) <
          std::chrono::seconds(1);
      const std::string kind = absl::StrCat(
          r ? absl::StrCat("status ", r->status)
            : absl::StrCat("client error ", httplib::to_string(r.error())),
          answered == 0 ? " (first request of a connection, "
                        : " (on a connection that had answered, ",
          first_second ? "in the phase's first second)" : "after the first second)");
      absl::MutexLock lock(&failures_mu);
      ++failures[kind];
      return false;
    }
  } http{port, absl::GetFlag(FLAGS_http_nodelay), "/instances/" + http_instance + "/personalizer/v1.0/rank", &features};

  struct Grpc {
    std::string target, instance;
    const std::vector<std::string>* features;
    std::unique_ptr<bandit::client::BanditClient> Open() const {
      return std::make_unique<bandit::client::BanditClient>(target);
    }
    bool Once(std::unique_ptr<bandit::client::BanditClient>& c, int n) const {
      bandit::v1::SelectRequest req;
      req.set_instance(instance);
      req.set_return_scores(true);
      req.set_context(Context(n));
      for (size_t a = 0; a < features->size(); ++a) {
        bandit::v1::NamedAction* action = req.add_actions();
        action->set_id(absl::StrCat("item", a));
        action->set_features((*features)[a]);
      }
      return c->Select(req).ok();
    }
  } grpc{absl::GetFlag(FLAGS_grpc), grpc_instance, &features};

  const int server_pid = absl::GetFlag(FLAGS_server_pid);
  std::printf("transport,phase,requests,seconds,requests_per_s,p50_ms,p99_ms,errors%s\n",
              server_pid > 0 ? ",server_cpu_us_per_request" : "");
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    for (int t = 0; t < 2; ++t) {
      const double cpu_before = CpuSeconds(server_pid);
      const Result r = t == 0 ? Run(inflight, seconds, http) : Run(inflight, seconds, grpc);
      const double cpu = CpuSeconds(server_pid) - cpu_before;
      std::printf("%s,%d,%zu,%.2f,%.1f,%.2f,%.2f,%lld", t == 0 ? "http" : "grpc", round,
                  r.latencies_ms.size(), r.seconds, r.latencies_ms.size() / r.seconds,
                  Percentile(r.latencies_ms, 0.5), Percentile(r.latencies_ms, 0.99),
                  static_cast<long long>(r.errors));
      if (server_pid > 0)
        std::printf(",%.0f", r.latencies_ms.empty() ? 0 : 1e6 * cpu / r.latencies_ms.size());
      std::printf("\n");
      std::fflush(stdout);
      absl::MutexLock lock(&failures_mu);
      for (const auto& [kind, count] : failures)
        std::fprintf(stderr, "%s phase %d: %lld failed: %s\n", t == 0 ? "http" : "grpc", round,
                     static_cast<long long>(count), kind.c_str());
      failures.clear();
    }
  }
  for (const std::string& name : {http_instance, grpc_instance}) (void)admin.DeleteInstance(name);
  return 0;
}
