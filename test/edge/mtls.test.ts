// mTLS enforced at the edge, end to end: the real program, real agents and a real local service, client certificates
// from test CAs. `required` refuses what does not verify, `optional` passes the verdict on, the agent gets the
// verified subject and fingerprint (never a visitor's copy); sessions, other names and CA changes cannot skip the check.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, X509Certificate } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { WebSocket } from 'ws';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import type { EndpointConfig } from '../../src/shared/snapshot.ts';
import { createCa, createLeaf, expiredWindow, type Issued, type Leaf } from '../helpers/certs.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit } from '../helpers/http.ts';
import { startLocalService, type LocalService } from '../helpers/local-service.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

const SECRET = 'mtls-test-secret-key-0123456789abcdef';

interface Seen {
  host: string | undefined;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
}

/** A local service that records every request and answers 200, with a WebSocket echo on the same port. */
function startService(): Promise<LocalService<Seen>> {
  return startLocalService<Seen>(
    (req, res, record) => {
      record({ host: req.headers.host, headers: req.headers, rawHeaders: req.rawHeaders });
      res.end('served');
    },
    (ws) => ws.on('message', (m) => ws.send(`echo:${m}`)),
  );
}

interface TlsReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The client resumed a session (no full handshake). */
  reused: boolean;
  /** Whether the request went over a connection an earlier request used (keep-alive agents). */
  reusedSocket: boolean;
  /** The last session the server gave the client, for resuming later. */
  session?: Buffer;
  /** The certificate the edge presented. */
  served?: X509Certificate;
}

interface TlsVisitOptions {
  /** SNI; the Host by default. */
  servername?: string;
  client?: Leaf;
  session?: Buffer;
  maxVersion?: tls.SecureVersion;
  headers?: Record<string, string>;
  agent?: https.Agent;
  path?: string;
}

/** One HTTPS request to the edge naming `host`, with the TLS facts of its connection. */
function tlsVisit(port: number, host: string, options: TlsVisitOptions = {}): Promise<TlsReply> {
  return new Promise((resolve, reject) => {
    let session: Buffer | undefined;
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path: options.path ?? '/',
        headers: { host, accept: 'application/json', ...options.headers },
        servername: options.servername ?? host,
        cert: options.client?.chainPem,
        key: options.client?.keyPem,
        session: options.session,
        maxVersion: options.maxVersion,
        rejectUnauthorized: false,
        agent: options.agent ?? false,
      } as https.RequestOptions & Pick<tls.ConnectionOptions, 'session'>,
      (res) => {
        const socket = res.socket as tls.TLSSocket;
        const reused = socket.isSessionReused();
        const served = socket.getPeerX509Certificate();
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body, reused, reusedSocket: req.reusedSocket, session, served }));
      },
    );
    req.on('socket', (s) => s.on('session', (value: Buffer) => (session = value)));
    req.on('error', reject);
    req.end();
  });
}

/** A WebSocket round trip over TLS: the echo, or the status and edge error the upgrade was refused with. */
function wssRoundTrip(port: number, host: string, client?: Leaf): Promise<{ echo?: string; status?: number; code?: string }> {
  const options = { headers: { host }, servername: host, cert: client?.chainPem, key: client?.keyPem, rejectUnauthorized: false };
  const ws = new WebSocket(`wss://127.0.0.1:${port}/ws`, options as WebSocket.ClientOptions);
  return new Promise((resolve, reject) => {
    ws.on('open', () => ws.send('hi'));
    ws.on('message', (m) => {
      resolve({ echo: String(m) });
      ws.close();
    });
    ws.on('unexpected-response', (_req, res) => {
      resolve({ status: res.statusCode, code: res.headers['x-edge-error'] as string | undefined });
      res.resume();
    });
    ws.on('error', reject);
  });
}

/**
 * The handshake message types the edge sent in its first flight to a TLS 1.2 client naming `servername`, read off
 * the wire by a relay: in TLS 1.2 they travel in clear, so a CertificateRequest (13) is visible, or its absence.
 * (TLS 1.3 encrypts it; the choice of TLS setup by name does not depend on the version.)
 */
