// bandit-loadgen: drives banditd (or bandit-echo, the ceiling) with the gRPC callback API and
// reports throughput and latency percentiles as JSON.
//
// Load model: --channels separate HTTP/2 connections, each with --inflight concurrent "slots".
// A slot runs one RPC at a time and starts its next RPC from the completion callback (closed
// loop), so the offered concurrency is exactly channels x inflight.
//
//   --mode=paired  every slot does Select then Update with the returned event id (one "round");
//                  with --batch=N it does SelectBatch(N) then UpdateBatch(N) (N rounds).
//   --mode=mix     every slot does Select with probability --select_fraction, otherwise Update of
//                  an event id some earlier Select returned (Select when none is waiting).
//   --instances=N  scale test: create N instances, list them all, serve one round on each,
//                  report RSS of --server_pid before/after and bytes per instance.
//
// Examples
//   bandit-loadgen --target=127.0.0.1:50051 --instance=lg --policy=glb_omd --d=20
//                  --arms=50 --channels=1 --inflight=64 --duration_s=10
//   bandit-loadgen --service=echo --target=127.0.0.1:7000 --d=20 --arms=50 --inflight=64
//   bandit-loadgen --target=... --instances=10000 --server_pid=1234
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/text_format.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "bandit/v1/service.grpc.pb.h"
#include "bench/loadgen/inprocess.h"
#include "core/registry.h"
#include "echo.grpc.pb.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "Server address host:port");
ABSL_FLAG(std::string, service, "bandit", "bandit (bandit.v1.BanditService) or echo (bandit.bench.Echo)");
ABSL_FLAG(std::string, instance, "loadgen", "Instance name (created if missing)");
ABSL_FLAG(bool, fresh, false, "Delete the instance first if it exists, then create it");
ABSL_FLAG(std::string, policy, "glb_omd",
          "Policy of a created instance: glb_omd, domd_glb, glm_ucb, linucb (use --d), "
          "epsilon_greedy, ucb1, thompson (use --arms), bkb, gp_ucb (--arms with --d features)");
ABSL_FLAG(std::string, policy_config, "",
          "Text-format bandit.v1.PolicyConfig; overrides --policy (requests still use --d/--arms)");
ABSL_FLAG(int32_t, d, 20, "Feature dimension (candidates, arm features, x)");
ABSL_FLAG(int32_t, arms, 50, "Candidates per Select (contextual) or arms of the arm set");
ABSL_FLAG(int64_t, pending_capacity, 0, "config.pending.capacity of a created instance (0 = server default)");
ABSL_FLAG(int32_t, channels, 1, "Number of channels (separate connections)");
ABSL_FLAG(int32_t, inflight, 64, "Concurrent RPCs per channel");
ABSL_FLAG(double, duration_s, 10.0, "Measured duration in seconds");
ABSL_FLAG(double, warmup_s, 1.0, "Warm-up before measuring, in seconds (not counted)");
ABSL_FLAG(std::string, mode, "paired", "paired (Select then Update = one round) or mix");
ABSL_FLAG(double, select_update_mix, 0.5, "mix mode: fraction of RPCs that are Select");
ABSL_FLAG(int32_t, batch, 1, "Items per RPC; > 1 uses SelectBatch/UpdateBatch");
ABSL_FLAG(int32_t, instances, 0, "Scale test with this many instances (instead of the load run)");
ABSL_FLAG(int32_t, server_pid, 0, "Server pid, to read its RSS and CPU time from /proc (optional)");
ABSL_FLAG(bool, cleanup, false, "Scale test: delete the instances at the end");
ABSL_FLAG(int64_t, deadline_ms, 10000, "Deadline of each RPC");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the request generator");
ABSL_FLAG(std::string, label, "", "Free text copied into the JSON");
ABSL_FLAG(bool, inprocess, false,
          "No server: time Select+Update of every registered policy in-process against t");
