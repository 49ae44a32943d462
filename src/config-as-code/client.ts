// The client of the public /v1 API for edge diff / apply / export: every call is typed from the API's OpenAPI
// description (src/shared/api/openapi.ts) and fails as an ApiError with the API's code; a bounded pool runs them.
import { apiCall, fillPath, type ApiRequest, type ApiTarget, type Method, type Operation, type PathOf, type SuccessBody } from '../shared/api/client.ts';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly method: string,
    readonly path: string,
  ) {
    super(message);
  }
  /** The part of a resource the call wrote (e.g. an endpoint's `auth`), when one entry makes several calls. */
  where?: string;
  /** `409 conflict: …` as the apply summary names a failure. */
  describe(): string {
    const what = this.status === 0 ? `unreachable: ${this.message}` : `${this.status} ${this.code}: ${this.message}`;
    return this.where ? `${this.where}: ${what}` : what;
  }
}

export interface ClientOptions {
  controlUrl: string;
  apiKey: string;
  /** Sent as X-Account-Id: act in an organization rather than the key's personal account. */
  accountId?: string;
}

export class ApiClient {
  /** Calls made so far, by method: the summary and the bench read them. */
  readonly calls = { GET: 0, POST: 0, PUT: 0, DELETE: 0 } as Record<string, number>;
  private readonly target: ApiTarget;

  constructor(private readonly options: ClientOptions) {
    this.target = { baseUrl: options.controlUrl, apiKey: options.apiKey };
  }

  /**
   * One operation of the API, typed from its OpenAPI description (src/shared/api/client.ts explains the arguments):
   * resolves with the 2xx answer's body, rejects with an ApiError for any other status or an unreachable node.
   *
   * One retry after a 5xx (a 503 store_unavailable while the database fails over, a node restarting behind a balancer);
   * a second 5xx is reported. A rule a retried create made twice is caught by the apply's twin check, an endpoint by
   * its hostname's 409.
   */
  async call<M extends Method, P extends PathOf<M>>(method: M, path: P, request: ApiRequest<Operation<P, M>>): Promise<SuccessBody<Operation<P, M>>> {
    try {
      return await this.once(method, path, request);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status < 500) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 200));
      return this.once(method, path, request);
    }
  }

  private async once<M extends Method, P extends PathOf<M>>(method: M, path: P, request: ApiRequest<Operation<P, M>>): Promise<SuccessBody<Operation<P, M>>> {
    const verb = method.toUpperCase();
    this.calls[verb] = (this.calls[verb] ?? 0) + 1;
    const where = fillPath(path, (request as { params?: Record<string, unknown> }).params);
    const headers = { ...request.headers, ...(this.options.accountId ? { 'x-account-id': this.options.accountId } : {}) };
    let answer: { status: number; body: unknown };
    try {
      // The same request with the account header added: its type is the caller's, which TS cannot see through the spread.
      answer = await apiCall(this.target, method, path, { ...request, headers } as ApiRequest<Operation<P, M>>);
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new ApiError(0, cause?.code ?? 'network_error', cause?.message ?? (err as Error).message, verb, where);
    }
    if (answer.status >= 200 && answer.status < 300) return answer.body as SuccessBody<Operation<P, M>>;
    const body = answer.body;
    const error = (typeof body === 'object' && body !== null ? body : {}) as { code?: unknown; error?: unknown; message?: unknown; detail?: unknown };
    const code = String(error.code ?? error.error ?? 'http_' + answer.status);
    const detail = error.detail ? ` (${JSON.stringify(error.detail)})` : '';
    const message = String(error.message ?? (typeof error.error === 'string' ? error.error : String(body ?? '').slice(0, 300))) + detail;
    throw new ApiError(answer.status, code, message, verb, where);
  }
}

/** Runs `fn` over `items` with at most `limit` at a time; results in input order; every item runs (no fail-fast). */
export async function pool<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
