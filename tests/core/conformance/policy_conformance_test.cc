// The policy contract (core/policy.h), checked over every registered policy: each registration's
// examples (core/registry.cc) are built and driven through the same checks, so a new policy is
// covered by adding its registration, not by editing this file.
//   1. a refused call leaves Save() byte-identical (random engine included), and the policy then
//      decides exactly as a copy restored from before the call;
//   2. a policy restored from Save() after N rounds makes the same next decisions (arm and
//      propensity) and ends in the same state;
//   3. Select leaves Save() unchanged where SelectReadsOnly() says so;
//   4. StateBytes() is flat in t (10^3 vs 10^4 rounds) where the example declares it constant,
//      stays within what it reached by round 10^3 where bounded, and does grow where it says
//      it grows; the snapshot's encoded size is held to the same (an independent measure);
//   5. bad shapes and non-finite numbers are refused with INVALID_ARGUMENT;
//   6. a finite-arm policy chooses only among the arms SelectContext::allowed_arms allows, with
//      a probability vector over them alone, and decides with every arm allowed exactly as
//      without a mask;
//   7. the footprint a served policy declares from its config (core/footprint.h), which the
//      server admits instances with before building them, bounds StateBytes(): at every round
//      up to 10^4 where the state is constant or bounded, and when built where it grows; and
//      for a constant state it is the exact figure (within kFootprintSlack).
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "core/policy.h"
#include "bench/sim/baselines/sim_policies.h"
#include "core/registry.h"
#include "core/validate.h"
#include "tests/common/deterministic_bytes.h"

namespace bandit {
namespace BANDIT_UNITY_ID {

namespace v1 = bandit::v1;
using google::protobuf::FieldDescriptor;

constexpr uint64_t kSeed = 7;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Case {
  std::string label;  // test name: policy name and example index
  std::string policy;
  std::string text;
  StateGrowth growth;
  bool served;  // false: a simulation-only baseline, built with CreateSimPolicy
};

std::vector<Case> AllCases() {
  std::vector<Case> out;
  auto add = [&out](const auto& registrations, bool served) {
    for (const auto& r : registrations)
      for (size_t i = 0; i < r.examples.size(); ++i)
        out.push_back({absl::StrCat(served ? "" : "sim_", r.name, "_", i), std::string(r.name),
                       std::string(r.examples[i].config), r.examples[i].growth, served});
  };
  add(RegisteredPolicies(), true);
  add(SimOnlyPolicies(), false);
  return out;
}

// Failures name the example's config rather than dump the struct's bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.text; }

// Save() encoded deterministically, so equal states give equal bytes.
std::string Snapshot(const Policy& p) {
  v1::PolicyState state;
  p.Save(&state);
  return testing::DeterministicBytes(state);
}

// The config's `dimension` (the policy's own sub-message), read by reflection so no policy is
// named here; 0 when the config has none.
int ConfigDimension(const v1::SimPolicyConfig& config) {
  const google::protobuf::Message& m =
      config.has_served() ? static_cast<const google::protobuf::Message&>(config.served()) : config;
  const FieldDescriptor* f = m.GetReflection()->GetOneofFieldDescriptor(
      m, m.GetDescriptor()->FindOneofByName("policy"));
  if (f == nullptr) return 0;
  const auto& sub = m.GetReflection()->GetMessage(m, f);
  const FieldDescriptor* dim = sub.GetDescriptor()->FindFieldByName("dimension");
  if (dim == nullptr || dim->cpp_type() != FieldDescriptor::CPPTYPE_INT32) return 0;
  return sub.GetReflection()->GetInt32(sub, dim);
}

// A seeded environment that does not depend on the policy: candidates, points, rewards and
// embeddings come from its own engine, the same number of draws every round whatever the
// decision, so two copies fed to two policies stay in step while their decisions agree.
class World {
 public:
  World(ContextKind kind, int dim, int arm_feature_dim, int embedding_dim, uint64_t seed)
      : kind_(kind),
        dim_(dim),
        arm_feature_dim_(arm_feature_dim),
        embedding_dim_(embedding_dim),
        gen_(seed) {}

  // One Select input (kept alive in *this until the next call).
  SelectContext NextContext(bool want_scores) {
    SelectContext ctx;
    ctx.want_scores = want_scores;
    if (kind_ == ContextKind::kCandidates) {
      candidates_.assign(4, Vector(dim_));
      // Entries in [-1, 1] / sqrt(d): every norm <= 1, the GLB policies' default feature bound.
      for (auto& c : candidates_)
        for (int j = 0; j < dim_; ++j) c[j] = Uniform(-1, 1) / std::sqrt(dim_);
      ctx.candidates = candidates_;
    } else if (kind_ == ContextKind::kPoint) {
      point_ = Vector(dim_);
      for (int j = 0; j < dim_; ++j) point_[j] = Uniform(-1, 1);
      ctx.point = &point_;
    }
    return ctx;
  }

