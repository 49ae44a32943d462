// The endpoint API's request and response shapes (OpenAPI comes from them) and the row -> JSON views behind them.
// One schema object per operation, so routes/endpoints.ts reads as a table of operations.
import { Type, type TLiteral, type TUnion } from '@sinclair/typebox';
import { Nullable, Strict, Timestamp, Uuid } from '../../shared/schema.ts';
import { CAPTURE_LEVELS, ENDPOINT_STATUSES, type EndpointRow } from '../../store/endpoints.ts';
import { PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX } from '../services/endpoints.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';
import { TagQuery, tagsBody, TagsView } from './tags.ts';

const literals = <T extends readonly string[]>(values: T) => Type.Union(values.map((v) => Type.Literal(v))) as unknown as TUnion<TLiteral<T[number]>[]>;

/** The Endpoint resource of docs/api.md, plus the capture settings docs/api.md says are readable on Get. */
const EndpointView = Type.Object(
  {
    id: Type.Integer({ description: 'Internal numeric id; prefer uuid in API references' }),
    uuid: Uuid({ description: 'Stable identifier used in every endpoint URL' }),
    user_id: Type.Integer({ description: 'Owner' }),
    domain_id: Nullable(Type.Integer({ description: 'Domain anchoring the endpoint; null = the platform default domain' })),
    subdomain: Type.String({ description: '`@` means the root of the domain' }),
    hostname: Type.String({ description: 'Public FQDN' }),
    public_url: Type.String({ description: 'Same as hostname: a bare FQDN with no scheme' }),
    protocol: literals(['unified', 'http', 'tcp', 'udp'] as const),
    is_custom: Type.Boolean({ description: 'True when the subdomain was chosen by the user' }),
    status: literals(ENDPOINT_STATUSES),
    mtls_mode: literals(['disabled', 'optional', 'required'] as const),
    ephemeral: Type.Boolean(),
    last_active_at: Nullable(Timestamp({ description: 'Tracked for ephemeral endpoints only' })),
    dedicated_tcp_port: Nullable(Type.Integer()),
    dedicated_udp_port: Nullable(Type.Integer()),
    capture_enabled: Type.Boolean(),
    capture_level: Nullable(literals(CAPTURE_LEVELS)),
    origin_url: Nullable(Type.String({ description: 'Requests go to this origin instead of agents (PUT /v1/endpoints/{id}/origin)' })),
    certificate_id: Nullable(Type.Integer({ description: 'The library certificate served (PUT /v1/endpoints/{id}/certificate); null = the platform certificate' })),
    tags: TagsView,
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'Endpoint' },
);

/** docs/api.md's create response: a subset of the resource (no user_id, last_active_at or ports), with the tags. */
const CreatedView = Type.Pick(EndpointView, [
  'id',
  'uuid',
  'subdomain',
  'hostname',
  'public_url',
  'protocol',
  'is_custom',
  'domain_id',
  'status',
  'mtls_mode',
  'created_at',
  'ephemeral',
  'updated_at',
  'certificate_id',
  'tags',
]);

const AdminEndpointView = Type.Object({ ...EndpointView.properties, paused_at: Nullable(Timestamp({ description: 'Set while paused over plan limits' })) });

const IdParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
const Port = Type.Integer({ minimum: 1024, maximum: 65535 });
const Errors409 = { ...ErrorResponses, 409: ErrorBody };
const EmptyBody = Type.Null({ description: 'Empty body' });

export function endpointView(e: EndpointRow) {
  return {
    id: e.id,
    uuid: e.uuid,
    user_id: e.user_id,
    domain_id: e.domain_id,
    subdomain: e.subdomain,
    hostname: e.hostname,
    public_url: e.hostname,
    protocol: e.protocol,
    is_custom: e.is_custom,
    status: e.status,
    mtls_mode: e.mtls_mode,
    ephemeral: e.ephemeral,
    last_active_at: iso(e.last_active_at),
    dedicated_tcp_port: e.dedicated_tcp_port,
    dedicated_udp_port: e.dedicated_udp_port,
    capture_enabled: e.capture_enabled,
    capture_level: e.capture_level,
    origin_url: e.origin_url,
    certificate_id: e.certificate_id,
    tags: e.tags,
    created_at: iso(e.created_at),
    updated_at: iso(e.updated_at),
  };
}

export function createdView(e: EndpointRow) {
  const v = endpointView(e);
  return {
    id: v.id,
    uuid: v.uuid,
    subdomain: v.subdomain,
    hostname: v.hostname,
    public_url: v.public_url,
    protocol: v.protocol,
    is_custom: v.is_custom,
    domain_id: v.domain_id,
    status: v.status,
    mtls_mode: v.mtls_mode,
    created_at: v.created_at,
    ephemeral: v.ephemeral,
    updated_at: v.updated_at,
    certificate_id: v.certificate_id,
    tags: v.tags,
  };
}

