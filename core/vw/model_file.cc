#include "core/vw/model_file.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/features/vw_hash.h"

namespace bandit::vw {
namespace {

constexpr char kVersion[] = "9.11.2";
constexpr size_t kOnlineStateBytes = 128;

// The options a 9.11.2 model keeps when given (their `.keep()`), as the learner serves them.
// Floats are printed as VW's options serializer prints them (precision 15).
enum class Kind { kSwitch, kFloat, kInteger, kString };
const std::map<std::string, Kind>& KeptOptions() {
  static const auto* kept = new std::map<std::string, Kind>{
      {"adaptive", Kind::kSwitch},
      {"bag", Kind::kInteger},
      {"cb_adf", Kind::kSwitch},
      {"cb_explore_adf", Kind::kSwitch},
      {"cb_type", Kind::kString},
      {"ccb_explore_adf", Kind::kSwitch},
      {"ccb_no_slot_index", Kind::kSwitch},
      {"clip_p", Kind::kFloat},
      {"cover", Kind::kInteger},
      {"cubic", Kind::kString},
      {"epsilon", Kind::kFloat},
      {"first", Kind::kInteger},
      {"first_only", Kind::kSwitch},
      {"gamma_exponent", Kind::kFloat},
      {"gamma_scale", Kind::kFloat},
      {"greedify", Kind::kSwitch},
      {"hash_seed", Kind::kInteger},
      {"interactions", Kind::kString},
      {"invariant", Kind::kSwitch},
      {"lambda", Kind::kFloat},
      {"learning_rate", Kind::kFloat},
      {"noconstant", Kind::kSwitch},
      {"normalized", Kind::kSwitch},
      {"nounif", Kind::kSwitch},
      {"power_t", Kind::kFloat},
      {"psi", Kind::kFloat},
      {"quadratic", Kind::kString},
      {"sgd", Kind::kSwitch},
      {"softmax", Kind::kSwitch},
      {"squarecb", Kind::kSwitch},
  };
  return *kept;
}

// The floats a save_resume weight record carries: the weight, then the adaptive sum and the
// normalizer where the update keeps them (gd.cc save_load_online_state_weights).
int FloatsPerWeight(const RegressorOptions& r) {
  return 1 + (r.adaptive ? 1 : 0) + (r.normalized ? 1 : 0);
}

class Writer {
 public:
  // bin_write_fixed: the bytes, and when `hashed` the header checksum chained over them.
  void Fixed(const void* data, size_t n, bool hashed) {
    const char* p = static_cast<const char*>(data);
    out_.append(p, n);
    if (hashed && n > 0) hash_ = features::MurmurHash3(std::string_view(p, n), hash_);
  }
  template <typename T>
  void Put(T v, bool hashed = false) {
    Fixed(&v, sizeof(v), hashed);
  }
  // bin_write: a u32 length counting the NUL, then the bytes and the NUL.
  void String(const std::string& s, bool hashed) {
    Put<uint32_t>(static_cast<uint32_t>(s.size() + 1), hashed);
    Fixed(s.c_str(), s.size() + 1, hashed);
  }
  uint32_t hash() const { return hash_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
  uint32_t hash_ = 0;
};

class Reader {
 public:
  explicit Reader(absl::string_view bytes) : bytes_(bytes) {}
  bool Fixed(void* data, size_t n, bool hashed) {
    if (bytes_.size() - at_ < n) return false;
    std::memcpy(data, bytes_.data() + at_, n);
    if (hashed && n > 0)
      hash_ = features::MurmurHash3(std::string_view(bytes_.data() + at_, n), hash_);
    at_ += n;
    return true;
  }
  template <typename T>
  bool Get(T* v, bool hashed = false) {
    return Fixed(v, sizeof(T), hashed);
  }
  bool String(std::string* s, bool hashed, size_t max) {
    uint32_t n = 0;
    if (!Get(&n, hashed) || n == 0 || n > max || left() < n) return false;
    s->resize(n);
    Fixed(s->data(), n, hashed);
    s->resize(n - 1);  // the NUL
    return true;
  }
  bool AtEnd() const { return at_ == bytes_.size(); }
  size_t left() const { return bytes_.size() - at_; }
  uint32_t hash() const { return hash_; }

