// Content negotiation of the edge's own pages: one reading of Accept with q-values for error pages, registration
// pages and the login redirect, where there were three substring rules that ignored q.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { asksForHtml, pageFormat, wantsJson } from '../../../src/edge/http/negotiate.ts';

const BROWSER = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';

describe('content negotiation of edge pages', () => {
  it('reads what browsers, API clients and curl send', () => {
    assert.equal(pageFormat(BROWSER), 'html');
    assert.equal(pageFormat('application/json'), 'json');
    assert.equal(pageFormat('*/*'), 'any');
    assert.equal(pageFormat(undefined), 'any');
    assert.equal(pageFormat(''), 'any');
  });

  it('q-values ignored: JSON preferred over HTML by q is JSON, and a refused type (q=0) is not chosen', () => {
    assert.equal(pageFormat('text/html;q=0.1, application/json'), 'json');
    assert.equal(pageFormat('application/json;q=0.5, text/html;q=0.4'), 'json');
    assert.equal(pageFormat('application/json;q=0'), 'any');
    assert.equal(pageFormat('application/json, text/html;q=0.5'), 'json');
    assert.equal(asksForHtml('application/json, text/html;q=0.5'), false, 'an API client that tolerates HTML is not sent to a login page');
  });

  it('at equal quality HTML wins, and a named type beats a wildcard', () => {
    assert.equal(pageFormat('application/json, text/html'), 'html');
    assert.equal(pageFormat('*/*, application/json'), 'json');
    assert.equal(pageFormat('application/json, */*;q=0.1'), 'json');
    assert.equal(pageFormat('text/*'), 'html');
  });

  it('media types are case-insensitive and their parameters do not hide them', () => {
    assert.equal(pageFormat('TEXT/HTML'), 'html');
    assert.equal(pageFormat('application/json; charset=utf-8'), 'json');
    assert.equal(pageFormat('application/json; charset=utf-8; q=0.2, text/html; level=1; q=0.9'), 'html');
  });

  it('bad inputs fall back to the default instead of throwing', () => {
    for (const bad of ['*', ',,,', ';q=1', 'image/png', 'application/json;q=abc', 'x'.repeat(10_000), '\u0000'])
      assert.doesNotThrow(() => pageFormat(bad), JSON.stringify(bad).slice(0, 40));
    assert.equal(pageFormat('image/png'), 'any');
    assert.equal(wantsJson('image/png'), false, 'the edge answers HTML when it cannot give what was asked');
  });
});
