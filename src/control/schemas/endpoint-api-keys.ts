// The endpoint API keys' shapes: the listed key (never its secret), the created key (its secret, once) and the
// create body; one schema object per operation.
import { Type } from '@sinclair/typebox';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import { MAX_LIVE_API_KEYS, type VisitorTokenRow } from '../../store/visitor-auth.ts';
import { NO_CONTROL_PATTERN } from '../validation.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

const TAGS = ['visitor-auth'];

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

export function apiKeyView(k: VisitorTokenRow) {
  return { id: k.id, label: k.label, created_at: iso(k.created_at), expires_at: iso(k.expires_at), last_used_at: iso(k.last_used_at), revoked_at: iso(k.revoked_at) };
}

const CreateBody = Strict({
  name: Type.String({ minLength: 1, maxLength: 100, pattern: NO_CONTROL_PATTERN, description: 'The key’s label; sent to the agent as X-Edge-Auth-User' }),
  expires_at: Type.Optional(Nullable(Timestamp({ description: 'RFC 3339, in the future; omitted or null: never' }))),
});

const EndpointParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
const KeyParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }), key_id: Type.String({ description: 'API key id (int64)' }) });
const Errors409 = { ...ErrorResponses, 409: ErrorBody };

export function createdApiKeyView(k: VisitorTokenRow, token: string) {
  return { id: k.id, label: k.label, created_at: iso(k.created_at), expires_at: iso(k.expires_at), token };
}

// ---------------------------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------------------------

export const CreateApiKey = {
  operationId: 'createEndpointApiKey',
  summary: 'Create an endpoint API key (a token-mode visitor token)',
  description:
    'Generates a token that visitors present as in token mode (Authorization: Bearer, or the configured header or cookie). ' +
    'The token is in this answer only. Listed under the settings’ tokens; accepted while the endpoint is in token mode, ' +
    `until it expires or is revoked. At most ${MAX_LIVE_API_KEYS} live keys per endpoint. Needs endpoints:update.`,
  tags: TAGS,
  params: EndpointParams,
  body: CreateBody,
  response: { 201: CreatedApiKey, ...Errors409 },
};

export const ListApiKeys = {
  operationId: 'listEndpointApiKeys',
  summary: 'List the endpoint’s API keys',
  description: 'Oldest first, revoked ones included (with revoked_at). Never the secret. Needs endpoints:read.',
  tags: TAGS,
  params: EndpointParams,
  response: { 200: Type.Object({ items: Type.Array(ApiKeyView) }), ...ErrorResponses },
};

export const GetApiKey = {
  operationId: 'getEndpointApiKey',
  summary: 'Get one endpoint API key',
  description: 'Never the secret. Needs endpoints:read.',
  tags: TAGS,
  params: KeyParams,
  response: { 200: ApiKeyView, ...ErrorResponses },
};

export const RevokeApiKey = {
  operationId: 'revokeEndpointApiKey',
  summary: 'Revoke an endpoint API key',
  description:
    'Every edge refuses the key from its next request once the change reaches it through the feed. The key stays listed with ' +
    'revoked_at; revoking it again changes nothing. Settings tokens are not API keys (404): PUT …/settings manages them. ' +
    'Needs endpoints:update.',
  tags: TAGS,
  params: KeyParams,
  response: { 204: Type.Null({ description: 'Revoked' }), ...Errors409 },
};
