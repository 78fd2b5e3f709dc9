"""BanditClient: a thin, synchronous wrapper over banditd's generated gRPC stubs.

    with BanditClient("127.0.0.1:50051") as client:
        client.create_instance("ads", "policy { linucb { dimension: 3 } }")
        d = client.select("ads", candidates=[[1, 0, 0], [0, 1, 0]])
        client.update("ads", d.event_id, reward=1.0)

Responses are the generated protobuf messages (``Decision``, ``Instance``, ...). Every call has a
deadline (``timeout`` seconds, per call or the client default) that covers all its attempts.
A call whose deadline has already passed is not sent (DeadlineExceededError, attempts=0).
Calls that fail with UNAVAILABLE (server down, restarting or draining) are retried with
exponential backoff; no other code is retried. Failures raise typed ``BanditError`` subclasses.
"""
import json
import queue
import random
import threading
import time

import grpc
from google.protobuf import json_format, text_format

from . import errors
from ._pb import health_pb2, health_pb2_grpc, service_pb2, service_pb2_grpc

__all__ = ["BanditClient", "RetryPolicy", "BatchItem", "RoundStream", "round_error", "round_result"]

# The routing header: the instance a call is about (proto/bandit/v1/metadata.h names the keys).
ROUTING_HEADER = "x-bandit-instance"


def _routing_metadata(request):
    """The instance a request is about, as the routing header (none for ListInstances)."""
    key = getattr(request, "instance", "") if hasattr(request, "instance") else ""
    if not key and hasattr(request, "requests") and len(request.requests) > 0:
        key = request.requests[0].instance
    if not key and hasattr(request, "name"):
        key = request.name
    return ((ROUTING_HEADER, key),) if key else None

# Codes a call is retried on. CANCELLED too: this client never cancels its own calls, so a
# CANCELLED is the server's, and a server that began shutting down cancels the calls it had not
# started (gRPC does so before any handler runs): like UNAVAILABLE, another node or the
# restarted server can take the call.
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)


class RetryPolicy:
    """Retries for UNAVAILABLE (and a server's CANCELLED) only: up to ``max_attempts`` attempts in all, waiting
    ``initial_backoff * multiplier**(n-1)`` seconds (capped at ``max_backoff``, with +-20 % jitter)
    before attempt n+1. ``max_attempts=1`` disables retries."""

    def __init__(self, max_attempts=4, initial_backoff=0.05, max_backoff=2.0, multiplier=2.0):
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.max_attempts = max_attempts
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.multiplier = multiplier

    def backoff(self, attempt):
        base = min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))
        return base * random.uniform(0.8, 1.2)


class BatchItem:
    """One item of a batch answer: ``value`` (a message) when ``ok``, else ``error`` (a typed
    BanditError, not raised). ``unwrap()`` returns the value or raises the error."""

    __slots__ = ("value", "error")

    def __init__(self, value=None, error=None):
        self.value = value
        self.error = error

    @property
    def ok(self):
        return self.error is None

    def unwrap(self):
        if self.error is not None:
            raise self.error
        return self.value

    def __repr__(self):
        return "BatchItem(ok)" if self.ok else "BatchItem(%r)" % (self.error,)


def _config(config):
    """InstanceConfig from a message, a text-format string or a dict (JSON field names)."""
    if config is None:
        return service_pb2.InstanceConfig()
    if isinstance(config, service_pb2.InstanceConfig):
        return config
    if isinstance(config, str):
        return text_format.Parse(config, service_pb2.InstanceConfig())
    if isinstance(config, dict):
        return json_format.ParseDict(config, service_pb2.InstanceConfig())
    raise TypeError("config must be an InstanceConfig, a text-format str or a dict, got %s"
                    % type(config).__name__)


