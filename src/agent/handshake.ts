// The agent's side of one tunnel attempt, whichever transport carries it: what an attempt shares with its session,
// how it ends (Outcome), the hello it sends and how it reads the edge's answer (docs/tunnels.md "Connection").
import {
  PROTOCOL_VERSION,
  isRetryableRefusal,
  parseEdgeReply,
  type GoAwayReason,
  type Hello,
  type Welcome,
} from '../shared/tunnel/protocol.ts';
import type { TunnelLink } from '../shared/tunnel/transport.ts';
import type { TunnelTransport } from '../shared/tunnel/raw.ts';
import type { AgentSettings } from './options.ts';

/** The edge refused this agent (or stopped it later) in a way retrying cannot fix. */
export class TunnelRefusedError extends Error {
  override name = 'TunnelRefusedError';
  constructor(
    /** The refusal code (`unauthorized`, `region_not_allowed`, ... see docs/tunnels.md). */
    readonly code: string,
    message: string,
    /** The WebSocket close code, when the refusal came as one. */
    readonly closeCode?: number,
  ) {
    super(message);
  }
}

export type Outcome = { fatal: TunnelRefusedError } | { fatal?: undefined; reason: string; healthy: boolean; connected: boolean };
/** A raw attempt whose upgrade was not answered with 101 `edge-tunnel/2` (`status` when an HTTP answer came). */
export type Unsupported = { unsupported: string; status?: number };

/** What one attempt shares between its transport's handshake and the HTTP/2 session after it. */
export interface AttemptState {
  welcomed: boolean;
  connectedAt: number;
  lastError: string;
  goaway: GoAwayReason | null;
  finish(outcome: Outcome): void;
}

/** What a transport's dial needs of the agent: its settings, where to hang the abort, the hello, the reply handler. */
export interface DialContext {
  readonly o: AgentSettings;
  /** Sets what cuts the connection being dialled (stop() calls it). */
  setAbort(abort: () => void): void;
  hello(transport: TunnelTransport): Hello;
  /**
   * The edge's answer to the hello: a refusal ends the attempt, a welcome opens the link (synchronously: the edge's
   * HTTP/2 bytes follow the welcome) and serves it until it closes.
   */
  onReply(state: AttemptState, data: Buffer, transport: TunnelTransport, openLink: () => TunnelLink): void;
}

/** A promise for one attempt, with the state its handshake and session share. */
export function attempt<T>(run: (state: AttemptState, resolve: (value: T | Outcome) => void) => void): Promise<T | Outcome> {
  return new Promise((resolve) => {
    let settled = false;
    const state: AttemptState = {
      welcomed: false,
      connectedAt: 0,
      lastError: '',
      goaway: null,
      finish: (outcome) => {
        if (settled) return;
        settled = true;
        resolve(outcome);
      },
    };
    run(state, (value) => {
      if (settled) return;
      settled = true;
      resolve(value);
    });
  });
}

/** The hello for one attempt. Data connections are offered on the raw transport only: a network that passes only WebSockets drops them. */
export function helloFor(o: AgentSettings, endpoint: string | undefined, transport: TunnelTransport): Hello {
  return {
    type: 'hello',
    version: PROTOCOL_VERSION,
    api_key: o.apiKey,
    ...(endpoint !== undefined ? { endpoint } : {}),
    ...(o.application !== undefined ? { application: o.application } : {}),
    protocol: o.protocol,
    agent_id: o.agentId,
    tags: o.tags,
    client: o.client,
    ...(transport === 'raw' && o.dataSpares > 0 ? { data_connections: o.hostHeader !== undefined ? { host_header: o.hostHeader } : {} } : {}),
  };
}

/**
 * Reads the edge's answer to the hello: the welcome, or null when the attempt ended (a refusal finishes it with
 * its outcome; an invalid frame leaves the reason in state.lastError for the caller to cut the connection).
 */
export function readReply(state: AttemptState, data: Buffer): Welcome | null {
  const reply = parseEdgeReply(data);
  if (!reply.ok) {
    state.lastError = `invalid answer from the edge: ${reply.message}`;
    return null;
  }
  if (reply.value.type === 'refused') {
    const { code, message } = reply.value;
    // The frame is the authoritative reason (the WebSocket close code that follows only repeats it).
    if (isRetryableRefusal(code)) state.finish({ reason: `refused: ${code}: ${message}`, healthy: false, connected: false });
    else state.finish({ fatal: new TunnelRefusedError(code, message) });
    return null;
  }
  return reply.value;
}
