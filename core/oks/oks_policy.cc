#include "core/oks/oks_policy.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/oks/exact_hypotheses.h"
#include "core/oks/rf_hypotheses.h"
#include "core/validate.h"

namespace bandit::oks {

namespace {

constexpr int kMaxKernels = 1024;
constexpr int kMaxRandomFeatures = 1 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<OnlineKernelSelection>> OnlineKernelSelection::Create(
    const bandit::v1::OksConfig& c, uint64_t seed, bool allow_unbounded) {
  std::unique_ptr<OnlineKernelSelection> p(new OnlineKernelSelection());
  switch (c.variant()) {
    case bandit::v1::OksConfig::OKS:
      p->variant_ = Variant::kOks;
      break;
    case bandit::v1::OksConfig::IOKS:
      p->variant_ = Variant::kIoks;
      break;
    case bandit::v1::OksConfig::OKS_PP:
    case bandit::v1::OksConfig::VARIANT_UNSPECIFIED:
      p->variant_ = Variant::kOksPlusPlus;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("oks.variant ", c.variant(), " is unknown, expected OKS, OKS_PP or IOKS"));
  }
  if (c.loss() < 0 || c.loss() > bandit::v1::OKS_HINGE)
    return absl::InvalidArgumentError(absl::StrCat("oks.loss ", c.loss(), " is unknown"));
  p->loss_ = FromProto(c.loss());
  const LossInfo& info = Info(p->loss_);
  switch (c.task()) {
    case bandit::v1::OKS_TASK_UNSPECIFIED:
      p->classification_ = info.margin;
      break;
    case bandit::v1::OKS_CLASSIFICATION:
      p->classification_ = true;
      break;
    case bandit::v1::OKS_REGRESSION:
      p->classification_ = false;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("oks.task ", c.task(), " is unknown"));
  }
  if (info.margin && !p->classification_)
    return absl::InvalidArgumentError(
        absl::StrCat("oks.loss ", info.name,
                     " is a margin loss for labels in {-1, +1}, expected task "
                     "CLASSIFICATION (or the square / absolute loss for regression)"));
  if (p->variant_ == Variant::kOksPlusPlus && !info.smooth)
    return absl::InvalidArgumentError(
        absl::StrCat("oks.loss ", info.name,
                     " is not smooth (Assumption 1), expected logistic, square or "
                     "squared_hinge for variant OKS_PP"));
  // IOKS accepts every loss: it projects onto ||f|| <= U (eq. (2)), where each of these losses
  // has a bounded derivative (Assumption 3 on the restricted space; e.g. square: |l'| <= 2(U+1)).
  // Section 6 runs IOKS with the square loss too.
  if (c.dimension() <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("oks.dimension is ", c.dimension(), ", expected the input dimension > 0"));
  p->dim_ = c.dimension();
  if (c.kernels_size() == 0)
    return absl::InvalidArgumentError("oks.kernels is empty, expected at least one kernel");
  if (c.kernels_size() > kMaxKernels)
    return absl::InvalidArgumentError(absl::StrCat("oks.kernels has ", c.kernels_size(),
                                                   " entries, expected at most ", kMaxKernels));
  for (int i = 0; i < c.kernels_size(); ++i) {
    const auto& k = c.kernels(i);
    KernelSpec spec;
    switch (k.kind()) {
      case bandit::v1::OksKernel::KIND_UNSPECIFIED:
      case bandit::v1::OksKernel::GAUSSIAN:
        spec.kind = ShiftInvariantKernel::kGaussian;
        break;
      case bandit::v1::OksKernel::LAPLACIAN:
        spec.kind = ShiftInvariantKernel::kLaplacian;
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("oks.kernels[", i, "].kind ", k.kind(), " is unknown"));
    }
    if (!(k.bandwidth() > 0) || !std::isfinite(k.bandwidth()))
      return absl::InvalidArgumentError(absl::StrCat(
          "oks.kernels[", i, "].bandwidth is ", k.bandwidth(), ", expected a finite number > 0"));
    spec.sigma = k.bandwidth();
    p->kernels_.push_back(spec);
  }
  p->k_ = c.kernels_size();
  if (auto s = OptionalParam("oks.u", c.has_u(), c.u(), p->classification_ ? 15.0 : 1.0, &p->u_,
                             CheckPositive);
      !s.ok())
    return s;
  if (auto s = OptionalParam("oks.loss_max", c.has_loss_max(), c.loss_max(), 1.0, &p->loss_max_,
                             CheckPositive);
      !s.ok())
    return s;
  if (auto s = OptionalParam("oks.lipschitz", c.has_lipschitz(), c.lipschitz(), 1.0, &p->lipschitz_,
                             CheckPositive);
      !s.ok())
    return s;
  if (auto s = OptionalParam("oks.lambda_scale", c.has_lambda_scale(), c.lambda_scale(), 1.0,
                             &p->lambda_scale_, CheckPositive);
      !s.ok())
    return s;
  if (auto s = OptionalParam("oks.eta_constant", c.has_eta_constant(), c.eta_constant(), 8.0,
                             &p->eta_constant_, CheckPositive);
      !s.ok())
    return s;
  if (c.horizon() < 0 || c.horizon() == 1)
    return absl::InvalidArgumentError(absl::StrCat("oks.horizon is ", c.horizon(),
                                                   ", expected 0 (doubling) or a horizon T >= 2"));
  p->horizon_ = c.horizon();
  if (c.random_features() < 0 || c.random_features() > kMaxRandomFeatures)
    return absl::InvalidArgumentError(absl::StrCat("oks.random_features is ", c.random_features(),
                                                   ", expected 0 (exact kernels) or 1..",
                                                   kMaxRandomFeatures));
  if (c.support_budget() < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("oks.support_budget is ", c.support_budget(), ", expected >= 0"));
  if (c.random_features() == 0 && c.support_budget() == 0 && !allow_unbounded)
    return absl::InvalidArgumentError(
        "oks.random_features = 0 selects the exact kernel learners, which keep one support "
        "vector per round so their state grows without bound; expected oks.support_budget > 0 "
        "(support vectors kept per kernel, oldest dropped first) or oks.random_features > 0 "
        "(e.g. 400, constant-size state)");
  // Theorem 3.1: for nu = 2 losses G = 1 in delta_t and lambda_{t,i}.
  p->pp_ = {p->k_, p->u_, info.nu == 2 ? 1.0 : p->lipschitz_, info.c0};
  p->rng_ = Rng(seed);
  RandomFeatureForm form = RandomFeatureForm::kCosinePhase;
  switch (c.random_feature_map()) {
    case bandit::v1::OksConfig::RANDOM_FEATURE_MAP_UNSPECIFIED:
    case bandit::v1::OksConfig::COSINE_PHASE:
      break;
    case bandit::v1::OksConfig::COS_SIN_PAIRS:
      form = RandomFeatureForm::kCosSinPairs;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("oks.random_feature_map ",
                                                     c.random_feature_map(),
                                                     " is unknown, expected COSINE_PHASE or "
                                                     "COS_SIN_PAIRS"));
  }
  if (c.random_features() > 0) {
    auto h = RfHypotheses::Draw(p->kernels_, p->dim_, c.random_features(), p->rng_, form);
    if (!h.ok()) return h.status();
    p->hyp_ = std::make_unique<RfHypotheses>(*std::move(h));
  } else {
    p->hyp_ = std::make_unique<ExactHypotheses>(p->kernels_, p->dim_, c.support_budget());
  }
  const int k = p->k_;
  p->cum_loss_ = Vector::Zero(k);
  p->q_ = Vector::Constant(k, 1.0 / k);
  p->eta_steps_ = Vector::Zero(k);
  p->rho_ = Vector::Constant(k, 2.0 * k);  // rho_1 = 2 / p_1 (Algorithm 2 leaves it implicit)
  p->grad_sq_ = Vector::Zero(k);
  return p;
}

