// The control API's HTTP layer: fastify with TypeBox schemas (validation and OpenAPI from one source),
// API-key authentication, and the one place where any error becomes the uniform `{error, code, detail}` body.
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyRequest } from 'fastify';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';
import { Value } from '@sinclair/typebox/value';
import type { TSchema } from '@sinclair/typebox';
import { Registry, Counter, Histogram } from 'prom-client';
import { collectProcessMetrics } from '../shared/process-metrics.ts';
import { EdgeError, fail } from '../shared/errors.ts';
import type { AlertNotifier } from '../shared/alerts.ts';
import type { Config } from '../shared/config.ts';
import type { Permission } from '../shared/permissions.ts';
import type { DnsRepoint } from './services/dedicated-ips.ts';
import type { Logger } from '../shared/log.ts';
import { parseInt64 } from '../shared/schema.ts';
import type { PresenceStore } from '../shared/presence.ts';
import type { SecretBox } from '../shared/secrets.ts';
import { isStoreUnavailable, type Database } from '../store/db.ts';
import { Caller, resolveCaller } from './caller.ts';
import { lingerBeforeClose } from './lingering-close.ts';

export interface ControlDeps {
  config: Config;
  db: Database;
  logger: Logger;
  /** Seals secrets stored at rest (certificate private keys). */
  secrets: SecretBox;
  /** Which agents are live on which edge, and each edge's applied config version. */
  presence: PresenceStore;
  /** Extra readiness probes (Redis, when configured): each resolves true when its dependency answers. */
  readiness: Record<string, () => Promise<boolean>>;
  /**
   * The HTTPS port visitors reach the edges on (shown in redirect URIs to register at identity providers):
   * EDGE_PUBLIC_HTTPS_PORT, else this node's edge listener once bound; by default the configured HTTPS port.
   */
  publicHttpsPort?: () => number;
  /**
   * Where a traffic replay is sent (docs/traffic.md "API"): the base URL of an edge's public listener, reached as a
   * visitor reaches it, for an exchange first made over TLS (`secure`) or not; null when no edge is known.
   * `verifyTls` false only for this process's own edge on loopback, whose certificate may be the development one.
   */
  replayEdge?: (secure: boolean) => { origin: string; verifyTls: boolean } | null;
  /**
   * Publishes dedicated-IP group bindings to an operator's DNS primary by RFC 2136 (docs/dedicated-ips.md); absent when
   * EDGE_DNS_UPDATE_SERVER is not set, and the embedded DNS server is then the only authority.
   */
  dnsRepoint?: DnsRepoint;
  /** Sends alert notifications (POST /v1/traffic/alerts/{uuid}/test); the composition root builds it (src/worker/notify.ts). */
  alertNotifier?: AlertNotifier;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any server, request, reply and logger type: fastify's own default for plugins
export type ControlApp = FastifyInstance<any, any, any, any, TypeBoxTypeProvider>;

declare module 'fastify' {
  interface FastifyRequest {
    caller: Caller;
  }
  interface FastifyContextConfig {
    /** No API key needed (health, OpenAPI, public webhooks). */
    public?: boolean;
    /**
     * The permission the operation needs in the active account (or several, checked in the order given), checked by
     * one preHandler hook after the body and params validate (so a malformed request is a 400 before a 403) and
     * before the handler runs.
     */
    permission?: Permission | readonly Permission[];
    /** The route reads and judges its own body, media type included (the git webhook, which needs the raw bytes). */
    ownBody?: boolean;
  }
}

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** JSON.parse that refuses prototype-pollution keys anywhere in the document (docs/api.md: rejected, 400). */
export function parseJsonBody(text: string): unknown {
  return JSON.parse(text, (key, value) => {
    if (FORBIDDEN_KEYS.has(key)) throw fail.invalid_request('Invalid request body', { field: key, reason: 'forbidden key' });
    return value;
  });
}

interface ValidationIssue {
  message: string;
  instancePath: string;
  type: ValueErrorType;
}

/**
 * The error a union reports as "Expected union value", replaced by the first error of its non-null branch, so a bad
 * value under a nullable field is reported by its own path and reason (`basic_users.0.role` unknown,
 * `session_ttl_seconds` below 1) rather than as the union's.
 */
function specific(error: ValueError): ValueError {
  if (error.type !== ValueErrorType.Union) return error;
  for (const branch of error.errors) {
    const first = branch.First();
    if (first && !(first.type === ValueErrorType.Null && first.path === error.path)) return specific(first);
  }
  return error;
}

/** TypeBox compiled checkers: bodies are checked as sent (strict types); query and path strings are converted first. */
function validatorCompiler({ schema, httpPart }: { schema: TSchema; httpPart?: string }) {
  const check = TypeCompiler.Compile(schema);
  return (value: unknown) => {
    const input = httpPart === 'body' ? value : Value.Convert(schema, value);
    if (check.Check(input)) return { value: input };
    const error: ValidationIssue[] = [...check.Errors(input)].slice(0, 5).map((e) => {
      const issue = specific(e);
      return { message: issue.message, instancePath: issue.path, type: issue.type };
    });
    return { error: error as never };
  };
}

/**
 * The field a validator error names, as a dotted path (`conditions.0.value`); an error about the whole part names the
 * part in parentheses (`(body)`, `(querystring)`).
 */
function fieldName(path: string, part: string): string {
  return path.replace(/^\//, '').replace(/\//g, '.') || `(${part})`;
}

/** The validator's reason, in the words docs/errors.md uses for the two cases clients handle most. */
function reasonOf(issue: ValidationIssue | undefined): string {
  if (issue?.type === ValueErrorType.ObjectAdditionalProperties) return 'unknown field';
  if (issue?.type === ValueErrorType.ObjectRequiredProperty) return 'missing required field';
  return issue?.message ?? 'invalid value';
}

/** How long a client is asked to wait when the store is unreachable: about one reconnect of the pool. */
const STORE_RETRY_AFTER_SECONDS = 5;

/**
 * Maps fastify's and the validator's errors onto the registry, so every response has a stable code. Every validation
 * error, whichever part of the request failed, has the detail `{field, reason}` (docs/errors.md).
 */

export function toEdgeError(err: unknown): EdgeError {
  if (err instanceof EdgeError) return err;
  const e = err as FastifyError & { validation?: ValidationIssue[]; validationContext?: string };
  if (e.validation) {
    const first = e.validation[0];
    const part = e.validationContext ?? 'body';
    const detail = { field: fieldName(first?.instancePath ?? '', part), reason: reasonOf(first) };
    switch (part) {
      case 'params':
        return fail.invalid_id(`Invalid ${detail.field}`, detail);
      case 'querystring':
        return fail.invalid_query(`Invalid query parameter ${detail.field}`, detail);
      case 'headers':
        return fail.bad_request(`Invalid header ${detail.field}`, detail);
    }
    if (first?.type === ValueErrorType.ObjectAdditionalProperties) return fail.unknown_field('Invalid request body', detail);
    return fail.invalid_request('Invalid request body', detail);
  }
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return fail.body_too_large();
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return fail.unsupported_media_type();
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return fail.bad_request('Content-Length does not match the body', { field: 'content-length', reason: 'does not match the length of the body' });
  }
  if (err instanceof SyntaxError) return invalidJson(err);
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) return fail.bad_request(e.message);
  // PostgreSQL restarting or unreachable: the pool reconnects on its own; the caller is told to come back.
  if (isStoreUnavailable(err)) return fail.store_unavailable();
  return fail.internal();
}

