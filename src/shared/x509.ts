// PEM and X.509 helpers shared by the control API (validating uploads) and edges (choosing what to serve):
// chain parsing with node's crypto.X509Certificate, SANs, RFC 6125 host-name matching, key match, mTLS CA bundles.
//
// What the platform already knows is not re-implemented: host names are matched against a certificate by OpenSSL
// (X509Certificate.checkHost / checkIP), and subjectAltName entries are read structurally from the DER by
// @peculiar/x509, never parsed out of node's display string.
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import 'reflect-metadata'; // @peculiar/x509's dependency injection needs the Reflect metadata API first
import * as peculiar from '@peculiar/x509';

/** Why a PEM input was refused: `reason` is a stable machine-readable code, `message` says it to a person. */
export class X509Error extends Error {
  override name = 'X509Error';
  constructor(
    readonly reason: X509ErrorReason,
    message: string,
    readonly index?: number,
  ) {
    super(message);
  }
}

export type X509ErrorReason =
  | 'malformed_pem'
  | 'no_certificate'
  | 'unexpected_pem_block'
  | 'private_key_in_certificate'
  | 'too_many_certificates'
  | 'unparsable_certificate'
  | 'broken_chain'
  | 'no_dns_names'
  | 'no_private_key'
  | 'multiple_private_keys'
  | 'encrypted_private_key'
  | 'unparsable_private_key'
  | 'weak_private_key'
  | 'key_mismatch'
  | 'not_a_ca'
  | 'expired_ca';

export interface PemBlock {
  label: string;
  der: Buffer;
}

// RFC 7468 §2: text outside the encapsulation boundaries is allowed (openssl writes "subject=..." lines there),
// and the label of END must repeat the label of BEGIN.
const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END ([A-Z0-9 ]+)-----/g;

/** Every PEM block in `text`, in order. Explanatory text between blocks is ignored; a malformed block throws. */
export function pemBlocks(text: string): PemBlock[] {
  const out: PemBlock[] = [];
  for (const m of text.matchAll(PEM_BLOCK)) {
    const [, begin, body, end] = m;
    if (begin !== end) throw new X509Error('malformed_pem', `PEM block ${out.length + 1} begins as "${begin}" but ends as "${end}"`, out.length);
    // Legacy "Proc-Type: 4,ENCRYPTED" headers sit inside the block; keep them detectable for a precise error.
    if (/^\s*Proc-Type:/m.test(body)) {
      out.push({ label: `${begin} (ENCRYPTED)`, der: Buffer.alloc(0) });
      continue;
    }
    const b64 = body.replace(/\s+/g, '');
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length === 0) {
      throw new X509Error('malformed_pem', `PEM block ${out.length + 1} ("${begin}") is not valid base64`, out.length);
    }
    out.push({ label: begin, der: Buffer.from(b64, 'base64') });
  }
  return out;
}

function toPem(block: PemBlock): string {
  const lines = block.der.toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN ${block.label}-----\n${lines.join('\n')}\n-----END ${block.label}-----\n`;
}

function isPrivateKeyLabel(label: string): boolean {
  return /PRIVATE KEY/.test(label);
}

/** What the API and the feed say about one certificate. */
export interface CertificateInfo {
  subject: string;
  issuer: string;
  /** DNS names the certificate is valid for, lower-case; wildcards kept as "*.example.com". */
  sans: string[];
  notBefore: Date;
  notAfter: Date;
  /** SHA-256 of the DER encoding, lower-case hex without separators. */
  fingerprintSha256: string;
  isCa: boolean;
}

export interface ParsedChain {
  /** Leaf first, then the chain, as parsed. */
  certificates: X509Certificate[];
  leaf: CertificateInfo;
  /** The chain re-encoded as clean PEM (no explanatory text, one block per certificate, leaf first). */
  pem: string;
}

/** node prints distinguished names one attribute per line; the API shows the familiar comma-separated form. */
function displayName(name: string): string {
  return name
    .split('\n')
    .map((s) => s.trim())
    .filter(Boolean)
    .join(', ');
}

function fingerprint(cert: X509Certificate): string {
  return cert.fingerprint256.replace(/:/g, '').toLowerCase();
}

function parseDate(value: string, what: string): Date {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) throw new X509Error('unparsable_certificate', `cannot read the certificate's ${what} date "${value}"`);
  return date;
}

/** One subjectAltName entry as the certificate encodes it (RFC 5280 §4.2.1.6), e.g. `{ type: 'dns', value: 'a.example' }`. */
export interface AltName {
  type: 'dns' | 'dn' | 'email' | 'guid' | 'ip' | 'url' | 'upn' | 'id';
  value: string;
}

