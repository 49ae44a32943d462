// What an apply may touch: --dry-run changes nothing, without --prune nothing is deleted, --prune deletes what the
// file does not name, and --select-tag keeps two teams' files on one account from fighting.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { configSuite, edge } from './support.ts';

const rule = (rpw: number, tags: string[]) => ({ requests_per_window: rpw, window_size_seconds: 60, action: 'block', tags });

/** A team's file: endpoints `<team>-<n>` tagged with the team, each with one or two rules. */
function teamFile(team: string, names: string[], extraRule = true) {
  return {
    version: 1,
    endpoints: Object.fromEntries(
      names.map((n) => [`${team}-${n}`, { tags: [team], rate_limits: { main: rule(10, [team]), ...(extraRule ? { extra: rule(50, [team]) } : {}) } }]),
    ),
  };
}

describe('edge apply --dry-run, --prune and --select-tag', () => {
  const suite = configSuite();
  const hostnames = async () => ((await suite.t.api('GET', '/v1/endpoints?page_size=100', { key: suite.owner.api_key })).body.items as any[]).map((e) => e.subdomain).sort();
  const ruleNames = async () => ((await suite.t.api('GET', '/v1/firewall/rate-limits?limit=100', { key: suite.owner.api_key })).body.rules as any[]).map((r) => `${r.endpoint_uuid.slice(0, 0)}${r.name}`).sort();


  it('--dry-run prints the plan and changes nothing', async () => {
    const file = await suite.files.file('a.yaml', teamFile('alpha', ['one', 'two']));
    const ran = await edge(suite.t, suite.owner.api_key, 'apply', ['-f', file, '--dry-run']);
    assert.equal(ran.code, 0);
    assert.match(ran.stdout, /\+ create endpoint alpha-one\.edge\.localhost/);
    assert.match(ran.stdout, /Plan: 6 to create, 0 to update, 0 to delete\.\nDry run: nothing was changed\./);
    assert.deepEqual(await hostnames(), []);
  });

  it('updates field by field, and deletes nothing without --prune', async () => {
    const file = await suite.files.file('a.yaml', teamFile('alpha', ['one', 'two']));
    assert.equal((await edge(suite.t, suite.owner.api_key, 'apply', ['-f', file])).code, 0);
    const smaller = teamFile('alpha', ['one'], false);
    smaller.endpoints['alpha-one'].rate_limits.main.requests_per_window = 20;
    const edited = await suite.files.file('a.yaml', smaller);
    const diff = await edge(suite.t, suite.owner.api_key, 'diff', ['-f', edited]);
    assert.equal(diff.code, 2);
    assert.equal(diff.stdout, '~ update rate limit alpha-one.edge.localhost/main\n    requests_per_window: 10 → 20\n\nPlan: 0 to create, 1 to update, 0 to delete.\n');
    assert.equal((await edge(suite.t, suite.owner.api_key, 'apply', ['-f', edited])).code, 0);
    assert.deepEqual(await hostnames(), ['alpha-one', 'alpha-two']);
    assert.deepEqual(await ruleNames(), ['extra', 'extra', 'main', 'main']);
  });

  it('--prune deletes the endpoints and rules the file does not name', async () => {
    const smaller = teamFile('alpha', ['one'], false);
    smaller.endpoints['alpha-one'].rate_limits.main.requests_per_window = 20;
    const edited = await suite.files.file('a.yaml', smaller);
    const diff = await edge(suite.t, suite.owner.api_key, 'diff', ['-f', edited, '--prune']);
    assert.equal(diff.code, 2);
    assert.match(diff.stdout, /- delete rate limit alpha-one\.edge\.localhost\/extra\n/);
    assert.match(diff.stdout, /- delete endpoint alpha-two\.edge\.localhost\n/);
    assert.match(diff.stdout, /Plan: 0 to create, 0 to update, 2 to delete\./);
    const ran = await edge(suite.t, suite.owner.api_key, 'apply', ['-f', edited, '--prune']);
    assert.equal(ran.code, 0, ran.stdout);
    assert.match(ran.stdout, /Apply: 0 created, 0 updated, 2 deleted, 0 failed\./);
    assert.deepEqual(await hostnames(), ['alpha-one']);
    assert.deepEqual(await ruleNames(), ['main']);
  });

  it('--select-tag manages one team’s resources and leaves the other’s alone, even with --prune', async () => {
    const alpha = await suite.files.file('a.yaml', teamFile('alpha', ['one']));
    const beta = await suite.files.file('b.yaml', teamFile('beta', ['one', 'two']));
    assert.equal((await edge(suite.t, suite.owner.api_key, 'apply', ['-f', beta, '--select-tag', 'beta', '--prune'])).code, 0);
    const again = await edge(suite.t, suite.owner.api_key, 'apply', ['-f', alpha, '--select-tag', 'alpha', '--prune']);
    assert.equal(again.code, 0, again.stdout);
    assert.match(again.stdout, /Apply: 1 created, 1 updated, 0 deleted, 0 failed\./, 'alpha-one gains its extra rule and main goes back to 10; beta is not touched');
    assert.deepEqual(await hostnames(), ['alpha-one', 'beta-one', 'beta-two']);
    for (const [file, tag] of [[alpha, 'alpha'], [beta, 'beta']]) assert.equal((await edge(suite.t, suite.owner.api_key, 'diff', ['-f', file, '--select-tag', tag, '--prune'])).code, 0);
    // Without the tag, alpha's file would prune beta's endpoints.
    const unscoped = await edge(suite.t, suite.owner.api_key, 'diff', ['-f', alpha, '--prune']);
    assert.match(unscoped.stdout, /- delete endpoint beta-one\.edge\.localhost/);

    const exported = await edge(suite.t, suite.owner.api_key, 'export', ['--select-tag', 'beta']);
    assert.deepEqual(Object.keys(parse(exported.stdout).endpoints).sort(), ['beta-one.edge.localhost', 'beta-two.edge.localhost']);
  });

  it('a rule without the tag on a selected endpoint is outside the selection', async () => {
    const id = ((await suite.t.api('GET', '/v1/endpoints?q=beta-one', { key: suite.owner.api_key })).body.items as any[])[0].uuid;
    const res = await suite.t.api('POST', '/v1/firewall/rate-limits', { key: suite.owner.api_key, body: { endpoint_id: id, name: 'by-hand', ...rule(5, []) } });
    assert.equal(res.status, 201, res.text);
    const beta = await suite.files.file('b.yaml', teamFile('beta', ['one', 'two']));
    assert.equal((await edge(suite.t, suite.owner.api_key, 'diff', ['-f', beta, '--select-tag', 'beta', '--prune'])).code, 0);
    const unscoped = await edge(suite.t, suite.owner.api_key, 'diff', ['-f', beta, '--prune']);
    assert.match(unscoped.stdout, /- delete rate limit beta-one\.edge\.localhost\/by-hand/);
  });
});
