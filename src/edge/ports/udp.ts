// A dedicated UDP port: datagrams from one visitor address are one flow, carried length-prefixed on one CONNECT
// stream to a udp agent of the endpoint, replies sent back to that address; flows end when idle (docs/tunnels.md).
import dgram from 'node:dgram';
import net from 'node:net';
import http2, { type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { DatagramDecoder, encodeDatagram } from '../../shared/tunnel/datagram.ts';
import type { AgentSession } from '../tunnels/registry.ts';
import type { AgentTarget } from '../forward/agent.ts';
import { openStream, PortListener, serving } from './listener.ts';

const { NGHTTP2_CANCEL, NGHTTP2_NO_ERROR } = http2.constants;

interface Flow {
  /** An agent here, or the relay to another edge's (whose own flows end when that agent drains there). */
  session: AgentTarget;
  stream: ClientHttp2Stream;
}

export class UdpListener extends PortListener {
  private socket: dgram.Socket | null = null;
  private readonly flows = new Map<string, Flow>();
  private dropped = 0;
  private lastDropLog = 0;

  protected bind(done: (err: NodeJS.ErrnoException | null) => void): void {
    const socket = dgram.createSocket(net.isIP(this.settings.host) === 6 ? 'udp6' : 'udp4');
    const onError = (err: NodeJS.ErrnoException) => {
      try {
        socket.close();
      } catch {
        // a socket whose bind failed may already count as closed
      }
      done(err);
    };
    socket.once('error', onError);
    socket.bind(this.port, this.settings.host, () => {
      socket.off('error', onError);
      if (this.closed) return void socket.close();
      socket.on('error', (err) => this.log.warn({ err, port: this.port }, 'dedicated udp socket error'));
      socket.on('message', (message, rinfo) => this.receive(message, rinfo));
      this.socket = socket;
      done(null);
    });
  }

  protected unbind(): void {
    this.socket?.close();
    this.socket = null;
    // Replies can only leave from the socket the visitor wrote to; with it gone a flow has nothing left to do.
    this.cut();
  }

  cut(): void {
    for (const flow of this.flows.values()) flow.stream.close(NGHTTP2_CANCEL);
    this.flows.clear();
  }

  idle(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * Ends the flows carried by a session that drains (agent stopping, replaced, edge closing it). A TCP connection
   * has a natural end and may finish on a draining session; a UDP flow has none and would hold the agent's
   * shutdown for its whole idle time. The visitor's next datagram opens a new flow on another agent.
   */
  endFlowsOf(session: AgentSession): void {
    for (const [key, flow] of this.flows) {
      if (flow.session !== session) continue;
      this.flows.delete(key);
      flow.stream.close(NGHTTP2_NO_ERROR);
    }
  }

  private drop(reason: string, rinfo: dgram.RemoteInfo): void {
    this.dropped++;
    // Under a flood this runs per datagram: log at most once a second, with the running count.
    const now = Date.now();
    if (now - this.lastDropLog < 1_000) return;
    this.lastDropLog = now;
    this.log.debug({ endpoint: this.endpoint, port: this.port, reason, from: `${rinfo.address}:${rinfo.port}`, dropped: this.dropped }, 'udp datagram dropped');
  }

  private receive(message: Buffer, rinfo: dgram.RemoteInfo): void {
    // Unique per visitor: the port never contains ':', so the last one splits address and port unambiguously.
    const key = `${rinfo.address}:${rinfo.port}`;
    let flow = this.flows.get(key);
    if (flow && (flow.stream.destroyed || flow.stream.writableEnded)) {
      // Ended by the agent (idle, reset) but its 'close' has not run yet: this datagram starts a new flow.
      this.flows.delete(key);
      flow = undefined;
    }
    if (!flow) {
      const endpoint = this.settings.config.endpoint(this.endpoint);
      if (!serving(endpoint)) return this.drop('endpoint not serving', rinfo);
      // Each flow holds a stream and an agent-side socket; a spoofed-source flood must not exhaust either. New
      // flows are refused rather than old ones evicted, so established visitors keep working through a flood.
      if (this.flows.size >= this.settings.maxUdpFlows) return this.drop('flow table full', rinfo);
      const opened = openStream(this.settings, endpoint, 'udp', this.port);
      if (!opened) return this.drop('no udp agent', rinfo);
      flow = this.startFlow(key, opened.session, opened.stream, rinfo);
    }
    // Datagram semantics: a stream the agent reads slowly drops datagrams instead of buffering them without bound.
    // Writing before the 200 is fine: the agent reads them once its local socket is up, or the flow fails whole.
    if (flow.stream.writableLength > this.settings.udpQueueBytes) return this.drop('flow congested', rinfo);
    flow.stream.write(encodeDatagram(message));
  }

  private startFlow(key: string, session: AgentTarget, stream: ClientHttp2Stream, rinfo: dgram.RemoteInfo): Flow {
    const flow: Flow = { session, stream };
    this.flows.set(key, flow);
    const { address, port } = rinfo;
    stream.on('error', () => {});
    stream.once('response', (headers: IncomingHttpHeaders) => {
      if (Number(headers[':status']) !== 200) {
        this.log.debug({ endpoint: this.endpoint, status: headers[':status'] }, 'agent refused a udp flow');
        return void stream.close(NGHTTP2_CANCEL);
      }
      // Every reply on this stream goes back to the one visitor address that opened it.
      const decoder = new DatagramDecoder((payload) => {
        this.socket?.send(payload, port, address, () => {}); // send errors (unreachable visitor) lose one datagram
      });
      stream.on('data', (chunk: Buffer) => decoder.push(chunk));
      stream.once('end', () => stream.end()); // the agent ended its side (its own idle timer): end ours too
    });
    // One timer per stream, reset by Node on every read and write: no datagram either way for udpIdleMs ends it.
    stream.setTimeout(this.settings.udpIdleMs, () => stream.close(NGHTTP2_NO_ERROR));
    stream.once('close', () => {
      // The next datagram from this visitor opens a fresh flow (possibly to another agent).
      if (this.flows.get(key) === flow) this.flows.delete(key);
    });
    return flow;
  }
}