/**
 * Every subjectAltName entry of a certificate, in order, read from the DER. Node's `subjectAltName` string needed
 * a quoting fix (CVE-2021-44532) before a URI holding ", DNS:x" stopped reading as a second DNS name; a structural
 * reading has no such ambiguity. Name forms @peculiar/x509 cannot represent (otherName with an unknown type, X.400,
 * EDI party) are left out: none of them names a host.
 */
export function certificateAltNames(cert: X509Certificate): AltName[] {
  let parsed: peculiar.X509Certificate;
  try {
    parsed = new peculiar.X509Certificate(cert.raw);
  } catch (err) {
    throw new X509Error('unparsable_certificate', `cannot read the certificate's extensions: ${(err as Error).message}`);
  }
  const san = parsed.getExtension(peculiar.SubjectAlternativeNameExtension);
  return san ? san.names.items.map((n) => ({ type: n.type, value: n.value })) : [];
}

/** The subject's common names, read from the DER (last is most specific, RFC 6125 §2.3.1). */
function subjectCommonNames(cert: X509Certificate): string[] {
  try {
    return new peculiar.X509Certificate(cert.raw).subjectName.getField('CN');
  } catch (err) {
    throw new X509Error('unparsable_certificate', `cannot read the certificate's subject: ${(err as Error).message}`);
  }
}

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/**
 * A host name in preferred-name syntax (RFC 1123 §2.1): lower-case LDH labels of 1-63 characters, 253 in all.
 * With `wildcard`, the left-most label may be "*" alone (RFC 6125 §6.4.3; CA/B forbids partial wildcards).
 */
export function isDnsName(name: string, opts: { wildcard?: boolean } = {}): boolean {
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split('.');
  if (opts.wildcard && labels[0] === '*') labels.shift();
  return labels.length > 0 && labels.every((l) => LABEL.test(l));
}

/** A DNS name compared case-insensitively and without the root's trailing dot (RFC 4343, RFC 6125 §6.4.1). */
function lowerHost(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}

/**
 * A reference host name (what a client asks for) as certificates spell names: lowerHost, and internationalised
 * labels as A-labels (RFC 6125 §6.4.2 compares A-labels; "bücher.example" is "xn--bcher-kva.example"). Presented
 * names are not converted: a certificate's dNSName is IA5 and already holds A-labels.
 */
function normalHost(name: string): string {
  const host = lowerHost(name);
  return /[^\x00-\x7f]/.test(host) ? domainToASCII(host) : host;
}

/**
 * OpenSSL's host check with RFC 6125 §6.4.3's rules and the CA/Browser Forum's: a wildcard only as the whole
 * left-most label, standing for exactly one label, and never over a single-label suffix ("*.com"). The subject CN is
 * consulted only when the certificate has no DNS subjectAltName (`default`; RFC 6125 §6.4.4), the same rule
 * certificateDnsNames reports in `sans`: `never` would refuse the CN-only certificates the library accepts.
 */
const HOST_CHECK = { subject: 'default', wildcards: true, partialWildcards: false, multiLabelWildcards: false, singleLabelSubdomains: false } as const;

/**
 * Whether a certificate is valid for `host`: a host name through X509Certificate.checkHost (above), an IP address
 * (brackets allowed) through checkIP, which reads only iPAddress subjectAltNames (RFC 6125 §1.7.2: never a DNS name
 * or the CN). A host that is neither a valid host name nor an address is covered by nothing; OpenSSL alone would let
 * "*.example.com" cover ".example.com".
 */
export function certificateCoversHost(cert: X509Certificate, host: string): boolean {
  const literal = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (isIP(literal) !== 0) return cert.checkIP(literal) !== undefined;
  const name = normalHost(host);
  return isDnsName(name) && cert.checkHost(name, HOST_CHECK) !== undefined;
}

/**
 * Whether one presented DNS identifier, as certificateDnsNames lists it, matches a host name: the rules of
 * certificateCoversHost for names already read out of a certificate and stored (the control API checks an
 * assignment against a certificate's stored `sans`). A test holds the two to the same answers. "*.example.com"
 * matches "a.example.com" but neither "example.com" nor "a.b.example.com"; "*.com" matches nothing; an IP address
 * is matched by no DNS name.
 */
export function nameMatches(presented: string, hostname: string): boolean {
  const pattern = lowerHost(presented);
  const host = normalHost(hostname);
  if (!isDnsName(host) || isIP(host) !== 0) return false;
  if (!pattern.startsWith('*.')) return !pattern.includes('*') && pattern === host;
  const suffix = pattern.slice(1); // ".example.com"
  if (suffix.includes('*') || suffix.split('.').length < 3) return false;
  if (!host.endsWith(suffix)) return false;
  const label = host.slice(0, -suffix.length);
  return label.length > 0 && !label.includes('.');
}

