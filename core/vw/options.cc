#include "core/vw/options.h"

#include <cstdint>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace bandit::vw {
namespace {

enum class Arity { kFlag, kValue, kValues };

struct FlagSpec {
  Arity arity;
};

// The flags served, by their long name (VW's option names).
const std::map<std::string, FlagSpec, std::less<>>& ServedFlags() {
  static const auto* flags = new std::map<std::string, FlagSpec, std::less<>>{
      {"cb_adf", {Arity::kFlag}},
      {"cb_explore_adf", {Arity::kFlag}},
      {"ccb_explore_adf", {Arity::kFlag}},
      {"ccb_no_slot_index", {Arity::kFlag}},
      {"cb_sample", {Arity::kFlag}},
      {"cb_type", {Arity::kValue}},
      {"epsilon", {Arity::kValue}},
      {"first_only", {Arity::kFlag}},
      {"first", {Arity::kValue}},
      {"softmax", {Arity::kFlag}},
      {"lambda", {Arity::kValue}},
      {"squarecb", {Arity::kFlag}},
      {"bag", {Arity::kValue}},
      {"cover", {Arity::kValue}},
      {"psi", {Arity::kValue}},
      {"nounif", {Arity::kFlag}},
      {"greedify", {Arity::kFlag}},
      {"random_seed", {Arity::kValue}},
      {"gamma_scale", {Arity::kValue}},
      {"gamma_exponent", {Arity::kValue}},
      {"clip_p", {Arity::kValue}},
      {"bit_precision", {Arity::kValue}},
      {"quadratic", {Arity::kValues}},
      {"cubic", {Arity::kValues}},
      {"interactions", {Arity::kValues}},
      {"noconstant", {Arity::kFlag}},
      {"hash_seed", {Arity::kValue}},
      {"ignore", {Arity::kValues}},
      {"sgd", {Arity::kFlag}},
      {"adaptive", {Arity::kFlag}},
      {"normalized", {Arity::kFlag}},
      {"invariant", {Arity::kFlag}},
      {"learning_rate", {Arity::kValue}},
      {"power_t", {Arity::kValue}},
      {"initial_t", {Arity::kValue}},
      {"l1", {Arity::kValue}},
      {"l2", {Arity::kValue}},
  };
  return *flags;
}

// VW flags this learner knows and does not serve (yet), with what to do instead.
const std::map<std::string, std::string, std::less<>>& UnservedFlags() {
  static const auto* flags = new std::map<std::string, std::string, std::less<>>{
      {"regcb", "RegCB (--regcb) is not served; use --squarecb"},
      {"regcbopt", "RegCB (--regcbopt) is not served; use --squarecb"},
      {"rnd", "random network distillation (--rnd) is not served"},
      {"synthcover", "synthetic cover (--synthcover) is not served"},
      {"elim", "SquareCB's elimination variant (--elim) is not served"},
      {"cb_explore", "--cb_explore (actions without features) is not served; use --cb_explore_adf"},
      {"cb", "--cb (actions without features) is not served; use --cb_adf"},
      {"large_action_space", "--large_action_space is not served"},
      {"baseline", "--baseline is not served"},
      {"ignore_linear", "--ignore_linear is not served; use --ignore"},
      {"keep", "--keep is not served; use --ignore"},
      {"leave_duplicate_interactions", "--leave_duplicate_interactions is not served"},
      {"adax", "--adax is not served"},
      {"sparse_l2", "--sparse_l2 is not served; use --l2"},
      {"loss_function", "--loss_function is not served: cb_adf regresses costs with squared loss"},
      {"link", "--link is not served: cb_adf regresses costs with the identity link"},
      {"ftrl", "--ftrl is not served; the regressor is VW's gradient descent"},
      {"coin", "--coin is not served; the regressor is VW's gradient descent"},
      {"pistol", "--pistol is not served; the regressor is VW's gradient descent"},
      {"bfgs", "--bfgs is not served; the regressor is VW's gradient descent"},
      {"nn", "--nn is not served; the regressor is linear"},
      {"min_prediction", "--min_prediction is not served"},
      {"max_prediction", "--max_prediction is not served"},
      {"sparse_weights", "--sparse_weights is not served: the weights are one flat array"},
      {"dsjson", "--dsjson is an input option of VW's program: the service takes JSON requests"},
      {"json", "--json is an input option of VW's program: the service takes JSON requests"},
      {"quiet", "--quiet is an output option of VW's program and does nothing here"},
      {"initial_regressor",
       "--initial_regressor (-i) is not an option of an instance: import a "
       "VW model file instead"},
      {"final_regressor",
       "--final_regressor (-f) is not an option of an instance: export the "
       "instance's model instead"},
      {"predictions", "--predictions (-p) is an output option of VW's program"},
      {"data", "--data (-d) is an input option of VW's program"},
      {"daemon", "--daemon is an option of VW's program: the service is the server"},
      {"passes", "--passes is not served: an instance learns online, one pass"},
      {"audit", "--audit is not served: use Select's explain"},
      {"invert_hash", "--invert_hash is not served: use Select's explain"},
      {"readable_model", "--readable_model is not served: export the instance's model instead"},
      {"save_resume", "--save_resume is not an option here: snapshots always resume exactly"},
      {"csoaa_ldf", "--csoaa_ldf is cb_adf's own reduction and is not set by hand"},
      {"csoaa_rank", "--csoaa_rank is cb_adf's own option and is not set by hand"},
      {"rank_all", "--rank_all is not served: Select's scores give every action's cost"},
      {"no_predict", "--no_predict is cb_explore_adf's own option and is not set by hand"},
      {"per_model_save_load", "--per_model_save_load is not served"},
      {"cb_min_cost", "--cb_min_cost is not served: it only matters with --elim"},
      {"cb_max_cost", "--cb_max_cost is not served: it only matters with --elim"},
      {"mellowness", "--mellowness is not served: it only matters with --elim"},
      {"testonly", "--testonly (-t) is not an option of an instance"},
  };
  return *flags;
}

// VW's short names.
std::string LongName(absl::string_view shorthand) {
  if (shorthand == "b") return "bit_precision";
  if (shorthand == "q") return "quadratic";
  if (shorthand == "l") return "learning_rate";
  if (shorthand == "i") return "initial_regressor";
  if (shorthand == "f") return "final_regressor";
  if (shorthand == "p") return "predictions";
  if (shorthand == "d") return "data";
  if (shorthand == "t") return "testonly";
  return "";
}

absl::Status FlagError(absl::string_view flag, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("vw.arguments: --", flag, " ", what));
}

