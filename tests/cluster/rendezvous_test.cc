// Rendezvous placement against a direct computation (argmax of the weights, written out
// independently here) and the movement bounds that make it worth using: a join moves only the
// keys the new node wins, a leave only the leaving node's keys.
#include "server/cluster/rendezvous.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace bandit::server::cluster {
namespace BANDIT_UNITY_ID {

std::vector<std::string> Keys(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back("instance-" + std::to_string(i));
  return keys;
}

TEST(Rendezvous, OwnerIsTheArgmaxOfTheWeights) {
  const std::vector<std::string> nodes = {"n1", "n2", "n3", "n4"};
  for (const auto& key : Keys(500)) {
    size_t best = 0;
    for (size_t i = 1; i < nodes.size(); ++i)
      if (RendezvousWeight(nodes[i], key) > RendezvousWeight(nodes[best], key)) best = i;
    EXPECT_EQ(RendezvousOwner(nodes, key), nodes[best]) << key;
  }
  EXPECT_EQ(RendezvousOwner({}, "x"), "");
  // The order of the member list does not matter: every node computes the same owner.
  EXPECT_EQ(RendezvousOwner({"n3", "n1", "n2"}, "abc"), RendezvousOwner({"n1", "n2", "n3"}, "abc"));
  // The separator: ("ab", "c") is not ("a", "bc").
  EXPECT_NE(RendezvousWeight("ab", "c"), RendezvousWeight("a", "bc"));
}

TEST(Rendezvous, AJoinMovesOnlyTheNewNodesShareAndALeaveOnlyTheLeavingNodes) {
  const auto keys = Keys(20000);
  const std::vector<std::string> three = {"node-a", "node-b", "node-c"};
  std::vector<std::string> four = three;
  four.push_back("node-d");
  int moved = 0;
  std::map<std::string, int> per_node;
  for (const auto& key : keys) {
    const std::string before = RendezvousOwner(three, key), after = RendezvousOwner(four, key);
    ++per_node[after];
    if (before != after) {
      ++moved;
      EXPECT_EQ(after, "node-d") << "a join may only move keys to the new node";
    }
  }
  // Binomial(20000, 1/4): mean 5000, sd ~61; +-6 sd.
  EXPECT_NEAR(moved, 5000, 370);
  for (const auto& [node, n] : per_node) EXPECT_NEAR(n, 5000, 370) << node;
  // Leave: node-b's keys go elsewhere, nobody else's move.
  const std::vector<std::string> without_b = {"node-a", "node-c", "node-d"};
  int left = 0;
  for (const auto& key : keys) {
    const std::string before = RendezvousOwner(four, key), after = RendezvousOwner(without_b, key);
    if (before == "node-b") {
      ++left;
      EXPECT_NE(after, "node-b");
    } else {
      EXPECT_EQ(before, after) << key;
    }
  }
  EXPECT_NEAR(left, 5000, 370);
}

// A node that declined a key is passed over: the key goes to the node with the next-highest
// weight (sorting the weights here), and every other key stays where it was.
TEST(Rendezvous, PassingOverADeclinedNodeGivesTheNextInWeightOrder) {
  const std::vector<std::string> nodes = {"n1", "n2", "n3", "n4"};
  for (const auto& key : Keys(500)) {
    std::vector<std::pair<uint64_t, std::string>> order;
    for (const auto& n : nodes) order.emplace_back(RendezvousWeight(n, key), n);
    std::sort(order.rbegin(), order.rend());
    EXPECT_EQ(RendezvousOwner(nodes, key, {order[0].second}), order[1].second) << key;
    EXPECT_EQ(RendezvousOwner(nodes, key, {order[0].second, order[1].second}), order[2].second);
    // Passing over a node that would not own the key changes nothing.
    EXPECT_EQ(RendezvousOwner(nodes, key, {order[3].second}), order[0].second) << key;
  }
  EXPECT_EQ(RendezvousOwner(nodes, "x", {"n1", "n2", "n3", "n4"}), "");
}

}  // namespace
}  // namespace bandit::server::cluster
