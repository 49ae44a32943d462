// A visitor's view of an edge in tests: one HTTP(S) request, one WebSocket upgrade or round trip to a listener on 127.0.0.1,
// naming the endpoint by Host (and by SNI over TLS; the development certificate is accepted).
import http from 'node:http';
import https from 'node:https';
import { WebSocket } from 'ws';

export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface VisitOptions {
  method?: string;
  body?: string;
  headers?: Record<string, string>;
  secure?: boolean;
}

/** One request on a fresh connection, the whole answer read as text. */
export function visit(port: number, host: string, path: string, options: VisitOptions = {}): Promise<Reply> {
  const { method = 'GET', body, headers = {}, secure = false } = options;
  return new Promise((resolve, reject) => {
    const request = { host: '127.0.0.1', port, path, method, headers: { host, ...headers }, agent: false, servername: host, rejectUnauthorized: false };
    const req = (secure ? https : http).request(request, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

export interface Upgrade {
  status: number;
  /** x-edge-error of a refused upgrade. */
  code?: string;
  /** The service's first message, JSON: the test services echo the message and the headers they received. */
  echo?: { message: string; headers: http.IncomingHttpHeaders };
}

/** A WebSocket upgrade through the edge that sends `ping`: 101 with the first echo, or the status the edge refused it with. */
export function wsUpgrade(port: number, host: string, path: string, options: Pick<VisitOptions, 'headers' | 'secure'> = {}): Promise<Upgrade> {
  const { headers = {}, secure = false } = options;
  // servername: the SNI naming the endpoint (passed through to tls.connect; not in ws's option type).
  const tls = secure ? { servername: host, rejectUnauthorized: false } : {};
  const ws = new WebSocket(`${secure ? 'wss' : 'ws'}://127.0.0.1:${port}${path}`, { headers: { host, ...headers }, ...tls } as WebSocket.ClientOptions);
  return new Promise((resolve, reject) => {
    ws.on('open', () => ws.send('ping'));
    ws.on('message', (m) => {
      resolve({ status: 101, echo: JSON.parse(String(m)) });
      ws.close();
    });
    ws.on('unexpected-response', (_req, res) => {
      resolve({ status: res.statusCode!, code: res.headers['x-edge-error'] as string | undefined });
      res.resume();
    });
    ws.on('error', reject);
  });
}

/** One WebSocket round trip through the edge: sends `message`, resolves with the first reply. */
export function wsRoundTrip(port: number, host: string, path: string, message: string): Promise<string> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, { headers: { host } });
  return new Promise<string>((resolve, reject) => {
    ws.on('open', () => ws.send(message));
    ws.on('message', (m) => {
      resolve(String(m));
      ws.close();
    });
    ws.on('error', reject);
    ws.on('unexpected-response', (_req, res) => reject(new Error(`upgrade answered ${res.statusCode} ${res.headers['x-edge-error'] ?? ''}`)));
  });
}
