#include "server/instance/instance_registry.h"

#include "absl/strings/str_cat.h"
#include "core/arms.h"

namespace bandit::server {

absl::Status InstanceRegistry::Add(std::shared_ptr<Instance> instance) {
  absl::MutexLock lock(&mu_);
  if (auto it = refused_.find(instance->name()); it != refused_.end()) return it->second;
  if (by_name_.count(instance->name()))
    return absl::AlreadyExistsError(
        absl::StrCat("instance '", instance->name(), "' already exists"));
  if (static_cast<int64_t>(by_name_.size()) >= max_instances_)
    return absl::ResourceExhaustedError(
        absl::StrCat("the server holds ", by_name_.size(), " instances, the configured maximum"));
  by_name_.emplace(instance->name(), std::move(instance));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Instance>> InstanceRegistry::Get(const std::string& name) const {
  if (auto s = CheckId("instance name", name); !s.ok()) return s;
  if (on_miss_) {
    {
      absl::MutexLock lock(&mu_);
      auto it = by_name_.find(name);
      if (it != by_name_.end()) return it->second;
    }
    if (auto s = on_miss_(name); !s.ok()) return s;
  }
  absl::MutexLock lock(&mu_);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    if (auto r = refused_.find(name); r != refused_.end()) return r->second;
    return absl::NotFoundError(absl::StrCat("instance '", name, "' does not exist"));
  }
  return it->second;
}

absl::Status InstanceRegistry::Remove(const std::string& name) {
  if (auto s = CheckId("instance name", name); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (refused_.erase(name) > 0) return absl::OkStatus();
  if (by_name_.erase(name) == 0)
    return absl::NotFoundError(absl::StrCat("instance '", name, "' does not exist"));
  return absl::OkStatus();
}

absl::Status InstanceRegistry::Replace(const std::shared_ptr<Instance>& current,
                                       std::shared_ptr<Instance> next) {
  absl::MutexLock lock(&mu_);
  auto it = by_name_.find(current->name());
  if (it == by_name_.end() || it->second != current)
    return absl::UnavailableError(absl::StrCat("instance '", current->name(),
                                               "' left this node while it was replaced; retry"));
  it->second = std::move(next);
  return absl::OkStatus();
}

std::shared_ptr<Instance> InstanceRegistry::Take(const std::string& name) {
  absl::MutexLock lock(&mu_);
  refused_.erase(name);
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return nullptr;
  std::shared_ptr<Instance> inst = std::move(it->second);
  by_name_.erase(it);
  return inst;
}

std::vector<std::shared_ptr<Instance>> InstanceRegistry::ListAfter(const std::string& after,
                                                                   int limit) const {
  std::vector<std::shared_ptr<Instance>> out;
  absl::MutexLock lock(&mu_);
  for (auto it = by_name_.upper_bound(after); it != by_name_.end() && limit-- > 0; ++it)
    out.push_back(it->second);
  return out;
}

std::vector<std::shared_ptr<Instance>> InstanceRegistry::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Instance>> out;
  out.reserve(by_name_.size());
  for (const auto& [name, inst] : by_name_) out.push_back(inst);
  return out;
}

int64_t InstanceRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(by_name_.size());
}

}  // namespace bandit::server

namespace bandit::server {

void InstanceRegistry::Refuse(const std::string& name, absl::Status why) {
  absl::MutexLock lock(&mu_);
  by_name_.erase(name);
  refused_[name] = std::move(why);
}

void InstanceRegistry::SetMissHandler(std::function<absl::Status(const std::string&)> handler) {
  on_miss_ = std::move(handler);
}

std::vector<std::pair<std::string, absl::Status>> InstanceRegistry::Refused() const {
  absl::MutexLock lock(&mu_);
  return {refused_.begin(), refused_.end()};
}

}  // namespace bandit::server
