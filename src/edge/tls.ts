// Certificate choice for the HTTPS listener, by SNI: an endpoint's custom certificate where it has one, else the
// platform certificate from configured files, else (development only) a self-signed one made at start.
//
// Endpoints with mTLS on get a TLS server of their own, chosen from the ClientHello's server name before OpenSSL
// starts: it asks for a client certificate, verifies it against the endpoint's CA bundle, and keeps its sessions to
// itself. Other names never receive a CertificateRequest (browsers would show a certificate picker).
import { createHash, createPrivateKey, webcrypto } from 'node:crypto';
import type { DedicatedAddresses } from './dedicated-addresses.ts';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { createSecureContext, createServer as createTlsServer, type SecureContext, type Server as TlsServer, type TLSSocket } from 'node:tls';
import { readFileSync } from 'node:fs';
import 'reflect-metadata'; // @peculiar/x509's dependency injection needs the Reflect metadata API first
import * as x509 from '@peculiar/x509';
import type { Logger } from '../shared/log.ts';
import type { SecretBox } from '../shared/secrets.ts';
import type { CertificateConfig, EndpointConfig } from '../shared/snapshot.ts';
import { serverNameOf } from './client-hello.ts';
import type { EndpointCache } from './endpoint-cache.ts';

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

/** What the edge learnt of a visitor's client certificate on one TLS connection to an endpoint with mTLS on. */
export interface ClientAuth {
  /** The client-auth setup the connection was made under: clientAuthKey of its endpoint at the time. */
  readonly key: string;
  /**
   * As nginx's $ssl_client_verify: SUCCESS (the certificate verified against the endpoint's CA bundle), FAILED
   * (one was presented and did not), NONE (none was presented).
   */
  readonly verify: 'SUCCESS' | 'FAILED' | 'NONE';
  /** SUCCESS only: the certificate's subject, RFC 4514. */
  readonly subject?: string;
  /** SUCCESS only: SHA-256 of the certificate's DER, lower-case hex (as the API's `fingerprint_sha256`). */
  readonly fingerprint?: string;
  /** FAILED only: OpenSSL's reason, such as CERT_HAS_EXPIRED or UNABLE_TO_GET_ISSUER_CERT_LOCALLY. */
  readonly reason?: string;
}

/** Verdicts by TLS socket, set once per connection when its handshake completes. */
const clientAuths = new WeakMap<object, ClientAuth>();

/** The client-certificate verdict of `socket`'s connection, or undefined when no certificate was asked for on it. */
export function clientAuthOf(socket: object): ClientAuth | undefined {
  return clientAuths.get(socket);
}

/**
 * Names an endpoint's client-auth setup: its uuid and CA bundle. A connection verified under one key vouches for
 * nothing under another (another endpoint, or this one after its bundle changed).
 */
export function clientAuthKey(endpoint: Pick<EndpointConfig, 'uuid' | 'mtls_ca_pem'>): string {
  return createHash('sha256').update(`${endpoint.uuid.length}:${endpoint.uuid}`).update(endpoint.mtls_ca_pem ?? '').digest('base64url');
}

/**
 * Node's X509Certificate.subject (OpenSSL's RFC 2253-escaped values, one RDN a line in certificate order, the values
 * of a multi-valued RDN joined by " + ") as an RFC 4514 string: RDNs last first, joined by ",", "+" within an RDN,
 * and every byte outside printable ASCII as a `\XX` escape (RFC 4514 §2.4), so it is safe in an HTTP field.
 */
export function rfc4514Subject(subject: string): string {
  const dn = subject
    .split('\n')
    .reverse()
    .map((rdn) => rdn.replaceAll(' + ', '+'))
    .join(',');
  return dn.replace(/[^\x20-\x7e]+/g, (run) => {
    let out = '';
    for (const byte of Buffer.from(run, 'utf8')) out += `\\${byte.toString(16).toUpperCase().padStart(2, '0')}`;
    return out;
  });
}

function verdictOf(socket: TLSSocket, key: string): ClientAuth {
  const peer = socket.getPeerX509Certificate();
  // Read first: Node reports a TLS 1.3 session resumed without a certificate as authorized (it treats it like PSK).
  if (peer === undefined) return { key, verify: 'NONE' };
  if (!socket.authorized) return { key, verify: 'FAILED', reason: String(socket.authorizationError ?? 'UNVERIFIED') };
  return { key, verify: 'SUCCESS', subject: rfc4514Subject(peer.subject), fingerprint: peer.fingerprint256.replaceAll(':', '').toLowerCase() };
}

/**
 * A fatal TLS alert record, unrecognized_name (RFC 6066 §3, RFC 8446 §6): content type alert (21), legacy version
 * 1.2, length 2, level fatal (2), description 112. Sent in the clear before any handshake state exists.
 */
