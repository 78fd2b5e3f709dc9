"""bandit_client against a real banditd on port 0: lifecycle, contextual select/update with an
event id, batches, typed errors per status code, deadlines, and retries for UNAVAILABLE only.

Run: BANDITD=build/bin/banditd PYTHONPATH=client/python:build/python_gen \
     /usr/bin/python3 -m unittest discover -s client/python/tests -v
"""
import math
import os
import subprocess
import sys
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import ServerProcess, unused_port  # noqa: E402

import bandit_client  # noqa: E402
from bandit_client import (AlreadyExistsError, BanditClient, BanditError,  # noqa: E402
                           DeadlineExceededError, FailedPreconditionError, InvalidArgumentError,
                           NotFoundError, RetryPolicy, UnavailableError)

LINUCB = "policy { linucb { dimension: 3 } }"
CANDIDATES = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]


class CountingInterceptor(grpc.UnaryUnaryClientInterceptor):
    """Counts the RPC attempts that actually leave the client, per method."""

    def __init__(self):
        self.calls = {}
        self.timeouts = []

    def intercept_unary_unary(self, continuation, details, request):
        self.calls[details.method] = self.calls.get(details.method, 0) + 1
        self.timeouts.append(details.timeout)
        return continuation(details, request)


class LiveServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess()
        cls.client = BanditClient(cls.server.target, timeout=10.0)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()

    def setUp(self):
        # Each test gets fresh instance names.
        self.prefix = self.id().rsplit(".", 1)[-1].replace("_", "-")

    def name(self, suffix):
        return "%s-%s" % (self.prefix, suffix)

    def test_health(self):
        self.assertEqual(self.client.health(), "SERVING")

    def test_instance_lifecycle(self):
        a, b = self.name("a"), self.name("b")
        inst = self.client.create_instance(a, LINUCB)
        self.assertEqual(inst.name, a)
        self.assertEqual(inst.config.policy.linucb.dimension, 3)
        # dict config (JSON field names) works as well as text format
        inst = self.client.create_instance(b, {"policy": {"epsilonGreedy": {"epsilon": 0.1}, "numArms": 4},
                                               "seed": "7"})
        self.assertEqual(list(inst.arm_ids), ["0", "1", "2", "3"])
        self.assertEqual(inst.config.seed, 7)

        got = self.client.get_instance(a)
        self.assertEqual(got.stats.rounds, 0)
        self.assertGreater(got.stats.state_bytes, 0)

        names = {i.name for i in self.client.iter_instances(page_size=1)}
        self.assertTrue({a, b} <= names, names)
        page = self.client.list_instances(page_size=1)
        self.assertEqual(len(page.instances), 1)
        self.assertNotEqual(page.next_page_token, "")

        reset = self.client.reset_instance(b)
        self.assertEqual(reset.stats.rounds, 0)
        self.client.delete_instance(a)
        self.client.delete_instance(b)
        with self.assertRaises(NotFoundError):
            self.client.get_instance(a)
        names = {i.name for i in self.client.iter_instances()}
        self.assertFalse({a, b} & names)

    def test_set_mixture_reference(self):
        n = self.name("gen")
        self.client.create_instance(
            n, "policy { mixture { objective: FD num_arms: 2 dimension: 2 "
               "reference_mean: [0, 0] reference_covariance: [1, 0, 0, 1] } }")
        inst = self.client.set_mixture_reference(n, embeddings=[[0.5, 1], [-1, 2], [3, 0.25]])
        self.assertEqual(list(inst.config.policy.mixture.reference_samples), [0.5, 1, -1, 2, 3, 0.25])
        inst = self.client.set_mixture_reference(n, embeddings=[[1, 1]], append=True)
        self.assertEqual(len(inst.config.policy.mixture.reference_samples), 8)
        inst = self.client.set_mixture_reference(n, mean=[1, -1], covariance=[[2, 0.5], [0.5, 1]])
        self.assertEqual(list(inst.config.policy.mixture.reference_covariance), [2, 0.5, 0.5, 1])
        with self.assertRaises(InvalidArgumentError):  # not positive semi-definite
            self.client.set_mixture_reference(n, mean=[0, 0], covariance=[1, 3, 3, 1])
        self.client.delete_instance(n)

    def test_configure_instance(self):
        n = self.name("modes")
        self.client.create_instance(n, "policy { epsilon_greedy { epsilon: 0.3 } num_arms: 3 }")
        inst = self.client.configure_instance(n, learning_mode="APPRENTICE", reward_wait_ms=60000,
                                              epsilon=0.1, reward_aggregation="SUM")
        self.assertEqual(inst.config.learning_mode, bandit_client.pb.APPRENTICE)
        self.assertEqual(inst.config.pending.reward_wait_ms, 60000)
        self.assertEqual(inst.config.pending.reward_aggregation, bandit_client.pb.SUM)
        self.assertAlmostEqual(inst.config.policy.epsilon_greedy.epsilon, 0.1)
        d = self.client.select(n)
        self.assertEqual((d.arm_id, d.propensity), ("0", 1.0))  # the baseline
        with self.assertRaises(InvalidArgumentError):
            self.client.configure_instance(n, epsilon=2)
        with self.assertRaises(InvalidArgumentError):
            self.client.configure_instance(n)
        inst = self.client.configure_instance(n, learning_mode="ONLINE")
        self.assertEqual(inst.config.learning_mode, bandit_client.pb.ONLINE)
        self.client.delete_instance(n)

    def test_shadows(self):
        n = self.name("shadowed")
        self.client.create_instance(n, "policy { linucb { dimension: 3 } } seed: 3")
        inst = self.client.add_shadow(n, "twin", "policy { linucb { dimension: 3 } } seed: 3")
        self.assertEqual([s.name for s in inst.shadows], ["twin"])
        self.client.add_shadow(n, "glb", {"policy": {"glbOmd": {"dimension": 3}}})
        with self.assertRaises(AlreadyExistsError):
            self.client.add_shadow(n, "twin", "policy { linucb { dimension: 3 } }")
        with self.assertRaises(InvalidArgumentError):  # another dimension than the instance's
            self.client.add_shadow(n, "wide", "policy { linucb { dimension: 4 } }")
        for i in range(20):
            d = self.client.select(n, CANDIDATES)
            self.client.update(n, event_id=d.event_id, reward=float(d.arm_index == i % 3))
        twin = self.client.get_instance(n).shadows[0]
        self.assertEqual(twin.events, 20)
        # The same config and seed: every weight is 1, IPS is the served mean reward.
        self.assertAlmostEqual(twin.ips.value, twin.served.value, places=12)
        inst = self.client.promote_shadow(n, "glb")
        self.assertTrue(inst.config.policy.HasField("glb_omd"))
        inst = self.client.remove_shadow(n, "twin")
        self.assertEqual(len(inst.shadows), 0)
        with self.assertRaises(NotFoundError):
            self.client.remove_shadow(n, "twin")
        self.client.delete_instance(n)

    def test_contextual_select_update_with_event_id(self):
        n = self.name("lin")
        self.client.create_instance(n, "policy { linucb { dimension: 3 } } seed: 3")
        d = self.client.select(n, CANDIDATES, return_scores=True)
        self.assertTrue(d.event_id)
        self.assertIn(d.arm_index, range(3))
        self.assertEqual(len(d.scores), 3)
        self.assertEqual(d.score_kind, bandit_client.pb.UPPER_CONFIDENCE_BOUND)
        self.assertAlmostEqual(d.propensity, 1.0)
        self.assertGreater(d.expires_at_ms, 0)
        u = self.client.update(n, d.event_id, reward=1.0)
        self.assertEqual(u.updates, 1)
        with self.assertRaises(FailedPreconditionError):  # the same event twice
            self.client.update(n, d.event_id, reward=1.0)
        stats = self.client.get_instance(n).stats
        self.assertEqual((stats.rounds, stats.updates, stats.pending), (1, 1, 0))
        self.assertEqual(stats.rejected_rewards, 1)

        # Learning over the wire: reward = candidate . theta with theta = (0.1, 0.9, 0.3); after a
        # short warm-up LinUCB picks candidate 1 nearly always.
        theta = (0.1, 0.9, 0.3)
        picks = []
        for _ in range(120):
            d = self.client.select(n, CANDIDATES)
            reward = sum(t * v for t, v in zip(theta, CANDIDATES[d.arm_index]))
            self.client.update(n, d.event_id, reward=reward)
            picks.append(d.arm_index)
        self.assertGreaterEqual(picks[-60:].count(1), 55, picks)
        self.assertEqual(self.client.get_instance(n).stats.updates, 121)

    def test_named_features_round_trip(self):
        # Dicts in, action ids out: the best action depends on the user's country (a string
        # feature) through the -q UA interaction.
        n = self.name("named")
        self.client.create_instance(
            n, {"policy": {"linucb": {"alpha": 0.3}},
                "feature_space": {"bits": 10, "interactions": ["UA"]}, "seed": 3})
        self.assertEqual(self.client.get_instance(n).config.policy.linucb.dimension, 1024)
        actions = [{"id": a, "features": {"Action": {"genre": a}}}
                   for a in ("news", "sports", "music")]
        best = {"US": "sports", "DE": "music", "IN": "news"}
        hits = []
        for i in range(240):
            country = ("US", "DE", "IN")[i % 3]
            d = self.client.select(n, context={"User": {"country": country, "age": 0.3 + i % 7 / 100}},
                                   actions=actions, return_scores=i % 10 == 0)
            self.assertIn(d.action_id, best.values())
            self.assertEqual(actions[d.arm_index]["id"], d.action_id)
            if i % 10 == 0:
                self.assertEqual([r.id for r in d.ranking][0], d.action_id)
                self.assertEqual(len(d.ranking), 3)
            self.client.update(n, d.event_id, reward=1.0 if d.action_id == best[country] else 0.0)
            hits.append(d.action_id == best[country])
        self.assertGreaterEqual(sum(hits[-60:]), 50, hits)
        d = self.client.select(n, context={"User": {"country": "US"}}, actions=actions,
                               excluded_actions=["sports"])
        self.assertNotEqual(d.action_id, "sports")
        u = self.client.update(n, reward=1.0, direct={
            "context": {"User": {"country": "US"}}, "action": actions[1]})
        self.assertEqual(u.updates, 241)
        with self.assertRaises(InvalidArgumentError) as err:
            self.client.select(n, context={"User": {"age": [1, "x"]}}, actions=actions)
        self.assertIn("context.User.age[1]", str(err.exception))

    def test_slots_caller_event_ids_and_activation(self):
        # Two slots over named actions: distinct choices, a reward per slot; a deferred decision
        # learns only once activated; a caller-chosen event id is the decision's.
        n = self.name("slots")
        self.client.create_instance(
            n, {"policy": {"linucb": {"alpha": 0.3}},
                "feature_space": {"bits": 8, "interactions": ["UA"]}, "seed": 3})
        actions = [{"id": a, "features": {"Action": {"genre": a}}}
                   for a in ("news", "sports", "music")]
        d = self.client.select(n, context={"User": {"country": "DE"}}, actions=actions,
                               slots=[{"id": "hero", "features": {"Slot": {"size": "large"}}},
                                      {"id": "tile", "excluded_actions": ["news"]}],
                               event_id="page-view-1", defer_activation=True,
                               return_scores=True)
        self.assertEqual(d.event_id, "page-view-1")
        self.assertEqual([s.slot_id for s in d.slots], ["hero", "tile"])
        self.assertNotEqual(d.slots[0].action_id, d.slots[1].action_id)
        self.assertNotEqual(d.slots[1].action_id, "news")
        self.client.update(n, "page-view-1", reward=1.0, slot_id="hero")
        self.assertEqual(self.client.get_instance(n).stats.updates, 0)  # not activated yet
        self.client.activate(n, "page-view-1")
        self.assertEqual(self.client.get_instance(n).stats.updates, 1)
        self.client.update(n, "page-view-1", reward=0.0, slot_id="tile")
        self.assertEqual(self.client.get_instance(n).stats.updates, 2)
        with self.assertRaises(FailedPreconditionError):  # finished: both slots rewarded
            self.client.activate(n, "page-view-1")
        with self.assertRaises(InvalidArgumentError) as err:
            self.client.select(n, context={}, actions=actions, slots=[{"id": "a"}, {"id": "a"}])
        self.assertIn("slots[1].id 'a' repeats", str(err.exception))

    def test_direct_update(self):
        n = self.name("lin")
        self.client.create_instance(n, LINUCB)
        u = self.client.update(n, reward=0.5, direct={"features": [1.0, 0.0, 0.0]})
        self.assertEqual(u.updates, 1)

    def test_batches_return_per_item_statuses(self):
        n = self.name("lin")
        self.client.create_instance(n, LINUCB)
        items = self.client.select_batch([
            {"instance": n, "candidates": CANDIDATES},
            {"instance": self.name("missing"), "candidates": CANDIDATES},
            {"instance": n, "candidates": [[1.0, 2.0]]},  # wrong dimension
            bandit_client.pb.SelectRequest(instance=n, candidates=[{"values": [0, 0, 1]}]),
        ])
        self.assertEqual([i.ok for i in items], [True, False, False, True])
        self.assertIsInstance(items[1].error, NotFoundError)
        self.assertIsInstance(items[2].error, InvalidArgumentError)
        self.assertIn("3", items[2].error.message)  # names the expected dimension
        self.assertEqual(items[3].value.arm_index, 0)
        with self.assertRaises(NotFoundError):
            items[1].unwrap()
        e0, e3 = items[0].value.event_id, items[3].value.event_id
        self.assertNotEqual(e0, e3)

        ups = self.client.update_batch([
            {"instance": n, "event_id": e0, "reward": 1.0},
            {"instance": n, "event_id": e0, "reward": 1.0},  # duplicate
            {"instance": n, "event_id": "no-such-event", "reward": 1.0},
            {"instance": n, "event_id": e3, "reward": math.nan},
            {"instance": n, "event_id": e3, "reward": 0.0},
        ])
        self.assertEqual([type(u.error) for u in ups],
                         [type(None), FailedPreconditionError, NotFoundError, InvalidArgumentError,
                          type(None)])
        self.assertEqual(ups[0].value.updates, 1)
        self.assertEqual(ups[4].value.updates, 2)

    def test_each_error_code_maps_to_its_exception(self):
        n = self.name("lin")
        self.client.create_instance(n, LINUCB)
        cases = [
            (NotFoundError, grpc.StatusCode.NOT_FOUND, LookupError,
             lambda: self.client.select(self.name("nope"), CANDIDATES)),
            (InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT, ValueError,
             lambda: self.client.select(n, [[1.0, 2.0]])),
            (InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT, ValueError,
             lambda: self.client.create_instance("bad name!", LINUCB)),
            (AlreadyExistsError, grpc.StatusCode.ALREADY_EXISTS, BanditError,
             lambda: self.client.create_instance(n, LINUCB)),
        ]
        for cls, code, builtin, call in cases:
            with self.subTest(code=code.name):
                with self.assertRaises(cls) as cm:
                    call()
                self.assertEqual(cm.exception.code, code)
                self.assertIsInstance(cm.exception, builtin)
                self.assertTrue(cm.exception.message)
                self.assertEqual(cm.exception.attempts, 1)
        d = self.client.select(n, CANDIDATES)
        self.client.update(n, d.event_id, reward=0.0)
        with self.assertRaises(FailedPreconditionError) as cm:
            self.client.update(n, d.event_id, reward=0.0)
        self.assertEqual(cm.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn(d.event_id, cm.exception.message)

    def test_deadline_is_honoured(self):
        n = self.name("lin")
        self.client.create_instance(n, LINUCB)
        # A deadline already passed (0 s, or in the past): the call is not sent at all.
        for timeout in (0.0, -1.0):
            with self.assertRaises(DeadlineExceededError) as cm:
                self.client.select(n, CANDIDATES, timeout=timeout)
            self.assertEqual(cm.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
            self.assertIsInstance(cm.exception, TimeoutError)
            self.assertEqual(cm.exception.attempts, 0)
        self.assertEqual(self.client.get_instance(n).stats.rounds, 0)  # nothing reached the server
        # A client-wide default deadline applies too.
        with BanditClient(self.server.target, timeout=0.0) as hurried:
            with self.assertRaises(DeadlineExceededError):
                hurried.get_instance(n)
        # Each attempt carries the remaining time as its gRPC deadline.
        counter = CountingInterceptor()
        channel = grpc.intercept_channel(grpc.insecure_channel(self.server.target), counter)
        with BanditClient(channel=channel, timeout=7.5) as c:
            c.select(n, CANDIDATES)
        self.assertEqual(len(counter.timeouts), 1)
        self.assertGreater(counter.timeouts[0], 0)
        self.assertLessEqual(counter.timeouts[0], 7.5)
        channel.close()
        # The server is unharmed and a normal deadline works.
        self.assertEqual(self.client.get_instance(n).stats.rounds, 1)

    def test_example_runs(self):
        example = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                               "logistic_loop.py")
        out = subprocess.run([sys.executable, example, "--target", self.server.target,
                              "--instance", self.name("ex"), "--rounds", "60", "--report_every", "30"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = [line.split() for line in out.stdout.splitlines()[1:]]
        self.assertEqual([r[0] for r in rows], ["30", "60"])
        regret, server_regret = float(rows[-1][1]), float(rows[-1][3])
        self.assertAlmostEqual(regret, server_regret, places=1)  # the server summed the same gaps
        with self.assertRaises(NotFoundError):  # the example cleans up after itself
            self.client.get_instance(self.name("ex"))

    def test_no_retry_on_invalid_argument(self):
        counter = CountingInterceptor()
        channel = grpc.intercept_channel(grpc.insecure_channel(self.server.target), counter)
        client = BanditClient(channel=channel, retry=RetryPolicy(max_attempts=5, initial_backoff=0.01))
        with self.assertRaises(InvalidArgumentError) as cm:
            client.create_instance("", LINUCB)
        self.assertEqual(cm.exception.attempts, 1)
        self.assertEqual(counter.calls, {"/bandit.v1.BanditService/CreateInstance": 1})
        channel.close()


class UnavailableRetryTest(unittest.TestCase):
    def test_retries_unavailable_then_gives_up_typed(self):
        counter = CountingInterceptor()
        channel = grpc.intercept_channel(grpc.insecure_channel("127.0.0.1:%d" % unused_port()), counter)
        client = BanditClient(channel=channel, timeout=10.0,
                              retry=RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.05))
        with self.assertRaises(UnavailableError) as cm:
            client.get_instance("anything")
        self.assertEqual(cm.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertIsInstance(cm.exception, ConnectionError)
        self.assertEqual(cm.exception.attempts, 3)
        self.assertEqual(counter.calls, {"/bandit.v1.BanditService/GetInstance": 3})
        # max_attempts=1 means exactly one try.
        with self.assertRaises(UnavailableError) as cm:
            client.select("x", CANDIDATES)  # uses the client's policy: 3 attempts
        self.assertEqual(cm.exception.attempts, 3)
        single = BanditClient(channel=channel, retry=RetryPolicy(max_attempts=1))
        with self.assertRaises(UnavailableError) as cm:
            single.health()
        self.assertEqual(cm.exception.attempts, 1)
        channel.close()

    def test_retries_a_servers_cancelled(self):
        # A server that began shutting down cancels calls it has not started: the client tries
        # again (here the same stand-in server, which answers the second attempt).
        from concurrent import futures
        from bandit_client._pb import service_pb2_grpc

        class Cancelling(service_pb2_grpc.BanditServiceServicer):
            calls = 0

            def GetInstance(self, request, context):
                Cancelling.calls += 1
                if Cancelling.calls == 1:
                    context.abort(grpc.StatusCode.CANCELLED, "server shutting down")
                return bandit_client.pb.Instance(name=request.name)

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        service_pb2_grpc.add_BanditServiceServicer_to_server(Cancelling(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        try:
            client = BanditClient("127.0.0.1:%d" % port, timeout=5.0,
                                  retry=RetryPolicy(max_attempts=3, initial_backoff=0.01))
            self.assertEqual(client.get_instance("x").name, "x")
            self.assertEqual(Cancelling.calls, 2)
            Cancelling.calls = 0
            single = BanditClient("127.0.0.1:%d" % port, retry=RetryPolicy(max_attempts=1))
            with self.assertRaises(BanditError) as cm:
                single.get_instance("x")
            self.assertEqual(cm.exception.code, grpc.StatusCode.CANCELLED)
            client.close()
            single.close()
        finally:
            server.stop(None)

    def test_deadline_covers_all_retries(self):
        counter = CountingInterceptor()
        channel = grpc.intercept_channel(grpc.insecure_channel("127.0.0.1:%d" % unused_port()), counter)
        client = BanditClient(channel=channel, timeout=0.3,
                              retry=RetryPolicy(max_attempts=1000, initial_backoff=0.02, max_backoff=0.02))
        with self.assertRaises(DeadlineExceededError) as cm:
            client.get_instance("anything")
        self.assertIn("UNAVAILABLE", cm.exception.message)
        attempts = counter.calls["/bandit.v1.BanditService/GetInstance"]
        self.assertEqual(cm.exception.attempts, attempts)
        self.assertGreater(attempts, 1)
        self.assertLess(attempts, 1000)
        # Each retry got only what was left of the 0.3 s.
        self.assertTrue(all(0 < t <= 0.3 for t in counter.timeouts), counter.timeouts)
        self.assertEqual(sorted(counter.timeouts, reverse=True), counter.timeouts)
        channel.close()

    def test_retry_policy_validates(self):
        with self.assertRaises(ValueError):
            RetryPolicy(max_attempts=0)


if __name__ == "__main__":
    unittest.main()
