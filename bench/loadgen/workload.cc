#include "bench/loadgen/workload.h"

#include <google/protobuf/text_format.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/registry.h"

namespace bandit::loadgen {

using google::protobuf::FieldDescriptor;

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
  for (auto& t : w.theta) t *= kThetaNorm / std::sqrt(n);
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

int ConfigDimension(const v1::PolicyConfig& config) {
  const FieldDescriptor* f = v1::PolicyConfig::descriptor()->FindFieldByNumber(config.policy_case());
  if (f == nullptr) return 0;
  const auto& sub = config.GetReflection()->GetMessage(config, f);
  const FieldDescriptor* dim = sub.GetDescriptor()->FindFieldByName("dimension");
  if (dim == nullptr || dim->cpp_type() != FieldDescriptor::CPPTYPE_INT32) return 0;
  return sub.GetReflection()->GetInt32(sub, dim);
}

absl::StatusOr<v1::PolicyConfig> SizedExample(absl::string_view example, int d, int arms, Gen& g) {
  v1::PolicyConfig c;
  if (!google::protobuf::TextFormat::ParseFromString(std::string(example), &c))
    return absl::InternalError(absl::StrCat("registered example '", example, "' does not parse"));
  // Read by reflection (as the conformance suite reads them) so no policy is named here.
  const FieldDescriptor* f = v1::PolicyConfig::descriptor()->FindFieldByNumber(c.policy_case());
  if (f == nullptr) return absl::InternalError("registered example sets no policy");
  google::protobuf::Message* sub = c.GetReflection()->MutableMessage(&c, f);
  const google::protobuf::Reflection* r = sub->GetReflection();
  const FieldDescriptor* dim = sub->GetDescriptor()->FindFieldByName("dimension");
  if (dim != nullptr && dim->cpp_type() == FieldDescriptor::CPPTYPE_INT32 &&
      r->GetInt32(*sub, dim) != 0) {
    r->SetInt32(sub, dim, d);
    // S, the papers' bound on ||theta*||: the reward models' theta has norm kThetaNorm.
    const FieldDescriptor* s = sub->GetDescriptor()->FindFieldByName("s");
    if (s != nullptr && s->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE)
      r->SetDouble(sub, s, kThetaNorm);
  }
  if (c.num_arms() > 0) c.set_num_arms(arms);
  if (c.arms_size() > 0 && c.arms(0).features_size() > 0) {
    c.clear_arms();
    for (int a = 0; a < arms; ++a) {
      auto* spec = c.add_arms();
      spec->set_id(std::to_string(a));
      for (int j = 0; j < d; ++j) spec->add_features(g.Uniform());
    }
  }
  return c;
}

absl::StatusOr<v1::PolicyConfig> MakePolicyConfig(const std::string& p, const std::string& text,
                                                  int d, int arms, Gen& g) {
  v1::PolicyConfig c;
  if (!text.empty()) {
    if (!google::protobuf::TextFormat::ParseFromString(text, &c))
      return absl::InvalidArgumentError(
          "--policy_config is not a text-format bandit.v1.PolicyConfig");
    return c;
  }
  std::vector<std::string> names;
  for (const auto& r : RegisteredPolicies()) {
    if (r.name != p) {
      names.emplace_back(r.name);
      continue;
    }
    auto sized = SizedExample(r.examples.front().config, d, arms, g);
    if (!sized.ok()) return sized.status();
    if (auto made = CreatePolicy(*sized, 1); !made.ok())
      return absl::InvalidArgumentError(absl::StrCat(
          "--policy=", p, " at --d=", d, " --arms=", arms, " is refused (", made.status().message(),
          "); use --policy_config"));
    return *sized;
  }
  return absl::InvalidArgumentError(absl::StrCat("--policy=", p, " is not a registered policy (",
                                                 absl::StrJoin(names, ", "),
                                                 "); use --policy_config"));
}

}  // namespace bandit::loadgen