const UNRECOGNIZED_NAME_ALERT = Buffer.from([21, 3, 3, 0, 2, 2, 112]);

/**
 * Waits for the ClientHello at the start of `raw` and calls `then` with the server name it asks for (null: none),
 * with every byte read put back, so TLS starts from the first byte. A client that sends no complete ClientHello
 * within `timeoutMs`, or ends the connection first, is dropped.
 */
function readServerName(raw: Socket, timeoutMs: number, then: (name: string | null) => void): void {
  const chunks: Buffer[] = [];
  let buffered = 0;
  let need = 1;
  const onReadable = () => {
    for (let chunk: Buffer | null; (chunk = raw.read() as Buffer | null) !== null; ) {
      chunks.push(chunk);
      buffered += chunk.length;
    }
    // Joined and read again only when the reader's last answer says enough has come: a few times per connection.
    if (buffered < need) return;
    const data = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, buffered);
    chunks.length = 0;
    chunks.push(data);
    const name = serverNameOf(data);
    if (typeof name === 'number') {
      need = name;
      return;
    }
    raw.removeListener('readable', onReadable);
    raw.removeListener('end', drop);
    raw.removeListener('timeout', drop);
    raw.removeListener('error', drop);
    raw.setTimeout(0);
    // TLSSocket feeds what the socket already buffered to OpenSSL before reading on (Node's initRead).
    raw.unshift(data);
    then(name);
  };
  const drop = () => raw.destroy();
  raw.on('readable', onReadable);
  raw.on('end', drop);
  raw.on('error', drop);
  raw.setTimeout(timeoutMs);
  raw.on('timeout', drop);
}

/** An endpoint's client-auth TLS server, valid while the endpoint's and its certificate's configs are these objects. */
interface ClientAuthSetup {
  readonly endpoint: EndpointConfig;
  readonly certificate: CertificateConfig | undefined;
  readonly server: TlsServer;
}

/**
 * The SNI callback: a SecureContext per custom certificate, built once (unsealing the key) and dropped when the
 * certificate changes in the feed. Unknown names get the platform context, like any other host. Endpoints with mTLS
 * on are served by client-auth TLS servers instead (routeConnections).
 */
export class CertificateSelector {
  private readonly contexts = new Map<number, SecureContext>();
  /** By endpoint uuid; checked against the config in force at each use, dropped when the endpoint changes. */
  private readonly clientAuth = new Map<string, ClientAuthSetup>();
  /** By certificate id (0: the platform's): servers for clients without SNI on a dedicated address. */
  private readonly nameChosen = new Map<number, { certificate: CertificateConfig | undefined; server: TlsServer }>();
  /** Set by the edge: which names each dedicated address serves (src/edge/dedicated-addresses.ts). */
  dedicated: DedicatedAddresses | undefined;
  readonly platform: SecureContext;

  constructor(
    private readonly config: EndpointCache,
    private readonly secrets: SecretBox,
    private readonly platformCertificate: PlatformCertificate,
    private readonly logger: Logger,
  ) {
    this.platform = createSecureContext({ cert: platformCertificate.cert, key: platformCertificate.key });
    config.on('certificate', (id) => {
      this.contexts.delete(id);
      this.nameChosen.delete(id);
    });
    config.on('endpoint', (uuid) => this.clientAuth.delete(uuid));
  }