async function serverFlight(edgePort: number, servername: string): Promise<number[]> {
  let fromEdge = Buffer.alloc(0);
  const relay = net.createServer((client) => {
    const upstream = net.connect(edgePort, '127.0.0.1');
    upstream.on('data', (d) => (fromEdge = Buffer.concat([fromEdge, d])));
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  try {
    const socket = tls.connect({ host: '127.0.0.1', port: (relay.address() as AddressInfo).port, servername, maxVersion: 'TLSv1.2', rejectUnauthorized: false });
    await new Promise<void>((resolve, reject) => {
      socket.once('secureConnect', resolve);
      socket.once('error', reject);
    });
    socket.destroy();
    // Handshake records (22) up to the ChangeCipherSpec; their payloads are a run of handshake messages.
    const messages: Buffer[] = [];
    for (let p = 0; p + 5 <= fromEdge.length && fromEdge[p] === 22; p += 5 + fromEdge.readUInt16BE(p + 3)) {
      messages.push(fromEdge.subarray(p + 5, p + 5 + fromEdge.readUInt16BE(p + 3)));
    }
    const flight = Buffer.concat(messages);
    const types: number[] = [];
    for (let p = 0; p + 4 <= flight.length; p += 4 + flight.readUIntBE(p + 1, 3)) types.push(flight[p]);
    return types;
  } finally {
    relay.close();
  }
}

const SERVER_HELLO_DONE = 14;
const CERTIFICATE_REQUEST = 13;

describe('mTLS at the edge', () => {
  let t: TestNode;
  let service: Awaited<ReturnType<typeof startService>>;
  let user: Awaited<ReturnType<TestNode['createUser']>>;
  const agents: Agent[] = [];
  let httpsPort: number;
  let httpPort: number;
  let clients: Issued;
  let strangers: Issued;
  /** Signed by `clients`. */
  let alice: Leaf;
  /** Signed by `strangers`. */
  let mallory: Leaf;
  /** Signed by `clients`, expired. */
  let expired: Leaf;
  let required: { uuid: string; hostname: string };
  let optional: { uuid: string; hostname: string };
  let plain: { uuid: string; hostname: string };

  before(async () => {
    t = await startTestNode({ EDGE_SECRET_KEY: SECRET });
    httpsPort = t.node.edge!.httpsPort;
    httpPort = t.node.edge!.httpPort;
    service = await startService();
    user = await t.createUser('pro');
    clients = await createCa('Clients Root');
    strangers = await createCa('Strangers Root');
    [alice, mallory, expired] = await Promise.all([
      createLeaf(clients, { dns: [], cn: 'alice' }),
      createLeaf(strangers, { dns: [], cn: 'alice' }),
      createLeaf(clients, { dns: [], cn: 'alice', ...expiredWindow() }),
    ]);
    [required, optional, plain] = await Promise.all([endpoint(), endpoint(), endpoint()]);
    await setMtls(required, 'required', clients.certPem);
    await setMtls(optional, 'optional', clients.certPem);
  });
  after(async () => {
    for (const a of agents) await a.stop();
    await service.close();
    await t.close();
  });

  /** An endpoint served by a real agent in front of the local service. */
  async function endpoint(): Promise<{ uuid: string; hostname: string }> {
    const created = await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} });
    assert.equal(created.status, 201, created.text);
    await edgeSees(created.body.uuid, () => true);
    const edgeUrl = `http://127.0.0.1:${httpPort}`;
    agents.push(await startAgent({ edgeUrl, apiKey: user.api_key, endpoint: created.body.uuid, protocol: 'http', target: service.port }));
    return created.body;
  }

  /** Resolves once the edge's config mirror holds the endpoint in a state `check` accepts (it arrives through the feed). */
  function edgeSees(uuid: string, check: (e: EndpointConfig) => boolean): Promise<EndpointConfig> {
    return eventually(async () => {
      const e = t.node.edge!.config.endpoint(uuid);
      return e && check(e) ? e : undefined;
    });
  }

  async function setMtls(ep: { uuid: string }, mode: 'disabled' | 'optional' | 'required', bundle?: string): Promise<void> {
    const res = await t.api('PUT', `/v1/endpoints/${ep.uuid}/mtls`, { key: user.api_key, body: bundle === undefined ? { mode } : { mode, ca_bundle_pem: bundle } });
    assert.equal(res.status, 200, res.text);
    await edgeSees(ep.uuid, (e) => e.mtls_mode === mode && (bundle === undefined || e.mtls_ca_pem?.includes(bundle.trim().split('\n')[1]) === true));
  }

  /** The request the service received last, after `visitFn`; asserts that it received exactly one. */
  async function served(visitFn: () => Promise<{ status: number; body: string }>): Promise<Seen> {
    const before_ = service.seen.length;
    const res = await visitFn();
    assert.equal(res.status, 200, res.body);
    assert.equal(service.seen.length, before_ + 1);
    return service.seen.at(-1)!;
  }

  async function refused<R extends { status: number; headers: http.IncomingHttpHeaders; body: string }>(visitFn: () => Promise<R>, status: number, code: string): Promise<R> {
    const before_ = service.seen.length;
    const res = await visitFn();
    assert.equal(res.status, status, res.body);
    assert.equal(res.headers['x-edge-error'], code);
    assert.equal(service.seen.length, before_, 'the service received nothing');
    return res;
  }

  const fingerprint = (leaf: Leaf) => createHash('sha256').update(Buffer.from(leaf.cert.rawData)).digest('hex');

  /** Visitor copies of the fields the edge sets, in several spellings. */
  const spoofed = {
    'X-Edge-Client-Cert-Verify': 'SUCCESS',
    'X-Edge-Client-Cert-Subject': 'CN=root',
    'X_Edge_Client_Cert_Subject': 'CN=root',
    'x-edge-client-cert_fingerprint': '00'.repeat(32),
  };

  /** The request's fields whose name reads, with `_` as `-`, as one of the client-certificate fields. */
  function clientCertFields(seen: Seen): Record<string, string> {
    const out: Record<string, string> = {};
    for (let i = 0; i < seen.rawHeaders.length; i += 2) {
      const name = seen.rawHeaders[i].toLowerCase().replaceAll('_', '-');
      if (name.startsWith('x-edge-client-cert-')) {
        assert.equal(out[name], undefined, `one ${name} only`);
        out[name] = seen.rawHeaders[i + 1];
      }
    }
    return out;
  }

  describe('required', () => {
    it('passes a certificate from the endpoint CA, handing the agent its subject and fingerprint, never the visitor copies', async () => {
      const seen = await served(() => tlsVisit(httpsPort, required.hostname, { client: alice, headers: spoofed }));
      assert.deepEqual(clientCertFields(seen), {
        'x-edge-client-cert-verify': 'SUCCESS',
        'x-edge-client-cert-subject': 'CN=alice',
        'x-edge-client-cert-fingerprint': fingerprint(alice),
      });
    });

    it('refuses with 403 client_certificate_required when no certificate is presented', async () => {
      const res = await refused(() => tlsVisit(httpsPort, required.hostname, { headers: spoofed }), 403, 'client_certificate_required');
      assert.equal(JSON.parse(res.body).code, 'client_certificate_required');
    });

    it('refuses with 403 client_certificate_invalid a certificate from another CA, and an expired one from the right CA', async () => {
      const other = await refused(() => tlsVisit(httpsPort, required.hostname, { client: mallory }), 403, 'client_certificate_invalid');
      // Its chain ends in its own root, which this endpoint does not trust.
      assert.match(JSON.parse(other.body).detail, /SELF_SIGNED_CERT_IN_CHAIN/);
      const leafOnly = await refused(() => tlsVisit(httpsPort, required.hostname, { client: { ...mallory, chainPem: mallory.certPem } }), 403, 'client_certificate_invalid');
      assert.match(JSON.parse(leafOnly.body).detail, /UNABLE_TO_GET_ISSUER_CERT_LOCALLY|UNABLE_TO_VERIFY_LEAF_SIGNATURE/);
      const old = await refused(() => tlsVisit(httpsPort, required.hostname, { client: expired }), 403, 'client_certificate_invalid');
      assert.match(JSON.parse(old.body).detail, /CERT_HAS_EXPIRED/);
    });

    it('refuses plain HTTP with 403 client_certificate_required, not a redirect', async () => {
      const res = await refused(() => visit(httpPort, required.hostname, '/secret?token=1', { headers: { accept: 'application/json' } }), 403, 'client_certificate_required');
      assert.equal(res.headers.location, undefined);
    });

    it('puts WebSocket upgrades through the same check, over TLS and over plain HTTP', async () => {
      assert.deepEqual(await wssRoundTrip(httpsPort, required.hostname, alice), { echo: 'echo:hi' });
      assert.deepEqual(await wssRoundTrip(httpsPort, required.hostname), { status: 403, code: 'client_certificate_required' });
      assert.deepEqual(await wssRoundTrip(httpsPort, required.hostname, mallory), { status: 403, code: 'client_certificate_invalid' });
      const overHttp = new WebSocket(`ws://127.0.0.1:${httpPort}/ws`, { headers: { host: required.hostname } });
      const refusal = await new Promise<{ status?: number; code?: string }>((resolve, reject) => {
        overHttp.on('open', () => reject(new Error('the upgrade was relayed')));
        overHttp.on('unexpected-response', (_req, res) => resolve({ status: res.statusCode, code: res.headers['x-edge-error'] as string }));
        overHttp.on('error', reject);
      });
      assert.deepEqual(refusal, { status: 403, code: 'client_certificate_required' });
    });
  });

  describe('optional', () => {
    it('passes a verified certificate as SUCCESS with its subject and fingerprint', async () => {
      const seen = await served(() => tlsVisit(httpsPort, optional.hostname, { client: alice, headers: spoofed }));
      assert.deepEqual(clientCertFields(seen), {
        'x-edge-client-cert-verify': 'SUCCESS',
        'x-edge-client-cert-subject': 'CN=alice',
        'x-edge-client-cert-fingerprint': fingerprint(alice),
      });
    });

    it('passes no certificate as NONE and an unverifiable one as FAILED, with no subject (visitor copies stripped)', async () => {
      const none = await served(() => tlsVisit(httpsPort, optional.hostname, { headers: spoofed }));
      assert.deepEqual(clientCertFields(none), { 'x-edge-client-cert-verify': 'NONE' });
      const failed = await served(() => tlsVisit(httpsPort, optional.hostname, { client: mallory, headers: spoofed }));
      assert.deepEqual(clientCertFields(failed), { 'x-edge-client-cert-verify': 'FAILED' });
    });

    it('passes plain HTTP as NONE', async () => {
      const seen = await served(() => visit(httpPort, optional.hostname, '/', { headers: spoofed }));
      assert.deepEqual(clientCertFields(seen), { 'x-edge-client-cert-verify': 'NONE' });
    });
  });

  describe('names without mTLS', () => {
    it('get no CertificateRequest; names with mTLS on get one (read off a TLS 1.2 handshake)', async () => {
      const plainFlight = await serverFlight(httpsPort, plain.hostname);
      assert.ok(plainFlight.includes(SERVER_HELLO_DONE), `a whole first flight: ${plainFlight}`);
      assert.ok(!plainFlight.includes(CERTIFICATE_REQUEST), `no CertificateRequest: ${plainFlight}`);
      assert.ok(!(await serverFlight(httpsPort, 'unknown.edge.localhost')).includes(CERTIFICATE_REQUEST));
      assert.ok((await serverFlight(httpsPort, required.hostname)).includes(CERTIFICATE_REQUEST));
      assert.ok((await serverFlight(httpsPort, optional.hostname)).includes(CERTIFICATE_REQUEST));
    });

    it('are served as before, with visitor copies of the client-certificate fields stripped', async () => {
      const seen = await served(() => tlsVisit(httpsPort, plain.hostname, { client: alice, headers: spoofed }));
      assert.deepEqual(clientCertFields(seen), {});
    });
  });

  describe('connections set up for another name', () => {
    // (A connection naming no server cannot be made at all: the edge has no certificate to serve without SNI.)
    it('answer 421 misdirected_request when the SNI names another endpoint', async () => {
      for (const ep of [required, optional]) {
        await refused(() => tlsVisit(httpsPort, ep.hostname, { servername: plain.hostname, client: alice }), 421, 'misdirected_request');
        await refused(() => tlsVisit(httpsPort, ep.hostname, { servername: 'unknown.edge.localhost', client: alice }), 421, 'misdirected_request');
      }
      // Verified for one mTLS endpoint says nothing about another.
      await refused(() => tlsVisit(httpsPort, required.hostname, { servername: optional.hostname, client: alice }), 421, 'misdirected_request');
    });
  });

  describe('session resumption', () => {
    for (const maxVersion of ['TLSv1.3', 'TLSv1.2'] as const) {
      it(`does not resume a session from a name without mTLS on an mTLS name (${maxVersion})`, async () => {
        const first = await tlsVisit(httpsPort, plain.hostname, { maxVersion });
        assert.ok(first.session, 'the edge issued a session');
        const again = await tlsVisit(httpsPort, plain.hostname, { maxVersion, session: first.session });
        assert.equal(again.reused, true, 'sessions resume on the name they came from');
        const res = await refused(() => tlsVisit(httpsPort, required.hostname, { maxVersion, session: first.session }), 403, 'client_certificate_required');
        assert.equal(res.reused, false);
      });

      it(`resumes a session on its own mTLS endpoint with the verdict it had (${maxVersion})`, async () => {
        const first = await tlsVisit(httpsPort, required.hostname, { maxVersion, client: alice });
        assert.equal(first.status, 200);
        const seen = await served(async () => {
          const res = await tlsVisit(httpsPort, required.hostname, { maxVersion, session: first.session });
          assert.equal(res.reused, true);
          return res;
        });
        assert.deepEqual(clientCertFields(seen), {
          'x-edge-client-cert-verify': 'SUCCESS',
          'x-edge-client-cert-subject': 'CN=alice',
          'x-edge-client-cert-fingerprint': fingerprint(alice),
        });
      });

      it(`keeps a session resumed without a certificate NONE (Node calls such a TLS 1.3 session authorized) (${maxVersion})`, async () => {
        const first = await tlsVisit(httpsPort, optional.hostname, { maxVersion });
        const seen = await served(async () => {
          const res = await tlsVisit(httpsPort, optional.hostname, { maxVersion, session: first.session });
          assert.equal(res.reused, true);
          return res;
        });
        assert.deepEqual(clientCertFields(seen), { 'x-edge-client-cert-verify': 'NONE' });
        const res = await refused(() => tlsVisit(httpsPort, required.hostname, { maxVersion, session: first.session }), 403, 'client_certificate_required');
        assert.equal(res.reused, false, 'nor is it resumed on another mTLS endpoint');
      });
    }
  });

  describe('changes', () => {
    it('applies a new CA bundle to new connections, and to open ones with 421 (their handshake asked under the old one)', async () => {
      const ep = await endpoint();
      await setMtls(ep, 'required', clients.certPem);
      const keepAlive = new https.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const first = await tlsVisit(httpsPort, ep.hostname, { client: alice, agent: keepAlive });
        assert.equal(first.status, 200);
        await setMtls(ep, 'required', strangers.certPem);
        const open = await refused(() => tlsVisit(httpsPort, ep.hostname, { client: alice, agent: keepAlive }), 421, 'misdirected_request');
        assert.equal(open.reusedSocket, true, 'asked on the connection opened before the change');
        await refused(() => tlsVisit(httpsPort, ep.hostname, { client: alice }), 403, 'client_certificate_invalid');
        const resumed = await refused(() => tlsVisit(httpsPort, ep.hostname, { session: first.session }), 403, 'client_certificate_required');
        assert.equal(resumed.reused, false, 'a session from before the change is not resumed');
        const seen = await served(() => tlsVisit(httpsPort, ep.hostname, { client: mallory }));
        assert.equal(clientCertFields(seen)['x-edge-client-cert-fingerprint'], fingerprint(mallory));
      } finally {
        keepAlive.destroy();
      }
    });

    it('stops asking for a certificate when mTLS is disabled, and starts when it is enabled', async () => {
      const ep = await endpoint();
      await setMtls(ep, 'optional', clients.certPem);
      assert.ok((await serverFlight(httpsPort, ep.hostname)).includes(CERTIFICATE_REQUEST));
      await setMtls(ep, 'disabled');
      assert.ok(!(await serverFlight(httpsPort, ep.hostname)).includes(CERTIFICATE_REQUEST));
      assert.deepEqual(clientCertFields(await served(() => tlsVisit(httpsPort, ep.hostname, { client: alice }))), {});
      await setMtls(ep, 'required', clients.certPem);
      await refused(() => tlsVisit(httpsPort, ep.hostname), 403, 'client_certificate_required');
    });
  });

  describe('with a custom certificate', () => {
    it('serves the endpoint its own certificate and asks for a client certificate on it', async () => {
      const serverCa = await createCa('Shop Server Root');
      const domain = await t.api('POST', '/v1/domains', { key: user.api_key, body: { name: 'shop.example.test' } });
      assert.equal(domain.status, 201, domain.text);
      assert.equal((await t.api('POST', `/v1/admin/domains/${domain.body.id}/verify`)).status, 200);
      const { rows } = await t.node.db!.query<{ uuid: string }>(
        'INSERT INTO endpoints (user_id, account_id, domain_id, subdomain, hostname) VALUES ($1, $2, $3, $4, $5) RETURNING uuid::text AS uuid',
        [user.id, user.account_id, domain.body.id, 'www', 'www.shop.example.test'],
      );
      const ep = { uuid: rows[0].uuid, hostname: 'www.shop.example.test' };
      const leaf = await createLeaf(serverCa, { dns: ['www.shop.example.test'] });
      const upload = await t.api('POST', '/v1/certificates', { key: user.api_key, body: { certificate_pem: leaf.chainPem, private_key_pem: leaf.keyPem } });
      assert.equal(upload.status, 201, upload.text);
      const assign = await t.api('PUT', `/v1/endpoints/${ep.uuid}/certificate`, { key: user.api_key, body: { certificate_id: upload.body.id, use_default: false } });
      assert.equal(assign.status, 200, assign.text);
      await setMtls(ep, 'required', clients.certPem);
      await edgeSees(ep.uuid, (e) => e.certificate_id === upload.body.id);

      // No agent serves it: getting as far as no_agent means the client certificate check let the request through.
      const through = await tlsVisit(httpsPort, ep.hostname, { client: alice });
      assert.equal(through.headers['x-edge-error'], 'no_agent');
      assert.equal(through.served?.fingerprint256, new X509Certificate(leaf.certPem).fingerprint256);
      const without = await tlsVisit(httpsPort, ep.hostname);
      assert.equal(without.headers['x-edge-error'], 'client_certificate_required');
      assert.equal(without.served?.fingerprint256, new X509Certificate(leaf.certPem).fingerprint256);
      assert.ok((await serverFlight(httpsPort, ep.hostname)).includes(CERTIFICATE_REQUEST));
    });
  });
});

