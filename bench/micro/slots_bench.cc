// A multi-slot Select against a single Select at the same shape (50 actions), in-process through
// DecisionService: the slots are filled one after the other, each by the policy over the actions
// still available, so k slots should cost about k single Selects and no more.
//
//   build/bin/bandit-microbench --benchmark_filter='Slots_' --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <google/protobuf/text_format.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/env/clock.h"
#include "server/service/decision_service.h"

namespace bandit {
namespace {

constexpr int kActions = 50;

// `slots` = 0: a single Select.
void SlotSelect(benchmark::State& state, bool named, int slots) {
  server::ManualClock clock;
  server::DecisionService svc(&clock);
  bandit::v1::CreateInstanceRequest create;
  create.set_name("x");
  // Decisions are dropped when their wait ends (nothing is learned: every Select sees the same
  // state); the pending table is emptied outside the timed part.
  const std::string config = absl::StrCat(
      named ? "policy { linucb { alpha: 0.5 } } feature_space { bits: 8 interactions: 'UA' }"
            : "policy { linucb { alpha: 0.5 dimension: 20 } }",
      " pending { reward_wait_ms: 1 on_expiry: DROP capacity: 100000 }");
  if (!google::protobuf::TextFormat::ParseFromString(config, create.mutable_config())) std::abort();
  bandit::v1::Instance inst;
  if (!svc.CreateInstance(create, &inst).ok()) std::abort();
  bandit::v1::SelectRequest req;
  req.set_instance("x");
  if (named) {
    req.set_context(R"({"User":{"country":"DE","age":35,"device":"mobile"}})");
    for (int a = 0; a < kActions; ++a) {
      auto* n = req.add_actions();
      n->set_id(absl::StrCat("item", a));
      n->set_features(absl::StrCat(R"({"Action":{"topic":"t)", a % 7, R"(","price":)", a % 5,
                                   R"(}})"));
    }
  } else {
    for (int a = 0; a < kActions; ++a) {
      auto* c = req.add_candidates();
      for (int j = 0; j < 20; ++j) c->add_values(((a * 31 + j * 17) % 13) / 13.0);
    }
  }
  for (int k = 0; k < slots; ++k) req.add_slots()->set_id(absl::StrCat("slot", k));
  bandit::v1::Decision d;
  int64_t i = 0;
  for (auto _ : state) {
    d.Clear();
    if (!svc.Select(req, &d).ok()) std::abort();
    if (++i % 1000 == 0) {
      state.PauseTiming();
      clock.Advance(2);
      svc.ExpireAll();
      state.ResumeTiming();
    }
  }
}
BENCHMARK_CAPTURE(SlotSelect, Slots_dense50_single, false, 0)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(SlotSelect, Slots_dense50_4slots, false, 4)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(SlotSelect, Slots_named50_single, true, 0)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(SlotSelect, Slots_named50_4slots, true, 4)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace bandit
