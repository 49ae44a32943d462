// The one-pass mapping of raw HTTP/1.1 field lines to HTTP/2 fields (addEndToEndFields, foldField): the pieces the
// edge's request headers and the agent's response headers are built from.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { addEndToEndFields, foldField, type HeaderMap } from '../../../src/shared/tunnel/headers.ts';

describe('addEndToEndFields', () => {
  it('lower-cases names, keeps end-to-end fields, and returns the first Host without copying it', () => {
    const out: HeaderMap = {};
    const host = addEndToEndFields(['Host', 'a.test', 'Accept', '*/*', 'X-Thing', 'Q', 'HOST', 'b.test'], out);
    assert.equal(host, 'a.test');
    assert.deepEqual(out, { accept: '*/*', 'x-thing': 'Q' });
  });

  it('drops every connection-specific field HTTP/2 forbids', () => {
    const out: HeaderMap = {};
    addEndToEndFields(
      ['Connection', 'keep-alive', 'Keep-Alive', 'timeout=5', 'Proxy-Connection', 'keep-alive', 'Transfer-Encoding', 'chunked', 'Upgrade', 'websocket', 'ETag', '"1"'],
      out,
    );
    assert.deepEqual(out, { etag: '"1"' });
  });

  it('keeps TE only as "trailers", from any of its lines', () => {
    const te = (...values: string[]) => {
      const out: HeaderMap = {};
      addEndToEndFields(values.flatMap((v) => ['TE', v]), out);
      return out.te;
    };
    assert.equal(te('trailers'), 'trailers');
    assert.equal(te('gzip', 'Trailers;q=0.5'), 'trailers');
    assert.equal(te('gzip, deflate'), undefined);
  });

  it('drops the fields Connection names, before or after it, in any case, across several Connection lines', () => {
    const out: HeaderMap = {};
    addEndToEndFields(['X-A', '1', 'Connection', 'X-A, x-b', 'X-B', '2', 'connection', 'close, TE', 'TE', 'trailers', 'X-C', '3'], out);
    assert.deepEqual(out, { 'x-c': '3' });
  });

  it('never deletes what the caller put in under a pseudo-header name, whatever Connection says', () => {
    const out: HeaderMap = { ':path': '/' };
    addEndToEndFields(['Connection', ':path, x-a', 'X-A', '1'], out);
    assert.deepEqual(out, { ':path': '/' });
  });

  it('leaves out what skip accepts', () => {
    const out: HeaderMap = {};
    addEndToEndFields(['X-Forwarded-For', '10.0.0.1', 'Accept', 'a'], out, (name) => name.startsWith('x-forwarded-'));
    assert.deepEqual(out, { accept: 'a' });
  });
});

describe('foldField', () => {
  it('folds repeats as Node folds message.headers', () => {
    const out: HeaderMap = {};
    for (const [name, value] of [
      ['cookie', 'a=1'],
      ['cookie', 'b=2'],
      ['set-cookie', 's=1'],
      ['set-cookie', 't=2'],
      ['content-type', 'text/plain'],
      ['content-type', 'text/html'],
      ['accept', 'a'],
      ['accept', 'b'],
    ] as const) {
      foldField(out, name, value);
    }
    assert.deepEqual(out, { cookie: 'a=1; b=2', 'set-cookie': ['s=1', 't=2'], 'content-type': 'text/plain', accept: 'a, b' });
  });

  it('joins even single-valued fields when asked to (joinDuplicateHeaders)', () => {
    const out: HeaderMap = {};
    foldField(out, 'user-agent', 'a', true);
    foldField(out, 'user-agent', 'b', true);
    assert.equal(out['user-agent'], 'a, b');
  });
});
