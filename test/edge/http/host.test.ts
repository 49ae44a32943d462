// The Host validator: one `host [ ":" port ]` the edge can serve (LDH names, dotted IPv4, bracketed IPv6), parsed
// to the lower-case form endpoints are looked up by; everything else refused before any routing happens.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { formatAuthority, parseAuthority, type Authority } from '../../../src/edge/http/host.ts';

const host = (h: string, port: number | null = null): Authority => ({ host: h, port });

describe('parseAuthority', () => {
  const valid: Array<[string, Authority]> = [
    ['app.edge.test', host('app.edge.test')],
    ['App.Edge.TEST', host('app.edge.test')],
    ['app.edge.test:8080', host('app.edge.test', 8080)],
    ['app.edge.test:1', host('app.edge.test', 1)],
    ['app.edge.test:65535', host('app.edge.test', 65535)],
    ['app.edge.test:08080', host('app.edge.test', 8080)],
    // RFC 3986 §6.2.3: an empty port is the same as none.
    ['app.edge.test:', host('app.edge.test')],
    // A fully qualified name's final dot names the same host.
    ['APP.edge.test.', host('app.edge.test')],
    ['app.edge.test.:443', host('app.edge.test', 443)],
    ['localhost', host('localhost')],
    ['a', host('a')],
    ['0-a.9z', host('0-a.9z')],
    ['xn--caf-dma.example', host('xn--caf-dma.example')],
    [`${'a'.repeat(63)}.test`, host(`${'a'.repeat(63)}.test`)],
    ['127.0.0.1', host('127.0.0.1')],
    ['192.0.2.255:80', host('192.0.2.255', 80)],
    ['[::1]', host('[::1]')],
    ['[::1]:8080', host('[::1]', 8080)],
    ['[2001:DB8::A]:443', host('[2001:db8::a]', 443)],
    ['[::ffff:192.0.2.1]', host('[::ffff:192.0.2.1]')],
    ['[::1]:', host('[::1]')],
  ];
  for (const [input, expected] of valid) {
    it(`accepts ${JSON.stringify(input)}`, () => assert.deepEqual(parseAuthority(input), expected));
  }

  // Regression (Host with a bad port or userinfo): these were routed on the part before the colon and forwarded
  // unchanged, so an upstream building links from Host pointed them at evil.example.
  const invalid = [
    'app.edge.test:80@evil.example',
    'app.edge.test:abc',
    'app.edge.test:99999',
    'app.edge.test:65536',
    'app.edge.test:0',
    'app.edge.test:80:81',
    'app.edge.test:123456',
    'app.edge.test:-1',
    'app.edge.test:+80',
    'app.edge.test: 80',
    'user@app.edge.test',
    'user:pass@app.edge.test',
    '@app.edge.test',
    // Whitespace and lists: Node trims the ends of a field value, never the inside; two Host lines joined by
    // joinDuplicateHeaders arrive as "a, b".
    'app edge.test',
    'app.edge.test\t',
    'app.edge.test, evil.example',
    // Labels and lengths.
    '',
    '.',
    '..',
    '.app.edge.test',
    'app..edge.test',
    'app.edge.test..',
    '-app.edge.test',
    'app-.edge.test',
    'app.-edge.test',
    `${'a'.repeat(64)}.test`,
    `${'abcdefghi.'.repeat(25)}abcd`, // 254 characters
    // Not LDH: reg-name characters RFC 3986 allows but DNS names never carry.
    'app_1.edge.test',
    'app%2eedge.test',
    'app!.edge.test',
    "app'.edge.test",
    'app.edge.test/x',
    'app.edge.test?x',
    'app.edge.test#x',
    'app.edge.test\\evil',
    'café.example',
    '*.edge.test',
    // Numbers WHATWG URL would read as other IPv4 addresses.
    '127.1',
    '0x7f.0.0.1',
    '127.0.0.01',
    '2130706433',
    'app.0x7f',
    'app.1',
    '256.0.0.1',
    '1.2.3.4.5',
    // IPv6: brackets required, no zone, no IPvFuture, no junk after the bracket.
    '::1',
    '[::1',
    '::1]',
    '[::1]8080',
    '[::1]:8080:1',
    '[::1]@evil.example',
    '[fe80::1%25eth0]',
    '[fe80::1%eth0]',
    '[v1.fe80::a+en1]',
    '[1::2::3]',
    '[127.0.0.1]',
    '[]',
  ];
  for (const input of invalid) {
    it(`refuses ${JSON.stringify(input)}`, () => assert.equal(parseAuthority(input), null));
  }

  it('accepts a name of exactly 253 characters and one more with a final dot', () => {
    const name = `${'abcdefghi.'.repeat(25)}abc`;
    assert.equal(name.length, 253);
    assert.deepEqual(parseAuthority(name), host(name));
    assert.deepEqual(parseAuthority(`${name}.:8080`), host(name, 8080));
  });
});

describe('formatAuthority', () => {
  it('writes the host, and the port when there is one', () => {
    assert.equal(formatAuthority(host('app.edge.test')), 'app.edge.test');
    assert.equal(formatAuthority(host('app.edge.test', 8080)), 'app.edge.test:8080');
    assert.equal(formatAuthority(host('[::1]', 443)), '[::1]:443');
  });
  it('round-trips through parseAuthority for every valid form', () => {
    for (const input of ['App.Edge.Test.:08080', 'app.edge.test:', '[2001:DB8::A]:443', '192.0.2.1']) {
      const parsed = parseAuthority(input)!;
      assert.deepEqual(parseAuthority(formatAuthority(parsed)), parsed, input);
    }
  });
});
