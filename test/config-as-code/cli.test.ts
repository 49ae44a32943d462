// `edge diff`, `edge apply` and `edge export` as an operator runs them: the real `edge` binary, the API key and
// control URL from flags or the environment, and diff's exit status for CI drift detection (0 none, 2 some, 1 error).
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { before, describe, it } from 'node:test';
import { cleanEnv, run } from '../helpers/serve-process.ts';
import { configSuite } from './support.ts';

describe('the edge diff / apply / export commands', () => {
  const suite = configSuite();
  let file: string;

  before(async () => {
    file = await suite.files.file('edge.yaml', { version: 1, endpoints: { 'cli-shop': { tags: ['shop'], health_check: { enabled: true, path: '/up' } } } });
  });

  it('diff exits 2 on drift, apply makes it so, and diff then exits 0', async () => {
    const env = cleanEnv({ EDGE_API_KEY: suite.owner.api_key, EDGE_CONTROL_URL: suite.t.controlUrl });
    const drift = await run(['diff', '-f', file], env);
    assert.equal(drift.code, 2, drift.stderr);
    assert.match(drift.stdout, /\+ create endpoint cli-shop\.edge\.localhost\n {4}tags: \["shop"\]\n {4}health_check: \{"enabled":true,"path":"\/up","interval_seconds":60\}/);
    const applied = await run(['apply', '-f', file], env);
    assert.equal(applied.code, 0, applied.stderr);
    assert.match(applied.stdout, /created endpoint cli-shop\.edge\.localhost\nApply: 1 created, 0 updated, 0 deleted, 0 failed\./);
    const clean = await run(['diff', '-f', file, '--api-key', suite.owner.api_key, '--control-url', suite.t.controlUrl], cleanEnv({}));
    assert.equal(clean.code, 0, clean.stderr);
    assert.equal(clean.stdout, 'No changes: the account matches the file.\n');
  });

  it('export writes JSON to a file', async () => {
    const out = `${suite.files.dir}/out.json`;
    const ran = await run(['export', '-o', 'json', '--file', out, '--api-key', suite.owner.api_key, '--control-url', suite.t.controlUrl], cleanEnv({}));
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal(ran.stdout, '');
    const doc = JSON.parse(await readFile(out, 'utf8'));
    assert.deepEqual(doc, { version: 1, endpoints: { 'cli-shop.edge.localhost': { tags: ['shop'], health_check: { enabled: true, path: '/up' } } } });
  });

  it('exits 1 naming the problem: no API key, a refused key, an unreachable node, a bad flag', async () => {
    const noKey = await run(['diff', '-f', file, '--control-url', suite.t.controlUrl], cleanEnv({}));
    assert.equal(noKey.code, 1);
    assert.match(noKey.stderr, /an API key is needed: --api-key or EDGE_API_KEY/);
    const badKey = await run(['diff', '-f', file, '--api-key', 'nope', '--control-url', suite.t.controlUrl], cleanEnv({}));
    assert.equal(badKey.code, 1);
    assert.match(badKey.stderr, /edge diff: GET \/v1\/.*: 401 /);
    const down = await run(['diff', '-f', file, '--api-key', suite.owner.api_key, '--control-url', 'http://127.0.0.1:1'], cleanEnv({}));
    assert.equal(down.code, 1);
    assert.match(down.stderr, /unreachable/);
    const flag = await run(['apply', '-f', file, '-o', 'json'], cleanEnv({ EDGE_API_KEY: suite.owner.api_key }));
    assert.equal(flag.code, 1);
    assert.match(flag.stderr, /--output does not apply to apply/);
    const help = await run(['help'], cleanEnv({}));
    assert.match(help.stdout, /diff \| apply \| export/);
  });
});
