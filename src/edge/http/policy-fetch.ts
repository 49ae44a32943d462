// Fetches the edge makes on a user's behalf to identity services (a JWT layer's JWKS, an OAuth/OIDC provider's
// discovery, token, userinfo and key endpoints), under the platform's address policy and with a bounded body.
//
// A name that resolves to a loopback, private or link-local address is refused at connect time by the same lookup
// origin pools use (src/edge/forward/origin.ts), unless EDGE_ORIGIN_ALLOW_PRIVATE; an IP literal is judged before
// any connection, since sockets skip the lookup for those. Redirects are never followed (the callers pass
// `redirect: 'manual'`), so a public host cannot bounce the edge to a private one.
import { isIP, type LookupFunction } from 'node:net';
import { Agent, fetch as undiciFetch } from 'undici';
import { addressRefusal } from '../../shared/address-policy.ts';
import { publicOnlyLookup } from '../forward/origin.ts';

/** undici agents for identity fetches, one per address policy, made on first use: such fetches are rare. */
const agents = new Map<boolean, Agent>();

/** The agent a fetch under the policy goes through; a test's resolver gets an agent of its own. */
export function policyAgent(allowPrivate: boolean, lookup?: LookupFunction): Agent {
  if (lookup !== undefined) return new Agent({ connect: { lookup: allowPrivate ? lookup : publicOnlyLookup(lookup) }, keepAliveTimeout: 1_000 });
  let agent = agents.get(allowPrivate);
  if (!agent) {
    agent = new Agent({ connect: allowPrivate ? {} : { lookup: publicOnlyLookup() }, keepAliveTimeout: 1_000 });
    agents.set(allowPrivate, agent);
  }
  return agent;
}

/** Why a URL's host may not be fetched by what it says (an IP literal outside the policy), or null. */
export function literalRefusal(url: URL, allowPrivate: boolean): string | null {
  if (allowPrivate) return null;
  const literal = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(literal) === 0) return null;
  const why = addressRefusal(literal);
  return why === null ? null : `${why} (EDGE_ORIGIN_ALLOW_PRIVATE is off)`;
}

/** The body of a response, read whole, refused once it passes `limit` bytes. */
export async function readBounded(body: AsyncIterable<Uint8Array> | null, limit: number, what = 'the document'): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  if (body === null) return Buffer.alloc(0);
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > limit) throw new Error(`${what} is larger than ${limit} bytes`);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks);
}

/** A provider or key server could not be reached, or answered with more than the edge reads. */
export class FetchRefusedError extends Error {
  override name = 'FetchRefusedError';
  constructor(
    readonly url: string,
    override readonly cause: unknown,
  ) {
    super(`${url} could not be fetched: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/** Statuses whose Response may not carry a body (Fetch standard "null body status"). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);

export interface PolicyFetchOptions {
  allowPrivate: boolean;
  /** The largest response body read. */
  maxBytes: number;
  lookup?: LookupFunction;
}

/**
 * A WHATWG-style fetch under the policy, for libraries that take one (openid-client's customFetch): the answer is
 * the global Response those libraries expect, its body read whole and bounded. Transport failures, refused
 * addresses, timeouts (the caller's signal) and oversized bodies throw FetchRefusedError; any status is returned.
 */
export function policyFetch(options: PolicyFetchOptions): (url: string, init: { method: string; headers?: Record<string, string>; body?: unknown; signal?: AbortSignal | null; redirect?: 'manual' | 'error' }) => Promise<Response> {
  const agent = policyAgent(options.allowPrivate, options.lookup);
  return async (url, init) => {
    try {
      const refused = literalRefusal(new URL(url), options.allowPrivate);
      if (refused !== null) throw new Error(refused);
      const res = await undiciFetch(url, {
        method: init.method,
        headers: init.headers,
        body: init.body as string | URLSearchParams | undefined,
        signal: init.signal ?? undefined,
        redirect: 'manual',
        dispatcher: agent,
      });
      const body = await readBounded(res.body as AsyncIterable<Uint8Array> | null, options.maxBytes, `the answer of ${url}`);
      // undici's own Response class is not the global one that openid-client checks for.
      const headers = new Headers();
      res.headers.forEach((value, name) => headers.append(name, value));
      return new Response(NULL_BODY.has(res.status) ? null : new Uint8Array(body), { status: res.status, statusText: res.statusText, headers });
    } catch (err) {
      throw new FetchRefusedError(url, err);
    }
  };
}
