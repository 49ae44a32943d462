// What the agent file's tests against a real node share: a node with a business owner, echo services behind http, tcp
// and udp tunnels, four endpoints (two http; one tcp and one udp with dedicated ports the edge already listens on),
// each as a line of an agent file's `tunnels:` map, and a request loop that counts what it was served and what failed.
import dgram from 'node:dgram';
import { freePort, tcpEcho, udpEcho, ask } from '../helpers/echo-services.ts';
import { createEndpoint, edgeCaughtUp, expectBody, nodeWithOwner, type User } from '../helpers/endpoint-api.ts';
import { eventually } from '../helpers/eventually.ts';
import { visit } from '../helpers/http.ts';
import { startEchoService, type Echoed, type LocalService } from '../helpers/local-service.ts';
import type { TestNode } from '../helpers/node.ts';

export interface TunnelsFixture {
  t: TestNode;
  owner: User;
  edgePort: number;
  http: LocalService<Echoed>;
  tcp: Awaited<ReturnType<typeof tcpEcho>>;
  udp: Awaited<ReturnType<typeof udpEcho>>;
  web: { uuid: string; hostname: string };
  api: { uuid: string; hostname: string };
  db: { uuid: string; port: number };
  dns: { uuid: string; port: number };
  /** The four tunnels as lines of a `tunnels:` map: web and api (http), db (tcp), dns (udp). */
  lines: { web: string; api: string; db: string; dns: string };
  close(): Promise<void>;
}

/** Starts the node (with `env` added), the services and the endpoints; close() ends them all. */
export async function startTunnelsFixture(env: Record<string, string> = {}): Promise<TunnelsFixture> {
  const { t, owner } = await nodeWithOwner({ EDGE_PRESENCE_INTERVAL_MS: '100', EDGE_JANITOR_INTERVAL_MS: '100', ...env });
  /** An endpoint with a dedicated port, once the edge listens on it (active needs no agent: the port is bound). */
  const endpointWithPort = async (kind: 'tcp' | 'udp') => {
    const { uuid } = await createEndpoint(t, owner);
    const port = await freePort(kind);
    await expectBody(200, t.api('PUT', `/v1/endpoints/${uuid}/ports`, { key: owner.api_key, body: { [`dedicated_${kind}_port`]: port } }));
    await eventually(async () => ((await t.api('GET', `/v1/endpoints/${uuid}`, { key: owner.api_key })).body.status === 'active' ? true : undefined), 30_000);
    return { uuid, port };
  };
  const http = await startEchoService();
  const tcp = await tcpEcho();
  const udp = await udpEcho();
  const web = await createEndpoint(t, owner);
  const api = await createEndpoint(t, owner);
  const db = await endpointWithPort('tcp');
  const dns = await endpointWithPort('udp');
  await edgeCaughtUp(t);
  return {
    t,
    owner,
    edgePort: t.node.edge!.httpPort,
    http,
    tcp,
    udp,
    web,
    api,
    db,
    dns,
    lines: {
      web: `  web: { protocol: http, target: ${http.port}, endpoint: ${web.uuid} }\n`,
      api: `  api: { protocol: http, target: ${http.port}, endpoint: ${api.uuid} }\n`,
      db: `  db: { protocol: tcp, target: ${tcp.port}, endpoint: ${db.uuid} }\n`,
      dns: `  dns: { protocol: udp, target: ${udp.port}, endpoint: ${dns.uuid} }\n`,
    },
    async close() {
      await http.close();
      await tcp.close();
      await udp.close();
      await t.close();
    },
  };
}

/** The answer to one datagram sent to `port` through the edge, asked again until one comes (datagrams may be lost). */
export async function udpAnswer(port: number, text: string): Promise<string> {
  const socket = dgram.createSocket('udp4');
  try {
    await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
    return await eventually(() => ask(socket, port, text));
  } finally {
    socket.close();
  }
}

export interface RequestLoop {
  /** Requests answered 200 so far. */
  readonly served: number;
  /** Every other outcome: status and body, or the error. */
  readonly failures: string[];
  /** Resolves once `more` further requests were served. */
  serves(more: number): Promise<void>;
  /** Ends the loop after the request in flight. */
  stop(): Promise<void>;
}

/** Requests `host` through the edge one after another until stopped; resolves once the first was served. */
export async function requestLoop(edgePort: number, host: string): Promise<RequestLoop> {
  const failures: string[] = [];
  let served = 0;
  let looping = true;
  const loop = (async () => {
    while (looping) {
      const reply = await visit(edgePort, host, '/loop').catch((err: Error) => ({ status: 0, body: err.message }));
      if (reply.status === 200) served++;
      else failures.push(`${reply.status} ${reply.body}`);
    }
  })();
  const serves = (more: number) => {
    const from = served;
    return eventually(async () => (served >= from + more ? true : undefined)).then(() => {});
  };
  await serves(1).catch(async (err: unknown) => {
    looping = false;
    await loop;
    throw err;
  });
  return {
    get served() {
      return served;
    },
    failures,
    serves,
    async stop() {
      looping = false;
      await loop;
    },
  };
}
