// Pointing an endpoint at an origin URL: the edge then forwards visitors there over a keep-alive pool instead of
// to agents (a routing rule that picks agents still wins). Private and loopback origins need operator consent.
import { isIP } from 'node:net';
import { Type } from '@sinclair/typebox';
import { fail } from '../../shared/errors.ts';
import { Nullable, Strict } from '../../shared/schema.ts';
import { setOrigin } from '../../store/endpoints.ts';
import { endpointForCaller } from '../endpoint-access.ts';
import type { ControlApp, ControlDeps } from '../http.ts';
import { ErrorResponses } from '../views.ts';

/** Loopback, RFC 1918, CGNAT, link-local (cloud metadata lives there) and their IPv6 counterparts. */
function isPrivateAddress(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  const v = isIP(h);
  if (v === 4) {
    const [a, b] = h.split('.').map(Number);
    return a === 127 || a === 10 || a === 0 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 169 && b === 254) || (a === 100 && b >= 64 && b <= 127);
  }
  if (v === 6) return h === '::1' || h === '::' || /^f[cd]/.test(h) || /^fe[89ab]/.test(h) || h.startsWith('::ffff:');
  return false;
}

/** A canonical origin URL, or a 400 saying what is wrong with it. */
export function parseOriginUrl(raw: string, allowPrivate: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw fail.invalid_request('Invalid request body', 'url: not a valid absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw fail.invalid_request('Invalid request body', 'url: only http and https origins are supported');
  if (url.username || url.password) throw fail.invalid_request('Invalid request body', 'url: credentials in the URL are not allowed');
  if (url.search || url.hash) throw fail.invalid_request('Invalid request body', 'url: an origin has no query or fragment');
  if (!allowPrivate && isPrivateAddress(url.hostname)) {
    throw fail.invalid_request('Invalid request body', 'url: private, loopback and link-local origins are not allowed on this platform');
  }
  // The path, when any, prefixes every forwarded path; a trailing slash would double up.
  return url.href.replace(/\/$/, '');
}

export function endpointOriginRoutes(app: ControlApp, { db, config }: ControlDeps): void {
  app.put(
    '/v1/endpoints/:id/origin',
    {
      schema: {
        summary: 'Forward the endpoint to an origin URL instead of agents (null clears it)',
        description:
          'http or https, no credentials, query or fragment; its path prefixes forwarded paths. Loopback and private addresses are refused ' +
          'unless the platform sets EDGE_ORIGIN_ALLOW_PRIVATE. A routing rule that picks agents still sends its requests to agents.',
        tags: ['endpoints'],
        params: Type.Object({ id: Type.String() }),
        body: Strict({ url: Nullable(Type.String({ minLength: 1, maxLength: 2048 })) }),
        response: { 200: Type.Object({ ok: Type.Literal(true), origin_url: Nullable(Type.String()) }), ...ErrorResponses },
      },
    },
    async (req) => {
      req.caller.requirePermission('endpoints:update');
      const url = req.body.url === null ? null : parseOriginUrl(req.body.url, config.originAllowPrivate);
      const endpoint = await db.transaction(async (tx) => {
        const e = await endpointForCaller(tx, req.caller, req.params.id, { forUpdate: true });
        return setOrigin(tx, e.id, url);
      });
      return { ok: true as const, origin_url: endpoint.origin_url };
    },
  );
}