 private:
  absl::string_view bytes_;
  size_t at_ = 0;
  uint32_t hash_ = 0;
};

std::string OptionValue(Kind kind, const std::string& value) {
  if (kind == Kind::kFloat) {
    double v = 0;
    if (!absl::SimpleAtod(value, &v)) return value;  // the parser took it: not reached
    return absl::StrFormat("%.15g", static_cast<double>(static_cast<float>(v)));
  }
  return value;
}

// The kept options as VW's header writes them: sorted by long name, " --name value" each, the
// inserted cb_adf options included, then --ignore's letters as one sorted set.
std::string OptionsString(const VwOptions& o, uint64_t random_state) {
  std::map<std::string, std::vector<std::string>> kept;
  kept["cb_adf"] = {""};
  kept["cb_type"] = {std::string(CbTypeName(o.cb_type))};
  kept["csoaa_ldf"] = {"multiline"};
  kept["csoaa_rank"] = {""};
  if (o.reduction == Reduction::kCbExploreAdf) kept["cb_explore_adf"] = {""};
  if (o.ccb) kept["cb_sample"] = {""};  // inserted by ccb_explore_adf's setup
  for (const auto& [name, value] : o.supplied) {
    auto it = KeptOptions().find(name);
    if (it == KeptOptions().end() || name == "cb_adf" || name == "cb_type" ||
        name == "cb_explore_adf" || name == "cb_sample")
      continue;
    kept[name].push_back(OptionValue(it->second, value));
  }
  std::string out;
  for (const auto& [name, values] : kept)
    for (const std::string& v : values) absl::StrAppend(&out, " --", name, v.empty() ? "" : " ", v);
  std::set<char> ignore(o.space.ignore.begin(), o.space.ignore.end());
  if (!ignore.empty())
    absl::StrAppend(&out, " --ignore ", std::string(ignore.begin(), ignore.end()));
  // save_load_header: the random state, where it moved from 0 (--bag's draws), as --random_seed.
  if (random_state != 0) absl::StrAppend(&out, " --random_seed ", random_state);
  return out;
}

absl::Status Corrupt(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("vw model: ", what));
}

}  // namespace

std::string WriteModelFile(const CbLearner& learner) {
  const VwOptions& o = learner.options();
  const Regressor& r = learner.regressor();
  const Regressor::Scalars& s = r.scalars();
  Writer w;
  // Header (parse_regressor.cc save_load_header).
  w.String(kVersion, /*hashed=*/false);
  w.String("", true);  // the model id
  w.Put<char>('m', true);
  w.Put<float>(s.min_label, true);
  w.Put<float>(s.max_label, true);
  w.Put<uint32_t>(static_cast<uint32_t>(o.weight_bits), true);
  w.Put<uint32_t>(0, true);  // lda
  w.Put<uint32_t>(0, true);  // ngrams
  w.Put<uint32_t>(0, true);  // skips
  const CbLearner::Counters c = learner.counters();
  w.String(OptionsString(o, c.random_state), true);
  const uint32_t checksum = w.hash();
  w.Put<uint32_t>(4);
  w.Put<uint32_t>(checksum);
  // The reductions, top of the stack first: ccb's flag (conditional_contextual_bandit.cc
  // save_load), the explorer's counter, cb_adf's counts, gd.
  if (o.ccb) w.Put<uint8_t>(c.slot_index_seen ? 1 : 0);
  if (o.explorer == Explorer::kSquareCb) w.Put<uint64_t>(c.squarecb_rounds);
  if (o.explorer == Explorer::kFirst) w.Put<uint64_t>(c.first_remaining);
  if (o.explorer == Explorer::kCover) w.Put<uint64_t>(c.cover_rounds);
  w.Put<uint64_t>(c.event_sum);
  w.Put<uint64_t>(c.action_sum);
  // gd: save_resume, its online state, then the weights.
  w.Put<uint8_t>(1);
  const RegressorOptions& ro = o.regressor;
  const float initial_t = Regressor::InitialT(ro);
  w.Put<float>(initial_t);
  w.Put<double>(s.normalized_sum_norm_x);
  w.Put<double>(s.t);
  w.Put<double>(0);   // sum_loss
  w.Put<double>(0);   // sum_loss_since_last_dump
  w.Put<float>(1.f);  // dump_interval
  w.Put<float>(s.min_label);
  w.Put<float>(s.max_label);
  // The labeled rounds (MTR counts them; the other cb_types learn every round too).
  const uint64_t labeled = o.cb_type == CbType::kMtr
                               ? c.event_sum
                               : static_cast<uint64_t>(std::max(0.0, s.t - initial_t));
  w.Put<double>(static_cast<double>(labeled));  // weighted_labeled_examples
  w.Put<double>(0);                             // weighted_labels
  w.Put<double>(0);                             // weighted_unlabeled_examples
  w.Put<uint64_t>(labeled);                     // example_number
  w.Put<uint64_t>(0);                               // total_features
  w.Put<double>(s.total_weight);
  w.Put<double>(0);    // old_weighted_labeled_examples
  w.Put<uint64_t>(1);  // current_pass
  w.Put<double>(s.gravity);
  w.Put<double>(s.contraction);
  const int k = FloatsPerWeight(ro);
  const size_t stride = size_t{1} << r.stride_shift();
  const std::vector<float>& weights = r.weights();
  for (size_t i = 0; i < weights.size(); i += stride) {
    bool any = false;
    for (int j = 0; j < k; ++j) any = any || weights[i + j] != 0.f;
    if (!any) continue;
    w.Put<uint32_t>(static_cast<uint32_t>(i / stride));
    for (int j = 0; j < k; ++j) w.Put<float>(weights[i + j]);
  }
  return w.Take();
}

absl::StatusOr<ModelFile> ReadModelFile(absl::string_view bytes, absl::string_view extra_arguments,
                                        uint64_t seed) {
  Reader in(bytes);
  std::string version, id, options;
  if (!in.String(&version, false, 512)) return Corrupt("no version string: not a VW model file");
  if (version.rfind("9.", 0) != 0)
    return Corrupt(absl::StrCat("written by VW ", version, ", expected VW 9 (9.11.2)"));
  char marker = 0;
  float min_label = 0, max_label = 0;
  uint32_t bits = 0, lda = 0, ngrams = 0, skips = 0;
  if (!in.String(&id, true, 512) || !in.Get(&marker, true) || marker != 'm')
    return Corrupt("the header has no model marker: not a VW model file");
  if (!in.Get(&min_label, true) || !in.Get(&max_label, true) || !in.Get(&bits, true) ||
      !in.Get(&lda, true) || !in.Get(&ngrams, true))
    return Corrupt("the header is truncated");
  if (lda != 0) return Corrupt("the model is an LDA model, expected a contextual bandit");
  if (ngrams != 0) return Corrupt("the model uses --ngram, which is not served");
  if (!in.Get(&skips, true)) return Corrupt("the header is truncated");
  if (skips != 0) return Corrupt("the model uses --skips, which is not served");
  if (!in.String(&options, true, 100 << 20)) return Corrupt("the options string is truncated");
  const uint32_t computed = in.hash();
  uint32_t checksum_bytes = 0, checksum = 0;
  if (!in.Get(&checksum_bytes) || checksum_bytes != 4 || !in.Get(&checksum))
    return Corrupt("the header's checksum is missing");
  if (checksum != computed)
    return Corrupt(absl::StrCat("the header's checksum is ", checksum, " but its bytes hash to ",
                                computed, ": the file is corrupted"));
  if (bits < 1 || bits > 30) return Corrupt(absl::StrCat("-b is ", bits, ", expected 1..30"));

  // The arguments: the kept options less those cb_adf sets itself.
  std::vector<std::string> tokens = absl::StrSplit(options, ' ', absl::SkipEmpty());
  std::vector<std::string> arguments = {absl::StrCat("-b ", bits)};
  const bool explore = std::find(tokens.begin(), tokens.end(), "--cb_explore_adf") != tokens.end();
  const bool bag = std::find(tokens.begin(), tokens.end(), "--bag") != tokens.end();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (t == "--csoaa_rank" || t == "--cb_sample" || (t == "--cb_adf" && explore)) continue;
    // The random state VW saves whatever its reductions; only --bag's draws read it here.
    if (t == "--random_seed" && !bag) {
      ++i;
      continue;
    }
    if (t == "--csoaa_ldf") {
      if (i + 1 < tokens.size() && tokens[i + 1] == "multiline") {
        ++i;
        continue;
      }
      return Corrupt("--csoaa_ldf is not multiline: not a cb_adf model");
    }
    arguments.push_back(t);
  }
  std::string joined = absl::StrJoin(arguments, " ");
  if (!extra_arguments.empty()) absl::StrAppend(&joined, " ", extra_arguments);
  auto parsed = ParseVwArguments(joined);
  if (!parsed.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("vw model (options '", options, "'): ", parsed.status().message()));
  auto learner = std::make_unique<CbLearner>(*parsed, seed);

