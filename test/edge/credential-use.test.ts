// The edge's record of visitor credential uses for the heartbeat: last use per id, most recent kept within the bound.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CredentialUse } from '../../src/edge/credential-use.ts';
import { latestUses } from '../../src/worker/credential-use.ts';

describe('credential use', () => {
  it('reports nothing before the first use', () => {
    assert.deepEqual(new CredentialUse().report(), {});
  });

  it('keeps the last use of each id, as ISO times, per kind', () => {
    let now = Date.parse('2030-05-01T10:00:00Z');
    const use = new CredentialUse(10, () => now);
    use.basicUser('1');
    use.token('9');
    now += 5_000;
    use.basicUser('1');
    assert.deepEqual(use.report(), { credential_use: { basic_users: { '1': '2030-05-01T10:00:05.000Z' }, tokens: { '9': '2030-05-01T10:00:00.000Z' } } });
  });

  it('forgets the least recently used ids beyond its bound', () => {
    let now = 0;
    const use = new CredentialUse(3, () => ++now);
    for (const id of ['1', '2', '3']) use.token(id);
    use.token('1'); // used again: now the most recent
    use.token('4');
    assert.deepEqual(Object.keys(use.report().credential_use!.tokens!).sort(), ['1', '3', '4']);
  });

  it('is read by the worker as it is written (ids and times parse)', () => {
    const use = new CredentialUse(10, () => Date.parse('2030-05-01T10:00:00Z'));
    use.basicUser('5');
    use.token('6');
    const heartbeat = { node: 'n', region: 'r', version: 1, heartbeat_at: new Date().toISOString(), agents: [], ...use.report() };
    const latest = latestUses([heartbeat]);
    assert.equal(latest.basicUsers.get(5), Date.parse('2030-05-01T10:00:00Z'));
    assert.equal(latest.tokens.get(6), Date.parse('2030-05-01T10:00:00Z'));
  });
});
