// Listens on this region's dedicated addresses beside the shared bind host (docs/dedicated-ips.md "At the edge"):
// each accepted connection is handed to the public HTTP or HTTPS server, so the pipeline and TLS treat it as any other.
import net from 'node:net';
import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Logger } from '../../shared/log.ts';
import type { DedicatedAddresses } from '../dedicated-addresses.ts';
import { listen } from './listen.ts';

export interface DedicatedListenerOptions {
  dedicated: DedicatedAddresses;
  region: string;
  /** EDGE_BIND_HOST: a wildcard already accepts connections to every local address of its family. */
  bindHost: string;
  plain: HttpServer;
  secure: HttpsServer;
  logger: Logger;
  /** Called after a pass changed what is listened on (the edge reports it in its next heartbeat). */
  onChange?: () => void;
}

/** Whether a listener on `bindHost` already receives connections to `address`. */
export function covers(bindHost: string, address: string): boolean {
  if (bindHost === '::') return true;
  if (bindHost === '0.0.0.0') return !address.includes(':');
  return bindHost === address;
}

export class DedicatedListeners {
  /** `address|port` → its listener; ports are the shared listeners' own (HTTP and HTTPS). */
  private readonly servers = new Map<string, net.Server>();
  private ports: { http: number; https: number } | null = null;
  private syncing: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly options: DedicatedListenerOptions) {
    options.dedicated.on('changed', () => void this.sync());
  }

  /** Starts following the dedicated addresses, on the ports the shared listeners bound. */
  start(ports: { http: number; https: number }): Promise<void> {
    this.ports = ports;
    return this.sync();
  }

  /** The dedicated addresses this edge listens on now (for its heartbeat). */
  bound(): string[] {
    return [...new Set([...this.servers.keys()].map((k) => k.slice(0, k.lastIndexOf('|'))))];
  }

  close(): void {
    this.closed = true;
    for (const server of this.servers.values()) server.close();
    this.servers.clear();
  }

  /** Binds what is wanted and closes what is not, one pass at a time. */
  private sync(): Promise<void> {
    this.syncing = this.syncing.then(() => this.pass());
    return this.syncing;
  }

  private async pass(): Promise<void> {
    const ports = this.ports;
    if (ports === null || this.closed) return;
    const { dedicated, region, bindHost, plain, secure, logger } = this.options;
    const before = this.servers.size;
    let changed = false;
    const wanted = new Map<string, { address: string; port: number; server: HttpServer | HttpsServer }>();
    for (const { address, region: where } of dedicated.addresses()) {
      if (where !== region || covers(bindHost, address)) continue;
      wanted.set(`${address}|${ports.http}`, { address, port: ports.http, server: plain });
      wanted.set(`${address}|${ports.https}`, { address, port: ports.https, server: secure });
    }
    for (const [key, server] of this.servers) {
      if (wanted.has(key)) continue;
      server.close();
      this.servers.delete(key);
      changed = true;
    }
    for (const [key, want] of wanted) {
      if (this.servers.has(key)) continue;
      const server = net.createServer((socket) => want.server.emit('connection', socket));
      try {
        await listen(server, want.port, want.address);
        if (this.closed) return void server.close();
        this.servers.set(key, server);
        changed = true;
      } catch (err) {
        // Typically EADDRNOTAVAIL: the address is not configured on this machine. Retried at the next change.
        logger.warn({ err, address: want.address, port: want.port }, 'cannot listen on a dedicated address');
      }
    }
    if (changed || before !== this.servers.size) this.options.onChange?.();
  }
}
