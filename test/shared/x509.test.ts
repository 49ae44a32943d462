// Unit tests of the shared PEM/X.509 helpers against certificates generated per run: chain parsing, SANs and the
// CN fallback, RFC 6125 host-name matching (OpenSSL's checkHost, and the stored-SAN matcher held to it), key parsing
// and matching, and mTLS CA bundles.
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import {
  certificateAltNames,
  certificateCoversHost,
  certificateDnsNames,
  describeCaBundle,
  hostnameCovered,
  isDnsName,
  keyMatchesCertificate,
  nameMatches,
  parseCaBundle,
  parseCertificateChain,
  parsePrivateKey,
  privateKeyPkcs8Pem,
  sansMatchDomain,
  X509Error,
  type X509ErrorReason,
} from '../../src/shared/x509.ts';
import { createCa, createLeaf, createSelfSigned, expiredWindow, generateKeys, unrelatedKeyPem, type Issued, type Leaf } from '../helpers/certs.ts';
import 'reflect-metadata'; // @peculiar/x509 resolves its algorithms through tsyringe, which needs this first
import * as peculiar from '@peculiar/x509';

/** A self-signed certificate with exactly these subjectAltName entries (any type), for what the helpers do not make. */
async function certWithAltNames(names: peculiar.JsonGeneralName[], cn = 'alt.example.test'): Promise<X509Certificate> {
  const keys = await generateKeys();
  const cert = await peculiar.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: `CN=${cn}`,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 3_600_000),
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions: names.length > 0 ? [new peculiar.SubjectAlternativeNameExtension(names)] : [],
  });
  return new X509Certificate(cert.toString('pem'));
}

function rejects(fn: () => unknown, reason: X509ErrorReason): X509Error {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof X509Error, `expected X509Error, got ${err}`);
    assert.equal(err.reason, reason, err.message);
    return err;
  }
  assert.fail(`expected a refusal with reason ${reason}`);
}

describe('host-name matching (RFC 6125 §6.4)', () => {
  it('matches exact names case-insensitively, ignoring a trailing dot', () => {
    assert.ok(nameMatches('www.example.com', 'WWW.Example.COM.'));
    assert.ok(!nameMatches('www.example.com', 'example.com'));
  });

  it('lets a wildcard stand for exactly one whole left-most label', () => {
    assert.ok(nameMatches('*.example.com', 'a.example.com'));
    assert.ok(!nameMatches('*.example.com', 'example.com'), 'not the apex');
    assert.ok(!nameMatches('*.example.com', 'a.b.example.com'), 'not two labels');
    assert.ok(!nameMatches('*.example.com', '.example.com'), 'not an empty label');
  });

  it('refuses partial, inner and single-label wildcards', () => {
    assert.ok(!nameMatches('f*.example.com', 'foo.example.com'));
    assert.ok(!nameMatches('a.*.example.com', 'a.b.example.com'));
    assert.ok(!nameMatches('*.com', 'example.com'));
    assert.ok(!nameMatches('*', 'localhost'));
  });

  it('hostnameCovered is true when any SAN matches', () => {
    assert.ok(hostnameCovered(['example.com', '*.example.com'], 'www.example.com'));
    assert.ok(hostnameCovered(['example.com', '*.example.com'], 'example.com'));
    assert.ok(!hostnameCovered(['example.com', '*.example.com'], 'a.www.example.com'));
    assert.ok(!hostnameCovered([], 'example.com'));
  });

  it('sansMatchDomain accepts the domain, names under it, and wildcards covering it', () => {
    assert.ok(sansMatchDomain(['example.com'], 'example.com'));
    assert.ok(sansMatchDomain(['api.example.com'], 'example.com'));
    assert.ok(sansMatchDomain(['*.example.com'], 'example.com'));
    assert.ok(sansMatchDomain(['*.example.com'], 'shop.example.com'), 'the wildcard covers the domain itself');
    assert.ok(!sansMatchDomain(['badexample.com'], 'example.com'), 'a suffix that is not a label boundary');
    assert.ok(!sansMatchDomain(['*.other.com', 'other.com'], 'example.com'));
    assert.ok(!sansMatchDomain(['*.com'], 'example.com'));
  });
});

