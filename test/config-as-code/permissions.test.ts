// The commands are API clients under the key's own permissions: in an organization (--account-id), a member who may
// only read endpoints can diff and export (without the password hashes and alert rules the API keeps from such a
// key) but not apply.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { orgWithMember } from '../helpers/endpoint-api.ts';
import { configSuite, edge } from './support.ts';

describe('edge diff, apply and export with a read-only key in an organization', () => {
  const suite = configSuite();
  let org: string;
  let readerKey: string;
  let file: string;

  before(async () => {
    const reader = await suite.t.createUser('free');
    readerKey = reader.api_key;
    org = String((await orgWithMember(suite.t, suite.owner, reader, ['endpoints:read'])).id);
    file = await suite.files.file('org.yaml', {
      version: 1,
      endpoints: { 'org-shop': { tags: ['org'], auth: { mode: 'basic', basic_users: [{ username: 'alice', password: '${ALICE}' }] } } },
    });
    const applied = await edge(suite.t, suite.owner.api_key, 'apply', ['-f', file, '--account-id', org], { ALICE: 'alice-password' });
    assert.equal(applied.code, 0, applied.stdout + applied.stderr);
  });

  it('the reader diffs and exports, and export leaves out the users it cannot read', async () => {
    const exported = await edge(suite.t, readerKey, 'export', ['--account-id', org]);
    assert.equal(exported.code, 0, exported.stderr);
    assert.match(exported.stderr, /this API key may not read alert rules \(traffic:read\): none are in the file/);
    assert.match(exported.stderr, /org-shop\.edge\.localhost: this API key cannot read the basic users' password hashes \(endpoints:update\); auth left out/);
    assert.deepEqual(parse(exported.stdout).endpoints, { 'org-shop.edge.localhost': { tags: ['org'] } });
    const diff = await edge(suite.t, readerKey, 'diff', ['-f', file, '--account-id', org], { ALICE: 'alice-password' });
    assert.equal(diff.code, 2, 'without the hash the password cannot be shown unchanged');
    assert.match(diff.stdout, /auth\.basic_users: \[\{"username":"alice","password_hash":null\}\] → \[\{"username":"alice","password":"\(changed\)"\}\]/);
  });

  it('the reader’s apply is refused by the API and says so', async () => {
    const renamed = await suite.files.file('org2.yaml', { version: 1, endpoints: { 'org-shop': { tags: ['org', 'more'] } } });
    const ran = await edge(suite.t, readerKey, 'apply', ['-f', renamed, '--account-id', org]);
    assert.equal(ran.code, 1);
    assert.match(ran.stdout, /failed: update endpoint org-shop\.edge\.localhost: tags: 403 /);
    const owner = await edge(suite.t, suite.owner.api_key, 'diff', ['-f', file, '--account-id', org], { ALICE: 'alice-password' });
    assert.equal(owner.code, 0, 'nothing changed');
  });
});