describe('reading the ClientHello on the HTTPS listener', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode({ EDGE_HEADERS_TIMEOUT_MS: '1000' });
  });
  after(() => t.close());

  /** A raw connection to the HTTPS listener that has sent `bytes`; resolves when the edge closes it. */
  function closedAfter(bytes: Buffer): Promise<Buffer> {
    const socket = net.connect(t.node.edge!.httpsPort, '127.0.0.1');
    let received = Buffer.alloc(0);
    socket.on('data', (d) => (received = Buffer.concat([received, d])));
    socket.write(bytes);
    return new Promise((resolve, reject) => {
      socket.on('close', () => resolve(received));
      socket.on('error', reject);
    });
  }

  it('drops a client that sends no complete ClientHello within the headers timeout', async () => {
    // A record header announcing a ClientHello whose body never comes.
    assert.equal((await closedAfter(Buffer.from([22, 3, 1, 2, 0, 1, 0, 1, 252]))).length, 0);
  });

  it('hands a ClientHello naming no server to TLS as before, which has no certificate to serve without SNI', async () => {
    const socket = tls.connect({ host: '127.0.0.1', port: t.node.edge!.httpsPort, rejectUnauthorized: false });
    const err = await new Promise<NodeJS.ErrnoException>((resolve) => {
      socket.on('secureConnect', () => resolve(Object.assign(new Error('handshake completed'), { code: 'none' })));
      socket.on('error', resolve);
    });
    socket.destroy();
    assert.match(err.message, /alert handshake failure/);
  });
});