ABSL_FLAG(int64_t, inprocess_rounds, 100000, "--inprocess: last checkpoint t");
ABSL_FLAG(double, inprocess_budget_s, 6.0, "--inprocess: time budget per policy");
ABSL_FLAG(std::string, inprocess_only, "", "--inprocess: only cases whose name contains this");
ABSL_FLAG(std::string, out, "", "Write the JSON here (default: stdout)");

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;
namespace v1 = bandit::v1;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// ---------- small deterministic generator (no std distributions) ----------
struct Gen {
  std::mt19937_64 e;
  explicit Gen(uint64_t seed) : e(seed) {}
  double Uniform() { return static_cast<double>(e() >> 11) * 0x1.0p-53; }
  double Normal() {  // Box-Muller
    double u1 = Uniform(), u2 = Uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
};

// ---------- the workload: pre-built requests and a reward model ----------
struct Workload {
  bandit::ContextKind kind = bandit::ContextKind::kCandidates;
  int d = 20, arms = 50;
  std::vector<double> theta;                 // logistic reward model over features
  std::vector<v1::SelectRequest> requests;  // pool, reused cyclically

  double Reward(const v1::SelectRequest& req, const v1::Decision& dec, Gen& g) const {
    double z = 0.0;
    if (kind == bandit::ContextKind::kCandidates) {
      const int a = dec.arm_index();
      if (a >= 0 && a < req.candidates_size()) {
        const auto& v = req.candidates(a).values();
        for (int j = 0; j < v.size() && j < d; ++j) z += v[j] * theta[j];
      }
    } else if (kind == bandit::ContextKind::kPoint) {
      // Kernel selection: the label y = sign of the model.
      for (int j = 0; j < req.x_size() && j < d; ++j) z += req.x(j) * theta[j];
      return z >= 0 ? 1.0 : -1.0;
    } else {
      z = 4.0 * (static_cast<double>(dec.arm_index() + 1) / (arms + 1)) - 2.0;
    }
    return g.Uniform() < 1.0 / (1.0 + std::exp(-z)) ? 1.0 : 0.0;
  }
};

Workload MakeWorkload(bandit::ContextKind kind, int d, int arms, const std::string& instance,
                      uint64_t seed) {
  Workload w;
  w.kind = kind;
  w.d = d;
  w.arms = arms;
  Gen g(seed);
  w.theta.resize(d);
  double n = 0;
  for (auto& t : w.theta) {
    t = g.Normal();
    n += t * t;
  }
  for (auto& t : w.theta) t *= 3.0 / std::sqrt(n);
  const int pool = 64;
  for (int i = 0; i < pool; ++i) {
    v1::SelectRequest req;
    req.set_instance(instance);
    if (kind == bandit::ContextKind::kCandidates) {
      for (int a = 0; a < arms; ++a) {
        auto* c = req.add_candidates();
        double s = 0;
        std::vector<double> x(d);
        for (auto& v : x) {
          v = g.Normal();
          s += v * v;
        }
        for (auto& v : x) c->add_values(v / std::sqrt(s));
      }
    } else if (kind == bandit::ContextKind::kPoint) {
      for (int j = 0; j < d; ++j) req.add_x(g.Normal() / std::sqrt(static_cast<double>(d)));
    }
    w.requests.push_back(std::move(req));
  }
  return w;
}

v1::PolicyConfig PolicyConfigFromFlags(Gen& g) {
  v1::PolicyConfig c;
  const std::string text = absl::GetFlag(FLAGS_policy_config);
  if (!text.empty()) {
    if (!google::protobuf::TextFormat::ParseFromString(text, &c)) {
      std::fprintf(stderr, "--policy_config is not a text-format bandit.v1.PolicyConfig\n");
      std::exit(2);
    }
    return c;
  }
  const std::string p = absl::GetFlag(FLAGS_policy);
  const int d = absl::GetFlag(FLAGS_d), arms = absl::GetFlag(FLAGS_arms);
  auto feature_arms = [&] {
    for (int a = 0; a < arms; ++a) {
      auto* spec = c.add_arms();
      spec->set_id(std::to_string(a));
      for (int j = 0; j < d; ++j) spec->add_features(g.Uniform());
    }
  };
  // GLB family: S = 3 = ||theta*|| of the reward model below (as in bench/micro/glb_bench.cc).
  if (p == "glb_omd") {
    c.mutable_glb_omd()->set_dimension(d);
    c.mutable_glb_omd()->set_s(3);
  } else if (p == "domd_glb") {
    c.mutable_domd_glb()->set_dimension(d);
    c.mutable_domd_glb()->set_s(3);
  } else if (p == "glm_ucb") {
    c.mutable_glm_ucb()->set_dimension(d);
    c.mutable_glm_ucb()->set_s(3);
  } else if (p == "linucb") {
    c.mutable_linucb()->set_dimension(d);
  } else if (p == "epsilon_greedy") {
    c.mutable_epsilon_greedy()->set_epsilon(0.1);
    c.set_num_arms(arms);
  } else if (p == "ucb1") {
    c.mutable_ucb1();
    c.set_num_arms(arms);
  } else if (p == "thompson") {
    c.mutable_thompson();
    c.set_num_arms(arms);
  } else if (p == "bkb") {
    c.mutable_bkb();
    feature_arms();
  } else if (p == "gp_ucb") {
    c.mutable_gp_ucb();
    feature_arms();
  } else {
    std::fprintf(stderr, "--policy=%s is not a shortcut; use --policy_config\n", p.c_str());
    std::exit(2);
  }
  return c;
}

// ---------- latency recording ----------
struct Samples {
  std::vector<float> us;  // one entry per measured RPC
  void Add(Clock::duration d) { us.push_back(static_cast<float>(Seconds(d) * 1e6)); }
};

ordered_json Percentiles(std::vector<float> v) {
  ordered_json j;
  j["count"] = v.size();
  if (v.empty()) return j;
  std::sort(v.begin(), v.end());
  auto q = [&](double p) {
    size_t i = static_cast<size_t>(std::ceil(p * v.size()));
    i = std::clamp<size_t>(i, 1, v.size()) - 1;
    return static_cast<double>(v[i]);
  };
  double sum = 0;
  for (float x : v) sum += x;
  j["mean"] = sum / v.size();
  j["p50"] = q(0.50);
  j["p90"] = q(0.90);
  j["p99"] = q(0.99);
  j["p999"] = q(0.999);
  j["max"] = static_cast<double>(v.back());
  return j;
}

// ---------- /proc readings of the server ----------
int64_t RssBytes(int pid) {
  if (pid <= 0) return -1;
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

double CpuSecondsOf(int pid) {
  if (pid <= 0) return -1;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto rp = s.rfind(')');
  if (rp == std::string::npos) return -1;
  std::vector<std::string> fields;
  size_t pos = rp + 2;
  while (pos < s.size()) {
    size_t e = s.find(' ', pos);
    if (e == std::string::npos) e = s.size();
    fields.push_back(s.substr(pos, e - pos));
    pos = e + 1;
  }
  if (fields.size() < 13) return -1;  // fields[11] = utime, fields[12] = stime (after state)
  return (std::stod(fields[11]) + std::stod(fields[12])) / sysconf(_SC_CLK_TCK);
}

double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

// ---------- errors ----------
struct Errors {
  std::mutex mu;
  int64_t count = 0;
  std::vector<std::string> first;
  void Add(const grpc::Status& s, const char* what) {
    std::lock_guard<std::mutex> l(mu);
    ++count;
    if (first.size() < 5)
      first.push_back(absl::StrFormat("%s: code %d: %s", what, s.error_code(), s.error_message()));
  }
  void Add(const std::string& m) {
    std::lock_guard<std::mutex> l(mu);
    ++count;
    if (first.size() < 5) first.push_back(m);
  }
};

std::vector<std::shared_ptr<grpc::Channel>> MakeChannels(const std::string& target, int n) {
  std::vector<std::shared_ptr<grpc::Channel>> out;
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(16 << 20);
    args.SetMaxSendMessageSize(16 << 20);
    args.SetInt("bandit.loadgen.channel", i);  // distinct args: a connection per channel
    out.push_back(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  }
  for (auto& ch : out) {
    if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      std::fprintf(stderr, "cannot connect to %s\n", target.c_str());
      std::exit(1);
    }
  }
  return out;
}

// ---------- the load run ----------
struct RunConfig {
  int channels, inflight, batch;
  bool paired;
  double select_fraction;
  double warmup_s, duration_s;
  int64_t deadline_ms;
  uint64_t seed;
};

struct Shared {
  const Workload* w;
  RunConfig cfg;
  Clock::time_point start, measure_from, measure_to;
  std::atomic<bool> stop{false};
  std::mutex done_mu;
  std::condition_variable done_cv;
  int active = 0;
  Errors errors;
  std::vector<std::atomic<int64_t>> timeline;  // rounds (paired) or RPCs (mix) completed per second
  std::mutex ids_mu;  // mix mode: event ids awaiting an Update
  std::deque<std::pair<std::string, double>> ids;
  explicit Shared(size_t seconds) : timeline(seconds) {}
};

// One closed-loop slot. Stub is bandit::v1::BanditService::Stub or bandit::bench::Echo::Stub:
// both expose async()->Select/Update/SelectBatch/UpdateBatch with the same message types.
template <typename Stub>
class Slot {
 public:
  Slot(Stub* stub, Shared* sh, int id)
      : stub_(stub), sh_(sh), gen_(sh->cfg.seed * 1000003 + id), next_req_(id) {}

