// The relay's mutual-TLS material: by default a CA whose Ed25519 key is derived from the cluster secret (every edge
// with the same EDGE_SECRET_KEY trusts every other, and nothing else), or an operator's CA, certificate and key.
import { webcrypto, createHash, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import 'reflect-metadata'; // @peculiar/x509's dependency injection needs the Reflect metadata API first
import * as x509 from '@peculiar/x509';

/** What both ends of a relay connection present and trust. */
export interface RelayCredentials {
  ca: string;
  cert: string;
  key: string;
  /** The name a peer's certificate carries and the client checks (derived material); any name under an operator's CA. */
  servername: string | undefined;
}

/** Every derived leaf carries this DNS name; the client verifies it, so only certificates the CA issued for relays pass. */
export const RELAY_NAME = 'relay.edge.internal';

/** PKCS#8 DER of an Ed25519 private key is this prefix and the 32-byte seed (RFC 8410 §7). */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

const ALG = { name: 'Ed25519' } as const;
x509.cryptoProvider.set(webcrypto as unknown as Crypto);

function pem(label: string, der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '');
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

async function keyPairFromSeed(seed: Buffer): Promise<CryptoKeyPair> {
  const pkcs8 = Buffer.concat([ED25519_PKCS8_PREFIX, seed]);
  const privateKey = await webcrypto.subtle.importKey('pkcs8', pkcs8, ALG, true, ['sign']);
  // The public half, through JWK (the private JWK carries x).
  const jwk = await webcrypto.subtle.exportKey('jwk', privateKey);
  const publicKey = await webcrypto.subtle.importKey('jwk', { kty: jwk.kty, crv: jwk.crv, x: jwk.x }, ALG, true, ['verify']);
  return { privateKey, publicKey } as CryptoKeyPair;
}

/**
 * The derived CA and a fresh leaf for this edge. The CA certificate is the same bytes on every edge (fixed serial,
 * validity and a deterministic signature scheme), so its fingerprint says which cluster an edge belongs to.
 */
export async function derivedCredentials(seed: Buffer, node: string): Promise<RelayCredentials> {
  if (seed.length !== 32) throw new RangeError('the relay CA seed must be 32 bytes');
  const caKeys = await keyPairFromSeed(seed);
  const caName = 'CN=edge relay CA';
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: caName,
    notBefore: new Date('2020-01-01T00:00:00Z'),
    notAfter: new Date('2100-01-01T00:00:00Z'),
    keys: caKeys,
    signingAlgorithm: ALG,
    extensions: [new x509.BasicConstraintsExtension(true, 0, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)],
  });
  const leafKeys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const now = Date.now();
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: createHash('sha256').update(`${node}:${now}:${Math.random()}`).digest('hex').slice(0, 30),
    subject: `CN=${node.replace(/[^A-Za-z0-9._-]/g, '-')}`,
    issuer: caCert.subject,
    notBefore: new Date(now - 60 * 60_000),
    notAfter: new Date(now + 10 * 365 * 24 * 60 * 60_000),
    signingKey: caKeys.privateKey,
    publicKey: leafKeys.publicKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
      new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: RELAY_NAME }]),
    ],
  });
  return {
    ca: caCert.toString('pem'),
    cert: leaf.toString('pem'),
    key: pem('PRIVATE KEY', await webcrypto.subtle.exportKey('pkcs8', leafKeys.privateKey)),
    servername: RELAY_NAME,
  };
}

/** An operator's CA, certificate and key (EDGE_RELAY_CA_FILE, _CERT_FILE, _KEY_FILE), checked before any use. */
export async function operatorCredentials(files: { caFile: string; certFile: string; keyFile: string }): Promise<RelayCredentials> {
  const [ca, cert, key] = await Promise.all([files.caFile, files.certFile, files.keyFile].map((f) => readFile(f, 'utf8')));
  const leaf = new X509Certificate(cert);
  if (!leaf.verify(new X509Certificate(ca).publicKey)) {
    throw new Error(`EDGE_RELAY_CERT_FILE (${files.certFile}) is not issued by the CA in EDGE_RELAY_CA_FILE (${files.caFile})`);
  }
  // Any name the operator's CA issued: the CA is the trust, not the name (peers are found through presence).
  return { ca, cert, key, servername: undefined };
}
