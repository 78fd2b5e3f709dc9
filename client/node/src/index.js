'use strict';
// BanditClient: a small promise-based wrapper over banditd's gRPC API, loaded at run time from
// the service's .proto files (packed into the npm package) with @grpc/proto-loader (no generated code to keep in sync).
//
//   const { BanditClient } = require('bandit-client');
//   const client = new BanditClient('127.0.0.1:50051');
//   await client.createInstance('ads', { policy: { linucb: { dimension: 3 } } });
//   const d = await client.select('ads', { candidates: [[1, 0, 0], [0, 1, 0]] });
//   await client.update('ads', { eventId: d.eventId, reward: 1 });
//   client.close();
//
// Messages are plain objects with camelCase field names; int64 fields are decimal strings (as in
// proto3's JSON mapping, so 64-bit seeds survive; numbers are accepted on input), enums are
// strings. Every call has a deadline (timeoutMs, per call or the client default) covering all
// its attempts; a call whose deadline has already passed is not sent. Calls failing with
// UNAVAILABLE (or a server's CANCELLED) are retried with exponential backoff; no other code is
// retried.

const fs = require('node:fs');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// The routing header: the instance a call is about (proto/bandit/v1/metadata.h names the keys).
const ROUTING_HEADER = 'x-bandit-instance';

// The instance a request is about (the routing header); '' for none.
function routingKey(request) {
  if (!request) return '';
  if (request.instance) return String(request.instance);
  if (Array.isArray(request.requests) && request.requests.length > 0 && request.requests[0].instance)
    return String(request.requests[0].instance);
  if (request.name) return String(request.name);
  return '';
}
const errors = require('./errors');

const { Status } = errors;

const PACKED_PROTO_DIR = path.resolve(__dirname, '..', 'proto');        // in the npm package
const REPOSITORY_PROTO_DIR = path.resolve(__dirname, '..', '..', '..', 'proto');  // in a checkout

/**
 * Where the .proto files are: $BANDIT_PROTO_DIR; else the copy packed into the package
 * (`npm pack` puts it there); else, in a repository checkout, the repository's proto/.
 */
function defaultProtoDir() {
  if (process.env.BANDIT_PROTO_DIR) return process.env.BANDIT_PROTO_DIR;
  const hasService = (dir) => fs.existsSync(path.join(dir, 'bandit', 'v1', 'service.proto'));
  if (hasService(PACKED_PROTO_DIR)) return PACKED_PROTO_DIR;
  if (hasService(REPOSITORY_PROTO_DIR)) return REPOSITORY_PROTO_DIR;
  throw new Error(`bandit-client: no bandit/v1/service.proto in ${PACKED_PROTO_DIR} (the package's copy) ` +
    `or ${REPOSITORY_PROTO_DIR}; set BANDIT_PROTO_DIR to the directory holding bandit/v1/service.proto`);
}

const LOADER_OPTIONS = { keepCase: false, longs: String, enums: String, defaults: true, oneofs: true };

let cached = null;
/** Loads bandit/v1/service.proto and grpc/health/v1/health.proto (once per proto dir). */
function loadProtos(protoDir = defaultProtoDir()) {
  if (cached && cached.protoDir === protoDir) return cached;
  const def = protoLoader.loadSync(['bandit/v1/service.proto', 'grpc/health/v1/health.proto'],
    { ...LOADER_OPTIONS, includeDirs: [protoDir] });
  const pkg = grpc.loadPackageDefinition(def);
  cached = { protoDir, BanditService: pkg.bandit.v1.BanditService, Health: pkg.grpc.health.v1.Health };
  return cached;
}

const DEFAULT_RETRY = Object.freeze({ maxAttempts: 4, initialBackoffMs: 50, maxBackoffMs: 2000, multiplier: 2 });

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Named features travel as JSON text: objects keep their key order (Vowpal Wabbit's
// self-interactions depend on it); a string is sent as it is.
const jsonText = (v) => (v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v));
const toNamedAction = (a) => ({ id: String(a.id), features: jsonText(a.features) });