  void Start() { Next(); }

  Samples select_lat, update_lat, round_lat;
  int64_t rounds = 0, selects = 0, updates = 0;
  int64_t select_req_bytes = 0, select_resp_bytes = 0, update_req_bytes = 0,
          update_resp_bytes = 0, sized = 0;

 private:
  bool Measured(Clock::time_point t0, Clock::time_point t1) const {
    return t0 >= sh_->measure_from && t1 <= sh_->measure_to;
  }
  void Tick(Clock::time_point t, int64_t n) {
    const auto s = static_cast<size_t>(Seconds(t - sh_->start));
    if (s < sh_->timeline.size()) sh_->timeline[s].fetch_add(n, std::memory_order_relaxed);
  }
  void NewContext() {
    ctx_ = std::make_unique<grpc::ClientContext>();
    ctx_->set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(sh_->cfg.deadline_ms));
  }
  const v1::SelectRequest& NextRequest() {
    const auto& pool = sh_->w->requests;
    return pool[(next_req_++) % pool.size()];
  }

  void Next() {
    if (sh_->stop.load(std::memory_order_relaxed) || Clock::now() >= sh_->measure_to) {
      std::lock_guard<std::mutex> l(sh_->done_mu);
      if (--sh_->active == 0) sh_->done_cv.notify_all();
      return;
    }
    if (sh_->cfg.paired) {
      DoSelect();
      return;
    }
    // mix
    if (gen_.Uniform() >= sh_->cfg.select_fraction) {
      std::unique_lock<std::mutex> l(sh_->ids_mu);
      if (!sh_->ids.empty()) {
        auto [id, reward] = std::move(sh_->ids.front());
        sh_->ids.pop_front();
        l.unlock();
        pending_ids_.assign(1, {std::move(id), reward});
        DoUpdate(Clock::now());
        return;
      }
    }
    DoSelect();
  }

