// Generated paths and Host values against the invariants the edge's rules rest on, with a fixed seed so a failure
// reproduces: the path every stage judges is the path every reader (WHATWG URL included) sees, and a Host is
// accepted exactly when it is one servable `host [ ":" port ]`, in which case it round-trips unchanged.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isIPv6 } from 'node:net';
import { formatAuthority, parseAuthority } from '../../../src/edge/http/host.ts';
import { normalizePath, splitTarget } from '../../../src/edge/http/normalize-path.ts';
import { random } from '../../helpers/random.ts';

const ROUNDS = 5000;

describe('path normaliser, fuzzed', () => {
  // Separators, dots and their encodings, backslashes, encoded slashes, escapes good and bad, and plain text. No
  // token starts with a hex digit that could join a lone "%" into a new %2F, and no "Q" (the sentinel below).
  const TOKENS = [
    '/', '/', '/', '//', '\\', '%5C', '%5c', '.', '..', '%2e', '%2E', '.%2e', '%2e.', '%2F', '%2f', '%252F', '%25',
    'a', 'admin', 'p', '%61', '%7E', '~', '-', '_', ';', '=', '@', ':', '!', '$', '(', '*', '+', ',', "'", '%c3%a9',
    '%', '%z', '%zz', 'x.y', '...', ';', '..;', '%3B', '%3b',
  ];
  const rand = random(0x5eed_0001);
  const paths = Array.from({ length: ROUNDS }, () => {
    const n = 1 + rand(12);
    let s = rand(20) === 0 ? '' : '/';
    for (let i = 0; i < n; i++) s += TOKENS[rand(TOKENS.length)];
    return s;
  });

  /** Whether a raw path has a dot segment with parameters (`..;`, `%2e%3b`...) once `\` and %5C are read as "/". */
  const dotWithParameters = (p: string) =>
    p
      .replace(/%5c|\\/gi, '/')
      .split('/')
      .some((segment) => /^(?:\.|%2e){1,2}(?:;|%3b)/i.test(segment));

  it('refuses exactly the paths that are not absolute, carry a malformed escape, or a dot segment with parameters', () => {
    let withParameters = 0;
    for (const p of paths) {
      const malformed = !p.startsWith('/') || /%(?![0-9A-Fa-f]{2})/.test(p);
      if (!malformed && dotWithParameters(p)) withParameters++;
      assert.equal(normalizePath(p) === null, malformed || dotWithParameters(p), p);
    }
    assert.ok(withParameters > 50, `the generator makes dot segments with parameters (${withParameters})`);
  });

  it('never yields "." or ".." segments (plain, encoded, or before ";"), "\\", %5C, "//", and is idempotent', () => {
    for (const p of paths) {
      const out = normalizePath(p);
      if (out === null) continue;
      assert.ok(out.startsWith('/'), p);
      const segments = out.split('/').slice(1);
      assert.ok(!segments.includes('.') && !segments.includes('..'), `${p} → ${out}`);
      // Nor one that a server stripping `;` parameters (Tomcat, Spring) would read as "." or "..".
      assert.ok(!segments.some((segment) => /^\.{1,2}(?:;|%3B)/.test(segment)), `${p} → ${out}`);
      assert.ok(!/%2e/i.test(out), `${p} → ${out}`);
      assert.ok(!out.includes('\\') && !/%5c/i.test(out), `${p} → ${out}`);
      assert.ok(!out.includes('//'), `${p} → ${out}`);
      assert.equal(normalizePath(out), out, `${p} → ${out}`);
    }
  });

  it('never decodes %2F: it normalises as an opaque character would', () => {
    for (const p of paths) {
      const out = normalizePath(p);
      if (out === null) continue;
      // Swapping every %2F for a plain character, normalising, and swapping back gives the same path.
      const opaque = normalizePath(p.replace(/%2f/gi, 'Q'));
      assert.equal(opaque?.replaceAll('Q', '%2F'), out, p);
    }
  });

  it('is read unchanged by a WHATWG URL parser, as an upstream framework would read it', () => {
    for (const p of paths) {
      const out = normalizePath(p);
      if (out === null) continue;
      assert.equal(new URL(out, 'http://edge.test').pathname, out, `${p} → ${out}`);
    }
  });

  it('splits generated targets into the same path, whichever form carries them', () => {
    for (const p of paths) {
      if (!p.startsWith('/')) continue;
      const query = rand(2) === 0 ? '' : `?q=${TOKENS[rand(TOKENS.length)]}`;
      const origin = splitTarget(p + query);
      const absolute = splitTarget(`http://app.edge.test${p}${query}`);
      assert.deepEqual(absolute, origin && { ...origin, authority: 'app.edge.test' }, p + query);
      assert.equal(splitTarget(`${p}#${query}`), null);
    }
  });
});

