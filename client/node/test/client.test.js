'use strict';
// bandit-client against a real banditd on port 0: lifecycle, contextual select/update with an
// event id, batches, typed errors per status code, deadlines, and retries for UNAVAILABLE only.
// Run: BANDITD=build/bin/banditd node --test client/node/test/
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const { startServer, unusedPort } = require('./server_process');
const {
  BanditClient, BanditError, NotFoundError, InvalidArgumentError, AlreadyExistsError,
  FailedPreconditionError, DeadlineExceededError, UnavailableError, Status, errorForCode,
  loadProtos, CancelledError, roundError, roundResult,
} = require('../src');

const LINUCB = { policy: { linucb: { dimension: 3 } } };
const CANDIDATES = [[1, 0, 0], [0, 1, 0], [0, 0, 1]];

/** A grpc-js interceptor that records every attempt that leaves the client. */
function counter() {
  const c = { calls: {}, deadlines: [] };
  c.interceptor = (options, nextCall) => {
    const m = options.method_definition.path;
    c.calls[m] = (c.calls[m] || 0) + 1;
    c.deadlines.push(options.deadline);
    return new grpc.InterceptingCall(nextCall(options));
  };
  return c;
}

describe('BanditClient against a live banditd', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = new BanditClient(server.target, { timeoutMs: 10000 });
  });
  after(async () => {
    client.close();
    await server.stop();
  });

  it('reports health', async () => {
    assert.equal(await client.health(), 'SERVING');
  });

  it('runs the instance lifecycle', async () => {
    const inst = await client.createInstance('life-a', LINUCB);
    assert.equal(inst.name, 'life-a');
    assert.equal(inst.config.policy.linucb.dimension, 3);
    const b = await client.createInstance('life-b',
      { policy: { epsilonGreedy: { epsilon: 0.1 }, numArms: 4 }, seed: '18446744073709551557' });
    assert.deepEqual(b.armIds, ['0', '1', '2', '3']);
    assert.equal(b.config.seed, '18446744073709551557'); // uint64 survives (int64 as strings)
    const got = await client.getInstance('life-a');
    assert.equal(got.stats.rounds, '0');
    assert.ok(Number(got.stats.stateBytes) > 0);

    const page = await client.listInstances({ pageSize: 1 });
    assert.equal(page.instances.length, 1);
    assert.notEqual(page.nextPageToken, '');
    const names = [];
    for await (const i of client.instances({ pageSize: 1 })) names.push(i.name);
    assert.ok(names.includes('life-a') && names.includes('life-b'), names.join());

    const reset = await client.resetInstance('life-b');
    assert.equal(reset.stats.rounds, '0');
    await client.deleteInstance('life-a');
    await client.deleteInstance('life-b');
    await assert.rejects(client.getInstance('life-a'), NotFoundError);
    const after = [];
    for await (const i of client.instances()) after.push(i.name);
    assert.ok(!after.includes('life-a') && !after.includes('life-b'));
  });

  it('replaces a mixture reference', async () => {
    await client.createInstance('gen', { policy: { mixture: { objective: 'FD', numArms: 2, dimension: 2,
      referenceMean: [0, 0], referenceCovariance: [1, 0, 0, 1] } } });
    let inst = await client.setMixtureReference('gen', { embeddings: [[0.5, 1], [-1, 2]] });
    assert.deepEqual(inst.config.policy.mixture.referenceSamples, [0.5, 1, -1, 2]);
    inst = await client.setMixtureReference('gen', { embeddings: [[3, 0.25]], append: true });
    assert.equal(inst.config.policy.mixture.referenceSamples.length, 6);
    inst = await client.setMixtureReference('gen', { mean: [1, -1], covariance: [2, 0.5, 0.5, 1] });
    assert.deepEqual(inst.config.policy.mixture.referenceMean, [1, -1]);
    await assert.rejects(client.setMixtureReference('gen', { mean: [0, 0], covariance: [1, 3, 3, 1] }),
      InvalidArgumentError);
    await client.deleteInstance('gen');
  });

  it('changes live settings and the learning mode', async () => {
    await client.createInstance('modes', { policy: { epsilonGreedy: { epsilon: 0.3 }, numArms: 3 } });
    let inst = await client.configureInstance('modes',
      { learningMode: 'APPRENTICE', rewardWaitMs: 60000, epsilon: 0.1 });
    assert.equal(inst.config.learningMode, 'APPRENTICE');
    assert.equal(Number(inst.config.pending.rewardWaitMs), 60000);
    assert.equal(inst.config.policy.epsilonGreedy.epsilon, 0.1);
    const d = await client.select('modes');
    assert.equal(d.armId, '0');  // the baseline
    assert.equal(d.propensity, 1);
    await client.update('modes', { eventId: d.eventId, reward: 1 });
    inst = await client.getInstance('modes');
    assert.equal(Number(inst.apprentice.events), 1);
    await assert.rejects(client.configureInstance('modes', { epsilon: 2 }), InvalidArgumentError);
    await client.deleteInstance('modes');
  });

  it('selects and updates a contextual policy with an event id', async () => {
    await client.createInstance('ctx', { ...LINUCB, seed: 3 });
    const d = await client.select('ctx', { candidates: CANDIDATES, returnScores: true });
    assert.ok(d.eventId);
    assert.ok([0, 1, 2].includes(d.armIndex));
    assert.equal(d.scores.length, 3);
    assert.equal(d.scoreKind, 'UPPER_CONFIDENCE_BOUND');
    assert.equal(d.propensity, 1);
    assert.ok(Number(d.expiresAtMs) > Date.now());
    const u = await client.update('ctx', { eventId: d.eventId, reward: 1 });
    assert.equal(u.updates, '1');
    await assert.rejects(client.update('ctx', { eventId: d.eventId, reward: 1 }), FailedPreconditionError);
    const s = (await client.getInstance('ctx')).stats;
    assert.deepEqual([s.rounds, s.updates, s.pending, s.rejectedRewards], ['1', '1', '0', '1']);

    // Learning over the wire: reward = candidate . theta, theta = (0.1, 0.9, 0.3); after a short
    // warm-up LinUCB picks candidate 1 nearly always.
    const theta = [0.1, 0.9, 0.3];
    const picks = [];
    for (let t = 0; t < 120; t++) {
      const dd = await client.select('ctx', { candidates: CANDIDATES });
      const reward = CANDIDATES[dd.armIndex].reduce((acc, v, k) => acc + v * theta[k], 0);
      await client.update('ctx', { eventId: dd.eventId, reward });
      picks.push(dd.armIndex);
    }
    assert.ok(picks.slice(-60).filter((p) => p === 1).length >= 55, picks.join());
    assert.equal((await client.getInstance('ctx')).stats.updates, '121');

    const direct = await client.update('ctx', { direct: { features: [1, 0, 0] }, reward: 0.5 });
    assert.equal(direct.updates, '122');
  });

  it('decides over named features and action ids', async () => {
    await client.createInstance('named', {
      policy: { linucb: { alpha: 0.3 } }, featureSpace: { bits: 8, interactions: ['UA'] }, seed: 3 });
    const actions = ['news', 'sports', 'music'].map((g) => ({ id: g, features: { Action: { genre: g } } }));
    const best = { US: 'sports', DE: 'music', IN: 'news' };
    const hits = [];
    for (let t = 0; t < 240; t++) {
      const country = ['US', 'DE', 'IN'][t % 3];
      const d = await client.select('named', { context: { User: { country } }, actions, returnScores: t % 10 === 0 });
      assert.equal(actions[d.armIndex].id, d.actionId);
      if (t % 10 === 0) assert.deepEqual([d.ranking.length, d.ranking[0].id], [3, d.actionId]);
      await client.update('named', { eventId: d.eventId, reward: d.actionId === best[country] ? 1 : 0 });
      hits.push(d.actionId === best[country]);
    }
    assert.ok(hits.slice(-60).filter(Boolean).length >= 50, hits.join());
    const d = await client.select('named', { context: { User: { country: 'US' } }, actions, excludedActions: ['sports'] });
    assert.notEqual(d.actionId, 'sports');
    const u = await client.update('named', { direct: { context: { User: { country: 'US' } }, action: actions[1] }, reward: 1 });
    assert.equal(u.updates, '241');
    await assert.rejects(client.select('named', { context: '{"User":', actions }), InvalidArgumentError);
  });

  it('fills several slots, rewards each, and activates a deferred decision', async () => {
    await client.createInstance('slots', {
      policy: { linucb: { alpha: 0.3 } }, featureSpace: { bits: 8, interactions: ['UA'] }, seed: 3 });
    const actions = ['news', 'sports', 'music'].map((g) => ({ id: g, features: { Action: { genre: g } } }));
    const d = await client.select('slots', {
      context: { User: { country: 'DE' } }, actions, eventId: 'page-1', deferActivation: true,
      slots: [{ id: 'hero', features: { Slot: { size: 'large' } } }, { id: 'tile', excludedActions: ['news'] }],
    });
    assert.equal(d.eventId, 'page-1');
    assert.deepEqual(d.slots.map((s) => s.slotId), ['hero', 'tile']);
    assert.notEqual(d.slots[0].actionId, d.slots[1].actionId);
    assert.notEqual(d.slots[1].actionId, 'news');
    await client.update('slots', { eventId: 'page-1', slotId: 'hero', reward: 1 });
    assert.equal((await client.getInstance('slots')).stats.updates, '0'); // kept until activated
    await client.activate('slots', 'page-1');
    assert.equal((await client.getInstance('slots')).stats.updates, '1');
    await assert.rejects(client.update('slots', { eventId: 'page-1', slotId: 'footer', reward: 1 }),
      InvalidArgumentError);
  });

  it('returns per-item statuses from batch calls', async () => {
    await client.createInstance('batch', LINUCB);
    const items = await client.selectBatch([
      { instance: 'batch', candidates: CANDIDATES },
      { instance: 'batch-missing', candidates: CANDIDATES },
      { instance: 'batch', candidates: [[1, 2]] }, // wrong dimension
      { instance: 'batch', candidates: [[0, 0, 1]] },
    ]);
    assert.deepEqual(items.map((i) => i.ok), [true, false, false, true]);
    assert.ok(items[1].error instanceof NotFoundError);
    assert.ok(items[2].error instanceof InvalidArgumentError);
    assert.match(items[2].error.details, /3/); // names the expected dimension
    assert.equal(items[3].value.armIndex, 0);
    const e0 = items[0].value.eventId;
    const e3 = items[3].value.eventId;
    assert.notEqual(e0, e3);

    const ups = await client.updateBatch([
      { instance: 'batch', eventId: e0, reward: 1 },
      { instance: 'batch', eventId: e0, reward: 1 }, // duplicate
      { instance: 'batch', eventId: 'no-such-event', reward: 1 },
      { instance: 'batch', eventId: e3, reward: NaN },
      { instance: 'batch', eventId: e3, reward: 0 },
    ]);
    assert.deepEqual(ups.map((u) => (u.ok ? 'ok' : u.error.constructor.name)),
      ['ok', 'FailedPreconditionError', 'NotFoundError', 'InvalidArgumentError', 'ok']);
    assert.equal(ups[0].value.updates, '1');
    assert.equal(ups[4].value.updates, '2');
  });

  it('maps each error code to its typed error', async () => {
    await client.createInstance('errs', LINUCB);
    const cases = [
      [NotFoundError, Status.NOT_FOUND, () => client.select('errs-nope', { candidates: CANDIDATES })],
      [InvalidArgumentError, Status.INVALID_ARGUMENT, () => client.select('errs', { candidates: [[1, 2]] })],
      [InvalidArgumentError, Status.INVALID_ARGUMENT, () => client.createInstance('bad name!', LINUCB)],
      [AlreadyExistsError, Status.ALREADY_EXISTS, () => client.createInstance('errs', LINUCB)],
    ];
    for (const [cls, code, call] of cases) {
      const err = await call().then(() => null, (e) => e);
      assert.ok(err instanceof cls, `${cls.name}: got ${err}`);
      assert.ok(err instanceof BanditError && err instanceof Error);
      assert.equal(err.code, code);
      assert.ok(err.details.length > 0);
      assert.equal(err.attempts, 1);
    }
    const d = await client.select('errs', { candidates: CANDIDATES });
    await client.update('errs', { eventId: d.eventId, reward: 0 });
    const err = await client.update('errs', { eventId: d.eventId, reward: 0 }).then(() => null, (e) => e);
    assert.ok(err instanceof FailedPreconditionError);
    assert.equal(err.code, Status.FAILED_PRECONDITION);
    assert.equal(err.codeName, 'FAILED_PRECONDITION');
    assert.ok(err.details.includes(d.eventId));
    // Unmapped codes still give a BanditError with the code.
    const other = errorForCode(Status.DATA_LOSS, 'x');
    assert.ok(other instanceof BanditError);
    assert.equal(other.codeName, 'DATA_LOSS');
  });

  it('honours deadlines', async () => {
    await client.createInstance('dl', LINUCB);
    // Already past: not sent at all.
    for (const opts of [{ timeoutMs: 0 }, { deadline: new Date(Date.now() - 1000) }]) {
      const err = await client.select('dl', { candidates: CANDIDATES }, opts).then(() => null, (e) => e);
      assert.ok(err instanceof DeadlineExceededError, String(err));
      assert.equal(err.code, Status.DEADLINE_EXCEEDED);
      assert.equal(err.attempts, 0);
    }
    assert.equal((await client.getInstance('dl')).stats.rounds, '0');
    // 1 microsecond: handed to grpc-js with a Date deadline (ms resolution) that has already
    // passed, so grpc-js itself ends it with DEADLINE_EXCEEDED (or the client does, if the ms
    // ticked). As with any deadline, the server may or may not have seen the request.
    await assert.rejects(client.select('dl', { candidates: CANDIDATES }, { timeoutMs: 0.001 }),
      DeadlineExceededError);
    const roundsBefore = Number((await client.getInstance('dl')).stats.rounds);
    assert.ok(roundsBefore <= 1);
    // A client-wide default deadline applies too.
    const hurried = new BanditClient(server.target, { timeoutMs: 0 });
    await assert.rejects(hurried.getInstance('dl'), DeadlineExceededError);
    hurried.close();
    // Each attempt carries the deadline to grpc-js. (On an instance of its own: the 1 us call
    // above may still reach the server after roundsBefore was read, so 'dl' cannot be counted.)
    await client.createInstance('dl-watched', LINUCB);
    const c = counter();
    const watched = new BanditClient(server.target, { timeoutMs: 7500, channelOptions: { interceptors: [c.interceptor] } });
    const before = Date.now();
    await watched.select('dl-watched', { candidates: CANDIDATES });
    watched.close();
    assert.equal(c.deadlines.length, 1);
    const dl = +c.deadlines[0];
    assert.ok(dl >= before + 7500 - 1 && dl <= Date.now() + 7500, `${dl - before}`);
    assert.equal(Number((await client.getInstance('dl-watched')).stats.rounds), 1);
    assert.ok(Number((await client.getInstance('dl')).stats.rounds) <= 1);
  });

  it('runs the example', () => {
    const out = spawnSync(process.execPath, [path.join(__dirname, '..', 'examples', 'logistic_loop.js'),
      '--target', server.target, '--instance', 'example-test', '--rounds', '60', '--report_every', '30'],
    { encoding: 'utf8', timeout: 60000 });
    assert.equal(out.status, 0, out.stderr);
    const rows = out.stdout.trim().split('\n').slice(1).map((l) => l.trim().split(/\s+/));
    assert.deepEqual(rows.map((r) => r[0]), ['30', '60']);
    // The server summed the same gaps as the example.
    assert.ok(Math.abs(Number(rows[1][1]) - Number(rows[1][3])) < 0.01, rows.join(' | '));
  });

  it('does not retry INVALID_ARGUMENT', async () => {
    const c = counter();
    const cl = new BanditClient(server.target, {
      retry: { maxAttempts: 5, initialBackoffMs: 10 }, channelOptions: { interceptors: [c.interceptor] },
    });
    const err = await cl.createInstance('', LINUCB).then(() => null, (e) => e);
    cl.close();
    assert.ok(err instanceof InvalidArgumentError);
    assert.equal(err.attempts, 1);
    assert.deepEqual(c.calls, { '/bandit.v1.BanditService/CreateInstance': 1 });
  });
});

