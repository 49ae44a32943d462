// The agent's local target, parsed once at start from the command line form (`3000`, `host:port` or a URL).
// Every stream the edge opens is forwarded here and nowhere else, whatever authority the stream names.
import { isIP } from 'node:net';
import type { TunnelProtocol } from '../shared/tunnel/protocol.ts';

export interface Target {
  protocol: TunnelProtocol;
  host: string;
  port: number;
  /** For http targets: whether the local service speaks TLS (an https:// target). */
  tls: boolean;
  /** How logs and error pages name it, e.g. http://localhost:3000 or udp://127.0.0.1:5353. */
  display: string;
}

const SCHEMES: Record<TunnelProtocol, Record<string, { tls: boolean; port: number | null }>> = {
  http: { 'http:': { tls: false, port: 80 }, 'https:': { tls: true, port: 443 } },
  tcp: { 'tcp:': { tls: false, port: null } },
  udp: { 'udp:': { tls: false, port: null } },
};

export class TargetError extends Error {
  override name = 'TargetError';
}

function parsePort(text: string, original: string): number {
  if (!/^[0-9]{1,5}$/.test(text)) throw new TargetError(`invalid port in target "${original}"`);
  const port = Number(text);
  if (port < 1 || port > 65535) throw new TargetError(`port ${port} in target "${original}" is out of range (1-65535)`);
  return port;
}

function display(protocol: TunnelProtocol, tls: boolean, host: string, port: number): string {
  const scheme = protocol === 'http' ? (tls ? 'https' : 'http') : protocol;
  return `${scheme}://${isIP(host) === 6 ? `[${host}]` : host}:${port}`;
}

/**
 * `3000` means the service on this machine: `localhost` for TCP-based protocols (Node tries IPv6 and IPv4, as a
 * dev server bound to either is common) and 127.0.0.1 for UDP, which has no connection to race. `host:port`
 * and `[v6]:port` name a host; a URL may set the scheme (`https://` for a local TLS service). A path in an http
 * URL is refused: the agent forwards the path the edge judged, unchanged.
 */
export function parseTarget(protocol: TunnelProtocol, target: string | number): Target {
  const text = String(target).trim();
  if (/^[0-9]+$/.test(text)) {
    const host = protocol === 'udp' ? '127.0.0.1' : 'localhost';
    const port = parsePort(text, text);
    return { protocol, host, port, tls: false, display: display(protocol, false, host, port) };
  }
  const hasScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text);
  let url: URL;
  try {
    url = new URL(hasScheme ? text : `${protocol}://${text}`);
  } catch {
    throw new TargetError(`invalid target "${text}": use a port, host:port or a ${Object.keys(SCHEMES[protocol]).map((s) => `${s}//`).join(' or ')} URL`);
  }
  const scheme = SCHEMES[protocol][url.protocol];
  if (!scheme) {
    throw new TargetError(`target "${text}" has scheme ${url.protocol} but a ${protocol} agent accepts ${Object.keys(SCHEMES[protocol]).join(', ')}`);
  }
  if (url.username || url.password) throw new TargetError(`target "${text}" must not carry credentials`);
  if ((url.pathname !== '' && url.pathname !== '/') || url.search || url.hash) {
    throw new TargetError(`target "${text}" must not have a path, query or fragment`);
  }
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (!host) throw new TargetError(`target "${text}" has no host`);
  const port = url.port ? parsePort(url.port, text) : scheme.port;
  if (port === null) throw new TargetError(`target "${text}" needs a port`);
  return { protocol, host, port, tls: scheme.tls, display: display(protocol, scheme.tls, host, port) };
}