  // The observation of decision `d` on the last context.
  Observation Observe(const Decision& d) {
    Observation obs;
    obs.arm = d.arm;
    obs.arm_id = d.arm_id;
    obs.memo = d.memo;
    const double u = Uniform(0, 1);
    if (kind_ == ContextKind::kCandidates) {
      obs.features = candidates_[d.arm];
      obs.reward = u < 1.0 / (1.0 + std::exp(-3.0 * obs.features.sum())) ? 1.0 : 0.0;
    } else if (kind_ == ContextKind::kPoint) {
      obs.features = point_;
      obs.reward = point_[0] + 0.3 * (u - 0.5) > 0 ? 1.0 : -1.0;  // a class label
    } else {
      obs.reward = u < 0.2 + 0.3 * (d.arm % 3) ? 1.0 : 0.0;
    }
    Vector noise(embedding_dim_);
    for (int j = 0; j < embedding_dim_; ++j) noise[j] = Uniform(-0.1, 0.1);
    if (embedding_dim_ > 0)
      obs.sample = GeneratedSample{noise.array() + 0.5 * (d.arm + 1), std::nullopt};
    return obs;
  }

  ContextKind kind() const { return kind_; }
  int dim() const { return dim_; }
  int arm_feature_dim() const { return arm_feature_dim_; }
  int embedding_dim() const { return embedding_dim_; }

 private:
  double Uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(gen_);
  }

  ContextKind kind_;
  int dim_, arm_feature_dim_, embedding_dim_;
  std::mt19937_64 gen_;
  std::vector<Vector> candidates_;
  Vector point_;
};

// Equal snapshots, reported by size and first differing byte (the bytes themselves are unreadable).
::testing::AssertionResult SameState(const std::string& a, const std::string& b) {
  if (a == b) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return ::testing::AssertionFailure() << "snapshots differ: " << a.size() << " vs " << b.size()
                                       << " bytes, first difference at byte " << i;
}

bool SameNumber(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

class Conformance : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    // A served example is a PolicyConfig; a simulation-only one a SimPolicyConfig.
    ASSERT_TRUE(c.served ? google::protobuf::TextFormat::ParseFromString(c.text, config_.mutable_served())
                         : google::protobuf::TextFormat::ParseFromString(c.text, &config_))
        << "example config of '" << c.policy << "' does not parse: " << c.text;
    policy_ = Make();
    ASSERT_NE(policy_, nullptr);
    const ContextKind kind = policy_->context_kind();
    const int dim = ConfigDimension(config_);
    const auto& served = config_.served();
    const int arm_dim = served.arms_size() > 0 ? served.arms(0).features_size() : 0;
    // A finite-arm policy with a `dimension` reads it as the embedding of its Updates (mixtures).
    world_.emplace(kind, kind == ContextKind::kNone ? 0 : dim, arm_dim,
                   kind == ContextKind::kNone ? dim : 0, kSeed * 1000 + 1);
    if (kind != ContextKind::kNone) {
      ASSERT_GT(dim, 0) << "a contextual example needs its `dimension` set: " << c.text;
    }
  }

  std::unique_ptr<Policy> Make(uint64_t seed = kSeed) {
    auto p = GetParam().served ? CreatePolicy(config_.served(), seed) : CreateSimPolicy(config_, seed);
    EXPECT_TRUE(p.ok()) << p.status() << " for " << GetParam().text;
    return p.ok() ? *std::move(p) : nullptr;
  }

  // One Select + Update; the decision is returned.
  static Decision Round(Policy& p, World& w, int t) {
    const SelectContext ctx = w.NextContext(/*want_scores=*/t % 5 == 0);
    auto d = p.Select(ctx);
    EXPECT_TRUE(d.ok()) << "round " << t << ": " << d.status();
    if (!d.ok()) return Decision();
    const Observation obs = w.Observe(*d);
    const absl::Status s = p.Update(obs);
    EXPECT_TRUE(s.ok()) << "round " << t << ": " << s;
    return *d;
  }

  void Run(Policy& p, World& w, int rounds) {
    for (int t = 0; t < rounds && !HasFailure(); ++t) Round(p, w, t);
  }

