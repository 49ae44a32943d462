// Typed calls to the control API: method, path, path parameters, query, body and the answer by status all come from
// openapi.ts, generated from the served OpenAPI document, so a drift between the API and a caller fails the type-check.
import type { paths } from './openapi.ts';

/*
 * How to call (the edge's calls in src/main.ts are examples):
 *
 *   const answer = await apiCall({ baseUrl, apiKey }, 'get', '/v1/endpoints/{id}', { params: { id: uuid } });
 *   if (answer.status === 200) answer.body.hostname;      // the Endpoint, typed
 *   else if (answer.status === 404) answer.body.code;     // the uniform error body
 *
 * - `path` is the document's path template, never a built string: it names the operation, and `params` fills its
 *   `{name}` segments (each URI-encoded, so a value cannot reach another route).
 * - `query` takes the operation's query parameters (undefined ones are left out); `body` is required exactly when the
 *   operation requires a JSON body, and is sent as application/json.
 * - The answer is a union discriminated by `status`: each status the document declares has its body type (parsed
 *   JSON, a string for text/plain, undefined when there is no body); any other status has `body: unknown`.
 *   The types trust the server to answer as its document says; a caller that hands an answer on checks its shape.
 * - Network failures and timeouts (`signal`) reject, as fetch does; every HTTP answer resolves.
 *
 * src/shared/api/openapi.ts is regenerated with `npm run api:types`; test/control/openapi.test.ts fails while it is
 * stale.
 */

export type Method = 'get' | 'put' | 'post' | 'delete' | 'patch';

/** The document's paths that have an operation for `M`. */
export type PathOf<M extends Method> = { [P in keyof paths]: [NonNullable<paths[P][M]>] extends [never] ? never : P }[keyof paths];

/** The operation (parameters, requestBody, responses) at `P` for `M`. */
export type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;

type PathParams<Op> = Op extends { parameters: { path?: infer T } } ? Exclude<T, undefined> : never;
type QueryParams<Op> = Op extends { parameters: { query?: infer T } } ? Exclude<T, undefined> : never;
type RequestBody<Op> = Op extends { requestBody?: infer B } ? Exclude<B, undefined> : never;
type JsonBody<Op> = [RequestBody<Op>] extends [never] ? never : RequestBody<Op> extends { content: { 'application/json': infer T } } ? T : never;

/** The JSON body the operation `M` at `P` takes (never when it takes none): for callers that build bodies themselves. */
export type JsonRequestBody<P extends keyof paths, M extends Method> = JsonBody<Operation<P, M>>;

/** What one call sends: the operation's own parts, plus the caller's headers and cancellation. */
export type ApiRequest<Op> = ([PathParams<Op>] extends [never] ? { params?: never } : { params: PathParams<Op> }) &
  ([QueryParams<Op>] extends [never] ? { query?: never } : { query?: QueryParams<Op> }) &
  ([JsonBody<Op>] extends [never]
    ? { body?: never }
    : Op extends { requestBody: unknown }
      ? { body: JsonBody<Op> }
      : { body?: JsonBody<Op> }) & {
    /** Extra request headers (the API key is ApiTarget's). */
    headers?: Record<string, string>;
    /** Aborts the call (AbortSignal.timeout for a deadline): the promise rejects. */
    signal?: AbortSignal;
  };

type Responses<Op> = Op extends { responses: infer R } ? R : never;
type BodyOf<R> = R extends { content: infer C } ? C[keyof C] : undefined;

/** Every status registered with IANA: what "any status the operation does not declare" ranges over. */
type HttpStatus =
  | 100 | 101 | 102 | 103
  | 200 | 201 | 202 | 203 | 204 | 205 | 206 | 207 | 208 | 226
  | 300 | 301 | 302 | 303 | 304 | 305 | 307 | 308
  | 400 | 401 | 402 | 403 | 404 | 405 | 406 | 407 | 408 | 409 | 410 | 411 | 412 | 413 | 414 | 415 | 416 | 417 | 418
  | 421 | 422 | 423 | 424 | 425 | 426 | 428 | 429 | 431 | 451
  | 500 | 501 | 502 | 503 | 504 | 505 | 506 | 507 | 508 | 510 | 511;

/** One answer: a declared status with its body type, or an undeclared one (a proxy's 502, say) with `body: unknown`. */
export type ApiAnswer<Op> =
  | { [S in keyof Responses<Op> & number]: { status: S; body: BodyOf<Responses<Op>[S]>; headers: Headers } }[keyof Responses<Op> & number]
  | { status: Exclude<HttpStatus, keyof Responses<Op>>; body: unknown; headers: Headers };

type SuccessStatus = 200 | 201 | 202 | 203 | 204 | 205 | 206;
/** The body of the operation's 2xx answers (undefined for one without a body): what a caller that throws on the rest gets. */
export type SuccessBody<Op> = { [S in keyof Responses<Op> & SuccessStatus]: BodyOf<Responses<Op>[S]> }[keyof Responses<Op> & SuccessStatus];

/** Where calls go, and as whom. */
export interface ApiTarget {
  /** The control API's base URL (`http://127.0.0.1:8081`); a trailing slash is ignored. */
  baseUrl: string;
  /** Sent as X-API-KEY; left out for the public operations (registration, git webhooks). */
  apiKey?: string;
}

/** `/v1/endpoints/{id}` with `{id: 'a/b'}` → `/v1/endpoints/a%2Fb`. */
export function fillPath(template: string, params: Record<string, unknown> | undefined): string {
  return template.replace(/\{([^}]+)\}/g, (_whole, name: string) => {
    const value = params?.[name];
    if (value === undefined || value === null) throw new TypeError(`apiCall: path parameter ${name} of ${template} is missing`);
    return encodeURIComponent(String(value));
  });
}

function queryString(query: Record<string, unknown> | undefined): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) search.append(name, String(one));
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** The answer's body: parsed when the server says JSON, the text otherwise, undefined when there is none. */
async function readBody(res: Response): Promise<unknown> {
  const text = await res.text();
  if (text === '') return undefined;
  if (!/^application\/(.+\+)?json\b/i.test(res.headers.get('content-type') ?? '')) return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** One call to the control API; see the comment at the top of this module. */
export async function apiCall<M extends Method, P extends PathOf<M>>(
  target: ApiTarget,
  method: M,
  path: P,
  request: ApiRequest<Operation<P, M>>,
): Promise<ApiAnswer<Operation<P, M>>> {
  const { params, query, body, headers: extra, signal } = request as { params?: Record<string, unknown>; query?: Record<string, unknown>; body?: unknown; headers?: Record<string, string>; signal?: AbortSignal };
  const headers: Record<string, string> = { accept: 'application/json', ...extra };
  if (target.apiKey !== undefined) headers['x-api-key'] = target.apiKey;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const url = target.baseUrl.replace(/\/+$/, '') + fillPath(path, params) + queryString(query);
  const res = await fetch(url, { method: method.toUpperCase(), headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
  return { status: res.status, body: await readBody(res), headers: res.headers } as ApiAnswer<Operation<P, M>>;
}
