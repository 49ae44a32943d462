// Two applies racing on one account end consistent: conflicts are re-planned or reported, a rule both created is
// kept once, and a diff afterwards finds nothing to change.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { configSuite, edge } from './support.ts';

function file(names: string[], rpw = 10) {
  return {
    version: 1,
    endpoints: Object.fromEntries(
      names.map((n) => [
        n,
        {
          tags: ['race'],
          rbac_roles: { reader: { permissions: { allowed_methods: ['GET'] } } },
          rate_limits: { main: { requests_per_window: rpw, window_size_seconds: 60, action: 'block' }, burst: { requests_per_window: 5, window_size_seconds: 1, action: 'throttle' } },
          routing_rules: { api: { target_agent_tags: ['api'], conditions: [{ condition_type: 'path', pattern: '/api' }] } },
          alerts: { slow: { metric: 'latency_p95_ms', comparison: 'gt', threshold: 500, channels: [{ type: 'email', to: 'ops@example.com' }] } },
        },
      ]),
    ),
  };
}

describe('two edge apply runs racing on one account', () => {
  const suite = configSuite();


  it('of the same file end with every resource once and nothing left to change', async () => {
    const names = Array.from({ length: 8 }, (_, i) => `race-${i}`);
    const path = await suite.files.file('race.yaml', file(names));
    const runs = await Promise.all([edge(suite.t, suite.owner.api_key, 'apply', ['-f', path]), edge(suite.t, suite.owner.api_key, 'apply', ['-f', path])]);
    for (const r of runs) {
      // An apply that lost a race either re-planned (exit 0) or names what it could not do (exit 1): never silent.
      if (r.code !== 0) assert.match(r.stdout, /failed: .*409|not attempted/, r.stdout);
    }
    const diff = await edge(suite.t, suite.owner.api_key, 'diff', ['-f', path, '--prune']);
    if (diff.code !== 0) {
      // What a losing run reported is finished by running it again.
      assert.equal((await edge(suite.t, suite.owner.api_key, 'apply', ['-f', path])).code, 0);
    }
    assert.equal((await edge(suite.t, suite.owner.api_key, 'diff', ['-f', path, '--prune'])).code, 0);
    const rules = (await suite.t.api('GET', '/v1/firewall/rate-limits?limit=100', { key: suite.owner.api_key })).body.rules as any[];
    assert.equal(rules.length, names.length * 2, 'each rule once');
    const alerts = (await suite.t.api('GET', '/v1/traffic/alerts', { key: suite.owner.api_key })).body.items as any[];
    assert.equal(alerts.length, names.length);
    for (const e of (await suite.t.api('GET', '/v1/endpoints?page_size=100', { key: suite.owner.api_key })).body.items as any[]) {
      assert.equal((await suite.t.api('GET', `/v1/endpoints/${e.uuid}/routing-rules`, { key: suite.owner.api_key })).body.items.length, 1);
      assert.equal((await suite.t.api('GET', `/v1/endpoints/${e.uuid}/rbac/roles`, { key: suite.owner.api_key })).body.length, 1);
    }
  });

  it('of two files setting one rule differently end with one file’s value whole, never a mix', async () => {
    const names = ['race-0', 'race-1', 'race-2'];
    const ten = await suite.files.file('ten.yaml', file(names, 10));
    const twenty = await suite.files.file('twenty.yaml', file(names, 20));
    await Promise.all([edge(suite.t, suite.owner.api_key, 'apply', ['-f', ten]), edge(suite.t, suite.owner.api_key, 'apply', ['-f', twenty])]);
    const values = new Set(((await suite.t.api('GET', '/v1/firewall/rate-limits?limit=100&search=main', { key: suite.owner.api_key })).body.rules as any[]).map((r) => r.requests_per_window));
    assert.equal(values.size <= 2, true);
    // Each rule holds a value one file gave it, and one more apply of either file settles every rule on it.
    for (const v of values) assert.ok(v === 10 || v === 20);
    assert.equal((await edge(suite.t, suite.owner.api_key, 'apply', ['-f', twenty])).code, 0);
    assert.equal((await edge(suite.t, suite.owner.api_key, 'diff', ['-f', twenty])).code, 0);
  });
});
