#include "server/instance/decision_log/decision_log.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <type_traits>

#include <google/protobuf/io/coded_stream.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bandit/v1/storage.pb.h"
#include "core/classic/argmax_probability.h"

namespace bandit::server {
namespace {

using google::protobuf::io::CodedOutputStream;
namespace v1 = bandit::v1;

// Packed doubles are copied as they lie in memory, which is the wire's byte order only here.
static_assert(std::endian::native == std::endian::little, "the log encodes doubles by memcpy");

constexpr uint32_t kVarint = 0, kFixed64 = 1, kDelimited = 2;
constexpr uint32_t Tag(int field, uint32_t wire_type) {
  return (static_cast<uint32_t>(field) << 3) | wire_type;
}

// The protobuf wire format, as LoggedDecision's generated code writes it (fields in number
// order, proto3 defaults omitted, packed repeated doubles), in two passes over the same code:
// SizeSink counts, WriteSink writes. Tested byte for byte against SerializeAsString.
struct SizeSink {
  size_t n = 0;
  void Varint(int field, uint64_t v) {
    n += CodedOutputStream::VarintSize32(Tag(field, kVarint)) + CodedOutputStream::VarintSize64(v);
  }
  void Fixed64(int field, uint64_t) {
    n += CodedOutputStream::VarintSize32(Tag(field, kFixed64)) + 8;
  }
  void Delimited(int field, size_t len) {
    n += CodedOutputStream::VarintSize32(Tag(field, kDelimited)) +
         CodedOutputStream::VarintSize64(len) + len;
  }
  void Bytes(int field, absl::string_view s) { Delimited(field, s.size()); }
  // A nested message's tag and length; its fields follow through the same sink.
  void MessageBegin(int field, size_t len) {
    n += CodedOutputStream::VarintSize32(Tag(field, kDelimited)) +
         CodedOutputStream::VarintSize64(len);
  }
  void PackedBegin(int field, size_t count) { Delimited(field, 8 * count); }
  void PackedValues(const double*, size_t) {}
  // Packed varints: the field's tag and byte length, then each value without a tag.
  void PackedVarintsBegin(int field, size_t len) { MessageBegin(field, len); }
  void VarintValue(uint64_t v) { n += CodedOutputStream::VarintSize64(v); }
};

struct WriteSink {
  uint8_t* p;
  void Varint(int field, uint64_t v) {
    p = CodedOutputStream::WriteVarint32ToArray(Tag(field, kVarint), p);
    p = CodedOutputStream::WriteVarint64ToArray(v, p);
  }
  void Fixed64(int field, uint64_t v) {
    p = CodedOutputStream::WriteVarint32ToArray(Tag(field, kFixed64), p);
    p = CodedOutputStream::WriteLittleEndian64ToArray(v, p);
  }
  void Bytes(int field, absl::string_view s) {
    p = CodedOutputStream::WriteVarint32ToArray(Tag(field, kDelimited), p);
    p = CodedOutputStream::WriteVarint64ToArray(s.size(), p);
    if (!s.empty()) std::memcpy(p, s.data(), s.size());
    p += s.size();
  }
  void MessageBegin(int field, size_t len) {
    p = CodedOutputStream::WriteVarint32ToArray(Tag(field, kDelimited), p);
    p = CodedOutputStream::WriteVarint64ToArray(len, p);
  }
  void PackedBegin(int field, size_t count) { MessageBegin(field, 8 * count); }
  void PackedValues(const double* v, size_t count) {
    if (count == 0) return;
    std::memcpy(p, v, 8 * count);
    p += 8 * count;
  }
  void PackedVarintsBegin(int field, size_t len) { MessageBegin(field, len); }
  void VarintValue(uint64_t v) { p = CodedOutputStream::WriteVarint64ToArray(v, p); }
};

// int32/enum fields: negative values are sign-extended to 10 varint bytes, as protobuf does.
uint64_t Int32Bits(int32_t v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); }

// The field numbers, from the generated code: the encoder cannot drift from the .proto.
using Logged = v1::LoggedDecision;
using Posteriors = v1::ArgmaxPosteriors;
using Action = v1::LoggedAction;

// LoggedDecision.posteriors: ArgmaxPosteriors' family, first and second (packed).
template <typename Sink>
void EncodePosteriors(const ArgmaxPosteriors& q, Sink& s) {
  const size_t n = static_cast<size_t>(q.first.size());
  const uint64_t family = q.beta ? Posteriors::BETA : Posteriors::NORMAL;
  SizeSink inner;
  inner.Varint(Posteriors::kFamilyFieldNumber, family);
  if (n > 0) {
    inner.PackedBegin(Posteriors::kFirstFieldNumber, n);
    inner.PackedBegin(Posteriors::kSecondFieldNumber, n);
  }
  s.MessageBegin(Logged::kPosteriorsFieldNumber, inner.n);
  s.Varint(Posteriors::kFamilyFieldNumber, family);
  if (n > 0) {
    s.PackedBegin(Posteriors::kFirstFieldNumber, n);
    s.PackedValues(q.first.data(), n);
    s.PackedBegin(Posteriors::kSecondFieldNumber, n);
    s.PackedValues(q.second.data(), n);
  }
}

// Every LoggedDecision field of `c` but the outcome (EncodeOutcome), posteriors last.
template <typename Sink>
void EncodeContext(const DecisionLog::Context& c, Sink& s) {
  if (c.event_seq != 0) s.Varint(Logged::kEventSeqFieldNumber, c.event_seq);
  if (!c.event_id.empty()) s.Bytes(Logged::kEventIdFieldNumber, c.event_id);
  if (c.decided_at_ms != 0)
    s.Varint(Logged::kDecidedAtMsFieldNumber, static_cast<uint64_t>(c.decided_at_ms));
  if (c.num_candidates != 0)
    s.Varint(Logged::kNumCandidatesFieldNumber, Int32Bits(c.num_candidates));
  if (c.candidate_dim != 0) s.Varint(Logged::kCandidateDimFieldNumber, Int32Bits(c.candidate_dim));
  size_t values = 0;
  for (const Vector& v : c.candidates) values += static_cast<size_t>(v.size());
  if (values > 0) {
    s.PackedBegin(Logged::kCandidatesFieldNumber, values);
    for (const Vector& v : c.candidates) s.PackedValues(v.data(), static_cast<size_t>(v.size()));
  }
  if (c.x != nullptr && c.x->size() > 0) {
    s.PackedBegin(Logged::kXFieldNumber, static_cast<size_t>(c.x->size()));
    s.PackedValues(c.x->data(), static_cast<size_t>(c.x->size()));
  }
  for (const std::string& id : c.arm_ids) s.Bytes(Logged::kArmIdsFieldNumber, id);
  if (c.num_actions != 0) s.Varint(Logged::kNumActionsFieldNumber, Int32Bits(c.num_actions));
  if (c.chosen_index != 0) s.Varint(Logged::kChosenIndexFieldNumber, Int32Bits(c.chosen_index));
  if (!c.chosen_arm_id.empty()) s.Bytes(Logged::kChosenArmIdFieldNumber, c.chosen_arm_id);
  if (c.propensity.has_value())
    s.Fixed64(Logged::kPropensityFieldNumber, std::bit_cast<uint64_t>(*c.propensity));
  if (!c.probabilities.empty()) {
    s.PackedBegin(Logged::kProbabilitiesFieldNumber, c.probabilities.size());
    s.PackedValues(c.probabilities.data(), c.probabilities.size());
  } else if (c.one_hot_actions > 0) {
    const size_t n = static_cast<size_t>(c.one_hot_actions);
    s.PackedBegin(Logged::kProbabilitiesFieldNumber, n);
    if constexpr (std::is_same_v<Sink, WriteSink>) {
      std::memset(s.p, 0, 8 * n);
      if (c.chosen_index >= 0 && static_cast<size_t>(c.chosen_index) < n) {
        const double one = 1.0;
        std::memcpy(s.p + 8 * static_cast<size_t>(c.chosen_index), &one, 8);
      }
      s.p += 8 * n;
    }
  }
  if (!c.policy.empty()) s.Bytes(Logged::kPolicyFieldNumber, c.policy);
  // Before posteriors, which stay last in the held bytes (Entry::tail).
  if (c.named != nullptr) {
    if (!c.named->context.empty()) s.Bytes(Logged::kNamedContextFieldNumber, c.named->context);
    for (int i : c.named_actions) {
      const NamedAction& a = c.named->actions[static_cast<size_t>(i)];
      SizeSink inner;
      if (!a.id.empty()) inner.Bytes(Action::kIdFieldNumber, a.id);
      if (!a.features.empty()) inner.Bytes(Action::kFeaturesFieldNumber, a.features);
      s.MessageBegin(Logged::kNamedActionsFieldNumber, inner.n);
      if (!a.id.empty()) s.Bytes(Action::kIdFieldNumber, a.id);
      if (!a.features.empty()) s.Bytes(Action::kFeaturesFieldNumber, a.features);
    }
  }
  if (c.slot != nullptr) {
    if (!c.slot->id.empty()) s.Bytes(Logged::kSlotIdFieldNumber, c.slot->id);
    if (c.slot_index != 0) s.Varint(Logged::kSlotIndexFieldNumber, Int32Bits(c.slot_index));
    if (!c.slot_actions.empty()) {
      SizeSink inner;
      for (int a : c.slot_actions) inner.VarintValue(Int32Bits(a));
      s.PackedVarintsBegin(Logged::kSlotActionsFieldNumber, inner.n);
      for (int a : c.slot_actions) s.VarintValue(Int32Bits(a));
    }
    if (c.baseline_index != 0) s.Varint(Logged::kBaselineIndexFieldNumber, Int32Bits(c.baseline_index));
    if (!c.slot->features.empty()) s.Bytes(Logged::kSlotFeaturesFieldNumber, c.slot->features);
  }
  if (c.posteriors != nullptr) EncodePosteriors(*c.posteriors, s);
}

// LoggedDecision's outcome fields (outcome, reward, outcome_at_ms) of `e`.
template <typename Sink>
void EncodeOutcome(const DecisionLog::Entry& e, Sink& s) {
  if (e.outcome != v1::OUTCOME_PENDING) s.Varint(Logged::kOutcomeFieldNumber, Int32Bits(e.outcome));
  // proto3 omits a double only when its bits are zero (-0.0 is written).
  if (std::bit_cast<uint64_t>(e.reward) != 0)
    s.Fixed64(Logged::kRewardFieldNumber, std::bit_cast<uint64_t>(e.reward));
  if (e.outcome_at_ms != 0)
    s.Varint(Logged::kOutcomeAtMsFieldNumber, static_cast<uint64_t>(e.outcome_at_ms));
}

size_t OutcomeSize(const DecisionLog::Entry& e) {
  SizeSink s;
  EncodeOutcome(e, s);
  return s.n;
}

}  // namespace

