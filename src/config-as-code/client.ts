// A small client of the public /v1 API for edge diff / apply / export: the API key in X-API-Key, JSON both ways,
// and a bounded pool so an apply runs independent calls in parallel without flooding the node.

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
  private readonly base: string;

  constructor(private readonly options: ClientOptions) {
    this.base = options.controlUrl.replace(/\/+$/, '');
  }

  /**
   * One retry after a 5xx (a 503 store_unavailable while the database fails over, a node restarting behind a balancer);
   * a second 5xx is reported. A rule a retried create made twice is caught by the apply's twin check, an endpoint by
   * its hostname's 409.
   */
  async request<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    try {
      return await this.once<T>(method, path, body);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status < 500) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 200));
      return this.once<T>(method, path, body);
    }
  }

  private async once<T>(method: string, path: string, body?: unknown): Promise<T> {
    this.calls[method] = (this.calls[method] ?? 0) + 1;
    const headers: Record<string, string> = { 'x-api-key': this.options.apiKey, accept: 'application/json' };
    if (this.options.accountId) headers['x-account-id'] = this.options.accountId;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(this.base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new ApiError(0, cause?.code ?? 'network_error', cause?.message ?? (err as Error).message, method, path);
    }
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    if (!res.ok) {
      const error = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as { code?: unknown; error?: unknown; message?: unknown; detail?: unknown };
      const code = String(error.code ?? error.error ?? 'http_' + res.status);
      const detail = error.detail ? ` (${JSON.stringify(error.detail)})` : '';
      const message = String(error.message ?? (typeof error.error === 'string' ? error.error : text.slice(0, 300))) + detail;
      throw new ApiError(res.status, code, message, method, path);
    }
    return parsed as T;
  }

  get<T = unknown>(path: string) {
    return this.request<T>('GET', path);
  }
  post<T = unknown>(path: string, body: unknown) {
    return this.request<T>('POST', path, body);
  }
  put<T = unknown>(path: string, body: unknown) {
    return this.request<T>('PUT', path, body);
  }
  delete(path: string) {
    return this.request('DELETE', path);
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
