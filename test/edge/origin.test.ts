// Endpoints and routing rules that forward to an origin URL instead of agents: the API that sets it (and refuses
// what it must), and the edge forwarding requests, bodies and WebSocket upgrades to the origin over its keep-alive pool.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { OriginPools, type OriginPoolsOptions } from '../../src/edge/forward/origin.ts';
import { handleRequest, handleUpgrade, type PipelineDeps } from '../../src/edge/pipeline/pipeline.ts';
import type { EndpointConfig } from '../../src/shared/snapshot.ts';
import { touch } from '../../src/store/feed-changes.ts';
import { lookupVia, startDnsServer, type DnsServer } from '../helpers/dns-server.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit as request, wsRoundTrip } from '../helpers/http.ts';
import { startLocalService, type LocalService } from '../helpers/local-service.ts';
import { capturedLogger } from '../helpers/logger.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

/** Every request a named server received: method, URL and Host. */
type NamedServer = LocalService<{ method: string; url: string; host?: string }>;

/** An HTTP server on 127.0.0.1 that answers `<name> <method> <url>`, with a WebSocket echo `<name>:<url>:<message>`. */
function startNamedServer(name: string): Promise<NamedServer> {
  return startLocalService(
    (req, res, record) => {
      record({ method: req.method!, url: req.url!, host: req.headers.host });
      req.resume();
      req.on('end', () => res.end(`${name} ${req.method} ${req.url}`));
    },
    (ws, req) => ws.on('message', (m) => ws.send(`${name}:${req.url}:${m}`)),
  );
}

/**
 * The node's edge pipeline (its config mirror, fed by its control API, its tunnel registry and capture) on a listener
 * of its own, with origin pools configured here: an edge whose settings differ from the control plane's.
 */
async function startEdgeWith(t: TestNode, options: OriginPoolsOptions): Promise<{ port: number; close(): Promise<void> }> {
  const edge = t.node.edge!;
  const deps: PipelineDeps = { config: edge.config, registry: edge.registry, capture: edge.traffic, origins: new OriginPools(options) };
  const server = http.createServer((req, res) => handleRequest(deps, req, res, false));
  server.on('upgrade', (req, socket, head) => handleUpgrade(deps, req, socket, head, false));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await deps.origins.close();
    },
  };
}

/** A WebSocket upgrade through the edge that the edge refuses: the status and X-Edge-Error it answered with. */
function refusedUpgrade(edgePort: number, host: string, path: string): Promise<{ status: number; code: string | undefined }> {
  const ws = new WebSocket(`ws://127.0.0.1:${edgePort}${path}`, { headers: { host } });
  return new Promise((resolve, reject) => {
    ws.on('open', () => reject(new Error('the upgrade was relayed')));
    ws.on('unexpected-response', (_req, res) => {
      resolve({ status: res.statusCode!, code: res.headers['x-edge-error'] as string | undefined });
      res.resume();
    });
    ws.on('error', reject);
  });
}