describe('isDnsName', () => {
  it('accepts LDH names and (optionally) a whole-label wildcard', () => {
    for (const name of ['example.com', 'a-b.example.com', 'xn--bcher-kva.example', 'localhost', '1.2.3.4']) assert.ok(isDnsName(name), name);
    assert.ok(isDnsName('*.example.com', { wildcard: true }));
    assert.ok(!isDnsName('*.example.com'));
  });

  it('refuses bad labels and lengths', () => {
    for (const name of ['', 'Example.com', '-a.com', 'a-.com', 'a..com', 'under_score.com', 'sp ace.com', `${'a'.repeat(64)}.com`, `${'a.'.repeat(127)}com`, 'f*.example.com']) {
      assert.ok(!isDnsName(name, { wildcard: true }), name);
    }
  });
});

describe('subjectAltName entries, read from the DER', () => {
  it('lists every entry with its type, IP addresses included', async () => {
    const cert = await certWithAltNames([
      { type: 'dns', value: 'a.example.com' },
      { type: 'dns', value: '*.example.com' },
      { type: 'ip', value: '10.0.0.1' },
      { type: 'ip', value: '2001:db8::1' },
      { type: 'email', value: 'ops@example.com' },
    ]);
    assert.deepEqual(certificateAltNames(cert), [
      { type: 'dns', value: 'a.example.com' },
      { type: 'dns', value: '*.example.com' },
      { type: 'ip', value: '10.0.0.1' },
      { type: 'ip', value: '2001:db8::1' },
      { type: 'email', value: 'ops@example.com' },
    ]);
    assert.deepEqual(certificateDnsNames(cert), ['a.example.com', '*.example.com']);
    assert.deepEqual(certificateAltNames(new X509Certificate((await createSelfSigned({ dns: [] })).certPem)), []);
  });

  it('cannot be fooled by a URI that spells ", DNS:" (the display-string ambiguity of CVE-2021-44532)', async () => {
    const cert = await certWithAltNames([
      { type: 'url', value: 'http://x.test/, DNS:evil.test' },
      { type: 'dns', value: 'good.test' },
    ]);
    assert.deepEqual(certificateAltNames(cert), [
      { type: 'url', value: 'http://x.test/, DNS:evil.test' },
      { type: 'dns', value: 'good.test' },
    ]);
    assert.deepEqual(certificateDnsNames(cert), ['good.test']);
    assert.ok(!certificateCoversHost(cert, 'evil.test'));
  });
});

