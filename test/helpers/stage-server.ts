// One compiled stage behind a real HTTP server, for stage tests: each request builds a context as the pipeline does
// and runs the stage; a request the stage lets through is answered 200 with what the stage decided, as JSON.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestContext, Stage } from '../../src/edge/pipeline/stage.ts';
import type { EndpointConfig } from '../../src/shared/snapshot.ts';

/** What a stage decided for a request it let through. */
export interface Passed {
  upstreamHeaders: Record<string, string>;
  dropHeaders: string[];
  dropCookie: string | string[] | null;
  /** The body a stage read whole (base64), or null when the stream would have been forwarded. */
  body: string | null;
}

export interface StageReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The stage's decisions when it answered 'next'. */
  passed?: Passed;
  text: string;
}

export interface StageServer {
  port: number;
  /** The stage in use; a test may swap it (a recompile) between requests. */
  stage: Stage;
  request(options?: { method?: string; path?: string; headers?: Record<string, string>; body?: string | Buffer; clientIp?: string }): Promise<StageReply>;
  close(): Promise<void>;
}

export interface StageServerOptions {
  /** Whether the stage sees the request as arriving over TLS (the server itself is plain HTTP); default false. */
  secure?: boolean;
}

export async function serveStage(stage: Stage, endpoint: EndpointConfig, options: StageServerOptions = {}): Promise<StageServer> {
  const server = http.createServer(async (req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const ctx: RequestContext = {
      req,
      res,
      endpoint,
      method: req.method ?? 'GET',
      host: endpoint.hostname,
      authority: endpoint.hostname,
      // The target split as the pipeline splits it (stage tests send normalised paths).
      path: q === -1 ? url : url.slice(0, q),
      query: q === -1 ? '' : url.slice(q + 1),
      // A test names the visitor's address in a header, as a trusted proxy would.
      clientIp: (req.headers['x-test-client-ip'] as string | undefined) ?? req.socket.remoteAddress ?? '',
      secure: options.secure ?? false,
      upstreamHeaders: {},
    };
    const verdict = await out.stage.run(ctx);
    if (verdict === 'done') return;
    req.resume();
    const passed: Passed = {
      upstreamHeaders: ctx.upstreamHeaders,
      dropHeaders: [...(ctx.dropHeaders ?? [])],
      dropCookie: ctx.dropCookie === undefined ? null : typeof ctx.dropCookie === 'string' ? ctx.dropCookie : [...ctx.dropCookie],
      body: ctx.body === undefined ? null : ctx.body.toString('base64'),
    };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(passed));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const out: StageServer = {
    port,
    stage,
    request({ method = 'GET', path = '/', headers = {}, body, clientIp } = {}) {
      return new Promise((resolve, reject) => {
        const all: Record<string, string> = { accept: 'application/json', ...headers };
        if (clientIp !== undefined) all['x-test-client-ip'] = clientIp;
        const req = http.request({ host: '127.0.0.1', port, method, path, headers: all, agent: false }, (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text, passed: res.statusCode === 200 ? (JSON.parse(text) as Passed) : undefined }));
        });
        // A stage may answer before reading the body and close the connection: the reply still arrives.
        req.on('error', (err) => ((err as NodeJS.ErrnoException).code === 'EPIPE' || (err as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(err)));
        req.end(body);
      });
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  return out;
}

/** An endpoint config with visitor auth off, to be spread with what a test needs. */
export { endpointConfig as baseEndpoint } from './endpoint-config.ts';