  void DoSelect() {
    NewContext();
    const auto t0 = Clock::now();
    const int b = sh_->cfg.batch;
    if (b <= 1) {
      sel_req_ = &NextRequest();
      dec_.Clear();
      stub_->async()->Select(ctx_.get(), sel_req_, &dec_,
                             [this, t0](grpc::Status s) { OnSelect(t0, std::move(s)); });
    } else {
      batch_sel_.Clear();
      batch_reqs_.clear();
      for (int i = 0; i < b; ++i) {
        batch_reqs_.push_back(&NextRequest());
        *batch_sel_.add_requests() = *batch_reqs_.back();
      }
      batch_dec_.Clear();
      stub_->async()->SelectBatch(ctx_.get(), &batch_sel_, &batch_dec_,
                                  [this, t0](grpc::Status s) { OnSelect(t0, std::move(s)); });
    }
  }

  void OnSelect(Clock::time_point t0, grpc::Status s) {
    const auto t1 = Clock::now();
    const bool measured = Measured(t0, t1);
    if (!s.ok()) {
      sh_->errors.Add(s, "Select");
      Next();
      return;
    }
    if (measured) {
      select_lat.Add(t1 - t0);
      selects += sh_->cfg.batch;
    }
    pending_ids_.clear();
    if (sh_->cfg.batch <= 1) {
      pending_ids_.push_back({dec_.event_id(), sh_->w->Reward(*sel_req_, dec_, gen_)});
      if (sized < 32) {
        select_req_bytes += sel_req_->ByteSizeLong();
        select_resp_bytes += dec_.ByteSizeLong();
      }
    } else {
      for (int i = 0; i < batch_dec_.decisions_size(); ++i) {
        if (i < batch_dec_.statuses_size() && batch_dec_.statuses(i).code() != 0) {
          sh_->errors.Add(absl::StrFormat("SelectBatch item: code %d: %s",
                                          batch_dec_.statuses(i).code(),
                                          batch_dec_.statuses(i).message()));
          continue;
        }
        pending_ids_.push_back({batch_dec_.decisions(i).event_id(),
                                sh_->w->Reward(*batch_reqs_[i], batch_dec_.decisions(i), gen_)});
      }
      if (sized < 32) {
        select_req_bytes += batch_sel_.ByteSizeLong();
        select_resp_bytes += batch_dec_.ByteSizeLong();
      }
    }
    if (!sh_->cfg.paired) {
      if (measured) Tick(t1, sh_->cfg.batch);
      {
        std::lock_guard<std::mutex> l(sh_->ids_mu);
        for (auto& p : pending_ids_) sh_->ids.push_back(std::move(p));
      }
      Next();
      return;
    }
    DoUpdate(t0);
  }

