'use strict';
// npm pack/publish hooks: `prepack` copies the repository's .proto files into ./proto so the
// tarball carries what src/index.js loads at run time; `postpack` removes the copy again, so a
// working tree never holds a second, possibly stale, set of protos.
//
//   node scripts/pack-protos.js copy | clean
const fs = require('node:fs');
const path = require('node:path');

const PACKAGE_DIR = path.resolve(__dirname, '..');
const TARGET = path.join(PACKAGE_DIR, 'proto');
const SOURCE = process.env.BANDIT_PROTO_DIR || path.resolve(PACKAGE_DIR, '..', '..', 'proto');

function copyProtos(from, to) {
  let copied = 0;
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    const src = path.join(from, entry.name);
    const dst = path.join(to, entry.name);
    if (entry.isDirectory()) {
      copied += copyProtos(src, dst);
    } else if (entry.name.endsWith('.proto')) {
      fs.mkdirSync(to, { recursive: true });
      fs.copyFileSync(src, dst);
      copied += 1;
    }
  }
  return copied;
}

const verb = process.argv[2];
if (verb === 'copy') {
  if (!fs.existsSync(path.join(SOURCE, 'bandit', 'v1', 'service.proto'))) {
    console.error(`pack-protos: ${SOURCE} has no bandit/v1/service.proto; set BANDIT_PROTO_DIR`);
    process.exit(1);
  }
  fs.rmSync(TARGET, { recursive: true, force: true });
  const n = copyProtos(SOURCE, TARGET);
  console.error(`pack-protos: copied ${n} .proto files from ${SOURCE}`);
} else if (verb === 'clean') {
  fs.rmSync(TARGET, { recursive: true, force: true });
} else {
  console.error('usage: node scripts/pack-protos.js copy|clean');
  process.exit(2);
}
