#include "server/cluster/rendezvous.h"

namespace bandit::server::cluster {

uint64_t RendezvousWeight(std::string_view node, std::string_view key) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64 offset basis
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;  // FNV-1a 64 prime
    }
  };
  mix(node);
  h ^= 0xff;  // separator: ("ab", "c") and ("a", "bc") differ
  h *= 1099511628211ull;
  mix(key);
  // SplitMix64 finalizer.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

std::string RendezvousOwner(const std::vector<std::string>& nodes, std::string_view key) {
  return RendezvousOwner(nodes, key, {});
}

std::string RendezvousOwner(const std::vector<std::string>& nodes, std::string_view key,
                            const std::set<std::string>& passed_over) {
  std::string best;
  uint64_t best_weight = 0;
  for (const std::string& n : nodes) {
    if (passed_over.count(n)) continue;
    const uint64_t w = RendezvousWeight(n, key);
    if (best.empty() || w > best_weight || (w == best_weight && n < best)) {
      best = n;
      best_weight = w;
    }
  }
  return best;
}

}  // namespace bandit::server::cluster
