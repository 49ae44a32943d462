// Test certificates made on the fly with @peculiar/x509 over node's WebCrypto: CAs, leaves signed by them,
// self-signed, expired, wildcard and CN-only certificates, and keys that match nothing. Nothing is checked in.
import { webcrypto } from 'node:crypto';
import type * as X509 from '@peculiar/x509';

// @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata API loaded first.
import 'reflect-metadata';
const x509: typeof X509 = await import('@peculiar/x509');
x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const DAY = 24 * 60 * 60 * 1000;

export type KeyKind = 'ec' | 'rsa' | 'rsa1024';

const ALGORITHMS: Record<KeyKind, RsaHashedKeyGenParams | EcKeyGenParams> = {
  // P-256 keeps the suite fast; RSA is covered where key type matters.
  ec: { name: 'ECDSA', namedCurve: 'P-256' } as EcKeyGenParams,
  rsa: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256', publicExponent: new Uint8Array([1, 0, 1]), modulusLength: 2048 },
  rsa1024: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256', publicExponent: new Uint8Array([1, 0, 1]), modulusLength: 1024 },
};

function signingAlgorithm(kind: KeyKind): Algorithm {
  return kind === 'ec' ? ({ name: 'ECDSA', hash: 'SHA-256' } as EcdsaParams) : ALGORITHMS[kind];
}

export interface Issued {
  /** The certificate alone, PEM. */
  certPem: string;
  /** The private key, PKCS#8 PEM. */
  keyPem: string;
  keys: CryptoKeyPair;
  kind: KeyKind;
  cert: X509.X509Certificate;
  name: string;
}

export interface Leaf extends Issued {
  /** Leaf then its issuer (unless self-signed): what a user uploads as certificate_pem. */
  chainPem: string;
}

export interface CertOptions {
  /** DNS subjectAltNames; omit (or pass []) for a certificate with no SAN extension. */
  dns?: string[];
  /** Subject common name; defaults to the first DNS name. */
  cn?: string;
  notBefore?: Date;
  notAfter?: Date;
  kind?: KeyKind;
}

export async function generateKeys(kind: KeyKind = 'ec'): Promise<CryptoKeyPair> {
  return (await webcrypto.subtle.generateKey(ALGORITHMS[kind] as never, true, ['sign', 'verify'])) as CryptoKeyPair;
}

export async function privateKeyPem(keys: CryptoKeyPair): Promise<string> {
  const der = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return x509.PemConverter.encode(der, 'PRIVATE KEY');
}

function serial(): string {
  // Positive (first byte < 0x80) random 16-byte serial, as CAs issue them.
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] &= 0x7f;
  return Buffer.from(bytes).toString('hex');
}

function validity(opts: CertOptions): { notBefore: Date; notAfter: Date } {
  const now = Date.now();
  return { notBefore: opts.notBefore ?? new Date(now - DAY), notAfter: opts.notAfter ?? new Date(now + 90 * DAY) };
}

/** A root CA (basicConstraints CA:true, keyCertSign), usable as an issuer and in mTLS bundles. */
export async function createCa(name = 'Test Root CA', opts: Omit<CertOptions, 'dns' | 'cn'> = {}): Promise<Issued> {
  const kind = opts.kind ?? 'ec';
  const keys = await generateKeys(kind);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${name}, O=Edge Tests`,
    ...validity({ notAfter: new Date(Date.now() + 365 * DAY), ...opts }),
    keys,
    signingAlgorithm: signingAlgorithm(kind),
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await privateKeyPem(keys), keys, kind, cert, name };
}

function leafExtensions(dns: string[]): X509.Extension[] {
  const out: X509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
  ];
  if (dns.length > 0) out.push(new x509.SubjectAlternativeNameExtension(dns.map((value) => ({ type: 'dns' as const, value }))));
  return out;
}

/** A server certificate for `dns`, signed by `issuer`; chainPem is leaf + issuer. */
export async function createLeaf(issuer: Issued, opts: CertOptions = {}): Promise<Leaf> {
  const dns = opts.dns ?? ['www.example.test'];
  const kind = opts.kind ?? 'ec';
  const keys = await generateKeys(kind);
  const cn = opts.cn ?? dns[0] ?? 'leaf';
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${cn}`,
    issuer: issuer.cert.subject,
    ...validity(opts),
    publicKey: keys.publicKey,
    signingKey: issuer.keys.privateKey,
    signingAlgorithm: signingAlgorithm(issuer.kind),
    extensions: leafExtensions(dns),
  });
  const certPem = cert.toString('pem');
  return { certPem, chainPem: `${certPem}\n${issuer.certPem}\n`, keyPem: await privateKeyPem(keys), keys, kind, cert, name: cn };
}

/** A self-signed server certificate (no chain). */
export async function createSelfSigned(opts: CertOptions = {}): Promise<Leaf> {
  const dns = opts.dns ?? ['www.example.test'];
  const kind = opts.kind ?? 'ec';
  const keys = await generateKeys(kind);
  const cn = opts.cn ?? dns[0] ?? 'self-signed';
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${cn}`,
    ...validity(opts),
    keys,
    signingAlgorithm: signingAlgorithm(kind),
    extensions: leafExtensions(dns),
  });
  const certPem = cert.toString('pem');
  return { certPem, chainPem: certPem, keyPem: await privateKeyPem(keys), keys, kind, cert, name: cn };
}

/** Dates for a certificate that expired `days` ago (valid for a year before that). */
export function expiredWindow(days = 1): { notBefore: Date; notAfter: Date } {
  const notAfter = new Date(Date.now() - days * DAY);
  return { notBefore: new Date(notAfter.getTime() - 365 * DAY), notAfter };
}

/** Dates for a certificate that becomes valid `days` from now. */
export function futureWindow(days = 7): { notBefore: Date; notAfter: Date } {
  const notBefore = new Date(Date.now() + days * DAY);
  return { notBefore, notAfter: new Date(notBefore.getTime() + 90 * DAY) };
}

/** A private key that belongs to no certificate: the "mismatched key" upload. */
export async function unrelatedKeyPem(kind: KeyKind = 'ec'): Promise<string> {
  return privateKeyPem(await generateKeys(kind));
}
