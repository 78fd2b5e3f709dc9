// Named instances. Lookups hand out a shared_ptr held for one request, so a Delete racing with
// an in-flight call is safe: the call finishes on the instance it found.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/instance/instance.h"

namespace bandit::server {

class InstanceRegistry {
 public:
  // `max_instances`: ServiceLimits::max_instances (the service passes it).
  explicit InstanceRegistry(int64_t max_instances) : max_instances_(max_instances) {}

  absl::Status Add(std::shared_ptr<Instance> instance);
  absl::StatusOr<std::shared_ptr<Instance>> Get(const std::string& name) const;
  absl::Status Remove(const std::string& name);
  // `next` takes the place of `current` under the same name, in one step (lookups see one or
  // the other). UNAVAILABLE if the name no longer maps to `current` (it left this node).
  absl::Status Replace(const std::shared_ptr<Instance>& current, std::shared_ptr<Instance> next);
  // Removes `name` if it is loaded here and returns it (nullptr if not); never asks the miss
  // handler (the cluster calls it while it decides ownership).
  std::shared_ptr<Instance> Take(const std::string& name);
  // Instances with name > after, in name order, at most limit.
  std::vector<std::shared_ptr<Instance>> ListAfter(const std::string& after, int limit) const;
  std::vector<std::shared_ptr<Instance>> All() const;
  int64_t size() const;
  // An instance refused at recovery (damaged snapshot or journal): every call on the name gets
  // `why` until the operator deletes it.
  void Refuse(const std::string& name, absl::Status why);
  std::vector<std::pair<std::string, absl::Status>> Refused() const;
  // Asked (outside the lock) when a name is not here: OK = look again (the handler may have
  // loaded it, a cluster node taking it over), else the status to answer (e.g. UNAVAILABLE:
  // another node owns it). Unset: NOT_FOUND.
  void SetMissHandler(std::function<absl::Status(const std::string& name)> handler);

 private:
  const int64_t max_instances_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Instance>> by_name_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Status> refused_ ABSL_GUARDED_BY(mu_);
  std::function<absl::Status(const std::string&)> on_miss_;  // set before serving
};

}  // namespace bandit::server
