"""RoundStream (BanditService.Rounds) against a real banditd on port 0, checked against the unary
calls: the same decisions and learned scores on a seeded instance, answers in the order sent
while pipelined, a refusal answered in place with the unary call's exact status code while the
stream goes on, the routing header, closing and cancelling, and UNAVAILABLE on shutdown.

Run: BANDITD=build/bin/banditd PYTHONPATH=client/python:build/python_gen \
     /usr/bin/python3 -m unittest discover -s client/python/tests -v
"""
import math
import os
import sys
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import ServerProcess  # noqa: E402

from bandit_client import (BanditClient, BanditError, FailedPreconditionError,  # noqa: E402
                           InvalidArgumentError, NotFoundError, UnavailableError, pb,
                           round_error, round_result)

# Randomized (epsilon) and contextual: equal decisions need the same seeded engine and the same
# learned weights on both sides.
EPSILON_GLM = "policy { glm_epsilon_greedy { dimension: 3 link: GAUSSIAN epsilon: 0.3 } } seed: 11"
CANDIDATES = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.0]]


def reward_of(arm_index, t):
    """A fixed reward table (arm 1 best, with a period-3 wobble): the same on both paths."""
    return [0.2, 0.9, 0.4, 0.6][arm_index] - 0.1 * (t % 3)


def code_of(call):
    """The grpc.StatusCode a unary call raises (None when it succeeds)."""
    try:
        call()
    except BanditError as e:
        return e.code
    return None


class MetadataRecorder(grpc.StreamStreamClientInterceptor):
    """Records the metadata each stream leaves with."""

    def __init__(self):
        self.metadata = []

    def intercept_stream_stream(self, continuation, details, request_iterator):
        self.metadata.append(tuple(details.metadata or ()))
        return continuation(details, request_iterator)


class RoundStreamTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess()
        cls.client = BanditClient(cls.server.target, timeout=10.0)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()

    def setUp(self):
        self.prefix = self.id().rsplit(".", 1)[-1].replace("_", "-")

    def name(self, suffix):
        return "%s-%s" % (self.prefix, suffix)

    def test_stream_decides_and_learns_as_the_unary_calls(self):
        unary, streamed = self.name("unary"), self.name("stream")
        self.client.create_instance(unary, EPSILON_GLM)
        self.client.create_instance(streamed, EPSILON_GLM)
        rounds = 40
        by_unary, updates_unary = [], []
        for t in range(rounds):
            d = self.client.select(unary, CANDIDATES, return_scores=True)
            by_unary.append(d)
            updates_unary.append(self.client.update(unary, d.event_id, reward_of(d.arm_index, t)).updates)

        # The stream the way it pays: a round's Update leaves with the next round's Select.
        by_stream, updates_stream = [], []
        with self.client.open_round_stream(streamed) as rounds_stream:
            d = rounds_stream.select(streamed, CANDIDATES, return_scores=True)
            for t in range(rounds):
                by_stream.append(d)
                rounds_stream.send_update(streamed, d.event_id, reward_of(d.arm_index, t))
                if t + 1 < rounds:
                    rounds_stream.send_select(streamed, CANDIDATES, return_scores=True)
                self.assertEqual(rounds_stream.unanswered, 2 if t + 1 < rounds else 1)
                updates_stream.append(rounds_stream.receive_result().updates)
                if t + 1 < rounds:
                    d = rounds_stream.receive_result()
            self.assertEqual(rounds_stream.unanswered, 0)

        self.assertEqual([d.arm_index for d in by_stream], [d.arm_index for d in by_unary])
        self.assertEqual([d.propensity for d in by_stream], [d.propensity for d in by_unary])
        self.assertEqual([list(d.scores) for d in by_stream], [list(d.scores) for d in by_unary])
        self.assertEqual(updates_stream, updates_unary)
        self.assertEqual(updates_unary, list(range(1, rounds + 1)))
        # Not a trivial sequence: exploration and learning both showed.
        self.assertGreater(len({d.arm_index for d in by_unary}), 1)
        self.assertTrue(any(d.propensity < 1.0 for d in by_unary))

        # What both learned: equal counts, and equal scores of a fresh context.
        a, b = self.client.get_instance(unary), self.client.get_instance(streamed)
        self.assertEqual((a.stats.rounds, a.stats.updates), (rounds, rounds))
        self.assertEqual((b.stats.rounds, b.stats.updates), (rounds, rounds))
        probe = [[0.3, 0.1, 0.7], [0.9, 0.2, 0.1]]
        sa = self.client.select(unary, probe, return_scores=True)
        sb = self.client.select(streamed, probe, return_scores=True)
        self.assertEqual(list(sa.scores), list(sb.scores))
        self.assertEqual((sa.arm_index, sa.propensity), (sb.arm_index, sb.propensity))

    def test_pipelined_answers_come_in_the_order_sent(self):
        n = self.name("ads")
        self.client.create_instance(n, "policy { linucb { dimension: 3 } } seed: 5")
        with self.client.open_round_stream(n) as rounds:
            # Every Select and its Update sent before any answer is read: each Update names the
            # event of the Select sent just before it (served in order, so it is pending).
            for i in range(20):
                rounds.send_select(n, CANDIDATES, event_id="ev-%d" % i)
                rounds.send_update(n, "ev-%d" % i, reward=float(i % 2))
            rounds.send(pb.ActivateRequest(instance=n, event_id="ev-0"))  # rewarded already
            rounds.send_select(n, CANDIDATES, event_id="later", defer_activation=True)
            rounds.send_activate(n, "later")
            self.assertEqual(rounds.unanswered, 43)
            for i in range(20):
                a = rounds.receive()
                self.assertEqual(a.WhichOneof("result"), "decision")
                self.assertEqual(a.decision.event_id, "ev-%d" % i)
                u = rounds.receive()
                self.assertEqual(u.WhichOneof("result"), "update")
                self.assertEqual(u.update.updates, i + 1)  # the instance's total
            last = rounds.receive()
            # The unary Activate of a decision that was not deferred answers the same.
            unary = code_of(lambda: self.client.activate(n, "ev-0"))
            self.assertIsNotNone(unary)
            self.assertEqual(round_error(last).code, unary)
            self.assertEqual(rounds.receive_result().event_id, "later")
            activated = rounds.receive()
            self.assertEqual(activated.WhichOneof("result"), "activate")
            self.assertIsNone(round_error(activated))
            self.assertEqual(rounds.unanswered, 0)
        inst = self.client.get_instance(n)
        self.assertEqual((inst.stats.rounds, inst.stats.updates), (21, 20))
        self.assertEqual(inst.stats.activated, 1)

    def test_a_refusal_is_answered_in_place_with_the_unary_code(self):
        n = self.name("ads")
        self.client.create_instance(n, "policy { linucb { dimension: 3 } } seed: 5")
        done = self.client.select(n, CANDIDATES)
        self.client.update(n, done.event_id, 1.0)
        # Each bad request, and the code its unary call answers (the independent reference).
        bad = [
            (pb.SelectRequest(instance=self.name("missing")),
             lambda: self.client.select(self.name("missing"))),
            (pb.UpdateRequest(instance=n, event_id="never-made", reward=1.0),
             lambda: self.client.update(n, "never-made", 1.0)),
            (pb.UpdateRequest(instance=n, event_id=done.event_id, reward=1.0),
             lambda: self.client.update(n, done.event_id, 1.0)),
            (pb.UpdateRequest(instance=n, event_id=done.event_id, reward=math.nan),
             lambda: self.client.update(n, done.event_id, math.nan)),
            (pb.SelectRequest(instance=n, candidates=[pb.FeatureVector(values=[1.0, 0.0])]),
             lambda: self.client.select(n, [[1.0, 0.0]])),
        ]
        expected = [code_of(call) for _, call in bad]
        self.assertEqual(expected, [grpc.StatusCode.NOT_FOUND, grpc.StatusCode.NOT_FOUND,
                                    grpc.StatusCode.FAILED_PRECONDITION,
                                    grpc.StatusCode.INVALID_ARGUMENT,
                                    grpc.StatusCode.INVALID_ARGUMENT])
        before = self.client.get_instance(n).stats

        with self.client.open_round_stream(n) as rounds:
            # Pipelined: good, each bad one, good; every answer in its place.
            rounds.send_select(n, CANDIDATES, event_id="first")
            for request, _ in bad:
                rounds.send(request)
            rounds.send_update(n, "first", reward=0.5)
            self.assertIsInstance(round_result(rounds.receive()), pb.Decision)
            for (request, _), code in zip(bad, expected):
                answer = rounds.receive()
                self.assertIsNone(answer.WhichOneof("result"))  # no result beside a refusal
                self.assertEqual(answer.status.code, code.value[0])
                self.assertEqual(round_error(answer).code, code)
                self.assertNotEqual(answer.status.message, "")
            self.assertEqual(rounds.receive_result().updates, before.updates + 1)

            # One request at a time: the typed error, and the stream goes on.
            with self.assertRaises(NotFoundError) as caught:
                rounds.select(self.name("missing"))
            self.assertEqual(caught.exception.code, grpc.StatusCode.NOT_FOUND)
            with self.assertRaises(InvalidArgumentError):
                rounds.update(n, "first", reward=math.inf)
            with self.assertRaises(FailedPreconditionError):
                rounds.update(n, "first", reward=1.0)  # rewarded above
            d = rounds.select(n, CANDIDATES)
            self.assertEqual(rounds.update(n, d.event_id, reward=1.0).updates, before.updates + 2)

        # The refused requests changed nothing: two Selects and two Updates were applied.
        after = self.client.get_instance(n).stats
        self.assertEqual((after.rounds - before.rounds, after.updates - before.updates), (2, 2))

    def test_one_call_waits_for_earlier_answers_and_receive_needs_a_request(self):
        n = self.name("ads")
        self.client.create_instance(n, "policy { linucb { dimension: 3 } }")
        with self.client.open_round_stream() as rounds:
            with self.assertRaises(FailedPreconditionError):
                rounds.receive()
            rounds.send_select(n, CANDIDATES)
            with self.assertRaises(FailedPreconditionError):
                rounds.select(n, CANDIDATES)  # the earlier answer is still to be received
            self.assertEqual(rounds.unanswered, 1)  # the refused call sent nothing
            self.assertEqual(len(rounds.receive_result().event_id) > 0, True)
            self.assertIsInstance(rounds.select(n, CANDIDATES), pb.Decision)
        with self.assertRaises(TypeError):
            rounds.send(pb.GetInstanceRequest(name=n))

    def test_routing_header_names_the_instance(self):
        recorder = MetadataRecorder()
        channel = grpc.intercept_channel(grpc.insecure_channel(self.server.target), recorder)
        n = self.name("ads")
        self.client.create_instance(n, "policy { linucb { dimension: 3 } }")
        try:
            client = BanditClient(channel=channel)
            with client.open_round_stream(n) as rounds:
                rounds.select(n, CANDIDATES)
            with client.open_round_stream() as rounds:
                rounds.select(n, CANDIDATES)
        finally:
            channel.close()
        self.assertEqual(recorder.metadata, [(("x-bandit-instance", n),), ()])

    def test_close_drops_the_answers_still_due_and_ends_ok(self):
        n = self.name("ads")
        self.client.create_instance(n, "policy { linucb { dimension: 3 } }")
        rounds = self.client.open_round_stream(n)
        for _ in range(5):
            rounds.send_select(n, CANDIDATES)
        rounds.close()  # returns (no error): the server answered all five
        self.assertEqual(rounds.unanswered, 0)
        self.assertEqual(self.client.get_instance(n).stats.rounds, 5)
        with self.assertRaises(FailedPreconditionError):
            rounds.send_select(n, CANDIDATES)
        rounds.close()  # a second close is a no-op

    def test_leaving_the_block_by_an_exception_cancels(self):
        n = self.name("ads")
        self.client.create_instance(n, "policy { linucb { dimension: 3 } }")
        with self.assertRaises(KeyError):
            with self.client.open_round_stream(n) as rounds:
                rounds.select(n, CANDIDATES)
                raise KeyError("the caller's own error passes through")
        with self.assertRaises(BanditError) as caught:
            rounds.close()
        self.assertEqual(caught.exception.code, grpc.StatusCode.CANCELLED)
        # The server is unaffected: a new stream serves.
        with self.client.open_round_stream(n) as again:
            self.assertIsInstance(again.select(n, CANDIDATES), pb.Decision)


class RoundStreamShutdownTest(unittest.TestCase):
    def test_a_server_shutting_down_ends_the_stream_unavailable(self):
        server = ServerProcess()
        try:
            client = BanditClient(server.target, timeout=10.0)
            client.create_instance("ads", "policy { linucb { dimension: 3 } }")
            rounds = client.open_round_stream("ads")
            self.assertIsInstance(rounds.select("ads", CANDIDATES), pb.Decision)
            server.stop()
            # The send may still be queued before the client learns the stream ended; the
            # answer cannot come either way.
            with self.assertRaises(UnavailableError):
                rounds.send_select("ads", CANDIDATES)
                rounds.receive()
            with self.assertRaises(UnavailableError):
                rounds.close()
            client.close()
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
