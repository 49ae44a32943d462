// The traffic replay client on its own (src/control/services/traffic-replay.ts): which captured headers are sent
// again, the per-account and per-process bounds on replays in flight, and an answer cut at the response limit.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { REPLAY_LIMITS, REPLAY_RESPONSE_LIMIT, replayHeaders, ReplaySlots, sendReplay } from '../../src/control/services/traffic-replay.ts';

describe('traffic replay client', () => {
  it('re-sends captured headers except hop-by-hop, framing, credentials and redacted values', () => {
    const headers = replayHeaders(
      {
        Accept: 'text/html',
        'X-Multi': ['a', '[redacted]', 'b'],
        Connection: 'keep-alive',
        'Transfer-Encoding': 'chunked',
        Host: 'old.example',
        'Content-Length': '99',
        Expect: '100-continue',
        Authorization: 'Bearer x',
        Cookie: 'a=b',
        'X-Secret': 'REDACTED',
        ':authority': 'h2.example',
        'X-Number': 7,
      },
      'app.example.test',
      42,
      5,
    );
    assert.deepEqual(headers, {
      accept: 'text/html',
      'x-multi': ['a', 'b'],
      host: 'app.example.test',
      'x-replay-of': '42',
      'content-length': '5',
    });
    assert.equal(replayHeaders(null, 'h.test', 1, 0)['content-length'], undefined);
  });

  it('bounds replays in flight per account and per process; a release frees one slot once', () => {
    const slots = new ReplaySlots();
    const held = Array.from({ length: REPLAY_LIMITS.perAccount }, () => slots.take(1));
    assert.ok(held.every((release) => release !== null));
    assert.equal(slots.take(1), null, 'the account is at its limit');
    assert.notEqual(slots.take(2), null, 'another account is not');
    held[0]!();
    held[0]!();
    assert.notEqual(slots.take(1), null, 'one slot came back');
    assert.equal(slots.take(1), null, 'a second release of the same slot frees nothing');

    const process = new ReplaySlots();
    for (let account = 0; account < REPLAY_LIMITS.perProcess; account++) assert.notEqual(process.take(account), null);
    assert.equal(process.take(REPLAY_LIMITS.perProcess), null, 'the process is at its limit');
  });

  describe('against a real server', () => {
    let server: http.Server;
    let origin: string;
    const seen: Array<{ method?: string; url?: string; host?: string; body: string }> = [];
    before(async () => {
      server = http.createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          seen.push({ method: req.method, url: req.url, host: req.headers.host, body: Buffer.concat(chunks).toString() });
          if (req.url === '/big') return res.end(Buffer.alloc(REPLAY_RESPONSE_LIMIT + 4096, 0x61));
          res.setHeader('x-answer', 'yes');
          res.end('hello');
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it('sends the method, path, Host and body, and reads the answer', async () => {
      const body = Buffer.from('a=1');
      const answer = await sendReplay(
        { origin, verifyTls: true },
        { method: 'POST', path: '/form?x=1', hostname: 'app.example.test', headers: replayHeaders({}, 'app.example.test', 7, body.length), body },
      );
      assert.equal(answer.status, 200);
      assert.equal(answer.headers['x-answer'], 'yes');
      assert.equal(answer.body.toString(), 'hello');
      assert.equal(answer.truncated, false);
      assert.deepEqual(seen.at(-1), { method: 'POST', url: '/form?x=1', host: 'app.example.test', body: 'a=1' });
    });

    it('cuts an answer longer than the response limit and marks it truncated', async () => {
      const answer = await sendReplay(
        { origin, verifyTls: true },
        { method: 'GET', path: '/big', hostname: 'app.example.test', headers: replayHeaders({}, 'app.example.test', 8, 0), body: Buffer.alloc(0) },
      );
      assert.equal(answer.body.length, REPLAY_RESPONSE_LIMIT);
      assert.equal(answer.truncated, true);
    });

    it('rejects when nothing listens', async () => {
      const closed = http.createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const port = (closed.address() as AddressInfo).port;
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      await assert.rejects(
        sendReplay({ origin: `http://127.0.0.1:${port}`, verifyTls: true }, { method: 'GET', path: '/', hostname: 'h.test', headers: {}, body: Buffer.alloc(0) }),
        (err: NodeJS.ErrnoException) => err.code === 'ECONNREFUSED',
      );
    });
  });
});
