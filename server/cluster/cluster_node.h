// One banditd node of a cluster sharing one PostgreSQL database (--cluster). PostgreSQL rows and
// transactions are the only source of truth; no protocol runs between the nodes themselves.
//
//   bandit_nodes   membership: one row per node (id, advertised address, incarnation), renewed
//                  by a heartbeat every lease_ms/3; live while expires_at (database clock) is
//                  in the future.
//   bandit_leases  ownership: one row per instance (owner, owner's incarnation, epoch). A lease
//                  is live while its owner's membership row (same incarnation) is live: one
//                  heartbeat renews all of a node's leases. The epoch grows on every change of
//                  owner and fences every write (server/storage/instance_fence.h, which
//                  PostgreSQL's storage implements).
//
//   bandit_declines  instances a node had no room for (its memory budget): one row per
//                  (instance, node), valid while that node's incarnation is live.
//
// Placement: rendezvous hashing of the instance name over the live members that are not
// leaving and have not declined it (server/cluster/rendezvous.h). A node asked to own an
// instance it has no room for declines it: it records the decline, frees the lease and the
// instance goes to the next node in the name's rendezvous order; the node withdraws its
// decline once it has room again (checked at its heartbeats once the decline has stood
// kDeclineHoldLeases leases), and the instance is handed back to it as after a join. A node
// claims a free instance placed on it (no live
// lease: released, or its owner's row expired) on the first call for it or at its next
// heartbeat, loads it from its snapshot and journal, and serves it; when a node joins, the
// owners of the instances it now wins snapshot them and release their leases (hand-off). A
// node that renewed its membership late compares its leases with the table before it writes
// again and drops every instance whose epoch moved on; the fence refuses whatever it had not
// committed yet.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/env/clock.h"
#include "server/instance/instance.h"
#include "server/storage/instance_fence.h"

namespace bandit::server::cluster {

struct ClusterOptions {
  std::string node_id;    // [A-Za-z0-9_.:-], unique in the cluster
  std::string advertise;  // host:port other nodes and clients reach this node's gRPC port at
  std::chrono::milliseconds lease{5000};
  std::string dsn;
  std::string password;  // as PostgresStorageOptions::password; never logged
  // Draws this process's incarnation (which tells its rows from a previous process's with the
  // same node id); injected like every other source of randomness.
  UidSource* uids = RandomUids();
};

// Where a call for an instance goes.
struct Route {
  bool local = false;   // serve here (the instance is loaded, or does not exist)
  std::string node_id;  // else: the owner
  std::string address;
};

class ClusterNode {
 public:
  struct Hooks {
    // The instance as storage holds it (snapshot + later records), nullptr if it does not
    // exist; max_seq = the highest sequence number seen.
    // RESOURCE_EXHAUSTED when the node has no room for it (then *needed_bytes = the bytes it
    // would need): the instance is declined.
    std::function<absl::StatusOr<std::shared_ptr<Instance>>(
        const std::string& name, uint64_t* max_seq, int64_t* needed_bytes)>
        load;
    std::function<absl::Status(std::shared_ptr<Instance>)> add;     // make it servable
    std::function<void(const std::string& name)> drop;              // forget it (not deleted)
    std::function<absl::Status(const std::string& name)> snapshot;  // before a hand-off
    std::function<void(double seconds)> on_takeover;                // a claim + load finished
    // Whether `bytes` more fit in the node's memory budget now (a declined instance is tried
    // again once they do); unset = never.
    std::function<bool(int64_t bytes)> has_room;
  };

  // A decline stands at least this many leases before the node checks whether it has room.
  static constexpr int kDeclineHoldLeases = 4;

  // Registers this node (waiting up to 2 leases for a previous process with the same node id
  // to expire), claims the free instances placed on it, starts the heartbeat.
  static absl::StatusOr<std::unique_ptr<ClusterNode>> Start(ClusterOptions options,
                                                            InstanceFence* storage, Hooks hooks);
  ~ClusterNode();

