// The mTLS stage on its own: compiled only for endpoints with a client-certificate policy, and its answers for
// requests whose connection carries no verdict for the endpoint (plain HTTP, TLS set up for another name).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mtls } from '../../../src/edge/stages/mtls.ts';
import type { RequestContext } from '../../../src/edge/pipeline/stage.ts';
import type { EndpointConfig } from '../../../src/shared/snapshot.ts';

const endpoint = (mode: EndpointConfig['mtls_mode']) => ({ uuid: '6f1c1a52-3b0e-4a57-9d1e-2f1f0c1d9e01', mtls_mode: mode, mtls_ca_pem: mode === 'disabled' ? null : 'PEM' }) as EndpointConfig;

/** A context whose response records what the stage wrote; its socket carries no client-certificate verdict. */
function ctx(secure: boolean) {
  const written: { status?: number; headers?: Record<string, unknown>; body?: string } = {};
  const res = {
    headersSent: false,
    writeHead(status: number, headers: Record<string, unknown>) {
      written.status = status;
      written.headers = headers;
    },
    end(body: string) {
      written.body = body;
    },
  };
  const c = {
    req: { headers: { accept: 'application/json' }, socket: {} },
    res,
    method: 'GET',
    host: 'app.example.com',
    path: '/',
    query: '',
    clientIp: '192.0.2.1',
    secure,
    upstreamHeaders: {} as Record<string, string>,
  } as unknown as RequestContext;
  return { c, written };
}

describe('mtls stage', () => {
  it('is compiled only for endpoints with mTLS optional or required', () => {
    assert.equal(mtls.compile(endpoint('disabled')), null);
    assert.equal(mtls.compile(endpoint('optional'))?.name, 'mtls');
    assert.equal(mtls.compile(endpoint('required'))?.name, 'mtls');
  });

  it('refuses plain HTTP to a required endpoint with 403 client_certificate_required', () => {
    const { c, written } = ctx(false);
    assert.equal(mtls.compile(endpoint('required'))!.run(c), 'done');
    assert.equal(written.status, 403);
    assert.equal(written.headers!['x-edge-error'], 'client_certificate_required');
    assert.equal(written.headers!.location, undefined);
    assert.deepEqual(c.upstreamHeaders, {});
  });

  it('passes plain HTTP to an optional endpoint as NONE', () => {
    const { c, written } = ctx(false);
    assert.equal(mtls.compile(endpoint('optional'))!.run(c), 'next');
    assert.equal(written.status, undefined);
    assert.deepEqual(c.upstreamHeaders, { 'x-edge-client-cert-verify': 'NONE' });
  });

  it('answers 421 misdirected_request over a TLS connection that asked for no certificate for this endpoint', () => {
    for (const mode of ['optional', 'required'] as const) {
      const { c, written } = ctx(true);
      assert.equal(mtls.compile(endpoint(mode))!.run(c), 'done');
      assert.equal(written.status, 421);
      assert.equal(JSON.parse(written.body!).code, 'misdirected_request');
      assert.deepEqual(c.upstreamHeaders, {});
    }
  });
});
