// A file with a mistake is refused before anything is sent: each message names the file, the line, the column and
// the field, the exit status is 1, and the account is left as it was (read back through the API).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { feedVersion } from '../helpers/endpoint-api.ts';
import { configSuite, edge } from './support.ts';

/** A valid endpoint entry, the mistakes below each break one thing in a copy of it. */
const GOOD = `version: 1
endpoints:
  shop:
    tags: [web]
    rate_limits:
      api:
        requests_per_window: 10
        window_size_seconds: 60
        action: block
        conditions:
          - { type: path, operator: prefix, value: /api }
    auth:
      mode: basic
      basic_users:
        - username: alice
          password: \${ALICE_PASSWORD}
`;

/** [what, file text, the expected message (line:column: field: text)] */
const MISTAKES: [string, string, RegExp][] = [
  ['an unknown field', GOOD.replace('    tags: [web]\n', '    tags: [web]\n    colour: blue\n'), /:5:5: endpoints\.shop\.colour: unknown field/],
  ['an unknown field in a rule', GOOD.replace('        action: block\n', '        action: block\n        burst: 3\n'), /:10:9: endpoints\.shop\.rate_limits\.api\.burst: unknown field/],
  ['a value of the wrong kind', GOOD.replace('action: block', 'action: deny'), /:9:17: endpoints\.shop\.rate_limits\.api\.action: /],
  ['a bad condition', GOOD.replace('operator: prefix', 'operator: between'), /:11:13: endpoints\.shop\.rate_limits\.api\.conditions\.0: bad condition: /],
  ['a duplicate key', GOOD.replace('  shop:\n', '  shop:\n    tags: [a]\n').replace('    tags: [web]\n', '    tags: [web]\n'), /:5:5: duplicate key "tags"/],
  ['a duplicate endpoint', GOOD + '  shop:\n    tags: [x]\n', /:17:3: duplicate key "shop"/],
  ['a missing environment reference', GOOD, /:16:21: endpoints\.shop\.auth\.basic_users\.0\.password: environment variable ALICE_PASSWORD is not set/],
  ['a bad tag', GOOD.replace('tags: [web]', 'tags: [Web]'), /:4:12: endpoints\.shop\.tags\.0: /],
  ['a user with both password and hash', GOOD.replace('password: ${ALICE_PASSWORD}', 'password: x\n          password_hash: $2b$10$' + 'a'.repeat(53)), /endpoints\.shop\.auth\.basic_users\.0: exactly one of password and password_hash/],
  ['a CA bundle the API would refuse', GOOD.replace('    tags: [web]\n', '    tags: [web]\n    mtls: { mode: required, ca_bundle_pem: "not a certificate" }\n'), /:5:44: endpoints\.shop\.mtls\.ca_bundle_pem: /],
  ['mTLS on without a bundle', GOOD.replace('    tags: [web]\n', '    tags: [web]\n    mtls: { mode: optional }\n'), /:5:11: endpoints\.shop\.mtls: mode optional needs ca_bundle_pem/],
  ['a wrong version', GOOD.replace('version: 1', 'version: 2'), /:1:10: version: /],
  ['broken YAML', GOOD.replace('    tags: [web]', '    tags: [web'), /edge\.yaml:\d+:\d+: /],
];

describe('edge apply and diff refuse a file with a mistake, located, and send nothing', () => {
  const suite = configSuite();


  for (const [what, text, message] of MISTAKES) {
    it(`refuses ${what}`, async () => {
      const file = await suite.files.file('edge.yaml', text);
      const version = await feedVersion(suite.t);
      for (const command of ['apply', 'diff'] as const) {
        const ran = await edge(suite.t, suite.owner.api_key, command, ['-f', file]);
        assert.equal(ran.code, 1, ran.stdout + ran.stderr);
        assert.match(ran.stderr, /the file is not valid; nothing was sent/);
        assert.ok(ran.stderr.includes(file), `${ran.stderr} names the file`);
        assert.match(ran.stderr, message);
        assert.equal(ran.stdout, '');
      }
      assert.equal((await suite.t.api('GET', '/v1/endpoints', { key: suite.owner.api_key })).body.total, 0);
      assert.equal(await feedVersion(suite.t), version, 'nothing was written');
    });
  }

  it('locates mistakes in a JSON file too', async () => {
    const file = await suite.files.file('edge.json', '{\n  "version": 1,\n  "endpoints": {\n    "shop": { "tags": ["web"], "origin": "https://x.example.com" }\n  }\n}\n');
    const ran = await edge(suite.t, suite.owner.api_key, 'apply', ['-f', file]);
    assert.equal(ran.code, 1);
    assert.match(ran.stderr, /edge\.json:4:32: endpoints\.shop\.origin: unknown field/);
  });

  it('accepts the same file once the reference is set, and applies it', async () => {
    const file = await suite.files.file('edge.yaml', GOOD);
    const ran = await edge(suite.t, suite.owner.api_key, 'apply', ['-f', file], { ALICE_PASSWORD: 'alice-secret' });
    assert.equal(ran.code, 0, ran.stdout + ran.stderr);
    assert.equal((await suite.t.api('GET', '/v1/endpoints', { key: suite.owner.api_key })).body.total, 1);
  });

  it('refuses a file whose resources lack the --select-tag tag', async () => {
    const file = await suite.files.file('edge.yaml', GOOD);
    const ran = await edge(suite.t, suite.owner.api_key, 'diff', ['-f', file, '--select-tag', 'team-b'], { ALICE_PASSWORD: 'alice-secret' });
    assert.equal(ran.code, 1);
    assert.match(ran.stderr, /:4:11: endpoints\.shop\.tags: must carry the tag "team-b" \(--select-tag\)/);
  });
});
