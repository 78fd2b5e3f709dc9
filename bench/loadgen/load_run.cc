#include "bench/loadgen/load_run.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_format.h"
#include "bandit/v1/service.grpc.pb.h"
#include "bench/loadgen/measure.h"
#include "echo.grpc.pb.h"

namespace bandit::loadgen {
namespace {

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
  std::mutex ids_mu;                           // mix mode: event ids awaiting an Update
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
  int64_t select_req_bytes = 0, select_resp_bytes = 0, update_req_bytes = 0, update_resp_bytes = 0,
          sized = 0;

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
      stub_->async()->Update(
          ctx_.get(), &upd_req_, &upd_resp_,
          [this, t0, round_t0](grpc::Status s) { OnUpdate(t0, round_t0, std::move(s)); });
    } else {
      batch_upd_.Clear();
      for (const auto& [id, reward] : pending_ids_) {
        auto* u = batch_upd_.add_requests();
        u->set_instance(sh_->w->requests[0].instance());
        u->set_event_id(id);
        u->set_reward(reward);
      }
      batch_upd_resp_.Clear();
      stub_->async()->UpdateBatch(
          ctx_.get(), &batch_upd_, &batch_upd_resp_,
          [this, t0, round_t0](grpc::Status s) { OnUpdate(t0, round_t0, std::move(s)); });
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
nlohmann::ordered_json RunLoad(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                               const Workload& w, const RunConfig& cfg, int server_pid) {
  std::vector<std::unique_ptr<Stub>> stubs;
  for (const auto& ch : channels) stubs.push_back(std::make_unique<Stub>(ch));
  Shared sh(static_cast<size_t>(cfg.warmup_s + cfg.duration_s) + 2);
  sh.w = &w;
  sh.cfg = cfg;
  std::vector<std::unique_ptr<Slot<Stub>>> slots;
  for (int c = 0; c < cfg.channels; ++c)
    for (int i = 0; i < cfg.inflight; ++i)
      slots.push_back(
          std::make_unique<Slot<Stub>>(stubs[c].get(), &sh, static_cast<int>(slots.size())));
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
  nlohmann::ordered_json j;
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
  nlohmann::ordered_json lat;
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

}  // namespace

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

nlohmann::ordered_json RunBanditLoad(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                                     const Workload& w, const RunConfig& cfg, int server_pid) {
  return RunLoad<v1::BanditService::Stub>(channels, w, cfg, server_pid);
}

nlohmann::ordered_json RunEchoLoad(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                                   const Workload& w, const RunConfig& cfg, int server_pid) {
  return RunLoad<bandit::bench::Echo::Stub>(channels, w, cfg, server_pid);
}

}  // namespace bandit::loadgen
