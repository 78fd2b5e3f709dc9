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
  version, BanditClient, loadProtos, defaultProtoDir, DEFAULT_RETRY, Status,
  BanditError, InvalidArgumentError, NotFoundError, AlreadyExistsError, FailedPreconditionError,
  ResourceExhaustedError, UnavailableError, DeadlineExceededError, PermissionDeniedError,
  UnauthenticatedError, CancelledError, InternalError, UnimplementedError, errorForCode,
};
