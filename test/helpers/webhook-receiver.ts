// A real webhook receiver for alert tests: an HTTP server on an ephemeral loopback port that keeps every delivery
// (headers and raw body), answers with statuses a test queues, can hold answers until released, and checks signatures.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  headers: IncomingHttpHeaders;
  raw: string;
  body: any;
}

export interface WebhookReceiver {
  url: string;
  port: number;
  deliveries: Delivery[];
  /** Statuses for the next answers, in order; 204 once they are used up. */
  answer(...statuses: number[]): void;
  /** Holds every answer until release() (a slow receiver). */
  hold(): void;
  release(): void;
  close(): Promise<void>;
}

/** Whether a delivery carries a valid X-Edge-Signature for `secret`: HMAC-SHA256 of "<X-Edge-Timestamp>.<raw body>". */
export function signatureValid(delivery: Delivery, secret: string): boolean {
  const timestamp = delivery.headers['x-edge-timestamp'];
  const signature = delivery.headers['x-edge-signature'];
  if (typeof timestamp !== 'string' || typeof signature !== 'string' || !signature.startsWith('sha256=')) return false;
  const expected = createHmac('sha256', secret).update(`${timestamp}.${delivery.raw}`).digest();
  const got = Buffer.from(signature.slice('sha256='.length), 'hex');
  return got.length === expected.length && timingSafeEqual(got, expected);
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const deliveries: Delivery[] = [];
  const queued: number[] = [];
  let held: Array<() => void> | null = null;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
      deliveries.push({ headers: req.headers, raw, body });
      const status = queued.shift() ?? 204;
      const respond = () => res.writeHead(status).end();
      if (held) held.push(respond);
      else respond();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hooks/alerts`,
    port,
    deliveries,
    answer: (...statuses) => queued.push(...statuses),
    hold: () => {
      held ??= [];
    },
    release: () => {
      const waiting = held ?? [];
      held = null;
      for (const respond of waiting) respond();
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
