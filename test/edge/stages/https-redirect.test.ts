// The HTTPS enforcement stage on its own: compiled only for endpoints that enforce HTTPS, silent on requests that
// arrived over TLS, and a redirect to the same host, path and query on the public HTTPS port otherwise.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { httpsLocation, httpsRedirect } from '../../../src/edge/stages/https-redirect.ts';
import type { RequestContext } from '../../../src/edge/pipeline/stage.ts';
import type { EndpointConfig } from '../../../src/shared/snapshot.ts';

const endpoint = (enforce: boolean) => ({ enforce_https: enforce }) as EndpointConfig;

/** A context whose response records what the stage wrote. */
function ctx(over: Partial<RequestContext> & { headers?: Record<string, string> } = {}) {
  const written: { status?: number; headers?: Record<string, unknown>; body?: string; keepAlive?: boolean } = {};
  const res = {
    shouldKeepAlive: true,
    writeHead(status: number, headers: Record<string, unknown>) {
      written.status = status;
      written.headers = headers;
    },
    end(body: string) {
      written.body = body;
      written.keepAlive = this.shouldKeepAlive;
    },
  };
  const c = {
    req: { headers: over.headers ?? {} },
    res,
    endpoint: endpoint(true),
    method: 'GET',
    host: 'app.example.com',
    path: '/a/b',
    query: '',
    clientIp: '192.0.2.1',
    secure: false,
    upstreamHeaders: {},
    ...over,
  } as unknown as RequestContext;
  return { c, written };
}

describe('https-redirect stage', () => {
  it('is compiled only for endpoints that enforce HTTPS', () => {
    assert.equal(httpsRedirect.compile(endpoint(false)), null);
    assert.ok(httpsRedirect.compile(endpoint(true)));
  });

  it('lets requests that arrived over TLS through', () => {
    const { c, written } = ctx({ secure: true });
    assert.equal(httpsRedirect.compile(endpoint(true))!.run(c), 'next');
    assert.equal(written.status, undefined);
  });

  it('sends GET and HEAD to the same host, path and query with 301', () => {
    const stage = httpsRedirect.compile(endpoint(true), { publicHttpsPort: () => 8443 })!;
    const { c, written } = ctx({ query: 'x=1&y=%20' });
    assert.equal(stage.run(c), 'done');
    assert.equal(written.status, 301);
    assert.equal(written.headers!.location, 'https://app.example.com:8443/a/b?x=1&y=%20');
    assert.equal(written.keepAlive, true);

    const head = ctx({ method: 'HEAD' });
    assert.equal(stage.run(head.c), 'done');
    assert.equal(head.written.status, 301);
    assert.equal(head.written.body, '');
    assert.equal(head.written.headers!['content-length'], 0);
  });

  it('keeps the method of other requests with 308, and closes a connection whose request body was not read', () => {
    const stage = httpsRedirect.compile(endpoint(true))!;
    const { c, written } = ctx({ method: 'POST', headers: { 'content-length': '5' } });
    assert.equal(stage.run(c), 'done');
    assert.equal(written.status, 308);
    assert.equal(written.headers!.location, 'https://app.example.com/a/b');
    assert.equal(written.keepAlive, false);
  });

  it('leaves the port out when it is 443', () => {
    assert.equal(httpsLocation('h.example', 443, '/'), 'https://h.example/');
    assert.equal(httpsLocation('h.example', 8443, '/p?q'), 'https://h.example:8443/p?q');
  });
});