def _json_text(value):
    """Named features as the server takes them: JSON text (a str is sent as it is; dicts and
    lists keep their key order, which VW's self-interactions depend on)."""
    if value is None:
        return ""
    if isinstance(value, (str, bytes)):
        return value.decode() if isinstance(value, bytes) else value
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def _named_action(action):
    """A NamedAction from a dict {"id": ..., "features": {...}} (or a NamedAction)."""
    if isinstance(action, service_pb2.NamedAction):
        return action
    return service_pb2.NamedAction(id=str(action["id"]),
                                   features=_json_text(action.get("features")))


def _slot(slot):
    """A Slot from a dict {"id": ..., "features": {...} | "dense_features": [...],
    "excluded_actions": [...], "baseline_action": ...} (or a Slot)."""
    if isinstance(slot, service_pb2.Slot):
        return slot
    return service_pb2.Slot(id=str(slot["id"]), features=_json_text(slot.get("features")),
                            dense_features=list(slot.get("dense_features", ())),
                            excluded_actions=[str(a) for a in slot.get("excluded_actions", ())],
                            baseline_action=str(slot.get("baseline_action") or ""))


def _select_request(instance, candidates=None, x=None, return_scores=False, context=None,
                    actions=None, excluded_actions=None, explain=False, event_id=None,
                    slots=None, defer_activation=False):
    req = service_pb2.SelectRequest(instance=instance, return_scores=return_scores,
                                    explain=explain, event_id=event_id or "",
                                    defer_activation=defer_activation)
    for s in slots or ():
        req.slots.append(_slot(s))
    for c in candidates or ():
        req.candidates.add(values=list(c))
    if x is not None:
        req.x.extend(x)
    if context is not None:
        req.context = _json_text(context)
    for a in actions or ():
        req.actions.append(_named_action(a))
    req.excluded_actions.extend(excluded_actions or ())
    return req


def _update_request(instance, event_id=None, reward=0.0, direct=None, embedding=None,
                    fidelity=None, best_expected_reward=None, expected_reward=None, slot_id=None):
    req = service_pb2.UpdateRequest(instance=instance, reward=reward, slot_id=slot_id or "")
    if event_id is not None and direct is not None:
        raise ValueError("give either event_id or direct, not both")
    if event_id is not None:
        req.event_id = event_id
    elif direct is not None:
        if isinstance(direct, dict):
            direct = dict(direct)
            if "context" in direct:
                direct["context"] = _json_text(direct["context"])
            if "action" in direct:
                direct["action"] = _named_action(direct["action"])
            direct = service_pb2.DirectObservation(**direct)
        req.direct.CopyFrom(direct)
    if embedding is not None:
        req.embedding.extend(embedding)
    if fidelity is not None:
        req.fidelity = fidelity
    if best_expected_reward is not None:
        req.best_expected_reward = best_expected_reward
    if expected_reward is not None:
        req.expected_reward = expected_reward
    return req


def _as_request(item, cls, build):
    if isinstance(item, cls):
        return item
    if isinstance(item, dict):
        return build(**item)
    raise TypeError("batch items must be %s messages or dicts of keyword arguments" % cls.__name__)


def round_error(answer):
    """The typed error of a RoundResponse that carries a refusal (the very code and message the
    unary call would have raised), or None when the request succeeded."""
    if answer.HasField("status") and answer.status.code != 0:
        return errors.error_for_code(answer.status.code, answer.status.message)
    return None


def round_result(answer):
    """A RoundResponse's result: the Decision, UpdateResponse or ActivateResponse; raises the
    typed error when the request was refused."""
    error = round_error(answer)
    if error is not None:
        raise error
    kind = answer.WhichOneof("result")
    return getattr(answer, kind) if kind else None


# Ends the request iterator gRPC reads from: the client's half-close.
_END = object()


