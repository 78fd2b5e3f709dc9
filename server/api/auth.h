// Token authentication with roles, checked by every BanditService handler before it runs.
//
// Tokens file (--tokens_file): one token per line, `ROLE TOKEN [LABEL] [instance=NAME]`, '#'
// starts a comment.
//   admin  3f9c...e1  ops-console
//   writer 8a71...0c  checkout-service
//   reader 55d2...9b  dashboards
//   writer 0b4e...77  shop-frontend instance=shop
// A token with `instance=NAME` is bound to that one instance (a per-instance key, as a
// Personalizer resource's key): every call it makes must name that instance, and calls that name
// none or list them all (ListInstances, SnapshotInstances of every instance) are refused. The
// Personalizer HTTP API also reads the instance from such a key at its root path.
// Clients send `authorization: Bearer TOKEN` metadata. Roles are ordered, each includes the ones
// below it: reader (GetInstance, ListInstances) < writer (+ Select, Update, Activate, SelectBatch,
// UpdateBatch, and the same on a Rounds stream, each request checked as its call) < admin
// (everything else); the list with each RPC's role is server/service/rpcs.h.
// No or an unknown token -> UNAUTHENTICATED; a known token whose role is too low ->
// PERMISSION_DENIED. grpc.health.v1 and server reflection stay open (load balancers, tooling).
// Tokens are never logged, never put in a status message and never in a metric label; an
// error names the token's LABEL (or its line number) only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/env/file_system.h"
#include "server/service/rpcs.h"

namespace grpc {
class ServerContextBase;
}

namespace bandit::server {

const char* RoleName(Role role);

class Authorizer {
 public:
  static constexpr size_t kMinTokenLength = 16;

  // Parses the tokens file format above. Errors name the line, never the token.
  static absl::StatusOr<std::unique_ptr<Authorizer>> Parse(absl::string_view text,
                                                           absl::string_view origin);
  static absl::StatusOr<std::unique_ptr<Authorizer>> FromFile(const std::string& path,
                                                              FileSystem* fs = PosixFileSystem());

  // `authorization` is the value of the `authorization` metadata (nullptr if absent).
  // `instance` is the instance the call is about ("" = none or every one).
  absl::Status Authorize(Rpc rpc, const std::string* authorization,
                         const std::string& instance = "") const;
  // Reads the metadata from the call.
  absl::Status Check(Rpc rpc, const grpc::ServerContextBase& ctx,
                     const std::string& instance = "") const;
  // The same checks for a bare token (the Personalizer API's Ocp-Apim-Subscription-Key header;
  // nullptr if absent). `kind` names where the token is expected, for the messages.
  absl::Status AuthorizeToken(Rpc rpc, const std::string* token, const std::string& instance,
                              absl::string_view kind) const;
  // The instance `token` is bound to; "" when it is unknown or bound to none.
  std::string BoundInstance(absl::string_view token) const;

  size_t size() const { return entries_.size(); }
  int count(Role role) const;

 private:
  struct Entry {
    std::string token;
    Role role;
    std::string label;
    std::string instance;  // "" = any instance
  };
  absl::Status Permit(Rpc rpc, const Entry* e, const std::string& instance) const;
  Authorizer() = default;
  // Constant-time in the token's content: compares against every entry.
  const Entry* Find(absl::string_view token) const;

  std::vector<Entry> entries_;
};

}  // namespace bandit::server
