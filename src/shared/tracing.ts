// OpenTelemetry tracing for every role (edge, agent, worker), set up once from the standard OTEL_* variables and
// exported over OTLP/HTTP (JSON). With no endpoint set nothing is created: callers hold null and check only that.
import { ROOT_CONTEXT, SpanKind, defaultTextMapGetter, defaultTextMapSetter, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOffSampler, AlwaysOnSampler, BasicTracerProvider, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, type Sampler } from '@opentelemetry/sdk-trace-base';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { ConfigError } from './config.ts';

export { SpanKind, type Span };

/** Which program a tracer belongs to: its default `service.name` is `edge-<role>` (OTEL_SERVICE_NAME overrides it). */
export type TracingRole = 'node' | 'edge' | 'control' | 'worker' | 'agent';

/** A running tracer provider: spans go through a batch processor to the OTLP/HTTP exporter. */
export interface Tracing {
  readonly tracer: Tracer;
  /** Where spans are exported (the resolved traces URL), for logs. */
  readonly url: string;
  /** Exports every span ended so far; resolves when the exporter has answered. */
  forceFlush(): Promise<void>;
  /** Flushes, then stops the provider (a closed process loses no ended span). */
  shutdown(): Promise<void>;
}

/** The variables read (the standard ones: https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/). */
export type OtelEnv = Readonly<Record<string, string | undefined>>;

/** A bad OTEL_* value: the variable and why, so startup fails with a located message instead of tracing silently off. */
/** A ConfigError, so `edge serve` reports a bad OTEL_* value as it reports any other setting: one line, exit 2. */
export class TracingConfigError extends ConfigError {}

const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'];

/** The sampler OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG name (default parentbased_always_on, as the spec says). */
export function samplerFromEnv(env: OtelEnv): Sampler {
  const name = (env.OTEL_TRACES_SAMPLER ?? '').trim().toLowerCase() || 'parentbased_always_on';
  if (!SAMPLERS.includes(name)) throw new TracingConfigError(`OTEL_TRACES_SAMPLER: "${name}" is not one of ${SAMPLERS.join(', ')}`);
  const ratio = () => {
    const arg = (env.OTEL_TRACES_SAMPLER_ARG ?? '').trim();
    if (arg === '') return 1;
    const n = Number(arg);
    if (!Number.isFinite(n) || n < 0 || n > 1) throw new TracingConfigError(`OTEL_TRACES_SAMPLER_ARG: "${arg}" is not a number from 0 to 1`);
    return n;
  };
  const root = name.endsWith('always_on') ? new AlwaysOnSampler() : name.endsWith('always_off') ? new AlwaysOffSampler() : new TraceIdRatioBasedSampler(ratio());
  return name.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root;
}

/** `k=v,k2=v2` lists (OTEL_RESOURCE_ATTRIBUTES, OTEL_EXPORTER_OTLP_HEADERS), values percent-decoded (W3C Baggage form). */
export function keyValueList(name: string, value: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of (value ?? '').split(',')) {
    if (item.trim() === '') continue;
    const eq = item.indexOf('=');
    const key = eq < 1 ? '' : item.slice(0, eq).trim();
    if (key === '') throw new TracingConfigError(`${name}: "${item.trim()}" is not key=value`);
    try {
      out[key] = decodeURIComponent(item.slice(eq + 1).trim());
    } catch {
      throw new TracingConfigError(`${name}: the value of "${key}" has a malformed percent escape`);
    }
  }
  return out;
}

/** The traces URL: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces; null: none. */
export function tracesUrl(env: OtelEnv): string | null {
  const own = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!own && !base) return null;
  const [name, value] = own ? ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', own] : ['OTEL_EXPORTER_OTLP_ENDPOINT', base!];
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new TracingConfigError(`${name}: "${value}" is not a URL`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new TracingConfigError(`${name}: "${value}" is not an http(s) URL`);
  return own ? value : `${value.replace(/\/+$/, '')}/v1/traces`;
}

/**
 * Starts tracing for `role` from `env`, or returns null (nothing created) when OTEL_SDK_DISABLED=true or no endpoint
 * is set. Throws TracingConfigError on a bad value. `attributes` add to the resource (node id, region); the
 * variables are read from `env` only (the SDK's own process.env reading is bypassed by passing every option).
 */
export function startTracing(role: TracingRole, env: OtelEnv, attributes: Attributes = {}): Tracing | null {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return null;
  const url = tracesUrl(env);
  if (url === null) return null;
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/json').trim();
  if (protocol !== 'http/json') throw new TracingConfigError(`OTEL_EXPORTER_OTLP_PROTOCOL: "${protocol}" is not supported; this build exports http/json only`);
  const sampler = samplerFromEnv(env);
  const resource = resourceFromAttributes({
    ...keyValueList('OTEL_RESOURCE_ATTRIBUTES', env.OTEL_RESOURCE_ATTRIBUTES),
    'service.name': env.OTEL_SERVICE_NAME?.trim() || `edge-${role}`,
    'edge.role': role,
    ...attributes,
  });
  const headers = { ...keyValueList('OTEL_EXPORTER_OTLP_HEADERS', env.OTEL_EXPORTER_OTLP_HEADERS), ...keyValueList('OTEL_EXPORTER_OTLP_TRACES_HEADERS', env.OTEL_EXPORTER_OTLP_TRACES_HEADERS) };
  const exporter = new OTLPTraceExporter({ url, headers });
  const provider = new BasicTracerProvider({ sampler, resource, spanProcessors: [new BatchSpanProcessor(exporter)] });
  return {
    tracer: provider.getTracer('edge-platform'),
    url,
    forceFlush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}

const propagator = new W3CTraceContextPropagator();

/**
 * The parent a request names in its `traceparent` (and `tracestate`), as a context to start a span in; ROOT_CONTEXT
 * when it names none or a malformed one (W3C Trace Context §4.3: ignored, and a new trace started).
 */
export function parentFrom(headers: Readonly<Record<string, string | string[] | undefined>>): Context {
  if (headers.traceparent === undefined) return ROOT_CONTEXT;
  return propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
}

/** Sets `traceparent` (and `tracestate` when the trace has one) naming `span` as the parent on `out`. */
export function injectSpan(span: Span, out: Record<string, string>): void {
  propagator.inject(trace.setSpan(ROOT_CONTEXT, span), out, defaultTextMapSetter);
}

/** The trace id a `traceparent` value names, or undefined when it is absent or not the W3C form. */
export function traceIdOf(traceparent: string | string[] | undefined): string | undefined {
  if (typeof traceparent !== 'string') return undefined;
  const m = /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}/.exec(traceparent.trim());
  return m === null || m[1] === '0'.repeat(32) ? undefined : m[1];
}
