// The one check between an upstream's status and res.writeHead: only final statuses of a known class are relayed,
// so an agent's `:status 099` (HTTP/2 carries any digits) can no longer make writeHead throw and end the edge.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ServerResponse, IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { finalStatus } from '../../../src/edge/forward/status.ts';

describe('finalStatus', () => {
  it('an HTTP/2 :status below 100 crashes the edge: what writeHead throws on is refused, and so is what no class names', () => {
    for (const bad of [99, 0, -200, 1, 10, 100, 101, 103, 199, 600, 999, 1000, 200.5, NaN, Infinity, '200', '099', null, undefined, [200], { status: 200 }]) {
      assert.equal(finalStatus(bad), null, String(bad));
    }
  });

  it('takes every final status of RFC 9110 §15 classes 2xx-5xx, including unregistered ones, and writeHead takes each of them', () => {
    for (let code = 200; code <= 599; code++) {
      assert.equal(finalStatus(code), code);
      // What the guard lets through never throws in writeHead.
      new ServerResponse(new IncomingMessage(new Socket())).writeHead(code);
    }
  });

  it('refuses every code writeHead throws on (the guard is at least as strict as Node)', () => {
    for (const code of [-1, 0, 42, 99, 1000, 1.5]) {
      assert.throws(() => new ServerResponse(new IncomingMessage(new Socket())).writeHead(code), { code: 'ERR_HTTP_INVALID_STATUS_CODE' }, String(code));
      assert.equal(finalStatus(code), null, String(code));
    }
  });
});
