// Webhook verification compiled from plain endpoint configs, behind a real HTTP server: GitHub's published test
// vector, sha1, refusals before anything is forwarded (missing, malformed, mismatched), the body bound, and the body
// handed on whole for forwarding.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import net from 'node:net';
import type { AuthOutcome } from '../../../src/edge/metrics.ts';
import type { StageDeps } from '../../../src/edge/pipeline/stage.ts';
import { MAX_WEBHOOK_BODY_BYTES, webhook } from '../../../src/edge/stages/webhook.ts';
import { SecretBox } from '../../../src/shared/secrets.ts';
import type { WebhookVerificationConfig } from '../../../src/shared/snapshot.ts';
import { baseEndpoint, serveStage, type StageServer } from '../../helpers/stage-server.ts';

// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries#testing-the-webhook-payload-validation
const GITHUB_SECRET = "It's a Secret to Everybody";
const GITHUB_BODY = 'Hello, World!';
const GITHUB_SIGNATURE = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';

describe('webhook stage', () => {
  const box = new SecretBox('webhook-stage-test');
  const servers: StageServer[] = [];
  after(() => Promise.all(servers.map((s) => s.close())));

  const config = (over: Partial<WebhookVerificationConfig> = {}, secret = GITHUB_SECRET): WebhookVerificationConfig => ({
    header: 'x-hub-signature-256',
    algo: 'sha256',
    secret_sealed: box.seal(secret),
    prefix: 'sha256=',
    ...over,
  });
  async function serve(verification: WebhookVerificationConfig) {
    const outcomes: AuthOutcome[] = [];
    const deps: StageDeps = { publicHttpsPort: () => 443, secrets: box, authOutcome: (_e, _s, o) => void outcomes.push(o) };
    const endpoint = baseEndpoint({ webhook: verification });
    const s = await serveStage(webhook.compile(endpoint, deps)!, endpoint);
    servers.push(s);
    return { s, outcomes };
  }
  const codeOf = (r: { text: string }) => JSON.parse(r.text).code as string;

  it('is absent without webhook verification, and refuses to compile without the secret key or with a secret sealed under another', () => {
    assert.equal(webhook.compile(baseEndpoint()), null);
    assert.equal(webhook.compile(baseEndpoint({ webhook: null })), null);
    assert.throws(() => webhook.compile(baseEndpoint({ webhook: config() })), /EDGE_SECRET_KEY/);
    const other = new SecretBox('another key');
    assert.throws(() => webhook.compile(baseEndpoint({ webhook: config() }), { publicHttpsPort: () => 443, secrets: other }));
  });

  it("passes GitHub's published test vector, and hands the body on whole", async () => {
    const { s, outcomes } = await serve(config());
    const r = await s.request({ method: 'POST', headers: { 'X-Hub-Signature-256': GITHUB_SIGNATURE }, body: GITHUB_BODY });
    assert.equal(r.status, 200, r.text);
    assert.equal(Buffer.from(r.passed!.body!, 'base64').toString(), GITHUB_BODY);
    assert.deepEqual(outcomes, ['ok']);
  });

  it('accepts the hex digest in upper case too', async () => {
    const { s } = await serve(config());
    const upper = `sha256=${GITHUB_SIGNATURE.slice(7).toUpperCase()}`;
    assert.equal((await s.request({ method: 'POST', headers: { 'x-hub-signature-256': upper }, body: GITHUB_BODY })).status, 200);
  });

  it('verifies sha1 without a prefix, over a chunked body', async () => {
    const { s } = await serve(config({ header: 'x-signature', algo: 'sha1', prefix: '' }, 'shh'));
    const body = 'a'.repeat(70_000);
    const signature = createHmac('sha1', 'shh').update(body).digest('hex');
    // No Content-Length: Node sends the body chunked.
    const r = await s.request({ method: 'POST', headers: { 'x-signature': signature, 'transfer-encoding': 'chunked' }, body });
    assert.equal(r.status, 200, r.text);
    assert.equal(Buffer.from(r.passed!.body!, 'base64').length, body.length);
  });

  it('refuses a missing header, a wrong prefix, a malformed digest and a mismatch with 401 invalid_signature', async () => {
    const { s, outcomes } = await serve(config());
    const good = GITHUB_SIGNATURE.slice(7);
    const cases: Array<Record<string, string>> = [
      {},
      { 'x-hub-signature-256': good },
      { 'x-hub-signature-256': `sha1=${good}` },
      { 'x-hub-signature-256': 'sha256=zz' + good.slice(2) },
      { 'x-hub-signature-256': `sha256=${good.slice(0, 62)}` },
      { 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` },
    ];
    for (const headers of cases) {
      const r = await s.request({ method: 'POST', headers, body: GITHUB_BODY });
      assert.equal(r.status, 401, JSON.stringify(headers));
      assert.equal(codeOf(r), 'invalid_signature');
    }
    const tampered = await s.request({ method: 'POST', headers: { 'x-hub-signature-256': GITHUB_SIGNATURE }, body: 'Hello, World?' });
    assert.equal(tampered.status, 401, 'the signature of another body');
    assert.deepEqual(outcomes, ['missing', 'invalid', 'invalid', 'invalid', 'invalid', 'invalid', 'invalid']);
  });

  it('refuses a body over the bound with 413, by its Content-Length before reading and by counting when chunked', async () => {
    const { s } = await serve(config());
    const big = Buffer.alloc(MAX_WEBHOOK_BODY_BYTES + 1, 'x');
    const declared = await s.request({ method: 'POST', headers: { 'x-hub-signature-256': GITHUB_SIGNATURE }, body: big });
    assert.equal(declared.status, 413);
    assert.equal(codeOf(declared), 'body_too_large');
    assert.equal(declared.headers.connection, 'close', 'the unread body cannot be taken for the next request');
    const chunked = await s.request({ method: 'POST', headers: { 'x-hub-signature-256': GITHUB_SIGNATURE, 'transfer-encoding': 'chunked' }, body: big });
    assert.equal(chunked.status, 413);
  });

  it('closes the connection after refusing a request whose body it did not read, so the body is never parsed as a request', async () => {
    const { s } = await serve(config());
    // A body that is itself a request: were the connection kept, it would be served as the next one.
    const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n';
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(s.port, '127.0.0.1', () =>
        socket.write(`POST / HTTP/1.1\r\nHost: app.edge.test\r\nAccept: application/json\r\nContent-Length: ${smuggled.length}\r\n\r\n${smuggled}`),
      );
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (d) => (text += d));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    assert.match(answer, /^HTTP\/1\.1 401 /);
    assert.equal(answer.match(/HTTP\/1\.1 /g)!.length, 1, 'one answer only');
  });
});