  // Both policies, fed identical worlds, decide identically for `rounds` rounds and end in the
  // same state.
  static void ExpectSameDecisions(Policy& a, World& wa, Policy& b, World& wb, int rounds,
                                  const std::string& what) {
    for (int t = 0; t < rounds; ++t) {
      const Decision da = Round(a, wa, t);
      const Decision db = Round(b, wb, t);
      ASSERT_EQ(da.arm, db.arm) << what << ", round " << t;
      ASSERT_EQ(da.arm_id, db.arm_id) << what << ", round " << t;
      ASSERT_TRUE(SameNumber(da.propensity, db.propensity))
          << what << ", round " << t << ": " << da.propensity << " vs " << db.propensity;
      if (da.prediction() || db.prediction()) {
        ASSERT_TRUE(da.prediction() && db.prediction() &&
                    SameNumber(*da.prediction(), *db.prediction()))
            << what << ", round " << t;
      }
    }
    EXPECT_TRUE(SameState(Snapshot(a), Snapshot(b)))
        << what << ": states differ after " << rounds << " rounds";
  }

  v1::SimPolicyConfig config_;  // `served` for a served policy's example
  std::unique_ptr<Policy> policy_;
  std::optional<World> world_;
};

TEST(ConformanceRegistry, EveryPolicyHasAnExampleThatBuildsAsItself) {
  ASSERT_FALSE(RegisteredPolicies().empty());
  for (const auto& r : RegisteredPolicies()) {
    EXPECT_FALSE(r.examples.empty()) << "policy '" << r.name << "' has no example config";
    // The server admits a served policy's instances by its declared footprint.
    EXPECT_NE(r.footprint, nullptr) << "policy '" << r.name << "' declares none";
    for (const auto& e : r.examples) {
      v1::PolicyConfig config;
      ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(std::string(e.config), &config))
          << e.config;
      EXPECT_EQ(config.policy_case(), r.config_case) << e.config;
      auto p = CreatePolicy(config, kSeed);
      ASSERT_TRUE(p.ok()) << p.status() << " for " << e.config;
      EXPECT_EQ((*p)->name(), r.name) << e.config;
    }
  }
  for (const auto& r : SimOnlyPolicies()) {
    EXPECT_FALSE(r.examples.empty()) << "policy '" << r.name << "' has no example config";
    for (const auto& e : r.examples) {
      v1::SimPolicyConfig config;
      ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(std::string(e.config), &config))
          << e.config;
      EXPECT_EQ(config.policy_case(), r.config_case) << e.config;
      auto p = CreateSimPolicy(config, kSeed);
      ASSERT_TRUE(p.ok()) << p.status() << " for " << e.config;
      EXPECT_EQ((*p)->name(), r.name) << e.config;
      // Simulation-only because its state grows.
      EXPECT_EQ(e.growth, StateGrowth::kGrows) << e.config;
    }
  }
}

// The served API's PolicyConfig lists exactly the served policies, and SimPolicyConfig exactly
// the simulation-only ones (besides `served`): a policy cannot be named where it is not built.
TEST(ConformanceRegistry, TheConfigProtosListExactlyTheRegisteredPolicies) {
  auto cases = [](const google::protobuf::Descriptor* d) {
    std::set<int> out;
    const auto* oneof = d->FindOneofByName("policy");
    for (int i = 0; i < oneof->field_count(); ++i) out.insert(oneof->field(i)->number());
    return out;
  };
  std::set<int> served, sim;
  for (const auto& r : RegisteredPolicies()) served.insert(r.config_case);
  for (const auto& r : SimOnlyPolicies()) sim.insert(r.config_case);
  EXPECT_EQ(cases(v1::PolicyConfig::descriptor()), served);
  sim.insert(v1::SimPolicyConfig::kServed);
  EXPECT_EQ(cases(v1::SimPolicyConfig::descriptor()), sim);
}

// A refused call, and the code it must get when the refusal is about a shape or a number
// (nullopt: refused is enough, e.g. a duplicate arm id or an arm change the policy cannot take).
struct BadCall {
  std::string what;
  std::optional<absl::StatusCode> code;
  std::function<absl::Status(Policy&)> call;
};

std::vector<BadCall> BadSelects(const World& w) {
  std::vector<BadCall> out;
  const int d = w.dim();
  auto select = [](std::vector<Vector> candidates) {
    return [candidates](Policy& p) {
      SelectContext ctx;
      ctx.candidates = candidates;
      return p.Select(ctx).status();
    };
  };
  auto select_point = [](std::optional<Vector> x) {
    return [x](Policy& p) {
      SelectContext ctx;
      if (x) ctx.point = &*x;
      return p.Select(ctx).status();
    };
  };
  const auto inv = absl::StatusCode::kInvalidArgument;
  if (w.kind() == ContextKind::kCandidates) {
    const Vector ok = Vector::Constant(d, 0.1);
    Vector nan = ok, inf = ok;
    nan[d - 1] = kNaN;
    inf[0] = kInf;
    out.push_back({"Select with no candidates", inv, select({})});
    out.push_back({"Select with a candidate of dimension d+1", inv,
                   select({ok, Vector::Constant(d + 1, 0.1)})});
    out.push_back({"Select with a candidate of dimension 0", inv, select({ok, Vector()})});
    if (d > 1)
      out.push_back({"Select with a candidate of dimension d-1", inv,
                     select({Vector::Constant(d - 1, 0.1), ok})});
    out.push_back({"Select with a NaN in the last candidate", inv, select({ok, ok, nan})});
    out.push_back({"Select with an infinite candidate", inv, select({inf, ok})});
  } else if (w.kind() == ContextKind::kPoint) {
    Vector nan = Vector::Constant(d, 0.1);
    nan[0] = kNaN;
    out.push_back({"Select without a point", inv, select_point(std::nullopt)});
    out.push_back(
        {"Select with a point of dimension d+1", inv, select_point(Vector::Constant(d + 1, 0.1))});
    out.push_back({"Select with a NaN point", inv, select_point(nan)});
  }
  return out;
}

