#include "bench/loadgen/scale_test.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_format.h"
#include "bench/loadgen/measure.h"

namespace bandit::loadgen {
namespace {

absl::Status ToAbsl(const grpc::Status& s) {
  return s.ok() ? absl::OkStatus()
                : absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// Runs n asynchronous tasks with at most `window` in flight. start(i, done) issues task i and
// calls done(ok) from its completion.
void RunWindowed(int n, int window,
                 const std::function<void(int, std::function<void(bool)>)>& start,
                 int64_t* failures) {
  std::atomic<int> next{0};
  std::atomic<int64_t> failed{0};
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::function<void()> launch;
  launch = [&] {
    const int i = next.fetch_add(1);
    if (i >= n) return;
    start(i, [&](bool ok) {
      if (!ok) failed.fetch_add(1);
      launch();  // before counting this one: the caller may return once all are counted
      std::lock_guard<std::mutex> l(mu);
      if (++finished == n) cv.notify_all();
    });
  };
  for (int k = 0; k < std::min(n, window); ++k) launch();
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return finished == n; });
  *failures = failed.load();
}

// Keeps one unary async call's objects alive until its completion.
template <typename Req, typename Resp>
struct Call {
  grpc::ClientContext ctx;
  Req req;
  Resp resp;
  Call() { ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60)); }
};

}  // namespace

absl::Status EnsureInstance(v1::BanditService::Stub& stub, const std::string& name,
                            const v1::PolicyConfig& pc, bool fresh, int64_t capacity) {
  auto ctx = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return c;
  };
  if (fresh) {
    v1::DeleteInstanceRequest del;
    del.set_name(name);
    v1::DeleteInstanceResponse dr;
    auto c = ctx();
    (void)stub.DeleteInstance(c.get(), del, &dr);
  }
  v1::GetInstanceRequest get;
  get.set_name(name);
  v1::Instance inst;
  auto c1 = ctx();
  grpc::Status s = stub.GetInstance(c1.get(), get, &inst);
  if (s.ok()) return absl::OkStatus();
  if (s.error_code() != grpc::StatusCode::NOT_FOUND) return ToAbsl(s);
  v1::CreateInstanceRequest create;
  create.set_name(name);
  *create.mutable_config()->mutable_policy() = pc;
  if (capacity > 0) create.mutable_config()->mutable_pending()->set_capacity(capacity);
  auto c2 = ctx();
  return ToAbsl(stub.CreateInstance(c2.get(), create, &inst));
}

nlohmann::ordered_json RunInstancesTest(v1::BanditService::Stub& stub, const v1::PolicyConfig& pc,
                                        const Workload& w, int n, int window, int server_pid,
                                        bool cleanup) {
  nlohmann::ordered_json j;
  j["instances"] = n;
  auto name = [](int i) { return absl::StrFormat("scale-%05d", i); };
  const int64_t rss0 = RssBytes(server_pid);
  j["rss_before_bytes"] = rss0;

  // 1. create
  int64_t failed = 0;
  auto t0 = Clock::now();
  RunWindowed(
      n, window,
      [&](int i, std::function<void(bool)> done) {
        auto* call = new Call<v1::CreateInstanceRequest, v1::Instance>();
        call->req.set_name(name(i));
        *call->req.mutable_config()->mutable_policy() = pc;
        stub.async()->CreateInstance(
            &call->ctx, &call->req, &call->resp, [call, done](grpc::Status s) {
              // ALREADY_EXISTS: left over from an earlier run, still served.
              const bool ok = s.ok() || s.error_code() == grpc::ALREADY_EXISTS;
              delete call;
              done(ok);
            });
      },
      &failed);
  double secs = Seconds(Clock::now() - t0);
  const int64_t rss1 = RssBytes(server_pid);
  j["create"] = {{"seconds", secs}, {"per_s", n / secs}, {"failed", failed}};
  j["rss_after_create_bytes"] = rss1;

  // 2. list every page
  t0 = Clock::now();
  int64_t listed = 0, pages = 0;
  std::string token;
  do {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::ListInstancesRequest req;
    req.set_page_size(1000);
    req.set_page_token(token);
    v1::ListInstancesResponse resp;
    grpc::Status s = stub.ListInstances(&ctx, req, &resp);
    if (!s.ok()) {
      j["list_error"] = s.error_message();
      break;
    }
    for (const auto& inst : resp.instances())
      if (inst.name().rfind("scale-", 0) == 0) ++listed;
    ++pages;
    token = resp.next_page_token();
  } while (!token.empty());
  secs = Seconds(Clock::now() - t0);
  j["list"] = {{"seconds", secs}, {"pages", pages}, {"listed", listed}};

  // 3. serve: one Select + Update round on every instance
  std::mutex lat_mu;
  std::vector<float> round_us;
  round_us.reserve(n);
  t0 = Clock::now();
  RunWindowed(
      n, window,
      [&](int i, std::function<void(bool)> done) {
        auto* sel = new Call<v1::SelectRequest, v1::Decision>();
        sel->req = w.requests[i % w.requests.size()];
        sel->req.set_instance(name(i));
        const auto start = Clock::now();
        stub.async()->Select(
            &sel->ctx, &sel->req, &sel->resp, [&, sel, done, start, i](grpc::Status s) {
              if (!s.ok()) {
                delete sel;
                done(false);
                return;
              }
              Gen g(i + 1);
              auto* upd = new Call<v1::UpdateRequest, v1::UpdateResponse>();
              upd->req.set_instance(name(i));
              upd->req.set_event_id(sel->resp.event_id());
              upd->req.set_reward(w.Reward(sel->req, sel->resp, g));
              delete sel;
              stub.async()->Update(
                  &upd->ctx, &upd->req, &upd->resp, [&, upd, done, start](grpc::Status s) {
                    delete upd;
                    if (s.ok()) {
                      std::lock_guard<std::mutex> l(lat_mu);
                      round_us.push_back(static_cast<float>(Seconds(Clock::now() - start) * 1e6));
                    }
                    done(s.ok());
                  });
            });
      },
      &failed);
  secs = Seconds(Clock::now() - t0);
  const int64_t rss2 = RssBytes(server_pid);
  j["serve"] = {{"seconds", secs},
                {"rounds_per_s", n / secs},
                {"failed", failed},
                {"round_latency_us", Percentiles(round_us)}};
  j["rss_after_serve_bytes"] = rss2;

  // 4. what the policy itself reports as its state size
  {
    grpc::ClientContext ctx;
    v1::GetInstanceRequest req;
    req.set_name(name(0));
    v1::Instance inst;
    if (stub.GetInstance(&ctx, req, &inst).ok())
      j["policy_state_bytes"] = inst.stats().state_bytes();
  }
  if (rss0 > 0) {
    j["bytes_per_instance_created"] = static_cast<double>(rss1 - rss0) / n;
    j["bytes_per_instance_served"] = static_cast<double>(rss2 - rss0) / n;
  }
  if (cleanup) {
    RunWindowed(
        n, window,
        [&](int i, std::function<void(bool)> done) {
          auto* call = new Call<v1::DeleteInstanceRequest, v1::DeleteInstanceResponse>();
          call->req.set_name(name(i));
          stub.async()->DeleteInstance(&call->ctx, &call->req, &call->resp,
                                       [call, done](grpc::Status s) {
                                         delete call;
                                         done(s.ok());
                                       });
        },
        &failed);
    j["deleted_failed"] = failed;
    j["rss_after_delete_bytes"] = RssBytes(server_pid);
  }
  return j;
}

}  // namespace bandit::loadgen
