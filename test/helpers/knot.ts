// A real Knot DNS primary (knotd) for tests of dynamic updates: one zone, one TSIG key, an ACL that allows or denies
// updates with it, everything in a fresh temporary directory on a free loopback port, removed on stop().
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import dnsPacket from 'dns-packet';

export interface KnotKey {
  name: string;
  algorithm: 'hmac-sha256' | 'hmac-sha384' | 'hmac-sha512';
  /** Base64. */
  secret: string;
}

export interface KnotOptions {
  zone: string;
  key: KnotKey;
  /** false: the zone's ACL denies updates with the key, so the server refuses them. */
  allowUpdate: boolean;
  /** Listen on this port (a server restarted where its clients already point); absent: a free one. */
  port?: number;
}

/** A decoded answer; dns-packet's decode sets `rcode` ('NOERROR', 'NXDOMAIN', …), which @types/dns-packet omits. */
export type KnotAnswer = dnsPacket.DecodedPacket & { rcode: string };

export interface KnotServer {
  port: number;
  host: '127.0.0.1';
  query(name: string, type: 'CNAME' | 'A' | 'AAAA' | 'SOA'): Promise<KnotAnswer>;
  stop(): Promise<void>;
  /** knotd's log so far, for a failing test's message. */
  log(): string;
}

const START_TIMEOUT_MS = 10_000;

// A knotd left behind by a test process that dies before stop() would hold its port and directory: kill it on exit.
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});
const QUERY_TIMEOUT_MS = 2_000;

/** Whether knotd is installed, for tests to skip with a reason where it is not. */
export function knotAvailable(): boolean {
  return spawnSync('knotd', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** A port free for both TCP and UDP on 127.0.0.1 when asked: knotd listens on both. */
async function freePort(): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const port = await new Promise<number>((resolve, reject) => {
      const probe = createServer();
      probe.once('error', reject);
      probe.listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const udpFree = await new Promise<boolean>((resolve) => {
      const udp = createSocket('udp4');
      udp.once('error', () => resolve(false));
      udp.bind(port, '127.0.0.1', () => udp.close(() => resolve(true)));
    });
    if (udpFree) return port;
    if (attempt >= 10) throw new Error('no port free for both TCP and UDP');
  }
}

/** One query over TCP (dns-packet's 2-byte length framing); rejects on timeout or a closed connection. */
export function queryTcp(port: number, name: string, type: dnsPacket.RecordType, timeoutMs = QUERY_TIMEOUT_MS): Promise<KnotAnswer> {
  return new Promise((resolve, reject) => {
    const id = Math.floor(Math.random() * 0x10000);
    const socket = connect({ host: '127.0.0.1', port });
    let buffered = Buffer.alloc(0);
    const done = (err: Error | null, packet?: KnotAnswer) => {
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(packet as KnotAnswer);
    };
    const timer = setTimeout(() => done(new Error(`query ${name} ${type}: no answer within ${timeoutMs} ms`)), timeoutMs);
    socket.once('connect', () => socket.write(dnsPacket.streamEncode({ type: 'query', id, questions: [{ type, name, class: 'IN' }] })));
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const packet = dnsPacket.decode(buffered.subarray(2, 2 + buffered.readUInt16BE(0))) as KnotAnswer;
        if (packet.id !== id) return done(new Error(`query ${name} ${type}: answer has ID ${packet.id}, expected ${id}`));
        done(null, packet);
      }
    });
    socket.once('error', (err) => done(err));
    socket.once('close', () => done(new Error(`query ${name} ${type}: connection closed without an answer`)));
  });
}

function knotConf(dir: string, port: number, options: KnotOptions): string {
  const zone = options.zone.replace(/\.$/, '');
  const key = options.key.name.replace(/\.$/, '');
  // Denial is an explicit deny rule for the key, so the refusal comes from the ACL and not from a missing rule.
  const acl = options.allowUpdate ? '' : '\n    deny: on';
  return `server:
    rundir: "${dir}"
    user: ${userInfo().username}
    listen: 127.0.0.1@${port}

log:
  - target: stderr
    any: info

database:
    storage: "${join(dir, 'db')}"

key:
  - id: ${key}.
    algorithm: ${options.key.algorithm}
    secret: ${options.key.secret}

acl:
  - id: update
    key: ${key}.
    action: update${acl}

template:
  - id: default
    storage: "${dir}"
    file: "%s.zone"
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: changes

zone:
  - domain: ${zone}.
    acl: update
`;
}

function zoneFile(zone: string): string {
  const origin = `${zone.replace(/\.$/, '')}.`;
  return `$ORIGIN ${origin}
$TTL 300
@   SOA ns.${origin} hostmaster.${origin} 1 3600 600 86400 300
@   NS  ns
ns  A   127.0.0.1
`;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

/** Starts knotd; a port taken between the probe and knotd's bind is retried on another, up to three times. */
export async function startKnot(options: KnotOptions): Promise<KnotServer> {
  const dir = await mkdtemp(join(tmpdir(), 'knot-'));
  try {
    // knotd opens its journal under the database storage but does not create it; without it every update SERVFAILs.
    await mkdir(join(dir, 'db'));
    await writeFile(join(dir, `${options.zone.replace(/\.$/, '')}.zone`), zoneFile(options.zone));
    for (let attempt = 1; ; attempt++) {
      const port = options.port ?? (await freePort());
      const conf = join(dir, 'knot.conf');
      await writeFile(conf, knotConf(dir, port, options));
      try {
        return await run(dir, conf, port, options.zone);
      } catch (err) {
        if (!(err instanceof PortTaken) || attempt >= 3 || options.port !== undefined) throw err;
      }
    }
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

class PortTaken extends Error {}

async function run(dir: string, conf: string, port: number, zone: string): Promise<KnotServer> {
  const child = spawn('knotd', ['-c', conf, '-s', join(dir, 'knot.sock')], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  let spawnError: Error | null = null;
  // 'close' comes after stderr has ended, so once it has, the log holds why knotd stopped.
  let closed = false;
  child.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString()));
  child.once('error', (err) => (spawnError = err));
  child.once('close', () => (closed = true));
  live.add(child);
  child.once('exit', () => live.delete(child));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited(child);
  };

  const deadline = Date.now() + START_TIMEOUT_MS;
  for (;;) {
    if (spawnError) throw spawnError;
    // knotd reports a taken port only in its log ("cannot bind address … (address already in use)"), then exits.
    if (/cannot bind|address already in use/i.test(log)) {
      await stop();
      throw new PortTaken(`knotd could not bind 127.0.0.1@${port}:\n${log}`);
    }
    if (closed) {
      throw new Error(`knotd exited (${child.exitCode ?? child.signalCode}) before answering:\n${log}`);
    }
    // Nothing signals readiness but an answer: poll SOA until the zone is loaded and served.
    const answer = await queryTcp(port, zone, 'SOA', 500).catch(() => null);
    if (answer?.rcode === 'NOERROR' && answer.answers?.some((a) => a.type === 'SOA')) break;
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`knotd on port ${port} did not serve ${zone} within ${START_TIMEOUT_MS} ms:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }

  return {
    port,
    host: '127.0.0.1',
    query: (name, type) => queryTcp(port, name, type),
    log: () => log,
    async stop() {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