// Allowed-arm masks a finite-arm policy must refuse: the wrong length, or no arm allowed.
std::vector<BadCall> BadMasks(int arms) {
  std::vector<BadCall> out;
  auto select = [](std::vector<char> mask) {
    return [mask](Policy& p) {
      SelectContext ctx;
      ctx.allowed_arms = mask;
      return p.Select(ctx).status();
    };
  };
  const auto inv = absl::StatusCode::kInvalidArgument;
  out.push_back({"Select with an allowed-arms mask one longer than the arm set", inv,
                 select(std::vector<char>(arms + 1, 1))});
  if (arms > 1)  // (an empty mask means every arm)
    out.push_back({"Select with an allowed-arms mask one shorter than the arm set", inv,
                   select(std::vector<char>(arms - 1, 1))});
  out.push_back({"Select with every arm excluded", inv, select(std::vector<char>(arms, 0))});
  return out;
}

// Variations of `good` (a valid observation of a fresh decision) that must be refused.
std::vector<BadCall> BadUpdates(const World& w, const Observation& good) {
  std::vector<BadCall> out;
  const auto inv = absl::StatusCode::kInvalidArgument;
  auto add = [&](std::string what, std::optional<absl::StatusCode> code,
                 std::function<void(Observation&)> edit) {
    Observation obs = good;
    edit(obs);
    out.push_back({std::move(what), code, [obs](Policy& p) { return p.Update(obs); }});
  };
  // A mixture learns from the sample's embedding and reads no reward; every other policy does.
  if (w.embedding_dim() == 0) {
    add("Update with a NaN reward", inv, [](Observation& o) { o.reward = kNaN; });
    add("Update with an infinite reward", inv, [](Observation& o) { o.reward = kInf; });
    add("Update with a -infinite reward", inv, [](Observation& o) { o.reward = -kInf; });
  }
  if (w.kind() != ContextKind::kNone) {
    const int d = w.dim();
    add("Update with features of dimension d+1", inv,
        [d](Observation& o) { o.features = Vector::Constant(d + 1, 0.1); });
    add("Update with no features", inv, [](Observation& o) { o.features = Vector(); });
    add("Update with a NaN feature", inv, [](Observation& o) { o.features[0] = kNaN; });
  } else {
    add("Update of an unknown arm id", absl::StatusCode::kNotFound,
        [](Observation& o) { o.arm_id = "no-such-arm"; });
  }
  if (w.kind() == ContextKind::kPoint)
    add("Update without the decision's memo", std::nullopt, [](Observation& o) {
      o.memo = Vector();
      o.direct = true;
    });
  if (w.embedding_dim() > 0) {
    const int e = w.embedding_dim();
    add("Update with an embedding of dimension d+1", inv,
        [e](Observation& o) { o.sample->embedding = Vector::Constant(e + 1, 0.5); });
    add("Update with no embedding", inv, [](Observation& o) { o.sample->embedding = Vector(); });
    add("Update with no sample", inv, [](Observation& o) { o.sample.reset(); });
    add("Update with a NaN embedding", inv, [](Observation& o) { o.sample->embedding[0] = kNaN; });
    add("Update with a fidelity above 1", inv, [](Observation& o) { o.sample->fidelity = 1.5; });
    add("Update with a NaN fidelity", inv, [](Observation& o) { o.sample->fidelity = kNaN; });
  }
  return out;
}