absl::Status DecisionLog::Normalize(bandit::v1::DecisionLogConfig* c) {
  if (c->max_events() < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "config.decision_log.max_events is ", c->max_events(), ", expected 0 (default) or more"));
  if (c->max_bytes() < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "config.decision_log.max_bytes is ", c->max_bytes(), ", expected 0 (default) or more"));
  if (c->max_age_ms() < 0)
    return absl::InvalidArgumentError(absl::StrCat("config.decision_log.max_age_ms is ",
                                                   c->max_age_ms(),
                                                   ", expected 0 (no age bound) or more"));
  if (!c->enabled()) return absl::OkStatus();
  if (c->max_events() == 0) c->set_max_events(kDefaultMaxEvents);
  if (c->max_bytes() == 0) c->set_max_bytes(kDefaultMaxBytes);
  return absl::OkStatus();
}

uint64_t DecisionLog::EventSeqOf(const std::string& event_id) {
  const size_t dash = event_id.rfind('-');
  if (dash == std::string::npos) return 0;
  uint64_t seq = 0;
  if (!absl::SimpleHexAtoi(absl::string_view(event_id).substr(dash + 1), &seq)) return 0;
  return seq;
}

size_t DecisionLog::EncodedSize(const Entry& e) { return e.size + OutcomeSize(e); }

