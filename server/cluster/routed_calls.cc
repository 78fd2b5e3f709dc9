#include "server/cluster/routed_calls.h"

namespace bandit::server::cluster {

absl::Status RoutedCalls::Find(const std::string& name) {
  absl::StatusOr<Route> route = router_->Decide({name, false}, /*forwarded=*/false);
  if (!route.ok()) return route.status();
  if (route->local) return local_.Find(name);
  return absl::OkStatus();
}

}  // namespace bandit::server::cluster
