// Endpoint API keys: visitor bearer tokens for token mode that the platform generates (SPEC.md: "token mode bearer
// tokens can also be configured via /endpoints/{id}/api-keys"). The secret is shown once; revoked keys stay listed.
import { randomBytes } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import { fail, invalid } from '../../shared/errors.ts';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import { tokenDigest, visitorTokenKey } from '../../shared/visitor-credentials.ts';
import * as store from '../../store/visitor-auth.ts';
import { MAX_LIVE_API_KEYS, type VisitorTokenRow } from '../../store/visitor-auth.ts';
import { int64Param, type ControlApp, type ControlDeps } from '../http.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';
import { futureInstant, NO_CONTROL_PATTERN } from '../validation.ts';
import { endpointForCaller, readableEndpoint } from '../endpoint-access.ts';

/**
 * `evk_` and 256 random bits, base64url: an RFC 6750 b64token, so it works as a Bearer token, a header or a cookie
 * value unchanged; the prefix lets secret scanners recognise a leaked one, and tells it apart from a control API key.
 */
export function generateVisitorApiKey(): string {
  return `evk_${randomBytes(32).toString('base64url')}`;
}

const ApiKeyView = Type.Object(
  {
    id: Type.Integer(),
    label: Type.String(),
    created_at: Timestamp(),
    expires_at: Nullable(Timestamp()),
    last_used_at: Nullable(Timestamp({ description: 'As reported by edges, at most about a minute late' })),
    revoked_at: Nullable(Timestamp()),
  },
  { description: 'Endpoint API key (never its secret)' },
);

const CreatedApiKey = Type.Object(
  {
    id: Type.Integer(),
    label: Type.String(),
    created_at: Timestamp(),
    expires_at: Nullable(Timestamp()),
    token: Type.String({ description: 'The secret, shown this once: only a keyed digest is stored' }),
  },
  { description: 'A new endpoint API key' },
);

function apiKeyView(k: VisitorTokenRow) {
  return { id: k.id, label: k.label, created_at: iso(k.created_at), expires_at: iso(k.expires_at), last_used_at: iso(k.last_used_at), revoked_at: iso(k.revoked_at) };
}

const CreateBody = Strict({
  name: Type.String({ minLength: 1, maxLength: 100, pattern: NO_CONTROL_PATTERN, description: 'The key’s label; sent to the agent as X-Edge-Auth-User' }),
  expires_at: Type.Optional(Nullable(Timestamp({ description: 'RFC 3339, in the future; omitted or null: never' }))),
});

const EndpointParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
const KeyParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }), key_id: Type.String({ description: 'API key id (int64)' }) });
const Errors409 = { ...ErrorResponses, 409: ErrorBody };
const notFound = () => fail.not_found('API key not found');

export function endpointApiKeyRoutes(app: ControlApp, { db, secrets }: ControlDeps): void {
  const TAGS = ['visitor-auth'];
  const tokenKey = visitorTokenKey(secrets);

  app.post(
    '/v1/endpoints/:id/api-keys',
    {
      schema: {
        summary: 'Create an endpoint API key (a token-mode visitor token)',
        description:
          'Generates a token that visitors present as in token mode (Authorization: Bearer, or the configured header or cookie). ' +
          'The token is in this answer only. Listed under the settings’ tokens; accepted while the endpoint is in token mode, ' +
          `until it expires or is revoked. At most ${MAX_LIVE_API_KEYS} live keys per endpoint. Needs endpoints:update.`,
        tags: TAGS,
        params: EndpointParams,
        body: CreateBody,
        response: { 201: CreatedApiKey, ...Errors409 },
      },
    },
    async (req, reply) => {
      req.caller.requirePermission('endpoints:update');
      const expiresAt = req.body.expires_at == null ? null : futureInstant('expires_at', req.body.expires_at);
      const token = generateVisitorApiKey();
      const { endpoint, key } = await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, req.caller, req.params.id, { writable: true });
        const live = await store.countLiveTokens(tx, endpoint.id);
        if (live.api_key >= MAX_LIVE_API_KEYS) throw invalid('api-keys', `an endpoint has at most ${MAX_LIVE_API_KEYS} live API keys`, { limit: MAX_LIVE_API_KEYS });
        const key = await store.insertEndpointApiKey(tx, endpoint.id, { label: req.body.name, digest: tokenDigest(tokenKey, token), expiresAt });
        return { endpoint, key };
      });
      return reply
        .status(201)
        .header('location', `/v1/endpoints/${endpoint.uuid}/api-keys/${key.id}`)
        .send({ id: key.id, label: key.label, created_at: iso(key.created_at), expires_at: iso(key.expires_at), token });
    },
  );

  app.get(
    '/v1/endpoints/:id/api-keys',
    {
      schema: {
        summary: 'List the endpoint’s API keys',
        description: 'Oldest first, revoked ones included (with revoked_at). Never the secret. Needs endpoints:read.',
        tags: TAGS,
        params: EndpointParams,
        response: { 200: Type.Object({ items: Type.Array(ApiKeyView) }), ...ErrorResponses },
      },
    },
    async (req) => {
      const endpoint = await readableEndpoint(db, req.caller, req.params.id);
      return { items: (await store.listVisitorTokens(db, endpoint.id, 'api_key')).map(apiKeyView) };
    },
  );

  app.get(
    '/v1/endpoints/:id/api-keys/:key_id',
    {
      schema: {
        summary: 'Get one endpoint API key',
        description: 'Never the secret. Needs endpoints:read.',
        tags: TAGS,
        params: KeyParams,
        response: { 200: ApiKeyView, ...ErrorResponses },
      },
    },
    async (req) => {
      req.caller.requirePermission('endpoints:read');
      const keyId = int64Param(req.params.key_id, 'key_id');
      const endpoint = await endpointForCaller(db, req.caller, req.params.id);
      const key = await store.findEndpointApiKey(db, endpoint.id, keyId);
      if (!key) throw notFound();
      return apiKeyView(key);
    },
  );

  app.delete(
    '/v1/endpoints/:id/api-keys/:key_id',
    {
      schema: {
        summary: 'Revoke an endpoint API key',
        description:
          'Every edge refuses the key from its next request once the change reaches it through the feed. The key stays listed with ' +
          'revoked_at; revoking it again changes nothing. Settings tokens are not API keys (404): PUT …/settings manages them. ' +
          'Needs endpoints:update.',
        tags: TAGS,
        params: KeyParams,
        response: { 204: Type.Null({ description: 'Revoked' }), ...Errors409 },
      },
    },
    async (req, reply) => {
      req.caller.requirePermission('endpoints:update');
      const keyId = int64Param(req.params.key_id, 'key_id');
      const revoked = await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, req.caller, req.params.id, { writable: true });
        return store.revokeEndpointApiKey(tx, endpoint.id, keyId);
      });
      if (!revoked) throw notFound();
      return reply.status(204).send(null);
    },
  );
}