const toSlot = (s) => ({
  id: String(s.id),
  features: jsonText(s.features),
  denseFeatures: s.denseFeatures || [],
  excludedActions: (s.excludedActions || []).map(String),
  baselineAction: s.baselineAction === undefined || s.baselineAction === null ? '' : String(s.baselineAction),
});

function toSelectRequest(instance, req = {}) {
  const out = { instance, returnScores: !!req.returnScores };
  if (req.candidates) out.candidates = req.candidates.map((c) => (Array.isArray(c) ? { values: c } : c));
  if (req.x) out.x = req.x;
  if (req.context !== undefined) out.context = jsonText(req.context);
  if (req.actions) out.actions = req.actions.map(toNamedAction);
  if (req.excludedActions) out.excludedActions = req.excludedActions;
  if (req.explain) out.explain = true;
  if (req.eventId) out.eventId = String(req.eventId);
  if (req.slots) out.slots = req.slots.map(toSlot);
  if (req.deferActivation) out.deferActivation = true;
  return out;
}

function toUpdateRequest(instance, req = {}) {
  if (req.eventId !== undefined && req.direct !== undefined)
    throw new TypeError('give either eventId or direct, not both');
  const out = { instance, reward: req.reward ?? 0 };
  for (const k of ['eventId', 'slotId', 'direct', 'embedding', 'fidelity', 'bestExpectedReward', 'expectedReward'])
    if (req[k] !== undefined && req[k] !== null) out[k] = req[k];
  if (out.direct && (out.direct.context !== undefined || out.direct.action !== undefined)) {
    out.direct = { ...out.direct, context: jsonText(out.direct.context) };
    if (req.direct.action) out.direct.action = toNamedAction(req.direct.action);
  }
  return out;
}

/** The typed error of a RoundResponse carrying a refusal (the very code and message the unary
 *  call would have rejected with), or null when the request succeeded. */
function roundError(answer) {
  const s = answer && answer.status;
  return s && s.code ? errors.errorForCode(s.code, s.message) : null;
}

/** A RoundResponse's result (the Decision, UpdateResponse or ActivateResponse); throws the typed
 *  error when the request was refused. */
function roundResult(answer) {
  const error = roundError(answer);
  if (error) throw error;
  return answer.result ? answer[answer.result] : null;
}

/** A RoundRequest from one ({select} | {update} | {activate}). */
function toRoundRequest(request) {
  const kinds = ['select', 'update', 'activate'].filter((k) => request && request[k]);
  if (kinds.length !== 1)
    throw new TypeError('a Rounds stream sends RoundRequests: {select}, {update} or {activate}, exactly one');
  return { [kinds[0]]: request[kinds[0]] };
}

/**
 * A Rounds stream (BanditService.Rounds, docs/api.md): Select, Update and Activate requests on
 * one long-lived call, each answered in the order sent, each refusal in its own answer (the
 * stream goes on). Opened by BanditClient.openRoundStream().
 *
 * select / update / activate send one request and resolve with its answer, or reject with the
 * typed error the unary call would (the stream goes on after it); they reject
 * (FailedPreconditionError) while answers to earlier send*() calls are still to be received.
 * send*() does not wait, so a round's Update and the next round's Select may leave together and
 * their answers be read after: one round trip per round. receive() resolves with the oldest
 * unanswered request's RoundResponse as it came (`status` set when refused; `result` names the
 * field set); receiveResult() unwraps it as select() does.
 *
 * Not retried and without a deadline: a stream that broke (the server restarted or shut down:
 * UnavailableError) is not reopened; open a new one. close() ends it cleanly; cancel() at once.
 */