void DecisionLog::Decode(const Entry& e, bandit::v1::LoggedDecision* out) {
  // The bytes were written by this process (Append): they parse.
  (void)out->ParseFromArray(e.data, static_cast<int>(e.size));
  out->set_outcome(e.outcome);
  out->set_reward(e.reward);
  out->set_outcome_at_ms(e.outcome_at_ms);
}

char* DecisionLog::Reserve(size_t size, uint64_t* chunk_id) {
  if (chunks_.empty() || chunks_.back()->capacity - chunks_.back()->used < size) {
    std::shared_ptr<Chunk> chunk;
    if (spare_ != nullptr && spare_->capacity >= size) {
      chunk = std::move(spare_);
      chunk->used = 0;
    } else {
      const size_t last = chunks_.empty() ? 0 : chunks_.back()->capacity;
      const size_t capacity = std::max(size, std::clamp(2 * last, kMinChunkBytes, kMaxChunkBytes));
      chunk = std::make_shared<Chunk>();
      chunk->data.reset(new char[capacity]);  // not zeroed: every byte used is written first
      chunk->capacity = capacity;
    }
    chunks_.push_back(std::move(chunk));
  }
  Chunk& back = *chunks_.back();
  *chunk_id = first_chunk_ + chunks_.size() - 1;
  char* p = back.data.get() + back.used;
  back.used += size;
  return p;
}