describe('certificateCoversHost (OpenSSL X509_check_host / X509_check_ip)', () => {
  it('lets a wildcard stand for exactly one whole left-most label, case-insensitively', async () => {
    const cert = new X509Certificate((await createSelfSigned({ dns: ['*.Example.com'] })).certPem);
    for (const host of ['a.example.com', 'A.EXAMPLE.COM', 'a.example.com.', 'xn--bcher-kva.example.com', 'bücher.example.com']) assert.ok(certificateCoversHost(cert, host), host);
    for (const host of ['example.com', 'a.b.example.com', '.example.com', 'a..example.com', 'aexample.com', 'a.example.org', '', 'a_b.example.com']) assert.ok(!certificateCoversHost(cert, host), host);
  });

  it('refuses partial, inner and single-label wildcards', async () => {
    for (const [pattern, host] of [['f*.example.com', 'foo.example.com'], ['*oo.example.com', 'foo.example.com'], ['a.*.example.com', 'a.b.example.com'], ['*.com', 'example.com'], ['*', 'localhost'], ['*.*.example.com', 'a.b.example.com']]) {
      const cert = new X509Certificate((await createSelfSigned({ dns: [pattern], cn: 'none' })).certPem);
      assert.ok(!certificateCoversHost(cert, host), `${pattern} must not cover ${host}`);
    }
  });

  it('matches internationalised names by their A-labels, whichever form the host comes in', async () => {
    const cert = new X509Certificate((await createSelfSigned({ dns: ['xn--bcher-kva.example', '*.xn--caf-dma.example'] })).certPem);
    assert.ok(certificateCoversHost(cert, 'bücher.example'));
    assert.ok(certificateCoversHost(cert, 'BÜCHER.example'));
    assert.ok(certificateCoversHost(cert, 'xn--bcher-kva.example'));
    assert.ok(certificateCoversHost(cert, 'menu.café.example'));
    assert.ok(!certificateCoversHost(cert, 'bucher.example'));
    assert.ok(!certificateCoversHost(cert, 'café.example'), 'the wildcard does not cover its own apex');
  });

  it('consults the subject CN only when there is no DNS subjectAltName', async () => {
    const legacy = new X509Certificate((await createSelfSigned({ dns: [], cn: 'Legacy.Example.test' })).certPem);
    assert.ok(certificateCoversHost(legacy, 'legacy.example.test'));
    const both = new X509Certificate((await createSelfSigned({ dns: ['san.example.test'], cn: 'cn.example.test' })).certPem);
    assert.ok(certificateCoversHost(both, 'san.example.test'));
    assert.ok(!certificateCoversHost(both, 'cn.example.test'));
  });

  it('matches IP addresses against iPAddress entries only, never a DNS name or the CN', async () => {
    const cert = await certWithAltNames([{ type: 'ip', value: '192.0.2.10' }, { type: 'ip', value: '2001:db8::1' }, { type: 'dns', value: '198.51.100.1' }], '203.0.113.5');
    for (const host of ['192.0.2.10', '2001:db8::1', '[2001:db8::1]', '2001:DB8:0::1']) assert.ok(certificateCoversHost(cert, host), host);
    for (const host of ['192.0.2.11', '198.51.100.1', '203.0.113.5', '2001:db8::2', '::ffff:192.0.2.10']) assert.ok(!certificateCoversHost(cert, host), host);
    const cnOnly = new X509Certificate((await createSelfSigned({ dns: [], cn: '192.0.2.10' })).certPem);
    assert.ok(!certificateCoversHost(cnOnly, '192.0.2.10'));
  });

  it('agrees with nameMatches (the matcher for stored SAN lists) on every pattern and host', async () => {
    const patterns = ['example.com', 'Shop.Example.com', '*.example.com', '*.EXAMPLE.com', 'f*.example.com', '*.com', 'a.*.example.com', 'xn--bcher-kva.example', '*.xn--bcher-kva.example', '*.co.uk', 'localhost'];
    const hosts = [
      'example.com', 'EXAMPLE.COM.', 'shop.example.com', 'a.example.com', 'a.b.example.com', '.example.com', 'foo.example.com', 'com', 'x.com',
      'a.b.example.com', 'bücher.example', 'xn--bcher-kva.example', 'a.bücher.example', 'a.xn--bcher-kva.example', 'shop.co.uk', 'co.uk', 'localhost',
      '1.2.3.4', '', 'a_b.example.com', 'a..example.com', '-a.example.com',
    ];
    for (const pattern of patterns) {
      const cert = new X509Certificate((await createSelfSigned({ dns: [pattern], cn: 'unrelated.invalid' })).certPem);
      for (const host of hosts) assert.equal(nameMatches(pattern, host), certificateCoversHost(cert, host), `${pattern} / ${JSON.stringify(host)}`);
    }
  });
});