class RoundStream {
  constructor(call) {
    this._call = call;
    this._answers = [];   // received, not yet taken by receive()
    this._waiters = [];   // receive()s waiting for an answer: {resolve, reject}
    this._sent = 0;       // requests written
    this._taken = 0;      // answers handed out by receive() (or dropped by close())
    this._closed = false;
    this._status = null;  // the stream's own status, once known
    this._readEnded = false;
    this._ended = null;   // settled once the status is known and every answer was delivered
    this._onEnded = [];
    call.on('data', (answer) => {
      const w = this._waiters.shift();
      if (w) { this._taken++; w.resolve(answer); } else this._answers.push(answer);
    });
    // grpc-js emits 'status' right after the end of the read side is pushed, possibly before
    // the last answers reached 'data': the stream counts as ended once both came.
    call.on('end', () => { this._readEnded = true; this._maybeEnded(); });
    call.on('status', (status) => { this._status = status; this._maybeEnded(); });
    call.on('error', () => {});  // the same status comes through 'status'
  }

  /** Requests sent whose answer was not received yet. */
  get unanswered() { return this._sent - this._taken; }

  _maybeEnded() {
    if (this._ended || !this._status || !this._readEnded) return;
    this._ended = { status: this._status };
    const error = this._endedError()
      || new errors.UnavailableError('the Rounds stream ended before answering every request', Status.UNAVAILABLE);
    for (const w of this._waiters.splice(0)) w.reject(error);
    for (const f of this._onEnded.splice(0)) f();
  }

  /** The error of a stream that ended: its own status, or for an OK end with answers still
   *  due, UNAVAILABLE (they were not answered). Null when it ended OK with nothing due. */
  _endedError() {
    const { code, details } = this._ended.status;
    if (code !== Status.OK) return errors.errorForCode(code, details || '');
    if (this.unanswered > this._answers.length)
      return new errors.UnavailableError('the Rounds stream ended before answering every request', Status.UNAVAILABLE);
    return null;
  }

  /**
   * Sends a RoundRequest ({select: SelectRequest} | {update: ...} | {activate: ...}, the unary
   * calls' request objects) without waiting for its answer. Throws the stream's typed error if
   * it ended, FailedPreconditionError once closed.
   */
  send(request) {
    const round = toRoundRequest(request);
    if (this._closed) throw new errors.FailedPreconditionError('the Rounds stream was closed');
    if (this._ended) throw this._endedError() || new errors.UnavailableError('the Rounds stream ended');
    this._sent++;  // counted before it leaves: its answer may come back at once
    this._call.write(round);
  }
  /** Sends a Select: the request of client.select(instance, req). */
  sendSelect(instance, req) { this.send({ select: toSelectRequest(instance, req) }); }
  /** Sends an Update: the request of client.update(instance, req). */
  sendUpdate(instance, req) { this.send({ update: toUpdateRequest(instance, req) }); }
  sendActivate(instance, eventId) { this.send({ activate: { instance, eventId: String(eventId) } }); }

  /** The RoundResponse to the oldest request sent and not yet answered; rejects with the
   *  stream's typed error if it ended first. */
  receive() {
    if (this.unanswered - this._waiters.length === 0)
      return Promise.reject(new errors.FailedPreconditionError('no request of this Rounds stream awaits its answer'));
    if (this._answers.length > 0) { this._taken++; return Promise.resolve(this._answers.shift()); }
    if (this._ended) return Promise.reject(this._endedError());
    return new Promise((resolve, reject) => this._waiters.push({ resolve, reject }));
  }
  /** receive() unwrapped: the Decision, UpdateResponse or ActivateResponse, or the typed error
   *  of the request's refusal. */
  async receiveResult() { return roundResult(await this.receive()); }

  async _one(round) {
    if (this.unanswered > 0)
      throw new errors.FailedPreconditionError('answers to earlier requests of this Rounds stream are still to be received');
    this.send(round);
    return this.receiveResult();
  }
  /** A Decision, as client.select(instance, req). */
  select(instance, req) { return this._one({ select: toSelectRequest(instance, req) }); }
  /** An UpdateResponse, as client.update(instance, req). */
  update(instance, req) { return this._one({ update: toUpdateRequest(instance, req) }); }
  activate(instance, eventId) { return this._one({ activate: { instance, eventId: String(eventId) } }); }

