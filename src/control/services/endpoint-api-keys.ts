// Endpoint API keys as domain operations: visitor bearer tokens for token mode that the platform generates, stored
// as keyed digests (the secret is returned once, by create); revoked keys stay listed.
import { randomBytes } from 'node:crypto';
import { fail, invalid } from '../../shared/errors.ts';
import { tokenDigest, visitorTokenKey } from '../../shared/visitor-credentials.ts';
import type { EndpointRow } from '../../store/endpoints.ts';
import * as store from '../../store/visitor-auth.ts';
import { MAX_LIVE_API_KEYS, type VisitorTokenRow } from '../../store/visitor-auth.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller } from '../endpoint-access.ts';
import { int64Param, type ControlDeps } from '../http.ts';
import { futureInstant } from '../validation.ts';

/**
 * `evk_` and 256 random bits, base64url: an RFC 6750 b64token, so it works as a Bearer token, a header or a cookie
 * value unchanged; the prefix lets secret scanners recognise a leaked one, and tells it apart from a control API key.
 */
export function generateVisitorApiKey(): string {
  return `evk_${randomBytes(32).toString('base64url')}`;
}

const notFound = () => fail.not_found('API key not found');

export function endpointApiKeyService({ db, secrets }: Pick<ControlDeps, 'db' | 'secrets'>) {
  const tokenKey = visitorTokenKey(secrets);

  return {
    /** A new key with its secret, which exists only in this answer; at most MAX_LIVE_API_KEYS live per endpoint. */
    async create(caller: Caller, uuid: string, body: { name: string; expires_at?: string | null }): Promise<{ endpoint: EndpointRow; key: VisitorTokenRow; token: string }> {
      const expiresAt = body.expires_at == null ? null : futureInstant('expires_at', body.expires_at);
      const token = generateVisitorApiKey();
      const { endpoint, key } = await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
        const live = await store.countLiveTokens(tx, endpoint.id);
        if (live.api_key >= MAX_LIVE_API_KEYS) throw invalid('api-keys', `an endpoint has at most ${MAX_LIVE_API_KEYS} live API keys`, { limit: MAX_LIVE_API_KEYS });
        const key = await store.insertEndpointApiKey(tx, endpoint.id, { label: body.name, digest: tokenDigest(tokenKey, token), expiresAt });
        return { endpoint, key };
      });
      return { endpoint, key, token };
    },

    async list(caller: Caller, uuid: string): Promise<VisitorTokenRow[]> {
      const endpoint = await endpointForCaller(db, caller, uuid);
      return store.listVisitorTokens(db, endpoint.id, 'api_key');
    },

    async get(caller: Caller, uuid: string, rawKeyId: string): Promise<VisitorTokenRow> {
      const keyId = int64Param(rawKeyId, 'key_id');
      const endpoint = await endpointForCaller(db, caller, uuid);
      const key = await store.findEndpointApiKey(db, endpoint.id, keyId);
      if (!key) throw notFound();
      return key;
    },

    /** Revoking a revoked key changes nothing; settings tokens are not API keys (404). */
    async revoke(caller: Caller, uuid: string, rawKeyId: string): Promise<void> {
      const keyId = int64Param(rawKeyId, 'key_id');
      const revoked = await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
        return store.revokeEndpointApiKey(tx, endpoint.id, keyId);
      });
      if (!revoked) throw notFound();
    },
  };
}
