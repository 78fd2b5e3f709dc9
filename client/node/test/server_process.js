'use strict';
// Starts the real banditd binary on port 0 in a fresh data directory and reads back its ports
// (the same protocol as tests/integration/server_process.h).
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

function banditdPath() {
  const p = process.env.BANDITD || path.resolve(__dirname, '..', '..', '..', 'build', 'bin', 'banditd');
  fs.accessSync(p, fs.constants.X_OK);
  return p;
}

async function startServer(extraArgs = []) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'banditd-nodetest-'));
  const portFile = path.join(dir, 'ports');
  const log = fs.openSync(path.join(dir, 'banditd.log'), 'a');
  const proc = spawn(banditdPath(), ['--listen=127.0.0.1:0', '--metrics_listen=127.0.0.1:0',
    `--data_dir=${path.join(dir, 'data')}`, `--port_file=${portFile}`, ...extraArgs],
  { stdio: ['ignore', log, log] });
  let exited = false;
  proc.on('exit', () => { exited = true; });
  const readLog = () => fs.readFileSync(path.join(dir, 'banditd.log'), 'utf8');
  const stop = async () => {
    if (!exited) {
      const done = new Promise((resolve) => proc.once('exit', resolve));
      proc.kill('SIGTERM');
      await done;
    }
    fs.closeSync(log);
    fs.rmSync(dir, { recursive: true, force: true });
  };
  for (let i = 0; i < 1500 && !exited; i++) {
    try {
      const parts = fs.readFileSync(portFile, 'utf8').trim().split(/\s+/);
      if (parts.length === 2) {
        const port = Number(parts[0]);
        return { port, target: `127.0.0.1:${port}`, metricsPort: Number(parts[1]), stop, log: readLog };
      }
    } catch (e) {
      if (e.code !== 'ENOENT') throw e;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  const text = readLog();
  await stop();
  throw new Error(`banditd did not start:\n${text}`);
}

/** A loopback port with nothing listening on it (bound, then released). */
function unusedPort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

module.exports = { startServer, unusedPort, banditdPath };
