// bandit-ope: off-policy evaluation of candidate instance configs on a decision log.
//
//   bandit-ope --log=LOG.dsjson [--max_weight=M] [--ridge_lambda=L] [--json=OUT.json]
//              [--plot=OUT.png [--trace_every=N]] CANDIDATE.txtpb...
//
// LOG is what `banditctl log NAME --format=dsjson` writes (Vowpal Wabbit's Decision Service
// JSON); each CANDIDATE is a text-format bandit.v1.InstanceConfig, named by its file name.
// The log is read one line at a time (memory does not grow with its length). Nothing is written
// unless the whole log was evaluated: errors name the line and field and exit 1.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>
#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cpp/decision_log_format.h"
#include "core/ope/evaluator.h"

ABSL_FLAG(std::string, log, "", "decision log in DSJSON (banditctl log NAME --format=dsjson)");
ABSL_FLAG(double, max_weight, 0, "clip importance weights at this value (0 = no clipping)");
ABSL_FLAG(double, ridge_lambda, 1.0, "regularization of the doubly robust direct model");
ABSL_FLAG(std::string, json, "", "also write the results as JSON to this file");
ABSL_FLAG(std::string, plot, "", "draw the running estimates over the log as a PNG here");
ABSL_FLAG(int64_t, trace_every, 0, "--plot: a point every N events (0 = about 200 points)");

namespace {

using bandit::ope::Candidate;
using bandit::ope::CandidateResult;
using bandit::ope::Estimators;
using bandit::ope::Interval;

int Fail(const std::string& why) {
  std::cerr << "bandit-ope: " << why << "\n";
  return 1;
}

nlohmann::ordered_json ToJson(const Interval& i) {
  return {{"value", i.value}, {"se", i.se}, {"ci95", {i.lo, i.hi}}};
}

// Matplotlib script: reads the trace CSV (candidate,events,ips,snips,dr,logged) on stdin.
constexpr char kPlotScript[] = R"PY(
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(sys.stdin))
out = sys.argv[1]
names = sorted({r["candidate"] for r in rows})
fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 4), squeeze=False)
for ax, name in zip(axes[0], names):
    rs = [r for r in rows if r["candidate"] == name]
    n = [int(r["events"]) for r in rs]
    for key, label in (("ips", "IPS"), ("snips", "SNIPS"), ("dr", "DR"), ("logged", "logging policy")):
        ax.plot(n, [float(r[key]) for r in rs], label=label)
    ax.set_title(name)
    ax.set_xlabel("logged events")
    ax.set_ylabel("estimated value (mean reward)")
    ax.legend()