double OnlineKernelSelection::ParameterHorizon() const {
  if (horizon_ > 0) return static_cast<double>(horizon_);
  const uint64_t round = static_cast<uint64_t>(t_) + 1;
  return static_cast<double>(std::max<uint64_t>(kMinDoublingHorizon, std::bit_ceil(round)));
}

double OnlineKernelSelection::CurrentDelta() const {
  switch (variant_) {
    case Variant::kOks:
      return OksRemark1Params(k_, ParameterHorizon(), lipschitz_, loss_max_, lambda_scale_).delta;
    case Variant::kOksPlusPlus:
      return OksPlusPlusDelta(pp_, c_sum_);
    case Variant::kIoks:
      return IoksTheoremParams(k_, ParameterHorizon(), u_, lipschitz_, loss_max_, eta_constant_)
          .delta;
  }
  return 0.0;
}

Vector OnlineKernelSelection::IoksEtas() const {
  const IoksParams ip =
      IoksTheoremParams(k_, ParameterHorizon(), u_, lipschitz_, loss_max_, eta_constant_);
  Vector eta(k_);
  for (int i = 0; i < k_; ++i) eta[i] = ip.eta * std::pow(ip.upsilon, eta_steps_[i]);
  return eta;
}

double OnlineKernelSelection::CurrentEta() const {
  switch (variant_) {
    case Variant::kOks:
      return OksRemark1Params(k_, ParameterHorizon(), lipschitz_, loss_max_, lambda_scale_).eta;
    case Variant::kOksPlusPlus:
      return OksPlusPlusEta(k_, q_sq_);
    case Variant::kIoks:
      return IoksEtas().maxCoeff();
  }
  return 0.0;
}

