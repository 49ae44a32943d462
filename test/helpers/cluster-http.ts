// HTTP as a cluster test speaks it: the control API with an API key, and a visitor's request to an edge's public port
// naming an endpoint's host. Shared by the tests that run control and edges as separate processes.
import http from 'node:http';

export interface Answer<T = any> {
  status: number;
  body: T;
  headers: Headers;
}

/** A client of the control API at `base()` (read when called: the port is known only once the node is up). */
export function controlApi(base: () => string, timeoutMs = 20_000) {
  return async (method: string, path: string, key: string, body?: unknown): Promise<Answer> => {
    const res = await fetch(`${base()}${path}`, {
      method,
      headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    });
    return { status: res.status, body: await res.json().catch(() => undefined), headers: res.headers };
  };
}

/** One visitor request to an edge's public port for `host`; a network error is an answer too (status 0, its message). */
export function sendToEdge(
  port: number,
  host: string,
  path: string,
  options: { method?: string; body?: Buffer | string; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers: { host, ...options.headers }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString() }));
      res.on('error', (err) => resolve({ status: 0, body: err.message }));
    });
    req.setTimeout(options.timeoutMs ?? 20_000, () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve({ status: 0, body: err.message }));
    req.end(options.body);
  });
}
