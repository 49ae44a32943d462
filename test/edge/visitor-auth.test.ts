// Visitor authentication end to end: the real program configured through its control API (PUT …/settings, …/jwt,
// …/webhook, endpoint API keys), visitors on the edge's public listener, a real agent and local service, a real origin,
// and a real JWKS server whose keys rotate. What the service receives (never the credential, the edge's identity
// headers only), refusals, revocation on the next request, WebSocket upgrades, metrics and last_used_at.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { edgeCaughtUp, expectBody, type User } from '../helpers/endpoint-api.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit, wsUpgrade, type Reply } from '../helpers/http.ts';
import { makeKey, sign, startJwksServer, type JwksServer, type TestKey } from '../helpers/jwks-server.ts';
import { startLocalService } from '../helpers/local-service.ts';
import { sample } from '../helpers/metrics.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  /** Field names as the service received them, spelling kept. */
  names: string[];
  body: string;
}

/** A local service that answers every request with what it received, and echoes WebSocket messages with the upgrade's headers. */
function startService() {
  return startLocalService<Seen>(
    (req, res, record) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        const entry: Seen = { method: req.method!, url: req.url!, headers: req.headers, names: req.rawHeaders.filter((_, i) => i % 2 === 0), body };
        record(entry);
        const text = JSON.stringify(entry);
        // A length, not chunks, so a raw-socket reader can take the body as is.
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      });
    },
    (ws, req) => ws.on('message', (m) => ws.send(JSON.stringify({ message: String(m), headers: req.headers }))),
  );
}

/** A request on a raw socket (names sent exactly as written: underscores, repeats in other cases); the whole answer. */
function rawRequest(port: number, head: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(head));
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (d) => (text += d));
    socket.on('end', () => resolve({ status: Number(text.slice(9, 12)), body: text.slice(text.indexOf('\r\n\r\n') + 4) }));
    socket.on('error', reject);
  });
}

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const codeOf = (r: Reply) => (r.headers['x-edge-error'] as string | undefined) ?? null;
const json = { accept: 'application/json' };