  /**
   * Closes the sending side, drops the answers still due, and resolves once the server ended
   * the stream; rejects with its typed error unless it answered everything.
   */
  async close() {
    if (!this._closed) {
      this._closed = true;
      if (!this._ended) this._call.end();
    }
    if (!this._ended) await new Promise((resolve) => this._onEnded.push(resolve));
    const error = this._endedError();
    this._taken += this._answers.length;  // dropped
    this._answers = [];
    if (error) throw error;
  }

  /** Ends the stream at once; requests without an answer may or may not have been served. */
  cancel() {
    this._closed = true;
    this._call.cancel();
  }
}
// `await using rounds = client.openRoundStream()` closes it at the end of the block, where the
// runtime has explicit resource management.
if (Symbol.asyncDispose) RoundStream.prototype[Symbol.asyncDispose] = function dispose() { return this.close(); };

class BanditClient {
  /**
   * @param {string} target "host:port"
   * @param {object} [options]
   * @param {number|null} [options.timeoutMs=5000] default deadline per call (covers retries); null = none
   * @param {object|null} [options.retry] {maxAttempts, initialBackoffMs, maxBackoffMs, multiplier}; null = no retries
   * @param {import('@grpc/grpc-js').ChannelCredentials} [options.credentials] default: insecure
   * @param {object} [options.channelOptions] grpc-js client/channel options (e.g. interceptors)
   * @param {string} [options.protoDir] where proto/ is
   */
  constructor(target, options = {}) {
    const { BanditService, Health } = loadProtos(options.protoDir);
    const creds = options.credentials || grpc.credentials.createInsecure();
    this.timeoutMs = options.timeoutMs === undefined ? 5000 : options.timeoutMs;
    this.retry = options.retry === null ? { ...DEFAULT_RETRY, maxAttempts: 1 }
      : { ...DEFAULT_RETRY, ...(options.retry || {}) };
    if (!(this.retry.maxAttempts >= 1)) throw new RangeError('retry.maxAttempts must be >= 1');
    this._stub = new BanditService(target, creds, options.channelOptions || {});
    // The health stub shares the channel of the service stub.
    this._health = new Health(target, creds, { ...(options.channelOptions || {}), channelOverride: this._stub.getChannel() });
  }

  /** Closes the channel. */
  close() {
    this._stub.close();
  }