  contextFor(servername: string): SecureContext {
    const endpoint = this.config.lookup(servername.toLowerCase())?.config;
    const id = endpoint?.certificate_id;
    if (id === null || id === undefined) return this.platform;
    let ctx = this.contexts.get(id);
    if (!ctx) {
      try {
        const pair = this.keyPair(this.config.certificate(id));
        if (pair === null) return this.platform;
        ctx = createSecureContext(pair);
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

  /**
   * Takes over `server`'s TLS accept: reads each connection's ClientHello for its server name, then hands the
   * connection to the client-auth TLS server of that name's endpoint when it has mTLS on, else to `server`'s own TLS
   * handling (its SNICallback and sessions, as before). The choice is made before OpenSSL starts because OpenSSL
   * settles session resumption before any SNI callback runs: a context switched to in the callback would resume
   * sessions made under another name, where no certificate was asked for. Call once, right after creating `server`.
   */
  routeConnections(server: HttpsServer, options: { helloTimeoutMs: number }): void {
    // tls.Server registers its accept (wrap the raw socket in a TLSSocket under the server's context) as the first
    // 'connection' listener, in its constructor.
    const accept = server.listeners('connection')[0] as (raw: Socket) => void;
    server.removeListener('connection', accept);
    server.on('connection', (raw: Socket) =>
      readServerName(raw, options.helloTimeoutMs, (sent) => {
        let name = sent === null ? null : sent.toLowerCase();
        // A dedicated address (docs/dedicated-ips.md "At the edge"): a name it does not serve is refused in the
        // handshake (RFC 6066 §3), and a client that names none gets the certificate of the endpoint bound there.
        const served = this.dedicated?.servedOn(raw.localAddress) ?? null;
        if (served !== null) {
          if (name === null) name = served.values().next().value ?? null;
          else if (![...served.values()].includes(name)) return void raw.end(UNRECOGNIZED_NAME_ALERT);
        }
        let next: TlsServer | null;
        try {
          next = name === null ? null : (this.clientAuthServer(name, server) ?? (sent === null ? this.nameChosenServer(name, server) : null));
        } catch (err) {
          // Fail closed: serving this name without the client-certificate check would skip the endpoint's policy.
          this.logger.error({ err, servername: name }, 'cannot set up client-certificate TLS; dropping the connection');
          raw.destroy();
          return;
        }
        if (next === null) accept.call(server, raw);
        else next.emit('connection', raw);
      }),
    );
  }

  /** The client-auth TLS server for `servername`'s endpoint, or null when it has mTLS off (or no endpoint has the name). */
  private clientAuthServer(servername: string, https: HttpsServer): TlsServer | null {
    const endpoint = this.config.lookup(servername)?.config;
    if (endpoint === undefined || endpoint.mtls_mode === 'disabled') return null;
    const certificate = endpoint.certificate_id === null ? undefined : this.config.certificate(endpoint.certificate_id);
    const cached = this.clientAuth.get(endpoint.uuid);
    if (cached !== undefined && cached.endpoint === endpoint && cached.certificate === certificate) return cached.server;
    const key = clientAuthKey(endpoint);
    // The certificate the name is served with anyway: contextFor has vetted (and logged) a custom one already.
    const pair = (this.contextFor(servername) === this.platform ? null : this.keyPair(certificate)) ?? this.platformCertificate;
    const server = createTlsServer({
      cert: pair.cert,
      key: pair.key,
      // Always a list: without `ca`, Node verifies against its public root store, and any publicly trusted
      // certificate would pass. An endpoint with mTLS on and no bundle (the API refuses that) verifies nothing.
      ca: endpoint.mtls_ca_pem === null ? [] : [endpoint.mtls_ca_pem],
      requestCert: true,
      // The handshake completes either way: the mtls stage answers over HTTP, saying why (src/edge/stages/mtls.ts).
      rejectUnauthorized: false,
      ALPNProtocols: ['http/1.1'],
      // Sessions are this server's own (its ticket keys and session cache come with its context): one made where no
      // certificate was asked for, or under another bundle, is not resumed here. Distinct per setup for good measure.
      sessionIdContext: key.slice(0, 32),
    });
    server.on('secureConnection', (socket: TLSSocket) => {
      // TLS 1.2 renegotiation could bring another certificate after the verdict was taken.
      socket.disableRenegotiation();
      clientAuths.set(socket, verdictOf(socket, key));
      https.emit('secureConnection', socket);
    });
    server.on('tlsClientError', (err, socket) => https.emit('tlsClientError', err, socket));
    this.clientAuth.set(endpoint.uuid, { endpoint, certificate, server });
    return server;
  }

  /**
   * A TLS server presenting `servername`'s certificate (its custom one, else the platform's) to a client that sent no
   * server name on a dedicated address, which chose the name: the public listener has no certificate without SNI.
   */
  private nameChosenServer(servername: string, https: HttpsServer): TlsServer {
    const id = this.contextFor(servername) === this.platform ? 0 : (this.config.lookup(servername)?.config.certificate_id ?? 0);
    const certificate = id === 0 ? undefined : this.config.certificate(id);
    const cached = this.nameChosen.get(id);
    if (cached !== undefined && cached.certificate === certificate) return cached.server;
    const pair = this.keyPair(certificate) ?? this.platformCertificate;
    const server = createTlsServer({ cert: pair.cert, key: pair.key, ALPNProtocols: ['http/1.1'] });
    server.on('secureConnection', (socket: TLSSocket) => https.emit('secureConnection', socket));
    server.on('tlsClientError', (err, socket) => https.emit('tlsClientError', err, socket));
    this.nameChosen.set(id, { certificate, server });
    return server;
  }

  /** A custom certificate and its unsealed key (throws when the key cannot be opened); null when it is gone. */
  private keyPair(cert: CertificateConfig | undefined): { cert: string; key: string } | null {
    return cert ? { cert: cert.certificate_pem, key: this.secrets.open(cert.private_key_sealed) } : null;
  }
}
