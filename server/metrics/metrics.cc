#include "server/metrics/metrics.h"

#include <chrono>

#include <prometheus/client_metric.h>
#include <prometheus/metric_family.h>

#include "absl/status/status.h"
#include "core/registry.h"
#include "server/env/version.h"

namespace bandit::server {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

std::string PolicyName(bandit::v1::PolicyConfig::PolicyCase policy_case) {
  for (const auto& r : RegisteredPolicies())
    if (r.config_case == policy_case) return std::string(r.name);
  return "unknown";
}

class InstanceCollector final : public prometheus::Collectable {
 public:
  explicit InstanceCollector(DecisionService* service)
      : service_(service), start_(std::chrono::steady_clock::now()) {}

  std::vector<MetricFamily> Collect() const override {
    struct Def {
      const char* name;
      const char* help;
      MetricType type;
      double (*get)(const bandit::v1::InstanceStats&);
    };
    static const Def defs[] = {
        {"bandit_instance_decisions_total", "Decisions made (Select).", MetricType::Counter,
         [](const bandit::v1::InstanceStats& s) { return double(s.rounds()); }},
        {"bandit_instance_updates_total", "Rewards learned (joined, direct and expiry defaults).",
         MetricType::Counter,
         [](const bandit::v1::InstanceStats& s) { return double(s.updates()); }},
        {"bandit_instance_reward_sum", "Sum of learned rewards.", MetricType::Gauge,
         [](const bandit::v1::InstanceStats& s) { return s.reward_sum(); }},
        {"bandit_instance_pending_decisions", "Decisions awaiting a reward.", MetricType::Gauge,
         [](const bandit::v1::InstanceStats& s) { return double(s.pending()); }},
        {"bandit_instance_expired_decisions_total", "Decisions whose reward wait passed.",
         MetricType::Counter,
         [](const bandit::v1::InstanceStats& s) { return double(s.expired()); }},
        {"bandit_instance_rejected_rewards_total",
         "Rewards refused as late, duplicate or for an unknown event.", MetricType::Counter,
         [](const bandit::v1::InstanceStats& s) { return double(s.rejected_rewards()); }},
        {"bandit_instance_state_bytes", "Size of the policy's learned state.", MetricType::Gauge,
         [](const bandit::v1::InstanceStats& s) { return double(s.state_bytes()); }},
        {"bandit_instance_pseudo_regret",
         "Cumulative pseudo-regret from updates that reported best_expected_reward.",
         MetricType::Gauge, [](const bandit::v1::InstanceStats& s) { return s.pseudo_regret(); }},
        {"bandit_instance_estimated_regret",
         "Cumulative model-estimated regret: sum of (best estimated mean - chosen arm's).",
         MetricType::Gauge,
         [](const bandit::v1::InstanceStats& s) { return s.estimated_regret(); }},
        {"bandit_instance_decision_log_events", "Decisions held in the instance's decision log.",
         MetricType::Gauge,
         [](const bandit::v1::InstanceStats& s) { return double(s.decision_log_events()); }},
        {"bandit_instance_decision_log_bytes",
         "Encoded size of the decisions held in the decision log.", MetricType::Gauge,
         [](const bandit::v1::InstanceStats& s) { return double(s.decision_log_bytes()); }},
        {"bandit_instance_decision_log_evicted_total",
         "Decisions the decision log's retention (events, bytes, age) dropped.",
         MetricType::Counter,
         [](const bandit::v1::InstanceStats& s) { return double(s.decision_log_evicted()); }},
        {"bandit_instance_activated_total", "Deferred decisions activated.", MetricType::Counter,
         [](const bandit::v1::InstanceStats& s) { return double(s.activated()); }},
        {"bandit_instance_not_activated_total",
         "Deferred decisions dropped because their reward wait passed before activation.",
         MetricType::Counter,
         [](const bandit::v1::InstanceStats& s) { return double(s.not_activated()); }},
    };
    constexpr int kDefs = sizeof(defs) / sizeof(defs[0]);
    std::vector<MetricFamily> families(kDefs + 5);
    for (int i = 0; i < kDefs; ++i) {
      families[i].name = defs[i].name;
      families[i].help = defs[i].help;
      families[i].type = defs[i].type;
    }
    MetricFamily& summary = families[kDefs];
    summary.name = "bandit_instance_summary";
    summary.help = "Policy-specific live figures (e.g. mixture score, dictionary size), by key.";
    summary.type = MetricType::Gauge;

    MetricFamily& info = families[kDefs + 4];
    info.name = "bandit_instance_info";
    info.help = "One series per instance naming its policy (value is always 1).";
    info.type = MetricType::Gauge;

    // Shadow policies: each estimator's value and 95 % interval next to the served policy's own
    // value over the same events (estimator="served"), the effective sample size, the events.
    MetricFamily shadow_value;
    shadow_value.name = "bandit_shadow_value";
    shadow_value.help =
        "Off-policy estimate of a shadow policy's value (estimator=ips|snips|dr|dm) and the "
        "served policy's mean reward over the same events (estimator=served); bound=estimate|lo|hi "
        "(95 % interval).";
    shadow_value.type = MetricType::Gauge;
    MetricFamily shadow_ess;
    shadow_ess.name = "bandit_shadow_effective_sample_size";
    shadow_ess.help = "Effective sample size (sum w)^2 / sum w^2 of a shadow's importance weights.";
    shadow_ess.type = MetricType::Gauge;
    MetricFamily shadow_events;
    shadow_events.name = "bandit_shadow_events_total";
    shadow_events.help = "Rewarded decisions a shadow policy scored and learned from.";
    shadow_events.type = MetricType::Counter;
    MetricFamily shadow_slot_value;
    shadow_slot_value.name = "bandit_shadow_slot_value";
    shadow_slot_value.help =
        "Multi-slot decisions: a shadow's estimate per slot position (estimator=ips|snips|dr) "
        "and the served policy's mean reward there (estimator=served); position=page is the "
        "sum over the positions.";
    shadow_slot_value.type = MetricType::Gauge;
    MetricFamily shadow_errors;
    shadow_errors.name = "bandit_shadow_errors_total";
    shadow_errors.help = "Contexts a shadow could not score or rewards it could not learn.";
    shadow_errors.type = MetricType::Counter;

    // Multi-slot decisions per slot position (absent for instances that never filled slots).
    MetricFamily slot_decisions, slot_updates, slot_rewards;
    slot_decisions.name = "bandit_slot_decisions_total";
    slot_decisions.help = "Slots filled by multi-slot decisions, by slot position (0 = first; "
                          "15 counts 15 and later).";
    slot_decisions.type = MetricType::Counter;
    slot_updates.name = "bandit_slot_updates_total";
    slot_updates.help = "Rewards learned for slots of multi-slot decisions, by slot position.";
    slot_updates.type = MetricType::Counter;
    slot_rewards.name = "bandit_slot_reward_sum";
    slot_rewards.help = "Sum of the rewards learned for slots, by slot position.";
    slot_rewards.type = MetricType::Gauge;

    const auto instances = service_->registry().All();
    // A scrape only reads (Instance::Stats, policy_case): it never expires decisions, so it
    // never writes a journal record.
    for (const auto& inst : instances) {
      std::vector<std::pair<std::string, double>> figures;
      const auto stats = inst->Stats(&figures);
      ClientMetric im;
      im.label = {{"instance", inst->name()}, {"policy", PolicyName(inst->policy_case())}};
      im.gauge.value = 1;
      info.metric.push_back(std::move(im));
      for (int i = 0; i < kDefs; ++i) {
        ClientMetric m;
        m.label = {{"instance", inst->name()}};
        if (defs[i].type == MetricType::Counter)
          m.counter.value = defs[i].get(stats);
        else
          m.gauge.value = defs[i].get(stats);
        families[i].metric.push_back(std::move(m));
      }
      for (const auto& [key, value] : figures) {
        ClientMetric m;
        m.label = {{"instance", inst->name()}, {"key", key}};
        m.gauge.value = value;
        summary.metric.push_back(std::move(m));
      }
      for (const auto& p : stats.slot_positions()) {
        const std::string position = std::to_string(p.position());
        ClientMetric d, u, r;
        d.label = u.label = r.label = {{"instance", inst->name()}, {"position", position}};
        d.counter.value = static_cast<double>(p.decisions());
        u.counter.value = static_cast<double>(p.updates());
        r.gauge.value = p.reward_sum();
        slot_decisions.metric.push_back(std::move(d));
        slot_updates.metric.push_back(std::move(u));
        slot_rewards.metric.push_back(std::move(r));
      }
      bandit::v1::Instance shadows;
      inst->DescribeShadows(&shadows);
      for (const auto& sh : shadows.shadows()) {
        const std::pair<const char*, const bandit::v1::Estimate*> estimates[] = {
            {"ips", &sh.ips()},
            {"snips", &sh.snips()},
            {"dr", &sh.dr()},
            {"dm", &sh.dm()},
            {"served", &sh.served()}};
        for (const auto& [estimator, e] : estimates) {
          const std::pair<const char*, double> bounds[] = {
              {"estimate", e->value()}, {"lo", e->lo()}, {"hi", e->hi()}};
          for (const auto& [bound, value] : bounds) {
            ClientMetric m;
            m.label = {{"instance", inst->name()},
                       {"shadow", sh.name()},
                       {"estimator", estimator},
                       {"bound", bound}};
            m.gauge.value = value;
            shadow_value.metric.push_back(std::move(m));
          }
        }
        auto slot_value = [&](const std::string& position, const char* estimator, double v) {
          ClientMetric m;
          m.label = {{"instance", inst->name()},
                     {"shadow", sh.name()},
                     {"position", position},
                     {"estimator", estimator}};
          m.gauge.value = v;
          shadow_slot_value.metric.push_back(std::move(m));
        };
        for (const auto& slot : sh.slots()) {
          const std::string position = std::to_string(slot.position());
          slot_value(position, "ips", slot.ips().value());
          slot_value(position, "snips", slot.snips().value());
          slot_value(position, "dr", slot.dr().value());
          slot_value(position, "served", slot.served().value());
        }
        if (sh.has_page()) {
          slot_value("page", "ips", sh.page().ips());
          slot_value("page", "snips", sh.page().snips());
          slot_value("page", "dr", sh.page().dr());
          slot_value("page", "served", sh.page().served());
        }
        ClientMetric ess;
        ess.label = {{"instance", inst->name()}, {"shadow", sh.name()}};
        ess.gauge.value = sh.effective_sample_size();
        shadow_ess.metric.push_back(std::move(ess));
        ClientMetric events;
        events.label = {{"instance", inst->name()}, {"shadow", sh.name()}};
        events.counter.value = static_cast<double>(sh.events());
        shadow_events.metric.push_back(std::move(events));
        ClientMetric errors;
        errors.label = {{"instance", inst->name()}, {"shadow", sh.name()}};
        errors.counter.value = static_cast<double>(sh.errors());
        shadow_errors.metric.push_back(std::move(errors));
      }
    }
    families.push_back(std::move(slot_decisions));
    families.push_back(std::move(slot_updates));
    families.push_back(std::move(slot_rewards));
    families.push_back(std::move(shadow_value));
    families.push_back(std::move(shadow_slot_value));
    families.push_back(std::move(shadow_ess));
    families.push_back(std::move(shadow_events));
    families.push_back(std::move(shadow_errors));
    MetricFamily& count = families[kDefs + 1];
    count.name = "bandit_instances";
    count.help = "Instances hosted by this server.";
    count.type = MetricType::Gauge;
    count.metric.emplace_back().gauge.value = static_cast<double>(instances.size());

    MetricFamily& uptime = families[kDefs + 2];
    uptime.name = "bandit_uptime_seconds";
    uptime.help = "Seconds since the server started.";
    uptime.type = MetricType::Gauge;
    uptime.metric.emplace_back().gauge.value =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();

    MetricFamily& build = families[kDefs + 3];
    build.name = "bandit_build_info";
    build.help = "Build of this server (value is always 1).";
    build.type = MetricType::Gauge;
    auto& b = build.metric.emplace_back();
    b.label = {{"version", kVersion}, {"git_sha", kGitSha}};
    b.gauge.value = 1;

    // The node's memory budget (server/instance/memory_budget.h) and what is charged to it.
    const MemoryBudget& memory = *service_->memory();
    families.reserve(families.size() + 3);
    MetricFamily& budget = families.emplace_back();
    budget.name = "bandit_memory_budget_bytes";
    budget.help = "The node's memory budget (--max_memory_bytes; 0 = no limit).";
    budget.type = MetricType::Gauge;
    budget.metric.emplace_back().gauge.value = static_cast<double>(memory.limit());
    MetricFamily& accounted = families.emplace_back();
    accounted.name = "bandit_memory_accounted_bytes";
    accounted.help =
        "Memory charged to the budget, by kind: policy state, pending decisions, decision logs, "
        "shadow policies and per-instance overhead (sum them for the total).";
    accounted.type = MetricType::Gauge;
    for (int k = 0; k < static_cast<int>(MemoryKind::kCount); ++k) {
      ClientMetric m;
      m.label = {{"kind", MemoryKindName(static_cast<MemoryKind>(k))}};
      m.gauge.value = static_cast<double>(memory.used(static_cast<MemoryKind>(k)));
      accounted.metric.push_back(std::move(m));
    }
    MetricFamily& refusals = families.emplace_back();
    refusals.name = "bandit_memory_refusals_total";
    refusals.help =
        "Requests refused RESOURCE_EXHAUSTED (or instances not loaded) because they did not fit "
        "in the memory budget, by operation.";
    refusals.type = MetricType::Counter;
    for (int o = 0; o < static_cast<int>(MemoryOp::kCount); ++o) {
      ClientMetric m;
      m.label = {{"operation", MemoryOpName(static_cast<MemoryOp>(o))}};
      m.counter.value = static_cast<double>(memory.refusals(static_cast<MemoryOp>(o)));
      refusals.metric.push_back(std::move(m));
    }
    return families;
  }

