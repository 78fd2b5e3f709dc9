#include "server/service/offline_experimentation.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace bandit::server {
namespace {

// VW's flags of each family a stage varies (long names, as VwOptions::supplied holds them).
const std::vector<std::string>& InteractionFlags() {
  static const auto* f = new std::vector<std::string>{"quadratic", "cubic", "interactions"};
  return *f;
}
const std::vector<std::string>& ExplorerFlags() {
  static const auto* f = new std::vector<std::string>{
      "epsilon", "first_only", "first", "softmax", "lambda", "squarecb", "gamma_scale",
      "gamma_exponent", "bag", "greedify", "cover", "psi", "nounif"};
  return *f;
}

// The flags given, whatever their order or spelling (-l or --learning_rate): two command lines
// with the same key are the same setting.
std::vector<std::pair<std::string, std::string>> SettingKey(const vw::VwOptions& o) {
  auto key = o.supplied;
  std::sort(key.begin(), key.end());
  return key;
}

// Adds `arguments` to `out` when VW takes them and they differ from `base` and from those
// already in.
void Offer(const vw::VwOptions& base, std::string name, std::string arguments,
           std::vector<LearningSetting>* out) {
  auto parsed = vw::ParseVwArguments(arguments);
  if (!parsed.ok()) return;
  const auto key = SettingKey(*parsed);
  if (key == SettingKey(base)) return;
  for (const auto& s : *out)
    if (key == SettingKey(*vw::ParseVwArguments(s.arguments))) return;
  out->push_back({std::move(name), parsed->arguments});
}

std::string Number(float v) { return absl::StrCat(v); }

// The IPS estimate of a result on the searched part (what chooses).
double Searched(const ope::CandidateResult& r) { return r.searched.Ips().value; }

}  // namespace

bool HeldOut(const std::string& event_id) {
  uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : event_id) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h % 3 == 0;
}

std::string RewriteArguments(const vw::VwOptions& base, const std::vector<std::string>& drop,
                             const std::string& add) {
  std::vector<std::string> kept;
  for (const auto& [flag, value] : base.supplied) {
    if (std::find(drop.begin(), drop.end(), flag) != drop.end()) continue;
    kept.push_back(value.empty() ? absl::StrCat("--", flag) : absl::StrCat("--", flag, " ", value));
  }
  if (!add.empty()) kept.push_back(add);
  return absl::StrJoin(kept, " ");
}

std::vector<LearningSetting> InteractionStage(const vw::VwOptions& base, const LogNamespaces& ns) {
  std::vector<LearningSetting> out;
  Offer(base, "no interactions", RewriteArguments(base, InteractionFlags(), ""), &out);
  Offer(base, "-q ::", RewriteArguments(base, InteractionFlags(), "-q ::"), &out);
  std::vector<std::string> pairs;
  for (const char c : ns.context)
    for (const char a : ns.actions)
      if (c != a) pairs.push_back(absl::StrCat("-q ", std::string(1, c), std::string(1, a)));
  constexpr size_t kMaxPairs = 12;  // each pair is a pass's setting: bound what a log asks
  if (pairs.size() > kMaxPairs) pairs.resize(kMaxPairs);
  for (const auto& p : pairs) Offer(base, p, RewriteArguments(base, InteractionFlags(), p), &out);
  if (pairs.size() > 1) {
    const std::string all = absl::StrJoin(pairs, " ");
    Offer(base, all, RewriteArguments(base, InteractionFlags(), all), &out);
  }
  return out;
}

std::vector<LearningSetting> LearningRateStage(const vw::VwOptions& base) {
  std::vector<LearningSetting> out;
  for (const float rate : {0.001f, 0.01f, 0.1f, 0.5f})
    for (const float power : {0.0f, 0.5f}) {
      if (base.regressor.learning_rate == rate && base.regressor.power_t == power) continue;
      const std::string change =
          absl::StrCat("--learning_rate ", Number(rate), " --power_t ", Number(power));
      Offer(base, change, RewriteArguments(base, {"learning_rate", "power_t"}, change), &out);
    }
  return out;
}