// `fixed_arm_set`: the policy has arms but takes no arm change (a mixture oracle's fixed weights);
// then every change is refused with FAILED_PRECONDITION, whatever its argument.
std::vector<BadCall> BadArmChanges(const Policy& p, const World& w, bool fixed_arm_set) {
  std::vector<BadCall> out;
  auto add_arm = [](v1::ArmSpec spec) { return [spec](Policy& q) { return q.AddArm(spec); }; };
  const auto inv = absl::StatusCode::kInvalidArgument;
  const std::vector<std::string> ids = p.ArmIds();
  if (ids.empty()) {
    // No finite arm set: every arm change is refused.
    v1::ArmSpec spec;
    spec.set_id("new");
    out.push_back(
        {"AddArm on a policy without arms", absl::StatusCode::kFailedPrecondition, add_arm(spec)});
    out.push_back({"RemoveArm on a policy without arms", absl::StatusCode::kFailedPrecondition,
                   [](Policy& q) { return q.RemoveArm("0"); }});
    return out;
  }
  auto spec_with = [&](std::string id, int dim, double fill) {
    v1::ArmSpec spec;
    spec.set_id(std::move(id));
    for (int j = 0; j < dim; ++j) spec.add_features(fill);
    return spec;
  };
  auto code = [&](absl::StatusCode c) -> std::optional<absl::StatusCode> {
    return fixed_arm_set ? absl::StatusCode::kFailedPrecondition : c;
  };
  const int fd = w.arm_feature_dim();
  out.push_back({"AddArm with an id already in the arm set", std::nullopt,
                 add_arm(spec_with(ids[0], fd, 0.5))});
  out.push_back({"AddArm with a malformed id", code(inv), add_arm(spec_with("bad id!", fd, 0.5))});
  if (fd > 0) {
    out.push_back({"AddArm with features of dimension d+1", code(inv),
                   add_arm(spec_with("new", fd + 1, 0.5))});
    out.push_back({"AddArm with NaN features", code(inv), add_arm(spec_with("new", fd, kNaN))});
  }
  out.push_back({"RemoveArm of an unknown id", code(absl::StatusCode::kNotFound),
                 [](Policy& q) { return q.RemoveArm("no-such-arm"); }});
  if (fixed_arm_set) {
    out.push_back({"AddArm of a valid new arm to a fixed arm set",
                   absl::StatusCode::kFailedPrecondition, add_arm(spec_with("new", fd, 0.5))});
    out.push_back({"RemoveArm of an arm of a fixed arm set", absl::StatusCode::kFailedPrecondition,
                   [id = ids[0]](Policy& q) { return q.RemoveArm(id); }});
  }
  return out;
}

// Check 1 (and 5): every refused call leaves the state byte-identical, RNG included, and the
// policy then decides as a copy restored from before the call.
TEST_P(Conformance, RefusedCallsLeaveTheStateUnchanged) {
  Run(*policy_, *world_, 40);
  ASSERT_FALSE(HasFailure());
  // A decision to join the bad updates to (its Select is an accepted call, made first).
  const SelectContext ctx = world_->NextContext(false);
  auto decision = policy_->Select(ctx);
  ASSERT_TRUE(decision.ok()) << decision.status();
  const Observation good = world_->Observe(*decision);

  std::vector<BadCall> calls = BadSelects(*world_);
  for (auto& c : BadUpdates(*world_, good)) calls.push_back(std::move(c));
  // Whether the arm set takes changes at all, asked of a fresh copy with a valid new arm.
  bool fixed_arm_set = false;
  if (!policy_->ArmIds().empty()) {
    auto probe = Make();
    ASSERT_NE(probe, nullptr);
    v1::ArmSpec spec;
    spec.set_id("probe");
    for (int j = 0; j < world_->arm_feature_dim(); ++j) spec.add_features(0.5);
    const absl::Status s = probe->AddArm(spec);
    fixed_arm_set = s.code() == absl::StatusCode::kFailedPrecondition;
    ASSERT_TRUE(s.ok() || fixed_arm_set) << "a valid new arm was refused: " << s;
  }
  for (auto& c : BadArmChanges(*policy_, *world_, fixed_arm_set)) calls.push_back(std::move(c));
  if (world_->kind() == ContextKind::kNone)
    for (auto& c : BadMasks(static_cast<int>(policy_->ArmIds().size())))
      calls.push_back(std::move(c));
  ASSERT_GE(calls.size(), 4u);

  // Each call is compared with the state just before it, so a failure names the call that
  // changed the state (not every call after it).
  const std::string before = Snapshot(*policy_);
  for (const BadCall& c : calls) {
    const std::string just_before = Snapshot(*policy_);
    const int64_t bytes_before = policy_->StateBytes();
    const absl::Status s = c.call(*policy_);
    EXPECT_FALSE(s.ok()) << c.what << " was accepted";
    if (c.code) {
      EXPECT_EQ(s.code(), *c.code) << c.what << ": " << s;
    }
    EXPECT_TRUE(SameState(Snapshot(*policy_), just_before))
        << c.what << " (" << s << ") changed the state";
    EXPECT_EQ(policy_->StateBytes(), bytes_before) << c.what;
  }
  ASSERT_FALSE(HasFailure());

  // Whatever Save() does not show must be untouched too: the policy goes on exactly as a copy
  // restored from the state before the refused calls.
  auto twin = Make(kSeed + 1);
  ASSERT_NE(twin, nullptr);
  v1::PolicyState state;
  ASSERT_TRUE(state.ParseFromString(before));
  ASSERT_TRUE(twin->Restore(state).ok());
  World twin_world = *world_;
  ASSERT_TRUE(policy_->Update(good).ok());
  ASSERT_TRUE(twin->Update(good).ok());
  ExpectSameDecisions(*policy_, *world_, *twin, twin_world, 10, "after the refused calls");
}

