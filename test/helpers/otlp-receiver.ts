// A real OTLP/HTTP trace receiver for tests: an HTTP server on an ephemeral port taking POST /v1/traces in the JSON
// encoding (what @opentelemetry/exporter-trace-otlp-http sends), flattening every span it is sent for assertions.
import http from 'node:http';
import { EventEmitter, once } from 'node:events';
import type { AddressInfo } from 'node:net';

type AnyValue = { stringValue?: string; intValue?: number | string; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };

/** One received span, with attributes (its own, its resource's, its events') as plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  kind: number;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  status: number;
  attributes: Record<string, string | number | boolean>;
  resource: Record<string, string | number | boolean>;
  events: { name: string; attributes: Record<string, string | number | boolean> }[];
  /** The request bodies' raw JSON this span came in (for "appears nowhere" checks). */
  raw: string;
}

export interface OtlpReceiver {
  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT (exports go to <url>/v1/traces). */
  url: string;
  spans: ReceivedSpan[];
  /** Every request body received, raw. */
  bodies: string[];
  /** Resolves with the first span `match` accepts, at once if received already, else when one arrives. */
  waitFor(match: (s: ReceivedSpan) => boolean): Promise<ReceivedSpan>;
  close(): Promise<void>;
}

function plain(v: AnyValue): string | number | boolean {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  return JSON.stringify(v);
}

function attrs(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const kv of list ?? []) out[kv.key] = plain(kv.value);
  return out;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  const events = new EventEmitter();
  const server = http.createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (text += d));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).startsWith('application/json')) {
        res.writeHead(415).end();
        return;
      }
      bodies.push(text);
      const body = JSON.parse(text) as { resourceSpans?: { resource?: { attributes?: KeyValue[] }; scopeSpans?: { spans?: any[] }[] }[] };
      for (const rs of body.resourceSpans ?? []) {
        const resource = attrs(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            const span: ReceivedSpan = {
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? '',
              name: s.name,
              kind: s.kind,
              status: s.status?.code ?? 0,
              attributes: attrs(s.attributes),
              resource,
              events: (s.events ?? []).map((e: { name: string; attributes?: KeyValue[] }) => ({ name: e.name, attributes: attrs(e.attributes) })),
              raw: text,
            };
            spans.push(span);
            events.emit('span', span);
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    spans,
    bodies,
    async waitFor(match) {
      for (;;) {
        const found = spans.find(match);
        if (found) return found;
        await once(events, 'span');
      }
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
