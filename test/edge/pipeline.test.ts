// The pipeline's first and last steps end to end on a running node: HTTPS enforcement redirects plain HTTP before
// anything is forwarded, and the capture hook sees every finished exchange, keeping details only with capture on.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { publishEndpoint } from '../../src/store/endpoint-feed.ts';
import type { EndpointConfig } from '../../src/shared/snapshot.ts';
import { visit } from '../helpers/http.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

describe('pipeline: HTTPS enforcement and capture', () => {
  let t: TestNode;
  let origin: http.Server;
  let originUrl: string;
  const hits: string[] = [];

  before(async () => {
    t = await startTestNode({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true' });
    origin = http.createServer((req, res) => {
      hits.push(`${req.method} ${req.url}`);
      req.resume();
      req.on('end', () => res.end('from origin'));
    });
    await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
    originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  });
  after(async () => {
    origin.closeAllConnections();
    origin.close();
    await t.close();
  });

  /** Resolves once the edge holds a config of `uuid` for which `ready` is true. */
  const applied = (uuid: string, ready: (c: EndpointConfig) => boolean) =>
    new Promise<void>((resolve) => {
      const check = () => {
        const c = t.node.edge!.config.endpoint(uuid);
        if (!c || !ready(c)) return;
        t.node.edge!.config.off('endpoint', check);
        resolve();
      };
      t.node.edge!.config.on('endpoint', check);
      check();
    });

  /** An endpoint forwarding to the test origin. `enforce_https` is part of visitor auth settings, whose API comes with
   *  that feature: until then it is written where that API will write it, and published the way every write is. */
  async function originEndpoint(enforceHttps: boolean) {
    const user = await t.createUser('pro');
    const ep = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
    assert.equal((await t.api('PUT', `/v1/endpoints/${ep.uuid}/origin`, { key: user.api_key, body: { url: originUrl } })).status, 200);
    if (enforceHttps) {
      await t.node.db!.transaction(async (tx) => {
        await tx.query('UPDATE endpoints SET enforce_https = true WHERE uuid = $1', [ep.uuid]);
        await publishEndpoint(tx, ep.id);
      });
    }
    await applied(ep.uuid, (c) => c.origin_url !== null && c.enforce_https === enforceHttps);
    return { user, ep };
  }

  it('redirects plain HTTP to the HTTPS port, keeping path and query, and forwards nothing', async () => {
    const { ep } = await originEndpoint(true);
    const before = hits.length;
    const edge = t.node.edge!;

    const plain = await visit(edge.httpPort, ep.hostname, '/a/./b//c?x=1');
    assert.equal(plain.status, 301);
    assert.equal(plain.headers.location, `https://${ep.hostname}:${edge.httpsPort}/a/b/c?x=1`);
    const post = await visit(edge.httpPort, ep.hostname, '/form', { method: 'POST', body: 'secret=1' });
    assert.equal(post.status, 308);
    assert.equal(post.headers.location, `https://${ep.hostname}:${edge.httpsPort}/form`);
    assert.equal(hits.length, before, 'nothing reached the origin over plain HTTP');

    const secure = await visit(edge.httpsPort, ep.hostname, '/a/b/c?x=1', { secure: true });
    assert.equal(secure.status, 200);
    assert.equal(secure.body, 'from origin');
    assert.equal(hits.at(-1), 'GET /a/b/c?x=1');
  });

  it('serves plain HTTP on endpoints that do not enforce HTTPS', async () => {
    const { ep } = await originEndpoint(false);
    const res = await visit(t.node.edge!.httpPort, ep.hostname, '/plain');
    assert.equal(res.status, 200);
    assert.equal(res.body, 'from origin');
  });

  it('captures finished exchanges, including the edge\'s own answers, and only counts them with capture off', async () => {
    const { user, ep } = await originEndpoint(true);
    const edge = t.node.edge!;
    await visit(edge.httpPort, ep.hostname, '/redirected');
    await visit(edge.httpsPort, ep.hostname, '/served?q=2', { secure: true });
    const recent = edge.traffic.recent(ep.uuid);
    assert.deepEqual(
      recent.map((e) => [e.status, e.secure, e.path, e.query, e.completed]),
      [
        [200, true, '/served', 'q=2', true],
        [301, false, '/redirected', '', true],
      ],
    );
    assert.equal(recent[0].endpoint, ep.uuid);
    assert.equal(recent[0].host, ep.hostname);

    const off = await t.api('PUT', `/v1/endpoints/${ep.uuid}/settings/capture`, { key: user.api_key, body: { capture_enabled: false } });
    assert.equal(off.status, 200, off.text);
    await applied(ep.uuid, (c) => !c.capture_enabled);
    await visit(edge.httpsPort, ep.hostname, '/not-kept', { secure: true });
    assert.equal(edge.traffic.recent(ep.uuid).length, 2, 'no new details with capture off');
    assert.deepEqual(edge.traffic.counters(ep.uuid), { requests: 3, by_class: { '2xx': 2, '3xx': 1 }, edge_errors: {} });
  });
});