describe('origin endpoints', () => {
  describe('PUT /v1/endpoints/{id}/origin on a default platform', () => {
    let t: TestNode;
    before(async () => {
      t = await startTestNode();
    });
    after(() => t.close());

    it('refuses private, loopback and link-local origins, and malformed URLs, changing nothing', async () => {
      const user = await t.createUser('pro');
      const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
      for (const url of ['http://127.0.0.1:3000', 'http://localhost', 'http://169.254.169.254/latest', 'http://10.1.2.3', 'http://[::1]:80', 'ftp://example.com', 'http://u:p@example.com', 'not a url', 'http://example.com/?q=1']) {
        const res = await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url } });
        assert.equal(res.status, 400, url);
        assert.equal(res.body.detail?.field, 'url', url);
      }
      assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url: 'https://example.com', extra: 1 } })).status, 400);
      assert.equal((await t.api('GET', `/v1/endpoints/${ep.uuid}`, { key: user.api_key })).body.origin_url, null);

      const ok = await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url: 'https://example.com/app/' } });
      assert.equal(ok.status, 200);
      assert.deepEqual(ok.body, { ok: true, origin_url: 'https://example.com/app' });
      // Issue 8 item 8: IPv6 literals embedding a private IPv4 address are refused, and the origin stays as it was.
      for (const url of ['http://[64:ff9b::a00:1]/', 'http://[64:ff9b:1::a00:1]/', 'http://[2002:a00:1::1]/', 'http://[2001:0:808:808::f5ff:fffe]/', 'http://[::a00:1]/', 'http://[::ffff:0:a00:1]/', 'http://203.0.113.10/']) {
        const res = await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url } });
        assert.equal(res.status, 400, url);
        assert.equal(res.body.detail?.field, 'url', url);
        assert.match(res.body.detail.reason, /^origins must have a public address/, url);
        if (url === 'http://[64:ff9b::a00:1]/') assert.match(res.body.detail.reason, /embeds 10\.0\.0\.1 \(NAT64/);
      }
      assert.equal((await t.api('GET', `/v1/endpoints/${ep.uuid}`, { key: user.api_key })).body.origin_url, 'https://example.com/app');
      const stranger = await t.createUser('pro');
      assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: stranger.api_key, body: { url: null } })).status, 404);
      assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url: null } })).body.origin_url, null);
    });

    it('has its edge refuse to connect to a loopback origin, however the address got into the config', async () => {
      // The API never stores one here; a row written before the platform refused them (or by hand) stands for it.
      const target = await startNamedServer('internal');
      try {
        const user = await t.createUser('pro');
        const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
        await t.node.db!.transaction(async (tx) => {
          await tx.query('UPDATE endpoints SET origin_url = $2 WHERE uuid = $1', [ep.uuid, `http://127.0.0.1:${target.port}`]);
          touch(tx, { endpoint: ep.id });
        });
        await eventually(async () => (t.node.edge!.config.endpoint(ep.uuid)?.origin_url ? true : undefined));
        const res = await new Promise<{ status: number; code: unknown }>((resolve, reject) => {
          const req = http.get({ host: '127.0.0.1', port: t.node.edge!.httpPort, path: '/', headers: { host: ep.hostname }, agent: false }, (r) => {
            r.resume();
            resolve({ status: r.statusCode!, code: r.headers['x-edge-error'] });
          });
          req.on('error', reject);
        });
        assert.deepEqual(res, { status: 502, code: 'origin_error' });
        assert.equal(target.seen.length, 0);
      } finally {
        await target.close();
      }
    });
  });

  describe('forwarding', () => {
    let t: TestNode;
    let origin: http.Server;
    let originPort: number;
    const seen: Array<{ url: string; host?: string; body: string; xfh?: string; headers: http.IncomingHttpHeaders }> = [];

    before(async () => {
      t = await startTestNode({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
      origin = http.createServer((req, res) => {
        let body = '';
        req.on('data', (d) => (body += d));
        req.on('end', () => {
          seen.push({ url: req.url!, host: req.headers.host, body, xfh: req.headers['x-forwarded-host'] as string, headers: req.headers });
          res.setHeader('x-origin', 'yes');
          res.end(`origin ${req.method} ${req.url}`);
        });
      });
      const wss = new WebSocketServer({ server: origin });
      wss.on('connection', (ws, req) => ws.on('message', (m) => ws.send(`${req.url}:${m}`)));
      await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
      originPort = (origin.address() as AddressInfo).port;
    });
    after(async () => {
      origin.closeAllConnections();
      origin.close();
      await t.close();
    });

    /** A new pro user's endpoint forwarding to `url`, once the edge holds it. */
    async function originEndpoint(url: string): Promise<{ uuid: string; hostname: string }> {
      const user = await t.createUser('pro');
      const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
      const set = await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url } });
      assert.equal(set.status, 200, set.text);
      await eventually(async () => (t.node.edge!.config.endpoint(ep.uuid)?.origin_url === set.body.origin_url ? true : undefined));
      return ep;
    }

    it('forwards requests and bodies to the origin, under its path, with its own Host', async () => {
      const ep = await originEndpoint(`http://127.0.0.1:${originPort}/base`);

      const get = await request(t.node.edge!.httpPort, ep.hostname, '/x/../hello?a=1');
      assert.equal(get.status, 200);
      assert.equal(get.body, 'origin GET /base/hello?a=1');
      assert.equal(get.headers['x-origin'], 'yes');
      assert.equal(seen.at(-1)!.host, `127.0.0.1:${originPort}`);
      assert.equal(seen.at(-1)!.xfh, ep.hostname);

      const post = await request(t.node.edge!.httpPort, ep.hostname, '/submit', { method: 'POST', body: 'payload' });
      assert.equal(post.body, 'origin POST /base/submit');
      assert.equal(seen.at(-1)!.body, 'payload');

      assert.equal(await wsRoundTrip(t.node.edge!.httpPort, ep.hostname, '/live', 'ping'), '/base/live:ping');
    });

    it('sets forwarding fields a visitor can neither forge nor strip through Connection, and relays Expect: 100-continue', async () => {
      const ep = await originEndpoint(`http://127.0.0.1:${originPort}`);

      const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request({
          host: '127.0.0.1',
          port: t.node.edge!.httpPort,
          path: '/upload',
          method: 'POST',
          agent: false,
          headers: {
            host: ep.hostname,
            connection: 'keep-alive, x-forwarded-for, x-forwarded-proto, x-custom',
            'x-forwarded-for': '203.0.113.66',
            'x-real-ip': '203.0.113.66',
            'x-custom': 'hop',
            'x-kept': 'end-to-end',
            expect: '100-continue',
            'content-length': '4',
          },
        });
        // The body goes only once the edge has said to continue, as a careful client does.
        req.on('continue', () => req.end('data'));
        req.on('response', (res) => {
          let text = '';
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode!, body: text }));
        });
        req.on('error', reject);
      });
      assert.deepEqual(answer, { status: 200, body: 'origin POST /upload' });
      const got = seen.at(-1)!;
      assert.equal(got.body, 'data');
      assert.equal(got.headers['x-forwarded-for'], '127.0.0.1');
      assert.equal(got.headers['x-forwarded-proto'], 'http');
      assert.equal(got.headers['x-forwarded-host'], ep.hostname);
      assert.equal(got.headers['x-real-ip'], undefined);
      assert.equal(got.headers['x-custom'], undefined, 'a field the visitor named in Connection is hop-by-hop');
      assert.equal(got.headers['x-kept'], 'end-to-end');
      assert.equal(got.headers.expect, undefined);
    });

    it('answers 502 origin_error when the origin is down', async () => {
      const closed = http.createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
      const deadPort = (closed.address() as AddressInfo).port;
      await new Promise<void>((r) => closed.close(() => r()));
      const ep = await originEndpoint(`http://127.0.0.1:${deadPort}`);
      const res = await request(t.node.edge!.httpPort, ep.hostname, '/');
      assert.equal(res.status, 502);
      assert.equal(res.headers['x-edge-error'], 'origin_error');
    });
  });

  describe('routing rules with an origin target', () => {
    let t: TestNode;
    let user: { api_key: string };
    let viaAgent: NamedServer;
    let endpointOrigin: NamedServer;
    let ruleOrigin: NamedServer;
    const agents: Agent[] = [];

    before(async () => {
      t = await startTestNode({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
      user = await t.createUser('pro');
      [viaAgent, endpointOrigin, ruleOrigin] = await Promise.all([startNamedServer('agent'), startNamedServer('endpoint-origin'), startNamedServer('rule-origin')]);
    });
    after(async () => {
      for (const a of agents) await a.stop();
      await Promise.all([viaAgent, endpointOrigin, ruleOrigin].map((s) => s.close()));
      await t.close();
    });

    const edgePort = () => t.node.edge!.httpPort;
    /** Resolves once the edge holds the endpoint in a state `ready` accepts (it arrives through the feed). */
    const applied = (uuid: string, ready: (e: EndpointConfig) => boolean) =>
      eventually(async () => {
        const e = t.node.edge!.config.endpoint(uuid);
        return e && ready(e) ? e : undefined;
      });
    async function endpointWithApiRule(): Promise<{ uuid: string; hostname: string }> {
      const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
      const created = await t.api('POST', `/v1/endpoints/${ep.uuid}/routing-rules`, {
        key: user.api_key,
        body: {
          name: 'api to origin',
          target_origin_url: `http://127.0.0.1:${ruleOrigin.port}/backend/`,
          conditions: [{ condition_type: 'path', condition_key: 'glob', pattern: '/api/**' }],
        },
      });
      assert.equal(created.status, 201, created.text);
      assert.equal(created.body.target_origin_url, `http://127.0.0.1:${ruleOrigin.port}/backend`);
      return ep;
    }

    it('sends /api/** to the rule’s origin and everything else to the endpoint’s agent, WebSockets included', async () => {
      const ep = await endpointWithApiRule();
      await applied(ep.uuid, (e) => e.routing_rules.length === 1);
      const agent = await startAgent({ edgeUrl: `http://127.0.0.1:${edgePort()}`, apiKey: user.api_key, endpoint: ep.uuid, protocol: 'http', target: viaAgent.port });
      agents.push(agent);
      // The agent is admitted asynchronously: wait until a request outside /api reaches it.
      const web = await eventually(async () => {
        const res = await request(edgePort(), ep.hostname, '/web?x=1');
        return res.status === 200 ? res : undefined;
      });
      assert.equal(web.body, 'agent GET /web?x=1');

      const api = await request(edgePort(), ep.hostname, '/api/users?page=2', { method: 'POST', body: 'payload' });
      assert.equal(api.status, 200);
      assert.equal(api.body, 'rule-origin POST /backend/api/users?page=2');
      assert.equal(ruleOrigin.seen.at(-1)!.host, `127.0.0.1:${ruleOrigin.port}`);
      // `/api/**` matches `/api` itself, not `/apiary`.
      assert.equal((await request(edgePort(), ep.hostname, '/api')).body, 'rule-origin GET /backend/api');
      assert.equal((await request(edgePort(), ep.hostname, '/apiary')).body, 'agent GET /apiary');

      assert.equal(await wsRoundTrip(edgePort(), ep.hostname, '/api/live', 'ping'), 'rule-origin:/backend/api/live:ping');
      assert.equal(await wsRoundTrip(edgePort(), ep.hostname, '/live', 'ping'), 'agent:/live:ping');
    });

    it('sends /api/** to the rule’s origin and everything else to the endpoint’s own origin', async () => {
      const ep = await endpointWithApiRule();
      const set = await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url: `http://127.0.0.1:${endpointOrigin.port}` } });
      assert.equal(set.status, 200, set.text);
      await applied(ep.uuid, (e) => e.routing_rules.length === 1 && e.origin_url !== null);

      assert.equal((await request(edgePort(), ep.hostname, '/api/v1/items')).body, 'rule-origin GET /backend/api/v1/items');
      assert.equal((await request(edgePort(), ep.hostname, '/home')).body, 'endpoint-origin GET /home');
      assert.equal(await wsRoundTrip(edgePort(), ep.hostname, '/api/ws', 'hi'), 'rule-origin:/backend/api/ws:hi');
      assert.equal(await wsRoundTrip(edgePort(), ep.hostname, '/ws', 'hi'), 'endpoint-origin:/ws:hi');

      // Disabled, the rule no longer applies: its requests go to the endpoint's origin (full PUT: enabled omitted = false).
      const rules = (await t.api('GET', `/v1/endpoints/${ep.uuid}/routing-rules`, { key: user.api_key })).body.items;
      const { id, created_at: _c, updated_at: _u, ...body } = rules[0];
      assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/routing-rules/${id}`, { key: user.api_key, body: { ...body, enabled: false } })).status, 200);
      await applied(ep.uuid, (e) => e.routing_rules[0]?.enabled === false);
      assert.equal((await request(edgePort(), ep.hostname, '/api/v1/items')).body, 'endpoint-origin GET /api/v1/items');
    });

    it('answers 502 origin_error when the rule’s origin is down', async () => {
      const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
      const closed = http.createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
      const deadPort = (closed.address() as AddressInfo).port;
      await new Promise<void>((r) => closed.close(() => r()));
      const created = await t.api('POST', `/v1/endpoints/${ep.uuid}/routing-rules`, {
        key: user.api_key,
        body: { target_origin_url: `http://127.0.0.1:${deadPort}`, conditions: [{ condition_type: 'path', pattern: '/' }] },
      });
      assert.equal(created.status, 201, created.text);
      await applied(ep.uuid, (e) => e.routing_rules.length === 1);
      const res = await request(edgePort(), ep.hostname, '/');
      assert.equal(res.status, 502);
      assert.equal(res.headers['x-edge-error'], 'origin_error');
    });
  });

  describe('connect-time address checks (DNS rebinding)', () => {
    let t: TestNode;
    let dns: DnsServer;
    let guarded: NamedServer;
    let user: { api_key: string };

    before(async () => {
      // The default platform: the control API refuses private origins, by what the URL says.
      t = await startTestNode();
      dns = await startDnsServer();
      guarded = await startNamedServer('guarded');
      user = await t.createUser('pro');
    });
    after(async () => {
      await guarded.close();
      await dns.close();
      await t.close();
    });

    const applied = (node: TestNode, uuid: string, ready: (e: EndpointConfig) => boolean) =>
      eventually(async () => {
        const e = node.node.edge!.config.endpoint(uuid);
        return e && ready(e) ? e : undefined;
      });

    /** An endpoint whose origin is `origin`, with a rule sending /api/** to `origin` + "/rule"; both accepted by the API. */
    async function endpointOn(node: TestNode, key: string, origin: string): Promise<{ uuid: string; hostname: string }> {
      const ep = (await node.api('POST', '/v1/endpoints', { key, body: {} })).body;
      const set = await node.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key, body: { url: origin } });
      assert.equal(set.status, 200, set.text);
      const rule = await node.api('POST', `/v1/endpoints/${ep.uuid}/routing-rules`, {
        key,
        body: { target_origin_url: `${origin}/rule`, conditions: [{ condition_type: 'path', condition_key: 'glob', pattern: '/api/**' }] },
      });
      assert.equal(rule.status, 201, rule.text);
      await applied(node, ep.uuid, (e) => e.origin_url !== null && e.routing_rules.length === 1);
      return ep;
    }

    it('refuses an origin name the API accepted once it resolves to loopback, for requests and upgrades, and logs it', async () => {
      // The API judges the URL, and a name says nothing about its address: it is accepted.
      const ep = await endpointOn(t, user.api_key, `http://rebind.test:${guarded.port}`);
      // Later the name answers 127.0.0.1: a rebinding attack on the edge's own network.
      dns.setAddresses('rebind.test', ['127.0.0.1']);
      const log = capturedLogger();
      const strict = await startEdgeWith(t, { allowPrivate: false, logger: log.logger, lookup: lookupVia(dns) });
      const permissive = await startEdgeWith(t, { allowPrivate: true, lookup: lookupVia(dns) });
      try {
        for (const path of ['/', '/api/users']) {
          const res = await request(strict.port, ep.hostname, path);
          assert.equal(res.status, 502, path);
          assert.equal(res.headers['x-edge-error'], 'origin_error', path);
        }
        assert.deepEqual(await refusedUpgrade(strict.port, ep.hostname, '/api/live'), { status: 502, code: 'origin_error' });
        assert.deepEqual(await refusedUpgrade(strict.port, ep.hostname, '/live'), { status: 502, code: 'origin_error' });
        assert.deepEqual(guarded.seen, [], 'no request reached the origin');
        const refusals = log.lines.filter((l) => /origin refused/.test(String(l.msg)));
        assert.ok(refusals.length > 0, JSON.stringify(log.lines));
        assert.equal(refusals[0].address, '127.0.0.1');
        assert.equal(refusals[0].level, 40);
        assert.match(String(refusals[0].origin), /^http:\/\/rebind\.test:\d+/);

        // The same name, the same resolver, an edge that allows private origins: it connects. So the refusal above
        // was the address check, not a name that failed to resolve.
        assert.equal((await request(permissive.port, ep.hostname, '/')).body, 'guarded GET /');
        assert.equal((await request(permissive.port, ep.hostname, '/api/users')).body, 'guarded GET /rule/api/users');
        assert.equal(await wsRoundTrip(permissive.port, ep.hostname, '/api/live', 'hi'), 'guarded:/rule/api/live:hi');
      } finally {
        await strict.close();
        await permissive.close();
      }
    });

    /** Origins named `name` that resolve to `addresses` (all accepted by the API): the edge refuses each, logging `refused`. */
    async function refusedAtConnect(key: string, cases: Array<[name: string, addresses: string[], refused: string]>): Promise<void> {
      const log = capturedLogger();
      const strict = await startEdgeWith(t, { allowPrivate: false, logger: log.logger, lookup: lookupVia(dns) });
      const reached = guarded.seen.length;
      try {
        for (const [name, addresses, refused] of cases) {
          dns.setAddresses(name, addresses);
          const ep = await endpointOn(t, key, `http://${name}:${guarded.port}`);
          const res = await request(strict.port, ep.hostname, '/');
          assert.equal(res.status, 502, name);
          assert.equal(res.headers['x-edge-error'], 'origin_error', name);
          assert.ok(
            log.lines.some((l) => String(l.origin).startsWith(`http://${name}:`) && l.address === refused),
            `${name}: ${JSON.stringify(log.lines)}`,
          );
        }
        assert.equal(guarded.seen.length, reached, 'no request reached the origin');
      } finally {
        await strict.close();
      }
    }

    it('refuses a name whose answer mixes public and private addresses, and any private range', async () => {
      await refusedAtConnect(user.api_key, [
        ['mixed.test', ['93.184.215.14', '10.1.2.3'], '10.1.2.3'],
        ['metadata.test', ['169.254.169.254'], '169.254.169.254'],
        ['cgnat.test', ['100.64.0.1'], '100.64.0.1'],
        ['six.test', ['fd00::1'], 'fd00::1'],
        ['mapped.test', ['::ffff:192.168.1.1'], '::ffff:192.168.1.1'],
      ]);
    });

    // Issue 8 item 8: the same address policy as the API's, so IPv6 answers embedding a private IPv4 address are refused.
    it('refuses a name that resolves to NAT64, 6to4 or Teredo addresses embedding a private IPv4 address, or to a documentation range', async () => {
      const owner = await t.createUser('pro');
      await refusedAtConnect(owner.api_key, [
        ['nat64.test', ['64:ff9b::a00:1'], '64:ff9b::a00:1'],
        ['nat64-local.test', ['64:ff9b:1::808:808'], '64:ff9b:1::808:808'],
        ['sixtofour.test', ['2002:7f00:1::1'], '2002:7f00:1::1'],
        ['teredo.test', ['2001:0:808:808::f5ff:fffe'], '2001:0:808:808::f5ff:fffe'],
        ['docs.test', ['198.51.100.7'], '198.51.100.7'],
      ]);
    });

    it('refuses private literals and localhost names that a control plane allowing private origins accepted', async () => {
      // Control and edge configured apart: this control API allows private origins, the edge below does not.
      const lenient = await startTestNode({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
      const log = capturedLogger();
      // The system resolver this time: `localhost` resolves to loopback everywhere (RFC 6761).
      const strict = await startEdgeWith(lenient, { allowPrivate: false, logger: log.logger });
      const reached = guarded.seen.length;
      try {
        const owner = await lenient.createUser('pro');
        for (const origin of [`http://127.0.0.1:${guarded.port}`, `http://localhost:${guarded.port}`, `http://[::ffff:127.0.0.1]:${guarded.port}`]) {
          const ep = await endpointOn(lenient, owner.api_key, origin);
          for (const path of ['/', '/api/x']) {
            const res = await request(strict.port, ep.hostname, path);
            assert.equal(res.status, 502, `${origin}${path}`);
            assert.equal(res.headers['x-edge-error'], 'origin_error', `${origin}${path}`);
          }
          assert.deepEqual(await refusedUpgrade(strict.port, ep.hostname, '/ws'), { status: 502, code: 'origin_error' }, origin);
        }
        assert.equal(guarded.seen.length, reached, 'no request reached the origin');
        assert.ok(log.lines.some((l) => l.address === '127.0.0.1'), JSON.stringify(log.lines));
      } finally {
        await strict.close();
        await lenient.close();
      }
    });
  });
});