describe('BanditClient against a server that is not running', () => {
  it('retries UNAVAILABLE, then gives up with a typed UnavailableError', async () => {
    const c = counter();
    const cl = new BanditClient(`127.0.0.1:${await unusedPort()}`, {
      timeoutMs: 10000, retry: { maxAttempts: 3, initialBackoffMs: 10, maxBackoffMs: 50 },
      channelOptions: { interceptors: [c.interceptor] },
    });
    const err = await cl.getInstance('anything').then(() => null, (e) => e);
    assert.ok(err instanceof UnavailableError, String(err));
    assert.equal(err.code, Status.UNAVAILABLE);
    assert.equal(err.attempts, 3);
    assert.deepEqual(c.calls, { '/bandit.v1.BanditService/GetInstance': 3 });
    // retry: null = exactly one attempt
    const single = new BanditClient(`127.0.0.1:${await unusedPort()}`, { retry: null });
    const e1 = await single.health().then(() => null, (e) => e);
    assert.ok(e1 instanceof UnavailableError);
    assert.equal(e1.attempts, 1);
    single.close();
    cl.close();
  });

  it("retries a server's CANCELLED (a node shutting down cancels calls it had not started)", async () => {
    const { BanditService } = loadProtos();
    let calls = 0;
    const stand = new grpc.Server();
    stand.addService(BanditService.service, {
      GetInstance: (call, cb) => {
        calls += 1;
        if (calls === 1) cb({ code: Status.CANCELLED, details: 'server shutting down' });
        else cb(null, { name: call.request.name });
      },
    });
    const port = await new Promise((resolve, reject) => stand.bindAsync('127.0.0.1:0',
      grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    stand.start();
    const cl = new BanditClient(`127.0.0.1:${port}`, { retry: { maxAttempts: 3, initialBackoffMs: 10 } });
    assert.equal((await cl.getInstance('x')).name, 'x');
    assert.equal(calls, 2);
    calls = 0;
    const single = new BanditClient(`127.0.0.1:${port}`, { retry: null });
    const err = await single.getInstance('x').then(() => null, (e) => e);
    assert.equal(err.code, Status.CANCELLED);
    cl.close();
    single.close();
    stand.forceShutdown();
  });

  it('stops retrying when the deadline is reached', async () => {
    const c = counter();
    const cl = new BanditClient(`127.0.0.1:${await unusedPort()}`, {
      timeoutMs: 300, retry: { maxAttempts: 1000, initialBackoffMs: 20, maxBackoffMs: 20 },
      channelOptions: { interceptors: [c.interceptor] },
    });
    const err = await cl.getInstance('anything').then(() => null, (e) => e);
    cl.close();
    assert.ok(err instanceof DeadlineExceededError, String(err));
    assert.match(err.details, /UNAVAILABLE/);
    const attempts = c.calls['/bandit.v1.BanditService/GetInstance'];
    assert.equal(err.attempts, attempts);
    assert.ok(attempts > 1 && attempts < 1000, String(attempts));
    // Every attempt carried the same overall deadline.
    assert.equal(new Set(c.deadlines.map((d) => +d)).size, 1);
  });

  it('validates the retry policy', () => {
    assert.throws(() => new BanditClient('127.0.0.1:1', { retry: { maxAttempts: 0 } }), RangeError);
  });
});

// RoundStream checked against the unary calls: the same decisions and learned scores on a seeded
// instance, answers in the order sent while pipelined, a refusal answered in place with the
// unary call's exact status code while the stream goes on, the routing header, close and cancel.
describe('RoundStream against a live banditd', () => {
  // Randomized (epsilon) and contextual: equal decisions need the same seeded engine and the
  // same learned weights on both sides.
  const EPSILON_GLM = { policy: { glmEpsilonGreedy: { dimension: 3, link: 'GAUSSIAN', epsilon: 0.3 } }, seed: 11 };
  const ARMS = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.5, 0.5, 0]];
  // A fixed reward table (arm 1 best, with a period-3 wobble): the same on both paths.
  const rewardOf = (arm, t) => [0.2, 0.9, 0.4, 0.6][arm] - 0.1 * (t % 3);
  // The numeric code a unary call rejects with (null when it succeeds).
  const codeOf = (call) => call().then(() => null, (e) => e.code);
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = new BanditClient(server.target, { timeoutMs: 10000 });
  });
  after(async () => {
    client.close();
    await server.stop();
  });

  it('decides and learns as the unary calls do', async () => {
    await client.createInstance('r-unary', EPSILON_GLM);
    await client.createInstance('r-stream', EPSILON_GLM);
    const rounds = 40;
    const byUnary = [];
    const updatesUnary = [];
    for (let t = 0; t < rounds; t++) {
      const d = await client.select('r-unary', { candidates: ARMS, returnScores: true });
      byUnary.push(d);
      updatesUnary.push((await client.update('r-unary', { eventId: d.eventId, reward: rewardOf(d.armIndex, t) })).updates);
    }
    // The stream the way it pays: a round's Update leaves with the next round's Select.
    const byStream = [];
    const updatesStream = [];
    const rs = client.openRoundStream('r-stream');
    let d = await rs.select('r-stream', { candidates: ARMS, returnScores: true });
    for (let t = 0; t < rounds; t++) {
      byStream.push(d);
      rs.sendUpdate('r-stream', { eventId: d.eventId, reward: rewardOf(d.armIndex, t) });
      if (t + 1 < rounds) rs.sendSelect('r-stream', { candidates: ARMS, returnScores: true });
      assert.equal(rs.unanswered, t + 1 < rounds ? 2 : 1);
      updatesStream.push((await rs.receiveResult()).updates);
      if (t + 1 < rounds) d = await rs.receiveResult();
    }
    await rs.close();
    assert.equal(rs.unanswered, 0);

    const pick = (ds) => ds.map((x) => [x.armIndex, x.propensity, x.scores]);
    assert.deepEqual(pick(byStream), pick(byUnary));
    assert.deepEqual(updatesStream, updatesUnary);
    assert.deepEqual(updatesUnary, Array.from({ length: rounds }, (_, i) => String(i + 1)));
    // Not a trivial sequence: exploration and learning both showed.
    assert.ok(new Set(byUnary.map((x) => x.armIndex)).size > 1);
    assert.ok(byUnary.some((x) => x.propensity < 1));
    // What both learned: equal counts, and equal scores of a fresh context.
    for (const n of ['r-unary', 'r-stream']) {
      const st = (await client.getInstance(n)).stats;
      assert.deepEqual([st.rounds, st.updates], [String(rounds), String(rounds)]);
    }
    const probe = [[0.3, 0.1, 0.7], [0.9, 0.2, 0.1]];
    const sa = await client.select('r-unary', { candidates: probe, returnScores: true });
    const sb = await client.select('r-stream', { candidates: probe, returnScores: true });
    assert.deepEqual([sb.armIndex, sb.propensity, sb.scores], [sa.armIndex, sa.propensity, sa.scores]);
  });

  it('answers pipelined requests in the order sent', async () => {
    await client.createInstance('r-order', { ...LINUCB, seed: 5 });
    const rs = client.openRoundStream('r-order');
    // Every Select and its Update sent before any answer is read: each Update names the event
    // of the Select sent just before it (served in order, so it is pending).
    for (let i = 0; i < 20; i++) {
      rs.sendSelect('r-order', { candidates: CANDIDATES, eventId: `ev-${i}` });
      rs.sendUpdate('r-order', { eventId: `ev-${i}`, reward: i % 2 });
    }
    rs.send({ activate: { instance: 'r-order', eventId: 'ev-0' } }); // rewarded already
    rs.sendSelect('r-order', { candidates: CANDIDATES, eventId: 'later', deferActivation: true });
    rs.sendActivate('r-order', 'later');
    assert.equal(rs.unanswered, 43);
    for (let i = 0; i < 20; i++) {
      const a = await rs.receive();
      assert.equal(a.result, 'decision');
      assert.equal(a.decision.eventId, `ev-${i}`);
      const u = await rs.receive();
      assert.equal(u.result, 'update');
      assert.equal(u.update.updates, String(i + 1)); // the instance's total
    }
    const refused = await rs.receive();
    // The unary Activate of the same event answers the same code.
    const unary = await codeOf(() => client.activate('r-order', 'ev-0'));
    assert.notEqual(unary, null);
    assert.equal(roundError(refused).code, unary);
    assert.equal((await rs.receiveResult()).eventId, 'later');
    const activated = await rs.receive();
    assert.equal(activated.result, 'activate');
    assert.equal(roundError(activated), null);
    await rs.close();
    const st = (await client.getInstance('r-order')).stats;
    assert.deepEqual([st.rounds, st.updates, st.activated], ['21', '20', '1']);
  });

  it('answers a refusal in place with the unary code, and goes on', async () => {
    await client.createInstance('r-refuse', { ...LINUCB, seed: 5 });
    const done = await client.select('r-refuse', { candidates: CANDIDATES });
    await client.update('r-refuse', { eventId: done.eventId, reward: 1 });
    // Each bad request (as the stream sends it), and its unary call: the independent reference.
    const bad = [
      [{ select: { instance: 'r-missing' } }, () => client.select('r-missing', {})],
      [{ update: { instance: 'r-refuse', eventId: 'never-made', reward: 1 } },
        () => client.update('r-refuse', { eventId: 'never-made', reward: 1 })],
      [{ update: { instance: 'r-refuse', eventId: done.eventId, reward: 1 } },
        () => client.update('r-refuse', { eventId: done.eventId, reward: 1 })],
      [{ update: { instance: 'r-refuse', eventId: done.eventId, reward: NaN } },
        () => client.update('r-refuse', { eventId: done.eventId, reward: NaN })],
      [{ select: { instance: 'r-refuse', candidates: [{ values: [1, 0] }] } },
        () => client.select('r-refuse', { candidates: [[1, 0]] })],
    ];
    const expected = [];
    for (const [, call] of bad) expected.push(await codeOf(call));
    assert.deepEqual(expected, [Status.NOT_FOUND, Status.NOT_FOUND, Status.FAILED_PRECONDITION,
      Status.INVALID_ARGUMENT, Status.INVALID_ARGUMENT]);
    const before = (await client.getInstance('r-refuse')).stats;

    const rs = client.openRoundStream('r-refuse');
    rs.sendSelect('r-refuse', { candidates: CANDIDATES, eventId: 'first' });
    for (const [request] of bad) rs.send(request);
    rs.sendUpdate('r-refuse', { eventId: 'first', reward: 0.5 });
    assert.equal(typeof roundResult(await rs.receive()).armIndex, 'number');
    for (const code of expected) {
      const answer = await rs.receive();
      assert.equal(answer.result, undefined); // no result beside a refusal
      assert.equal(answer.status.code, code);
      assert.equal(roundError(answer).code, code);
      assert.ok(answer.status.message.length > 0);
    }
    assert.equal((await rs.receiveResult()).updates, String(Number(before.updates) + 1));

    // One request at a time: the typed error, and the stream goes on.
    await assert.rejects(rs.select('r-missing', {}), NotFoundError);
    await assert.rejects(rs.update('r-refuse', { eventId: 'first', reward: Infinity }), InvalidArgumentError);
    await assert.rejects(rs.update('r-refuse', { eventId: 'first', reward: 1 }), FailedPreconditionError);
    const d = await rs.select('r-refuse', { candidates: CANDIDATES });
    assert.equal((await rs.update('r-refuse', { eventId: d.eventId, reward: 1 })).updates,
      String(Number(before.updates) + 2));
    await rs.close();
    // The refused requests changed nothing: two Selects and two Updates were applied.
    const after = (await client.getInstance('r-refuse')).stats;
    assert.deepEqual([after.rounds - before.rounds, after.updates - before.updates], [2, 2]);
  });

  it('refuses a call while answers are due, and a receive without a request', async () => {
    await client.createInstance('r-wait', LINUCB);
    const rs = client.openRoundStream();
    await assert.rejects(rs.receive(), FailedPreconditionError);
    rs.sendSelect('r-wait', { candidates: CANDIDATES });
    await assert.rejects(rs.select('r-wait', { candidates: CANDIDATES }), FailedPreconditionError);
    assert.equal(rs.unanswered, 1); // the refused call sent nothing
    assert.ok((await rs.receiveResult()).eventId.length > 0);
    assert.equal(typeof (await rs.select('r-wait', { candidates: CANDIDATES })).armIndex, 'number');
    assert.throws(() => rs.send({ getInstance: { name: 'r-wait' } }), TypeError);
    await rs.close();
  });

  it('sends the routing header when given an instance', async () => {
    await client.createInstance('r-route', LINUCB);
    const seen = [];
    const interceptor = (options, nextCall) => new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        seen.push(metadata.get('x-bandit-instance'));
        next(metadata, listener);
      },
    });
    const cl = new BanditClient(server.target, { channelOptions: { interceptors: [interceptor] } });
    for (const routed of ['r-route', undefined]) {
      const rs = cl.openRoundStream(routed);
      await rs.select('r-route', { candidates: CANDIDATES });
      await rs.close();
    }
    cl.close();
    assert.deepEqual(seen, [['r-route'], []]);
  });

  it('closes cleanly with answers still due, and refuses sends after', async () => {
    await client.createInstance('r-close', LINUCB);
    const rs = client.openRoundStream('r-close');
    for (let i = 0; i < 5; i++) rs.sendSelect('r-close', { candidates: CANDIDATES });
    await rs.close(); // resolves: the server answered all five
    assert.equal(rs.unanswered, 0);
    assert.equal((await client.getInstance('r-close')).stats.rounds, '5');
    assert.throws(() => rs.sendSelect('r-close', { candidates: CANDIDATES }), FailedPreconditionError);
    await rs.close(); // a second close is a no-op
  });

  it('cancels, and the server goes on', async () => {
    await client.createInstance('r-cancel', LINUCB);
    const rs = client.openRoundStream('r-cancel');
    await rs.select('r-cancel', { candidates: CANDIDATES });
    rs.sendSelect('r-cancel', { candidates: CANDIDATES });
    rs.cancel();
    await assert.rejects(rs.receive(), CancelledError);
    await assert.rejects(rs.close(), CancelledError);
    const again = client.openRoundStream('r-cancel');
    assert.equal(typeof (await again.select('r-cancel', { candidates: CANDIDATES })).armIndex, 'number');
    await again.close();
  });
});

describe('RoundStream when the server shuts down', () => {
  it('ends the stream UNAVAILABLE', async () => {
    const srv = await startServer();
    const cl = new BanditClient(srv.target, { timeoutMs: 10000 });
    try {
      await cl.createInstance('ads', LINUCB);
      const rs = cl.openRoundStream('ads');
      await rs.select('ads', { candidates: CANDIDATES });
      await srv.stop();
      // The send may still go out before the client learns the stream ended; the answer
      // cannot come either way.
      await assert.rejects(async () => {
        rs.sendSelect('ads', { candidates: CANDIDATES });
        await rs.receive();
      }, UnavailableError);
      await assert.rejects(rs.close(), UnavailableError);
    } finally {
      cl.close();
    }
  });
});