def _round_request(request):
    """A RoundRequest from one, or from the SelectRequest, UpdateRequest or ActivateRequest it
    wraps."""
    if isinstance(request, service_pb2.RoundRequest):
        return request
    if isinstance(request, service_pb2.SelectRequest):
        return service_pb2.RoundRequest(select=request)
    if isinstance(request, service_pb2.UpdateRequest):
        return service_pb2.RoundRequest(update=request)
    if isinstance(request, service_pb2.ActivateRequest):
        return service_pb2.RoundRequest(activate=request)
    raise TypeError("a Rounds stream sends RoundRequest, SelectRequest, UpdateRequest or "
                    "ActivateRequest messages, got %s" % type(request).__name__)


class RoundStream:
    """A Rounds stream (BanditService.Rounds, docs/api.md): Select, Update and Activate requests
    on one long-lived call, each answered in the order sent, each refusal in its own answer (the
    stream goes on). Opened by ``BanditClient.open_round_stream()``; a context manager::

        with client.open_round_stream("ads") as rounds:
            d = rounds.select("ads", candidates=[[1, 0], [0, 1]])
            rounds.send_update("ads", d.event_id, reward=1.0)    # pipelined: not waited for
            rounds.send_select("ads", candidates=[[1, 0], [0, 1]])
            rounds.receive_result()                             # the Update's UpdateResponse
            d = rounds.receive_result()                         # the next Decision

    ``select`` / ``update`` / ``activate`` send one request and wait for its answer, raising the
    typed error the unary call would raise (the stream goes on after it); they refuse
    (FailedPreconditionError) while answers to earlier ``send*`` calls are still to be received.
    ``send*`` does not wait, so a round's Update and the next round's Select may leave together
    and their answers be read after: one round trip per round. ``receive()`` returns the oldest
    unanswered request's RoundResponse as it came (its ``status`` set when refused);
    ``receive_result()`` unwraps it as ``select`` does.

    Not retried and without a deadline: a stream that broke (the server restarted or shut down:
    UnavailableError) is not reopened; open a new one. One thread sends and one (the same or
    another) receives. Leaving the ``with`` block closes the stream (``close()``), or cancels it
    when the block raised.
    """

    def __init__(self, rounds_method, metadata=None):
        # gRPC reads the requests from this iterator on its own thread, so send() never blocks
        # on the server (which reads no further while 64 answers of a stream are untaken).
        self._requests = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._unanswered = 0
        self._closed = False
        self._call = rounds_method(iter(self._requests.get, _END), metadata=metadata)

    # ---- state ----
    @property
    def unanswered(self):
        """Requests sent whose answer was not received yet."""
        with self._lock:
            return self._unanswered

    def _ended_error(self):
        """The error of a stream that ended (its own status; an OK end with answers still due
        did not answer them)."""
        code = self._call.code()
        if code != grpc.StatusCode.OK:
            return errors.error_for_code(code, self._call.details() or "")
        if self.unanswered > 0:
            return errors.UnavailableError("the Rounds stream ended before answering every request")
        return None

    # ---- pipelined use ----
    def send(self, request):
        """Sends a RoundRequest (or the SelectRequest, UpdateRequest or ActivateRequest it
        wraps) without waiting for its answer. Raises the stream's error if it ended."""
        request = _round_request(request)
        if self._closed:
            raise errors.FailedPreconditionError("the Rounds stream was closed")
        if self._call.done():
            raise self._ended_error() or errors.UnavailableError("the Rounds stream ended")
        with self._lock:  # counted before it leaves: its answer may come back at once
            self._unanswered += 1
        self._requests.put(request)

    def send_select(self, instance, candidates=None, **kwargs):
        """Sends a Select (the keywords of ``BanditClient.select``, without ``timeout``)."""
        self.send(_select_request(instance, candidates, **kwargs))

    def send_update(self, instance, event_id=None, reward=0.0, **kwargs):
        """Sends an Update (the keywords of ``BanditClient.update``, without ``timeout``)."""
        self.send(_update_request(instance, event_id, reward, **kwargs))

    def send_activate(self, instance, event_id):
        self.send(service_pb2.ActivateRequest(instance=instance, event_id=event_id))

    def receive(self):
        """The RoundResponse to the oldest request sent and not yet answered (``status`` set
        when that request was refused). Raises the stream's typed error if it ended first."""
        if self.unanswered == 0:
            raise errors.FailedPreconditionError(
                "no request of this Rounds stream awaits its answer")
        try:
            answer = next(self._call)
        except StopIteration:
            raise self._ended_error() from None
        except grpc.RpcError as e:
            raise errors.error_for_code(e.code(), e.details() or "") from None
        with self._lock:
            self._unanswered -= 1
        return answer

    def receive_result(self):
        """``receive()`` unwrapped: the Decision, UpdateResponse or ActivateResponse, or the
        typed error of the request's refusal raised."""
        return round_result(self.receive())

    # ---- one request, one answer ----
    def _one(self, request):
        if self.unanswered > 0:
            raise errors.FailedPreconditionError(
                "answers to earlier requests of this Rounds stream are still to be received")
        self.send(request)
        return self.receive_result()

    def select(self, instance, candidates=None, **kwargs):
        """A Decision, as ``BanditClient.select`` (same keywords, without ``timeout``)."""
        return self._one(_select_request(instance, candidates, **kwargs))

    def update(self, instance, event_id=None, reward=0.0, **kwargs):
        """An UpdateResponse, as ``BanditClient.update`` (same keywords, without ``timeout``)."""
        return self._one(_update_request(instance, event_id, reward, **kwargs))

    def activate(self, instance, event_id):
        return self._one(service_pb2.ActivateRequest(instance=instance, event_id=event_id))

    # ---- ending ----
    def close(self):
        """Closes the sending side, receives (and drops) the answers still due, and returns once
        the server ended the stream; raises its typed error unless it answered everything."""
        if not self._closed:
            self._closed = True
            self._requests.put(_END)
        try:
            for _ in self._call:
                with self._lock:
                    self._unanswered -= 1
        except grpc.RpcError as e:
            raise errors.error_for_code(e.code(), e.details() or "") from None
        error = self._ended_error()
        if error is not None:
            raise error

    def cancel(self):
        """Ends the stream at once; requests without an answer may or may not have been served."""
        self._closed = True
        self._requests.put(_END)
        self._call.cancel()

    def __del__(self):
        # A stream dropped without close() would otherwise hold gRPC's request thread (blocked
        # on the empty queue) and the server's call until the channel closes.
        try:
            if not self._closed:
                self.cancel()
        except Exception:  # noqa: BLE001 - at interpreter exit the modules may be gone
            pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.cancel()
        return False


