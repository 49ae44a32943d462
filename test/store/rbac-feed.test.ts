// The rbac section of an endpoint's feed entry (docs/rbac.md "The snapshot"): roles in decision order without metadata,
// clients with identities and role ids, unredeemed invites (pending, or expired within 7 days), self-registration, client credentials merged into auth by
// mode; absent when nothing RBAC was written; the same number of queries whatever the number of clients.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import bcrypt from 'bcrypt';
import { TOPICS, type EndpointConfig } from '../../src/shared/snapshot.ts';
import { canonicalRbacPermissions } from '../../src/shared/rbac-permissions.ts';
import * as accounts from '../../src/store/accounts.ts';
import type { Queryable } from '../../src/store/db.ts';
import { endpointRecord, MAX_EXPIRED_INVITES } from '../../src/store/endpoint-feed.ts';
import { touch } from '../../src/store/feed-changes.ts';
import { insertEndpoint } from '../../src/store/endpoints.ts';
import * as rbac from '../../src/store/rbac.ts';
import { writeAuthSettings } from '../../src/store/visitor-auth.ts';
import { openTestDatabase, type TestDatabase } from '../helpers/db.ts';

const HASH = bcrypt.hashSync('pw', 10);
const digest = () => randomBytes(32).toString('base64url');
const rpad = (s: string) => s.padEnd(43, 'x');

