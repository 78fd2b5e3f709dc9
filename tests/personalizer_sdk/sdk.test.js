// ctest personalizer_sdk: Azure Personalizer's official Node SDKs, unmodified, against banditd's
// Personalizer API. The SDKs are installed from npm at pinned versions into a temp dir outside
// the repository; banditd is started on port 0 with --http_listen.
//   @azure/cognitiveservices-personalizer 2.0.1 (v1.0): a known click model, rank -> reward for
//     a few thousand rounds; the learned reward rate beats uniform choice by a stated margin;
//     errors come back as the SDK's RestError with Personalizer's codes.
//   @azure-rest/ai-personalizer 1.0.0-beta.1 (v1.1-preview.3): rank, reward, configuration
//     get/put, model export from one instance and import into another, which then decides
//     exactly as the first.
'use strict';
const { test, before, after } = require('node:test');
const assert = require('node:assert');
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const SDK_V10 = '@azure/cognitiveservices-personalizer@2.0.1';
const SDK_REST = '@azure-rest/ai-personalizer@1.0.0-beta.1';
const KEYS = {
  v10: 'v10-writer-key-0123456789',  // writer bound to instance "news"
  restA: 'rest-admin-key-a-0123456789',  // admin bound to "rest-a"
  restB: 'rest-admin-key-b-0123456789',  // admin bound to "rest-b"
  reader: 'news-reader-key-0123456789',  // reader bound to "news"
};

let sdkDir, dataDir, banditd, httpPort, requireSdk;

before(async () => {
  sdkDir = fs.mkdtempSync(path.join(os.tmpdir(), 'personalizer-sdks-'));
  fs.writeFileSync(path.join(sdkDir, 'package.json'), '{"name":"sdk-probe","private":true}');
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', SDK_V10,
    '@azure/ms-rest-js@2', SDK_REST, '@azure/core-auth@1'], { cwd: sdkDir, stdio: 'inherit' });
  requireSdk = (name) => require(require.resolve(name, { paths: [sdkDir] }));

  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'personalizer-banditd-'));
  const tokens = path.join(dataDir, 'tokens');
  fs.writeFileSync(tokens, [
    `writer ${KEYS.v10} v10-app instance=news`,
    `admin ${KEYS.restA} rest-a instance=rest-a`,
    `admin ${KEYS.restB} rest-b instance=rest-b`,
    `reader ${KEYS.reader} dashboards instance=news`, ''].join('\n'), { mode: 0o600 });
  const portFile = path.join(dataDir, 'ports');
  banditd = spawn(process.env.BANDITD || 'build/bin/banditd', [
    '--listen=127.0.0.1:0', '--metrics_listen=', '--http_listen=127.0.0.1:0',
    `--data_dir=${path.join(dataDir, 'data')}`, `--port_file=${portFile}`,
    `--tokens_file=${tokens}`, '--personalizer_auto_create', '--durability=none'],
  { stdio: ['ignore', 'ignore', fs.openSync(path.join(dataDir, 'banditd.log'), 'a')] });
  for (let i = 0; i < 1000 && !httpPort; i++) {
    try {
      const parts = fs.readFileSync(portFile, 'utf8').trim().split(/\s+/);
      if (parts.length === 3) httpPort = Number(parts[2]);
    } catch (e) { /* not yet written */ }
    if (!httpPort) await new Promise((r) => setTimeout(r, 10));
  }
  assert.ok(httpPort > 0, 'banditd did not report its HTTP port');
});

