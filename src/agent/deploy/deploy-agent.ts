// `edge agent deploy`: an agent that serves its application's endpoint from whichever release is live, and takes its
// deployment orders on the control stream the edge opens on the tunnel (src/edge/deploy-channel.ts).
//
// The tunnel, reconnects and refusals are the ordinary agent's (src/agent/agent.ts); this module only decides where
// each stream goes: the control stream to the Deployer, visitors' requests to the live release's port, held by a
// lease for the life of the stream so the Deployer stops an old release only once nothing runs on it.
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { Value } from '@sinclair/typebox/value';
import {
  CONTROL_STREAM_HEADER,
  CONTROL_STREAM_PATH,
  EdgeControlMessageSchema,
  MAX_CONTROL_LINE_BYTES,
  type AgentControlEvent,
} from '../../shared/deploy.ts';
import { createLogger, type Logger } from '../../shared/log.ts';
import type { Welcome } from '../../shared/tunnel/protocol.ts';
import { Agent, type AgentOptions } from '../agent.ts';
import { createHttpForwarder, type HttpForwarder } from '../forward-http.ts';
import { createStreamForwarder } from '../forward-stream.ts';
import { parseTarget } from '../target.ts';
import { Deployer, type DeployerOptions } from './deployer.ts';

export interface DeployAgentOptions extends Omit<AgentOptions, 'target' | 'streams' | 'application' | 'protocol' | 'dataConnections' | 'endpoint'> {
  /** The application's uuid (`edge agent deploy <uuid>`). */
  application: string;
  /** Where releases and the agent's state live (`--dir`). */
  dir: string;
  /** The Deployer's limits (build and health time limits, grace, releases kept). */
  deployer?: Omit<DeployerOptions, 'dir' | 'report' | 'log'>;
  /** Events kept while no control stream is open, log lines shed first beyond it (default 1,000). */
  maxPendingEvents?: number;
}

/**
 * One release's forwarders, opened when it first serves. Once the switch moved past the release they close, but only
 * after the last stream on them ended: closing destroys the pool, and with it any request still running there.
 */
interface ReleaseForwarders {
  http: HttpForwarder;
  connect: (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void;
  streams: number;
  retired: boolean;
}

export class DeployAgent {
  readonly agent: Agent;
  readonly deployer: Deployer;
  private readonly logger: Logger;
  private control: ServerHttp2Stream | null = null;
  private readonly pending: AgentControlEvent[] = [];
  private readonly maxPending: number;
  private readonly forwarders = new Map<number, ReleaseForwarders>();
  private readonly stopSwitchWatch: () => void;

  constructor(options: DeployAgentOptions) {
    this.logger = (options.logger ?? createLogger('silent')).child({ component: 'deploy', application: options.application });
    this.maxPending = options.maxPendingEvents ?? 1_000;
    this.deployer = new Deployer({
      ...options.deployer,
      dir: options.dir,
      report: (event) => this.report(event),
      log: (line) => this.logger.info(line),
    });
    const { application, dir: _dir, deployer: _limits, maxPendingEvents: _max, ...agentOptions } = options;
    this.agent = new Agent({ ...agentOptions, protocol: 'http', application, streams: (stream, headers) => this.serve(stream, headers) });
    // A release the switch left behind gets no new streams; its pools close once what runs on them finished.
    this.stopSwitchWatch = this.deployer.onSwitch((port) => {
      for (const [p, f] of this.forwarders) {
        if (p === port) continue;
        f.retired = true;
        this.forwarders.delete(p);
        if (f.streams === 0) f.http.close();
      }
    });
  }

  /** Restarts the release that was live before (if any), then connects; resolves with the first welcome. */
  async start(): Promise<Welcome> {
    await this.deployer.start();
    return this.agent.start();
  }

  async stop(graceMs = 5_000): Promise<void> {
    this.control?.end();
    await this.agent.stop(graceMs);
    this.stopSwitchWatch();
    for (const f of this.forwarders.values()) f.http.close();
    this.forwarders.clear();
    await this.deployer.close();
  }

  private serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    if (headers[':method'] === 'POST' && headers[':path'] === CONTROL_STREAM_PATH && headers[CONTROL_STREAM_HEADER] === '1') return this.openControl(stream);
    const lease = this.deployer.acquire();
    if (!lease) {
      stream.respond({ ':status': 503, 'content-type': 'text/plain; charset=utf-8', 'retry-after': '5' });
      return void stream.end('No release of this application is live yet.\n');
    }
    // Held until the stream is done either way, so the release it reached is not stopped under it.
    const f = this.forwardersFor(lease.port);
    f.streams++;
    stream.once('close', () => {
      lease.release();
      if (--f.streams === 0 && f.retired) f.http.close();
    });
    if (headers[':method'] === 'CONNECT') f.connect(stream, headers);
    else f.http.handle(stream, headers);
  }

  private forwardersFor(port: number): ReleaseForwarders {
    let f = this.forwarders.get(port);
    if (!f) {
      const target = parseTarget('http', `127.0.0.1:${port}`);
      f = { http: createHttpForwarder({ target, logger: this.logger }), connect: createStreamForwarder({ target, logger: this.logger }), streams: 0, retired: false };
      this.forwarders.set(port, f);
    }
    return f;
  }

  /** The edge's control stream: its messages drive the Deployer; this agent's events go back on it. */
  private openControl(stream: ServerHttp2Stream): void {
    stream.respond({ ':status': 200, 'content-type': 'application/x-ndjson' });
    this.control?.end(); // a newer tunnel's stream replaces an older one
    this.control = stream;
    let buffered = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      buffered += chunk;
      let nl: number;
      while ((nl = buffered.indexOf('\n')) !== -1) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (line.trim() !== '') this.onMessage(line);
      }
      if (buffered.length > MAX_CONTROL_LINE_BYTES) {
        this.logger.warn('control line over the limit from the edge; closing the control stream');
        stream.close();
      }
    });
    stream.on('error', (err) => this.logger.debug({ err: err.message }, 'control stream error'));
    stream.once('close', () => {
      if (this.control === stream) this.control = null;
    });
    // Events from while no stream was open (a reconnect) go first, in order.
    for (const event of this.pending.splice(0)) this.write(stream, event);
  }

  private onMessage(line: string): void {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      return void this.logger.warn('control message from the edge is not JSON; ignored');
    }
    if (!Value.Check(EdgeControlMessageSchema, message)) return void this.logger.warn('control message from the edge refused by the schema; ignored');
    if (message.type === 'application') this.deployer.apply(message.application);
    else {
      this.logger.warn({ deployment: message.deployment_id, code: message.code, reason: message.message }, 'the control plane refused an event of this deployment');
      this.deployer.refused(message.deployment_id, message.code);
    }
  }

  private report(event: AgentControlEvent): void {
    const stream = this.control;
    if (stream && !stream.destroyed && stream.writable) return this.write(stream, event);
    this.pending.push(event);
    if (this.pending.length > this.maxPending) {
      const i = this.pending.findIndex((e) => e.type === 'log');
      this.pending.splice(i === -1 ? 0 : i, 1);
    }
  }

  private write(stream: ServerHttp2Stream, event: AgentControlEvent): void {
    stream.write(`${JSON.stringify(event)}\n`);
  }
}
