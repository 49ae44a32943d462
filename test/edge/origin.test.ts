// Endpoints that forward to an origin URL instead of agents: the API that sets it (and refuses what it must),
// and the edge forwarding requests, bodies and WebSocket upgrades to the origin over its keep-alive pool.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { startTestNode, type TestNode } from '../helpers/node.ts';

function request(port: number, host: string, path: string, method = 'GET', body?: string) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method, headers: { host }, agent: false }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
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
        assert.match(res.body.detail, /^url: /);
      }
      assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url: 'https://example.com', extra: 1 } })).status, 400);
      assert.equal((await t.api('GET', `/v1/endpoints/${ep.uuid}`, { key: user.api_key })).body.origin_url, null);

      const ok = await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url: 'https://example.com/app/' } });
      assert.equal(ok.status, 200);
      assert.deepEqual(ok.body, { ok: true, origin_url: 'https://example.com/app' });
      const stranger = await t.createUser('pro');
      assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: stranger.api_key, body: { url: null } })).status, 404);
      assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url: null } })).body.origin_url, null);
    });
  });

  describe('forwarding', () => {
    let t: TestNode;
    let origin: http.Server;
    let originPort: number;
    const seen: Array<{ url: string; host?: string; body: string; xfh?: string }> = [];

    before(async () => {
      t = await startTestNode({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
      origin = http.createServer((req, res) => {
        let body = '';
        req.on('data', (d) => (body += d));
        req.on('end', () => {
          seen.push({ url: req.url!, host: req.headers.host, body, xfh: req.headers['x-forwarded-host'] as string });
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

    it('forwards requests and bodies to the origin, under its path, with its own Host', async () => {
      const user = await t.createUser('pro');
      const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
      const applied = new Promise<void>((resolve) => {
        const on = (uuid: string, config: { origin_url: string | null } | null) => {
          if (uuid !== ep.uuid || !config?.origin_url) return;
          t.node.edge!.config.off('endpoint', on);
          resolve();
        };
        t.node.edge!.config.on('endpoint', on);
      });
      const set = await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url: `http://127.0.0.1:${originPort}/base` } });
      assert.equal(set.status, 200);
      await applied;

      const get = await request(t.node.edge!.httpPort, ep.hostname, '/x/../hello?a=1');
      assert.equal(get.status, 200);
      assert.equal(get.body, 'origin GET /base/hello?a=1');
      assert.equal(get.headers['x-origin'], 'yes');
      assert.equal(seen.at(-1)!.host, `127.0.0.1:${originPort}`);
      assert.equal(seen.at(-1)!.xfh, ep.hostname);

      const post = await request(t.node.edge!.httpPort, ep.hostname, '/submit', 'POST', 'payload');
      assert.equal(post.body, 'origin POST /base/submit');
      assert.equal(seen.at(-1)!.body, 'payload');

      const ws = new WebSocket(`ws://127.0.0.1:${t.node.edge!.httpPort}/live`, { headers: { host: ep.hostname } });
      const reply = await new Promise<string>((resolve, reject) => {
        ws.on('open', () => ws.send('ping'));
        ws.on('message', (m) => resolve(String(m)));
        ws.on('error', reject);
      });
      ws.close();
      assert.equal(reply, '/base/live:ping');
    });

    it('answers 502 origin_error when the origin is down', async () => {
      const user = await t.createUser('pro');
      const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
      const closed = http.createServer();
      await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
      const deadPort = (closed.address() as AddressInfo).port;
      await new Promise<void>((r) => closed.close(() => r()));
      const applied = new Promise<void>((resolve) => {
        const on = (uuid: string, config: { origin_url: string | null } | null) => {
          if (uuid !== ep.uuid || !config?.origin_url) return;
          t.node.edge!.config.off('endpoint', on);
          resolve();
        };
        t.node.edge!.config.on('endpoint', on);
      });
      await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url: `http://127.0.0.1:${deadPort}` } });
      await applied;
      const res = await request(t.node.edge!.httpPort, ep.hostname, '/');
      assert.equal(res.status, 502);
      assert.equal(res.headers['x-edge-error'], 'origin_error');
    });
  });
});