describe('parseCertificateChain', () => {
  let ca: Issued;
  let leaf: Leaf;
  before(async () => {
    ca = await createCa('Chain Root');
    leaf = await createLeaf(ca, { dns: ['Shop.Example.test', '*.shop.example.test'] });
  });

  it('reads the leaf: subject, issuer, lower-cased SANs, validity and fingerprint', () => {
    const parsed = parseCertificateChain(leaf.chainPem);
    assert.equal(parsed.certificates.length, 2);
    assert.equal(parsed.leaf.subject, 'CN=Shop.Example.test');
    assert.equal(parsed.leaf.issuer, 'CN=Chain Root, O=Edge Tests');
    assert.deepEqual(parsed.leaf.sans, ['shop.example.test', '*.shop.example.test']);
    assert.equal(parsed.leaf.notAfter.getTime(), leaf.cert.notAfter.getTime());
    assert.equal(parsed.leaf.notBefore.getTime(), leaf.cert.notBefore.getTime());
    assert.equal(parsed.leaf.fingerprintSha256, new X509Certificate(leaf.certPem).fingerprint256.replace(/:/g, '').toLowerCase());
    assert.match(parsed.leaf.fingerprintSha256, /^[0-9a-f]{64}$/);
    assert.equal(parsed.leaf.isCa, false);
  });

  it('tolerates explanatory text between blocks and re-encodes the chain cleanly', () => {
    const noisy = `subject=CN = shop\nissuer=CN = root\n${leaf.certPem}\nsome comment\n${ca.certPem}\ntrailing`;
    const parsed = parseCertificateChain(noisy);
    assert.equal(parsed.pem.match(/-----BEGIN CERTIFICATE-----/g)?.length, 2);
    assert.ok(!parsed.pem.includes('comment') && !parsed.pem.includes('subject='));
    assert.equal(new X509Certificate(parsed.pem).fingerprint256, new X509Certificate(leaf.certPem).fingerprint256);
  });

  it('reads CRLF line endings (PEM saved on Windows)', () => {
    const crlf = leaf.chainPem.replace(/\n/g, '\r\n');
    assert.equal(parseCertificateChain(crlf).leaf.fingerprintSha256, parseCertificateChain(leaf.chainPem).leaf.fingerprintSha256);
  });

  it('accepts a lone self-signed certificate', async () => {
    const self = await createSelfSigned({ dns: ['self.example.test'] });
    assert.deepEqual(parseCertificateChain(self.certPem).leaf.sans, ['self.example.test']);
  });

  it('falls back to the subject CN only when there is no DNS SAN', async () => {
    const legacy = await createSelfSigned({ dns: [], cn: 'Legacy.Example.test' });
    assert.deepEqual(parseCertificateChain(legacy.certPem).leaf.sans, ['legacy.example.test']);
    const both = await createSelfSigned({ dns: ['san.example.test'], cn: 'cn.example.test' });
    assert.deepEqual(certificateDnsNames(new X509Certificate(both.certPem)), ['san.example.test']);
    assert.deepEqual(parseCertificateChain(both.certPem).leaf.sans, ['san.example.test']);
  });

  it('refuses input without a certificate', () => {
    rejects(() => parseCertificateChain('hello'), 'no_certificate');
    rejects(() => parseCertificateChain(''), 'no_certificate');
  });

  it('refuses a private key in the certificate field, naming the right field', async () => {
    const err = rejects(() => parseCertificateChain(`${leaf.certPem}\n${leaf.keyPem}`), 'private_key_in_certificate');
    assert.match(err.message, /private_key_pem/);
  });

  it('refuses other PEM types, malformed blocks and undecodable DER', () => {
    rejects(() => parseCertificateChain('-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----'), 'unexpected_pem_block');
    rejects(() => parseCertificateChain('-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----'), 'malformed_pem');
    rejects(() => parseCertificateChain('-----BEGIN CERTIFICATE-----\nAAAA\n-----END PUBLIC KEY-----'), 'malformed_pem');
    const err = rejects(() => parseCertificateChain(`${leaf.certPem}\n-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----`), 'unparsable_certificate');
    assert.equal(err.index, 1);
  });

  it('refuses a chain out of order or with a foreign certificate', async () => {
    rejects(() => parseCertificateChain(`${ca.certPem}\n${leaf.certPem}`), 'broken_chain');
    const other = await createCa('Other Root');
    const err = rejects(() => parseCertificateChain(`${leaf.certPem}\n${other.certPem}`), 'broken_chain');
    assert.match(err.message, /certificate 2/);
  });

  it('refuses more certificates than allowed', () => {
    rejects(() => parseCertificateChain(leaf.chainPem, { maxCertificates: 1 }), 'too_many_certificates');
  });

  it('refuses a certificate that names no DNS host', async () => {
    const nameless = await createSelfSigned({ dns: [], cn: 'Not a host name' });
    rejects(() => parseCertificateChain(nameless.certPem), 'no_dns_names');
  });
});