describe('Host validator, fuzzed', () => {
  const rand = random(0x5eed_0002);
  const pick = <T>(xs: readonly T[]): T => xs[rand(xs.length)];
  const LDH = 'abcdefghijklmnopqrstuvwxyz0123456789-';

  /** A label of LDH characters not starting or ending with "-", 1-63 characters (sometimes exactly 63). */
  function label(): string {
    const length = rand(10) === 0 ? 63 : 1 + rand(12);
    let s = '';
    for (let i = 0; i < length; i++) s += i === 0 || i === length - 1 ? LDH[rand(36)] : LDH[rand(LDH.length)];
    // A numeric last label is an IPv4 matter; keep names alphabetic at their start.
    return /^[0-9]/.test(s) ? `a${s.slice(1)}` : s;
  }

  /** One generated host part and whether the policy must accept it. */
  function hostPart(): { text: string; ok: boolean; ipv6?: boolean } {
    switch (rand(6)) {
      case 0:
      case 1: {
        const labels = Array.from({ length: 1 + rand(rand(8) === 0 ? 8 : 4) }, label);
        const name = labels.join('.');
        return { text: name, ok: name.length <= 253 };
      }
      case 2: {
        // A name with one defect somewhere.
        const labels = Array.from({ length: 1 + rand(3) }, label);
        const defects = ['_', '@', ' ', '\t', ',', '%41', '*', 'é', '!', "'", '(', '/', '\\', '?', '#', '[', ']'];
        const i = rand(labels.length);
        const at = rand(labels[i].length + 1);
        labels[i] = labels[i].slice(0, at) + pick(defects) + labels[i].slice(at);
        const shapes = [labels.join('.'), `-${labels.join('.')}`, `${labels.join('.')}-.x`, `${labels.join('..')}.`, `.${labels.join('.')}`, 'a'.repeat(64)];
        const text = pick(shapes);
        return { text, ok: false };
      }
      case 3: {
        const octet = () => String(rand(256));
        return { text: [octet(), octet(), octet(), octet()].join('.'), ok: true };
      }
      case 4: {
        const bad = ['127.1', '0x7f.0.0.1', '127.0.0.01', '256.1.1.1', '1.2.3.4.5', '2130706433', 'a.0x10', 'a.1', '1.2.3.', '01.2.3.4'];
        return { text: pick(bad), ok: false };
      }
      default: {
        const groups = Array.from({ length: 8 }, () => rand(0x10000).toString(16));
        const forms = [groups.join(':'), `${groups.slice(0, 2).join(':')}::${groups[7]}`, '::1', '::', `::ffff:${rand(256)}.0.0.${rand(256)}`];
        const literal = pick(forms);
        const bad = [`${literal}%25eth0`, `${literal}%eth0`, '1::2::3', 'v1.fe80::a', `${literal}:`.replace(/::?$/, ':::')];
        if (rand(5) === 0) {
          const text = rand(2) === 0 ? `[${pick(bad)}]` : literal; // unbracketed IPv6 is not a Host
          return { text, ok: false };
        }
        assert.ok(isIPv6(literal), literal);
        return { text: `[${literal}]`, ok: true, ipv6: true };
      }
    }
  }

  /** A port suffix and whether the policy must accept it. */
  function portPart(): { text: string; ok: boolean } {
    switch (rand(5)) {
      case 0:
        return { text: '', ok: true };
      case 1:
        return { text: ':', ok: true };
      case 2:
        return { text: `:${1 + rand(65535)}`, ok: true };
      case 3: {
        const p = 1 + rand(9999);
        return { text: `:${String(p).padStart(5, '0')}`, ok: true };
      }
      default:
        return { text: pick([':0', ':00000', `:${65536 + rand(34464)}`, ':123456', ':abc', ':80:81', ':80@evil.example', ': 80', ':-1', ':+80', ':8o', '@evil.example']), ok: false };
    }
  }

  const cases = Array.from({ length: ROUNDS }, () => {
    const host = hostPart();
    const dot = !host.ipv6 && rand(6) === 0 ? '.' : '';
    const port = portPart();
    let text = host.text + dot + port.text;
    if (rand(3) === 0) text = text.toUpperCase();
    return { text, ok: host.ok && port.ok, ipv6: host.ipv6 === true };
  });

  it('accepts exactly the servable forms', () => {
    let accepted = 0;
    for (const c of cases) {
      assert.equal(parseAuthority(c.text) !== null, c.ok, JSON.stringify(c.text));
      if (c.ok) accepted++;
    }
    // The generator exercises both sides.
    assert.ok(accepted > ROUNDS / 4 && accepted < (ROUNDS * 3) / 4, String(accepted));
  });

  it('round-trips what it accepts: parse → format → parse is the same, format is stable', () => {
    for (const c of cases) {
      const parsed = parseAuthority(c.text);
      if (parsed === null) continue;
      const formatted = formatAuthority(parsed);
      assert.deepEqual(parseAuthority(formatted), parsed, c.text);
      assert.equal(formatAuthority(parseAuthority(formatted)!), formatted, c.text);
      assert.equal(parsed.host, parsed.host.toLowerCase());
      assert.ok(parsed.port === null || (parsed.port >= 1 && parsed.port <= 65535), c.text);
      assert.ok(!parsed.host.endsWith('.'), c.text);
    }
  });

  it('accepts nothing a WHATWG URL parser would read as another host or port', () => {
    for (const c of cases) {
      const parsed = parseAuthority(c.text);
      if (parsed === null) continue;
      const url = new URL(`http://${formatAuthority(parsed)}/`);
      const expected = c.ipv6 ? new URL(`http://${parsed.host}/`).hostname : parsed.host;
      assert.equal(url.hostname, expected, c.text);
      assert.equal(url.port === '' ? (parsed.port ?? 80) : Number(url.port), parsed.port ?? 80, c.text);
    }
  });
});