/** True when any of `sans` (stored DNS names of a certificate) covers `hostname`, as nameMatches decides. */
export function hostnameCovered(sans: readonly string[], hostname: string): boolean {
  return sans.some((san) => nameMatches(san, hostname));
}

/**
 * True when the certificate belongs to `domain`: one SAN is the domain, lies under it ("*.example.com" and
 * "a.b.example.com" both do for example.com), or covers the domain itself ("*.example.com" for a.example.com).
 */
export function sansMatchDomain(sans: readonly string[], domain: string): boolean {
  const d = normalHost(domain);
  return sans.some((san) => {
    const s = lowerHost(san);
    const base = s.startsWith('*.') ? s.slice(2) : s;
    return base === d || base.endsWith(`.${d}`) || nameMatches(s, d);
  });
}

/**
 * DNS names of a certificate. RFC 6125 §6.4.4: the subject CN is consulted only when the certificate has no
 * DNS subjectAltName at all (browsers no longer consult it; such a certificate works only for older clients).
 * Names that are not valid host names (underscores, partial wildcards) are dropped: no client would match them.
 */
export function certificateDnsNames(cert: X509Certificate): string[] {
  let names = certificateAltNames(cert)
    .filter((e) => e.type === 'dns')
    .map((e) => e.value);
  if (names.length === 0) {
    const cn = subjectCommonNames(cert).pop();
    names = cn ? [cn] : [];
  }
  const out = new Set<string>();
  for (const name of names) {
    const n = lowerHost(name.trim());
    if (isDnsName(n, { wildcard: true })) out.add(n);
  }
  return [...out];
}

export function certificateInfo(cert: X509Certificate): CertificateInfo {
  return {
    subject: displayName(cert.subject),
    issuer: displayName(cert.issuer),
    sans: certificateDnsNames(cert),
    notBefore: parseDate(cert.validFrom, 'not-before'),
    notAfter: parseDate(cert.validTo, 'not-after'),
    fingerprintSha256: fingerprint(cert),
    isCa: cert.ca,
  };
}

function parseCertificates(text: string, opts: { max: number; field: string }): X509Certificate[] {
  const blocks = pemBlocks(text);
  const certs: X509Certificate[] = [];
  for (const [i, block] of blocks.entries()) {
    // A key pasted into the certificate field must fail loudly: it would otherwise be stored unsealed.
    if (isPrivateKeyLabel(block.label)) {
      throw new X509Error('private_key_in_certificate', `${opts.field} contains a private key (block ${i + 1}); send it as private_key_pem`, i);
    }
    if (block.label !== 'CERTIFICATE') {
      throw new X509Error('unexpected_pem_block', `${opts.field} block ${i + 1} is "${block.label}", expected "CERTIFICATE"`, i);
    }
    if (certs.length >= opts.max) throw new X509Error('too_many_certificates', `${opts.field} holds more than ${opts.max} certificates`);
    try {
      certs.push(new X509Certificate(block.der));
    } catch (err) {
      throw new X509Error('unparsable_certificate', `certificate ${i + 1} in ${opts.field} cannot be parsed: ${(err as Error).message}`, i);
    }
  }
  if (certs.length === 0) throw new X509Error('no_certificate', `${opts.field} holds no PEM "CERTIFICATE" block`);
  return certs;
}

/**
 * Parses a server certificate chain: leaf first, then each issuer in order (RFC 8446 §4.4.2 and the order
 * servers send). Every certificate must be signed by the next one, since a shuffled or foreign chain makes
 * clients fail in ways that are hard to trace back to the upload. The last one need not be a root.
 */
export function parseCertificateChain(text: string, opts: { maxCertificates?: number; field?: string } = {}): ParsedChain {
  const field = opts.field ?? 'certificate_pem';
  const certificates = parseCertificates(text, { max: opts.maxCertificates ?? 10, field });
  for (let i = 0; i + 1 < certificates.length; i++) {
    const [child, parent] = [certificates[i], certificates[i + 1]];
    if (!child.checkIssued(parent) || !child.verify(parent.publicKey)) {
      throw new X509Error(
        'broken_chain',
        `certificate ${i + 2} in ${field} did not issue certificate ${i + 1} ("${displayName(child.subject)}"): put the leaf first, then each issuer in order`,
        i + 1,
      );
    }
  }
  const leaf = certificateInfo(certificates[0]);
  if (leaf.sans.length === 0) throw new X509Error('no_dns_names', 'the certificate names no DNS host (no DNS subjectAltName and no usable subject CN)');
  return { certificates, leaf, pem: certificates.map((c) => c.toString().trim()).join('\n') + '\n' };
}