  void DoUpdate(Clock::time_point round_t0) {
    NewContext();
    const auto t0 = Clock::now();
    if (pending_ids_.size() == 1 && sh_->cfg.batch <= 1) {
      upd_req_.Clear();
      upd_req_.set_instance(sh_->w->requests[0].instance());
      upd_req_.set_event_id(pending_ids_[0].first);
      upd_req_.set_reward(pending_ids_[0].second);
      upd_resp_.Clear();
      stub_->async()->Update(ctx_.get(), &upd_req_, &upd_resp_, [this, t0, round_t0](grpc::Status s) {
        OnUpdate(t0, round_t0, std::move(s));
      });
    } else {
      batch_upd_.Clear();
      for (const auto& [id, reward] : pending_ids_) {
        auto* u = batch_upd_.add_requests();
        u->set_instance(sh_->w->requests[0].instance());
        u->set_event_id(id);
        u->set_reward(reward);
      }
      batch_upd_resp_.Clear();
      stub_->async()->UpdateBatch(ctx_.get(), &batch_upd_, &batch_upd_resp_,
                                  [this, t0, round_t0](grpc::Status s) {
                                    OnUpdate(t0, round_t0, std::move(s));
                                  });
    }
  }

  void OnUpdate(Clock::time_point t0, Clock::time_point round_t0, grpc::Status s) {
    const auto t1 = Clock::now();
    if (!s.ok()) {
      sh_->errors.Add(s, "Update");
      Next();
      return;
    }
    const bool batched = !(pending_ids_.size() == 1 && sh_->cfg.batch <= 1);
    if (batched) {
      for (int i = 0; i < batch_upd_resp_.statuses_size(); ++i)
        if (batch_upd_resp_.statuses(i).code() != 0)
          sh_->errors.Add(absl::StrFormat("UpdateBatch item: code %d: %s",
                                          batch_upd_resp_.statuses(i).code(),
                                          batch_upd_resp_.statuses(i).message()));
    }
    const int64_t n = static_cast<int64_t>(pending_ids_.size());
    if (sized < 32) {
      update_req_bytes += batched ? batch_upd_.ByteSizeLong() : upd_req_.ByteSizeLong();
      update_resp_bytes += batched ? batch_upd_resp_.ByteSizeLong() : upd_resp_.ByteSizeLong();
      ++sized;
    }
    if (Measured(t0, t1)) {
      update_lat.Add(t1 - t0);
      updates += n;
      if (sh_->cfg.paired && Measured(round_t0, t1)) {
        round_lat.Add(t1 - round_t0);
        rounds += n;
      }
      Tick(t1, n);
    }
    Next();
  }

  Stub* stub_;
  Shared* sh_;
  Gen gen_;
  uint64_t next_req_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  const v1::SelectRequest* sel_req_ = nullptr;
  v1::Decision dec_;
  v1::SelectBatchRequest batch_sel_;
  std::vector<const v1::SelectRequest*> batch_reqs_;
  v1::SelectBatchResponse batch_dec_;
  v1::UpdateRequest upd_req_;
  v1::UpdateResponse upd_resp_;
  v1::UpdateBatchRequest batch_upd_;
  v1::UpdateBatchResponse batch_upd_resp_;
  std::vector<std::pair<std::string, double>> pending_ids_;
};

