// The control stream of deploying agents (`edge agent deploy`): the edge sends each one its application, and so its
// deployment order, whenever the feed changes it, and carries the agent's status and log events to the control API.
//
// The stream is one HTTP/2 request the edge opens on the tunnel (the edge is the HTTP/2 client there), NDJSON in both
// directions (src/shared/deploy.ts). Orders come from the feed, never from a call to this edge, so an agent that
// reconnects to any edge gets the order in force at once; events go to the control API with the agent's own key,
// in order, retried while the control plane is unreachable, and refusals come back to the agent as `event_refused`.
import type { ClientHttp2Stream } from 'node:http2';
import { Value } from '@sinclair/typebox/value';
import {
  AgentControlEventSchema,
  CONTROL_STREAM_HEADER,
  CONTROL_STREAM_PATH,
  MAX_CONTROL_LINE_BYTES,
  type AgentControlEvent,
  type AgentEventsAnswer,
  type AgentEventsBody,
  type ApplicationConfig,
  type EdgeControlMessage,
} from '../shared/deploy.ts';
import type { Logger } from '../shared/log.ts';
import type { EndpointCache } from './endpoint-cache.ts';
import type { AgentSession, TunnelRegistry } from './tunnels/registry.ts';

/** The control API's report route, as the edge calls it (src/main.ts: POST /v1/applications/{uuid}/agent-events). */
export interface DeployEventsClient {
  /**
   * Resolves with the HTTP status and, for a 200, one result per event; rejects when the control plane could not be
   * reached (the batch is then sent again).
   */
  report(apiKey: string, application: string, body: AgentEventsBody): Promise<{ status: number; answer?: AgentEventsAnswer }>;
}

export interface DeployChannelOptions {
  config: EndpointCache;
  registry: TunnelRegistry;
  client: DeployEventsClient | undefined;
  logger: Logger;
  /** Events waiting for the control plane beyond this are dropped, log lines first (default 2,000). */
  maxQueued?: number;
  /** Retry delays while the control plane does not answer (default 500 ms doubling to 30 s). */
  retry?: { initialMs: number; maxMs: number };
}

/** Events per call to the control API (its route takes at most 100). */
const BATCH = 100;

/** One deploying agent's control stream: what it was sent and what waits to go to the control plane. */
class Channel {
  private readonly queue: AgentControlEvent[] = [];
  private sending = false;
  private closed = false;
  private buffered = '';
  private delayMs: number;