// Check 1 at the edge of the doubles: inputs at the largest magnitude taken (kMaxInputMagnitude)
// and finite ones beyond it, repeated, are either refused with the state unchanged or taken into
// a state that its snapshot restores (a sum that overflowed to infinity would leave an instance
// its own snapshot cannot rebuild).
TEST_P(Conformance, HugeFiniteInputsLeaveARestorableState) {
  Run(*policy_, *world_, 20);
  ASSERT_FALSE(HasFailure());
  const double kMax = std::numeric_limits<double>::max();
  for (double magnitude : {kMaxInputMagnitude, 1e154, 1e300, kMax}) {
    for (int edit = 0; edit < 3; ++edit) {
      for (int repeat = 0; repeat < 3; ++repeat) {
        const SelectContext ctx = world_->NextContext(false);
        auto decision = policy_->Select(ctx);
        ASSERT_TRUE(decision.ok()) << decision.status();
        Observation obs = world_->Observe(*decision);
        // edit 0: the features scaled, 1: the reward, 2: both.
        if (edit != 1 && obs.features.size() > 0) obs.features *= magnitude;
        if (edit != 0) obs.reward = obs.reward < 0 ? -magnitude : magnitude;
        const std::string what = absl::StrCat("Update with ", edit == 1 ? "" : "features x ",
                                              edit == 0 ? "" : "reward ", magnitude);
        const std::string before = Snapshot(*policy_);
        const absl::Status s = policy_->Update(obs);
        if (!s.ok()) {
          EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what << ": " << s;
          EXPECT_TRUE(SameState(Snapshot(*policy_), before)) << what << " (" << s
                                                             << ") changed the state";
          continue;
        }
        v1::PolicyState state;
        policy_->Save(&state);
        auto restored = Make(kSeed + 1);
        ASSERT_NE(restored, nullptr);
        const absl::Status r = restored->Restore(state);
        ASSERT_TRUE(r.ok()) << what << " was accepted into a state that does not restore: " << r;
      }
    }
  }
}

// An arm set emptied by RemoveArm refuses Select with FAILED_PRECONDITION and no change.
TEST_P(Conformance, EmptyArmSetRefusesSelect) {
  const std::vector<std::string> ids = policy_->ArmIds();
  if (ids.empty()) GTEST_SKIP() << "no finite arm set";
  Run(*policy_, *world_, 10);
  for (const auto& id : ids) {
    const std::string before = Snapshot(*policy_);
    const absl::Status s = policy_->RemoveArm(id);
    if (!s.ok()) {
      // A policy may keep its last arm (or its arm set fixed); the refusal changes nothing.
      EXPECT_TRUE(SameState(Snapshot(*policy_), before))
          << "refused RemoveArm(" << id << "): " << s;
      GTEST_SKIP() << "arm set cannot be emptied: " << s;
    }
  }
  const std::string before = Snapshot(*policy_);
  auto d = policy_->Select(SelectContext());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition) << d.status();
  EXPECT_TRUE(SameState(Snapshot(*policy_), before));
}

// Check 2: Save/Restore resumes exactly.
TEST_P(Conformance, RestoredPolicyMakesTheSameDecisions) {
  Run(*policy_, *world_, 60);
  ASSERT_FALSE(HasFailure());
  v1::PolicyState state;
  policy_->Save(&state);
  // Seeded differently: whatever randomness the decisions need must come from the snapshot.
  auto restored = Make(kSeed + 1);
  ASSERT_NE(restored, nullptr);
  ASSERT_TRUE(restored->Restore(state).ok());
  EXPECT_TRUE(SameState(Snapshot(*restored), Snapshot(*policy_)));
  World restored_world = *world_;
  ExpectSameDecisions(*policy_, *world_, *restored, restored_world, 30, "restored policy");
}

// Check 3: SelectReadsOnly holds where declared.
TEST_P(Conformance, SelectReadsOnlyWhereDeclared) {
  if (!policy_->SelectReadsOnly()) GTEST_SKIP() << "Select may change the state";
  for (int t = 0; t < 50 && !HasFailure(); ++t) {
    const std::string before = Snapshot(*policy_);
    const SelectContext ctx = world_->NextContext(t % 3 == 0);
    auto d = policy_->Select(ctx);
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_TRUE(SameState(Snapshot(*policy_), before)) << "round " << t;
    ASSERT_TRUE(policy_->Update(world_->Observe(*d)).ok());
  }
}