 private:
  DecisionService* service_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries{
      0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002, 0.005,
      0.01,    0.025,   0.05,   0.1,    0.25,   0.5,    1,     2.5,   5};
  return *b;
}

Metrics::Metrics(DecisionService* service)
    : registry_(std::make_shared<prometheus::Registry>()),
      collector_(std::make_shared<InstanceCollector>(service)) {
  rpc_duration_ = &prometheus::BuildHistogram()
                       .Name("bandit_rpc_duration_seconds")
                       .Help("RPC handling time by method and status code (count = RPCs).")
                       .Register(*registry_);
  auto& unparseable = prometheus::BuildCounter()
                          .Name("bandit_rpc_unparseable_requests_total")
                          .Help(
                              "Requests whose payload was not a valid protobuf of the method's "
                              "request message (answered INVALID_ARGUMENT).")
                          .Register(*registry_);
  // Pre-create the OK series and the unparseable counters so zero counts are visible.
  for (int r = 0; r < static_cast<int>(Rpc::kCount); ++r) {
    Child(static_cast<Rpc>(r), grpc::OK);
    unparseable_[r] = &unparseable.Add({{"method", RpcName(static_cast<Rpc>(r))}});
  }
}

prometheus::Histogram& Metrics::Child(Rpc rpc, grpc::StatusCode code) {
  const int c = static_cast<int>(code) >= 0 && static_cast<int>(code) < kCodes ? code : 2;
  auto& slot = children_[static_cast<int>(rpc)][c];
  if (auto* h = slot.load(std::memory_order_acquire)) return *h;
  absl::MutexLock lock(&mu_);
  if (auto* h = slot.load(std::memory_order_acquire)) return *h;
  // gRPC's canonical codes are absl's (the same numbers and names).
  auto* h =
      &rpc_duration_->Add({{"method", RpcName(rpc)},
                           {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(c))}},
                          LatencyBuckets());
  slot.store(h, std::memory_order_release);
  return *h;
}

void Metrics::ObserveRpc(Rpc rpc, grpc::StatusCode code, double seconds) {
  Child(rpc, code).Observe(seconds);
}

}  // namespace bandit::server