absl::Status ParseFloat(absl::string_view flag, const std::string& text, float lo, float hi,
                        float* out) {
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v < lo || v > hi)
    return FlagError(flag,
                     absl::StrCat("is '", text, "', expected a number in [", lo, ", ", hi, "]"));
  *out = static_cast<float>(v);
  return absl::OkStatus();
}

absl::Status ParseUint(absl::string_view flag, const std::string& text, uint64_t lo, uint64_t hi,
                       uint64_t* out) {
  uint64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi)
    return FlagError(flag,
                     absl::StrCat("is '", text, "', expected an integer in [", lo, ", ", hi, "]"));
  *out = v;
  return absl::OkStatus();
}

}  // namespace

absl::string_view CbTypeName(CbType t) {
  switch (t) {
    case CbType::kMtr: return "mtr";
    case CbType::kIps: return "ips";
    case CbType::kDm: return "dm";
    case CbType::kDr: return "dr";
  }
  return "mtr";
}

absl::StatusOr<VwOptions> ParseVwArguments(absl::string_view arguments) {
  const std::vector<std::string> tokens =
      absl::StrSplit(arguments, absl::ByAnyChar(" \t\n\r"), absl::SkipEmpty());
  // Each served flag's values, in the order given.
  std::map<std::string, std::vector<std::string>, std::less<>> given;
  std::vector<std::pair<std::string, std::string>> supplied;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& token = tokens[i];
    std::string name;
    std::string inline_value;
    bool has_inline = false;
    if (token.rfind("--", 0) == 0) {
      name = token.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        inline_value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_inline = true;
      }
    } else if (token.size() >= 2 && token[0] == '-' &&
               std::isalpha(static_cast<unsigned char>(token[1]))) {
      name = LongName(token.substr(1, 1));
      if (name.empty())
        return absl::InvalidArgumentError(
            absl::StrCat("vw.arguments: '", token, "' is not a VW option this learner knows"));
      if (token.size() > 2) {  // -b18, -qUA: boost's adjacent value
        inline_value = token.substr(2);
        has_inline = true;
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("vw.arguments: '", token,
                       "' is not an option (expected --name or -x, each value after "
                       "its flag)"));
    }
    if (auto it = UnservedFlags().find(name); it != UnservedFlags().end())
      return absl::InvalidArgumentError(absl::StrCat("vw.arguments: ", it->second));
    auto spec = ServedFlags().find(name);
    if (spec == ServedFlags().end())
      return absl::InvalidArgumentError(
          absl::StrCat("vw.arguments: --", name, " is not a VW option this learner knows"));
    auto& values = given[name];
    if (spec->second.arity == Arity::kFlag) {
      if (has_inline) return FlagError(name, "takes no value");
      if (!values.empty()) return FlagError(name, "is given twice");
      values.push_back("");
      supplied.emplace_back(name, "");
      continue;
    }
    std::string value = inline_value;
    if (!has_inline) {
      if (i + 1 >= tokens.size()) return FlagError(name, "needs a value");
      value = tokens[++i];
    }
    if (spec->second.arity == Arity::kValue && !values.empty())
      return FlagError(name, "is given twice, expected once");
    values.push_back(value);
    supplied.emplace_back(name, value);
  }
  const auto has = [&](absl::string_view f) { return given.find(f) != given.end(); };
  const auto value = [&](absl::string_view f) -> const std::string& {
    return given.find(f)->second.front();
  };

  VwOptions o;
  o.arguments = absl::StrJoin(tokens, " ");
  o.supplied = std::move(supplied);
  // The reduction.
  if (has("ccb_explore_adf")) {
    o.reduction = Reduction::kCbExploreAdf;  // VW inserts --cb_explore_adf under it
    o.ccb = true;
    o.ccb_no_slot_index = has("ccb_no_slot_index");
  } else if (has("ccb_no_slot_index")) {
    return FlagError("ccb_no_slot_index", "does nothing without --ccb_explore_adf");
  } else if (has("cb_explore_adf")) {
    o.reduction = Reduction::kCbExploreAdf;
  } else if (has("cb_adf")) {
    o.reduction = Reduction::kCbAdf;
  } else {
    return absl::InvalidArgumentError(
        "vw.arguments names no reduction, expected --cb_adf or --cb_explore_adf");
  }
  if (has("cb_type")) {
    const std::string& t = value("cb_type");
    if (t == "ips") o.cb_type = CbType::kIps;
    else if (t == "dm") o.cb_type = CbType::kDm;
    else if (t == "dr") o.cb_type = CbType::kDr;
    else if (t == "sm")
      return FlagError("cb_type", "is 'sm', which is not served: expected mtr, ips, dm or dr");
    else if (t != "mtr")
      return FlagError("cb_type", absl::StrCat("is '", t, "', expected mtr, ips, dm or dr"));
    if (o.cb_type != CbType::kMtr && has("squarecb"))
      return FlagError("cb_type", absl::StrCat("is '", t, "': --squarecb needs --cb_type mtr"));
  }
  if (has("clip_p"))
    if (auto s = ParseFloat("clip_p", value("clip_p"), 0, 1, &o.clip_p); !s.ok()) return s;

  // The explorer.
  std::vector<std::string> explorers;
  for (const char* e : {"first", "softmax", "squarecb", "bag", "cover"})
    if (has(e)) explorers.push_back(absl::StrCat("--", e));
  if (o.reduction == Reduction::kCbAdf) {
    for (const char* f : {"epsilon", "first_only", "first", "softmax", "lambda", "squarecb",
                          "gamma_scale", "gamma_exponent", "bag", "greedify", "cover", "psi",
                          "nounif"})
      if (has(f))
        return FlagError(f, "does nothing with --cb_adf (VW ignores it): add --cb_explore_adf");
    o.explorer = Explorer::kNone;
  } else {
    if (explorers.size() > 1)
      return absl::InvalidArgumentError(absl::StrCat("vw.arguments names two explorers (",
                                                     absl::StrJoin(explorers, " and "),
                                                     "), expected at most one"));
    if (has("first")) {
      o.explorer = Explorer::kFirst;
      if (auto s = ParseUint("first", value("first"), 1, uint64_t{1} << 53, &o.first_rounds);
          !s.ok())
        return s;
    } else if (has("softmax")) {
      o.explorer = Explorer::kSoftmax;
    } else if (has("squarecb")) {
      o.explorer = Explorer::kSquareCb;
    } else if (has("bag")) {
      o.explorer = Explorer::kBag;  // epsilon 0 unless given (cb_explore_adf_bag_setup)
      if (auto s = ParseUint("bag", value("bag"), 1, 1024, &o.bag_size); !s.ok()) return s;
    } else if (has("cover")) {
      // cb_explore_adf_cover_setup: epsilon 1 decaying with the rounds learned unless given.
      o.explorer = Explorer::kCover;
      if (auto s = ParseUint("cover", value("cover"), 1, 1024, &o.cover_size); !s.ok()) return s;
      o.epsilon = 1.f;
      o.epsilon_decay = !has("epsilon");
      if (o.cb_type == CbType::kDm)
        return FlagError("cb_type",
                         "is 'dm' with --cover, which takes ips, dr or mtr (VW resets it to mtr)");
    } else {
      o.explorer = Explorer::kEpsilon;
      o.epsilon = 0.05f;
    }
    if (has("epsilon"))
      if (auto s = ParseFloat("epsilon", value("epsilon"), 0, 1, &o.epsilon); !s.ok()) return s;
    for (const char* f : {"psi", "nounif"})
      if (has(f) && o.explorer != Explorer::kCover)
        return FlagError(f, "does nothing without --cover (VW ignores it)");
    if (has("psi"))
      if (auto s = ParseFloat("psi", value("psi"), 0, 1e6f, &o.psi); !s.ok()) return s;
    o.nounif = has("nounif");
    if (has("first_only")) {
      if (o.explorer != Explorer::kEpsilon && o.explorer != Explorer::kBag &&
          o.explorer != Explorer::kCover)
        return FlagError("first_only",
                         "only changes epsilon-greedy exploration, not " + explorers.front());
      o.first_only = true;
    }
    if (has("lambda")) {
      if (o.explorer != Explorer::kSoftmax)
        return FlagError("lambda", "does nothing without --softmax (VW ignores it)");
      if (auto s = ParseFloat("lambda", value("lambda"), -1e6f, 1e6f, &o.lambda); !s.ok()) return s;
    }
    if (has("greedify") && o.explorer != Explorer::kBag)
      return FlagError("greedify", "does nothing without --bag (VW ignores it)");
    for (const char* g : {"gamma_scale", "gamma_exponent"})
      if (has(g) && o.explorer != Explorer::kSquareCb)
        return FlagError(g, "does nothing without --squarecb (VW ignores it)");
    if (has("gamma_scale"))
      if (auto s = ParseFloat("gamma_scale", value("gamma_scale"), 0, 1e9f, &o.gamma_scale);
          !s.ok())
        return s;
    if (has("gamma_exponent"))
      if (auto s = ParseFloat("gamma_exponent", value("gamma_exponent"), 0, 10, &o.gamma_exponent);
          !s.ok())
        return s;
  }

  // cb_sample is CCB's own reduction (a model file names it).
  if (has("cb_sample") && !o.ccb)
    return FlagError("cb_sample", "is --ccb_explore_adf's own reduction and is not set by hand");
  if (o.ccb && o.explorer == Explorer::kCover)
    return FlagError("cover", "with --ccb_explore_adf is not served");
  if (o.ccb && o.explorer == Explorer::kBag)
    return FlagError("bag",
                     "with --ccb_explore_adf: VW then draws the bootstrap and an unlabeled slot's "
                     "choice from one generator, which the service's sampling cannot reproduce");
  if (has("random_seed")) {
    if (o.explorer != Explorer::kBag)
      return FlagError("random_seed",
                       "only seeds --bag's bootstrap here (VW ignores it otherwise); the "
                       "instance's seed drives the service's sampling");
    if (auto s = ParseUint("random_seed", value("random_seed"), 0, UINT64_MAX, &o.random_seed);
        !s.ok())
      return s;
  }
  o.greedify = has("greedify");

  // The regressor (VW's gd_setup).
  RegressorOptions& r = o.regressor;
  const bool named_update = has("sgd") || has("adaptive") || has("normalized") || has("invariant");
  if (named_update) {
    r.adaptive = has("adaptive");
    r.normalized = has("normalized");
    r.invariant = has("invariant");
  }
  if (has("sgd") && (r.adaptive || r.normalized || r.invariant))
    return FlagError("sgd",
                     "with --adaptive, --normalized or --invariant: VW then ignores --sgd; "
                     "name the parts wanted without it");
  const bool rate_given = has("learning_rate");
  if (rate_given) {
    if (auto s = ParseFloat("learning_rate", value("learning_rate"), 0, 1e9f, &r.learning_rate);
        !s.ok())
      return s;
    if (r.learning_rate <= 0) return FlagError("learning_rate", "is 0, expected a rate > 0");
  } else if (named_update && !(r.adaptive && r.normalized)) {
    r.learning_rate = 10.0f;  // gd_setup: the default rate of a non-default update
  }
  if (o.ccb && !r.adaptive)
    return absl::InvalidArgumentError(
        "vw.arguments: --ccb_explore_adf with an update that is not adaptive: VW's step size "
        "then counts decisions, not slots, which a service learning each slot as its reward "
        "arrives does not know; use the default update or name --adaptive");
  if (has("power_t"))
    if (auto s = ParseFloat("power_t", value("power_t"), 0, 1e3f, &r.power_t); !s.ok()) return s;
  if (has("initial_t")) {
    if (auto s = ParseFloat("initial_t", value("initial_t"), 0, 1e15f, &r.initial_t); !s.ok())
      return s;
    r.initial_t_given = true;
  }
  if (has("l1"))
    if (auto s = ParseFloat("l1", value("l1"), 0, 1e6f, &r.l1); !s.ok()) return s;
  if (has("l2"))
    if (auto s = ParseFloat("l2", value("l2"), 0, 1e6f, &r.l2); !s.ok()) return s;

  // The feature space.
  features::FeatureSpaceOptions& space = o.space;
  if (has("bit_precision")) {
    uint64_t bits = 0;
    if (auto s = ParseUint("bit_precision", value("bit_precision"), 1, 30, &bits); !s.ok())
      return s;
    space.bits = static_cast<int>(bits);
  }
  // --bag interleaves its regressors in the array (parse_args.cc parse_sources: the feature
  // width rounded up to a power of 2), so each hashes into fewer bits.
  // --cb_type dr doubles the width (cb_adf_setup: its scorer's weights beside the learner's).
  o.weight_bits = space.bits;
  // --cover N: N + 1 regressors (its first policy is cb_adf's; the others at 2..N), doubled with
  // mtr and dr for the scorer at 1 (cb_explore_adf_cover_setup's feature width).
  o.models = o.explorer == Explorer::kCover
                 ? (o.cover_size + 1) * (o.cb_type == CbType::kIps ? 1 : 2)
                 : o.bag_size * (o.cb_type == CbType::kDr ? 2 : 1);
  int bag_shift = 0;
  while ((uint64_t{1} << bag_shift) < o.models) ++bag_shift;
  if (bag_shift >= space.bits)
    return FlagError(o.bag_size > 1                    ? "bag"
                     : o.explorer == Explorer::kCover ? "cover"
                                                      : "cb_type",
                     absl::StrCat(o.bag_size > 1 ? absl::StrCat("is ", o.bag_size)
                                  : o.explorer == Explorer::kCover
                                      ? absl::StrCat("is ", o.cover_size)
                                      : std::string("is dr"),
                                  " with -b ", space.bits, ": each of its ", o.models,
                                  " regressors would have ", space.bits - bag_shift,
                                  " bits, expected a larger -b"));
  space.bits -= bag_shift;
  for (const char* kind : {"quadratic", "cubic", "interactions"}) {
    if (!has(kind)) continue;
    for (const std::string& term : given.find(kind)->second) {
      const size_t want = absl::string_view(kind) == "quadratic" ? 2 : 3;
      if ((absl::string_view(kind) != "interactions" && term.size() != want) || term.size() < 2 ||
          term.size() > 3)
        return FlagError(
            kind,
            absl::StrCat("is '", term, "', expected ",
                         absl::string_view(kind) == "interactions" ? "2 or 3" : absl::StrCat(want),
                         " namespace letters (':' for any)"));
      space.interactions.push_back(term);
    }
  }
  space.constant = !has("noconstant");
  if (has("hash_seed")) {
    uint64_t seed = 0;
    if (auto s = ParseUint("hash_seed", value("hash_seed"), 0, UINT32_MAX, &seed); !s.ok())
      return s;
    space.hash_seed = static_cast<uint32_t>(seed);
  }
  if (has("ignore"))
    for (const std::string& letters : given.find("ignore")->second) space.ignore += letters;
  if (auto fs = features::FeatureSpace::Create(space); !fs.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("vw.arguments: the feature space: ", fs.status().message()));
  return o;
}

}  // namespace bandit::vw
