// Traffic alerts end to end with the real program: an endpoint forwarding to a local upstream, an error_rate rule with a
// signed webhook to a real receiver. The upstream starts failing → the edge's usage reaches the rollup → the evaluator
// fires and the receiver gets a verifiable payload; the upstream recovers → the rule resolves; a test notification
// follows; the events API shows test, ok and firing, newest first.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { edgeCaughtUp, expectBody, type User } from '../helpers/endpoint-api.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit } from '../helpers/http.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { signatureValid, startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts';

const SECRET = 'e2e-webhook-secret-0123456789';

describe('traffic alerts end to end', () => {
  let t: TestNode;
  let user: User;
  let upstream: Server;
  let failing = false;
  let receiver: WebhookReceiver;
  let endpoint: { uuid: string; hostname: string; subdomain: string };

  before(async () => {
    upstream = createServer((_req, res) => {
      res.writeHead(failing ? 500 : 200, { 'content-type': 'text/plain' }).end(failing ? 'broken' : 'fine');
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    receiver = await startWebhookReceiver();
    // Private addresses allowed: the upstream and the webhook receiver both live on loopback here.
    t = await startTestNode({ EDGE_ORIGIN_ALLOW_PRIVATE: 'true', EDGE_ALERT_EVALUATION_INTERVAL_MS: '200' });
    user = await t.createUser('business');
    endpoint = await expectBody(201, t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} }));
    const origin = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    await expectBody(200, t.api('PUT', `/v1/endpoints/${endpoint.uuid}/origin`, { key: user.api_key, body: { url: origin } }));
    await edgeCaughtUp(t);
  });
  after(async () => {
    await t?.close();
    await receiver?.close();
    upstream?.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  });

  const send = async (n: number, expected: number) => {
    for (let i = 0; i < n; i++) assert.equal((await visit(t.node.edge!.httpPort, endpoint.hostname, `/api/${i}`)).status, expected);
  };
  const ruleStatus = async (uuid: string) => (await expectBody(200, t.api('GET', `/v1/traffic/alerts/${uuid}`, { key: user.api_key }))).status as string;

  it('fires when the upstream fails, resolves when it recovers, tests on demand; events show firing, ok and test', async () => {
    const rule = await expectBody(
      201,
      t.api('POST', '/v1/traffic/alerts', {
        key: user.api_key,
        body: {
          name: 'Upstream failing',
          endpoint_id: endpoint.uuid,
          metric: 'error_rate',
          comparison: 'gt',
          threshold: 0.5,
          window_seconds: 300,
          channels: [{ type: 'webhook', url: receiver.url, secret: SECRET }],
        },
      }),
    );
    assert.equal(rule.status, 'unknown');

    // Healthy traffic first: the evaluator sees data and the rule turns ok, with nothing sent.
    await send(5, 200);
    await eventually(async () => ((await ruleStatus(rule.uuid)) === 'ok' ? true : undefined), 30_000);
    assert.equal(receiver.deliveries.length, 0);

    failing = true;
    await send(20, 500);
    const fired = await eventually(async () => receiver.deliveries.find((d) => d.body.status === 'firing'), 30_000);
    assert.ok(signatureValid(fired, SECRET), 'the payload verifies with the channel secret');
    assert.equal(fired.body.rule.uuid, rule.uuid);
    assert.equal(fired.body.rule.metric, 'error_rate');
    assert.ok(fired.body.value > 0.5, `value ${fired.body.value}`);
    assert.deepEqual(fired.body.endpoint, { uuid: endpoint.uuid, name: endpoint.subdomain });
    assert.equal(await ruleStatus(rule.uuid), 'firing');

    failing = false;
    await send(60, 200);
    const resolved = await eventually(async () => receiver.deliveries.find((d) => d.body.status === 'ok'), 30_000);
    assert.ok(signatureValid(resolved, SECRET));
    assert.ok(resolved.body.value <= 0.5, `value ${resolved.body.value}`);
    assert.equal(await ruleStatus(rule.uuid), 'ok');
    assert.equal(receiver.deliveries.length, 2, 'one notification per transition');

    const test = await expectBody(200, t.api('POST', `/v1/traffic/alerts/${rule.uuid}/test`, { key: user.api_key }));
    assert.equal(test.status, 'test');
    assert.equal(test.notified, true, test.notification_err);
    const delivered = receiver.deliveries.at(-1)!;
    assert.equal(delivered.body.status, 'test');
    assert.ok(signatureValid(delivered, SECRET));
    assert.equal(await ruleStatus(rule.uuid), 'ok', 'a test leaves the status');

    const { items } = await expectBody(200, t.api('GET', `/v1/traffic/alerts/${rule.uuid}/events`, { key: user.api_key }));
    assert.deepEqual(items.map((e: any) => e.status), ['test', 'ok', 'firing']);
    assert.ok(items.every((e: any) => e.rule_id === rule.id && e.notified === true && e.notification_err === null));
    assert.equal(items[2].value, fired.body.value);
    assert.equal(items[1].value, resolved.body.value);
    // Another account sees none of it.
    const stranger = await t.createUser();
    assert.equal((await t.api('GET', `/v1/traffic/alerts/${rule.uuid}/events`, { key: stranger.api_key })).status, 404);
  });
});