int64_t DecisionLog::Append(const Context& c, int64_t now) {
  SizeSink size;
  EncodeContext(c, size);
  Entry e;
  e.event_seq = c.event_seq;
  e.decided_at_ms = c.decided_at_ms;
  e.size = static_cast<uint32_t>(size.n);
  if (c.posteriors != nullptr) {
    SizeSink tail;
    EncodePosteriors(*c.posteriors, tail);
    e.tail = static_cast<uint32_t>(tail.n);
  }
  char* p = Reserve(size.n, &e.chunk);
  WriteSink w{reinterpret_cast<uint8_t*>(p)};
  EncodeContext(c, w);
  e.data = p;
  Push(e);
  return ApplyRetention(now);
}

int64_t DecisionLog::Append(const bandit::v1::LoggedDecision& d, int64_t now) {
  Hold(d);
  return ApplyRetention(now);
}

void DecisionLog::Hold(const bandit::v1::LoggedDecision& d) {
  Entry e;
  e.event_seq = d.event_seq();
  e.decided_at_ms = d.decided_at_ms();
  e.outcome = d.outcome();
  e.reward = d.reward();
  e.outcome_at_ms = d.outcome_at_ms();
  bandit::v1::LoggedDecision fields = d;
  fields.clear_outcome();
  fields.clear_reward();
  fields.clear_outcome_at_ms();
  const size_t size = fields.ByteSizeLong();
  e.size = static_cast<uint32_t>(size);
  if (fields.has_posteriors()) {
    // posteriors is the last of the held fields (the others are numbered below the outcome's,
    // or are the named fields, which only candidate policies write, and those have no
    // posteriors).
    const size_t len = fields.posteriors().GetCachedSize();
    e.tail = static_cast<uint32_t>(
        CodedOutputStream::VarintSize32(Tag(Logged::kPosteriorsFieldNumber, kDelimited)) +
        CodedOutputStream::VarintSize64(len) + len);
  }
  char* p = Reserve(size, &e.chunk);
  fields.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(p));
  e.data = p;
  Push(e);
}

void DecisionLog::Push(const Entry& e) {
  const int64_t size = static_cast<int64_t>(EncodedSize(e));
  bytes_ += size;
  appended_bytes_ += size;
  log_.push_back(e);
}

