// The metadata keys of bandit.v1.BanditService, part of its wire API beside service.proto: the
// server (server/api/grpc_service.cc, server/cluster/) and the C++ client (client/cpp/) use these
// names; the Python and Node clients spell the routing header once each, as a named constant.
#pragma once

namespace bandit::v1 {

// The caller's bearer token ("Bearer TOKEN", server/api/auth.h).
inline constexpr char kAuthorizationKey[] = "authorization";
// The instance a call is about, sent by the clients with every call on one instance, so that a
// proxy in front of a cluster (HAProxy: balance hdr(x-bandit-instance)) keeps an instance on
// one node; passed on when a node forwards the call.
inline constexpr char kInstanceKey[] = "x-bandit-instance";
// Set by a node that forwards a call to the instance's owner (its value: the forwarding node's
// id). A call carrying it is never forwarded again.
inline constexpr char kForwardedByKey[] = "x-bandit-forwarded-by";
// Trailing metadata of every answer in cluster mode: the id of the node that served the call.
inline constexpr char kNodeKey[] = "x-bandit-node";

}  // namespace bandit::v1