  // Where a call for `name` goes. create: the call creates it (a missing lease is inserted
  // here if the name is placed on this node). forwarded: another node sent it here, so it is
  // never sent on (UNAVAILABLE, retriable, if this node does not own it).
  absl::StatusOr<Route> RouteFor(const std::string& name, bool create, bool forwarded);
  // The addresses of the live members (ListInstances across the cluster), this node first.
  std::vector<std::pair<std::string, std::string>> LiveMembers() const;
  // Storage refused commits of these instances (fenced): forget them.
  void OnFenced(const std::vector<std::string>& names);
  // Graceful leave, first step (shutdown begins): this node claims and hands off nothing more
  // and is taken out of placement (bandit_nodes.leaving); it keeps renewing its membership so
  // its final snapshot round is still fenced by leases it holds.
  void BeginLeave();
  // Last step, after the final snapshot round: release every lease, deregister.
  absl::Status Leave();

  const std::string& node_id() const { return options_.node_id; }
  const std::string& advertise() const { return options_.advertise; }
  int64_t owned() const;

  struct Counters {
    std::atomic<int64_t> acquisitions{0}, losses{0}, handoffs{0};
    // Instances this node was to own but had no room for (its memory budget): lease freed.
    std::atomic<int64_t> declined{0};
  };
  const Counters& counters() const { return counters_; }

 private:
  ClusterNode(ClusterOptions options, InstanceFence* storage, Hooks hooks);
  class Db;

  absl::Status Register() ABSL_LOCKS_EXCLUDED(db_mu_);
  // One heartbeat: renew, reconcile leases with the table, claim, hand off, refresh caches.
  absl::Status Heartbeat() ABSL_LOCKS_EXCLUDED(db_mu_, mu_);
  // Claims `name` (create: inserting its lease if it has none) and loads it; false if another
  // node holds a live lease.
  absl::StatusOr<bool> ClaimLocked(const std::string& name, bool create)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  absl::Status LoadLocked(const std::string& name, uint64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  // No room for `name` (`why`, RESOURCE_EXHAUSTED): records the decline, frees the lease;
  // returns `why`.
  absl::Status DeclineLocked(const std::string& name, uint64_t epoch, int64_t needed_bytes,
                             const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  // Where `name` is placed now, asking the database: the live members not leaving, less the
  // live nodes that declined it (node -> bytes it needed). Empty if none is left.
  absl::StatusOr<std::string> PlaceLocked(const std::string& name,
                                          std::map<std::string, int64_t>* declined)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  // RESOURCE_EXHAUSTED: every live node declined `name`.
  absl::Status NoRoom(const std::string& name,
                      const std::map<std::string, int64_t>& declined) const;
  void Forget(const std::string& name, bool lost) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status HandOffLocked(const std::string& name, uint64_t epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);

  const ClusterOptions options_;
  InstanceFence* const storage_;
  const Hooks hooks_;
  uint64_t incarnation_ = 0;
  Counters counters_;

  // The session, claims and loads; taken before mu_ where both are held.
  absl::Mutex db_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<Db> db_ ABSL_GUARDED_BY(db_mu_);

  mutable absl::Mutex mu_;  // the caches below
  // Instance -> epoch this node holds and has loaded.
  std::map<std::string, uint64_t> held_ ABSL_GUARDED_BY(mu_);
  // Node id -> address, live members not leaving.
  std::map<std::string, std::string> live_ ABSL_GUARDED_BY(mu_);
  // Every member with a live row (routing).
  std::map<std::string, std::string> addresses_ ABSL_GUARDED_BY(mu_);
  // Instance -> live owner (other nodes).
  std::map<std::string, std::string> lease_owner_ ABSL_GUARDED_BY(mu_);
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;

  absl::Mutex stop_mu_;
  absl::CondVar stop_cv_;
  bool stop_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread heartbeat_;
};

}  // namespace bandit::server::cluster