export const adminEndpointView = (e: EndpointRow) => ({ ...endpointView(e), paused_at: iso(e.paused_at) });

export const portsView = (e: EndpointRow) => ({ ok: true as const, dedicated_tcp_port: e.dedicated_tcp_port, dedicated_udp_port: e.dedicated_udp_port });

// ---------------------------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------------------------

export const CreateEndpoint = {
  operationId: 'createEndpoint',
  summary: 'Create an endpoint',
  description:
    'subdomain is honoured only when is_custom is true, the plan includes custom_subdomains and the caller owns the domain ' +
    '(a verified domain of the active account; the platform domain when domain_id is omitted); otherwise a word-word-word ' +
    'name is generated and is_custom is false. `@` claims the domain root and needs the strict domain owner (or an admin). ' +
    'The permanent-endpoint quota and the organization endpoint limit are checked first.',
  tags: ['endpoints'],
  body: Strict({
    subdomain: Type.Optional(Type.String({ maxLength: 253, description: 'One DNS label (lowercased), or `@` for the domain root' })),
    is_custom: Type.Optional(Type.Boolean()),
    domain_id: Type.Optional(Nullable(Type.Integer({ minimum: 1, description: 'A verified domain of the active account; omitted = platform domain' }))),
    protocol: Type.Optional(Type.Unknown({ deprecated: true, description: 'Retired: accepted and ignored (endpoints are unified)' })),
    region: Type.Optional(Type.Unknown({ deprecated: true, description: 'Retired: accepted and ignored (endpoints are region-less)' })),
    tags: Type.Optional(tagsBody()),
  }),
  response: { 201: CreatedView, ...Errors409 },
};

export const ListEndpoints = {
  operationId: 'listEndpoints',
  summary: 'List endpoints, newest first',
  description:
    'Non-admins see the active account’s endpoints; admins see all and may filter by user_id. Ephemeral endpoints are ' +
    'included. page and page_size that are not positive integers fall back to their defaults; page_size above 100 is ' +
    'clamped; page × page_size beyond the resource-protection cap is 400 pagination_too_deep. tag keeps the endpoints carrying ' +
    'that tag (a malformed tag is 400 invalid_query).',
  tags: ['endpoints'],
  querystring: Type.Object({
    page: Type.Optional(Type.String({ description: 'Integer, 1-indexed; default 1' })),
    page_size: Type.Optional(Type.String({ description: `Integer; default ${PAGE_SIZE_DEFAULT}, max ${PAGE_SIZE_MAX} (larger is clamped)` })),
    q: Type.Optional(Type.String({ maxLength: 253, description: 'Substring of the subdomain, matched literally' })),
    domain_id: Type.Optional(Type.Integer({ minimum: 1 })),
    status: Type.Optional(literals(ENDPOINT_STATUSES)),
    include_ephemeral: Type.Optional(Type.String({ description: 'Accepted for compatibility; ephemerals are always included' })),
    ephemeral_only: Type.Optional(Type.String({ description: '`1` returns only ephemeral endpoints' })),
    user_id: Type.Optional(Type.String({ description: 'Admins only: one owner’s endpoints. Ignored for everyone else.' })),
    tag: Type.Optional(TagQuery),
  }),
  response: {
    200: Type.Object({ items: Type.Array(EndpointView), total: Type.Integer(), page: Type.Integer(), page_size: Type.Integer() }),
    ...ErrorResponses,
  },
};

export const GetEndpoint = {
  operationId: 'getEndpoint',
  summary: 'Get an endpoint',
  description: 'Another account’s endpoint is 404, the same as a missing one; admins can fetch any.',
  tags: ['endpoints'],
  params: IdParams,
  response: { 200: EndpointView, ...ErrorResponses },
};

export const DeleteEndpoint = {
  operationId: 'deleteEndpoint',
  summary: 'Delete an endpoint',
  description: 'Removes the endpoint and everything attached to it and frees its hostname and dedicated ports. Edges drop it through the change feed.',
  tags: ['endpoints'],
  params: IdParams,
  response: { 204: Type.Null({ description: 'Deleted' }), ...ErrorResponses },
};