describe('visitor auth at the edge', () => {
  let t: TestNode;
  let user: User;
  let service: Awaited<ReturnType<typeof startService>>;
  let jwks: JwksServer;
  let key1: TestKey;
  let edgePort: number;
  const agents: Agent[] = [];
  /** The edge's clock: the wall clock, or the time a test set, so expiry is reached by setting the time, not waiting. */
  let setTime: number | null = null;
  const edgeClock = { now: () => setTime ?? Date.now() };

  before(async () => {
    service = await startService();
    key1 = await makeKey('rotating-1');
    jwks = await startJwksServer([key1]);
    t = await startTestNode({
      // The JWKS server and the origin are on loopback.
      EDGE_ORIGIN_ALLOW_PRIVATE: 'true',
      // A short cooldown, so a rotated key is picked up within the test; the flood bound is tested on the stage.
      EDGE_JWKS_COOLDOWN_MS: '200',
      // Heartbeats and the credential-use job often enough for last_used_at to show up soon.
      EDGE_PRESENCE_INTERVAL_MS: '100',
      EDGE_JANITOR_INTERVAL_MS: '200',
    }, { clock: edgeClock });
    user = await t.createUser('business');
    edgePort = t.node.edge!.httpPort;
  });
  after(async () => {
    for (const a of agents) await a.stop();
    await t?.close();
    await service?.close();
    await jwks?.close();
  });

  /** Resolves once the edge serves everything the control API has committed so far. */
  const applied = () => edgeCaughtUp(t);
  const api = (method: string, path: string, body?: unknown, expect = 200) => expectBody(expect, t.api(method, path, { key: user.api_key, body }), `${method} ${path}`);
  /** A new endpoint served by a new agent in front of the service. */
  async function agentEndpoint(): Promise<{ uuid: string; host: string }> {
    const e = await api('POST', '/v1/endpoints', {}, 201);
    await applied();
    agents.push(await startAgent({ edgeUrl: `http://127.0.0.1:${edgePort}`, apiKey: user.api_key, endpoint: e.uuid, protocol: 'http', target: service.port }));
    return { uuid: e.uuid, host: e.hostname };
  }
  const settings = (uuid: string, body: unknown, path = '') => api('PUT', `/v1/endpoints/${uuid}/settings${path}`, body);
  const get = (host: string, headers: Record<string, string> = {}, path = '/') => visit(edgePort, host, path, { headers: { ...json, ...headers } });
  const seenBy = (r: Reply) => JSON.parse(r.body) as Seen;

  it('basic: 401 with the challenge without or with wrong credentials; the right ones reach the agent without Authorization, as X-Edge-Auth-User', async () => {
    const { uuid, host } = await agentEndpoint();
    await settings(uuid, { mode: 'basic', basic_users: [{ username: 'alice', password: 'alice-password-1' }], config: { realm: 'Team' } });
    await applied();
    const before = service.seen.length;
    const missing = await get(host);
    assert.equal(missing.status, 401);
    assert.equal(missing.headers['www-authenticate'], 'Basic realm="Team", charset="UTF-8"');
    assert.equal(codeOf(missing), 'auth_required');
    const wrong = await get(host, { authorization: basic('alice', 'nope') });
    assert.equal(wrong.status, 401);
    assert.equal(codeOf(wrong), 'invalid_credentials');
    assert.equal(service.seen.length, before, 'nothing refused reached the service');
    for (let i = 0; i < 3; i++) {
      const ok = await get(host, { authorization: basic('alice', 'alice-password-1') });
      assert.equal(ok.status, 200, ok.body);
      const seen = seenBy(ok);
      assert.equal(seen.headers.authorization, undefined, 'the credential is not forwarded');
      assert.equal(seen.headers['x-edge-auth-user'], 'alice');
    }
  });

  it('strips every visitor spelling of X-Edge-Auth-User, with auth on and with auth off', async () => {
    const on = await agentEndpoint();
    await settings(on.uuid, { mode: 'basic', basic_users: [{ username: 'alice', password: 'alice-password-1' }] });
    const off = await agentEndpoint();
    await applied();
    const spoofs = 'X-Edge-Auth-User: root\r\nx_edge_auth_user: root\r\nX-EDGE-AUTH_USER: root\r\nx-edge-auth-user: root\r\n';
    for (const [host, auth, expected] of [
      [on.host, `Authorization: ${basic('alice', 'alice-password-1')}\r\n`, 'alice'],
      [off.host, '', undefined],
    ] as const) {
      const r = await rawRequest(edgePort, `GET /spoof HTTP/1.1\r\nHost: ${host}\r\n${auth}${spoofs}Connection: close\r\n\r\n`);
      assert.equal(r.status, 200, r.body);
      const seen = JSON.parse(r.body) as Seen;
      const copies = seen.names.filter((n) => n.toLowerCase().replaceAll('_', '-') === 'x-edge-auth-user');
      assert.equal(copies.length, expected === undefined ? 0 : 1, `one field only, the edge's (${host})`);
      assert.equal(seen.headers['x-edge-auth-user'], expected);
    }
  });

  it('token: endpoint API keys as bearer tokens, refused from the request after a revocation reaches the edge', async () => {
    const { uuid, host } = await agentEndpoint();
    const key = await api('POST', `/v1/endpoints/${uuid}/api-keys`, { name: 'ci' }, 201);
    await settings(uuid, { mode: 'token' });
    await applied();
    const ok = await get(host, { authorization: `Bearer ${key.token}` });
    assert.equal(ok.status, 200, ok.body);
    assert.equal(seenBy(ok).headers.authorization, undefined);
    assert.equal(seenBy(ok).headers['x-edge-auth-user'], 'ci');
    const unknown = await get(host, { authorization: 'Bearer evk_not-a-real-key-000000000000000000000' });
    assert.equal(unknown.status, 401);
    assert.match(unknown.headers['www-authenticate'] as string, /^Bearer realm=".*", error="invalid_token"/);
    await api('DELETE', `/v1/endpoints/${uuid}/api-keys/${key.id}`, undefined, 204);
    await applied();
    const revoked = await get(host, { authorization: `Bearer ${key.token}` });
    assert.equal(revoked.status, 401);
    assert.equal(codeOf(revoked), 'invalid_credentials');
  });

  it('token: an expiring key is refused once its expires_at has passed, on the edge\'s clock (no waiting, whatever the machine\'s speed)', async () => {
    const { uuid, host } = await agentEndpoint();
    const expiresAt = Date.now() + 3_600_000;
    const key = await api('POST', `/v1/endpoints/${uuid}/api-keys`, { name: 'short', expires_at: new Date(expiresAt).toISOString() }, 201);
    await settings(uuid, { mode: 'token' });
    await applied();
    try {
      setTime = expiresAt - 1;
      const before = await get(host, { authorization: `Bearer ${key.token}` });
      assert.equal(before.status, 200, before.body);
      setTime = expiresAt;
      const expired = await get(host, { authorization: `Bearer ${key.token}` });
      assert.equal(expired.status, 401);
      assert.equal(JSON.parse(expired.body).detail, 'the token has expired');
    } finally {
      setTime = null;
    }
  });

  it('token from a header and from a cookie: that credential is not forwarded, the rest is', async () => {
    const token = 'settings-token-0123456789abcdef';
    const header = await agentEndpoint();
    await settings(header.uuid, { mode: 'token', tokens: [{ name: 'header user', token }], config: { header: 'X-Api-Token' } });
    const cookie = await agentEndpoint();
    await settings(cookie.uuid, { mode: 'token', tokens: [{ name: 'cookie user', token }], config: { cookie: 'edge_token' } });
    await applied();
    const viaHeader = await get(header.host, { 'x-api-token': token, authorization: 'Bearer app-own-token' });
    assert.equal(viaHeader.status, 200, viaHeader.body);
    assert.equal(seenBy(viaHeader).headers['x-api-token'], undefined);
    assert.equal(seenBy(viaHeader).headers.authorization, 'Bearer app-own-token', "Authorization is the application's in header mode");
    assert.equal((await get(header.host, { authorization: `Bearer ${token}` })).status, 401);
    // Underscore spellings of the token header are not the token (and never reach the service as one).
    assert.equal((await rawRequest(edgePort, `GET / HTTP/1.1\r\nHost: ${header.host}\r\nX_Api_Token: ${token}\r\nConnection: close\r\n\r\n`)).status, 401);

    const viaCookie = await get(cookie.host, { cookie: `theme=dark; edge_token=${token}; lang=en` });
    assert.equal(viaCookie.status, 200, viaCookie.body);
    assert.equal(seenBy(viaCookie).headers.cookie, 'theme=dark; lang=en');
    assert.equal(seenBy(viaCookie).headers['x-edge-auth-user'], 'cookie user');
    const only = await get(cookie.host, { cookie: `edge_token=${token}` });
    assert.equal(seenBy(only).headers.cookie, undefined, 'a Cookie field left empty is not sent');
  });

  it('token mode reading X-Api-Token plus the JWT layer: both required, claims mapped, spoofed claim headers stripped', async () => {
    const token = 'both-layers-token-0123456789ab';
    const { uuid, host } = await agentEndpoint();
    await settings(uuid, { mode: 'token', tokens: [{ name: 'svc', token }], config: { header: 'x-api-token' } });
    await settings(uuid, { enabled: true, jwks_url: jwks.url, audience: 'api://edge', claim_headers: JSON.stringify({ sub: 'X-User', groups: 'X-Groups', email: 'X-Email' }) }, '/jwt');
    await applied();
    const jwt = await sign(key1, { sub: 'user-7', groups: ['eng'], aud: 'api://edge' });
    const noJwt = await get(host, { 'x-api-token': token });
    assert.equal(noJwt.status, 401);
    assert.equal(noJwt.headers['www-authenticate'], `Bearer realm="${host}"`);
    const noToken = await get(host, { authorization: `Bearer ${jwt}` });
    assert.equal(noToken.status, 401);
    assert.equal(codeOf(noToken), 'auth_required');
    const both = await rawRequest(
      edgePort,
      `GET / HTTP/1.1\r\nHost: ${host}\r\nX-Api-Token: ${token}\r\nAuthorization: Bearer ${jwt}\r\n` +
        'X-User: admin\r\nx_user: admin\r\nX-Email: ceo@example.com\r\nX_EMAIL: ceo@example.com\r\nx-groups: root\r\nConnection: close\r\n\r\n',
    );
    assert.equal(both.status, 200, both.body);
    const seen = JSON.parse(both.body) as Seen;
    assert.equal(seen.headers['x-user'], 'user-7');
    assert.equal(seen.headers['x-groups'], '["eng"]');
    assert.equal(seen.headers['x-email'], undefined, 'a claim the token lacks: the header is absent, not the visitor copy');
    assert.deepEqual(seen.names.filter((n) => /^x[-_](user|email|groups)$/i.test(n)).map((n) => n.toLowerCase()).sort(), ['x-groups', 'x-user']);
    assert.equal(seen.headers['x-api-token'], undefined);
    assert.equal(seen.headers.authorization, `Bearer ${jwt}`, 'the JWT is forwarded as sent; the service may verify it too');
    assert.equal(seen.headers['x-edge-auth-user'], 'svc');
    const wrongAud = await get(host, { 'x-api-token': token, authorization: `Bearer ${await sign(key1, { sub: 'x', aud: 'api://other' })}` });
    assert.equal(wrongAud.status, 401);
    assert.equal(codeOf(wrongAud), 'invalid_token');
  });

  it('basic plus the JWT layer: the JWT goes in X-JWT-Assertion; a rotated key set is picked up; an unreachable JWKS is 503', async () => {
    const server = await startJwksServer([key1]);
    try {
      const { uuid, host } = await agentEndpoint();
      await settings(uuid, { mode: 'basic', basic_users: [{ username: 'bob', password: 'bob-password-12' }] });
      await settings(uuid, { enabled: true, jwks_url: server.url, claim_headers: JSON.stringify({ sub: 'x-sub' }) }, '/jwt');
      await applied();
      const auth = basic('bob', 'bob-password-12');
      const ok = await get(host, { authorization: auth, 'x-jwt-assertion': await sign(key1, { sub: 'bob@idp' }) });
      assert.equal(ok.status, 200, ok.body);
      assert.equal(seenBy(ok).headers['x-sub'], 'bob@idp');
      assert.equal(seenBy(ok).headers.authorization, undefined);

      const key2 = await makeKey('rotating-2', 'ES256');
      server.keys = [key2];
      const rotated = await eventually(async () => {
        const r = await get(host, { authorization: auth, 'x-jwt-assertion': await sign(key2, { sub: 'rotated' }) });
        return r.status === 200 ? r : undefined;
      });
      assert.equal(seenBy(rotated).headers['x-sub'], 'rotated');

      server.mode = 'drop';
      const key3 = await makeKey('never-published');
      const down = await eventually(async () => {
        const r = await get(host, { authorization: auth, 'x-jwt-assertion': await sign(key3, { sub: 'x' }) });
        return r.status === 401 ? undefined : r; // within the cooldown an unknown kid is a 401 without a fetch
      });
      assert.equal(down.status, 503);
      assert.equal(codeOf(down), 'auth_unavailable');
      assert.equal(down.headers['www-authenticate'], undefined);
      const held = await get(host, { authorization: auth, 'x-jwt-assertion': await sign(key2, { sub: 'still' }) });
      assert.equal(held.status, 200, 'a key fetched before still verifies while the JWKS is down');
    } finally {
      await server.close();
    }
  });

  it('token header configured with an underscore is forwarded upstream (and claim headers with one, and X_JWT_Assertion): no visitor spelling reaches the service', async () => {
    const token = 'underscore-token-0123456789abcdef';
    const tokenEp = await agentEndpoint();
    await settings(tokenEp.uuid, { mode: 'token', tokens: [{ name: 'svc', token }], config: { header: 'X_Api_Token' } });
    const claimEp = await agentEndpoint();
    await settings(claimEp.uuid, { enabled: true, jwks_url: jwks.url, claim_headers: JSON.stringify({ role: 'X_Role', sub: 'X-Sub' }) }, '/jwt');
    const assertionEp = await agentEndpoint();
    await settings(assertionEp.uuid, { mode: 'basic', basic_users: [{ username: 'alice', password: 'alice-password-1' }] });
    await settings(assertionEp.uuid, { enabled: true, jwks_url: jwks.url }, '/jwt');
    await applied();
    const spellings = (seen: Seen, key: string) => seen.names.filter((n) => n.toLowerCase().replaceAll('_', '-') === key);

    const p1 = await rawRequest(edgePort, `GET /p1 HTTP/1.1\r\nHost: ${tokenEp.host}\r\nX_Api_Token: ${token}\r\nX-Api-Token: other\r\nConnection: close\r\n\r\n`);
    assert.equal(p1.status, 200, p1.body);
    assert.deepEqual(spellings(JSON.parse(p1.body), 'x-api-token'), [], 'the token goes in no spelling');

    const jwt = await sign(key1, { sub: 'user-1' }); // no role claim
    const p2 = await rawRequest(edgePort, `GET /p2 HTTP/1.1\r\nHost: ${claimEp.host}\r\nAuthorization: Bearer ${jwt}\r\nX_Role: admin\r\nX-Role: admin\r\nx-sub: spoof\r\nX_Sub: spoof\r\nConnection: close\r\n\r\n`);
    assert.equal(p2.status, 200, p2.body);
    const seen2 = JSON.parse(p2.body) as Seen;
    assert.deepEqual(spellings(seen2, 'x-role'), [], 'the claim is absent: no visitor copy in any spelling');
    assert.deepEqual(spellings(seen2, 'x-sub').map((n) => n.toLowerCase()), ['x-sub']);
    assert.equal(seen2.headers['x-sub'], 'user-1');

    const assertion = await sign(key1, { sub: 'alice' });
    const p4 = await rawRequest(
      edgePort,
      `GET /p4 HTTP/1.1\r\nHost: ${assertionEp.host}\r\nAuthorization: ${basic('alice', 'alice-password-1')}\r\nX-JWT-Assertion: ${assertion}\r\nX_JWT_Assertion: forged.forged.forged\r\nConnection: close\r\n\r\n`,
    );
    assert.equal(p4.status, 200, p4.body);
    const seen4 = JSON.parse(p4.body) as Seen;
    assert.deepEqual(spellings(seen4, 'x-jwt-assertion').map((n) => n.toLowerCase()), ['x-jwt-assertion'], 'only the verified one');
    assert.equal(seen4.headers['x-jwt-assertion'], assertion);
  });

  it('webhook: GitHub’s test vector reaches the agent with its body; a mismatch or a missing signature does not', async () => {
    const { uuid, host } = await agentEndpoint();
    await settings(uuid, { enabled: true, header: 'X-Hub-Signature-256', algo: 'sha256', secret: "It's a Secret to Everybody", prefix: 'sha256=' }, '/webhook');
    await applied();
    const before = service.seen.length;
    const signature = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';
    const ok = await visit(edgePort, host, '/hook', { method: 'POST', headers: { ...json, 'x-hub-signature-256': signature, 'content-type': 'text/plain' }, body: 'Hello, World!' });
    assert.equal(ok.status, 200, ok.body);
    assert.equal(seenBy(ok).body, 'Hello, World!');
    assert.equal(seenBy(ok).headers['content-length'], '13');
    const mismatch = await visit(edgePort, host, '/hook', { method: 'POST', headers: { ...json, 'x-hub-signature-256': signature }, body: 'Hello, World?' });
    assert.equal(mismatch.status, 401);
    assert.equal(codeOf(mismatch), 'invalid_signature');
    const missing = await visit(edgePort, host, '/hook', { method: 'POST', headers: json, body: 'Hello, World!' });
    assert.equal(missing.status, 401);
    assert.equal(service.seen.length, before + 1, 'only the verified delivery reached the service');
    // An upgrade has no body: its signature is the HMAC of nothing, and nothing is forwarded as one.
    assert.equal((await wsUpgrade(edgePort, host, '/socket', { headers: {} })).status, 401);
    const empty = 'sha256=' + (await import('node:crypto')).createHmac('sha256', "It's a Secret to Everybody").update('').digest('hex');
    const upgraded = await wsUpgrade(edgePort, host, '/socket', { headers: { 'x-hub-signature-256': empty } });
    assert.equal(upgraded.status, 101);
    assert.equal(upgraded.echo!.headers['content-length'], undefined);
  });

  it('origin endpoints: basic auth and webhook bodies go through the same stages and the buffered body is forwarded', async () => {
    const e = await api('POST', '/v1/endpoints', {}, 201);
    await api('PUT', `/v1/endpoints/${e.uuid}/origin`, { url: `http://127.0.0.1:${service.port}` });
    await settings(e.uuid, { mode: 'basic', basic_users: [{ username: 'carol', password: 'carol-password-1' }] });
    await settings(e.uuid, { enabled: true, header: 'x-signature', algo: 'sha1', secret: 'origin-secret' }, '/webhook');
    await applied();
    const { createHmac } = await import('node:crypto');
    const body = JSON.stringify({ event: 'push', n: 1 });
    const headers = { ...json, authorization: basic('carol', 'carol-password-1'), 'x-signature': createHmac('sha1', 'origin-secret').update(body).digest('hex') };
    const ok = await visit(edgePort, e.hostname, '/o', { method: 'POST', headers, body });
    assert.equal(ok.status, 200, ok.body);
    assert.equal(seenBy(ok).body, body);
    assert.equal(seenBy(ok).headers.authorization, undefined);
    assert.equal(seenBy(ok).headers['x-edge-auth-user'], 'carol');
    assert.equal((await visit(edgePort, e.hostname, '/o', { method: 'POST', headers: { ...headers, authorization: basic('carol', 'x') }, body })).status, 401);
  });

  it('WebSocket upgrades go through the same stages: refused without credentials, carried with them, without the credential', async () => {
    const { uuid, host } = await agentEndpoint();
    await settings(uuid, { mode: 'basic', basic_users: [{ username: 'dave', password: 'dave-password-12' }] });
    await applied();
    assert.equal((await wsUpgrade(edgePort, host, '/socket', { headers: {} })).status, 401);
    assert.equal((await wsUpgrade(edgePort, host, '/socket', { headers: { authorization: basic('dave', 'wrong') } })).status, 401);
    const ok = await wsUpgrade(edgePort, host, '/socket', { headers: { authorization: basic('dave', 'dave-password-12'), 'x-edge-auth-user': 'root' } });
    assert.equal(ok.status, 101);
    assert.equal(ok.echo!.message, 'ping');
    assert.equal(ok.echo!.headers.authorization, undefined);
    assert.equal(ok.echo!.headers['x-edge-auth-user'], 'dave');
  });

  it('counts outcomes per endpoint on /metrics and writes last_used_at from the heartbeat', async () => {
    const { uuid, host } = await agentEndpoint();
    const key = await api('POST', `/v1/endpoints/${uuid}/api-keys`, { name: 'metered' }, 201);
    await settings(uuid, { mode: 'token' });
    await applied();
    assert.equal((await get(host, { authorization: `Bearer ${key.token}` })).status, 200);
    assert.equal((await get(host, { authorization: `Bearer ${key.token}` })).status, 200);
    assert.equal((await get(host)).status, 401);
    assert.equal((await get(host, { authorization: 'Bearer evk_wrong-wrong-wrong-wrong-wrong-wrong' })).status, 401);
    const metrics = (await visit(t.node.edge!.opsPort, '127.0.0.1', '/metrics')).body;
    const value = (outcome: string) => sample(metrics, 'edge_auth_outcomes_total', { endpoint: uuid, stage: 'auth', outcome });
    assert.equal(value('ok'), 2);
    assert.equal(value('missing'), 1);
    assert.equal(value('invalid'), 1);
    const used = await eventually(async () => {
      const keys = await api('GET', `/v1/endpoints/${uuid}/api-keys`);
      return keys.items[0].last_used_at ?? undefined;
    });
    assert.ok(Date.parse(used) <= Date.now());
  });
});