double OnlineKernelSelection::Lambda(int i) const {
  switch (variant_) {
    case Variant::kOks:
      return OksRemark1Params(k_, ParameterHorizon(), lipschitz_, loss_max_, lambda_scale_).lambda;
    case Variant::kOksPlusPlus:
      return OksPlusPlusLambda(pp_, c_sum_, cum_loss_[i]);
    case Variant::kIoks:
      return u_ / (std::sqrt(2.0) * std::sqrt(1.0 + grad_sq_[i]));  // eq. (6)
  }
  return 0.0;
}

Vector OnlineKernelSelection::QDistribution() const {
  if (variant_ == Variant::kIoks) return q_;
  return ExponentialWeights(cum_loss_, CurrentEta());
}

Vector OnlineKernelSelection::Probabilities() const {
  return MixUniform(QDistribution(), CurrentDelta());
}

absl::StatusOr<Decision> OnlineKernelSelection::Select(const SelectContext& ctx) {
  if (ctx.point == nullptr)
    return absl::InvalidArgumentError("x is missing, expected the input point");
  if (auto s = CheckVector("x", *ctx.point, dim_); !s.ok()) return s;
  const Vector q = QDistribution();
  const Vector p = MixUniform(q, CurrentDelta());
  Decision d;
  d.arm = rng_.Categorical(p);  // Algorithm 1 line 5 / Algorithm 2 line 5: I_t ~ p_t
  const double f = hyp_->Eval(d.arm, *ctx.point);
  d.arm_id = absl::StrCat(d.arm);
  d.propensity = p[d.arm];
  d.extension = KernelPrediction{f};
  if (ctx.want_scores) {
    d.scores = p;
    d.score_kind = bandit::v1::PROBABILITY;
  }
  d.diagnostics.emplace_back("bandwidth", kernels_[d.arm].sigma);
  if (classification_) d.diagnostics.emplace_back("label", f < 0 ? -1.0 : 1.0);
  d.memo.resize(kMemoSize);
  d.memo[kMemoArm] = d.arm;
  d.memo[kMemoP] = p[d.arm];
  d.memo[kMemoQ] = q[d.arm];
  d.memo[kMemoPrediction] = f;
  return d;
}