after(() => {
  if (banditd) banditd.kill('SIGTERM');
  if (sdkDir) fs.rmSync(sdkDir, { recursive: true, force: true });
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

// A seeded generator (mulberry32): the click model's draws are the same on every run.
function rng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// The click model: each kind of user clicks its own topic with probability 0.8 and any other
// with 0.1, whatever the device. Uniform choice over the 4 articles earns 0.275 a round.
const KINDS = ['student', 'parent', 'retiree'];
const TOPICS = ['games', 'school', 'garden', 'finance'];
const BEST = { student: 'games', parent: 'school', retiree: 'garden' };
const P_BEST = 0.8, P_OTHER = 0.1;
const UNIFORM = (P_BEST + 3 * P_OTHER) / TOPICS.length;
const ACTIONS = TOPICS.map((t, i) => ({
  id: `article-${t}`, features: [{ Article: { topic: t, words: 300 + 100 * i } }] }));

test('v1.0 SDK: rank -> reward learns the click model', async () => {
  const { PersonalizerClient } = requireSdk('@azure/cognitiveservices-personalizer');
  const { ApiKeyCredentials } = requireSdk('@azure/ms-rest-js');
  const credentials = new ApiKeyCredentials({ inHeader: { 'Ocp-Apim-Subscription-Key': KEYS.v10 } });
  // The v1.0 SDK keeps only the endpoint's origin: the key names the instance.
  const client = new PersonalizerClient(credentials, `http://127.0.0.1:${httpPort}`);
  const draw = rng(20261127);
  const ROUNDS = 2500, LAST = 500;
  let lastRewards = 0;
  for (let t = 0; t < ROUNDS; t++) {
    const kind = KINDS[Math.floor(draw() * KINDS.length)];
    const device = draw() < 0.5 ? 'mobile' : 'desktop';
    const response = await client.rank({
      contextFeatures: [{ User: { kind } }, { Device: { type: device } }],
      actions: ACTIONS,
    });
    assert.strictEqual(response.ranking.length, ACTIONS.length);
    // The default learner is VW's, whose probabilities are single precision (as Personalizer's).
    assert.ok(Math.abs(response.ranking.reduce((s, r) => s + r.probability, 0) - 1) < 1e-6);
    const chosen = response.rewardActionId;
    const clicked = draw() < (chosen === `article-${BEST[kind]}` ? P_BEST : P_OTHER) ? 1 : 0;
    await client.events.reward(response.eventId, { value: clicked });
    if (t >= ROUNDS - LAST) lastRewards += clicked;
  }
  const rate = lastRewards / LAST;
  console.log(`v1.0 SDK: reward rate over the last ${LAST} of ${ROUNDS} rounds ${rate.toFixed(3)}, ` +
              `uniform ${UNIFORM}, best possible ${P_BEST}`);
  // The margin: at least 0.25 above uniform (0.525; the best policy earns 0.8).
  assert.ok(rate >= UNIFORM + 0.25, `learned rate ${rate} is not 0.25 above uniform ${UNIFORM}`);
});

test('v1.0 SDK: errors are RestErrors with Personalizer codes', async () => {
  const { PersonalizerClient } = requireSdk('@azure/cognitiveservices-personalizer');
  const { ApiKeyCredentials } = requireSdk('@azure/ms-rest-js');
  const endpoint = `http://127.0.0.1:${httpPort}`;
  const withKey = (key) => new PersonalizerClient(
    new ApiKeyCredentials({ inHeader: { 'Ocp-Apim-Subscription-Key': key } }), endpoint);
  const expectError = async (call, status, code) => {
    await assert.rejects(call, (e) => {
      assert.strictEqual(e.statusCode, status, e.message);
      assert.strictEqual(e.code, code, e.message);
      return true;
    });
  };
  const client = withKey(KEYS.v10);
  await expectError(client.rank({ actions: [] }), 400, 'InvalidRankRequest');
  await expectError(client.rank({ actions: [ACTIONS[0], ACTIONS[0]] }), 400, 'InvalidRankRequest');
  await expectError(withKey('no-such-key-0123456789').rank({ actions: ACTIONS }), 401, '401');
  await expectError(withKey(KEYS.reader).rank({ actions: ACTIONS }), 403, 'InvalidApiAccess');
  // Deferred activation with the caller's event id: the reward counts once activated.
  const ranked = await client.rank({ actions: ACTIONS, deferActivation: true, eventId: 'sdk-view-1' });
  assert.strictEqual(ranked.eventId, 'sdk-view-1');
  await client.events.reward(ranked.eventId, { value: 1 });
  await client.events.activate(ranked.eventId);
});

test('v1.1-preview.3 REST SDK: rank, reward, configuration, model export and import', async () => {
  const createClient = requireSdk('@azure-rest/ai-personalizer').default;
  const { AzureKeyCredential } = requireSdk('@azure/core-auth');
  const endpoint = `http://127.0.0.1:${httpPort}`;
  // A key over plain HTTP needs allowInsecureConnection (loopback only, as here).
  const a = createClient(endpoint, new AzureKeyCredential(KEYS.restA), { allowInsecureConnection: true });
  const b = createClient(endpoint, new AzureKeyCredential(KEYS.restB), { allowInsecureConnection: true });
  const draw = rng(7);
  const request = (t) => ({
    contextFeatures: [{ User: { kind: KINDS[t % 3] } }],
    actions: ACTIONS,
    excludedActions: t % 4 === 0 ? [ACTIONS[3].id] : [],
  });
  for (let t = 0; t < 200; t++) {
    const ranked = await a.path('/rank').post({ body: request(t) });
    assert.strictEqual(ranked.status, '201', JSON.stringify(ranked.body));
    const kind = KINDS[t % 3];
    const clicked = draw() < (ranked.body.rewardActionId === `article-${BEST[kind]}` ? P_BEST : P_OTHER);
    const rewarded = await a.path('/events/{eventId}/reward', ranked.body.eventId)
      .post({ body: { value: clicked ? 1 : 0 } });
    assert.strictEqual(rewarded.status, '204');
  }
  // Configuration: read it, write it back unchanged (200); a change is applied live, one this
  // server cannot honour is refused with Personalizer's code.
  const config = await a.path('/configurations/service').get();
  assert.strictEqual(config.status, '200');
  assert.strictEqual(config.body.rewardWaitTime, 'PT10M');
  assert.strictEqual(config.body.defaultReward, 0);
  assert.strictEqual(config.body.learningMode, 'Online');
  const same = await a.path('/configurations/service').put({ body: config.body });
  assert.strictEqual(same.status, '200');
  assert.deepStrictEqual(same.body, config.body);
  const changed = await a.path('/configurations/service')
    .put({ body: { ...config.body, rewardWaitTime: 'PT1H', learningMode: 'Apprentice' } });
  assert.strictEqual(changed.status, '200', JSON.stringify(changed.body));
  assert.strictEqual(changed.body.rewardWaitTime, 'PT1H');
  assert.strictEqual(changed.body.learningMode, 'Apprentice');
  // Apprentice: the baseline (the first action) is served.
  const apprentice = await a.path('/rank').post({ body: {
    actions: ACTIONS, contextFeatures: [{ User: { kind: 'student' } }] } });
  assert.strictEqual(apprentice.status, '201', JSON.stringify(apprentice.body));
  assert.strictEqual(apprentice.body.rewardActionId, ACTIONS[0].id);
  const refused = await a.path('/configurations/service')
    .put({ body: { ...config.body, modelExportFrequency: 'PT1H' } });
  assert.strictEqual(refused.status, '400');
  assert.strictEqual(refused.body.error.code, 'InvalidServiceConfiguration');
  assert.strictEqual(refused.body.error.target, 'modelExportFrequency');
  const back = await a.path('/configurations/service').put({ body: config.body });
  assert.strictEqual(back.status, '200');
  assert.deepStrictEqual(back.body.learningMode, 'Online');
  // Multi-slot: rank two slots (deferred), reward each slot, activate.
  const multislot = await a.path('/multislot/rank').post({ body: {
    actions: ACTIONS, contextFeatures: [{ User: { kind: 'student' } }], eventId: 'ms-1',
    deferActivation: true,
    slots: [{ id: 'hero', baselineAction: ACTIONS[0].id },
      { id: 'side', baselineAction: ACTIONS[1].id, excludedActions: [ACTIONS[2].id] }] } });
  assert.strictEqual(multislot.status, '201', JSON.stringify(multislot.body));
  assert.strictEqual(multislot.body.eventId, 'ms-1');
  assert.deepStrictEqual(multislot.body.slots.map((s) => s.id), ['hero', 'side']);
  assert.notStrictEqual(multislot.body.slots[0].rewardActionId, multislot.body.slots[1].rewardActionId);
  assert.notStrictEqual(multislot.body.slots[1].rewardActionId, ACTIONS[2].id);
  const slotRewards = await a.path('/multislot/events/{eventId}/reward', 'ms-1').post({ body: {
    reward: [{ slotId: 'hero', value: 1 }, { slotId: 'side', value: 0 }] } });
  assert.strictEqual(slotRewards.status, '204');
  const activated = await a.path('/multislot/events/{eventId}/activate', 'ms-1').post();
  assert.strictEqual(activated.status, '204');

  // Model: export from rest-a, import into rest-b; from then on both decide the same.
  const exported = await a.path('/model').get().asNodeStream();
  assert.strictEqual(exported.status, '200');
  const chunks = [];
  for await (const chunk of exported.body) chunks.push(chunk);
  const model = Buffer.concat(chunks);
  assert.ok(model.length > 0);
  const imported = await b.path('/model').put({ body: model, contentType: 'application/octet-stream' });
  assert.strictEqual(imported.status, '204', JSON.stringify(imported.body));
  for (let t = 200; t < 260; t++) {
    const ra = await a.path('/rank').post({ body: request(t) });
    const rb = await b.path('/rank').post({ body: request(t) });
    assert.strictEqual(ra.status, '201');
    assert.strictEqual(rb.status, '201');
    assert.strictEqual(rb.body.rewardActionId, ra.body.rewardActionId, `round ${t}`);
    assert.deepStrictEqual(rb.body.ranking, ra.body.ranking, `round ${t}`);
    for (const [client, ranked] of [[a, ra], [b, rb]]) {
      const r = await client.path('/events/{eventId}/reward', ranked.body.eventId)
        .post({ body: { value: t % 2 } });
      assert.strictEqual(r.status, '204');
    }
  }
});

test('v1.1-preview.3 REST SDK: an offline evaluation created, polled, listed and deleted', async () => {
  const createClient = requireSdk('@azure-rest/ai-personalizer').default;
  const { AzureKeyCredential } = requireSdk('@azure/core-auth');
  const a = createClient(`http://127.0.0.1:${httpPort}`, new AzureKeyCredential(KEYS.restA),
    { allowInsecureConnection: true });
  // Decisions to evaluate (the --personalizer default keeps a decision log).
  let paid = 0;
  for (let t = 0; t < 40; t++) {
    const ranked = await a.path('/rank').post({ body: {
      contextFeatures: [{ User: { kind: KINDS[t % 3] } }], actions: ACTIONS } });
    assert.strictEqual(ranked.status, '201', JSON.stringify(ranked.body));
    const value = t % 4 === 0 ? 1 : 0;
    paid += value;
    const r = await a.path('/events/{eventId}/reward', ranked.body.eventId).post({ body: { value } });
    assert.strictEqual(r.status, '204');
  }
  const now = Date.now();
  const created = await a.path('/evaluations').post({ body: {
    name: 'sdk evaluation',
    startTime: new Date(now - 3600e3).toISOString(),
    endTime: new Date(now + 3600e3).toISOString(),
    policies: [{ name: 'personalizer flags',
      arguments: '--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q ::' }],
  } });
  assert.strictEqual(created.status, '201', JSON.stringify(created.body));
  assert.strictEqual(created.body.status, 'pending');
  assert.strictEqual(created.body.evaluationType, 'Manual');
  assert.strictEqual(created.body.jobId, created.body.id);
  assert.ok(created.headers.location.endsWith(`/evaluations/${created.body.id}`));
  let got;
  for (let i = 0; i < 500; i++) {
    got = await a.path('/evaluations/{evaluationId}', created.body.id).get();
    assert.strictEqual(got.status, '200', JSON.stringify(got.body));
    if (got.body.status !== 'pending') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.strictEqual(got.body.status, 'completed', JSON.stringify(got.body));
  const sources = got.body.policyResults.map((r) => r.policySource).sort();
  assert.deepStrictEqual(sources, ['Baseline', 'Custom', 'Online', 'Random']);
  const online = got.body.policyResults.find((r) => r.policySource === 'Online');
  // This test's 40 decisions and whatever the earlier tests logged on this instance: at least
  // these, and the online figures are the logged rewards.
  assert.ok(online.totalSummary.ipsEstimatorDenominator >= 40);
  assert.ok(online.totalSummary.ipsEstimatorNumerator >= paid);
  assert.strictEqual(online.totalSummary.averageReward,
    online.totalSummary.ipsEstimatorNumerator / online.totalSummary.ipsEstimatorDenominator);
  const listed = await a.path('/evaluations').get();
  assert.strictEqual(listed.status, '200');
  assert.ok(listed.body.some((e) => e.id === created.body.id));
  const missing = await a.path('/evaluations/{evaluationId}', 'no-such-evaluation').get();
  assert.strictEqual(missing.status, '404');
  assert.strictEqual(missing.body.error.code, 'EvaluationNotFound');
  const deleted = await a.path('/evaluations/{evaluationId}', created.body.id).delete();
  assert.strictEqual(deleted.status, '204');

  // Offline experimentation: the search's winner among the results, named by optimalPolicy,
  // and the feature importance of the online settings (VW's learner, the default's).
  const searched = await a.path('/evaluations').post({ body: {
    name: 'sdk search', enableOfflineExperimentation: true,
    startTime: new Date(now - 3600e3).toISOString(),
    endTime: new Date(now + 3600e3).toISOString(), policies: [] } });
  assert.strictEqual(searched.status, '201', JSON.stringify(searched.body));
  for (let i = 0; i < 3000; i++) {
    got = await a.path('/evaluations/{evaluationId}', searched.body.id).get();
    if (got.body.status !== 'pending') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.strictEqual(got.body.status, 'completed', JSON.stringify(got.body));
  const optimized = got.body.policyResults.find((r) => r.policySource === 'OfflineExperimentation');
  assert.ok(optimized, JSON.stringify(got.body.policyResults.map((r) => r.policySource)));
  assert.strictEqual(got.body.optimalPolicy, optimized.name);
  assert.ok(Array.isArray(got.body.featureImportance) && got.body.featureImportance.length > 0);
  for (const row of got.body.featureImportance) {
    assert.strictEqual(row.length, 4);
    assert.ok(row.every((v) => typeof v === 'string'));
  }
  // Namespaces first, the most important at 100.
  assert.deepStrictEqual(got.body.featureImportance[0].slice(1, 3), ['', '100']);
  // Applied by name: the learning settings become the winner's; the Online result's settings
  // applied again undo it.
  const apply = (policyName) => a.path('/configurations/applyFromEvaluation').post({
    body: { evaluationId: searched.body.id, policyName } });
  assert.strictEqual((await apply(optimized.name)).status, '204');
  let policy = await a.path('/configurations/policy').get();
  assert.strictEqual(policy.status, '200');
  assert.strictEqual(policy.body.arguments, optimized.arguments);
  assert.strictEqual((await apply('Online')).status, '204');
  policy = await a.path('/configurations/policy').get();
  const online0 = got.body.policyResults.find((r) => r.policySource === 'Online');
  assert.strictEqual(policy.body.arguments, online0.arguments);
  const unknown = await apply('no such settings');
  assert.strictEqual(unknown.status, '404');
  assert.strictEqual(unknown.body.error.code, 'LearningSettingsNotFound');
  // PUT and DELETE the learning settings.
  const put = await a.path('/configurations/policy').put({ body: {
    name: 'by hand', arguments: '--cb_explore_adf --epsilon 0.1 -q :: --power_t 0' } });
  assert.strictEqual(put.status, '200', JSON.stringify(put.body));
  assert.strictEqual(put.body.name, 'by hand');
  const refusedPut = await a.path('/configurations/policy').put({ body: {
    name: 'bad', arguments: '--cb_explore_adf --no_such_flag' } });
  assert.strictEqual(refusedPut.status, '400');
  assert.strictEqual(refusedPut.body.error.code, 'InvalidPolicyConfiguration');
  const reset = await a.path('/configurations/policy').delete();
  assert.strictEqual(reset.status, '200');
  assert.strictEqual(reset.body.arguments, '--cb_explore_adf --squarecb -q :: -b 18');

  // Bad evaluation contracts: Personalizer's statuses and codes.
  const contract = (extra) => ({ name: 'bad', startTime: new Date(now - 3600e3).toISOString(),
    endTime: new Date(now + 3600e3).toISOString(), policies: [], ...extra });
  const expectRefused = async (body, status, code) => {
    const r = await a.path('/evaluations').post({ body });
    assert.strictEqual(r.status, status, JSON.stringify(r.body));
    assert.strictEqual(r.body.error.code, code, JSON.stringify(r.body));
  };
  await expectRefused(contract({ policies: [{ name: 'x', arguments: '--cb_explore_adf --bogus' }] }),
    '400', 'InvalidPolicyConfiguration');
  await expectRefused(contract({ policies: [{ name: 'x', arguments: '--cb_adf' },
    { name: 'x', arguments: '--cb_adf' }] }), '400', 'DuplicateCustomPolicyNames');
  await expectRefused(contract({ policies: Array.from({ length: 100 },
    (_, k) => ({ name: `p${k}`, arguments: '--cb_adf' })) }), '400', 'InvalidEvaluationContract');
  await expectRefused(contract({ startTime: '2001-01-01T00:00:00Z', endTime: '2001-01-02T00:00:00Z' }),
    '400', 'NoLogsExistInDateRange');
  await expectRefused(contract({ startTime: new Date(now).toISOString(),
    endTime: new Date(now - 1000).toISOString() }), '400', 'InvalidEvaluationContract');

  // Automatic optimization: on with a frequency, reported back; a frequency under a minute is
  // refused and changes nothing; off again.
  const service = (await a.path('/configurations/service').get()).body;
  assert.strictEqual(service.isAutoOptimizationEnabled, false);
  const on = await a.path('/configurations/service').put({ body: { ...service,
    isAutoOptimizationEnabled: true, autoOptimizationFrequency: 'PT6H',
    autoOptimizationStartDate: '2030-01-01T00:00:00Z' } });
  assert.strictEqual(on.status, '200', JSON.stringify(on.body));
  assert.strictEqual(on.body.isAutoOptimizationEnabled, true);
  assert.strictEqual(on.body.autoOptimizationFrequency, 'PT6H');
  assert.strictEqual(on.body.autoOptimizationStartDate, '2030-01-01T00:00:00.000Z');
  const tooOften = await a.path('/configurations/service').put({ body: { ...on.body,
    autoOptimizationFrequency: 'PT30S' } });
  assert.strictEqual(tooOften.status, '400', JSON.stringify(tooOften.body));
  assert.strictEqual(tooOften.body.error.code, 'InvalidServiceConfiguration');
  assert.strictEqual((await a.path('/configurations/service').get()).body.autoOptimizationFrequency,
    'PT6H');
  const off = await a.path('/configurations/service').put({ body: { ...on.body,
    isAutoOptimizationEnabled: false } });
  assert.strictEqual(off.status, '200', JSON.stringify(off.body));
  assert.strictEqual(off.body.isAutoOptimizationEnabled, false);
});
