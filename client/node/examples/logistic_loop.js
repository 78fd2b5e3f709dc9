#!/usr/bin/env node
'use strict';
// A remote select/reward loop against a simulated logistic environment (the Node twin of
// client/python/examples/logistic_loop.py). Each round K candidate items with d features; a click
// happens with probability sigmoid(x . theta*). Prints cumulative regret next to a uniform-random
// baseline.
//
//   build/bin/banditd &                         # listens on 127.0.0.1:50051
//   node client/node/examples/logistic_loop.js --rounds 2000 [--target host:port] [--policy linucb]
const { BanditClient, NotFoundError } = require('../src');

function parseArgs(argv) {
  const a = { target: '127.0.0.1:50051', instance: 'example-logistic-node', policy: 'glb_omd',
    dim: 5, arms: 10, rounds: 2000, norm: 3, seed: 1, reportEvery: 200 };
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z_]+)(?:=(.*))?$/.exec(argv[i]);
    if (!m) throw new Error(`unknown argument ${argv[i]}`);
    const key = m[1].replace(/_([a-z])/g, (_, c) => c.toUpperCase());
    const val = m[2] !== undefined ? m[2] : argv[++i];
    a[key] = typeof a[key] === 'number' ? Number(val) : val;
  }
  return a;
}

// Small seeded generator (mulberry32) so runs are repeatable.
function rng(seed) {
  let s = seed >>> 0;
  const uniform = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const gauss = () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform());
  return { uniform, gauss };
}

const sigmoid = (z) => 1 / (1 + Math.exp(-z));
const dot = (a, b) => a.reduce((s, v, i) => s + v * b[i], 0);

function unitBallPoint(r, d) {
  const v = Array.from({ length: d }, r.gauss);
  const n = Math.hypot(...v);
  const radius = r.uniform() ** (1 / d);
  return v.map((x) => (radius * x) / n);
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const r = rng(a.seed);
  let theta = unitBallPoint(r, a.dim);
  const scale = a.norm / Math.hypot(...theta);
  theta = theta.map((t) => t * scale);
  const policy = a.policy === 'linucb'
    ? { linucb: { dimension: a.dim } }
    : { glbOmd: { dimension: a.dim, link: 'LOGISTIC', s: a.norm } };

  const client = new BanditClient(a.target, { timeoutMs: 5000 });
  try {
    await client.deleteInstance(a.instance).catch((e) => { if (!(e instanceof NotFoundError)) throw e; });
    await client.createInstance(a.instance, { policy, seed: a.seed });
    let regret = 0;
    let baseline = 0;
    console.log(['round', 'regret', 'random_regret', 'server_regret'].map((s) => s.padStart(14)).join(''));
    for (let t = 1; t <= a.rounds; t++) {
      const candidates = Array.from({ length: a.arms }, () => unitBallPoint(r, a.dim));
      const means = candidates.map((x) => sigmoid(dot(x, theta)));
      const best = Math.max(...means);
      const d = await client.select(a.instance, { candidates });
      const mean = means[d.armIndex];
      const click = r.uniform() < mean ? 1 : 0;
      await client.update(a.instance, { eventId: d.eventId, reward: click, bestExpectedReward: best, expectedReward: mean });
      regret += best - mean;
      baseline += best - means[Math.floor(r.uniform() * a.arms)];
      if (t % a.reportEvery === 0 || t === a.rounds) {
        const { stats } = await client.getInstance(a.instance);
        console.log([String(t), regret.toFixed(2), baseline.toFixed(2), stats.pseudoRegret.toFixed(2)]
          .map((s) => s.padStart(14)).join(''));
      }
    }
    await client.deleteInstance(a.instance);
  } finally {
    client.close();
  }
}

main().catch((e) => { console.error(e.message || e); process.exit(1); });