absl::Status OnlineKernelSelection::ValidateUpdate(const Observation& obs) const {
  if (obs.direct || obs.memo.size() == 0)
    return absl::FailedPreconditionError(
        "oks learns only from its own decisions: the update is weighted by the propensity of "
        "the kernel that made the prediction, which a direct observation (no memo) does not "
        "carry; expected an Update joined to a Select");
  if (auto s = CheckVector("x", obs.features, dim_); !s.ok()) return s;
  if (!IsInputNumber(obs.reward))
    return absl::InvalidArgumentError(
        absl::StrCat("label y is ", obs.reward, ", ", kInputNumberExpected));
  if (classification_ && obs.reward != 1.0 && obs.reward != -1.0)
    return absl::InvalidArgumentError(
        absl::StrCat("label y is ", obs.reward, ", expected -1 or +1 for classification"));
  if (obs.memo.size() != kMemoSize)
    return absl::InvalidArgumentError(absl::StrCat("memo has ", obs.memo.size(),
                                                   " entries, expected ", kMemoSize,
                                                   " (kernel, p, q, prediction)"));
  const double arm = obs.memo[kMemoArm];
  if (!(arm >= 0 && arm < k_ && arm == std::floor(arm)))
    return absl::InvalidArgumentError(
        absl::StrCat("memo kernel index is ", arm, ", expected an integer in [0, ", k_, ")"));
  const double p = obs.memo[kMemoP], q = obs.memo[kMemoQ], f = obs.memo[kMemoPrediction];
  if (!(p > 0 && p <= 1))
    return absl::InvalidArgumentError(absl::StrCat("memo propensity is ", p, ", expected (0, 1]"));
  if (!(q >= 0 && q <= 1))
    return absl::InvalidArgumentError(absl::StrCat("memo q is ", q, ", expected [0, 1]"));
  if (!std::isfinite(f))
    return absl::InvalidArgumentError(absl::StrCat("memo prediction is ", f, ", expected finite"));
  return absl::OkStatus();
}

absl::Status OnlineKernelSelection::Update(const Observation& obs) {
  if (auto s = ValidateUpdate(obs); !s.ok()) return s;
  const int i = static_cast<int>(obs.memo[kMemoArm]);
  const double p = obs.memo[kMemoP], q = obs.memo[kMemoQ], f = obs.memo[kMemoPrediction];
  const Vector& x = obs.features;
  const double y = obs.reward;
  const double loss = Loss(loss_, f, y);
  const double g = Derivative(loss_, f, y);  // gradient of l w.r.t. f is g * phi_i(x)
  switch (variant_) {
    case Variant::kOks: {
      const OksParams op =
          OksRemark1Params(k_, ParameterHorizon(), lipschitz_, loss_max_, lambda_scale_);
      hyp_->Step(i, x, op.lambda * g / p, kNoProjection);  // Algorithm 1 line 7
      cum_loss_[i] += loss / p;                            // line 6 (as cumulative loss)
      break;
    }
    case Variant::kOksPlusPlus: {
      const double c = loss / p;  // c~_{t,i}
      c_sum_ += c;                // C~_{t,K}
      cum_loss_[i] += c;          // Delta_{t,i}
      q_sq_ += q * c * c;         // sum q_{tau,i} c~^2, for eta_t
      const double lambda = OksPlusPlusLambda(pp_, c_sum_, cum_loss_[i]);  // Theorem 3.1
      hyp_->Step(i, x, lambda * g / p, u_);                                // eq. (2)
      break;
    }
    case Variant::kIoks: {
      const IoksParams ip =
          IoksTheoremParams(k_, ParameterHorizon(), u_, lipschitz_, loss_max_, eta_constant_);
      // Line 7 with eq. (6): lambda_{t,i} from the gradient norms up to and including round t.
      grad_sq_[i] += g * g * hyp_->FeatureNormSq(i, x) / (p * p);
      const double lambda = u_ / (std::sqrt(2.0) * std::sqrt(1.0 + grad_sq_[i]));
      hyp_->Step(i, x, lambda * g / p, u_);
      // Lines 8-9: eq. (4) then eq. (5).
      Vector eta(k_);
      for (int j = 0; j < k_; ++j) eta[j] = ip.eta * std::pow(ip.upsilon, eta_steps_[j]);
      Vector c_tilde = Vector::Zero(k_);
      c_tilde[i] = IoksLossEstimate(loss / loss_max_, p, eta.maxCoeff());
      q_ = TsallisOmdStep(q_, eta, c_tilde);
      // Lines 10-17: p_{t+1}, and the increasing learning rates.
      const Vector p_next = MixUniform(q_, ip.delta);
      for (int j = 0; j < k_; ++j) {
        if (1.0 / p_next[j] > rho_[j]) {
          rho_[j] = 2.0 / p_next[j];
          eta_steps_[j] += 1.0;
        }
      }
      break;
    }
  }
  ++t_;
  return absl::OkStatus();
}