  /**
   * The retry / deadline / error-mapping core. A loop rather than gRPC's service-config
   * retryPolicy, which cannot keep what this client promises: a retry policy per call
   * (opts.retry), which a channel's service config cannot vary; every error carrying the
   * attempts made and a deadline error naming the last attempt's status (gRPC's retries are
   * invisible above the channel, interceptors included).
   * @param {string} method
   * @param {object} request
   * @param {{timeoutMs?: number|null, deadline?: Date|number, retry?: object}} [opts]
   */
  async _call(method, request, opts = {}, stub = this._stub) {
    const policy = opts.retry ? { ...this.retry, ...opts.retry } : this.retry;
    let deadline = null;
    if (opts.deadline !== undefined) deadline = +opts.deadline;
    else {
      const t = opts.timeoutMs === undefined ? this.timeoutMs : opts.timeoutMs;
      if (t !== null && t !== undefined) deadline = Date.now() + t;
    }
    let last = ''; // the previous attempt's UNAVAILABLE, if any
    for (let attempt = 1; ; attempt++) {
      if (deadline !== null && deadline - Date.now() <= 0) // never send a call that is already late
        throw new errors.DeadlineExceededError(`deadline passed before attempt ${attempt} was sent${last}`,
          Status.DEADLINE_EXCEEDED, attempt - 1);
      try {
        return await new Promise((resolve, reject) => {
          const callOpts = deadline === null ? {} : { deadline: new Date(deadline) };
          // The instance as the routing header x-bandit-instance: a proxy in front of a
          // cluster (HAProxy: balance hdr(x-bandit-instance)) keeps one instance on one node.
          const key = routingKey(request);
          const md = new grpc.Metadata();
          if (key) md.set(ROUTING_HEADER, key);
          stub[method](request, md, callOpts, (err, resp) => (err ? reject(err) : resolve(resp)));
        });
      } catch (err) {
        const code = typeof err.code === 'number' ? err.code : Status.UNKNOWN;
        const details = err.details || err.message || String(err);
        // CANCELLED too: this client never cancels its own calls, so a CANCELLED is the
        // server's, which cancels the calls it had not started when it begins shutting down.
        if ((code !== Status.UNAVAILABLE && code !== Status.CANCELLED) || attempt >= policy.maxAttempts)
          throw errors.errorForCode(code, code === Status.DEADLINE_EXCEEDED ? details + last : details, attempt);
        const base = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.multiplier ** (attempt - 1));
        const pause = base * (0.8 + 0.4 * Math.random());
        if (deadline !== null && Date.now() + pause >= deadline)
          throw new errors.DeadlineExceededError(
            `deadline reached while retrying; last attempt: ${code === Status.CANCELLED ? 'CANCELLED' : 'UNAVAILABLE'}: ${details}`,
            Status.DEADLINE_EXCEEDED, attempt);
        last = `; last attempt: ${code === Status.CANCELLED ? 'CANCELLED' : 'UNAVAILABLE'}: ${details}`;
        await sleep(pause);
      }
    }
  }

  // ---- lifecycle ----
  /** @param {string} name @param {object} [config] InstanceConfig, e.g. {policy: {linucb: {dimension: 3}}} */
  createInstance(name, config = {}, opts) { return this._call('CreateInstance', { name, config }, opts); }
  getInstance(name, opts) { return this._call('GetInstance', { name }, opts); }
  /** One page: {instances, nextPageToken}. */
  listInstances({ pageSize = 0, pageToken = '' } = {}, opts) {
    return this._call('ListInstances', { pageSize, pageToken }, opts);
  }
  /** Every instance, following nextPageToken. */
  async *instances({ pageSize = 0 } = {}, opts) {
    let pageToken = '';
    do {
      const page = await this.listInstances({ pageSize, pageToken }, opts);
      yield* page.instances;
      pageToken = page.nextPageToken;
    } while (pageToken);
  }
  async deleteInstance(name, opts) { await this._call('DeleteInstance', { name }, opts); }
  resetInstance(name, opts) { return this._call('ResetInstance', { name }, opts); }
  /** @param {Array<string|{id?: string, features?: number[]}>} arms */
  addArms(name, arms, opts) {
    return this._call('AddArms', { name, arms: arms.map((a) => (typeof a === 'string' ? { id: a } : a)) }, opts);
  }
  removeArms(name, armIds, opts) { return this._call('RemoveArms', { name, armIds }, opts); }
  /**
   * Mixture (FD/KD) instances: replace the reference distribution, keeping what was learned.
   * ref: {embeddings: number[][], append?: boolean} or {mean: number[], covariance: number[]} (row-major).
   */
  setMixtureReference(name, ref, opts) {
    const req = { name, append: !!ref.append, mean: ref.mean || [], covariance: ref.covariance || [],
      embeddings: (ref.embeddings || []).map((values) => ({ values })) };
    return this._call('SetMixtureReference', req, opts);
  }

  /**
   * Changes the settings that may change live, keeping what was learned. settings: any of
   * {rewardWaitMs, onExpiry: 'APPLY_DEFAULT'|'DROP', defaultReward, rewardAggregation:
   * 'EARLIEST'|'SUM', epsilon, learningMode: 'ONLINE'|'APPRENTICE'|'LOGGING_ONLY'}.
   */
  configureInstance(name, settings, opts) {
    return this._call('ConfigureInstance', { ...settings, name }, opts);
  }

  // ---- shadow policies ----
  /** config: a ShadowConfig object, e.g. {policy: {ucb1: {}}, seed: 7} */
  addShadow(name, shadow, config, opts) { return this._call('AddShadow', { name, shadow, config }, opts); }
  removeShadow(name, shadow, opts) { return this._call('RemoveShadow', { name, shadow }, opts); }
  /** Makes the shadow the served policy, keeping what it learned (the served policy is dropped). */
  promoteShadow(name, shadow, opts) { return this._call('PromoteShadow', { name, shadow }, opts); }

  // ---- decisions and rewards ----
  /** A Decision. req: {candidates?: number[][], x?: number[], returnScores?: boolean} or, named,
   *  {context?: object, actions: [{id, features?: object}], excludedActions?: string[]} */
  select(instance, req, opts) { return this._call('Select', toSelectRequest(instance, req), opts); }
  /** req: {eventId | direct: {armId|features|x}, reward, embedding?, fidelity?, bestExpectedReward?, expectedReward?} */
  update(instance, req, opts) { return this._call('Update', toUpdateRequest(instance, req), opts); }
  /** Activates a decision made with deferActivation: from now on it is learned from. */
  activate(instance, eventId, opts) { return this._call('Activate', { instance, eventId: String(eventId) }, opts); }

  /** items: [{instance, candidates?, x?, returnScores?}] -> [{ok: true, value} | {ok: false, error}] */
  async selectBatch(items, opts) {
    const requests = items.map((it) => toSelectRequest(it.instance, it));
    const resp = await this._call('SelectBatch', { requests }, opts);
    return resp.statuses.map((s, i) => (s.code === 0 ? { ok: true, value: resp.decisions[i] }
      : { ok: false, error: errors.errorForCode(s.code, s.message) }));
  }
  /** items: [{instance, eventId | direct, reward, ...}] -> [{ok: true, value} | {ok: false, error}] */
  async updateBatch(items, opts) {
    const requests = items.map((it) => toUpdateRequest(it.instance, it));
    const resp = await this._call('UpdateBatch', { requests }, opts);
    return resp.statuses.map((s, i) => (s.code === 0 ? { ok: true, value: resp.responses[i] }
      : { ok: false, error: errors.errorForCode(s.code, s.message) }));
  }

  /**
   * A RoundStream (BanditService.Rounds): Select, Update and Activate on one stream, each served
   * as its unary call and answered in order. `instance`, if given, is sent as the routing header
   * x-bandit-instance (a proxy in front of a cluster then sends the stream to that instance's
   * node; each request is routed on its own either way). No deadline, no retries.
   */
  openRoundStream(instance) {
    const md = new grpc.Metadata();
    if (instance) md.set(ROUTING_HEADER, String(instance));
    return new RoundStream(this._stub.Rounds(md, {}));
  }

  // ---- health ----
  /** grpc.health.v1 status: 'SERVING', 'NOT_SERVING', ... */
  async health(service = '', opts) {
    const resp = await this._call('Check', { service }, opts, this._health);
    return resp.status;
  }
}

// Listed one by one (shorthand) so that ESM `import { NotFoundError } from '.../index.js'` sees
// the names (Node's CommonJS export detection is static).
const {
  BanditError, InvalidArgumentError, NotFoundError, AlreadyExistsError, FailedPreconditionError,
  ResourceExhaustedError, UnavailableError, DeadlineExceededError, PermissionDeniedError,
  UnauthenticatedError, CancelledError, InternalError, UnimplementedError, errorForCode,
} = errors;
/** The client's version: the same as the server it ships with (package.json). */
const version = require('../package.json').version;

module.exports = {
  version, BanditClient, RoundStream, roundError, roundResult, loadProtos, defaultProtoDir, DEFAULT_RETRY, Status,
  BanditError, InvalidArgumentError, NotFoundError, AlreadyExistsError, FailedPreconditionError,
  ResourceExhaustedError, UnavailableError, DeadlineExceededError, PermissionDeniedError,
  UnauthenticatedError, CancelledError, InternalError, UnimplementedError, errorForCode,
};
