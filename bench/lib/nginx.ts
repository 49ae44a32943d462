// nginx as the proxy benchmark's reference: a minimal nginx.conf in a temporary directory, one process proxying to the
// upstream over keep-alive connections, pinned like the edge. Absent nginx, startNginx answers null and the row is skipped.
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnProgram, type Child } from './procs.ts';

export const NGINX_BIN = process.env.BENCH_NGINX_BIN ?? '/usr/sbin/nginx';

export interface NginxProxy {
  child: Child;
  port: number;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/**
 * One nginx process (`master_process off`: the worker is the process, so its /proc CPU time is nginx's whole cost
 * per request; with a master, the master sleeps under load) proxying everything to the upstream with HTTP/1.1
 * keep-alive upstream connections, buffers large enough for a 64 KiB answer in memory, no access log: the
 * cheapest ordinary reverse-proxy setup, as the outside check ran it.
 */
function config(dir: string, port: number, upstreamPort: number): string {
  return `worker_processes 1;
master_process off;
daemon off;
pid ${dir}/nginx.pid;
error_log stderr warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_requests 10000000;
  keepalive_timeout 120s;
  upstream origin {
    server 127.0.0.1:${upstreamPort};
    keepalive 64;
    keepalive_requests 10000000;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffer_size 16k;
      proxy_buffers 8 16k;
    }
  }
}
`;
}

/** Starts nginx in front of the upstream, pinned to `cpu`; null when no nginx binary is installed. */
export async function startNginx(upstreamPort: number, cpu: number | null): Promise<NginxProxy | null> {
  if (!existsSync(NGINX_BIN)) return null;
  const dir = await mkdtemp(join(tmpdir(), 'bench-nginx-'));
  const port = await freePort();
  const file = join(dir, 'nginx.conf');
  await writeFile(file, config(dir, port, upstreamPort));
  // -e: the error log before the config is read (the compiled-in one may not be writable as this user).
  const child = spawnProgram('nginx', NGINX_BIN, ['-p', dir, '-e', 'stderr', '-c', file], { cpu });
  const stop = async () => {
    await child.stop(3_000);
    await rm(dir, { recursive: true, force: true });
  };
  // nginx prints nothing when ready: its port accepting is the signal.
  const deadline = Date.now() + 10_000;
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
      s.once('error', () => resolve(false));
    });
    if (up) break;
    if (child.process.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`nginx did not start: ${child.stderr().trim() || '(no output)'}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, port, stop };
}
