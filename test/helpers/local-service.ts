// The service behind an endpoint in edge integration tests (what an agent or an origin forwards to): a real HTTP server
// on an ephemeral port with WebSockets on the same port, recording what reached it, closed with every connection.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

export interface LocalService<S> {
  port: number;
  /** What each request recorded, in the order the service recorded it. */
  seen: S[];
  close(): Promise<void>;
}

/**
 * Starts a service on 127.0.0.1: `answer` answers each request and passes `record` what the test wants to see of it
 * (when it chooses: on arrival, or once the body is read); `onWebSocket` serves each accepted WebSocket.
 */
export async function startLocalService<S>(
  answer: (req: http.IncomingMessage, res: http.ServerResponse, record: (entry: S) => void) => void,
  onWebSocket: (ws: WebSocket, req: http.IncomingMessage) => void,
): Promise<LocalService<S>> {
  const seen: S[] = [];
  const record = (entry: S) => void seen.push(entry);
  const server = http.createServer((req, res) => answer(req, res, record));
  const wss = new WebSocketServer({ server });
  wss.on('connection', onWebSocket);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () =>
      new Promise<void>((r) => {
        wss.close();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** What the echo service saw of a request: the answer's JSON body, and the entry it records. */
export interface Echoed {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
}

/**
 * A service that answers every request 200 with what it received (method, URL and headers as JSON, with a length),
 * once the body has been read, and echoes each WebSocket message with the upgrade's headers.
 */
export function startEchoService(): Promise<LocalService<Echoed>> {
  return startLocalService<Echoed>(
    (req, res, record) => {
      req.resume();
      req.on('end', () => {
        const entry: Echoed = { method: req.method!, url: req.url!, headers: req.headers };
        record(entry);
        const text = JSON.stringify(entry);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      });
    },
    (ws, req) => ws.on('message', (m) => ws.send(JSON.stringify({ message: String(m), headers: req.headers }))),
  );
}