describe(`RBAC in the endpoint feed (${process.env.DATABASE_URL ? 'PostgreSQL' : 'PGlite'})`, () => {
  let t: TestDatabase;
  let user: { id: number; account: number };
  before(async () => {
    t = await openTestDatabase();
    const created = await t.db.transaction((tx) => accounts.createUser(tx, { email: 'rbac-feed@example.test', plan: 'pro' }));
    user = { id: created.user.id, account: created.account.id };
  });
  after(() => t.close());

  const sql = async <R = any>(text: string, params: unknown[] = []) => (await t.db.query<R>(text, params)).rows;

  async function newEndpoint(): Promise<{ id: number; uuid: string }> {
    const sub = `rbac-${randomBytes(4).toString('hex')}`;
    const row = await t.db.transaction((tx) =>
      insertEndpoint(tx, { userId: user.id, accountId: user.account, domainId: null, subdomain: sub, hostname: `${sub}.example.test`, isCustom: false }),
    );
    assert.ok(row);
    return { id: row.id, uuid: row.uuid };
  }

  async function entry(uuid: string): Promise<EndpointConfig> {
    const rows = await sql<{ data: EndpointConfig }>('SELECT data FROM feed_entries WHERE topic = $1 AND key = $2', [TOPICS.endpoint, uuid]);
    assert.ok(rows[0], 'published');
    return typeof rows[0].data === 'string' ? JSON.parse(rows[0].data) : rows[0].data;
  }

  async function client(
    endpointId: number,
    identifier: string,
    c: { username?: string; token?: string; status?: string; email?: string } = {},
  ): Promise<number> {
    const rows = await sql<{ id: number }>(
      `INSERT INTO rbac_clients (endpoint_id, identifier, email, username, password_hash, token_digest, status)
       VALUES ($1, $2, $3, $4::text, CASE WHEN $4::text IS NULL THEN NULL ELSE $5 END, $6, $7) RETURNING id`,
      [endpointId, identifier, c.email ?? null, c.username ?? null, HASH, c.token ?? null, c.status ?? 'active'],
    );
    return rows[0].id;
  }

  const role = (endpointId: number, name: string, priority: number, permissions: object = {}, isDefault = false) =>
    t.db.transaction((tx) => rbac.insertRole(tx, endpointId, { name, priority, is_default: isDefault, permissions: canonicalRbacPermissions(permissions) }));
  const publish = (endpointId: number) => t.db.transaction(async (tx) => touch(tx, { endpoint: endpointId }));
  const authMode = (endpointId: number, mode: 'basic' | 'token' | 'none', extra: { basicUsers?: { username: string; passwordHash: string }[]; tokens?: { label: string; digest: string; expiresAt: null }[] } = {}) =>
    t.db.transaction((tx) => writeAuthSettings(tx, endpointId, { mode, modeConfig: {}, sessionTtlSeconds: null, enabledAuthMethods: [], enforceHttps: false, ...extra }));

  it('publishes rbac null for an endpoint that never had RBAC written', async () => {
    const ep = await newEndpoint();
    assert.equal((await entry(ep.uuid)).rbac, null);
  });

  it('publishes roles by decision order without metadata, clients with identities and role ids, pending invites, self-registration', async () => {
    const ep = await newEndpoint();
    const low = await role(ep.id, 'low', 1, { allowed_methods: ['GET'], allowed_paths: ['/api/*'], metadata: { team: 'x' } });
    const high = await role(ep.id, 'high', 50, { denied_paths: ['/admin'], headers: { 'X-Role': 'high' }, rate_limit_rps: 3 });
    const tie = await role(ep.id, 'tie', 1);
    const alice = await client(ep.id, 'alice', { email: 'alice@example.com', username: 'alice' });
    const bob = await client(ep.id, 'bob', { status: 'disabled' });
    const invited = await client(ep.id, 'invited@example.com', { status: 'invited', email: 'invited@example.com' });
    const used = await client(ep.id, 'used', { status: 'invited' });
    const expired = await client(ep.id, 'expired', { status: 'invited' });
    const stale = await client(ep.id, 'stale', { status: 'invited' });
    await sql(`INSERT INTO rbac_client_identities (client_id, endpoint_id, provider, subject) VALUES ($1, $2, '7', 'sub-b'), ($1, $2, '7', 'sub-a')`, [alice, ep.id]);
    const pending = digest();
    const justExpired = digest();
    await sql(
      `INSERT INTO rbac_invites (endpoint_id, client_id, token_digest, expires_at, redeemed_at) VALUES
         ($1, $2, $3, '2999-01-02T03:04:05.678Z', NULL), ($1, $4, $5, '2999-01-01T00:00:00Z', now()), ($1, $6, $7, now() - interval '1 minute', NULL),
         ($1, $8, $9, now() - interval '8 days', NULL)`,
      [ep.id, invited, pending, used, digest(), expired, justExpired, stale, digest()],
    );
    await sql(`INSERT INTO endpoint_rbac_settings (endpoint_id, self_registration_enabled, self_registration_domains) VALUES ($1, true, '{example.com}')`, [ep.id]);
    await t.db.transaction(async (tx) => {
      assert.equal(await rbac.addMembership(tx, ep.id, alice, high.id, null), 'added');
      assert.equal(await rbac.addMembership(tx, ep.id, alice, low.id, user.id), 'added');
    });

    const config = await entry(ep.uuid);
    assert.ok(config.rbac);
    assert.deepEqual(
      config.rbac.roles.map((r) => r.id),
      [high.id, low.id, tie.id],
      'priority descending, then id',
    );
    assert.deepEqual(config.rbac.roles[1], {
      id: low.id,
      name: 'low',
      priority: 1,
      permissions: { allowed_methods: ['GET'], denied_methods: [], allowed_paths: ['/api/*'], denied_paths: [], rate_limit_rps: 0, headers: {} },
    });
    assert.deepEqual(config.rbac.roles[0].permissions.headers, { 'x-role': 'high' });
    assert.deepEqual(config.rbac.clients, [
      {
        id: alice,
        identifier: 'alice',
        status: 'active',
        email: 'alice@example.com',
        identities: [
          { provider: '7', subject: 'sub-a' },
          { provider: '7', subject: 'sub-b' },
        ],
        role_ids: [low.id, high.id].sort((a, b) => a - b),
      },
      { id: bob, identifier: 'bob', status: 'disabled', email: null, identities: [], role_ids: [] },
      { id: invited, identifier: 'invited@example.com', status: 'invited', email: 'invited@example.com', identities: [], role_ids: [] },
      { id: used, identifier: 'used', status: 'invited', email: null, identities: [], role_ids: [] },
      { id: expired, identifier: 'expired', status: 'invited', email: null, identities: [], role_ids: [] },
      { id: stale, identifier: 'stale', status: 'invited', email: null, identities: [], role_ids: [] },
    ]);
    const [{ at }] = await sql<{ at: Date }>('SELECT expires_at AS at FROM rbac_invites WHERE client_id = $1', [expired]);
    assert.deepEqual(
      config.rbac.invites,
      [
        { client_id: invited, digest: pending, expires_at: '2999-01-02T03:04:05.678Z' },
        { client_id: expired, digest: justExpired, expires_at: new Date(at).toISOString() },
      ],
      'a redeemed invite and one expired over 7 days ago left out; one that just expired kept, so the edge says "expired"',
    );
    assert.deepEqual(config.rbac.self_registration, { enabled: true, allowed_email_domains: ['example.com'] });
    assert.ok(!JSON.stringify(config.rbac).includes(HASH), 'credentials travel in auth only');
    assert.equal(config.auth, undefined, 'no visitor auth settings: nothing to merge into');
  });

  it('keeps at most MAX_EXPIRED_INVITES recently expired invites, the most recently expired, beside every pending one', async () => {
    const ep = await newEndpoint();
    const n = MAX_EXPIRED_INVITES + 5;
    // n invited clients whose invites expired i minutes ago (i = 1..n), and one pending invite.
    await sql(
      `WITH c AS (INSERT INTO rbac_clients (endpoint_id, identifier, status) SELECT $1, 'invitee-' || i, 'invited' FROM generate_series(1, $2::int) AS i RETURNING id, identifier)
       INSERT INTO rbac_invites (endpoint_id, client_id, token_digest, expires_at)
       SELECT $1, c.id, rpad(c.identifier, 43, 'x'), now() - make_interval(mins => substring(c.identifier from 9)::int) FROM c`,
      [ep.id, n],
    );
    const pending = await client(ep.id, 'pending', { status: 'invited' });
    await sql(`INSERT INTO rbac_invites (endpoint_id, client_id, token_digest, expires_at) VALUES ($1, $2, $3, now() + interval '1 day')`, [ep.id, pending, digest()]);
    await publish(ep.id);
    const invites = (await entry(ep.uuid)).rbac!.invites;
    assert.equal(invites.length, MAX_EXPIRED_INVITES + 1);
    assert.ok(invites.some((i) => i.client_id === pending), 'the pending invite is always there');
    const kept = new Set(invites.map((i) => i.digest));
    assert.ok(kept.has(rpad('invitee-1')) && kept.has(rpad(`invitee-${MAX_EXPIRED_INVITES}`)), 'the most recently expired kept');
    assert.ok(!kept.has(rpad(`invitee-${MAX_EXPIRED_INVITES + 1}`)) && !kept.has(rpad(`invitee-${n}`)), 'the oldest left out');
  });

  it('publishes self-registration off and the section present for a settings row alone', async () => {
    const ep = await newEndpoint();
    await sql(`INSERT INTO endpoint_rbac_settings (endpoint_id) VALUES ($1)`, [ep.id]);
    await publish(ep.id);
    assert.deepEqual((await entry(ep.uuid)).rbac, { roles: [], clients: [], invites: [], self_registration: { enabled: false, allowed_email_domains: [] } });
  });

  it('merges client usernames into basic_users in mode basic: every status but invited; the settings’ own user keeps a shared name', async () => {
    const ep = await newEndpoint();
    const settingsHash = bcrypt.hashSync('settings', 10);
    await authMode(ep.id, 'basic', { basicUsers: [{ username: 'shared', passwordHash: settingsHash }] });
    const active = await client(ep.id, 'a', { username: 'ann', token: digest() });
    const revoked = await client(ep.id, 'r', { username: 'rex', status: 'revoked' });
    await client(ep.id, 'i', { username: 'ivy', status: 'invited' });
    await client(ep.id, 'n');
    await client(ep.id, 's', { username: 'shared' });
    await role(ep.id, 'any', 0);

    const auth = (await entry(ep.uuid)).auth!;
    assert.equal(auth.mode, 'basic');
    assert.deepEqual(
      auth.basic_users.map(({ id, client_id, username }) => ({ id, client_id, username })),
      [
        { id: auth.basic_users[0].id, client_id: undefined, username: 'shared' },
        { id: `rbac-client:${active}`, client_id: active, username: 'ann' },
        { id: `rbac-client:${revoked}`, client_id: revoked, username: 'rex' },
      ],
    );
    assert.equal(auth.basic_users[0].password_hash, settingsHash);
    assert.equal(auth.basic_users[1].password_hash, HASH);
    assert.deepEqual(auth.tokens, [], 'mode basic: no tokens');
  });

  it('merges client tokens into tokens in mode token (label the identifier, no expiry), none in other modes', async () => {
    const ep = await newEndpoint();
    const settingsDigest = digest();
    await authMode(ep.id, 'token', { tokens: [{ label: 'ci', digest: settingsDigest, expiresAt: null }] });
    const token = digest();
    const holder = await client(ep.id, 'robot', { token, username: 'robot' });
    const disabled = await client(ep.id, 'old-robot', { token: digest(), status: 'disabled' });
    await client(ep.id, 'dup', { token: settingsDigest });
    await role(ep.id, 'any', 0);

    let auth = (await entry(ep.uuid)).auth!;
    assert.deepEqual(
      auth.tokens.map((x) => ({ ...x })),
      [
        { id: auth.tokens[0].id, label: 'ci', digest: settingsDigest, expires_at: null },
        { id: `rbac-client:${holder}`, client_id: holder, label: 'robot', digest: token, expires_at: null },
        { id: `rbac-client:${disabled}`, client_id: disabled, label: 'old-robot', digest: auth.tokens[2].digest, expires_at: null },
      ],
    );
    assert.deepEqual(auth.basic_users, [], 'mode token: no basic users, a client username included');

    await authMode(ep.id, 'none');
    auth = (await entry(ep.uuid)).auth!;
    assert.deepEqual([auth.basic_users, auth.tokens], [[], []]);
  });

  it('republishes on every role and membership write, and removal leaves the client with no role ids', async () => {
    const ep = await newEndpoint();
    const c = await client(ep.id, 'c');
    const r = await role(ep.id, 'r', 0);
    await t.db.transaction((tx) => rbac.addMembership(tx, ep.id, c, r.id, null));
    assert.deepEqual((await entry(ep.uuid)).rbac!.clients[0].role_ids, [r.id]);
    await t.db.transaction((tx) => rbac.updateRole(tx, ep.id, r.id, { name: 'renamed', priority: 9 }));
    assert.deepEqual((await entry(ep.uuid)).rbac!.roles.map((x) => [x.name, x.priority]), [['renamed', 9]]);
    assert.equal(await t.db.transaction((tx) => rbac.removeMembership(tx, ep.id, c, r.id)), true);
    assert.deepEqual((await entry(ep.uuid)).rbac!.clients[0].role_ids, []);
    await t.db.transaction((tx) => rbac.deleteRole(tx, ep.id, r.id));
    assert.deepEqual((await entry(ep.uuid)).rbac!.roles, []);
  });

  it('gives a new client the default roles (assignDefaultRoles), idempotently', async () => {
    const ep = await newEndpoint();
    const d1 = await role(ep.id, 'd1', 0, {}, true);
    await role(ep.id, 'plain', 0);
    const d2 = await role(ep.id, 'd2', 0, {}, true);
    const c = await client(ep.id, 'new');
    assert.deepEqual(await rbac.defaultRoleIds(t.db, ep.id), [d1.id, d2.id]);
    assert.deepEqual(await t.db.transaction((tx) => rbac.assignDefaultRoles(tx, ep.id, c)), [d1.id, d2.id]);
    assert.deepEqual(await t.db.transaction((tx) => rbac.assignDefaultRoles(tx, ep.id, c)), [], 'already held: nothing added');
    assert.deepEqual((await rbac.listMemberships(t.db, ep.id)).map((m) => [m.client_id, m.role_id, m.assigned_by]), [
      [c, d1.id, null],
      [c, d2.id, null],
    ]);
  });

  it('loads the snapshot in the same number of queries for 1 client as for 60', async () => {
    const count = async (endpointId: number) => {
      let n = 0;
      await t.db.transaction(async (tx) => {
        const counting: Queryable = {
          query: (text, params) => {
            n++;
            return tx.query(text, params);
          },
        };
        await endpointRecord(counting, endpointId);
      });
      return n;
    };
    const small = await newEndpoint();
    const big = await newEndpoint();
    for (const ep of [small, big]) {
      await authMode(ep.id, 'basic', { basicUsers: [{ username: 'x', passwordHash: HASH }] });
      await role(ep.id, 'r', 0);
    }
    await client(small.id, 'only', { username: 'only' });
    await sql(
      `INSERT INTO rbac_clients (endpoint_id, identifier, username, password_hash) SELECT $1, 'c' || g, 'u' || g, $2 FROM generate_series(1, 60) AS g`,
      [big.id, HASH],
    );
    await sql(`INSERT INTO rbac_memberships (endpoint_id, client_id, role_id) SELECT $1, c.id, r.id FROM rbac_clients c, rbac_roles r WHERE c.endpoint_id = $1 AND r.endpoint_id = $1`, [big.id]);
    assert.equal(await count(big.id), await count(small.id));
    await publish(big.id);
    const config = await entry(big.uuid);
    assert.equal(config.rbac!.clients.length, 60);
    assert.equal(config.auth!.basic_users.length, 61);
  });
});