template <typename Stub>
ordered_json RunLoad(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                     const Workload& w, const RunConfig& cfg, int server_pid) {
  std::vector<std::unique_ptr<Stub>> stubs;
  for (const auto& ch : channels) stubs.push_back(std::make_unique<Stub>(ch));
  Shared sh(static_cast<size_t>(cfg.warmup_s + cfg.duration_s) + 2);
  sh.w = &w;
  sh.cfg = cfg;
  std::vector<std::unique_ptr<Slot<Stub>>> slots;
  for (int c = 0; c < cfg.channels; ++c)
    for (int i = 0; i < cfg.inflight; ++i)
      slots.push_back(std::make_unique<Slot<Stub>>(stubs[c].get(), &sh,
                                                   static_cast<int>(slots.size())));
  sh.active = static_cast<int>(slots.size());
  sh.start = Clock::now();
  sh.measure_from = sh.start + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(cfg.warmup_s));
  sh.measure_to = sh.measure_from + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(cfg.duration_s));
  for (auto& s : slots) s->Start();

  // CPU of both processes over the measured window.
  std::this_thread::sleep_until(sh.measure_from);
  const double self0 = SelfCpuSeconds(), srv0 = CpuSecondsOf(server_pid);
  std::this_thread::sleep_until(sh.measure_to);
  const double self1 = SelfCpuSeconds(), srv1 = CpuSecondsOf(server_pid);
  {
    std::unique_lock<std::mutex> l(sh.done_mu);
    if (!sh.done_cv.wait_for(l, std::chrono::milliseconds(cfg.deadline_ms + 5000),
                             [&] { return sh.active == 0; })) {
      std::fprintf(stderr, "slots did not drain; exiting\n");
      std::_Exit(1);
    }
  }

  Samples sel, upd, rnd;
  int64_t rounds = 0, selects = 0, updates = 0, n_sized = 0;
  int64_t sq = 0, sr = 0, uq = 0, ur = 0;
  for (auto& s : slots) {
    sel.us.insert(sel.us.end(), s->select_lat.us.begin(), s->select_lat.us.end());
    upd.us.insert(upd.us.end(), s->update_lat.us.begin(), s->update_lat.us.end());
    rnd.us.insert(rnd.us.end(), s->round_lat.us.begin(), s->round_lat.us.end());
    rounds += s->rounds;
    selects += s->selects;
    updates += s->updates;
    sq += s->select_req_bytes;
    sr += s->select_resp_bytes;
    uq += s->update_req_bytes;
    ur += s->update_resp_bytes;
    n_sized += s->sized;
  }
  const double secs = cfg.duration_s;
  ordered_json j;
  j["measured_s"] = secs;
  j["rounds"] = rounds;
  j["selects"] = selects;
  j["updates"] = updates;
  j["rpcs"] = static_cast<int64_t>(sel.us.size() + upd.us.size());
  j["errors"] = sh.errors.count;
  j["first_errors"] = sh.errors.first;
  j["rounds_per_s"] = rounds / secs;
  j["items_per_s"] = (selects + updates) / secs;
  j["rpcs_per_s"] = static_cast<double>(sel.us.size() + upd.us.size()) / secs;
  ordered_json lat;
  lat["select"] = Percentiles(std::move(sel.us));
  lat["update"] = Percentiles(std::move(upd.us));
  if (cfg.paired) lat["round"] = Percentiles(std::move(rnd.us));
  j["latency_us"] = lat;
  if (n_sized > 0) {
    j["bytes"] = {{"select_request", static_cast<double>(sq) / n_sized},
                  {"select_response", static_cast<double>(sr) / n_sized},
                  {"update_request", static_cast<double>(uq) / n_sized},
                  {"update_response", static_cast<double>(ur) / n_sized}};
  }
  j["client_cpu_s"] = self1 - self0;
  if (server_pid > 0) j["server_cpu_s"] = srv1 - srv0;
  std::vector<int64_t> tl;
  for (size_t i = 0; i < sh.timeline.size(); ++i) tl.push_back(sh.timeline[i].load());
  j["timeline_per_s"] = tl;  // second i since start (warm-up seconds are 0)
  return j;
}