// Check 7's tolerance: a declared footprint may exceed a constant state's StateBytes() by this
// much (a formula may count a scalar or an engine the policy does not keep in every form).
constexpr int64_t kFootprintSlack = 64;

// Check 4: state bytes against the rounds, as the example declares; and check 7, the declared
// footprint against them.
TEST_P(Conformance, StateBytesFollowTheDeclaredGrowth) {
  const StateGrowth growth = GetParam().growth;
  int64_t declared = -1;
  if (GetParam().served) {
    auto d = DeclaredStateBytes(config_.served());
    ASSERT_TRUE(d.ok()) << d.status();
    declared = *d;
    ASSERT_LE(policy_->StateBytes(), declared) << "when built: declared footprint too small";
    if (growth == StateGrowth::kGrows) {
      EXPECT_LE(declared, policy_->StateBytes() + kFootprintSlack)
          << "a growing policy declares its state when built";
    }
  }
  if (growth == StateGrowth::kGrows) {
    // Keeps every round (or every distinct point pulled): the declaration must be true, else
    // the policy should be declared bounded and held to it.
    Run(*policy_, *world_, 100);
    const int64_t b100 = policy_->StateBytes();
    Run(*policy_, *world_, 100);
    EXPECT_GT(policy_->StateBytes(), b100) << "declared kGrows, but the state did not grow";
    return;
  }
  int64_t max_bytes = 0;
  size_t max_snapshot = 0;
  for (int t = 0; t < 1000 && !HasFailure(); ++t) {
    Round(*policy_, *world_, t);
    max_bytes = std::max(max_bytes, policy_->StateBytes());
    if (declared >= 0) {
      ASSERT_LE(policy_->StateBytes(), declared) << "round " << t << " outgrew the footprint";
    }
    if (growth == StateGrowth::kBounded)
      max_snapshot = std::max(max_snapshot, Snapshot(*policy_).size());
  }
  ASSERT_FALSE(HasFailure());
  const int64_t bytes_1e3 = policy_->StateBytes();
  const size_t snapshot_1e3 = Snapshot(*policy_).size();
  // Counters are varints: from 10^3 to 10^4 each may take one more byte.
  constexpr size_t kCounterSlack = 32;
  for (int t = 1000; t < 10000 && !HasFailure(); ++t) {
    Round(*policy_, *world_, t);
    if (growth == StateGrowth::kBounded) {
      ASSERT_LE(policy_->StateBytes(), max_bytes) << "round " << t << " outgrew its budget";
      if (t % 100 == 99) {
        ASSERT_LE(Snapshot(*policy_).size(), max_snapshot + kCounterSlack) << "round " << t;
      }
    }
  }
  ASSERT_FALSE(HasFailure());
  if (declared >= 0) {
    EXPECT_LE(policy_->StateBytes(), declared) << "after 10^4 rounds";
    if (growth == StateGrowth::kConstant) {
      EXPECT_LE(declared, policy_->StateBytes() + kFootprintSlack)
          << "a constant state's footprint is its exact size";
    }
    std::printf("footprint %s: declared %lld, StateBytes %lld after 10^4 rounds\n",
                GetParam().label.c_str(), static_cast<long long>(declared),
                static_cast<long long>(policy_->StateBytes()));
  }
  if (growth == StateGrowth::kConstant) {
    EXPECT_EQ(policy_->StateBytes(), bytes_1e3);
    EXPECT_LE(Snapshot(*policy_).size(), snapshot_1e3 + kCounterSlack);
  }
}