/** Smallest RSA modulus accepted: CA/Browser Forum baseline requirements §6.1.5. */
export const MIN_RSA_BITS = 2048;

/** Parses one unencrypted private key (PKCS#8, PKCS#1 or SEC1 PEM). */
export function parsePrivateKey(text: string, field = 'private_key_pem'): KeyObject {
  const blocks = pemBlocks(text).filter((b) => isPrivateKeyLabel(b.label));
  if (blocks.length === 0) throw new X509Error('no_private_key', `${field} holds no PEM private key block`);
  if (blocks.length > 1) throw new X509Error('multiple_private_keys', `${field} holds ${blocks.length} private keys; send exactly one`);
  if (/ENCRYPTED/.test(blocks[0].label)) {
    throw new X509Error('encrypted_private_key', `${field} is encrypted; decrypt it first (for example: openssl pkey -in key.pem -out plain.pem)`);
  }
  let key: KeyObject;
  try {
    // Only the key block goes to OpenSSL, so a certificate pasted before it cannot be mistaken for the key.
    key = createPrivateKey({ key: toPem(blocks[0]), format: 'pem' });
  } catch (err) {
    throw new X509Error('unparsable_private_key', `${field} cannot be parsed: ${(err as Error).message}`);
  }
  const bits = key.asymmetricKeyDetails?.modulusLength;
  if ((key.asymmetricKeyType === 'rsa' || key.asymmetricKeyType === 'rsa-pss') && bits !== undefined && bits < MIN_RSA_BITS) {
    throw new X509Error('weak_private_key', `RSA keys need at least ${MIN_RSA_BITS} bits; this one has ${bits}`);
  }
  return key;
}

/** The private key matches the certificate's public key (OpenSSL's X509_check_private_key). */
export function keyMatchesCertificate(cert: X509Certificate, key: KeyObject): boolean {
  try {
    return cert.checkPrivateKey(key);
  } catch {
    return false;
  }
}

/** The canonical form a key is sealed in: PKCS#8 PEM, whatever form it was uploaded in. */
export function privateKeyPkcs8Pem(key: KeyObject): string {
  return key.export({ type: 'pkcs8', format: 'pem' }) as string;
}

export interface CaInfo {
  subject: string;
  fingerprint_sha256: string;
  not_after: string;
}

export interface ParsedCaBundle {
  /** Clean PEM of the distinct CA certificates, in the order given. */
  pem: string;
  certificates: CaInfo[];
}

export const MAX_CA_CERTIFICATES = 50;

/**
 * Validates a bundle of CA certificates that client certificates are checked against (mTLS). Each must be a
 * CA (basicConstraints cA = TRUE, RFC 5280 §4.2.1.9), since OpenSSL refuses a non-CA issuer anyway, and must
 * not have expired, since it could never verify a client again. Duplicates are dropped.
 */
export function parseCaBundle(text: string, opts: { max?: number; now?: Date; field?: string } = {}): ParsedCaBundle {
  const field = opts.field ?? 'ca_bundle_pem';
  const now = opts.now ?? new Date();
  const certs = parseCertificates(text, { max: opts.max ?? MAX_CA_CERTIFICATES, field });
  const seen = new Set<string>();
  const kept: X509Certificate[] = [];
  for (const [i, cert] of certs.entries()) {
    const info = certificateInfo(cert);
    if (!cert.ca) throw new X509Error('not_a_ca', `certificate ${i + 1} in ${field} ("${info.subject}") is not a CA certificate`, i);
    if (info.notAfter.getTime() <= now.getTime()) {
      throw new X509Error('expired_ca', `certificate ${i + 1} in ${field} ("${info.subject}") expired at ${info.notAfter.toISOString()}`, i);
    }
    if (seen.has(info.fingerprintSha256)) continue;
    seen.add(info.fingerprintSha256);
    kept.push(cert);
  }
  return { pem: kept.map((c) => c.toString().trim()).join('\n') + '\n', certificates: kept.map(caInfo) };
}

export function caInfo(cert: X509Certificate): CaInfo {
  const info = certificateInfo(cert);
  return { subject: info.subject, fingerprint_sha256: info.fingerprintSha256, not_after: info.notAfter.toISOString() };
}

/** Describes a stored (already validated) bundle without re-checking expiry, for reads. */
export function describeCaBundle(pem: string | null): CaInfo[] {
  if (!pem) return [];
  return pemBlocks(pem)
    .filter((b) => b.label === 'CERTIFICATE')
    .map((b) => caInfo(new X509Certificate(b.der)));
}