void OnlineKernelSelection::Save(bandit::v1::PolicyState* out) const {
  StateWriter w(out, name(), 1);
  hyp_->Save(w);
  // As a double (fixed 8 bytes, exact to 2^53) so the serialized size does not grow with t.
  w.PutScalar("t", static_cast<double>(t_));
  w.Put("cum_loss", cum_loss_);
  w.PutScalar("c_sum", c_sum_);
  w.PutScalar("q_sq", q_sq_);
  w.Put("q", q_);
  w.Put("eta_steps", eta_steps_);
  w.Put("rho", rho_);
  w.Put("grad_sq", grad_sq_);
  w.PutRng(rng_);
}

absl::Status OnlineKernelSelection::Restore(const bandit::v1::PolicyState& state) {
  StateReader r(state);
  if (auto s = r.Expect(name(), 1); !s.ok()) return s;
  double t;
  Vector cum_loss, q, eta_steps, rho, grad_sq;
  double c_sum, q_sq;
  Rng rng;
  if (auto s = r.GetScalar("t", &t); !s.ok()) return s;
  if (auto s = r.Get("cum_loss", &cum_loss, k_); !s.ok()) return s;
  if (auto s = r.GetScalar("c_sum", &c_sum); !s.ok()) return s;
  if (auto s = r.GetScalar("q_sq", &q_sq); !s.ok()) return s;
  if (auto s = r.Get("q", &q, k_); !s.ok()) return s;
  if (auto s = r.Get("eta_steps", &eta_steps, k_); !s.ok()) return s;
  if (auto s = r.Get("rho", &rho, k_); !s.ok()) return s;
  if (auto s = r.Get("grad_sq", &grad_sq, k_); !s.ok()) return s;
  if (auto s = r.GetRng(&rng); !s.ok()) return s;
  if (!(t >= 0 && t <= 0x1p53 && t == std::floor(t)) || !cum_loss.allFinite() || !q.allFinite() ||
      !eta_steps.allFinite() || !rho.allFinite() || !grad_sq.allFinite() || !std::isfinite(c_sum) ||
      !std::isfinite(q_sq) || (q.array() < 0).any() || std::abs(q.sum() - 1.0) > 1e-9)
    return absl::InvalidArgumentError(
        "oks state is inconsistent (negative round count, non-finite values, or q not on the "
        "simplex)");
  // Hypotheses last: their Restore is all-or-nothing, and nothing below can fail.
  if (auto s = hyp_->Restore(r); !s.ok()) return s;
  t_ = static_cast<int64_t>(t);
  cum_loss_ = std::move(cum_loss);
  c_sum_ = c_sum;
  q_sq_ = q_sq;
  q_ = std::move(q);
  eta_steps_ = std::move(eta_steps);
  rho_ = std::move(rho);
  grad_sq_ = std::move(grad_sq);
  rng_ = rng;
  return absl::OkStatus();
}

int64_t OnlineKernelSelection::StateBytes() const {
  return hyp_->Bytes() +
         (cum_loss_.size() + q_.size() + eta_steps_.size() + rho_.size() + grad_sq_.size() + 2) *
             static_cast<int64_t>(sizeof(double)) +
         static_cast<int64_t>(sizeof(t_) + sizeof(rng_));
}

std::vector<std::pair<std::string, double>> OnlineKernelSelection::Summary() const {
  std::vector<std::pair<std::string, double>> s = {
      {"rounds", static_cast<double>(t_)},
      {"delta", CurrentDelta()},
      {"eta", CurrentEta()},
      {"parameter_horizon", variant_ == Variant::kOksPlusPlus ? 0.0 : ParameterHorizon()},
  };
  if (const auto* e = dynamic_cast<const ExactHypotheses*>(hyp_.get()))
    s.emplace_back("support_vectors", static_cast<double>(e->total_support()));
  return s;
}

absl::StatusOr<std::unique_ptr<Policy>> MakeOks(const bandit::v1::PolicyConfig& config,
                                                uint64_t seed) {
  auto p = OnlineKernelSelection::Create(config.oks(), seed, /*allow_unbounded=*/false);
  if (!p.ok()) return p.status();
  return std::unique_ptr<Policy>(std::move(*p));
}

}  // namespace bandit::oks
