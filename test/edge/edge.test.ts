// The edge end to end: the real program (control + edge), a real agent over a real tunnel, a real local service.
// A visitor's request reaches the service by hostname over HTTP, HTTPS (SNI) and WebSocket; the edge's own pages
// say what is wrong when it cannot; admission at connect follows the plan.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { startAgent, TunnelRefusedError, type Agent } from '../../src/agent/agent.ts';
import { visit as request, wsRoundTrip } from '../helpers/http.ts';
import { startLocalService, type LocalService } from '../helpers/local-service.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

/** A local service that echoes what it received, and a WebSocket echo on the same port. */
function startService(): Promise<LocalService<Seen>> {
  return startLocalService<Seen>(
    (req, res, record) => {
      record({ method: req.method!, url: req.url!, headers: req.headers });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ method: req.method, url: req.url }));
    },
    (ws) => ws.on('message', (m) => ws.send(`echo:${m}`)),
  );
}

describe('edge data plane', () => {
  let t: TestNode;
  let service: Awaited<ReturnType<typeof startService>>;
  let user: { api_key: string; id: number };
  let endpoint: { uuid: string; hostname: string };
  const agents: Agent[] = [];
  let edgeUrl: string;

  before(async () => {
    t = await startTestNode();
    service = await startService();
    user = await t.createUser('pro');
    const created = await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} });
    assert.equal(created.status, 201);
    endpoint = created.body;
    edgeUrl = `http://127.0.0.1:${t.node.edge!.httpPort}`;
    await waitForEndpoint(endpoint.uuid);
  });
  after(async () => {
    for (const a of agents) await a.stop();
    await service.close();
    await t.close();
  });

  /** Resolves once the edge's config mirror holds the endpoint (it arrives through the feed). */
  function waitForEndpoint(uuid: string): Promise<void> {
    const config = t.node.edge!.config;
    if (config.endpoint(uuid)) return Promise.resolve();
    return new Promise((resolve) => {
      const on = (changed: string) => {
        if (changed !== uuid) return;
        config.off('endpoint', on);
        resolve();
      };
      config.on('endpoint', on);
    });
  }

  async function agent(options: Partial<Parameters<typeof startAgent>[0]> = {}): Promise<Agent> {
    const a = await startAgent({ edgeUrl, apiKey: user.api_key, endpoint: endpoint.uuid, protocol: 'http', target: service.port, ...options });
    agents.push(a);
    return a;
  }

  it('answers an unknown hostname with the 404 page', async () => {
    const res = await request(t.node.edge!.httpPort, 'nobody.edge.localhost', '/');
    assert.equal(res.status, 404);
    assert.equal(res.headers['x-edge-error'], 'endpoint_not_found');
    assert.match(res.body, /No endpoint is configured for this hostname/);
  });

  it('says so when the endpoint has no live agent', async () => {
    const res = await request(t.node.edge!.httpPort, endpoint.hostname, '/', { headers: { accept: 'application/json' } });
    assert.equal(res.status, 502);
    assert.equal(JSON.parse(res.body).code, 'no_agent');
  });

  it('forwards a request through the agent, with the normalised path and proxy headers set by the edge', async () => {
    await agent();
    const res = await request(t.node.edge!.httpPort, endpoint.hostname, '/a/../b//c/%7Euser?x=1', { headers: { 'x-forwarded-for': '6.6.6.6' } });
    assert.equal(res.status, 200);
    assert.deepEqual(JSON.parse(res.body), { method: 'GET', url: '/b/c/~user?x=1' });
    const seen = service.seen.at(-1)!;
    assert.equal(seen.headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(seen.headers['x-forwarded-proto'], 'http');
    assert.equal(seen.headers['x-forwarded-host'], endpoint.hostname);
  });

  it('serves HTTPS for the endpoint by SNI', async () => {
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = https.request(
        { host: '127.0.0.1', port: t.node.edge!.httpsPort, path: '/tls', servername: endpoint.hostname, headers: { host: endpoint.hostname }, rejectUnauthorized: false, agent: false },
        (r) => {
          let body = '';
          r.on('data', (d) => (body += d));
          r.on('end', () => resolve({ status: r.statusCode!, body }));
        },
      );
      req.on('error', reject);
      req.end();
    });
    assert.equal(res.status, 200);
    assert.equal(JSON.parse(res.body).url, '/tls');
    assert.equal(service.seen.at(-1)!.headers['x-forwarded-proto'], 'https');
  });

  it('carries a WebSocket upgrade end to end', async () => {
    assert.equal(await wsRoundTrip(t.node.edge!.httpPort, endpoint.hostname, '/socket', 'hi'), 'echo:hi');
  });

  it('sends /api/* to agents tagged api by a routing rule, and everything else to any agent', async () => {
    const apiService = await startService();
    try {
      const created = await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} });
      const ep = created.body;
      await waitForEndpoint(ep.uuid);
      await agent({ endpoint: ep.uuid, agentId: 'web-1' });
      await agent({ endpoint: ep.uuid, agentId: 'api-1', tags: ['api'], target: apiService.port });
      const rule = await t.api('POST', `/v1/endpoints/${ep.uuid}/routing-rules`, {
        key: user.api_key,
        body: { name: 'api', priority: 1, target_agent_tags: 'api', conditions: [{ condition_type: 'path', condition_key: 'glob', pattern: '/api/**' }] },
      });
      assert.equal(rule.status, 201, rule.text);
      // The rule reaches the edge through the feed; wait for the endpoint record that carries it.
      await new Promise<void>((resolve) => {
        const has = () => (t.node.edge!.config.endpoint(ep.uuid)?.routing_rules.length ?? 0) > 0;
        if (has()) return resolve();
        const on = () => has() && (t.node.edge!.config.off('endpoint', on), resolve());
        t.node.edge!.config.on('endpoint', on);
      });
      const before = apiService.seen.length;
      for (let i = 0; i < 4; i++) assert.equal((await request(t.node.edge!.httpPort, ep.hostname, `/api/items/${i}`)).status, 200);
      assert.equal(apiService.seen.length - before, 4, 'every /api/* request went to the api agent');
      const webBefore = service.seen.length;
      await request(t.node.edge!.httpPort, ep.hostname, '/home');
      assert.equal(service.seen.length - webBefore, 1);
    } finally {
      await apiService.close();
    }
  });

  it('streams a large upload and a large download through the tunnel intact', async () => {
    const SIZE = 32 * 1024 * 1024;
    const hashing = http.createServer((req, res) => {
      if (req.method === 'POST') {
        const hash = createHash('sha256');
        req.on('data', (d) => hash.update(d));
        req.on('end', () => res.end(hash.digest('hex')));
        return;
      }
      // A deterministic download, produced chunk by chunk and never held whole.
      res.writeHead(200, { 'content-length': SIZE });
      let sent = 0;
      const chunk = Buffer.alloc(64 * 1024, 7);
      const pump = () => {
        while (sent < SIZE) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    });
    await new Promise<void>((r) => hashing.listen(0, '127.0.0.1', r));
    try {
      const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
      await waitForEndpoint(ep.uuid);
      await agent({ endpoint: ep.uuid, target: (hashing.address() as AddressInfo).port });
      const expected = createHash('sha256');
      const upload = await new Promise<string>((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port: t.node.edge!.httpPort, path: '/upload', method: 'POST', headers: { host: ep.hostname }, agent: false }, (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve(body));
        });
        req.on('error', reject);
        let written = 0;
        const write = () => {
          while (written < SIZE) {
            const piece = randomBytes(64 * 1024);
            expected.update(piece);
            written += piece.length;
            if (!req.write(piece)) return void req.once('drain', write);
          }
          req.end();
        };
        write();
      });
      assert.equal(upload, expected.digest('hex'));

      const downloaded = await new Promise<number>((resolve, reject) => {
        http
          .get({ host: '127.0.0.1', port: t.node.edge!.httpPort, path: '/download', headers: { host: ep.hostname }, agent: false }, (res) => {
            let n = 0;
            res.on('data', (d: Buffer) => (n += d.length));
            res.on('end', () => resolve(n));
          })
          .on('error', reject);
      });
      assert.equal(downloaded, SIZE);
    } finally {
      hashing.closeAllConnections();
      hashing.close();
    }
  });

  it('serves again, with the same hostname, once an agent that was stopped is started again', async () => {
    const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
    await waitForEndpoint(ep.uuid);
    const first = await agent({ endpoint: ep.uuid, agentId: 'restartable' });
    assert.equal((await request(t.node.edge!.httpPort, ep.hostname, '/')).status, 200);
    await first.stop();
    assert.equal((await request(t.node.edge!.httpPort, ep.hostname, '/')).status, 502);
    const second = await agent({ endpoint: ep.uuid, agentId: 'restartable' });
    assert.equal(second.welcome?.endpoint.hostname, ep.hostname);
    assert.equal((await request(t.node.edge!.httpPort, ep.hostname, '/')).status, 200);
  });

  it('refuses requests that smuggle a body length two ways', async () => {
    const raw = await new Promise<string>((resolve) => {
      const socket = net.connect(t.node.edge!.httpPort, '127.0.0.1', () => {
        socket.write(`POST / HTTP/1.1\r\nhost: ${endpoint.hostname}\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n`);
      });
      let data = '';
      socket.on('data', (d) => (data += d));
      socket.on('close', () => resolve(data));
      socket.on('error', () => resolve(data));
    });
    assert.match(raw, /^HTTP\/1\.1 400/);
  });

  it('gives an agent without an endpoint a new ephemeral one (the one-shot flow)', async () => {
    const a = await agent({ endpoint: undefined });
    const welcome = await new Promise<{ endpoint: { uuid: string; hostname: string } }>((resolve) => {
      if (a.welcome) return resolve(a.welcome);
      a.once('connected', resolve);
    });
    const got = await t.api('GET', `/v1/endpoints/${welcome.endpoint.uuid}`, { key: user.api_key });
    assert.equal(got.status, 200);
    assert.equal(got.body.ephemeral, true);
    const res = await request(t.node.edge!.httpPort, welcome.endpoint.hostname, '/one-shot');
    assert.equal(res.status, 200);
  });

  it('refuses at connect what the plan does not allow, and an invalid key, with a clear message', async () => {
    const free = await t.createUser('free');
    const created = await t.api('POST', '/v1/endpoints', { key: free.api_key, body: {} });
    await waitForEndpoint(created.body.uuid);
    await assert.rejects(
      startAgent({ edgeUrl, apiKey: free.api_key, endpoint: created.body.uuid, protocol: 'tcp', target: service.port }),
      (err: unknown) => err instanceof TunnelRefusedError && err.code === 'protocol_not_allowed',
    );
    await assert.rejects(
      startAgent({ edgeUrl, apiKey: 'edge_0123456789abcdef_' + 'A'.repeat(43), endpoint: endpoint.uuid, protocol: 'http', target: service.port }),
      (err: unknown) => err instanceof TunnelRefusedError && err.code === 'unauthorized',
    );
    // Another account's endpoint reads as missing.
    await assert.rejects(
      startAgent({ edgeUrl, apiKey: free.api_key, endpoint: endpoint.uuid, protocol: 'http', target: service.port }),
      (err: unknown) => err instanceof TunnelRefusedError && err.code === 'endpoint_not_found',
    );
  });

  it('stops serving a deleted endpoint from the next request: its hostname is unknown again', async () => {
    const created = await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} });
    await waitForEndpoint(created.body.uuid);
    const gone = new Promise<void>((resolve) => {
      const on = (uuid: string, value: unknown) => {
        if (uuid !== created.body.uuid || value !== null) return;
        t.node.edge!.config.off('endpoint', on);
        resolve();
      };
      t.node.edge!.config.on('endpoint', on);
    });
    assert.equal((await t.api('DELETE', `/v1/endpoints/${created.body.uuid}`, { key: user.api_key })).status, 204);
    await gone;
    const res = await request(t.node.edge!.httpPort, created.body.hostname, '/');
    assert.equal(res.status, 404);
  });
});
