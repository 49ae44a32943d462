// The page listing an endpoint's providers: every name escaped (they come from the endpoint's owner), links to the
// login path with the return target encoded, and headers that keep it from being stored, framed or scripted.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LOGIN_FLOW_HEADERS, loginHref, loginPage } from '../../../src/edge/auth/login-page.ts';

describe('login page', () => {
  it('escapes provider names and the host; encodes the return target in every link', () => {
    const html = loginPage('app.edge.test', [
      { id: 1, name: 'Google' },
      { id: 2, name: `"><img src=x onerror=alert(1)> & 'x'` },
    ], '/a?b=c&d="e"');
    assert.ok(!html.includes('<img'), html);
    assert.ok(html.includes('&quot;&gt;&lt;img src=x onerror=alert(1)&gt; &amp; &#39;x&#39;'));
    assert.ok(html.includes('<a href="/.edge/auth/login?provider=1&amp;return_to=%2Fa%3Fb%3Dc%26d%3D%22e%22">Google</a>'));
    assert.equal((html.match(/<a href=/g) ?? []).length, 2);
    assert.ok(html.includes('<title>Sign in to app.edge.test</title>'));
    assert.ok(!/<script/i.test(html));
  });

  it('links to the login path, with or without a provider', () => {
    assert.equal(loginHref('/x y'), '/.edge/auth/login?return_to=%2Fx%20y');
    assert.equal(loginHref('/', 42), '/.edge/auth/login?provider=42&return_to=%2F');
  });

  it('is never stored, framed or scripted', () => {
    assert.equal(LOGIN_FLOW_HEADERS['cache-control'], 'no-store');
    assert.match(LOGIN_FLOW_HEADERS['content-security-policy'], /default-src 'none'; frame-ancestors 'none'/);
    assert.equal(LOGIN_FLOW_HEADERS['x-frame-options'], 'DENY');
  });
});
