// The GeoDNS server under load (`npx tsx bench/dns.ts`, and in `npm run bench`): answers per second with dnsperf
// against `edge serve` and against Knot DNS serving the same name statically, each alone on one CPU, and bind → answer.
import { createSocket } from 'node:dgram';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import dnsPacket from 'dns-packet';
import { benchFile, choosePinning, cpuTimeMs, jsonLine, spawnProgram, type Child } from './lib/procs.ts';
import { percentile } from './lib/soak-report.ts';
import type { Row } from './proxy.ts';

const BASE = 'edge.localhost';
const SECONDS = 10;
/** The asker's /24 in the ECS runs: 8.8.8.0/24 (United States in the shipped database, region us). */
const ECS_SUBNET = { family: 1, sourcePrefixLength: 24, address: '8.8.8.0' } as const;
/** The same subnet as dnsperf's `-E code:hex`: option 8, family 0001, source /24 (0x18), scope 0, three address bytes. */
const ECS_OPTION = '8:00011800080808';
const BINDS = 20;

function have(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

/** One raw UDP query (with an ECS option when `ecs` is given); resolves with the decoded answer or null after `timeoutMs`. */
function ask(port: number, name: string, type: 'A' | 'SOA', timeoutMs = 1_000, ecs?: { family: 1; sourcePrefixLength: number; address: string }): Promise<dnsPacket.DecodedPacket | null> {
  return new Promise((resolve) => {
    const socket = createSocket('udp4');
    const timer = setTimeout(() => {
      socket.close();
      resolve(null);
    }, timeoutMs);
    socket.on('message', (message) => {
      clearTimeout(timer);
      socket.close();
      resolve(dnsPacket.decode(message));
    });
    const additionals: dnsPacket.Answer[] = ecs
      ? [{ type: 'OPT', name: '.', udpPayloadSize: 1232, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [{ code: 8, family: ecs.family, sourcePrefixLength: ecs.sourcePrefixLength, scopePrefixLength: 0, ip: ecs.address }] }]
      : [];
    socket.send(dnsPacket.encode({ type: 'query', id: Math.floor(Math.random() * 65535), questions: [{ type, name }], additionals }), port, '127.0.0.1');
  });
}

/** The A records' addresses in an answer (in order), none when there is no answer. */
function aRecords(p: dnsPacket.DecodedPacket | null): string[] {
  return (p?.answers ?? []).flatMap((r) => (r.type === 'A' ? [r.data] : []));
}

interface PerfRun {
  qps: number;
  /** Queries with no answer, in %. */
  lost: number;
  /** The server's CPU time over the run per second of it (1 = a whole CPU): below 1, something else had its CPU. */
  cpu: number;
  command: string;
}

/** Runs dnsperf for SECONDS on the load CPU against the server `serverPid`; queries per second, share lost, server CPU. */
function dnsperf(port: number, serverPid: number, queryFile: string, cpu: number | null, extra: string[] = []): PerfRun {
  const args = ['-s', '127.0.0.1', '-p', String(port), '-d', queryFile, '-l', String(SECONDS), '-c', '4', '-q', '200', ...extra];
  const argv = cpu === null ? ['dnsperf', ...args] : ['taskset', '-c', String(cpu), 'dnsperf', ...args];
  const cpuBefore = cpuTimeMs(serverPid);
  const run = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', timeout: (SECONDS + 30) * 1000 });
  const serverCpu = (cpuTimeMs(serverPid) - cpuBefore) / (SECONDS * 1000);
  const out = `${run.stdout ?? ''}${run.stderr ?? ''}`;
  const qps = /Queries per second:\s+([\d.]+)/.exec(out);
  const lost = /Queries lost:\s+\d+ \(([\d.]+)%\)/.exec(out);
  if (!qps) throw new Error(`dnsperf gave no result:\n${out.slice(-2000)}`);
  // A server that answers REFUSED or SERVFAIL fast would look fast: every answer counted must be the real one.
  const codes = /Response codes:\s+(.*)/.exec(out)?.[1] ?? '';
  if (!/^NOERROR \d+ \(100(\.0+)?%\)$/.test(codes.trim())) throw new Error(`dnsperf saw answers other than NOERROR: ${codes || 'none'}\n${out.slice(-2000)}`);
  return { qps: Number(qps[1]), lost: lost ? Number(lost[1]) : 0, cpu: serverCpu, command: `dnsperf ${args.join(' ')}` };
}

async function until<T>(what: string, read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`${what}: gave up after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** `edge serve` on its own CPU with the DNS role's rate limit off (dnsperf is one client network). */
async function startServe(dir: string, cpu: number | null): Promise<{ child: Child; control: number; dns: number; adminKey: string }> {
  const adminKey = 'bench-admin-key-0123456789abcdef';
  const env = {
    ...process.env,
    EDGE_DATA_DIR: dir,
    EDGE_ADMIN_API_KEY: adminKey,
    EDGE_BIND_HOST: '127.0.0.1',
    EDGE_CONTROL_PORT: '0',
    EDGE_HTTP_PORT: '0',
    EDGE_HTTPS_PORT: '0',
    EDGE_OPS_PORT: '0',
    EDGE_RELAY_PORT: '0',
    EDGE_DNS_PORT: '0',
    EDGE_DNS_RATE_LIMIT: '0',
    // The only live region is this node's: eu. Without a heartbeat from us or ap, every asker gets the eu address
    // (its own region's, or by fallback); the region choice still runs on every query, which is what is measured.
    EDGE_REGION: 'eu',
    // The shared pool an unbound endpoint is answered from (the unbind → shared answer timing waits for it).
    EDGE_PUBLIC_ADDRESSES: '127.0.0.1',
    // info, not warn: the ports come from the 'node ready' line. The DNS role logs nothing per query above debug.
    EDGE_LOG_LEVEL: 'info',
    DATABASE_URL: '',
    REDIS_URL: '',
  };
  const child = spawnProgram('edge serve', process.execPath, [benchFile('../bin/edge.js'), 'serve'], { cpu, env });
  const ready = await child.waitForLine((line) => {
    const entry = jsonLine(line);
    return entry?.msg === 'node ready' ? entry : null;
  }, 60_000);
  return { child, control: ready.control as number, dns: ready.dns as number, adminKey };
}

/** Knot DNS serving the same name from a static zone, one worker of each kind, on `cpu`. */
async function startKnot(dir: string, cpu: number | null, port: number, name: string, addresses: string[]): Promise<Child> {
  const zone = `geo.${BASE}`;
  await mkdir(join(dir, 'db'), { recursive: true });
  const label = name.slice(0, -(zone.length + 1));
  await writeFile(
    join(dir, `${zone}.zone`),
    `$ORIGIN ${zone}.\n$TTL 30\n@ SOA ns1.${BASE}. hostmaster.${BASE}. 1 3600 600 604800 30\n@ NS ns1.${BASE}.\n${addresses.map((a) => `${label} A ${a}`).join('\n')}\n`,
  );
  await writeFile(
    join(dir, 'knot.conf'),
    `server:\n    rundir: "${dir}"\n    user: ${userInfo().username}\n    listen: 127.0.0.1@${port}\n    udp-workers: 1\n    tcp-workers: 1\n    background-workers: 1\n` +
      `log:\n  - target: stderr\n    any: warning\n` +
      `database:\n    storage: "${join(dir, 'db')}"\n` +
      `zone:\n  - domain: ${zone}.\n    storage: "${dir}"\n    file: "${zone}.zone"\n`,
  );
  const child = spawnProgram('knotd', 'knotd', ['-c', join(dir, 'knot.conf'), '-s', join(dir, 'knot.sock')], { cpu });
  await until('knotd answering', () => ask(port, name, 'A', 200), (p) => (p?.answers?.length ?? 0) > 0);
  return child;
}

/** A port free for UDP now (knotd binds it a moment later; a collision fails the run loudly, not silently). */
function freeUdpPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    s.bind(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export async function benchDns(): Promise<Row[]> {
  if (!have('dnsperf') || !have('knotd')) {
    return [{ benchmark: 'GeoDNS (dnsperf, Knot)', result: 'skipped: dnsperf and knotd are needed (Debian packages dnsperf, knot)' }];
  }
  const pin = choosePinning();
  const dir = await mkdtemp(join(tmpdir(), 'bench-dns-'));
  const children: Child[] = [];
  try {
    const serve = await startServe(join(dir, 'serve'), pin.proxyCpu);
    children.push(serve.child);
    const api = async (method: string, path: string, key: string, body?: unknown) => {
      const res = await fetch(`http://127.0.0.1:${serve.control}${path}`, { method, headers: body === undefined ? { 'x-api-key': key } : { 'x-api-key': key, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      if (res.status >= 400) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
      return (res.status === 204 ? null : res.json()) as Promise<any>;
    };
    const user = await api('POST', '/v1/admin/users', serve.adminKey, { email: 'dns-bench@example.test', plan: 'business' });
    const addresses = ['192.0.2.10', '198.51.100.20', '203.0.113.30'];
    for (const [i, region] of ['eu', 'us', 'ap'].entries()) await api('POST', '/v1/admin/dedicated-ips', serve.adminKey, { address: addresses[i], region, account_id: user.account_id });
    const group = await api('POST', '/v1/admin/dedicated-ip-groups', serve.adminKey, { account_id: user.account_id, name: 'bench', status: 'active', addresses });
    const name = group.geo_fqdn as string;
    await until('the group in DNS', () => ask(serve.dns, name, 'A'), (p) => (p?.answers?.length ?? 0) > 0);
    // The node's own heartbeat makes eu alive and brings the shared pool (the name server's name is answered from
    // it): wait for it, so dnsperf measures the region choice with a live region, and the unbind timing the feed,
    // not presence's timer.
    await until('the shared pool in DNS', () => ask(serve.dns, `ns1.${BASE}`, 'A'), (p) => aRecords(p)[0] === '127.0.0.1', 30_000);
    // What dnsperf's queries are answered, said in the output: which addresses, and the ECS scope echoed.
    const shown = (p: dnsPacket.DecodedPacket | null) => {
      const a = aRecords(p).join(', ') || 'nothing';
      const opt = p?.additionals?.find((r) => r.type === 'OPT') as dnsPacket.OptAnswer | undefined;
      const scope = opt?.options?.find((o) => o.code === 8) as { scopePrefixLength?: number } | undefined;
      return scope ? `${a} (ECS scope /${scope.scopePrefixLength})` : a;
    };
    const answered = { plain: shown(await ask(serve.dns, name, 'A')), ecs: shown(await ask(serve.dns, name, 'A', 1_000, ECS_SUBNET)) };
    const queries = join(dir, 'queries.txt');
    await writeFile(queries, `${name} A\n`);

    const plain = dnsperf(serve.dns, serve.child.pid, queries, pin.restCpu);
    const ecs = dnsperf(serve.dns, serve.child.pid, queries, pin.restCpu, ['-E', ECS_OPTION]);

    // Bind → answer: the time from the API's 200 to the first UDP answer carrying the CNAME; then unbind → the
    // shared pool's A record again (from the 204).
    const binds: number[] = [];
    const unbinds: number[] = [];
    for (let i = 0; i < BINDS; i++) {
      const ep = await api('POST', '/v1/endpoints', user.api_key, {});
      await api('POST', `/v1/endpoints/${ep.uuid}/dedicated-ip-group`, user.api_key, { group_id: group.id });
      let started = performance.now();
      await until('the CNAME', () => ask(serve.dns, ep.hostname, 'A', 200), (p) => p?.answers?.[0]?.type === 'CNAME', 10_000);
      binds.push(performance.now() - started);
      await api('DELETE', `/v1/endpoints/${ep.uuid}/dedicated-ip-group`, user.api_key);
      started = performance.now();
      await until('the shared answer', () => ask(serve.dns, ep.hostname, 'A', 200), (p) => p?.answers?.length === 1 && aRecords(p)[0] === '127.0.0.1', 10_000);
      unbinds.push(performance.now() - started);
    }
    await serve.child.stop();

    const knotDir = join(dir, 'knot');
    await mkdir(knotDir);
    const knotPort = await freeUdpPort();
    const knotd = await startKnot(knotDir, pin.proxyCpu, knotPort, name, addresses);
    children.push(knotd);
    const knot = dnsperf(knotPort, knotd.pid, queries, pin.restCpu);
    const knotEcs = dnsperf(knotPort, knotd.pid, queries, pin.restCpu, ['-E', ECS_OPTION]);

    // Answers per CPU-second as well: on a machine where something else shares the server's CPU, answers/s drop with
    // the share the server got, and this figure (and its ratio) is the one that holds.
    const perCpu = (r: PerfRun) => r.qps / r.cpu;
    const n = (x: number) => Math.round(x).toLocaleString('en-US');
    const qps = (r: PerfRun) => `${n(r.qps)} answers/s (${r.lost}% lost; server ${Math.round(r.cpu * 100)}% of a CPU, ${n(perCpu(r))} per CPU-second)`;
    const ratio = (ours: PerfRun, theirs: PerfRun) => `${(ours.qps / theirs.qps).toFixed(2)}× Knot, ${(perCpu(ours) / perCpu(theirs)).toFixed(2)}× per CPU-second (target ≥ 0.3×)`;
    const spread = (ms: number[]) => {
      const sorted = [...ms].sort((a, b) => a - b);
      return `p50 ${percentile(sorted, 50).toFixed(1)} ms, p95 ${percentile(sorted, 95).toFixed(1)} ms, max ${sorted[sorted.length - 1].toFixed(1)} ms`;
    };
    return [
      { benchmark: 'GeoDNS: dnsperf setup', result: `${pin.how}; ${SECONDS} s per run: ${plain.command} (and -E ${ECS_OPTION} for ECS), the same against knotd` },
      { benchmark: 'GeoDNS: what the group name answers', result: `node region eu, the only live one (us, ap: no heartbeat); no ECS: ${answered.plain}; ECS 8.8.8.0/24 (us → fallback): ${answered.ecs}` },
      { benchmark: 'GeoDNS, group name, no ECS (edge serve, one CPU)', result: `${qps(plain)}; ${ratio(plain, knot)}` },
      { benchmark: 'GeoDNS, group name, ECS 8.8.8.0/24 (edge serve, one CPU)', result: `${qps(ecs)}; ${ratio(ecs, knotEcs)}` },
      { benchmark: 'Knot DNS 3.2, the same name from a static zone, 3 A records (one CPU, 1 UDP worker)', result: `${qps(knot)} without ECS; ${qps(knotEcs)} with the option sent` },
      { benchmark: `bind → new answer on the DNS server (${BINDS} binds)`, result: `${spread(binds)} (target < 1 s)` },
      { benchmark: `unbind → shared answer on the DNS server (${BINDS} unbinds)`, result: spread(unbinds) },
    ];
  } finally {
    for (const child of children) await child.stop().catch(() => {});
    await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const row of await benchDns()) process.stdout.write(`${row.benchmark}: ${row.result}\n`);
}