function invalidJson(err: Error): EdgeError {
  return fail.invalid_json('Invalid JSON body', { field: '(body)', reason: err.message });
}

/**
 * The one error string of an operation whose 400 body the API contract fixes as `{error: "<string>"}` (the
 * health-check operations, docs/errors.md): the message, then the field and reason when the message does not
 * already say them.
 */
function oneErrorString(error: EdgeError): string {
  const detail = error.detail as { field?: unknown; reason?: unknown } | string | undefined;
  if (typeof detail === 'string') return detail === '' ? error.message : `${error.message}: ${detail}`;
  if (typeof detail?.reason !== 'string' || error.message.includes(detail.reason)) return error.message;
  const field = typeof detail.field === 'string' && !detail.field.startsWith('(') ? `${detail.field}: ` : '';
  return `${error.message}: ${field}${detail.reason}`;
}

/**
 * The error handler of an operation whose 400 body the API contract fixes as an object with one error string (the health-check
 * operations, docs/errors.md): it rethrows the registry's error with that body (EdgeError.withBody, dropping `code`
 * and `detail`), and the application's handler answers it like any other. Other statuses keep the uniform body.
 */
export function errorStringOn400(err: unknown): never {
  const error = toEdgeError(err);
  if (error.status !== 400) throw error;
  throw error.withBody({ error: oneErrorString(error), code: null, detail: null });
}

/** Reads an int64 path segment; 400 when it is not one (docs/api.md: non-numeric id in path). */
export function int64Param(value: string, name = 'id'): number {
  const id = parseInt64(value);
  if (id === null) throw fail.invalid_id(`Invalid ${name}`, { field: name, reason: 'must be a positive int64' });
  return id;
}

/** Route guard for docs/api.md operations that answer 415 unless the body is declared as JSON. */
export async function requireJsonContentType(req: FastifyRequest): Promise<void> {
  const type = req.headers['content-type'] ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type)) throw fail.unsupported_media_type();
}