// ---------- instance setup ----------
absl::Status ToAbsl(const grpc::Status& s) {
  return s.ok() ? absl::OkStatus()
                : absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

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

// Runs n asynchronous tasks with at most `window` in flight. start(i, done) issues task i and
// calls done(ok) from its completion.
void RunWindowed(int n, int window, const std::function<void(int, std::function<void(bool)>)>& start,
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

ordered_json RunInstancesTest(v1::BanditService::Stub& stub, const v1::PolicyConfig& pc,
                              const Workload& w, int n, int window, int server_pid, bool cleanup) {
  ordered_json j;
  j["instances"] = n;
  auto name = [](int i) { return absl::StrFormat("scale-%05d", i); };
  const int64_t rss0 = RssBytes(server_pid);
  j["rss_before_bytes"] = rss0;

  // 1. create
  int64_t failed = 0;
  auto t0 = Clock::now();
  RunWindowed(n, window, [&](int i, std::function<void(bool)> done) {
    auto* call = new Call<v1::CreateInstanceRequest, v1::Instance>();
    call->req.set_name(name(i));
    *call->req.mutable_config()->mutable_policy() = pc;
    stub.async()->CreateInstance(&call->ctx, &call->req, &call->resp,
                                 [call, done](grpc::Status s) {
                                   // ALREADY_EXISTS: left over from an earlier run, still served.
                                   const bool ok = s.ok() || s.error_code() == grpc::ALREADY_EXISTS;
                                   delete call;
                                   done(ok);
                                 });
  }, &failed);
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
  RunWindowed(n, window, [&](int i, std::function<void(bool)> done) {
    auto* sel = new Call<v1::SelectRequest, v1::Decision>();
    sel->req = w.requests[i % w.requests.size()];
    sel->req.set_instance(name(i));
    const auto start = Clock::now();
    stub.async()->Select(&sel->ctx, &sel->req, &sel->resp, [&, sel, done, start, i](grpc::Status s) {
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
      stub.async()->Update(&upd->ctx, &upd->req, &upd->resp, [&, upd, done, start](grpc::Status s) {
        delete upd;
        if (s.ok()) {
          std::lock_guard<std::mutex> l(lat_mu);
          round_us.push_back(static_cast<float>(Seconds(Clock::now() - start) * 1e6));
        }
        done(s.ok());
      });
    });
  }, &failed);
  secs = Seconds(Clock::now() - t0);
  const int64_t rss2 = RssBytes(server_pid);
  j["serve"] = {{"seconds", secs}, {"rounds_per_s", n / secs}, {"failed", failed},
                {"round_latency_us", Percentiles(round_us)}};
  j["rss_after_serve_bytes"] = rss2;

  // 4. what the policy itself reports as its state size
  {
    grpc::ClientContext ctx;
    v1::GetInstanceRequest req;
    req.set_name(name(0));
    v1::Instance inst;
    if (stub.GetInstance(&ctx, req, &inst).ok()) j["policy_state_bytes"] = inst.stats().state_bytes();
  }
  if (rss0 > 0) {
    j["bytes_per_instance_created"] = static_cast<double>(rss1 - rss0) / n;
    j["bytes_per_instance_served"] = static_cast<double>(rss2 - rss0) / n;
  }
  if (cleanup) {
    RunWindowed(n, window, [&](int i, std::function<void(bool)> done) {
      auto* call = new Call<v1::DeleteInstanceRequest, v1::DeleteInstanceResponse>();
      call->req.set_name(name(i));
      stub.async()->DeleteInstance(&call->ctx, &call->req, &call->resp,
                                   [call, done](grpc::Status s) {
                                     delete call;
                                     done(s.ok());
                                   });
    }, &failed);
    j["deleted_failed"] = failed;
    j["rss_after_delete_bytes"] = RssBytes(server_pid);
  }
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("bandit-loadgen: load generator for banditd and bandit-echo");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_inprocess)) {
    bandit::loadgen::InProcessOptions o;
    o.d = absl::GetFlag(FLAGS_d);
    o.arms = absl::GetFlag(FLAGS_arms);
    o.max_rounds = absl::GetFlag(FLAGS_inprocess_rounds);
    o.budget_s = absl::GetFlag(FLAGS_inprocess_budget_s);
    o.only = absl::GetFlag(FLAGS_inprocess_only);
    ordered_json j;
    j["tool"] = "bandit-loadgen --inprocess";
    j["label"] = absl::GetFlag(FLAGS_label);
    j["policies"] = bandit::loadgen::RunInProcess(o);
    const std::string text = j.dump(2);
    if (const std::string path = absl::GetFlag(FLAGS_out); !path.empty()) {
      std::ofstream f(path);
      f << text << "\n";
    } else {
      std::printf("%s\n", text.c_str());
    }
    return 0;
  }
  const std::string service = absl::GetFlag(FLAGS_service);
  if (service != "bandit" && service != "echo") {
    std::fprintf(stderr, "--service must be bandit or echo\n");
    return 2;
  }
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode != "paired" && mode != "mix") {
    std::fprintf(stderr, "--mode must be paired or mix\n");
    return 2;
  }
  RunConfig cfg;
  cfg.channels = std::max(1, absl::GetFlag(FLAGS_channels));
  cfg.inflight = std::max(1, absl::GetFlag(FLAGS_inflight));
  cfg.batch = std::max(1, absl::GetFlag(FLAGS_batch));
  cfg.paired = mode == "paired";
  cfg.select_fraction = std::clamp(absl::GetFlag(FLAGS_select_update_mix), 0.0, 1.0);
  cfg.warmup_s = std::max(0.0, absl::GetFlag(FLAGS_warmup_s));
  cfg.duration_s = std::max(0.1, absl::GetFlag(FLAGS_duration_s));
  cfg.deadline_ms = absl::GetFlag(FLAGS_deadline_ms);
  cfg.seed = absl::GetFlag(FLAGS_seed);
  const int server_pid = absl::GetFlag(FLAGS_server_pid);

  Gen g(cfg.seed);
  const v1::PolicyConfig pc = PolicyConfigFromFlags(g);
  auto local = bandit::CreatePolicy(pc, 1);  // only to learn which requests the policy takes
  if (!local.ok()) {
    std::fprintf(stderr, "policy config: %s\n", std::string(local.status().message()).c_str());
    return 2;
  }
  const int d = absl::GetFlag(FLAGS_d), arms = absl::GetFlag(FLAGS_arms);
  const std::string instance = absl::GetFlag(FLAGS_instance);
  const Workload w = MakeWorkload((*local)->context_kind(), d, arms, instance, cfg.seed);

  ordered_json out;
  out["tool"] = "bandit-loadgen";
  out["label"] = absl::GetFlag(FLAGS_label);
  out["target"] = absl::GetFlag(FLAGS_target);
  out["service"] = service;
  out["policy"] = std::string((*local)->name());
  out["d"] = d;
  out["arms"] = arms;
  out["mode"] = mode;
  if (!cfg.paired) out["select_fraction"] = cfg.select_fraction;
  out["channels"] = cfg.channels;
  out["inflight_per_channel"] = cfg.inflight;
  out["concurrency"] = cfg.channels * cfg.inflight;
  out["batch"] = cfg.batch;
  out["warmup_s"] = cfg.warmup_s;

  auto channels = MakeChannels(absl::GetFlag(FLAGS_target), cfg.channels);
  int rc = 0;
  if (const int n = absl::GetFlag(FLAGS_instances); n > 0) {
    if (service != "bandit") {
      std::fprintf(stderr, "--instances needs --service=bandit\n");
      return 2;
    }
    auto stub = v1::BanditService::NewStub(channels[0]);
    out["scale"] = RunInstancesTest(*stub, pc, w, n, cfg.channels * cfg.inflight, server_pid,
                                    absl::GetFlag(FLAGS_cleanup));
  } else {
    if (service == "bandit") {
      auto stub = v1::BanditService::NewStub(channels[0]);
      const int64_t cap = absl::GetFlag(FLAGS_pending_capacity);
      if (auto s = EnsureInstance(*stub, instance, pc, absl::GetFlag(FLAGS_fresh), cap); !s.ok()) {
        std::fprintf(stderr, "instance '%s': %s\n", instance.c_str(), s.ToString().c_str());
        return 1;
      }
      out["result"] = RunLoad<v1::BanditService::Stub>(channels, w, cfg, server_pid);
    } else {
      out["result"] = RunLoad<bandit::bench::Echo::Stub>(channels, w, cfg, server_pid);
    }
    const auto& r = out["result"];
    if (r["rpcs"].get<int64_t>() == 0 || r["errors"].get<int64_t>() > r["rpcs"].get<int64_t>())
      rc = 1;  // nothing worked
  }

  const std::string text = out.dump(2);
  if (const std::string path = absl::GetFlag(FLAGS_out); !path.empty()) {
    std::ofstream f(path);
    f << text << "\n";
  } else {
    std::printf("%s\n", text.c_str());
  }
  std::fflush(stdout);
  std::_Exit(rc);  // skip static destructors while gRPC threads may still hold references
}