fig.tight_layout()
fig.savefig(out, dpi=100)
)PY";

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "bandit-ope --log=LOG.dsjson [--max_weight=M] [--json=OUT.json] [--plot=OUT.png] "
      "CANDIDATE.txtpb...");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string log_path = absl::GetFlag(FLAGS_log);
  if (log_path.empty()) return Fail("--log is required");
  if (args.size() < 2) return Fail("expected at least one candidate config file (text proto)");

  std::vector<Candidate> candidates;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string path = args[i];
    std::ifstream f(path);
    if (!f) return Fail(absl::StrCat("cannot read candidate config ", path));
    std::stringstream text;
    text << f.rdbuf();
    Candidate c;
    c.name = std::filesystem::path(path).stem().string();
    if (!google::protobuf::TextFormat::ParseFromString(text.str(), &c.config))
      return Fail(absl::StrCat(path, ": not a text-format bandit.v1.InstanceConfig"));
    candidates.push_back(std::move(c));
  }
  bandit::ope::EvaluateOptions options;
  options.max_weight = absl::GetFlag(FLAGS_max_weight);
  options.ridge_lambda = absl::GetFlag(FLAGS_ridge_lambda);
  const std::string plot = absl::GetFlag(FLAGS_plot);
  std::ifstream log(log_path);
  if (!log) return Fail(absl::StrCat("cannot read --log=", log_path));
  if (!plot.empty()) {
    options.trace_every = absl::GetFlag(FLAGS_trace_every);
    if (options.trace_every <= 0) {
      // About 200 points: count the lines first (one cheap pass).
      int64_t lines = 0;
      std::string line;
      while (std::getline(log, line)) ++lines;
      options.trace_every = std::max<int64_t>(1, lines / 200);
      log.clear();
      log.seekg(0);
    }
  }
  auto evaluator = bandit::ope::Evaluator::Create(std::move(candidates), options);
  if (!evaluator.ok()) return Fail(std::string(evaluator.status().message()));

  std::string line;
  int64_t line_no = 0;
  const auto start = std::chrono::steady_clock::now();
  // The entries of one multi-slot decision (a CCB line, or consecutive lines of its slots) are
  // evaluated together: every slot scored before any is learned. The grouper holds the one rule
  // for which entries make one decision; errors name the line the decision began on.
  absl::Status evaluated;
  bandit::client::DecisionGrouper grouper(
      [&](std::span<const bandit::v1::LoggedDecision> decision, int64_t first_line) {
        if (!evaluated.ok()) return;
        evaluated = (*evaluator)->AddDecision(decision, absl::StrCat(log_path, ":", first_line),
                                              static_cast<int>(decision.size()));
      });
  while (std::getline(log, line)) {
    ++line_no;
    if (line.empty()) continue;
    auto decisions = bandit::client::ParseDsjsonDecisions(line);
    if (!decisions.ok())
      return Fail(absl::StrCat(log_path, ":", line_no, ": ", decisions.status().message()));
    for (auto& d : *decisions) {
      grouper.Add(std::move(d), line_no);
      if (!evaluated.ok()) return Fail(std::string(evaluated.message()));
    }
  }
  grouper.Flush();
  if (!evaluated.ok()) return Fail(std::string(evaluated.message()));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const auto& results = (*evaluator)->results();
  if (results.empty() || results[0].estimators.events() == 0)
    return Fail(absl::StrCat(log_path, ": no decision with a reward to evaluate on (",
                             (*evaluator)->skipped(), " without one)"));
  const Interval logged = results[0].estimators.Logged();
  std::cout << absl::StrFormat("log %s: %d events with a reward, %d without (skipped)\n", log_path,
                               results[0].estimators.events(), (*evaluator)->skipped());
  std::cout << absl::StrFormat("logging policy value %.4f  95%% CI [%.4f, %.4f]\n\n", logged.value,
                               logged.lo, logged.hi);
  std::cout << absl::StrFormat("%-20s %-14s %-8s %9s  %-19s %8s %8s %8s\n", "candidate", "policy",
                               "estimator", "value", "95% CI", "ESS", "clipped", "max w");
  nlohmann::ordered_json out;
  out["log"] = log_path;
  out["events"] = results[0].estimators.events();
  out["skipped"] = (*evaluator)->skipped();
  out["logging_policy"] = ToJson(logged);
  out["seconds"] = seconds;
  out["candidates"] = nlohmann::ordered_json::array();
  for (const CandidateResult& r : results) {
    const auto& e = r.estimators;
    // Multi-slot logs: each slot position on its own, and the page (the sum over the slots).
    nlohmann::ordered_json slots = nlohmann::ordered_json::array();
    double page_ips = 0, page_snips = 0, page_dr = 0;
    for (size_t k = 0; k < r.slots.size(); ++k) {
      const Estimators& s = r.slots[k];
      if (s.events() == 0) continue;
      page_ips += s.Ips().value;
      page_snips += s.Snips().value;
      page_dr += s.DoublyRobust().value;
      std::cout << absl::StrFormat("%-20s %-14s slot %-3d IPS %.4f  SNIPS %.4f  DR %.4f  logged %.4f"
                                   "  (%d events)\n",
                                   r.name, r.policy, k, s.Ips().value, s.Snips().value,
                                   s.DoublyRobust().value, s.Logged().value, s.events());
      slots.push_back({{"slot_index", k},
                       {"events", s.events()},
                       {"ips", ToJson(s.Ips())},
                       {"snips", ToJson(s.Snips())},
                       {"dr", ToJson(s.DoublyRobust())},
                       {"logged", ToJson(s.Logged())}});
    }
    if (!slots.empty())
      std::cout << absl::StrFormat("%-20s %-14s page     IPS %.4f  SNIPS %.4f  DR %.4f\n", r.name,
                                   r.policy, page_ips, page_snips, page_dr);
    const std::pair<const char*, Interval> rows[] = {
        {"IPS", e.Ips()}, {"SNIPS", e.Snips()}, {"DR", e.DoublyRobust()}, {"DM", e.DirectMethod()}};
    for (const auto& [label, iv] : rows)
      std::cout << absl::StrFormat("%-20s %-14s %-8s %9.4f  [%8.4f, %8.4f] %8.1f %8d %8.3g\n",
                                   r.name, r.policy, label, iv.value, iv.lo, iv.hi,
                                   e.EffectiveSampleSize(), e.clipped(), e.largest_weight());
    out["candidates"].push_back({{"name", r.name},
                                 {"policy", r.policy},
                                 {"ips", ToJson(e.Ips())},
                                 {"snips", ToJson(e.Snips())},
                                 {"dr", ToJson(e.DoublyRobust())},
                                 {"dm", ToJson(e.DirectMethod())},
                                 {"effective_sample_size", e.EffectiveSampleSize()},
                                 {"clipped_weights", e.clipped()},
                                 {"max_weight", absl::GetFlag(FLAGS_max_weight)},
                                 {"largest_weight", e.largest_weight()},
                                 {"exact_distribution_events", r.exact_distribution},
                                 {"sampled_distribution_events", r.sampled_distribution}});
    if (!slots.empty()) {
      out["candidates"].back()["slots"] = std::move(slots);
      out["candidates"].back()["page"] = {
          {"ips", page_ips}, {"snips", page_snips}, {"dr", page_dr}};
    }
  }
  std::cout << absl::StrFormat("\n%.0f events/s per candidate\n",
                               results[0].estimators.events() / std::max(seconds, 1e-9));
  if (const std::string json = absl::GetFlag(FLAGS_json); !json.empty()) {
    const std::string tmp = json + ".tmp";
    std::ofstream f(tmp);
    f << out.dump(2) << "\n";
    f.close();
    if (!f || std::rename(tmp.c_str(), json.c_str()) != 0)
      return Fail(absl::StrCat("cannot write --json=", json));
  }
  if (!plot.empty()) {
    FILE* py =
        popen(absl::StrCat("/usr/bin/python3 -c '", kPlotScript, "' '", plot, "'").c_str(), "w");
    if (py == nullptr) return Fail("cannot run /usr/bin/python3 for --plot");
    std::fputs("candidate,events,ips,snips,dr,logged\n", py);
    for (const CandidateResult& r : results)
      for (const auto& t : r.trace)
        std::fputs(absl::StrFormat("%s,%d,%.17g,%.17g,%.17g,%.17g\n", r.name, t.events, t.ips,
                                   t.snips, t.dr, t.logged)
                       .c_str(),
                   py);
    if (pclose(py) != 0)
      return Fail("--plot: python3/matplotlib failed (python3-matplotlib installed?)");
  }
  return 0;
}
