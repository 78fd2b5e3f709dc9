// Rendezvous (highest-random-weight) hashing: an instance is placed on the live node whose
// weight hash(node, instance) is highest (Thaler & Ravishankar, "Using name-based mappings to
// increase hit rates", IEEE/ACM ToN 1998). A node joining takes exactly the keys it now wins
// (about 1/(N+1) of them); a node leaving hands only its own keys to the others, each to the
// next-highest weight. Every node computes the same answer from the same member list, with a
// hash fixed here (never std::hash, which differs between builds).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace bandit::server::cluster {

// The weight of `key` on `node`: 64-bit FNV-1a over node, a separator and key, then the
// SplitMix64 finalizer (FNV alone mixes the last bytes poorly).
uint64_t RendezvousWeight(std::string_view node, std::string_view key);
// The node with the highest weight for `key` (ties: the smaller node id); empty if no nodes.
std::string RendezvousOwner(const std::vector<std::string>& nodes, std::string_view key);
// The same over `nodes` less `passed_over` (the nodes that declined `key`): the next node in
// `key`'s weight order; empty if every node is passed over.
std::string RendezvousOwner(const std::vector<std::string>& nodes, std::string_view key,
                            const std::set<std::string>& passed_over);

}  // namespace bandit::server::cluster
