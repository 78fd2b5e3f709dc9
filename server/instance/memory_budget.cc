#include "server/instance/memory_budget.h"

#include <algorithm>
#include <malloc.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace bandit::server {

const char* MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kPolicy:
      return "policy";
    case MemoryKind::kPending:
      return "pending";
    case MemoryKind::kLog:
      return "decision_log";
    case MemoryKind::kShadows:
      return "shadows";
    case MemoryKind::kOverhead:
      return "instance_overhead";
    case MemoryKind::kSnapshot:
      return "snapshot";
    case MemoryKind::kEvaluation:
      return "evaluation";
    case MemoryKind::kCount:
      break;
  }
  return "unknown";
}

const char* MemoryOpName(MemoryOp op) {
  switch (op) {
    case MemoryOp::kCreate:
      return "create";
    case MemoryOp::kImport:
      return "import";
    case MemoryOp::kAddArms:
      return "add_arms";
    case MemoryOp::kAddShadow:
      return "add_shadow";
    case MemoryOp::kConfigChange:
      return "config_change";
    case MemoryOp::kSelect:
      return "select";
    case MemoryOp::kRecovery:
      return "recovery";
    case MemoryOp::kSnapshot:
      return "snapshot";
    case MemoryOp::kTakeover:
      return "takeover";
    case MemoryOp::kEvaluation:
      return "evaluation";
    case MemoryOp::kCount:
      break;
  }
  return "unknown";
}

absl::Status MemoryBudget::Refusal(int64_t bytes, absl::string_view what) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      what, " needs ", bytes, " bytes, but the node's memory budget (--max_memory_bytes) is ",
      limit_, " bytes of which ", std::max<int64_t>(0, left()),
      " are left; free memory (delete instances, lower pending capacity or decision log "
      "retention, send the rewards of pending decisions) or give the node a larger budget"));
}

void TrimAllocator() { malloc_trim(0); }

absl::Status MemoryBudget::Admit(int64_t bytes, MemoryOp op, absl::string_view what) {
  if (!limited() || bytes <= left()) return absl::OkStatus();
  CountRefusal(op);
  return Refusal(bytes, what);
}

absl::Status MemoryBudget::Reserve(int64_t bytes, MemoryKind kind, MemoryOp op,
                                   absl::string_view what) {
  int64_t now = used_.load(std::memory_order_relaxed);
  do {
    if (limited() && bytes > 0 && now + bytes > limit_) {
      CountRefusal(op);
      return Refusal(bytes, what);
    }
  } while (!used_.compare_exchange_weak(now, now + bytes, std::memory_order_relaxed));
  by_kind_[static_cast<int>(kind)].fetch_add(bytes, std::memory_order_relaxed);
  return absl::OkStatus();
}

void MemoryBudget::Charge(int64_t delta, MemoryKind kind) {
  if (delta == 0) return;
  used_.fetch_add(delta, std::memory_order_relaxed);
  by_kind_[static_cast<int>(kind)].fetch_add(delta, std::memory_order_relaxed);
  if (delta < 0 &&
      freed_since_trim_.fetch_sub(delta, std::memory_order_relaxed) - delta >=
          kTrimAfterFreedBytes) {
    freed_since_trim_.store(0, std::memory_order_relaxed);
    trim_wanted_.store(true, std::memory_order_relaxed);
  }
}

namespace {

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

// A cgroup limit file's value ("max" or unreadable = no limit: 0).
int64_t LimitIn(const std::string& path) {
  std::string text;
  if (!ReadFile(path, &text)) return 0;
  int64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &v) || v <= 0) return 0;
  // cgroup v1 writes "no limit" as a huge page-rounded number.
  if (v >= (int64_t{1} << 62)) return 0;
  return v;
}

}  // namespace

int64_t AvailableMemoryBytes(const std::string& root) {
  std::vector<int64_t> limits;
  std::string meminfo;
  if (ReadFile(root + "/proc/meminfo", &meminfo)) {
    for (absl::string_view line : absl::StrSplit(meminfo, '\n')) {
      if (!absl::ConsumePrefix(&line, "MemTotal:")) continue;
      line = absl::StripAsciiWhitespace(line);
      absl::ConsumeSuffix(&line, "kB");
      int64_t kb = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kb) && kb > 0)
        limits.push_back(kb * 1024);
    }
  }
  // The cgroup this process is in: "0::/path" (v2), "N:memory:/path" or "N:...,memory,...:/path"
  // (v1). Inside a container the namespace's root is the cgroup's own directory, so the files
  // at the mount's root count too.
  std::string cgroups;
  std::vector<std::string> candidates = {root + "/sys/fs/cgroup/memory.max",
                                         root + "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
  if (ReadFile(root + "/proc/self/cgroup", &cgroups)) {
    for (absl::string_view line : absl::StrSplit(cgroups, '\n', absl::SkipEmpty())) {
      std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
      if (parts.size() != 3) continue;
      const std::string& path = parts[2];
      if (parts[0] == "0" && parts[1].empty()) {
        candidates.push_back(absl::StrCat(root, "/sys/fs/cgroup", path, "/memory.max"));
      } else {
        for (absl::string_view c : absl::StrSplit(parts[1], ','))
          if (c == "memory")
            candidates.push_back(
                absl::StrCat(root, "/sys/fs/cgroup/memory", path, "/memory.limit_in_bytes"));
      }
    }
  }
  for (const std::string& p : candidates)
    if (int64_t v = LimitIn(p); v > 0) limits.push_back(v);
  if (limits.empty()) return 0;
  return *std::min_element(limits.begin(), limits.end());
}

int64_t DefaultMemoryBudgetBytes() {
  const int64_t available = AvailableMemoryBytes();
  if (available <= 0) return 0;
  return static_cast<int64_t>(static_cast<double>(available) * kDefaultMemoryFraction);
}

absl::StatusOr<int64_t> ParseMemoryBytes(absl::string_view text) {
  if (text.empty()) return DefaultMemoryBudgetBytes();
  int shift = 0;
  absl::string_view digits = text;
  switch (digits.back()) {
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    default:
      break;
  }
  if (shift > 0) digits.remove_suffix(1);
  int64_t v = 0;
  if (!absl::SimpleAtoi(digits, &v) || v < 0 || v > (INT64_MAX >> shift))
    return absl::InvalidArgumentError(
        absl::StrCat("--max_memory_bytes is '", text,
                     "', expected bytes as a whole number >= 0 with an optional suffix K, M or G "
                     "(0 = no limit; empty = ", kDefaultMemoryFraction * 100,
                     "% of the machine's or cgroup's memory)"));
  return v << shift;
}

}  // namespace bandit::server