describe('origin answers the edge cannot relay', () => {
  /** An origin that answers every request (or upgrade) with `HTTP/1.1 <status> Odd` and a 2-byte body, raw. */
  async function rawOrigin(status: string) {
    const server = net.createServer((socket) => {
      socket.on('error', () => {});
      socket.once('data', () => socket.end(`HTTP/1.1 ${status} Odd\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok`));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
  }

  it('an origin status outside 200-599 (600, 999, 099) is 502 origin_error, for requests and upgrades, and the edge serves on', async (t) => {
    const origins = new OriginPools({ allowPrivate: true });
    t.after(() => origins.close());
    let origin = '';
    const edge = http.createServer((req, res) =>
      origins.forward(origin, { req, res, method: req.method!, target: req.url!, clientIp: '198.51.100.1', secure: false, host: 'o.edge.test', authority: 'o.edge.test', extra: {} }),
    );
    edge.on('upgrade', (req, socket, head) =>
      origins.upgrade(origin, { req, method: 'GET', target: req.url!, clientIp: '198.51.100.1', secure: false, host: 'o.edge.test', authority: 'o.edge.test', extra: {} }, socket, head),
    );
    await new Promise<void>((r) => edge.listen(0, '127.0.0.1', r));
    t.after(() => {
      edge.closeAllConnections();
      return new Promise<void>((r) => edge.close(() => r()));
    });
    const port = (edge.address() as AddressInfo).port;
    for (const status of ['600', '999', '099', '200']) {
      const o = await rawOrigin(status);
      t.after(() => o.close());
      origin = o.url;
      const reply = await request(port, 'o.edge.test', '/x', { headers: { accept: 'application/json' } });
      const upgrade = await refusedUpgrade(port, 'o.edge.test', '/ws');
      if (status === '200') {
        assert.deepEqual([reply.status, reply.body], [200, 'ok'], 'a final status passes');
        assert.equal(upgrade.status, 200, 'relayed as one response, not a switch');
        continue;
      }
      assert.equal(reply.status, 502, `${status}: ${reply.body}`);
      assert.equal(reply.headers['x-edge-error'], 'origin_error', status);
      assert.deepEqual(upgrade, { status: 502, code: 'origin_error' }, `${status} upgrade`);
    }
  });
});