// Check 6: the allowed-arms mask. Random masks (at least one arm each) over 300 rounds: the
// chosen arm is allowed, a probability vector gives the others 0 and sums to 1 over the allowed
// ones, and the propensity is the chosen arm's entry.
TEST_P(Conformance, ChoosesOnlyAllowedArms) {
  if (world_->kind() != ContextKind::kNone) GTEST_SKIP() << "not a finite-arm policy";
  const int k = static_cast<int>(policy_->ArmIds().size());
  std::mt19937_64 gen(kSeed);
  Run(*policy_, *world_, 20);
  for (int t = 0; t < 300 && !HasFailure(); ++t) {
    std::vector<char> mask(k, 0);
    for (auto& m : mask) m = static_cast<char>(gen() % 2);
    mask[gen() % k] = 1;
    SelectContext ctx = world_->NextContext(/*want_scores=*/true);
    ctx.allowed_arms = mask;
    auto d = policy_->Select(ctx);
    ASSERT_TRUE(d.ok()) << "round " << t << ": " << d.status();
    ASSERT_GE(d->arm, 0);
    ASSERT_LT(d->arm, k);
    ASSERT_TRUE(mask[d->arm]) << "round " << t << ": chose excluded arm " << d->arm;
    EXPECT_EQ(d->arm_id, policy_->ArmIds()[d->arm]);
    if (d->score_kind == v1::PROBABILITY) {
      ASSERT_EQ(d->scores.size(), k);
      double allowed_sum = 0;
      for (int i = 0; i < k; ++i) {
        if (!mask[i]) {
          EXPECT_EQ(d->scores[i], 0.0) << "round " << t << ": excluded arm " << i;
        }
        allowed_sum += mask[i] ? d->scores[i] : 0.0;
      }
      EXPECT_NEAR(allowed_sum, 1.0, 1e-5) << "round " << t;
      EXPECT_NEAR(d->scores[d->arm], d->propensity, 1e-5) << "round " << t;
    }
    if (!std::isnan(d->propensity)) {
      EXPECT_GT(d->propensity, 0.0) << "round " << t;
      EXPECT_LE(d->propensity, 1.0) << "round " << t;
    }
    ASSERT_TRUE(policy_->Update(world_->Observe(*d)).ok());
  }
}

// ...and with every arm allowed it decides exactly as without a mask (journals written before
// masks existed replay the same).
TEST_P(Conformance, EveryArmAllowedDecidesAsNoMask) {
  if (world_->kind() != ContextKind::kNone) GTEST_SKIP() << "not a finite-arm policy";
  auto twin = Make();
  ASSERT_NE(twin, nullptr);
  World twin_world = *world_;
  const std::vector<char> all(policy_->ArmIds().size(), 1);
  for (int t = 0; t < 100 && !HasFailure(); ++t) {
    const Decision a = Round(*policy_, *world_, t);
    SelectContext ctx = twin_world.NextContext(/*want_scores=*/t % 5 == 0);
    ctx.allowed_arms = all;
    auto b = twin->Select(ctx);
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(a.arm, b->arm) << "round " << t;
    ASSERT_TRUE(SameNumber(a.propensity, b->propensity)) << "round " << t;
    ASSERT_TRUE(twin->Update(twin_world.Observe(*b)).ok());
  }
  EXPECT_TRUE(SameState(Snapshot(*policy_), Snapshot(*twin)));
}

// Check 8: a policy that takes sparse input decides on a sparse vector exactly as on its dense
// form sum_k value[k] e_index[k]. The world's vectors given as sparse terms, each coordinate
// split into two equal halves (a repeated index adds up, as hashed features that collide) and
// zero coordinates left out, give the same decisions and end in the same state, RNG included.
TEST_P(Conformance, SparseInputDecidesAsItsDenseForm) {
  if (!policy_->TakesSparse()) GTEST_SKIP() << "takes dense vectors only";
  // Vowpal Wabbit's learner updates a repeated index once per occurrence, as VW does (its
  // adaptive and normalized sums see each term): split halves are another example there, by
  // design; its exactness is checked against VW itself (tests/core/vw).
  if (policy_->name() == "vw") GTEST_SKIP() << "VW's terms are not coalesced";
  auto twin = Make();
  ASSERT_NE(twin, nullptr);
  World twin_world = *world_;
  auto to_sparse = [](const Vector& v) {
    SparseVector out;
    for (Eigen::Index j = 0; j < v.size(); ++j) {
      if (v[j] == 0) continue;
      for (int half = 0; half < 2; ++half) {  // v/2 + v/2 == v exactly
        out.index.push_back(static_cast<uint32_t>(j));
        out.value.push_back(v[j] / 2);
      }
    }
    return out;
  };
  for (int t = 0; t < 200 && !HasFailure(); ++t) {
    const Decision a = Round(*policy_, *world_, t);
    const SelectContext dense = twin_world.NextContext(/*want_scores=*/t % 5 == 0);
    std::vector<SparseVector> xs;
    for (const Vector& c : dense.candidates) xs.push_back(to_sparse(c));
    SelectContext ctx;
    ctx.want_scores = dense.want_scores;
    ctx.sparse_candidates = xs;
    auto b = twin->Select(ctx);
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(a.arm, b->arm) << "round " << t;
    ASSERT_TRUE(SameNumber(a.propensity, b->propensity)) << "round " << t;
    Observation obs = twin_world.Observe(*b);
    obs.sparse_features = to_sparse(obs.features);
    obs.features = Vector();
    ASSERT_TRUE(twin->Update(obs).ok()) << "round " << t;
  }
  EXPECT_TRUE(SameState(Snapshot(*policy_), Snapshot(*twin)));
}

INSTANTIATE_TEST_SUITE_P(AllRegistered, Conformance, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.label;
                         });

}  // namespace
}  // namespace bandit