  constructor(
    readonly session: AgentSession,
    readonly application: string,
    private readonly stream: ClientHttp2Stream,
    private readonly o: Required<Pick<DeployChannelOptions, 'maxQueued' | 'retry'>> & DeployChannelOptions,
    private readonly log: Logger,
  ) {
    this.delayMs = o.retry.initialMs;
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => this.read(chunk));
    stream.on('error', (err) => this.log.debug({ err: err.message }, 'control stream error'));
    stream.on('close', () => (this.closed = true));
  }

  send(message: EdgeControlMessage): void {
    if (this.closed || this.stream.destroyed || this.stream.writableEnded) return;
    this.stream.write(`${JSON.stringify(message)}\n`);
  }

  sendApplication(app: ApplicationConfig): void {
    this.send({ type: 'application', application: app });
  }

  end(): void {
    if (!this.stream.writableEnded) this.stream.end();
  }

  private read(chunk: string): void {
    this.buffered += chunk;
    let nl: number;
    while ((nl = this.buffered.indexOf('\n')) !== -1) {
      const line = this.buffered.slice(0, nl);
      this.buffered = this.buffered.slice(nl + 1);
      if (line.trim() !== '') this.accept(line);
    }
    // A line that never ends would grow without bound: the agent is broken, so its stream is cut.
    if (Buffer.byteLength(this.buffered) > MAX_CONTROL_LINE_BYTES) {
      this.log.warn({ bytes: this.buffered.length }, 'control line over the limit; closing the control stream');
      this.buffered = '';
      this.stream.close();
    }
  }

  private accept(line: string): void {
    let event: unknown;
    try {
      event = JSON.parse(line);
    } catch {
      return void this.log.warn('control line is not JSON; dropped');
    }
    if (!Value.Check(AgentControlEventSchema, event)) {
      const first = Value.Errors(AgentControlEventSchema, event).First();
      return void this.log.warn({ problem: first ? `${first.path || '/'}: ${first.message}` : 'invalid' }, 'control event refused by the schema; dropped');
    }
    this.queue.push(event);
    if (this.queue.length > this.o.maxQueued) this.shed();
    void this.flush();
  }

  /** Over the bound: the oldest log batch goes first; status and process events are what the deployment's state rests on. */
  private shed(): void {
    const i = this.queue.findIndex((e) => e.type === 'log');
    this.queue.splice(i === -1 ? 0 : i, 1);
    this.log.warn({ queued: this.queue.length }, 'deployment events waiting for the control plane over the limit; dropped the oldest');
  }

  /** Sends what waits, one batch at a time and in order; a batch that could not be delivered is sent again after a delay. */
  private async flush(): Promise<void> {
    if (this.sending) return;
    this.sending = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.slice(0, BATCH);
        const delivered = await this.deliver(batch);
        if (delivered) {
          this.queue.splice(0, batch.length);
          this.delayMs = this.o.retry.initialMs;
          continue;
        }
        // The tunnel is gone and the control plane does not answer: the agent sends its state again when it is back.
        if (this.closed) {
          this.log.warn({ dropped: this.queue.length }, 'control plane unreachable after the tunnel closed; deployment events dropped');
          this.queue.length = 0;
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, this.delayMs).unref());
        this.delayMs = Math.min(this.o.retry.maxMs, this.delayMs * 2);
      }
    } finally {
      this.sending = false;
    }
  }

  /** True when the control plane took the batch (accepting or refusing each event); false to try again. */
  private async deliver(batch: AgentControlEvent[]): Promise<boolean> {
    const grant = this.session.deploy!;
    if (!this.o.client) {
      this.log.warn('EDGE_CONTROL_URL is not set on this edge; deployment events cannot reach the control plane');
      return false;
    }
    let result: { status: number; answer?: AgentEventsAnswer };
    try {
      result = await this.o.client.report(grant.apiKey, this.application, { agent_id: this.session.agentId, events: batch });
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'control plane unreachable; deployment events will be sent again');
      return false;
    }
    if (result.status >= 500 || result.status === 429) return false;
    if (result.status !== 200 || !result.answer) {
      // 400, 401, 403, 404: this batch will never be taken (a revoked key, a deleted application); standing ends the tunnel.
      this.log.warn({ status: result.status }, 'the control plane refused a batch of deployment events');
      return true;
    }
    result.answer.results.forEach((r, i) => {
      const event = batch[i];
      if (r.ok || !event || event.type === 'process') return;
      this.send({ type: 'event_refused', deployment_id: event.deployment_id, code: r.code ?? 'refused', message: (r.message ?? '').slice(0, 1024) });
    });
    return true;
  }
}

/**
 * Opens a control stream to every deploying agent as it connects and keeps it told of its application. Returns a
 * function that stops following the feed (the streams end with their sessions).
 */
export function startDeployChannels(options: DeployChannelOptions): () => void {
  const o = { maxQueued: 2_000, retry: { initialMs: 500, maxMs: 30_000 }, ...options };
  const channels = new Set<Channel>();

  const onConnect = (session: AgentSession) => {
    const grant = session.deploy;
    if (!grant) return;
    const log = o.logger.child({ session: session.id, agent: session.agentId, application: grant.application });
    let stream: ClientHttp2Stream;
    try {
      stream = session.request({
        ':method': 'POST',
        ':path': CONTROL_STREAM_PATH,
        ':scheme': 'http',
        ':authority': session.endpoint.hostname,
        'content-type': 'application/x-ndjson',
        [CONTROL_STREAM_HEADER]: '1',
      });
    } catch (err) {
      return void log.warn({ err: (err as Error).message }, 'could not open the control stream');
    }
    const channel = new Channel(session, grant.application, stream, o, log);
    channels.add(channel);
    stream.once('close', () => channels.delete(channel));
    // A draining session takes no new streams and closes once its streams end: this one must not hold it open.
    session.once('draining', () => channel.end());
    const app = o.config.application(grant.application);
    if (app) channel.sendApplication(app);
  };

  const onApplication = (uuid: string, app: ApplicationConfig | null) => {
    if (!app) return; // the standing check ends the tunnel (src/edge/agent-auth.ts)
    for (const channel of channels) if (channel.application === uuid) channel.sendApplication(app);
  };

  o.registry.on('connect', onConnect);
  o.config.on('application', onApplication);
  return () => {
    o.registry.off('connect', onConnect);
    o.config.off('application', onApplication);
    for (const channel of channels) channel.end();
  };
}