describe('private keys', () => {
  let ec: Leaf;
  let rsa: Leaf;
  before(async () => {
    const ca = await createCa('Key Root');
    ec = await createLeaf(ca, { dns: ['ec.example.test'] });
    rsa = await createLeaf(ca, { dns: ['rsa.example.test'], kind: 'rsa' });
  });

  it('parses PKCS#8, PKCS#1 and SEC1 keys and re-exports PKCS#8', () => {
    const pkcs1 = createPrivateKey(rsa.keyPem).export({ type: 'pkcs1', format: 'pem' }) as string;
    const sec1 = createPrivateKey(ec.keyPem).export({ type: 'sec1', format: 'pem' }) as string;
    for (const pem of [ec.keyPem, rsa.keyPem, pkcs1, sec1]) {
      const key = parsePrivateKey(pem);
      assert.match(privateKeyPkcs8Pem(key), /^-----BEGIN PRIVATE KEY-----/);
    }
    assert.equal(parsePrivateKey(pkcs1).asymmetricKeyType, 'rsa');
  });

  it('matches a key to its certificate only', async () => {
    const ecCert = new X509Certificate(ec.certPem);
    assert.ok(keyMatchesCertificate(ecCert, parsePrivateKey(ec.keyPem)));
    assert.ok(!keyMatchesCertificate(ecCert, parsePrivateKey(await unrelatedKeyPem())));
    assert.ok(!keyMatchesCertificate(ecCert, parsePrivateKey(rsa.keyPem)), 'another key type');
  });

  it('finds the key even after a certificate in the same text', () => {
    assert.equal(parsePrivateKey(`${ec.certPem}\n${ec.keyPem}`).asymmetricKeyType, 'ec');
  });

  it('refuses no key, two keys, encrypted keys, garbage and weak RSA', async () => {
    rejects(() => parsePrivateKey(ec.certPem), 'no_private_key');
    rejects(() => parsePrivateKey(`${ec.keyPem}\n${rsa.keyPem}`), 'multiple_private_keys');
    const encrypted = createPrivateKey(ec.keyPem).export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' }) as string;
    rejects(() => parsePrivateKey(encrypted), 'encrypted_private_key');
    const legacyEncrypted = createPrivateKey(rsa.keyPem).export({ type: 'pkcs1', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' }) as string;
    rejects(() => parsePrivateKey(legacyEncrypted), 'encrypted_private_key');
    rejects(() => parsePrivateKey('-----BEGIN PRIVATE KEY-----\nAAECAwQF\n-----END PRIVATE KEY-----'), 'unparsable_private_key');
    const weak = await unrelatedKeyPem('rsa1024');
    rejects(() => parsePrivateKey(weak), 'weak_private_key');
  });
});

describe('parseCaBundle', () => {
  let root: Issued;
  let second: Issued;
  before(async () => {
    root = await createCa('Clients Root');
    second = await createCa('Partners Root', { kind: 'rsa' });
  });

  it('describes each CA and drops duplicates', () => {
    const bundle = parseCaBundle(`${root.certPem}\n${second.certPem}\n${root.certPem}`);
    assert.deepEqual(
      bundle.certificates.map((c) => c.subject),
      ['CN=Clients Root, O=Edge Tests', 'CN=Partners Root, O=Edge Tests'],
    );
    assert.match(bundle.certificates[0].fingerprint_sha256, /^[0-9a-f]{64}$/);
    assert.equal(bundle.certificates[0].not_after, root.cert.notAfter.toISOString());
    assert.deepEqual(describeCaBundle(bundle.pem), bundle.certificates);
    assert.deepEqual(describeCaBundle(null), []);
  });

  it('refuses a certificate that is not a CA, naming it', async () => {
    const leaf = await createLeaf(root, { dns: ['client.example.test'] });
    const err = rejects(() => parseCaBundle(`${root.certPem}\n${leaf.certPem}`), 'not_a_ca');
    assert.equal(err.index, 1);
    assert.match(err.message, /client\.example\.test/);
  });

  it('refuses an expired CA, empty input, keys and too many certificates', async () => {
    const old = await createCa('Old Root', expiredWindow());
    rejects(() => parseCaBundle(old.certPem), 'expired_ca');
    rejects(() => parseCaBundle('  '), 'no_certificate');
    rejects(() => parseCaBundle(`${root.certPem}\n${root.keyPem}`), 'private_key_in_certificate');
    rejects(() => parseCaBundle(`${root.certPem}\n${second.certPem}`, { max: 1 }), 'too_many_certificates');
  });
});
