// Forwarding a visitor's request to one agent: on a data connection (HTTP/1.1, the origin path's handler) when one is
// free, else on an HTTP/2 stream of the tunnel; bodies streamed under backpressure either way, never held whole.
import { request, type OutgoingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { ClientHttp2Stream, IncomingHttpHeaders, IncomingHttpStatusHeader } from 'node:http2';
import { isConnectionSpecific, toHttp1ResponseHeaders } from '../../shared/tunnel/headers.ts';
import { cancelStream } from '../../shared/tunnel/reset.ts';
import type { AgentSession } from '../tunnels/registry.ts';
import type { RelayTarget } from '../relay/peers.ts';
import { sendEdgeError } from '../http/pages.ts';
import { originRequestHeaders, tunnelRequestHeaders, type ForwardRequest } from '../http/proxy-headers.ts';
import type { Dispatcher } from 'undici';
import { NoDataConnectionError, type DataConnections } from '../tunnels/data-connections.ts';
import { UpstreamExchange, upstreamBody, type ExchangeHooks } from './exchange.ts';
import { finalStatus } from './status.ts';
import { relayUpgrade, responseOnSocket, upgradeRequestHeaders } from './upgrade.ts';


/** Where a request goes: an agent connected here, or another edge that holds one (src/edge/relay). */
export type AgentTarget = AgentSession | RelayTarget;

/** Methods a client may retry on its own (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

/**
 * Forwards one visitor request to the agent of `session`: on a data connection when the session has one free (plain
 * HTTP/1.1 the agent splices to its local service: docs/tunnels.md "Data connections"), otherwise on an HTTP/2
 * stream of the tunnel itself.
 */
export function forwardToAgent(session: AgentTarget, f: ForwardRequest): void {
  const data = session.data;
  if (data !== null && data.hasCapacity() && f.method !== 'CONNECT') forwardOnDataConnection(session, data, f);
  else void forwardOnStream(session, f);
}

/**
 * One exchange on a data connection, with the origin path's handler. A request that met no connection (none came
 * within the wait) or found its kept-alive connection closed before any answer (the local service closed it just as
 * it was reused; only for a bodyless request a client may retry on its own) is sent again over an HTTP/2 stream.
 */
function forwardOnDataConnection(session: AgentTarget, data: DataConnections, f: ForwardRequest): void {
  const body = upstreamBody(f);
  const exchange = new UpstreamExchange(f, 'agent_error', new DataConnectionHooks(session, data, f, body === null));
  data.dispatch({ path: f.target, method: f.method as Dispatcher.HttpMethod, headers: originRequestHeaders(f.req, f, data.hostHeader ?? f.authority), body }, exchange);
}

/**
 * The hooks of an exchange on a data connection, as methods of one object rather than closures made per request:
 * under tsx (esbuild keepNames) each closure in an object literal got a property definition at its creation, ~1.9 %
 * of the edge's CPU on the tunnel path.
 */
class DataConnectionHooks implements ExchangeHooks {
  constructor(
    private readonly session: AgentTarget,
    private readonly data: DataConnections,
    private readonly f: ForwardRequest,
    private readonly bodyless: boolean,
  ) {}

  settled(): void {
    this.data.settled();
  }

  recover(err: Error): boolean {
    const unsent = err instanceof NoDataConnectionError;
    const stale = this.bodyless && IDEMPOTENT.has(this.f.method) && isSocketClosed(err);
    if (!unsent && !stale) return false;
    void forwardOnStream(this.session, this.f);
    return true;
  }
}

function isSocketClosed(err: Error & { code?: string }): boolean {
  return err.code === 'UND_ERR_SOCKET' || err.code === 'ECONNRESET';
}

/** Resolves when the exchange is over (answered, failed or abandoned by the visitor). */
export function forwardOnStream(session: AgentTarget, f: ForwardRequest): Promise<void> {
  const { req, res } = f;
  return new Promise((resolve) => {
    // RFC 9112 §6.3: a request with neither Content-Length nor Transfer-Encoding has no body. END_STREAM then goes
    // with the HEADERS frame, and the request side needs no pipe from the visitor.
    const length = req.headers['content-length'];
    // A body a stage read whole (webhook verification) goes from memory instead.
    const bodyless = f.body !== undefined ? f.body.length === 0 : req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0');
    let stream: ClientHttp2Stream;
    try {
      stream = session.request(tunnelRequestHeaders(req, f, f.method, f.target), { endStream: bodyless });
    } catch {
      sendEdgeError(res, 'agent_error', req.headers.accept, 'the agent connection is closing');
      return resolve();
    }
    let gone = false;
    stream.on('response', (headers) => {
      const status = finalStatus(headers[':status']);
      try {
        if (status === null) throw new Error(`:status ${String(headers[':status'])} is not a final status (200-599)`);
        res.writeHead(status, http1ResponseFields(headers));
      } catch (err) {
        // An answer the edge cannot relay (a bad status, a field Node refuses): writeHead threw before writing, so
        // the visitor gets a 502, and the stream is reset so the agent stops sending. Thrown on, it would end the
        // process: nothing catches in a stream listener.
        gone = true;
        sendEdgeError(res, 'agent_error', req.headers.accept, `the agent's answer could not be relayed: ${(err as Error).message}`);
        cancelStream(stream);
        return;
      }
      stream.pipe(res);
    });
    stream.on('trailers', (trailers) => res.addTrailers(toHttp1ResponseHeaders(trailers) as Record<string, string>));
    stream.on('error', (err: Error & { code?: string }) => {
      if (gone) return;
      // A relayed request whose edge did not begin to answer in time (src/edge/relay/peers.ts) is a timeout.
      if (!res.headersSent) sendEdgeError(res, err.code === 'EDGE_RELAY_TIMEOUT' ? 'agent_timeout' : 'agent_error', req.headers.accept);
      else res.destroy();
    });
    stream.on('close', () => {
      if (!gone && !res.headersSent) sendEdgeError(res, 'agent_error', req.headers.accept);
      resolve();
    });
    // The visitor went away: cancel the stream so the agent stops working for nobody, and so that a body cut short
    // never reaches the local service looking complete (see shared/tunnel/reset.ts).
    res.on('close', () => {
      if (res.writableFinished || stream.closed) return;
      gone = true;
      cancelStream(stream);
    });
    if (!bodyless) {
      if (f.body !== undefined) stream.end(f.body);
      else req.pipe(stream);
    }
  });
}

/**
 * The agent's response fields for res.writeHead, reusing the object Node built for the 'response' event instead of
 * copying it: `:status` goes, and so would connection-specific fields, which HTTP/2 forbids and nghttp2 already
 * refuses (RFC 9113 §8.2.2), so the loop finds none in practice.
 */
function http1ResponseFields(headers: IncomingHttpHeaders & IncomingHttpStatusHeader): OutgoingHttpHeaders {
  for (const name in headers) {
    if (name.charCodeAt(0) === 58 /* ':' */ || isConnectionSpecific(name)) delete headers[name];
    else if (name === 'te' && String(headers.te).toLowerCase() !== 'trailers') delete headers.te;
  }
  return headers as OutgoingHttpHeaders;
}

/**
 * A visitor's WebSocket upgrade, carried over a CONNECT stream to the agent, which connects it to its local service
 * (src/agent/forward-stream.ts: bytes, nothing more). Once the agent answers 200, the upgrade request goes out on
 * the stream through Node's HTTP client (relayUpgrade): only the service's 101 turns the visitor's connection into
 * a byte pipe; any other answer is relayed as one response and the connection closed.
 */
export function forwardUpgrade(session: AgentTarget, f: Omit<ForwardRequest, 'res'>, socket: Duplex, head: Buffer): void {
  const { req } = f;
  let stream: ClientHttp2Stream;
  try {
    stream = session.connect(f.authority);
  } catch {
    return sendEdgeError(responseOnSocket(req, socket), 'agent_error', req.headers.accept, 'the agent connection is closing');
  }
  // A reset, not stream.close(CANCEL), whose END_STREAM would reach the agent first as a clean FIN.
  const teardown = () => {
    if (!stream.destroyed) cancelStream(stream);
  };
  let relaying = false;
  const refuse = () => {
    if (relaying) return;
    relaying = true;
    if (!socket.destroyed) sendEdgeError(responseOnSocket(req, socket), 'agent_error', req.headers.accept);
    teardown();
  };
  stream.on('response', (h) => {
    // A non-2xx answer to CONNECT is the agent's refusal (it could not reach the local service).
    if (Number(h[':status']) !== 200) return refuse();
    relaying = true;
    const out = request({
      createConnection: () => stream as unknown as Socket,
      method: 'GET',
      path: f.target,
      headers: upgradeRequestHeaders(f, f.authority),
      setHost: false,
    });
    relayUpgrade(out, { req, socket, head, failure: 'agent_error', teardown });
  });
  stream.on('error', refuse);
  stream.on('close', refuse);
  socket.on('error', () => socket.destroy());
  socket.on('close', () => {
    if (!relaying) teardown();
  });
}
