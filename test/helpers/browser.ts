// A browser's view for login tests: a cookie jar per host (Secure cookies only over https, Max-Age=0 removes) and
// page loads that follow redirects across hosts, every request made to 127.0.0.1 on the URL's port with the URL's
// host as Host and SNI (the edge's development certificate is accepted).
import http from 'node:http';
import https from 'node:https';

export interface Page {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The URL this answer came from (the last hop). */
  url: string;
  /** Every URL requested, in order. */
  hops: string[];
}

export interface LoadOptions {
  method?: string;
  headers?: Record<string, string>;
  /** Follow redirects (default true), at most this many hops. */
  follow?: boolean;
  maxHops?: number;
}

interface Cookie {
  value: string;
  secure: boolean;
}

/** Accept of a browser's page load. */
export const NAVIGATION_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

export class Browser {
  /** hostname → name → cookie (paths are ignored: every cookie in these tests is Path=/). */
  readonly jar = new Map<string, Map<string, Cookie>>();
  /** Every answer received, in order (a test reads the Set-Cookie of a hop in the middle). */
  readonly history: Page[] = [];

  /**
   * `hosts` sends a hostname's requests to another port of 127.0.0.1, over TLS or not whatever the URL says (a
   * stage server is plain HTTP behind the https URLs the stage writes); cookies still follow the URL's scheme.
   */
  constructor(private readonly hosts: Record<string, { port: number; tls: boolean }> = {}) {}

  cookie(hostname: string, name: string): string | undefined {
    return this.jar.get(hostname)?.get(name)?.value;
  }

  setCookie(hostname: string, name: string, value: string, secure = true): void {
    let cookies = this.jar.get(hostname);
    if (!cookies) this.jar.set(hostname, (cookies = new Map()));
    cookies.set(name, { value, secure });
  }

  private store(url: URL, setCookie: string[] | undefined): void {
    for (const line of setCookie ?? []) {
      const [pair, ...attrs] = line.split(';').map((s) => s.trim());
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      const lower = attrs.map((a) => a.toLowerCase());
      const maxAge = lower.find((a) => a.startsWith('max-age='));
      const expires = lower.find((a) => a.startsWith('expires='));
      const gone = (maxAge !== undefined && Number(maxAge.slice(8)) <= 0) || (expires !== undefined && Date.parse(expires.slice(8)) <= Date.now());
      // RFC 6265bis §5.7: a Secure cookie is not set from a plain-HTTP answer.
      const secure = lower.includes('secure');
      if (secure && url.protocol !== 'https:') continue;
      if (gone) this.jar.get(url.hostname)?.delete(name);
      else this.setCookie(url.hostname, name, value, secure);
    }
  }

  private cookieHeader(url: URL): string | undefined {
    const cookies = this.jar.get(url.hostname);
    if (!cookies) return undefined;
    const pairs = [...cookies].filter(([, c]) => !c.secure || url.protocol === 'https:').map(([n, c]) => `${n}=${c.value}`);
    return pairs.length > 0 ? pairs.join('; ') : undefined;
  }

  /** One request, no redirect followed. */
  request(target: string, options: { method?: string; headers?: Record<string, string> } = {}): Promise<Page> {
    const url = new URL(target);
    const secure = url.protocol === 'https:';
    const headers: Record<string, string> = { host: url.host, accept: NAVIGATION_ACCEPT, ...options.headers };
    const cookie = this.cookieHeader(url);
    if (cookie !== undefined && headers.cookie === undefined) headers.cookie = cookie;
    const route = this.hosts[url.hostname];
    const port = route?.port ?? Number(url.port || (secure ? 443 : 80));
    const tls = route?.tls ?? secure;
    return new Promise((resolve, reject) => {
      const req = (tls ? https : http).request(
        { host: '127.0.0.1', port, path: url.pathname + url.search, method: options.method ?? 'GET', headers, agent: false, servername: url.hostname, rejectUnauthorized: false },
        (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (d) => (body += d));
          res.on('end', () => {
            this.store(url, res.headers['set-cookie']);
            const page = { status: res.statusCode!, headers: res.headers, body, url: url.href, hops: [url.href] };
            this.history.push(page);
            resolve(page);
          });
        },
      );
      req.on('error', reject);
      req.end();
    });
  }

  /** A page load: redirects followed (as GET), cookies kept, until an answer that is not a redirect. */
  async load(target: string, options: LoadOptions = {}): Promise<Page> {
    const hops: string[] = [];
    let url = target;
    let method = options.method ?? 'GET';
    const max = options.maxHops ?? 20;
    for (;;) {
      const page = await this.request(url, { method, headers: options.headers });
      hops.push(url);
      const location = page.headers.location;
      if (options.follow === false || location === undefined || page.status < 300 || page.status > 399) return { ...page, hops };
      if (hops.length >= max) throw new Error(`more than ${max} redirects: ${hops.join(' → ')}`);
      url = new URL(location, url).href;
      if (page.status !== 307 && page.status !== 308) method = 'GET';
    }
  }
}