int64_t DecisionLog::ApplyRetention(int64_t now) {
  int64_t dropped = 0;
  // The newest decision always stays: a bound smaller than one decision keeps one.
  while (log_.size() > 1) {
    const Entry& oldest = log_.front();
    const bool over =
        static_cast<int64_t>(log_.size()) > config_.max_events() || bytes_ > config_.max_bytes() ||
        (config_.max_age_ms() > 0 && oldest.decided_at_ms < now - config_.max_age_ms());
    if (!over) break;
    bytes_ -= static_cast<int64_t>(EncodedSize(oldest));
    log_.pop_front();
    ++dropped;
  }
  // Chunks older than the oldest held decision's hold nothing any more.
  while (!log_.empty() && first_chunk_ < log_.front().chunk) {
    std::shared_ptr<Chunk>& chunk = chunks_.front();
    // Reused only when no snapshot still shares it (a snapshot gets a reference only under the
    // owner's lock, which the caller holds, so the count cannot grow meanwhile).
    if (spare_ == nullptr && chunk->capacity == kMaxChunkBytes && chunk.use_count() == 1) {
      // use_count() is a relaxed load: the fence orders a snapshot thread's last reads of the
      // chunk (before its release of the reference) before the writes that reuse it.
      std::atomic_thread_fence(std::memory_order_acquire);
      spare_ = std::move(chunk);
    }
    chunks_.pop_front();
    ++first_chunk_;
  }
  return dropped;
}

int64_t DecisionLog::chunk_bytes() const {
  int64_t n = spare_ != nullptr ? static_cast<int64_t>(spare_->capacity) : 0;
  for (const auto& c : chunks_) n += static_cast<int64_t>(c->capacity);
  return n;
}

int64_t DecisionLog::MemoryBytes() const {
  return chunk_bytes() + events() * static_cast<int64_t>(sizeof(Entry));
}

DecisionLog::Entry* DecisionLog::Find(uint64_t event_seq) {
  auto it = std::lower_bound(log_.begin(), log_.end(), event_seq,
                             [](const Entry& d, uint64_t seq) { return d.event_seq < seq; });
  if (it == log_.end() || it->event_seq != event_seq) return nullptr;
  return &*it;
}

void DecisionLog::SetOutcome(uint64_t event_seq, bandit::v1::DecisionOutcome outcome, double reward,
                             int64_t now) {
  Entry* d = Find(event_seq);
  if (d == nullptr) return;  // retention already dropped it
  bytes_ -= static_cast<int64_t>(OutcomeSize(*d));
  d->outcome = outcome;
  d->reward = reward;
  d->outcome_at_ms = now;
  bytes_ += static_cast<int64_t>(OutcomeSize(*d));
}

void DecisionLog::DiscardPending(int64_t now) {
  for (auto& d : log_)
    if (d.outcome == bandit::v1::OUTCOME_PENDING) {
      bytes_ -= static_cast<int64_t>(OutcomeSize(d));
      d.outcome = bandit::v1::OUTCOME_DISCARDED;
      d.outcome_at_ms = now;
      bytes_ += static_cast<int64_t>(OutcomeSize(d));
    }
}

void DecisionLog::Visit(uint64_t after_seq, int64_t since_ms, int64_t until_ms,
                        const std::function<bool(const Entry&)>& visit) const {
  auto it = std::upper_bound(log_.begin(), log_.end(), after_seq,
                             [](uint64_t seq, const Entry& d) { return seq < d.event_seq; });
  for (; it != log_.end(); ++it) {
    if (it->decided_at_ms < since_ms) continue;
    if (until_ms > 0 && it->decided_at_ms >= until_ms) continue;
    if (!visit(*it)) return;
  }
}

void DecisionLog::Save(google::protobuf::RepeatedPtrField<bandit::v1::LoggedDecision>* out) const {
  out->Reserve(static_cast<int>(log_.size()));
  for (const auto& d : log_) Decode(d, out->Add());
}

std::unique_ptr<DecisionLog::Frozen> DecisionLog::Freeze() const {
  auto f = std::make_unique<Frozen>();
  f->chunks_.assign(chunks_.begin(), chunks_.end());
  f->entries_.assign(log_.begin(), log_.end());
  return f;
}

size_t DecisionLog::Frozen::size() const {
  constexpr int kField = v1::InstanceSnapshot::kDecisionLogFieldNumber;
  const size_t tag = CodedOutputStream::VarintSize32(Tag(kField, kDelimited));
  size_t n = 0;
  for (const Entry& e : entries_) {
    const size_t len = EncodedSize(e);
    n += tag + CodedOutputStream::VarintSize64(len) + len;
  }
  return n;
}

