// The HTTP/2 header block the edge sends an agent, built in one pass over the visitor's raw header lines: checked
// case by case, and against the older three-copy composition on requests parsed by a real Node HTTP server. Then the
// visitor's copies of the edge's own fields, in every spelling, through a real agent and a real origin.
import { after, before, describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http, { type IncomingMessage } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { originRequestHeaders, tunnelRequestHeaders, type ForwardFacts } from '../../src/edge/http/proxy-headers.ts';
import { withoutCookie } from '../../src/edge/http/credentials.ts';
import { upgradeRequestHeaders } from '../../src/edge/forward/upgrade.ts';
import { isEdgeOwnedLower } from '../../src/shared/edge-headers.ts';
import { headerKey } from '../../src/shared/edge-headers.ts';
import { toHttp2RequestHeaders } from '../../src/shared/tunnel/headers.ts';
import { eventually } from '../helpers/eventually.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

const FACTS: ForwardFacts = { clientIp: '203.0.113.7', secure: true, host: 'app.edge.test', authority: 'app.edge.test:8080', extra: {} };

interface Parser {
  /** Sends `head` (request line and field lines, no final blank line) and `body`; returns the request Node parsed. */
  parse(head: string, body?: string): Promise<IncomingMessage>;
}

/** A real HTTP server, so the raw header lists are exactly what Node hands the edge. */
async function parser(t: TestContext, options: http.ServerOptions = {}): Promise<Parser> {
  let next: ((req: IncomingMessage) => void) | null = null;
  const server = http.createServer(options, (req, res) => {
    next?.(req);
    res.end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const socket = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  socket.on('data', () => {}); // responses are not read
  await once(socket, 'connect');
  t.after(async () => {
    socket.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    parse(head: string, body = '') {
      return new Promise((resolve, reject) => {
        next = resolve;
        socket.write(`${head}\r\n\r\n${body}`);
        socket.once('error', reject);
      });
    },
  };
}

/**
 * The multi-copy header pass the edge ran before the one-pass builders, kept here as the oracle they are checked
 * against: the parsed fields copied, the owned and stage-set ones (in any `_` spelling) and consumed ones dropped,
 * the consumed cookie cut, then the edge's own fields.
 */
function forwardedHeaders(headers: http.IncomingHttpHeaders, facts: ForwardFacts): http.IncomingHttpHeaders {
  const out: http.IncomingHttpHeaders = { ...headers };
  const stageKeys = new Set(Object.keys(facts.extra).map(headerKey));
  for (const name of Object.keys(out)) {
    if (isEdgeOwnedLower(name) || stageKeys.has(headerKey(name)) || facts.drop?.includes(headerKey(name))) delete out[name];
  }
  if (facts.dropCookie !== undefined) {
    const rest = withoutCookie(headers.cookie, facts.dropCookie);
    if (rest === undefined) delete out.cookie;
    else out.cookie = rest;
  }
  out.host = facts.authority;
  out['x-forwarded-for'] = facts.clientIp;
  out['x-forwarded-proto'] = facts.secure ? 'https' : 'http';
  if (facts.host) out['x-forwarded-host'] = facts.host;
  for (const [name, value] of Object.entries(facts.extra)) out[name] = value;
  return out;
}

/** The fields of the upgrade request the edge sends an agent (its Host is the validated authority). */
function upgradeHeaders(req: IncomingMessage, facts: ForwardFacts): Record<string, string | string[]> {
  return upgradeRequestHeaders({ ...facts, req, method: 'GET', target: '/' }, facts.authority);
}

/** What the edge sent before: forwardedHeaders, then toHttp2RequestHeaders (which runs endToEndHeaders). */
function threeCopies(req: IncomingMessage, facts: ForwardFacts, method: string, path: string) {
  return toHttp2RequestHeaders(
    { method, path, authority: facts.authority, scheme: facts.secure ? 'https' : 'http' },
    forwardedHeaders(req.headers, facts),
  );
}

describe('tunnelRequestHeaders', () => {
  it('sets the pseudo-headers from the judged request line and authority, and the edge forwarding fields', async (t) => {
    const p = await parser(t);
    const req = await p.parse('GET /a/../b?x=1 HTTP/1.1\r\nHost: App.Edge.Test:8080\r\nAccept: */*');
    assert.deepEqual(tunnelRequestHeaders(req, FACTS, 'GET', '/b?x=1'), {
      ':method': 'GET',
      ':path': '/b?x=1',
      ':authority': 'app.edge.test:8080',
      ':scheme': 'https',
      accept: '*/*',
      'x-forwarded-for': '203.0.113.7',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'app.edge.test',
    });
  });

  it('drops every field HTTP/2 forbids, and TE unless it is "trailers"', async (t) => {
    const p = await parser(t);
    const req = await p.parse(
      [
        'POST /up HTTP/1.1',
        'Host: app.edge.test',
        'Connection: keep-alive',
        'Keep-Alive: timeout=5',
        'Proxy-Connection: keep-alive',
        'Transfer-Encoding: chunked',
        'Upgrade: h2c',
        'TE: gzip, trailers;q=0.5',
        'Content-Type: text/plain',
      ].join('\r\n'),
      '0\r\n\r\n',
    );
    const h = tunnelRequestHeaders(req, FACTS, 'POST', '/up');
    for (const name of ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'host']) assert.equal(h[name], undefined, name);
    assert.equal(h.te, 'trailers');
    assert.equal(h['content-type'], 'text/plain');
    const gzipOnly = await p.parse('GET / HTTP/1.1\r\nHost: a\r\nTE: gzip');
    assert.equal(tunnelRequestHeaders(gzipOnly, FACTS, 'GET', '/').te, undefined);
  });

  it('drops the fields Connection names, wherever they appear, and TE when Connection names it', async (t) => {
    const p = await parser(t);
    const req = await p.parse('GET / HTTP/1.1\r\nX-Before: 1\r\nHost: a\r\nConnection: X-Before, x-after , TE\r\nConnection: X-Second\r\nX-After: 2\r\nX-Second: 3\r\nTE: trailers\r\nX-Kept: 4');
    const h = tunnelRequestHeaders(req, FACTS, 'GET', '/');
    for (const name of ['x-before', 'x-after', 'x-second', 'te', 'connection']) assert.equal(h[name], undefined, name);
    assert.equal(h['x-kept'], '4');
  });

  it('a visitor cannot strip the edge forwarding fields or stage fields by naming them in Connection', async (t) => {
    const p = await parser(t);
    const facts = { ...FACTS, extra: { 'x-edge-user': 'alice' } };
    const req = await p.parse('GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Forwarded-For, x-forwarded-proto, X-Forwarded-Host, X-Edge-User');
    const h = tunnelRequestHeaders(req, facts, 'GET', '/');
    assert.equal(h['x-forwarded-for'], '203.0.113.7');
    assert.equal(h['x-forwarded-proto'], 'https');
    assert.equal(h['x-forwarded-host'], 'app.edge.test');
    assert.equal(h['x-edge-user'], 'alice');
    // The old composition stripped them after adding them.
    assert.equal(threeCopies(req, facts, 'GET', '/')['x-forwarded-for'], undefined);
  });

  it("replaces the visitor's copies of edge-owned and stage fields, and ignores connection-specific stage fields", async (t) => {
    const p = await parser(t);
    const facts = { ...FACTS, secure: false, extra: { 'x-edge-user': 'alice', connection: 'close', upgrade: 'x' } };
    const req = await p.parse(
      [
        'GET / HTTP/1.1',
        'Host: a',
        'X-Forwarded-For: 10.0.0.1',
        'X-Forwarded-Proto: https',
        'X-Forwarded-Host: evil.test',
        'X-Forwarded-Port: 1',
        'Forwarded: for=10.0.0.1',
        'X-Real-IP: 10.0.0.1',
        'X-Edge-User: mallory',
        'X-Edge-User: root',
      ].join('\r\n'),
    );
    assert.deepEqual(tunnelRequestHeaders(req, facts, 'GET', '/'), {
      ':method': 'GET',
      ':path': '/',
      ':authority': 'app.edge.test:8080',
      ':scheme': 'http',
      'x-forwarded-for': '203.0.113.7',
      'x-forwarded-proto': 'http',
      'x-forwarded-host': 'app.edge.test',
      'x-edge-user': 'alice',
    });
  });

  it('folds repeated fields as req.headers does: first wins, comma list, cookie list, set-cookie array', async (t) => {
    const p = await parser(t);
    const req = await p.parse(
      [
        'GET / HTTP/1.1',
        'Host: first.test',
        'Host: second.test',
        'User-Agent: one',
        'user-agent: two',
        'Authorization: Bearer a',
        'Authorization: Bearer b',
        'Accept: text/html',
        'ACCEPT: */*',
        'Cookie: a=1',
        'Cookie: b=2',
        'cookie: c=3',
        'Set-Cookie: s=1',
        'Set-Cookie: t=2',
      ].join('\r\n'),
    );
    const h = tunnelRequestHeaders(req, FACTS, 'GET', '/');
    assert.equal(h['user-agent'], 'one');
    assert.equal(h.authorization, 'Bearer a');
    assert.equal(h.accept, 'text/html, */*');
    assert.equal(h.cookie, 'a=1; b=2; c=3');
    assert.deepEqual(h['set-cookie'], ['s=1', 't=2']);
  });

  it('joins repeats of single-valued fields on a server created with joinDuplicateHeaders', async (t) => {
    const p = await parser(t, { joinDuplicateHeaders: true });
    const req = await p.parse('GET / HTTP/1.1\r\nHost: a\r\nUser-Agent: one\r\nUser-Agent: two');
    assert.equal(tunnelRequestHeaders(req, FACTS, 'GET', '/')['user-agent'], 'one, two');
    assert.equal(tunnelRequestHeaders(req, FACTS, 'GET', '/')['user-agent'], req.headers['user-agent']);
  });

  it("sets :authority to the authority the edge validated, never the visitor's Host field", async (t) => {
    const p = await parser(t);
    // HTTP/1.0 last: the server closes the connection after answering it.
    for (const head of ['GET / HTTP/1.1\r\nHost: app.edge.test:80@evil.example', 'GET / HTTP/1.1\r\nHost: first.test\r\nHost: second.test', 'GET / HTTP/1.0\r\nAccept: */*']) {
      const req = await p.parse(head);
      assert.equal(tunnelRequestHeaders(req, FACTS, 'GET', '/')[':authority'], 'app.edge.test:8080', head);
      assert.equal(upgradeHeaders(req, FACTS).host, 'app.edge.test:8080', head);
    }
  });

  it('matches the old three-copy composition on a thousand generated requests', async (t) => {
    const p = await parser(t);
    // A small deterministic generator (xorshift), so a failure reproduces.
    let seed = 0x9e3779b9;
    const rand = (n: number) => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) % n;
    };
    const names = [
      'Host', 'host', 'Accept', 'Cookie', 'Set-Cookie', 'User-Agent', 'Content-Type', 'Authorization', 'Referer',
      'Cache-Control', 'If-None-Match', 'X-Custom', 'x-custom', 'TE', 'Keep-Alive', 'Proxy-Connection', 'Upgrade',
      'X-Forwarded-For', 'Forwarded', 'X-Real-IP', 'X-Forwarded-Port', 'Range', 'Origin', 'Accept-Encoding', 'Via',
      'X-Hop', 'Date', 'Age', 'Max-Forwards', 'X-Edge-User', 'Trailer', 'Priority', 'X_Forwarded_For', 'X-Real_IP',
      'x_edge_user', 'True-Client-IP', 'Client_IP', 'X_Custom',
    ];
    // No "close" (the parser's connection would end) and no bodies (Content-Length, Transfer-Encoding): one socket.
    const connectionTokens = ['keep-alive', 'Upgrade', 'X-Hop', 'x-custom', 'TE', 'Cache-Control', 'Via'];
    const values = ['1', 'a=1', 'text/html', 'trailers', 'gzip, trailers', 'gzip', 'x y', '"etag"', 'Bearer t'];
    for (let i = 0; i < 1000; i++) {
      const lines = ['GET /p HTTP/1.1', 'Host: h.test']; // HTTP/1.1 requires one
      const count = 1 + rand(12);
      for (let k = 0; k < count; k++) lines.push(`${names[rand(names.length)]}: ${values[rand(values.length)]}`);
      if (rand(3) === 0) {
        const tokens = Array.from({ length: 1 + rand(3) }, () => connectionTokens[rand(connectionTokens.length)]);
        lines.splice(1 + rand(lines.length), 0, `Connection: ${tokens.join(', ')}`);
      }
      const facts = rand(2) === 0 ? FACTS : { ...FACTS, extra: { 'x-edge-user': 'alice' } };
      const req = await p.parse(lines.join('\r\n'));
      assert.deepEqual(tunnelRequestHeaders(req, facts, 'GET', '/p'), threeCopies(req, facts, 'GET', '/p'), lines.join('\n'));
    }
  });
});

/**
 * Visitor spellings of fields the edge owns that CGI, WSGI, Rack and PHP read as the edge's own (HTTP_X_FORWARDED_FOR
 * for X_Forwarded_For), and client-address fields other proxies set: none may reach an upstream.
 */
const SPOOFED = [
  'X_Forwarded_For: 10.0.0.1',
  'X-Forwarded_For: 10.0.0.2',
  'x_forwarded-for: 10.0.0.3',
  'X-Real_IP: 10.0.0.4',
  'X_Real_Ip: 10.0.0.5',
  'X_Forwarded_Host: evil.example',
  'X_Forwarded_Proto: https',
  'X_Forwarded_Port: 1',
  'X-Client-IP: 10.0.0.6',
  'X_Client_IP: 10.0.0.7',
  'True-Client-IP: 10.0.0.8',
  'True_Client_IP: 10.0.0.9',
  'CF-Connecting-IP: 10.0.0.10',
  'Cf_Connecting_Ip: 10.0.0.11',
  'X-Cluster-Client-IP: 10.0.0.12',
  'X_Cluster_Client_IP: 10.0.0.13',
  'Client-IP: 10.0.0.14',
  'Client_IP: 10.0.0.15',
];

/** Raw field names the edge lets through that CGI would read as one it owns (or as `also`); [] when none. */
function spoofedNames(rawHeaders: readonly string[] | Record<string, unknown>, also: string[] = []): string[] {
  const names = Array.isArray(rawHeaders) ? rawHeaders.filter((_, i) => i % 2 === 0) : Object.keys(rawHeaders);
  const owned = new Set(['x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-forwarded-port', 'x-real-ip', 'x-client-ip', 'true-client-ip', 'cf-connecting-ip', 'x-cluster-client-ip', 'client-ip', ...also]);
  const edgeSets = new Set(['x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', ...also]);
  // The edge's own fields appear in their own spelling; anything else CGI folds onto an owned name is spoofed.
  return names.filter((n) => owned.has(headerKey(n)) && !edgeSets.has(n.toLowerCase()));
}

describe('underscore spellings of the edge-owned fields, and other client-address fields', () => {
  it('are dropped from the agent, origin and upgrade header blocks; other underscore fields pass', async (t) => {
    const p = await parser(t);
    const facts = { ...FACTS, extra: { 'x-edge-user': 'alice' } };
    const req = await p.parse(['GET / HTTP/1.1', 'Host: a', ...SPOOFED, 'X_Edge_User: mallory', 'x-edge_user: root', 'X_Custom: kept'].join('\r\n'));
    assert.equal(spoofedNames(req.rawHeaders, ['x-edge-user']).length, SPOOFED.length + 2, 'the check sees every spoofed spelling');
    const blocks = {
      tunnel: tunnelRequestHeaders(req, facts, 'GET', '/'),
      origin: originRequestHeaders(req, facts, 'origin.test'),
      upgrade: upgradeHeaders(req, facts),
    };
    for (const [which, h] of Object.entries(blocks)) {
      assert.deepEqual(spoofedNames(h, ['x-edge-user']), [], which);
      assert.equal(h['x-forwarded-for'], '203.0.113.7', which);
      assert.equal(h['x-forwarded-host'], 'app.edge.test', which);
      assert.equal(h['x-forwarded-proto'], 'https', which);
      assert.equal(h['x-edge-user'], 'alice', which);
      assert.equal(h['x_custom'], 'kept', which);
      for (const name of ['x-real-ip', 'x-client-ip', 'true-client-ip', 'cf-connecting-ip', 'x-cluster-client-ip', 'client-ip']) assert.equal(h[name], undefined, `${which} ${name}`);
    }
  });

  it('a stage field whose name has "_" is protected from its "-" spelling too', async (t) => {
    const p = await parser(t);
    const facts = { ...FACTS, extra: { x_claim_sub: 'alice' } };
    const req = await p.parse('GET / HTTP/1.1\r\nHost: a\r\nX-Claim-Sub: mallory\r\nx_CLAIM-sub: root\r\nX-Claim: kept');
    const h = tunnelRequestHeaders(req, facts, 'GET', '/');
    assert.equal(h.x_claim_sub, 'alice');
    assert.equal(h['x-claim-sub'], undefined);
    assert.equal(h['x_claim-sub'], undefined);
    assert.equal(h['x-claim'], 'kept');
    assert.equal(upgradeHeaders(req, facts)['x-claim-sub'], undefined);
  });

  describe('through a real agent and a real origin', () => {
    let t: TestNode;
    let upstream: http.Server;
    const seen: string[][] = [];
    let agent: Agent;
    let viaAgent: string;
    let viaOrigin: string;

    before(async () => {
      t = await startTestNode({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
      // One service: the agent's local target and the origin URL of a second endpoint.
      upstream = http.createServer((req, res) => {
        seen.push(req.rawHeaders);
        res.end('ok');
      });
      await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
      const upstreamPort = (upstream.address() as AddressInfo).port;
      const user = await t.createUser('pro');
      const a = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
      const o = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
      const set = await t.api('PUT', `/v1/endpoints/${o.uuid}/origin`, { key: user.api_key, body: { url: `http://127.0.0.1:${upstreamPort}` } });
      assert.equal(set.status, 200, set.text);
      await eventually(async () => (t.node.edge!.config.endpoint(a.uuid) && t.node.edge!.config.endpoint(o.uuid)?.origin_url ? true : undefined));
      agent = await startAgent({ edgeUrl: `http://127.0.0.1:${t.node.edge!.httpPort}`, apiKey: user.api_key, endpoint: a.uuid, protocol: 'http', target: upstreamPort });
      viaAgent = a.hostname;
      viaOrigin = o.hostname;
    });
    after(async () => {
      await agent.stop();
      upstream.closeAllConnections();
      await new Promise<void>((r) => upstream.close(() => r()));
      await t.close();
    });

    /** One raw request (a client library might refuse or rewrite these names); returns the upstream's raw fields. */
    async function send(hostname: string): Promise<string[]> {
      const before = seen.length;
      const socket = net.connect(t.node.edge!.httpPort, '127.0.0.1');
      // Written, not ended: the answer's Connection: close ends the exchange.
      socket.write(['GET /h HTTP/1.1', `Host: ${hostname}`, ...SPOOFED, 'X_Custom: kept', 'Connection: close', '', ''].join('\r\n'));
      let reply = '';
      socket.setEncoding('latin1');
      socket.on('data', (d) => (reply += d));
      await once(socket, 'close');
      assert.match(reply, /^HTTP\/1\.1 200 /, reply);
      assert.equal(seen.length, before + 1);
      return seen.at(-1)!;
    }

    for (const [which, hostname] of [['agent', () => viaAgent], ['origin', () => viaOrigin]] as const) {
      it(`regression: X_Forwarded_For and friends no longer reach the upstream (${which})`, async () => {
        const raw = await send(hostname());
        assert.deepEqual(spoofedNames(raw), [], raw.join('\n'));
        const field = (name: string) => raw.filter((_, i) => i % 2 === 1 && raw[i - 1].toLowerCase() === name);
        assert.deepEqual(field('x-forwarded-for'), ['127.0.0.1']);
        assert.deepEqual(field('x-forwarded-proto'), ['http']);
        assert.deepEqual(field('x_custom'), ['kept']);
      });
    }
  });
});

describe('fields auth stages consumed or own (ForwardFacts.drop, dropCookie, body)', () => {
  const head = 'POST /p HTTP/1.1\r\nHost: app.edge.test\r\nAuthorization: Basic dXNlcjpwdw==\r\nX-Api-Token: secret\r\nX_Api_Token: secret2\r\n' +
    'X-User: spoof\r\nCookie: a=1; edge_token=tok\r\nCookie: b=2\r\nTransfer-Encoding: chunked\r\nX-Keep: yes';
  const facts: ForwardFacts = { ...FACTS, extra: { 'x-user': 'from-claim' }, drop: ['authorization', 'x-api-token', 'x-user', 'x-email'], dropCookie: 'edge_token', body: Buffer.from('hello') };

  it('leaves the consumed credential fields out in every spelling, rewrites Cookie, and forwards the body length', async (t) => {
    const p = await parser(t);
    const req = await p.parse(head, '5\r\nhello\r\n0\r\n\r\n');
    for (const out of [tunnelRequestHeaders(req, facts, 'POST', '/p'), originRequestHeaders(req, facts, 'origin.test')] as Array<Record<string, unknown>>) {
      assert.equal(out.authorization, undefined);
      assert.equal(out['x-api-token'], undefined);
      assert.equal(out.x_api_token, undefined);
      assert.equal(out['x-user'], 'from-claim', "the stage's value, not the visitor's");
      assert.equal(out.cookie, 'a=1; b=2');
      assert.equal(out['content-length'], '5');
      assert.equal(out['transfer-encoding'], undefined);
      assert.equal(out['x-keep'], 'yes');
    }
    const upgrade = upgradeHeaders(req, facts);
    assert.equal(upgrade.authorization, undefined);
    assert.equal(upgrade['x-api-token'], undefined);
    assert.equal(upgrade.x_api_token, undefined);
    assert.equal(upgrade.cookie, 'a=1; b=2');
    assert.equal(upgrade['x-user'], 'from-claim');
  });

  it('sends no Cookie field when the consumed cookie was the only one', async (t) => {
    const p = await parser(t);
    const req = await p.parse('GET / HTTP/1.1\r\nHost: app.edge.test\r\nCookie: edge_token=tok');
    const only: ForwardFacts = { ...FACTS, dropCookie: 'edge_token' };
    assert.equal((tunnelRequestHeaders(req, only, 'GET', '/') as Record<string, unknown>).cookie, undefined);
    assert.equal(originRequestHeaders(req, only, 'origin.test').cookie, undefined);
    assert.equal(upgradeHeaders(req, only).cookie, undefined);
  });

  it('changes nothing when no stage consumed anything', async (t) => {
    const p = await parser(t);
    const req = await p.parse(head, '5\r\nhello\r\n0\r\n\r\n');
    const out = tunnelRequestHeaders(req, FACTS, 'POST', '/p') as Record<string, unknown>;
    assert.equal(out.authorization, 'Basic dXNlcjpwdw==');
    assert.equal(out.cookie, 'a=1; edge_token=tok; b=2');
    assert.equal(out['content-length'], undefined);
  });
});