export const PromoteEndpoint = {
  operationId: 'promoteEndpoint',
  summary: 'Promote an ephemeral endpoint to permanent',
  description:
    'No body (or {}). Clears the ephemeral flag, the device fingerprint and idle tracking; the endpoint then counts against ' +
    'the permanent quota. Transactional with row locks on the owner and the endpoint, so concurrent creates and promotes ' +
    'cannot exceed the quota. Over the quota the 403 body is a plain-text message naming the limit.',
  tags: ['endpoints'],
  params: IdParams,
  body: Strict({}),
  response: {
    200: Type.Object({ endpoint_id: Type.Integer(), uuid: Uuid(), ephemeral: Type.Literal(false) }),
    ...Errors409,
    // docs/api.md fixes a plain-text body for the quota refusal; the other 403s keep the uniform JSON body.
    403: {
      description: 'Missing permission or suspended account (JSON), or the permanent quota reached (plain text naming the limit)',
      content: {
        'application/json': { schema: ErrorBody },
        'text/plain': { schema: Type.String({ example: 'Permanent endpoint limit reached: 10 of 10 (plan pro)' }) },
      },
    },
  },
};

export const SetPorts = {
  operationId: 'setEndpointPorts',
  summary: 'Assign or clear dedicated TCP/UDP ports',
  description:
    'A port (1024-65535) is stored exactly as requested, never reassigned; null clears it; an omitted field keeps its ' +
    'current value. Assigning a new port needs the dedicated_ports entitlement, room under the plan’s dedicated_ports_max ' +
    '(0 = unlimited; each TCP or UDP port counts one across the owner’s endpoints) and the plan’s verification gate; ' +
    'the endpoint then turns `provisioning` until an edge has bound the port. Clearing ports is always allowed.',
  tags: ['endpoints'],
  params: IdParams,
  body: Strict({
    dedicated_tcp_port: Type.Optional(Nullable(Port)),
    dedicated_udp_port: Type.Optional(Nullable(Port)),
  }),
  response: {
    200: Type.Object({ ok: Type.Literal(true), dedicated_tcp_port: Nullable(Type.Integer()), dedicated_udp_port: Nullable(Type.Integer()) }),
    ...Errors409,
  },
};

export const SetCapture = {
  operationId: 'setEndpointCapture',
  summary: 'Set request capture',
  description:
    'A full write: capture_enabled is false when omitted; capture_level `full`, `metadata` or `off` (empty or omitted ' +
    'clears it) is advisory, except that `off` also turns capture_enabled off. 200 with an empty body. A paused ' +
    'endpoint is read-only (409 quota_paused).',
  tags: ['endpoints'],
  params: IdParams,
  body: Strict({
    capture_enabled: Type.Optional(Type.Boolean()),
    capture_level: Type.Optional(Type.String({ description: '`full`, `metadata`, `off`, or empty to clear' })),
  }),
  response: { 200: EmptyBody, ...Errors409, 415: ErrorBody },
};

export const CreateEphemeral = {
  operationId: 'createEphemeralEndpoint',
  summary: 'Create an ephemeral endpoint in the active account (the agent one-shot flow)',
  description:
    'What an edge calls, with the agent’s own API key, when an agent connects without naming an endpoint. The endpoint has a ' +
    'generated name on the platform domain, counts against no quota until promoted, and is removed by the janitor once its ' +
    'agents have been gone for the idle window.',
  tags: ['endpoints'],
  body: Strict({ device_fingerprint: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })), tags: Type.Optional(tagsBody()) }),
  response: { 201: EndpointView, ...ErrorResponses },
};

export const SetTags = {
  operationId: 'setEndpointTags',
  summary: 'Replace an endpoint’s tags',
  description:
    'The whole set: tags not sent are removed, [] removes all. Tags are labels for your own use (configuration as code ' +
    'tells its endpoints apart by them); edges ignore them, so this write does not reach them. A paused endpoint is ' +
    'read-only (409 quota_paused). Answers the endpoint.',
  tags: ['endpoints'],
  params: IdParams,
  body: Strict({ tags: tagsBody('. The whole set: [] removes every tag') }),
  response: { 200: EndpointView, ...Errors409 },
};

export const AdminCreateEphemeral = {
  operationId: 'createEphemeralEndpointForUser',
  summary: 'Create an ephemeral endpoint for a user (as an agent’s one-shot flow does)',
  description: 'In the user’s personal account, on the platform domain, with a generated name. No quota applies until it is promoted.',
  tags: ['admin'],
  body: Strict({ user_id: Type.Integer({ minimum: 1 }), device_fingerprint: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })) }),
  response: { 201: EndpointView, ...ErrorResponses },
};

export const SetPaused = (paused: boolean) => ({
  operationId: paused ? 'pauseEndpoint' : 'unpauseEndpoint',
  summary: paused ? 'Pause an endpoint over plan limits: its settings become read-only (409 quota_paused)' : 'Lift an endpoint’s pause',
  tags: ['admin'],
  params: IdParams,
  response: { 200: AdminEndpointView, ...ErrorResponses },
});