std::vector<LearningSetting> CbTypeStage(const vw::VwOptions& base) {
  std::vector<LearningSetting> out;
  if (base.explorer == vw::Explorer::kSquareCb) return out;  // VW: SquareCB learns with mtr
  for (const vw::CbType type : {vw::CbType::kMtr, vw::CbType::kIps, vw::CbType::kDm,
                                vw::CbType::kDr}) {
    if (type == base.cb_type) continue;
    const std::string change = absl::StrCat("--cb_type ", vw::CbTypeName(type));
    Offer(base, change, RewriteArguments(base, {"cb_type"}, change), &out);
  }
  return out;
}

std::vector<LearningSetting> ExplorationStage(const vw::VwOptions& base) {
  std::vector<LearningSetting> out;
  if (base.reduction != vw::Reduction::kCbExploreAdf) return out;
  // Explorers of a like amount of exploration: the online epsilon-greedy's, else
  // Personalizer's default 0.2; SquareCB (with mtr, as VW requires).
  const float epsilon =
      base.explorer == vw::Explorer::kEpsilon && base.epsilon > 0 ? base.epsilon : 0.2f;
  const std::string greedy = absl::StrCat("--epsilon ", Number(epsilon));
  if (base.explorer != vw::Explorer::kEpsilon || base.epsilon != epsilon)
    Offer(base, greedy, RewriteArguments(base, ExplorerFlags(), greedy), &out);
  if (base.explorer != vw::Explorer::kSquareCb) {
    std::vector<std::string> drop = ExplorerFlags();
    drop.push_back("cb_type");  // SquareCB learns with mtr, VW's default
    Offer(base, "--squarecb", RewriteArguments(base, drop, "--squarecb"), &out);
  }
  return out;
}

absl::StatusOr<SearchOutcome> SearchSettings(const LearningSetting& base,
                                             const ope::CandidateResult& base_result,
                                             double seconds_per_setting, const LogNamespaces& ns,
                                             const SettingsPass& pass, double cpu_budget_seconds,
                                             const std::function<double()>& cpu_seconds) {
  SearchOutcome out;
  out.best = base;
  out.best_result = base_result;
  out.trials.emplace_back(base, base_result.searched);
  double per_setting = std::max(seconds_per_setting, 1e-9);
  const double start = cpu_seconds();
  using Stage = std::vector<LearningSetting> (*)(const vw::VwOptions&);
  const std::vector<Stage> stages = {
      nullptr,  // interactions: takes the log's namespaces too
      &LearningRateStage, &CbTypeStage, &ExplorationStage};
  for (const Stage stage : stages) {
    auto best_options = vw::ParseVwArguments(out.best.arguments);
    if (!best_options.ok()) break;  // every setting run parsed: cannot happen
    std::vector<LearningSetting> settings =
        stage == nullptr ? InteractionStage(*best_options, ns) : stage(*best_options);
    if (settings.empty()) continue;
    const double spent = cpu_seconds() - start;
    const auto fits = static_cast<size_t>(
        std::max(0.0, std::floor((cpu_budget_seconds - spent) / per_setting)));
    if (fits < settings.size()) {
      out.budget_exhausted = true;
      settings.resize(fits);
    }
    if (settings.empty()) break;
    const double before = cpu_seconds();
    auto outcomes = pass(settings);
    if (!outcomes.ok()) return outcomes.status();
    per_setting = std::max((cpu_seconds() - before) / static_cast<double>(settings.size()), 1e-9);
    // The best of the stage replaces the best so far only when strictly better on the searched
    // part: ties keep the earlier (the online settings first).
    for (size_t i = 0; i < settings.size(); ++i) {
      const SettingOutcome& o = (*outcomes)[i];
      if (!o.error.empty()) continue;  // a setting the log's decisions refuse is not a winner
      out.trials.emplace_back(settings[i], o.result.searched);
      if (Searched(o.result) > Searched(out.best_result)) {
        out.best = settings[i];
        out.best_result = o.result;
      }
    }
    if (out.budget_exhausted) break;
  }
  out.cpu_seconds = cpu_seconds() - start + seconds_per_setting;
  return out;
}

}  // namespace bandit::server
