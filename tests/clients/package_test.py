"""The clients as a user outside the repository gets them: `pip wheel client/python` and
`npm pack client/node`, each installed into an empty project in a temporary directory (a venv
for Python, an `npm init` project for Node), then a lifecycle against a live banditd run from
that directory with no repository path in sight (no PYTHONPATH, no BANDIT_PROTO_DIR).

Checks exact counts and sums (ten rewards joined by event id), typed errors, and that both
packages carry the server's version (banditd's bandit_build_info metric).

Run: BANDITD=build/bin/banditd /usr/bin/python3 tests/clients/package_test.py
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.request

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "client", "python", "tests"))
from server_process import ServerProcess  # noqa: E402

REWARDS = [i / 10 for i in range(10)]  # 0.0 .. 0.9, sum 4.5

PYTHON_APP = r'''
import json, sys
import bandit_client
from bandit_client import BanditClient, FailedPreconditionError, NotFoundError

target, name = sys.argv[1], sys.argv[2]
rewards = [float(r) for r in sys.argv[3].split(",")]
out = {"version": bandit_client.__version__, "module": bandit_client.__file__}
with BanditClient(target, timeout=10.0) as client:
    client.create_instance(name, "policy { epsilon_greedy { epsilon: 0.1 } num_arms: 3 }")
    events = [client.select(name).event_id for _ in rewards]
    for event_id, reward in zip(events, rewards):
        client.update(name, event_id, reward=reward)
    try:
        client.update(name, events[0], reward=1.0)
    except FailedPreconditionError as e:
        out["duplicate_error"] = type(e).__name__
    try:
        client.get_instance(name + "-missing")
    except NotFoundError as e:
        out["missing_error"] = type(e).__name__
    stats = client.get_instance(name).stats
    out.update(rounds=stats.rounds, updates=stats.updates, pending=stats.pending,
               rejected=stats.rejected_rewards, reward_sum=stats.reward_sum)
print(json.dumps(out))
'''

NODE_APP = r'''
const { BanditClient, FailedPreconditionError, NotFoundError, version } = require('bandit-client');
(async () => {
  const [target, name, rewardList] = process.argv.slice(2);
  const rewards = rewardList.split(',').map(Number);
  const out = { version, module: require.resolve('bandit-client') };
  const client = new BanditClient(target, { timeoutMs: 10000 });
  await client.createInstance(name, { policy: { epsilonGreedy: { epsilon: 0.1 }, numArms: 3 } });
  const events = [];
  for (const _ of rewards) events.push((await client.select(name)).eventId);
  for (let i = 0; i < rewards.length; i++) await client.update(name, { eventId: events[i], reward: rewards[i] });
  await client.update(name, { eventId: events[0], reward: 1 })
    .catch((e) => { if (e instanceof FailedPreconditionError) out.duplicate_error = e.constructor.name; });
  await client.getInstance(name + '-missing')
    .catch((e) => { if (e instanceof NotFoundError) out.missing_error = e.constructor.name; });
  const { stats } = await client.getInstance(name);
  Object.assign(out, { rounds: Number(stats.rounds), updates: Number(stats.updates),
    pending: Number(stats.pending), rejected: Number(stats.rejectedRewards), reward_sum: stats.rewardSum });
  client.close();
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
'''


def run(cmd, cwd, env=None, timeout=600):
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s" % (" ".join(cmd), proc.returncode, proc.stdout))
    return proc.stdout


def clean_env():
    """The environment of a user outside the repository: no repository paths."""
    env = dict(os.environ)
    for key in ("PYTHONPATH", "BANDIT_PROTO_DIR", "NODE_PATH"):
        env.pop(key, None)
    return env


class ClientPackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess()
        cls.tmp = tempfile.mkdtemp(prefix="bandit-client-pkg-")
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % cls.server.metrics_port,
                                    timeout=10) as r:
            metrics = r.read().decode()
        m = re.search(r'bandit_build_info\{[^}]*version="([^"]+)"', metrics)
        assert m, "bandit_build_info{version=...} missing from /metrics"
        cls.server_version = m.group(1)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def check_lifecycle(self, out, module_root):
        self.assertEqual(out["version"], self.server_version)
        self.assertTrue(out["module"].startswith(module_root), out["module"])
        self.assertFalse(out["module"].startswith(REPO), out["module"])
        self.assertEqual(out["rounds"], len(REWARDS))
        self.assertEqual(out["updates"], len(REWARDS))
        self.assertEqual(out["pending"], 0)
        self.assertEqual(out["rejected"], 1)  # the duplicate reward
        self.assertAlmostEqual(out["reward_sum"], sum(REWARDS), places=12)
        self.assertEqual(out["duplicate_error"], "FailedPreconditionError")
        self.assertEqual(out["missing_error"], "NotFoundError")

    def test_python_wheel_in_a_fresh_venv(self):
        work = os.path.join(self.tmp, "py")
        os.makedirs(work)
        # Debian's grpcio and protobuf come from the system site packages; PyPI is not needed.
        # The venv gets no pip of its own (seeding one costs ~10 s): Debian's pip installs into
        # it with --python, exactly what `venv/bin/pip install` would put there.
        run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip", "venv"],
            cwd=work)
        venv_python = os.path.join(work, "venv", "bin", "python")
        pip = ["/usr/bin/python3", "-m", "pip"]
        # Build from a copy so the source tree stays untouched (pip builds in place).
        src = os.path.join(work, "src")
        shutil.copytree(os.path.join(REPO, "client", "python"), src,
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        env = clean_env()
        env["BANDIT_PROTO_DIR"] = os.path.join(REPO, "proto")  # only the build step reads it
        run(pip + ["wheel", "--no-build-isolation", "--no-deps", "--no-index", "-w", "dist", src],
            cwd=work, env=env)
        wheels = glob.glob(os.path.join(work, "dist", "bandit_client-*.whl"))
        self.assertEqual(len(wheels), 1, wheels)
        self.assertIn("-%s-" % self.server_version, os.path.basename(wheels[0]))
        shutil.rmtree(src)
        run(pip + ["--python", venv_python, "install", "--no-index", "--no-deps", wheels[0]],
            cwd=work)
        app = os.path.join(work, "app.py")
        with open(app, "w") as f:
            f.write(PYTHON_APP)
        # PATH without protoc would be the strongest form; the stubs are in the wheel, so the
        # installed package must not need it: check by hiding everything but the venv.
        env = clean_env()
        env["PATH"] = os.path.join(work, "venv", "bin")
        out = run([os.path.join(work, "venv", "bin", "python"), app, self.server.target,
                   "py-pkg", ",".join(map(repr, REWARDS))], cwd=work, env=env)
        self.check_lifecycle(json.loads(out.strip().splitlines()[-1]),
                             os.path.join(work, "venv"))

    def test_node_tarball_in_an_empty_project(self):
        work = os.path.join(self.tmp, "node")
        os.makedirs(work)
        npm = shutil.which("npm")
        self.assertIsNotNone(npm, "npm not found (scripts/deps.sh installs it)")
        run([npm, "pack", "--pack-destination", work], cwd=os.path.join(REPO, "client", "node"),
            env=clean_env())
        tarballs = glob.glob(os.path.join(work, "bandit-client-*.tgz"))
        self.assertEqual(len(tarballs), 1, tarballs)
        self.assertIn("-%s.tgz" % self.server_version, tarballs[0])
        self.assertFalse(os.path.exists(os.path.join(REPO, "client", "node", "proto")),
                         "npm pack must not leave a proto copy in the working tree")
        project = os.path.join(work, "project")
        os.makedirs(project)
        run([npm, "init", "-y"], cwd=project, env=clean_env())
        run([npm, "install", "--no-audit", "--no-fund", "--prefer-offline", tarballs[0]],
            cwd=project, env=clean_env())
        with open(os.path.join(project, "app.js"), "w") as f:
            f.write(NODE_APP)
        out = run([shutil.which("node"), "app.js", self.server.target, "node-pkg",
                   ",".join(map(repr, REWARDS))], cwd=project, env=clean_env())
        self.check_lifecycle(json.loads(out.strip().splitlines()[-1]),
                             os.path.join(project, "node_modules", "bandit-client"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