class BanditClient:
    """Client for one banditd server.

    Args:
      target: "host:port" (anything grpc accepts, e.g. "dns:///bandit.internal:50051").
      timeout: default deadline of each call, in seconds (covers retries). None = no deadline.
      retry: a RetryPolicy (default: 4 attempts) or None for no retries.
      credentials: grpc.ChannelCredentials for TLS; None = plaintext.
      options: extra channel options, e.g. [("grpc.max_receive_message_length", 64 << 20)].
      channel: an existing grpc.Channel to use instead (the client will not close it).
    """

    def __init__(self, target=None, *, timeout=5.0, retry=None, credentials=None, options=None,
                 channel=None):
        if channel is None and target is None:
            raise ValueError("give a target \"host:port\" or a channel")
        self.timeout = timeout
        self.retry = retry if retry is not None else RetryPolicy()
        self._owns_channel = channel is None
        if channel is None:
            opts = list(options or [])
            channel = (grpc.secure_channel(target, credentials, opts) if credentials
                       else grpc.insecure_channel(target, opts))
        self._channel = channel
        self._stub = service_pb2_grpc.BanditServiceStub(channel)
        self._health = health_pb2_grpc.HealthStub(channel)

    # ---- channel ----
    def close(self):
        if self._owns_channel:
            self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def channel(self):
        return self._channel

    # ---- the retry / deadline / error-mapping core ----
    # (every call carries the instance as the routing header x-bandit-instance, so a proxy in
    # front of a cluster, HAProxy with balance hdr(x-bandit-instance), keeps it on one node)
    # A loop here rather than gRPC's service-config retryPolicy, which cannot keep what this
    # client promises: the policy also applies to a channel the caller built (channel=), which
    # a service config can only be given at creation; max_attempts is the caller's (gRPC caps
    # it at 5); every error carries the attempts made and a deadline error names the last
    # attempt's status (gRPC's retries are invisible above the channel, interceptors included).
    def _call(self, method, request, timeout, retry=None):
        timeout = self.timeout if timeout is None else timeout
        policy = self.retry if retry is None else retry
        deadline = None if timeout is None else time.monotonic() + timeout
        attempt = 0
        last = ""  # the previous attempt's UNAVAILABLE or CANCELLED, if any
        while True:
            attempt += 1
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:  # never send a call that is already late
                raise errors.DeadlineExceededError(
                    "deadline of %gs passed before attempt %d was sent%s" % (timeout, attempt, last),
                    attempts=attempt - 1)
            try:
                return method(request, timeout=remaining, metadata=_routing_metadata(request))
            except grpc.RpcError as e:
                code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
                details = (e.details() if hasattr(e, "details") else None) or str(e)
                if code not in _RETRYABLE or attempt >= policy.max_attempts:
                    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                        details += last
                    raise errors.error_for_code(code, details, attempt) from None
                pause = policy.backoff(attempt)
                if deadline is not None and time.monotonic() + pause >= deadline:
                    raise errors.DeadlineExceededError(
                        "deadline of %gs reached while retrying; last attempt: %s: %s"
                        % (timeout, code.name, details), attempts=attempt) from None
                last = "; last attempt: %s: %s" % (code.name, details)
                time.sleep(pause)

    # ---- lifecycle ----
    def create_instance(self, name, config=None, *, timeout=None):
        """Creates instance ``name``. ``config``: InstanceConfig, text format
        ("policy { linucb { dimension: 3 } }") or dict ({"policy": {"linucb": {"dimension": 3}}})."""
        req = service_pb2.CreateInstanceRequest(name=name, config=_config(config))
        return self._call(self._stub.CreateInstance, req, timeout)

    def get_instance(self, name, *, timeout=None):
        return self._call(self._stub.GetInstance, service_pb2.GetInstanceRequest(name=name), timeout)

    def list_instances(self, page_size=0, page_token="", *, timeout=None):
        """One page: a ListInstancesResponse (instances, next_page_token)."""
        req = service_pb2.ListInstancesRequest(page_size=page_size, page_token=page_token)
        return self._call(self._stub.ListInstances, req, timeout)

    def iter_instances(self, page_size=0, *, timeout=None):
        """Every instance, following next_page_token."""
        token = ""
        while True:
            page = self.list_instances(page_size, token, timeout=timeout)
            yield from page.instances
            token = page.next_page_token
            if not token:
                return

    def delete_instance(self, name, *, timeout=None):
        self._call(self._stub.DeleteInstance, service_pb2.DeleteInstanceRequest(name=name), timeout)

    def reset_instance(self, name, *, timeout=None):
        return self._call(self._stub.ResetInstance, service_pb2.ResetInstanceRequest(name=name), timeout)

    def add_arms(self, name, arms, *, timeout=None):
        """``arms``: ArmSpec messages, ids (str) or dicts {"id": ..., "features": [...]}."""
        req = service_pb2.AddArmsRequest(name=name)
        for a in arms:
            if isinstance(a, str):
                req.arms.add(id=a)
            elif isinstance(a, dict):
                req.arms.add(**a)
            else:
                req.arms.append(a)
        return self._call(self._stub.AddArms, req, timeout)

    def remove_arms(self, name, arm_ids, *, timeout=None):
        req = service_pb2.RemoveArmsRequest(name=name, arm_ids=list(arm_ids))
        return self._call(self._stub.RemoveArms, req, timeout)

    def set_mixture_reference(self, name, *, embeddings=None, mean=None, covariance=None,
                              append=False, timeout=None):
        """Mixture (FD/KD) instances: replace the reference distribution, keeping what was
        learned. Either ``embeddings`` (one vector per reference sample; ``append`` adds them to
        the current reference) or FD's ``mean`` and ``covariance`` (row-major d x d, or nested)."""
        req = service_pb2.SetMixtureReferenceRequest(name=name, append=append)
        for e in embeddings or []:
            req.embeddings.add(values=[float(v) for v in e])
        if mean is not None:
            req.mean.extend(float(v) for v in mean)
        if covariance is not None:
            flat = [v for row in covariance for v in row] if covariance and hasattr(covariance[0], "__len__") else covariance
            req.covariance.extend(float(v) for v in flat)
        return self._call(self._stub.SetMixtureReference, req, timeout)

    def configure_instance(self, name, *, reward_wait_ms=None, on_expiry=None,
                           default_reward=None, reward_aggregation=None, epsilon=None,
                           learning_mode=None, timeout=None):
        """Changes the settings that may change live, keeping what was learned: each argument
        given replaces the instance's setting. Enums by name (``learning_mode="APPRENTICE"``,
        ``on_expiry="DROP"``, ``reward_aggregation="SUM"``) or value."""
        req = service_pb2.ConfigureInstanceRequest(name=name)
        if reward_wait_ms is not None:
            req.reward_wait_ms = int(reward_wait_ms)
        if on_expiry is not None:
            req.on_expiry = service_pb2.ExpiryAction.Value(on_expiry) if isinstance(on_expiry, str) else on_expiry
        if default_reward is not None:
            req.default_reward = float(default_reward)
        if reward_aggregation is not None:
            req.reward_aggregation = (service_pb2.RewardAggregation.Value(reward_aggregation)
                                      if isinstance(reward_aggregation, str) else reward_aggregation)
        if epsilon is not None:
            req.epsilon = float(epsilon)
        if learning_mode is not None:
            req.learning_mode = (service_pb2.LearningMode.Value(learning_mode)
                                 if isinstance(learning_mode, str) else learning_mode)
        return self._call(self._stub.ConfigureInstance, req, timeout)

    # ---- shadow policies ----
    def add_shadow(self, name, shadow, config, *, timeout=None):
        """Adds a shadow policy to instance ``name``. ``config``: a ShadowConfig message, a
        text-format string (``'policy { ucb1 {} } seed: 7'``) or a dict (JSON field names)."""
        if isinstance(config, str):
            config = text_format.Parse(config, service_pb2.ShadowConfig())
        elif isinstance(config, dict):
            config = json_format.ParseDict(config, service_pb2.ShadowConfig())
        req = service_pb2.AddShadowRequest(name=name, shadow=shadow, config=config)
        return self._call(self._stub.AddShadow, req, timeout)

    def remove_shadow(self, name, shadow, *, timeout=None):
        req = service_pb2.RemoveShadowRequest(name=name, shadow=shadow)
        return self._call(self._stub.RemoveShadow, req, timeout)

    def promote_shadow(self, name, shadow, *, timeout=None):
        """Makes the shadow the served policy, keeping what it learned (the policy served
        until then is dropped)."""
        req = service_pb2.PromoteShadowRequest(name=name, shadow=shadow)
        return self._call(self._stub.PromoteShadow, req, timeout)

    # ---- decisions and rewards ----
    def select(self, instance, candidates=None, *, x=None, return_scores=False, context=None,
               actions=None, excluded_actions=None, explain=False, event_id=None, slots=None,
               defer_activation=False, timeout=None):
        """A Decision. ``candidates``: one feature vector (sequence of floats) per candidate arm,
        for contextual policies; ``x``: the input point for kernel-selection policies.

        Named features (an instance created with a ``feature_space``): ``context`` a dict (or
        JSON text) shared by every action, ``actions`` a list of {"id": ..., "features": {...}},
        ``excluded_actions`` ids not to choose now. The decision's ``action_id`` names the
        choice; with ``return_scores`` its ``ranking`` lists every action's probability; with
        ``explain`` its ``explanation`` lists the chosen action's hashed features and weights.
        ``event_id``: the decision's id, chosen by the caller (at most 256 letters, digits and
        . _ : ~ -); refused with ALREADY_EXISTS while a decision with that id awaits its reward.
        ``slots``: a multi-slot decision, a list of {"id": ..., "features": {...} (named) or
        "dense_features": [...], "excluded_actions": [...], "baseline_action": ...}; the
        decision's ``slots`` give each slot's choice and conditional propensity, and rewards
        come per slot (``update(..., slot_id=...)``). ``defer_activation``: not learned from
        until ``activate(instance, event_id)``."""
        req = _select_request(instance, candidates, x, return_scores, context, actions,
                              excluded_actions, explain, event_id, slots, defer_activation)
        return self._call(self._stub.Select, req, timeout)

    def update(self, instance, event_id=None, reward=0.0, *, direct=None, embedding=None,
               fidelity=None, best_expected_reward=None, expected_reward=None, slot_id=None,
               timeout=None):
        """Reports ``reward`` for the decision ``event_id`` (for a multi-slot decision, for its
        slot ``slot_id``), or a ``direct`` observation: DirectObservation or dict with arm_id /
        features / x, or with named features {"context": {...}, "action": {"id": ...,
        "features": {...}}}. Returns the UpdateResponse."""
        req = _update_request(instance, event_id, reward, direct, embedding, fidelity,
                              best_expected_reward, expected_reward, slot_id)
        return self._call(self._stub.Update, req, timeout)

    def activate(self, instance, event_id, *, timeout=None):
        """Activates a decision made with ``defer_activation``: from now on it is learned from."""
        req = service_pb2.ActivateRequest(instance=instance, event_id=event_id)
        return self._call(self._stub.Activate, req, timeout)

    def select_batch(self, requests, *, timeout=None):
        """``requests``: SelectRequest messages or dicts of select() keywords (with "instance").
        Returns one BatchItem per request, in order; item failures are not raised."""
        reqs = [_as_request(r, service_pb2.SelectRequest, _select_request) for r in requests]
        resp = self._call(self._stub.SelectBatch, service_pb2.SelectBatchRequest(requests=reqs), timeout)
        return [BatchItem(d, None) if s.code == 0 else BatchItem(None, errors.error_for_code(s.code, s.message))
                for d, s in zip(resp.decisions, resp.statuses)]

    def update_batch(self, requests, *, timeout=None):
        """``requests``: UpdateRequest messages or dicts of update() keywords (with "instance").
        Returns one BatchItem (value: UpdateResponse) per request, in order."""
        reqs = [_as_request(r, service_pb2.UpdateRequest, _update_request) for r in requests]
        resp = self._call(self._stub.UpdateBatch, service_pb2.UpdateBatchRequest(requests=reqs), timeout)
        return [BatchItem(u, None) if s.code == 0 else BatchItem(None, errors.error_for_code(s.code, s.message))
                for u, s in zip(resp.responses, resp.statuses)]

    def open_round_stream(self, instance=None):
        """A RoundStream (BanditService.Rounds): Select, Update and Activate on one stream, each
        served as its unary call and answered in order. ``instance``, if given, is sent as the
        routing header x-bandit-instance (a proxy in front of a cluster then sends the stream
        to that instance's node; each request is routed on its own either way). The stream has
        no deadline and is not retried."""
        metadata = ((ROUTING_HEADER, instance),) if instance else None
        return RoundStream(self._stub.Rounds, metadata)

    # ---- health ----
    def health(self, service="", *, timeout=None):
        """grpc.health.v1 status name: "SERVING", "NOT_SERVING", ..."""
        resp = self._call(self._health.Check, health_pb2.HealthCheckRequest(service=service), timeout)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
