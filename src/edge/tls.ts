// Certificate choice for the HTTPS listener, by SNI: an endpoint's custom certificate where it has one, else the
// platform certificate from configured files, else (development only) a self-signed one made at start.
import { createPrivateKey, webcrypto } from 'node:crypto';
import { createSecureContext, type SecureContext } from 'node:tls';
import { readFileSync } from 'node:fs';
import 'reflect-metadata'; // @peculiar/x509's dependency injection needs the Reflect metadata API first
import * as x509 from '@peculiar/x509';
import type { Logger } from '../shared/log.ts';
import type { SecretBox } from '../shared/secrets.ts';
import type { EdgeConfig } from './config.ts';

export interface PlatformCertificate {
  cert: string;
  key: string;
  /** True for the generated development certificate. */
  selfSigned: boolean;
}

/** Reads the configured platform certificate, or makes a self-signed one for the base domain and its subdomains. */
export async function platformCertificate(files: { certFile: string; keyFile: string }, baseDomain: string): Promise<PlatformCertificate> {
  if (files.certFile && files.keyFile) {
    return { cert: readFileSync(files.certFile, 'utf8'), key: readFileSync(files.keyFile, 'utf8'), selfSigned: false };
  }
  x509.cryptoProvider.set(webcrypto as unknown as Crypto);
  const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as CryptoKeyPair;
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Buffer.from(webcrypto.getRandomValues(new Uint8Array(8))).toString('hex'),
    name: `CN=${baseDomain}`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 30 * 24 * 3600_000),
    keys,
    signingAlgorithm: alg,
    extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: baseDomain }, { type: 'dns', value: `*.${baseDomain}` }])],
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const key = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }).export({ format: 'pem', type: 'pkcs8' }).toString();
  return { cert: cert.toString('pem'), key, selfSigned: true };
}

/**
 * The SNI callback: a SecureContext per custom certificate, built once (unsealing the key) and dropped when the
 * certificate changes in the feed. Unknown names get the platform context, like any other host.
 */
export class CertificateSelector {
  private readonly contexts = new Map<number, SecureContext>();
  readonly platform: SecureContext;

  constructor(
    private readonly config: EdgeConfig,
    private readonly secrets: SecretBox,
    platform: PlatformCertificate,
    private readonly logger: Logger,
  ) {
    this.platform = createSecureContext({ cert: platform.cert, key: platform.key });
    config.on('certificate', (id) => this.contexts.delete(id));
  }

  contextFor(servername: string): SecureContext {
    const endpoint = this.config.lookup(servername.toLowerCase())?.config;
    const id = endpoint?.certificate_id;
    if (id === null || id === undefined) return this.platform;
    let ctx = this.contexts.get(id);
    if (!ctx) {
      const cert = this.config.certificate(id);
      if (!cert) return this.platform;
      try {
        ctx = createSecureContext({ cert: cert.certificate_pem, key: this.secrets.open(cert.private_key_sealed) });
        this.contexts.set(id, ctx);
      } catch (err) {
        // A key sealed under another EDGE_SECRET_KEY: serve the platform certificate rather than fail the handshake.
        this.logger.error({ err, certificate: id }, 'cannot use custom certificate; serving the platform certificate');
        return this.platform;
      }
    }
    return ctx;
  }

  readonly sniCallback = (servername: string, cb: (err: Error | null, ctx?: SecureContext) => void): void => {
    cb(null, this.contextFor(servername));
  };
}
