#include "server/cluster/cluster_node.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/cluster/rendezvous.h"
#include "server/env/log.h"
#include "server/storage/postgres/connection.h"

namespace bandit::server::cluster {

// The node's own session (membership, leases): a few text-protocol statements, the session
// reopened at the next statement after it was lost.
class ClusterNode::Db {
 public:
  explicit Db(pg::ConnectOptions options) : options_(std::move(options)) {}

  absl::StatusOr<pg::Result> Query(const std::string& sql, const pg::Params& params = {}) {
    if (conn_ == nullptr || !conn_->ok()) {
      conn_.reset();
      auto c = pg::Connection::Open(options_);
      if (!c.ok()) return c.status();
      conn_ = *std::move(c);
    }
    auto res = conn_->Query(sql, params);
    if (!res.ok() && !conn_->ok()) conn_.reset();
    return res;
  }

 private:
  const pg::ConnectOptions options_;
  std::unique_ptr<pg::Connection> conn_;
};

namespace {

// A lease is live while its owner's membership row, same incarnation, is live.
constexpr const char* kLeaseIsFree =
    "(bandit_leases.owner IS NULL OR NOT EXISTS (SELECT 1 FROM bandit_nodes n WHERE "
    "n.node_id = bandit_leases.owner AND n.incarnation = bandit_leases.owner_incarnation AND "
    "n.expires_at > clock_timestamp()))";

// The same test for a claim, share-locking the owner's membership row first (the liveness test
// is in the select list, not the WHERE, so the row is locked even when it has expired): a heartbeat
// that renews that row either committed before (the row is live again: no claim) or waits until the
// claim has committed (and then finds the lease gone and drops the instance before it serves
// again). Without the lock a renewal racing the claim could keep a node serving reads of an
// instance it no longer owns until its next heartbeat.
constexpr const char* kLeaseIsFreeForClaim =
    "(bandit_leases.owner IS NULL OR NOT coalesce((SELECT n.incarnation = "
    "bandit_leases.owner_incarnation AND n.expires_at > clock_timestamp() FROM bandit_nodes n "
    "WHERE n.node_id = bandit_leases.owner FOR SHARE), false))";

// The declines that count: their node's incarnation is the live one.
constexpr const char* kLiveDeclines =
    "bandit_declines d JOIN bandit_nodes n ON n.node_id = d.node_id AND n.incarnation = "
    "d.incarnation AND n.expires_at > clock_timestamp()";

std::string Ms(std::chrono::milliseconds d) { return absl::StrCat(d.count()); }

}  // namespace

ClusterNode::ClusterNode(ClusterOptions options, InstanceFence* storage, Hooks hooks)
    : options_(std::move(options)), storage_(storage), hooks_(std::move(hooks)) {}

absl::StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Start(ClusterOptions options,
                                                                InstanceFence* storage,
                                                                Hooks hooks) {
  if (options.lease < std::chrono::milliseconds(300))
    return absl::InvalidArgumentError(
        absl::StrCat("--lease_ms=", options.lease.count(), ", expected at least 300"));
  std::unique_ptr<ClusterNode> node(new ClusterNode(std::move(options), storage, std::move(hooks)));
  {
    pg::ConnectOptions co;
    co.dsn = node->options_.dsn;
    co.password = node->options_.password;
    co.application_name = "banditd-cluster";
    co.role = "cluster membership";
    absl::MutexLock lock(&node->db_mu_);
    node->db_ = std::make_unique<Db>(std::move(co));
  }
  // 62 bits: stored in a signed bigint column, and never 0 (UidSource's promise).
  node->incarnation_ = node->options_.uids->NewUid() & ((1ull << 62) - 1);
  if (node->incarnation_ == 0) node->incarnation_ = 1;
  if (auto s = node->Register(); !s.ok()) return s;
  if (auto s = node->Heartbeat(); !s.ok()) return s;
  node->heartbeat_ = std::thread([n = node.get()] {
    const auto every = n->options_.lease / 3;
    int failures = 0;
    absl::MutexLock lock(&n->stop_mu_);
    while (true) {
      const absl::Time deadline = absl::Now() + absl::FromChrono(every);
      while (!n->stop_ && !n->stop_cv_.WaitWithDeadline(&n->stop_mu_, deadline)) {
      }
      if (n->stop_) break;
      n->stop_mu_.Unlock();
      absl::Status s = n->Heartbeat();
      if (!s.ok() && (++failures <= 3 || failures % 20 == 0))
        BANDIT_LOG_WARN("cluster heartbeat failed (", failures, "): ", s.message());
      if (s.ok()) failures = 0;
      n->stop_mu_.Lock();
    }
  });
  BANDIT_LOG_INFO("cluster node '", node->options_.node_id, "' (incarnation ", node->incarnation_,
                  ") advertising ", node->options_.advertise,
                  ", lease_ms=", node->options_.lease.count(), ", owns ", node->owned(),
                  " instances");
  return node;
}

ClusterNode::~ClusterNode() {
  {
    absl::MutexLock lock(&stop_mu_);
    stop_ = true;
  }
  stop_cv_.SignalAll();
  if (heartbeat_.joinable()) heartbeat_.join();
}

absl::Status ClusterNode::Register() {
  const auto deadline =
      std::chrono::steady_clock::now() + 2 * options_.lease + std::chrono::seconds(2);
  absl::MutexLock lock(&db_mu_);
  while (true) {
    const auto t0 = std::chrono::steady_clock::now();
    // Takes the row over only once a previous process with this node id has expired or left.
    auto rows = db_->Query(
        "INSERT INTO bandit_nodes (node_id, address, incarnation, expires_at) VALUES ($1, $2, "
        "$3::bigint, clock_timestamp() + $4::bigint * interval '1 millisecond') "
        "ON CONFLICT (node_id) DO UPDATE SET address = excluded.address, incarnation = "
        "excluded.incarnation, started_at = clock_timestamp(), heartbeat_at = "
        "clock_timestamp(), expires_at = excluded.expires_at, leaving = false "
        "WHERE bandit_nodes.expires_at <= clock_timestamp() RETURNING 1",
        {options_.node_id, options_.advertise, absl::StrCat(incarnation_), Ms(options_.lease)});
    if (!rows.ok()) return rows.status();
    if (rows->rows() > 0) {
      storage_->SetLeaseDeadline(t0 + options_.lease * 9 / 10);
      // A previous process's declines are not this one's (its budget may differ).
      auto forgotten =
          db_->Query("DELETE FROM bandit_declines WHERE node_id = $1", {options_.node_id});
      if (!forgotten.ok()) return forgotten.status();
      return absl::OkStatus();
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return absl::FailedPreconditionError(
          absl::StrCat("node id '", options_.node_id,
                       "' is held by a live node (bandit_nodes); every node "
                       "needs its own --node_id"));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int64_t ClusterNode::owned() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(held_.size());
}

std::vector<std::pair<std::string, std::string>> ClusterNode::LiveMembers() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<std::string, std::string>> out = {{options_.node_id, options_.advertise}};
  for (const auto& [id, address] : addresses_)
    if (id != options_.node_id) out.emplace_back(id, address);
  return out;
}

void ClusterNode::Forget(const std::string& name, bool lost) {
  {
    absl::MutexLock lock(&mu_);
    if (held_.erase(name) == 0 && !lost) return;
  }
  storage_->Disown(name);
  hooks_.drop(name);
  if (lost) ++counters_.losses;
}

void ClusterNode::OnFenced(const std::vector<std::string>& names) {
  for (const auto& name : names) Forget(name, /*lost=*/true);
}

absl::Status ClusterNode::LoadLocked(const std::string& name, uint64_t epoch) {
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t max_seq = 0;
  int64_t needed_bytes = 0;
  auto inst = hooks_.load(name, &max_seq, &needed_bytes);
  if (!inst.ok()) {
    if (inst.status().code() == absl::StatusCode::kResourceExhausted)
      return DeclineLocked(name, epoch, needed_bytes, inst.status());
    return inst.status();
  }
  // Own before the instance is visible: its first change numbers above every stored row.
  storage_->Own(name, epoch, max_seq);
  if (*inst != nullptr) {
    if (auto s = hooks_.add(*inst); !s.ok()) {
      storage_->Disown(name);
      return s;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    held_[name] = epoch;
    lease_owner_.erase(name);
  }
  ++counters_.acquisitions;
  if (hooks_.on_takeover)
    hooks_.on_takeover(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return absl::OkStatus();
}

absl::Status ClusterNode::DeclineLocked(const std::string& name, uint64_t epoch,
                                        int64_t needed_bytes, const absl::Status& why) {
  // No room here: rather than loading it past the node's budget, the decline is recorded (so
  // placement passes over this node) and the lease freed in one statement, so a node that sees
  // the lease free also sees the decline.
  BANDIT_LOG_WARN("cluster: node '", options_.node_id, "' declined instance '", name,
                  "' (left to the next node in placement order): ", why.message());
  auto rows = db_->Query(
      "WITH declined AS (INSERT INTO bandit_declines (instance, node_id, incarnation, "
      "needed_bytes) VALUES ($1, $2, $4::bigint, $5::bigint) ON CONFLICT (instance, node_id) DO "
      "UPDATE SET incarnation = excluded.incarnation, needed_bytes = excluded.needed_bytes, "
      "declined_at = clock_timestamp()) "
      "UPDATE bandit_leases SET owner = NULL, owner_incarnation = NULL WHERE instance = $1 AND "
      "owner = $2 AND epoch = $3::bigint",
      {name, options_.node_id, absl::StrCat(epoch), absl::StrCat(incarnation_),
       absl::StrCat(needed_bytes)});
  if (!rows.ok())
    BANDIT_LOG_WARN("cluster: recording the decline of '", name,
                    "' failed (the lease stays with this node, which declines it again at the "
                    "next call): ",
                    rows.status().message());
  ++counters_.declined;
  return why;
}

absl::StatusOr<std::string> ClusterNode::PlaceLocked(const std::string& name,
                                                     std::map<std::string, int64_t>* declined) {
  // Placement over the members as they are now (the heartbeat's view may be lease/3 old: a
  // node that just joined must not be missed when a name is first placed).
  auto nodes = db_->Query(
      "SELECT node_id, address, leaving FROM bandit_nodes WHERE expires_at > clock_timestamp()");
  if (!nodes.ok()) return nodes.status();
  auto declines = db_->Query(
      absl::StrCat("SELECT d.node_id, d.needed_bytes FROM ", kLiveDeclines,
                   " WHERE d.instance = $1"),
      {name});
  if (!declines.ok()) return declines.status();
  std::set<std::string> passed_over;
  for (int i = 0; i < declines->rows(); ++i) {
    passed_over.insert(declines->text(i, 0));
    (*declined)[declines->text(i, 0)] = static_cast<int64_t>(declines->uint(i, 1));
  }
  absl::MutexLock lock(&mu_);
  std::vector<std::string> members;
  for (int i = 0; i < nodes->rows(); ++i) {
    addresses_[nodes->text(i, 0)] = nodes->text(i, 1);
    if (nodes->text(i, 2) != "t") members.push_back(nodes->text(i, 0));
  }
  return RendezvousOwner(members, name, passed_over);
}

absl::Status ClusterNode::NoRoom(const std::string& name,
                                 const std::map<std::string, int64_t>& declined) const {
  std::string nodes;
  for (const auto& [node, bytes] : declined)
    absl::StrAppend(&nodes, nodes.empty() ? "" : ", ", "'", node, "' (needs ", bytes, " bytes)");
  return absl::ResourceExhaustedError(absl::StrCat(
      "instance '", name,
      "' is stored, but every live node declined it for want of room in its memory budget: ",
      nodes,
      "; start a node with a larger --max_memory_bytes, or free memory on one of these (delete "
      "instances there): the instance is loaded once a node has room"));
}

absl::StatusOr<bool> ClusterNode::ClaimLocked(const std::string& name, bool create) {
  const pg::Params params = {name, options_.node_id, absl::StrCat(incarnation_)};
  absl::StatusOr<pg::Result> rows;
  if (create) {
    rows = db_->Query(
        absl::StrCat("INSERT INTO bandit_leases (instance, owner, owner_incarnation, epoch) "
                     "VALUES ($1, $2, $3::bigint, 1) ON CONFLICT (instance) DO UPDATE SET "
                     "owner = excluded.owner, owner_incarnation = excluded.owner_incarnation, "
                     "epoch = bandit_leases.epoch + 1, acquired_at = clock_timestamp(), "
                     "takeovers = bandit_leases.takeovers + (bandit_leases.owner IS NOT "
                     "NULL)::int WHERE ",
                     kLeaseIsFreeForClaim, " RETURNING epoch"),
        params);
  } else {
    rows = db_->Query(
        absl::StrCat("UPDATE bandit_leases SET owner = $2, owner_incarnation = $3::bigint, "
                     "epoch = epoch + 1, acquired_at = clock_timestamp(), takeovers = takeovers "
                     "+ (owner IS NOT NULL)::int WHERE instance = $1 AND ",
                     kLeaseIsFreeForClaim, " RETURNING epoch"),
        params);
  }
  if (!rows.ok()) return rows.status();
  if (rows->rows() == 0) return false;
  const uint64_t epoch = rows->uint(0, 0);
  if (auto s = LoadLocked(name, epoch); !s.ok()) return s;
  BANDIT_LOG_INFO("cluster: node '", options_.node_id, "' took instance '", name, "' (lease epoch ",
                  epoch, ")");
  return true;
}

absl::StatusOr<Route> ClusterNode::RouteFor(const std::string& name, bool create, bool forwarded) {
  Route local;
  local.local = true;
  auto remote = [&](const std::string& owner) -> absl::StatusOr<Route> {
    std::string address;
    {
      absl::MutexLock lock(&mu_);
      auto it = addresses_.find(owner);
      if (it != addresses_.end()) address = it->second;
    }
    if (address.empty() || forwarded)
      return absl::UnavailableError(
          absl::StrCat("instance '", name, "' is moving between nodes (owner '", owner,
                       "' not reachable from node '", options_.node_id, "' yet); retry"));
    return Route{false, owner, address};
  };
  // Held here: served here, unless this node's membership may have lapsed (paused, cut off):
  // then another node may own it by now, and not even a read is answered from this copy.
  auto held_here = [&]() -> absl::StatusOr<bool> {
    absl::MutexLock lock(&mu_);
    auto it = held_.find(name);
    if (it == held_.end()) return false;
    if (storage_->OwnedEpoch(name) != it->second) {  // deleted and its lease removed
      held_.erase(it);
      return false;
    }
    if (!storage_->LeaseCurrent())
      return absl::UnavailableError(absl::StrCat(
          "node '", options_.node_id,
          "' has not renewed its cluster membership in time; "
          "retry (the instance is served again once it has, or by the node that took it over)"));
    return true;
  };
  {
    auto held = held_here();
    if (!held.ok()) return held.status();
    if (*held) return local;
    absl::MutexLock lock(&mu_);
    if (leaving_)
      return absl::UnavailableError(
          absl::StrCat("node '", options_.node_id, "' is leaving the cluster; retry"));
    // Owned elsewhere as of the last heartbeat: forward without asking PostgreSQL. A stale
    // entry costs one failed forward (UNAVAILABLE, retried) until the next heartbeat.
    auto it = lease_owner_.find(name);
    if (it != lease_owner_.end() && !forwarded) {
      auto address = addresses_.find(it->second);
      if (address != addresses_.end()) return Route{false, it->second, address->second};
    }
  }
  absl::MutexLock db_lock(&db_mu_);
  {
    auto held = held_here();  // claimed while we waited
    if (!held.ok()) return held.status();
    if (*held) return local;
  }
  // The lease row decides; placement only says who should claim a free one.
  auto rows = db_->Query(absl::StrCat("SELECT owner, owner_incarnation, epoch, NOT ", kLeaseIsFree,
                                      " FROM bandit_leases WHERE instance = $1"),
                         {name});
  if (!rows.ok()) return rows.status();
  const bool exists = rows->rows() > 0;
  if (exists && rows->text(0, 3) == "t") {
    const std::string owner = rows->text(0, 0);
    if (owner == options_.node_id && rows->text(0, 1) == absl::StrCat(incarnation_)) {
      // Ours but not loaded (a load failed, or it was claimed for a create): load it now.
      if (auto s = LoadLocked(name, rows->uint(0, 2)); !s.ok()) {
        if (s.code() != absl::StatusCode::kResourceExhausted || forwarded) return s;
        std::map<std::string, int64_t> declined;
        auto next = PlaceLocked(name, &declined);
        if (!next.ok()) return next.status();
        if (next->empty()) return NoRoom(name, declined);
        return remote(*next);
      }
      return local;
    }
    return remote(owner);
  }
  std::map<std::string, int64_t> declined;
  auto placed = PlaceLocked(name, &declined);
  if (!placed.ok()) return placed.status();
  if (!exists && !create) return local;  // no such instance: answered NOT_FOUND here
  if (exists && placed->empty() && !declined.empty()) return NoRoom(name, declined);
  if (*placed != options_.node_id && !placed->empty()) {
    if (!forwarded) return remote(*placed);
    // Sent here on a view older than this node's decline: the sender places it anew.
    if (declined.count(options_.node_id))
      return absl::UnavailableError(
          absl::StrCat("node '", options_.node_id, "' declined instance '", name,
                       "' for want of room; it is placed on node '", *placed, "' now; retry"));
  }
  auto claimed = ClaimLocked(name, create);
  if (!claimed.ok()) {
    // Declined just now: the call goes to the next node in placement order.
    if (claimed.status().code() != absl::StatusCode::kResourceExhausted || create)
      return claimed.status();
    declined.clear();
    auto next = PlaceLocked(name, &declined);
    if (!next.ok()) return next.status();
    if (next->empty()) return NoRoom(name, declined);
    if (forwarded) return claimed.status();
    return remote(*next);
  }
  if (*claimed) return local;
  // Another node claimed it between our read and our claim.
  auto again = db_->Query("SELECT owner FROM bandit_leases WHERE instance = $1", {name});
  if (!again.ok()) return again.status();
  if (again->rows() == 0) return local;
  return remote(again->text(0, 0));
}

absl::Status ClusterNode::HandOffLocked(const std::string& name, uint64_t epoch) {
  // Snapshot while still the owner (fenced), then stop writing, then release: a commit still
  // in flight holds the lease row and the release waits for it; any later one is fenced. A
  // snapshot postponed for the memory budget (RESOURCE_EXHAUSTED) does not hold the instance
  // here: nothing was compacted, so its journal rows carry it to the next owner.
  if (auto s = hooks_.snapshot(name); !s.ok() && s.code() != absl::StatusCode::kNotFound &&
                                      s.code() != absl::StatusCode::kResourceExhausted)
    return s;
  Forget(name, /*lost=*/false);
  auto rows = db_->Query(
      "UPDATE bandit_leases SET owner = NULL, owner_incarnation = NULL WHERE instance = $1 AND "
      "owner = $2 AND epoch = $3::bigint",
      {name, options_.node_id, absl::StrCat(epoch)});
  if (!rows.ok()) return rows.status();
  ++counters_.handoffs;
  return absl::OkStatus();
}

absl::Status ClusterNode::Heartbeat() {
  absl::MutexLock db_lock(&db_mu_);
  const auto t0 = std::chrono::steady_clock::now();
  auto renewed = db_->Query(
      "UPDATE bandit_nodes SET heartbeat_at = clock_timestamp(), expires_at = clock_timestamp() "
      "+ $3::bigint * interval '1 millisecond' WHERE node_id = $1 AND incarnation = $2::bigint "
      "RETURNING 1",
      {options_.node_id, absl::StrCat(incarnation_), Ms(options_.lease)});
  if (!renewed.ok()) return renewed.status();
  if (renewed->rows() == 0) {
    // Our row was taken by a new process with our id after it expired: we are not a member.
    std::vector<std::string> all;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [n, e] : held_) all.push_back(n);
    }
    for (const auto& n : all) Forget(n, /*lost=*/true);
    storage_->SetLeaseDeadline(std::chrono::steady_clock::time_point{});
    return absl::FailedPreconditionError(absl::StrCat(
        "node '", options_.node_id, "' (incarnation ", incarnation_,
        ") is no longer in bandit_nodes: another process registered with this node id"));
  }
  // Before writes resume (the deadline below): every instance whose lease moved on while this
  // node was away is dropped.
  auto mine = db_->Query(
      "SELECT instance, epoch FROM bandit_leases WHERE owner = $1 AND owner_incarnation = "
      "$2::bigint",
      {options_.node_id, absl::StrCat(incarnation_)});
  if (!mine.ok()) return mine.status();
  std::map<std::string, uint64_t> table;
  for (int i = 0; i < mine->rows(); ++i) table[mine->text(i, 0)] = mine->uint(i, 1);
  std::vector<std::string> lost;
  {
    absl::MutexLock lock(&mu_);
    for (auto h = held_.begin(); h != held_.end();) {
      if (storage_->OwnedEpoch(h->first) != h->second) {  // deleted: its lease row is gone
        h = held_.erase(h);
        continue;
      }
      auto it = table.find(h->first);
      if (it == table.end() || it->second != h->second) lost.push_back(h->first);
      ++h;
    }
  }
  for (const auto& name : lost) {
    BANDIT_LOG_WARN("cluster: node '", options_.node_id, "' lost the lease of '", name,
                    "' (taken over while this node did not renew); dropping it");
    Forget(name, /*lost=*/true);
  }
  storage_->SetLeaseDeadline(t0 + options_.lease * 9 / 10);

  auto nodes = db_->Query(
      "SELECT node_id, address, leaving FROM bandit_nodes WHERE expires_at > clock_timestamp()");
  if (!nodes.ok()) return nodes.status();
  std::map<std::string, std::string> live, addresses;
  for (int i = 0; i < nodes->rows(); ++i) {
    addresses[nodes->text(i, 0)] = nodes->text(i, 1);
    if (nodes->text(i, 2) != "t") live[nodes->text(i, 0)] = nodes->text(i, 1);
  }
  auto leases = db_->Query(
      absl::StrCat("SELECT instance, owner, NOT ", kLeaseIsFree, ", epoch FROM bandit_leases"));
  if (!leases.ok()) return leases.status();
  // Declines of live nodes; this node's own that have stood kDeclineHoldLeases are withdrawn
  // if it has room for them now (the instance is then placed on it again and handed back).
  auto declines = db_->Query(
      absl::StrCat("SELECT d.instance, d.node_id, d.needed_bytes, d.node_id = $1 AND "
                   "d.declined_at < clock_timestamp() - $2::bigint * interval '1 millisecond' "
                   "FROM ",
                   kLiveDeclines),
      {options_.node_id, Ms(options_.lease * kDeclineHoldLeases)});
  if (!declines.ok()) return declines.status();
  bool leaving;
  {
    absl::MutexLock lock(&mu_);
    leaving = leaving_;
  }
  std::map<std::string, std::set<std::string>> passed_over;
  for (int i = 0; i < declines->rows(); ++i) {
    const std::string instance = declines->text(i, 0);
    const int64_t needed = static_cast<int64_t>(declines->uint(i, 2));
    if (declines->text(i, 3) == "t" && !leaving && hooks_.has_room &&
        hooks_.has_room(needed)) {
      auto withdrawn = db_->Query(
          "DELETE FROM bandit_declines WHERE instance = $1 AND node_id = $2 AND incarnation = "
          "$3::bigint",
          {instance, options_.node_id, absl::StrCat(incarnation_)});
      if (withdrawn.ok()) {
        BANDIT_LOG_INFO("cluster: node '", options_.node_id, "' has room for instance '", instance,
                        "' (", needed, " bytes) again and withdrew its decline");
        continue;
      }
      BANDIT_LOG_WARN("cluster: withdrawing the decline of '", instance,
                      "' failed: ", withdrawn.status().message());
    }
    passed_over[instance].insert(declines->text(i, 1));
  }
  std::vector<std::string> members;
  for (const auto& [id, address] : live) members.push_back(id);
  std::vector<std::string> to_claim;
  std::vector<std::pair<std::string, uint64_t>> to_hand_off;
  std::map<std::string, std::string> owners;
  {
    absl::MutexLock lock(&mu_);
    live_ = live;
    addresses_ = addresses;
    leaving = leaving_;
    for (int i = 0; i < leases->rows(); ++i) {
      const std::string name = leases->text(i, 0);
      const std::string owner = leases->text(i, 1);
      const bool is_live = leases->text(i, 2) == "t";
      auto passed = passed_over.find(name);
      const std::string placed =
          passed == passed_over.end() ? RendezvousOwner(members, name)
                                      : RendezvousOwner(members, name, passed->second);
      if (is_live && owner != options_.node_id) owners[name] = owner;
      if (!is_live && placed == options_.node_id && !leaving) to_claim.push_back(name);
      auto held = held_.find(name);
      if (held != held_.end() && !placed.empty() && placed != options_.node_id &&
          live.count(placed) && !leaving)
        to_hand_off.emplace_back(name, held->second);
    }
    lease_owner_ = owners;
  }
  for (const auto& name : to_claim) {
    auto c = ClaimLocked(name, /*create=*/false);
    if (!c.ok()) BANDIT_LOG_WARN("cluster: claiming '", name, "' failed: ", c.status().message());
  }
  for (const auto& [name, epoch] : to_hand_off) {
    if (auto s = HandOffLocked(name, epoch); !s.ok())
      BANDIT_LOG_WARN("cluster: handing '", name, "' off failed: ", s.message());
    else
      BANDIT_LOG_INFO("cluster: handed '", name, "' off (now placed on another node)");
  }
  return absl::OkStatus();
}

void ClusterNode::BeginLeave() {
  {
    absl::MutexLock lock(&mu_);
    leaving_ = true;
  }
  absl::MutexLock db_lock(&db_mu_);
  auto marked = db_->Query(
      "UPDATE bandit_nodes SET leaving = true WHERE node_id = $1 AND incarnation = $2::bigint",
      {options_.node_id, absl::StrCat(incarnation_)});
  if (!marked.ok())
    BANDIT_LOG_WARN("cluster: marking node '", options_.node_id,
                    "' as leaving failed: ", marked.status().message());
}

absl::Status ClusterNode::Leave() {
  {
    absl::MutexLock lock(&stop_mu_);
    stop_ = true;
  }
  stop_cv_.SignalAll();
  if (heartbeat_.joinable()) heartbeat_.join();
  absl::MutexLock db_lock(&db_mu_);
  std::vector<std::string> all;
  {
    absl::MutexLock lock(&mu_);
    leaving_ = true;
    for (const auto& [n, e] : held_) all.push_back(n);
  }
  for (const auto& n : all) Forget(n, /*lost=*/false);
  const pg::Params me = {options_.node_id, absl::StrCat(incarnation_)};
  auto released = db_->Query(
      "UPDATE bandit_leases SET owner = NULL, owner_incarnation = NULL WHERE owner = $1 AND "
      "owner_incarnation = $2::bigint RETURNING instance",
      me);
  if (!released.ok()) return released.status();
  auto forgotten = db_->Query(
      "DELETE FROM bandit_declines WHERE node_id = $1 AND incarnation = $2::bigint", me);
  if (!forgotten.ok()) return forgotten.status();
  auto gone =
      db_->Query("DELETE FROM bandit_nodes WHERE node_id = $1 AND incarnation = $2::bigint", me);
  if (!gone.ok()) return gone.status();
  BANDIT_LOG_INFO("cluster: node '", options_.node_id, "' left, released ", released->rows(),
                  " leases");
  return absl::OkStatus();
}

}  // namespace bandit::server::cluster