export function createControlApp(deps: ControlDeps): ControlApp {
  const app = Fastify({
    loggerInstance: deps.logger.child({ component: 'control' }),
    bodyLimit: deps.config.bodyLimitBytes,
    // One compact line per request comes from the onResponse hook below instead of fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    // Ids and routes are case-sensitive; a trailing slash is the same route.
    routerOptions: { ignoreTrailingSlash: true },
    return503OnClosing: true,
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.setValidatorCompiler(validatorCompiler as never);
  // JSON only: any other media type (text/plain included, which fastify parses by default) is a 415.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    // An empty JSON body means "no body": docs/api.md accepts "no body (empty object or none)" on several operations.
    if (body === '') return done(null, undefined);
    try {
      done(null, parseJsonBody(body as string));
    } catch (err) {
      done(err instanceof EdgeError ? err : invalidJson(err as Error), undefined);
    }
  });

  app.setErrorHandler((err, req, reply) => {
    const error = toEdgeError(err);
    if (error.status >= 500) req.log.error({ err }, 'request failed');
    const body = error.toBody();
    reply.status(error.status);
    if (error.code === 'store_unavailable') reply.header('retry-after', String(STORE_RETRY_AFTER_SECONDS));
    if (typeof body === 'string') reply.type('text/plain; charset=utf-8');
    return reply.send(body);
  });
  // A response sent before the body was read (413 over the body limit, a parse error) closes the connection; the
  // rest of the body is read and discarded first, so the client reads the status rather than a reset.
  app.addHook('onSend', async (req, _reply, payload) => {
    if (!req.raw.complete) lingerBeforeClose(req.raw);
    return payload;
  });
  app.setNotFoundHandler((req, reply) => {
    const error = fail.route_not_found(`No route ${req.method} ${req.url.split('?')[0]}`);
    reply.status(404).send(error.toBody());
  });

  const metrics = new Registry();
  collectProcessMetrics(metrics, 'edge_control_');
  const requests = new Counter({ name: 'edge_control_requests_total', help: 'Control API requests', labelNames: ['method', 'route', 'status'], registers: [metrics] });
  const latency = new Histogram({
    name: 'edge_control_request_duration_seconds',
    help: 'Control API latency',
    labelNames: ['method', 'route'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [metrics],
  });
  app.decorate('metricsRegistry', metrics);

  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    requests.inc({ method: req.method, route, status: reply.statusCode });
    latency.observe({ method: req.method, route }, reply.elapsedTime / 1000);
    req.log.info({ method: req.method, route, url: req.url, status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 }, 'request');
  });

  // A body with no Content-Type is never parsed by fastify; say so instead of reporting it as missing.
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config?.ownBody) return;
    const hasBody = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
    if (hasBody && !req.headers['content-type']) throw fail.unsupported_media_type();
  });
  // No body at all reads as an empty object, so "no body (empty object or none)" operations need no special case
  // and required fields are still reported by name.
  app.addHook('preValidation', async (req) => {
    if (req.body === undefined && req.routeOptions.schema?.body) req.body = {};
  });

  app.decorateRequest('caller', null as unknown as Caller);
  // Authentication runs before the body is read or validated: an unauthenticated caller learns nothing else.
  app.addHook('onRequest', async (req) => {
    if (req.routeOptions.config?.public || !req.routeOptions.url?.startsWith('/v1/')) return;
    req.caller = await resolveCaller(req, deps.db, deps.config);
  });
  // The declared permission of the route (`config: { permission }`): one check instead of one per handler.
  app.addHook('preHandler', async (req) => {
    const permission = req.routeOptions.config?.permission;
    if (permission === undefined) return;
    if (typeof permission === 'string') req.caller.requirePermission(permission);
    else for (const one of permission) req.caller.requirePermission(one);
  });

  app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Edge platform control API',
        version: '1',
        description: 'Management API for endpoints, visitor auth, RBAC, routing and more. Errors use the body {error, code, detail?}.',
        // package.json's licence: proprietary, no SPDX identifier applies (docs/api.md "The OpenAPI document").
        license: { name: 'UNLICENSED' },
      },
      // The node's public control URL when EDGE_PUBLIC_CONTROL_URL names one; otherwise `/`, the server that served
      // the document, which is right for any listener address or proxy in front of it (docs/api.md "The OpenAPI document").
      servers: [
        deps.config.publicControlUrl
          ? { url: deps.config.publicControlUrl.replace(/\/+$/, ''), description: 'This node’s public control API (EDGE_PUBLIC_CONTROL_URL)' }
          : { url: '/', description: 'The server this document was fetched from' },
      ],
      components: { securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'X-API-KEY' } } },
      security: [{ apiKey: [] }],
    },
  });

  app.get('/healthz', { config: { public: true }, schema: { hide: true } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { config: { public: true }, schema: { hide: true } }, async (_req, reply) => {
    const checks: Record<string, boolean> = {};
    const probes = { store: () => deps.db.query('SELECT 1').then(() => true), ...deps.readiness };
    await Promise.all(
      Object.entries(probes).map(async ([name, probe]) => {
        checks[name] = await Promise.race([
          probe().catch(() => false),
          new Promise<boolean>((resolve) => setTimeout(resolve, 2000, false).unref()),
        ]);
      }),
    );
    const ready = Object.values(checks).every(Boolean);
    return reply.status(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks });
  });
  app.get('/metrics', { config: { public: true }, schema: { hide: true } }, async (_req, reply) => {
    reply.type(metrics.contentType);
    return metrics.metrics();
  });
  app.get('/v1/openapi.json', { config: { public: true }, schema: { hide: true } }, async () => app.swagger());

  return app;
}
