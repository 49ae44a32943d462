// What `edge agent` prints: for a person at a terminal, plain status lines (Forwarding, Reconnecting, Stopped) and
// only warnings from the log, as readable lines; for a pipe or a file, JSON log lines a collector can read.
//
// The mode follows stdout (isTTY) unless EDGE_LOG_FORMAT says `text` or `json`. Both modes print the Forwarding line,
// which scripts read to learn the public URL.
import { pino, type Logger } from 'pino';
import type { TunnelProtocol, Welcome } from '../shared/tunnel/protocol.ts';
import type { ReconnectInfo } from './agent.ts';

export const LOG_FORMATS = ['auto', 'text', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** Where the console writes: process.stdout, or a stand-in with the same two members. */
export interface ConsoleOutput {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface AgentConsoleOptions {
  out: ConsoleOutput;
  /** `auto` (default): text when `out` is a terminal, JSON otherwise. */
  format?: LogFormat;
  /** The log level; default `warn` in text mode (status lines say the rest), `info` in JSON mode. */
  level?: string;
  /** Clock for the text lines' times (tests fix it). */
  now?: () => Date;
}

/** The agent's console: the logger to give the agent, and the status lines the command prints on its events. */
export interface AgentConsole {
  readonly format: 'text' | 'json';
  readonly logger: Logger;
  /** `tunnel` names one of several tunnels in one process (`edge agent start`): the line starts with `[name] `. */
  forwarding(welcome: Welcome, protocol: TunnelProtocol, target: string, transport: string, tunnel?: string): void;
  reconnecting(info: ReconnectInfo, tunnel?: string): void;
}

/** Fields every line has or that the text mode says otherwise: left out of a text line's `key=value` list. */
const IMPLIED = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'component', 'agent']);

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/** A field's value: bare when it is a plain word or a number, else as JSON (quoted, escaped). */
function fieldText(value: unknown): string {
  if (typeof value !== 'string') return JSON.stringify(value) ?? String(value);
  return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
}

/** One pino JSON line as `HH:MM:SS LEVEL message key=value …`. */
export function textLine(json: string, now: () => Date): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const level = LEVEL_NAMES[entry.level as number] ?? String(entry.level);
  const fields = Object.entries(entry)
    .filter(([k]) => !IMPLIED.has(k))
    .map(([k, v]) => {
      if (k === 'err' && v !== null && typeof v === 'object' && 'message' in v) return `err=${fieldText((v as { message: unknown }).message)}`;
      return `${k}=${fieldText(v)}`;
    });
  const time = now().toTimeString().slice(0, 8);
  return `${time} ${level.padEnd(5)} ${String(entry.msg ?? '')}${fields.length > 0 ? ' ' + fields.join(' ') : ''}\n`;
}

/** The public address a person opens: the welcome's public_url as given when it has a scheme, else https:// for http. */
export function publicAddress(welcome: Welcome, protocol: TunnelProtocol): string {
  const url = welcome.endpoint.public_url;
  if (url.includes('://')) return url;
  return protocol === 'http' ? `https://${url}` : url;
}

const named = (tunnel: string | undefined) => (tunnel === undefined ? '' : `[${tunnel}] `);

export function agentConsole(options: AgentConsoleOptions): AgentConsole {
  const { out } = options;
  const now = options.now ?? (() => new Date());
  const wanted = options.format ?? 'auto';
  const format: 'text' | 'json' = wanted === 'auto' ? (out.isTTY === true ? 'text' : 'json') : wanted;
  const level = options.level ?? (format === 'text' ? 'warn' : 'info');
  // The agent adds its own `component` and `agent` bindings (a second `component` here would print the key twice).
  const base = { pid: process.pid };
  const logger =
    format === 'json'
      ? pino({ level, base, timestamp: pino.stdTimeFunctions.isoTime }, { write: (line: string) => void out.write(line) })
      : pino({ level, base }, { write: (line: string) => void out.write(textLine(line, now)) });
  return {
    format,
    logger,
    forwarding(welcome, protocol, target, transport, tunnel) {
      out.write(`${named(tunnel)}Forwarding ${publicAddress(welcome, protocol)} -> ${target} (${transport} transport)\n`);
    },
    reconnecting(info, tunnel) {
      // JSON mode: the agent's own `reconnecting` log line says it, with the same fields.
      if (format === 'text') out.write(`${named(tunnel)}Reconnecting in ${(info.delayMs / 1000).toFixed(1)} s (attempt ${info.attempt}): ${info.reason}\n`);
    },
  };
}