  // The reductions' blocks.
  CbLearner::Counters c;
  c.random_state = parsed->random_seed;  // the state the header saved
  if (parsed->ccb) {
    uint8_t seen = 0;
    if (!in.Get(&seen) || seen > 1) return Corrupt("truncated or corrupt in ccb's flag");
    c.slot_index_seen = seen == 1;
  }
  if (parsed->explorer == Explorer::kSquareCb && !in.Get(&c.squarecb_rounds))
    return Corrupt("truncated in --squarecb's counter");
  if (parsed->explorer == Explorer::kFirst && !in.Get(&c.first_remaining))
    return Corrupt("truncated in --first's count");
  if (parsed->explorer == Explorer::kCover && !in.Get(&c.cover_rounds))
    return Corrupt("truncated in --cover's counter");
  if (!in.Get(&c.event_sum) || !in.Get(&c.action_sum))
    return Corrupt("truncated in cb_adf's counts");
  uint8_t resume = 0;
  if (!in.Get(&resume)) return Corrupt("truncated before the regressor");
  Regressor::Scalars s;
  s.min_label = min_label;
  s.max_label = max_label;
  if (resume) {
    float initial_t = 0, dump_interval = 0;
    double sum_loss = 0, sum_loss_since = 0, weighted_labeled = 0, weighted_labels = 0,
           weighted_unlabeled = 0, old_weighted = 0;
    uint64_t example_number = 0, total_features = 0, current_pass = 0;
    const bool ok = in.Get(&initial_t) && in.Get(&s.normalized_sum_norm_x) && in.Get(&s.t) &&
                    in.Get(&sum_loss) && in.Get(&sum_loss_since) && in.Get(&dump_interval) &&
                    in.Get(&s.min_label) && in.Get(&s.max_label) && in.Get(&weighted_labeled) &&
                    in.Get(&weighted_labels) && in.Get(&weighted_unlabeled) &&
                    in.Get(&example_number) && in.Get(&total_features) && in.Get(&s.total_weight) &&
                    in.Get(&old_weighted) && in.Get(&current_pass) && in.Get(&s.gravity) &&
                    in.Get(&s.contraction);
    if (!ok) return Corrupt("truncated in the regressor's online state");
  } else {
    // A predict-only model (--predict_only_model): the weights alone.
    s.t = learner->regressor().scalars().t;
    s.normalized_sum_norm_x = learner->regressor().scalars().normalized_sum_norm_x;
    s.total_weight = learner->regressor().scalars().total_weight;
  }
  const Regressor& r = learner->regressor();
  std::vector<float> weights(r.weights().size());
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = r.InitialValue(i);
  const int k = resume ? FloatsPerWeight(parsed->regressor) : 1;
  const size_t stride = size_t{1} << r.stride_shift();
  const uint64_t slots = uint64_t{1} << bits;
  while (!in.AtEnd()) {
    uint32_t index = 0;
    if (!in.Get(&index) || in.left() < sizeof(float) * k)
      return Corrupt("the weight list ends inside a record");
    if (index >= slots)
      return Corrupt(absl::StrCat("weight index ", index, " is beyond 2^b = ", slots,
                                  ": the file is corrupted or its layout is not this update's"));
    for (int j = 0; j < k; ++j) in.Get(&weights[index * stride + j]);
  }
  if (auto st = learner->Load(std::move(weights), s, c); !st.ok()) return Corrupt(st.message());
  return ModelFile{std::move(joined), std::move(learner)};
}