void DecisionLog::Frozen::ForEachPiece(absl::FunctionRef<void(absl::string_view)> piece) const {
  // Each entry as an InstanceSnapshot.decision_log element: tag, length, fields 1-14 as held
  // (straight from the chunk), the outcome fields 15-17, then field 18 as held, if any (so the
  // element is LoggedDecision's own serialization). The outcome and the next element's tag and
  // length go out as one piece.
  constexpr int kField = v1::InstanceSnapshot::kDecisionLogFieldNumber;
  uint8_t small[64];  // an outcome (3 fields, at most 33 bytes), a tag and a length (at most 11)
  uint8_t* p = small;
  for (const Entry& e : entries_) {
    p = CodedOutputStream::WriteVarint32ToArray(Tag(kField, kDelimited), p);
    p = CodedOutputStream::WriteVarint64ToArray(EncodedSize(e), p);
    piece(absl::string_view(reinterpret_cast<const char*>(small), p - small));
    piece(absl::string_view(e.data, e.size - e.tail));
    WriteSink w{small};
    EncodeOutcome(e, w);
    p = w.p;
    if (e.tail > 0) {
      if (p != small) piece(absl::string_view(reinterpret_cast<const char*>(small), p - small));
      piece(absl::string_view(e.data + e.size - e.tail, e.tail));
      p = small;
    }
  }
  if (p != small) piece(absl::string_view(reinterpret_cast<const char*>(small), p - small));
}

void DecisionLog::Frozen::AddTo(
    google::protobuf::RepeatedPtrField<bandit::v1::LoggedDecision>* out) const {
  out->Reserve(out->size() + static_cast<int>(entries_.size()));
  for (const Entry& e : entries_) Decode(e, out->Add());
}

absl::StatusOr<ArgmaxPosteriors> DecisionLog::PosteriorsOf(const v1::LoggedDecision& d) {
  const v1::ArgmaxPosteriors& held = d.posteriors();
  if (held.family() != v1::ArgmaxPosteriors::BETA && held.family() != v1::ArgmaxPosteriors::NORMAL)
    return absl::InvalidArgumentError(
        absl::StrCat("family is ", held.family(), ", expected BETA (1) or NORMAL (2)"));
  if (held.first_size() != d.num_actions())
    return absl::InvalidArgumentError(absl::StrCat(
        "they cover ", held.first_size(), " actions, expected num_actions = ", d.num_actions()));
  ArgmaxPosteriors posteriors;
  posteriors.beta = held.family() == v1::ArgmaxPosteriors::BETA;
  posteriors.first = Eigen::Map<const Vector>(held.first().data(), held.first_size());
  posteriors.second = Eigen::Map<const Vector>(held.second().data(), held.second_size());
  if (absl::Status s = ArgmaxProbabilities::Validate(posteriors); !s.ok()) return s;
  return posteriors;
}

absl::Status DecisionLog::Restore(
    const google::protobuf::RepeatedPtrField<bandit::v1::LoggedDecision>& in) {
  uint64_t last = 0;
  for (int i = 0; i < in.size(); ++i) {
    if (in[i].event_seq() <= last)
      return absl::InvalidArgumentError(
          absl::StrCat("decision_log[", i, "] has event_seq ", in[i].event_seq(),
                       ", expected more than the previous entry's ", last));
    last = in[i].event_seq();
    if (in[i].has_posteriors()) {
      // Export computes the probabilities from them: checked here, where a damaged snapshot
      // is refused, rather than failing a later export.
      if (absl::StatusOr<ArgmaxPosteriors> p = PosteriorsOf(in[i]); !p.ok())
        return absl::InvalidArgumentError(
            absl::StrCat("decision_log[", i, "].posteriors: ", p.status().message()));
    }
  }
  // As the snapshot held them (retention applies at the next append); appended_bytes counts
  // what this log took in since it was built, not what it restored.
  DecisionLog log(config_);
  for (const auto& d : in) log.Hold(d);
  log.appended_bytes_ = appended_bytes_;
  *this = std::move(log);
  return absl::OkStatus();
}

}  // namespace bandit::server