bool IsModelFile(absl::string_view bytes) {
  // A u32 length (the version string's, NUL included: 2..16), then "9.".
  if (bytes.size() < 7) return false;
  uint32_t n = 0;
  std::memcpy(&n, bytes.data(), sizeof(n));
  return n >= 3 && n <= 16 && bytes.substr(4, 2) == "9.";
}

absl::StatusOr<std::string> ModelFileFromState(const bandit::v1::PolicyConfig& config,
                                               const bandit::v1::PolicyState& state) {
  if (!config.has_vw())
    return absl::FailedPreconditionError(
        "the instance's policy is not vw: only Vowpal Wabbit's learner exports a VW model");
  auto policy = CbLearner::Make(config, 0);
  if (!policy.ok()) return policy.status();
  if (auto s = (*policy)->Restore(state); !s.ok()) return s;
  return WriteModelFile(static_cast<const CbLearner&>(**policy));
}

absl::StatusOr<ImportedModel> StateFromModelFile(absl::string_view bytes,
                                                 absl::string_view extra_arguments) {
  auto read = ReadModelFile(bytes, extra_arguments, 0);
  if (!read.ok()) return read.status();
  ImportedModel out;
  out.arguments = read->arguments;
  read->learner->Save(&out.state);
  return out;
}

}  // namespace bandit::vw
