// RBAC clients of an endpoint (SPEC.md "RBAC (per endpoint)", docs/rbac.md "Clients", "Invites and self-registration"):
// create, read, update, delete, invites, the self-registration setting, and the public registration route edges call.
import { randomBytes } from 'node:crypto';
import { FormatRegistry, Type } from '@sinclair/typebox';
import bcrypt from 'bcrypt';
import { fail } from '../../shared/errors.ts';
import { REGISTRATION_PATH, verifyVisitorIdentity, type RegistrationResult, type VisitorIdentityClaims } from '../../shared/registration.ts';
import { isUuid, Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import { RBAC_CLIENT_STATUSES, type RbacClientStatus, type VisitorAuthMode } from '../../shared/snapshot.ts';
import { BCRYPT_MAX_PASSWORD_BYTES, BCRYPT_MIN_COST, tokenDigest, visitorTokenKey } from '../../shared/visitor-credentials.ts';
import type { Queryable } from '../../store/db.ts';
import { isUniqueViolation } from '../../store/db.ts';
import { findEndpointByUuid, type EndpointRow } from '../../store/endpoints.ts';
import { transactionWithFeedVersion } from '../../store/feed-changes.ts';
import { listOAuthProviders } from '../../store/oauth-providers.ts';
import { findClient, listClients } from '../../store/rbac.ts';
import * as store from '../../store/rbac-clients.ts';
import {
  MAX_CLIENTS_PER_ENDPOINT,
  MAX_IDENTITIES_PER_CLIENT,
  REGISTRATION_SOURCES,
  type ClientPatch,
  type Collision,
  type Identity,
  type RegistrationSource,
} from '../../store/rbac-clients.ts';
import { findAuthSettings } from '../../store/visitor-auth.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller, readableEndpoint, requireEndpointEntitlement } from '../endpoint-access.ts';
import { int64Param, type ControlApp, type ControlDeps } from '../http.ts';
import { ErrorBody, ErrorResponses, iso, RbacClientView, rbacClientView } from '../views.ts';
import { allowedDomain } from './oauth-providers.ts';
import { invalid, MIN_TOKEN_LENGTH } from './endpoint-settings.ts';

const FEATURE = 'rbac' as const;

// ---------------------------------------------------------------------------------------------------------------
// Validation: what a field's schema leaves open is decided here, with a 400 naming the field.
// ---------------------------------------------------------------------------------------------------------------

/**
 * Visible ASCII, no spaces: the identifier reaches the agent in X-Edge-Rbac-Client, and a header value above U+00FF
 * cannot be sent at all. E-mail addresses, usernames and `<provider>:<subject>` all fit.
 */
const IDENTIFIER = /^[\x21-\x7e]{1,255}$/;
const NO_CONTROL = /^[^\x00-\x1f\x7f]*$/;
/** RFC 7617 §2: a user-id cannot contain a colon; no control characters either. */
const USERNAME = /^[^:\x00-\x1f\x7f]{1,128}$/;
/** RFC 6750 §2.1 b64token, as settings tokens (endpoint-settings.ts). */
const TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
const MAX_TOKEN_LENGTH = 512;
const MAX_METADATA_BYTES = 16 * 1024;
/** Invites live 72 hours unless told otherwise, a year at most (SPEC.md). */
export const DEFAULT_INVITE_HOURS = 72;
export const MAX_INVITE_HOURS = 8760;
export const MAX_ALLOWED_EMAIL_DOMAINS = 100;
/** Passwords visitors choose at registration: longer than what an admin may set (any), as nobody vets them. */
export const MIN_REGISTRATION_PASSWORD_LENGTH = 8;

function identifierOf(raw: string, field = 'identifier'): string {
  const value = raw.toLowerCase();
  if (value === '') throw invalid(field, 'required (1-255 visible ASCII characters)');
  if (!IDENTIFIER.test(value)) throw invalid(field, '1-255 visible ASCII characters, no spaces (it is sent to the agent in a header)');
  return value;
}

/** Lower-case e-mail, or null for none (null or ""). */
function emailOf(raw: string | null | undefined, field = 'email'): string | null {
  if (raw === null || raw === undefined || raw === '') return null;
  const value = raw.toLowerCase();
  if (value.length > 320 || !FormatRegistry.Get('email')!(value)) throw invalid(field, `"${raw}" is not an e-mail address`);
  return value;
}

function displayNameOf(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (raw.length > 255 || !NO_CONTROL.test(raw)) throw invalid('display_name', 'at most 255 characters, no control characters');
  return raw;
}

function statusOf(raw: string | undefined): RbacClientStatus | undefined {
  if (raw === undefined) return undefined;
  if (raw === '') return 'active';
  if (!(RBAC_CLIENT_STATUSES as readonly string[]).includes(raw)) throw invalid('status', `must be one of ${RBAC_CLIENT_STATUSES.join(', ')}`);
  return raw as RbacClientStatus;
}

function registrationSourceOf(raw: string | undefined): RegistrationSource {
  if (raw === undefined || raw === '') return 'admin';
  if (!(REGISTRATION_SOURCES as readonly string[]).includes(raw)) throw invalid('registration_source', `must be one of ${REGISTRATION_SOURCES.join(', ')}`);
  return raw as RegistrationSource;
}

function metadataOf(raw: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (raw === undefined) return undefined;
  if (Buffer.byteLength(JSON.stringify(raw), 'utf8') > MAX_METADATA_BYTES) throw invalid('metadata', `at most ${MAX_METADATA_BYTES} bytes of JSON`);
  return raw;
}

/** Username and password of a client, both or neither; the password within what bcrypt reads whole. */
function credentialsOf(username: string | undefined, password: string | undefined, minPassword = 1): { username: string; password: string } | undefined {
  if (username === undefined && password === undefined) return undefined;
  if (username === undefined) throw invalid('username', 'required with password (they are set together)');
  if (password === undefined) throw invalid('password', 'required with username (they are set together)');
  if (!USERNAME.test(username)) throw invalid('username', '1-128 characters, no colon (RFC 7617) or control characters');
  if (password.length < minPassword) throw invalid('password', `at least ${minPassword} characters`);
  // bcrypt reads 72 bytes and ignores the rest: a longer password would be accepted by its first 72 bytes alone.
  if (Buffer.byteLength(password, 'utf8') > BCRYPT_MAX_PASSWORD_BYTES) throw invalid('password', `longer than ${BCRYPT_MAX_PASSWORD_BYTES} bytes (UTF-8), which bcrypt cannot use whole`);
  return { username, password };
}

/** `evc_` and 256 random bits: an RFC 6750 b64token, told apart from endpoint API keys (`evk_`) by secret scanners. */
export function generateClientToken(): string {
  return `evc_${randomBytes(32).toString('base64url')}`;
}

/** The token a body sets, if any: `auto_generate_token` xor `token`. */
function tokenOf(auto: boolean | undefined, token: string | undefined): { token: string; generated: boolean } | undefined {
  if (auto === true && token !== undefined) throw invalid('token', 'auto_generate_token and token are mutually exclusive');
  if (auto === true) return { token: generateClientToken(), generated: true };
  if (token === undefined) return undefined;
  if (token.length < MIN_TOKEN_LENGTH || token.length > MAX_TOKEN_LENGTH || !TOKEN.test(token)) {
    throw invalid('token', `${MIN_TOKEN_LENGTH}-${MAX_TOKEN_LENGTH} characters of A-Z a-z 0-9 - . _ ~ + / (then = padding): RFC 6750 b64token`);
  }
  return { token, generated: false };
}

/** The credential methods each visitor-auth mode enables (docs/rbac.md): the mode is the endpoint's one method. */
const METHOD_OF_MODE: Record<VisitorAuthMode, 'password' | 'token' | 'identities' | null> = {
  none: null,
  basic: 'password',
  token: 'token',
  oauth: 'identities',
  oidc: 'identities',
};
const MODES_OF_METHOD = { password: 'basic', token: 'token', identities: 'oauth or oidc' } as const;

async function modeOf(q: Queryable, endpointId: number): Promise<VisitorAuthMode> {
  return (await findAuthSettings(q, endpointId))?.mode ?? 'none';
}

function requireMethod(mode: VisitorAuthMode, method: 'password' | 'token' | 'identities', field: string): void {
  if (METHOD_OF_MODE[mode] === method) return;
  throw invalid(field, `the endpoint's visitor authentication must be mode ${MODES_OF_METHOD[method]} for this credential (it is ${mode}; PUT /v1/endpoints/{id}/settings)`, {
    mode,
  });
}

/** 400 unless each credential sent is the one the endpoint's visitor-auth mode uses (create and update send the same). */
async function requireCredentialsOfMode(
  q: Queryable,
  endpointId: number,
  body: { token?: string; identities?: readonly unknown[] },
  credentials: object | undefined,
  token: object | undefined,
): Promise<void> {
  const mode = await modeOf(q, endpointId);
  if (credentials) requireMethod(mode, 'password', 'password');
  if (token) requireMethod(mode, 'token', body.token !== undefined ? 'token' : 'auto_generate_token');
  if (body.identities !== undefined && body.identities.length > 0) requireMethod(mode, 'identities', 'identities');
}

/** 400 on `field` once the endpoint holds its most clients (a create and an invite each add one). */
async function requireRoomForClient(q: Queryable, endpointId: number, field: string): Promise<void> {
  if ((await store.countClients(q, endpointId)) >= MAX_CLIENTS_PER_ENDPOINT) {
    throw invalid(field, `an endpoint has at most ${MAX_CLIENTS_PER_ENDPOINT} clients`, { limit: MAX_CLIENTS_PER_ENDPOINT });
  }
}

/** A written client as answered, with its token when the server generated it: this answer is the only place it shows. */
function clientWithToken(client: Parameters<typeof rbacClientView>[0], token: { token: string; generated: boolean } | undefined) {
  return { ...rbacClientView(client), ...(token?.generated ? { generated_token: token.token } : {}) };
}

/**
 * Identities as sent, canonical: `provider` is the endpoint's OAuth provider by id (number or decimal string) or by
 * name, stored as the id in decimal; each pair once. An unknown provider is a 400.
 */
async function identitiesOf(q: Queryable, endpointId: number, raw: readonly { provider: string | number; subject: string }[], field = 'identities'): Promise<Identity[]> {
  const providers = await listOAuthProviders(q, endpointId);
  const seen = new Set<string>();
  const out: Identity[] = [];
  raw.forEach((i, n) => {
    const key = String(i.provider);
    const provider = providers.find((p) => String(p.id) === key) ?? providers.find((p) => p.name === key);
    if (!provider) throw invalid(`${field}.${n}.provider`, `"${key}" is not an OAuth provider of this endpoint (give its id or name)`);
    if (i.subject === '' || i.subject.length > 255 || !NO_CONTROL.test(i.subject)) throw invalid(`${field}.${n}.subject`, '1-255 characters, no control characters');
    const identity = { provider: String(provider.id), subject: i.subject };
    const k = `${identity.provider}\n${identity.subject}`;
    if (seen.has(k)) throw invalid(`${field}.${n}`, 'the same identity appears twice');
    seen.add(k);
    out.push(identity);
  });
  return out;
}

/** The 409 for a collision, naming the field (and the value, except a token's). */
function conflict(c: Collision) {
  switch (c.field) {
    case 'token':
      return fail.already_exists(
        c.with === 'client' ? 'Another client of this endpoint has this token' : 'The token equals a live settings token or API key of this endpoint',
        { field: 'token' },
      );
    case 'identities':
      return fail.already_exists('This OAuth identity is already linked to a client of this endpoint', { field: 'identities', value: c.value });
    case 'username':
      if (c.with === 'basic_user') return fail.already_exists('The username is one of the endpoint’s basic_users (settings)', { field: 'username', value: c.value });
  }
  return fail.already_exists(`Another client of this endpoint has this ${c.field === 'email' ? 'e-mail' : c.field}`, { field: c.field, value: c.value });
}

/** Unique violations that a race past findCollision can still raise, as the same 409s. */
function collisionOf(err: unknown): Collision | null {
  const keys: Array<[string, Collision]> = [
    ['rbac_clients_identifier_key', { field: 'identifier', with: 'client', value: '' }],
    ['rbac_clients_email_key', { field: 'email', with: 'client', value: '' }],
    ['rbac_clients_username_key', { field: 'username', with: 'client', value: '' }],
    ['rbac_clients_token_key', { field: 'token', with: 'client' }],
    ['rbac_client_identities_key', { field: 'identities', with: 'client', value: { provider: '', subject: '' } }],
  ];
  for (const [key, c] of keys) if (isUniqueViolation(err, key)) return c;
  return null;
}

async function mappingCollisions<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const c = collisionOf(err);
    if (c) throw conflict(c);
    throw err;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Schemas
// ---------------------------------------------------------------------------------------------------------------

const IdentityBody = Strict({
  provider: Type.Union([Type.Integer({ minimum: 1 }), Type.String({ minLength: 1, maxLength: 100 })], {
    description: 'The endpoint’s OAuth/OIDC provider: its id (number or decimal string) or its name; read back as the id (decimal string)',
  }),
  subject: Type.String({ minLength: 1, maxLength: 255, description: 'The provider’s subject (sub) of the visitor' }),
});
const IdentitiesBody = Type.Array(IdentityBody, { maxItems: MAX_IDENTITIES_PER_CLIENT, description: 'Linked OAuth/OIDC identities (mode oauth or oidc)' });
const Metadata = Type.Object({}, { additionalProperties: true, description: `Free-form JSON object, at most ${MAX_METADATA_BYTES} bytes` });
const StatusField = Type.String({ enum: [...RBAC_CLIENT_STATUSES], description: 'active (also when empty), invited, disabled or revoked' });

const CreateBody = Strict({
  identifier: Type.String({ maxLength: 1024, description: 'Required; canonicalised to lower case; 1-255 visible ASCII characters; unique per endpoint' }),
  display_name: Type.Optional(Type.String({ maxLength: 1024 })),
  email: Type.Optional(Nullable(Type.String({ maxLength: 1024, description: 'Lower-cased; unique per endpoint; matched against a login’s verified e-mail' }))),
  username: Type.Optional(Type.String({ maxLength: 1024, description: 'With password; mode basic' })),
  password: Type.Optional(Type.String({ maxLength: 1024, description: `With username; mode basic; stored as a bcrypt hash; at most ${BCRYPT_MAX_PASSWORD_BYTES} bytes` })),
  auto_generate_token: Type.Optional(Type.Boolean({ description: 'Mode token: generate a token, returned once as generated_token' })),
  token: Type.Optional(Type.String({ maxLength: 1024, description: 'Mode token: a token of your own (RFC 6750 b64token, ≥ 16 characters); stored as a keyed digest' })),
  identities: Type.Optional(IdentitiesBody),
  status: Type.Optional(StatusField),
  metadata: Type.Optional(Metadata),
  registration_source: Type.Optional(Type.String({ enum: [...REGISTRATION_SOURCES], description: 'admin (default), self, invite or sso' })),
});

const UpdateBody = Strict({
  display_name: Type.Optional(Type.String({ maxLength: 1024 })),
  email: Type.Optional(Nullable(Type.String({ maxLength: 1024, description: 'null or "" removes it' }))),
  status: Type.Optional(
    Type.String({ enum: ['active', 'disabled', 'revoked'], description: 'active, disabled or revoked; a client never goes back to invited (400)' }),
  ),
  username: Type.Optional(Type.String({ maxLength: 1024, description: 'Password reset: with password; mode basic' })),
  password: Type.Optional(Type.String({ maxLength: 1024 })),
  auto_generate_token: Type.Optional(Type.Boolean({ description: 'Token reset (mode token): a new token, returned once as generated_token' })),
  token: Type.Optional(Type.String({ maxLength: 1024, description: 'Token reset (mode token) to a token of your own' })),
  identities: Type.Optional(Type.Array(IdentityBody, { maxItems: MAX_IDENTITIES_PER_CLIENT, description: 'Replaces the linked identities (mode oauth or oidc)' })),
  metadata: Type.Optional(Metadata),
});

const ClientWithToken = Type.Object(
  {
    ...RbacClientView.properties,
    generated_token: Type.Optional(Type.String({ description: 'Only when auto_generate_token was true: the token, shown this once' })),
  },
  { description: 'RBAC client' },
);

const InviteBody = Strict({
  email: Type.Optional(Nullable(Type.String({ maxLength: 1024, description: 'Stored and echoed; becomes the identifier' }))),
  display_name: Type.Optional(Type.String({ maxLength: 1024 })),
  expires_in_hours: Type.Optional(Type.Integer({ description: `Default ${DEFAULT_INVITE_HOURS} when omitted or ≤ 0; capped at ${MAX_INVITE_HOURS}` })),
});

const InviteView = Type.Object(
  {
    id: Type.Integer({ description: 'The placeholder client' }),
    invite_token: Type.String({ description: 'Single use; shown this once (only a keyed digest is stored)' }),
    invite_url: Type.String({ description: 'Relative: /register?endpoint=<endpoint id>&invite=<invite_token>, served by the edge on the endpoint’s host' }),
    email: Nullable(Type.String()),
    display_name: Type.String(),
    expires_at: Timestamp(),
    status: Type.Literal('invited'),
  },
  { description: 'Client invite' },
);

const SettingsView = Type.Object(
  {
    self_registration: Type.Object({
      enabled: Type.Boolean(),
      allowed_email_domains: Type.Array(Type.String(), { description: 'Lower-case; empty: any verified e-mail (or none)' }),
    }),
  },
  { description: 'RBAC settings of an endpoint' },
);

const SettingsBody = Strict({
  self_registration: Strict({
    enabled: Type.Boolean({ description: 'true needs mode oauth or oidc' }),
    allowed_email_domains: Type.Optional(
      Type.Array(Type.String({ maxLength: 253 }), { maxItems: MAX_ALLOWED_EMAIL_DOMAINS, description: 'Bare domains; omitted: kept as stored' }),
    ),
  }),
});

const RegistrationBody = Strict({
  endpoint_id: Type.String({ description: 'The endpoint uuid' }),
  invite_token: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
  username: Type.Optional(Type.String({ maxLength: 1024 })),
  password: Type.Optional(Type.String({ maxLength: 1024 })),
  identity: Type.Optional(Type.String({ minLength: 1, maxLength: 8192, description: 'The edge’s identity assertion of the visitor’s login' })),
});

const RegistrationView = Type.Object({
  client_id: Type.Integer(),
  identifier: Type.String(),
  status: Type.Literal('active'),
  registration_source: Type.Union([Type.Literal('invite'), Type.Literal('self')]),
  feed_version: Type.Integer({ description: 'The feed version that carries the change: an edge caught up to it admits the client' }),
});

const EndpointParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
const ClientParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }), client_id: Type.String({ description: 'Client id (int64)' }) });
const Errors409 = { ...ErrorResponses, 409: ErrorBody };
const clientNotFound = () => fail.not_found('Client not found');

// ---------------------------------------------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------------------------------------------

export function rbacClientRoutes(app: ControlApp, { db, config, secrets }: ControlDeps): void {
  const TAGS = ['rbac'];
  const tokenKey = visitorTokenKey(secrets);

  /** A write: permission (and, for callers acting in their own account, the plan) before any query; the endpoint locked. */
  async function writable(tx: Queryable, caller: Caller, uuid: string, permission: 'endpoints:write' | 'endpoints:delete'): Promise<EndpointRow> {
    caller.requirePermission(permission);
    if (!caller.isAdmin) caller.requireEntitlement(FEATURE);
    const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
    await requireEndpointEntitlement(tx, caller, config.plans, endpoint, FEATURE);
    return endpoint;
  }

  async function readClient(q: Queryable, endpointId: number, clientId: number) {
    const client = await findClient(q, endpointId, clientId);
    if (!client) throw clientNotFound();
    return client;
  }

  app.post(
    '/v1/endpoints/:id/rbac/clients',
    {
      schema: {
        summary: 'Create an RBAC client',
        description:
          'Strict. identifier is required and lower-cased, as is email. Credentials must match the endpoint’s visitor-auth mode: ' +
          'username + password (together) in mode basic, token or auto_generate_token (not both) in mode token, identities in mode ' +
          'oauth/oidc; 400 otherwise. status defaults to active. The endpoint’s default roles are assigned (read them from memberships). ' +
          '409 when the identifier, e-mail, username, token or an identity is another client’s, the username one of the settings’ ' +
          'basic_users or the token a live settings token or API key. Answers 200 with the client and, for auto_generate_token, ' +
          'generated_token (this once). Needs the rbac entitlement and endpoints:write.',
        tags: TAGS,
        params: EndpointParams,
        body: CreateBody,
        response: { 200: ClientWithToken, ...Errors409 },
      },
    },
    async (req) => {
      const body = req.body;
      req.caller.requirePermission('endpoints:write');
      const identifier = identifierOf(body.identifier);
      const email = emailOf(body.email);
      const displayName = displayNameOf(body.display_name) ?? '';
      const status = statusOf(body.status) ?? 'active';
      const source = registrationSourceOf(body.registration_source);
      const metadata = metadataOf(body.metadata) ?? {};
      const credentials = credentialsOf(body.username, body.password);
      const token = tokenOf(body.auto_generate_token, body.token);
      // bcrypt off the lock, and only for a body that passed everything that needs no database.
      const passwordHash = credentials ? await bcrypt.hash(credentials.password, BCRYPT_MIN_COST) : null;
      const client = await mappingCollisions(() =>
        db.transaction(async (tx) => {
          const endpoint = await writable(tx, req.caller, req.params.id, 'endpoints:write');
          await requireCredentialsOfMode(tx, endpoint.id, body, credentials, token);
          const identities = await identitiesOf(tx, endpoint.id, body.identities ?? []);
          await requireRoomForClient(tx, endpoint.id, 'identifier');
          const digest = token ? tokenDigest(tokenKey, token.token) : null;
          const collision = await store.findCollision(tx, endpoint.id, { identifier, email, username: credentials?.username, tokenDigest: digest, identities });
          if (collision) throw conflict(collision);
          const id = await store.insertClient(tx, endpoint.id, {
            identifier,
            displayName,
            email,
            username: credentials?.username ?? null,
            passwordHash,
            tokenDigest: digest,
            status,
            registrationSource: source,
            metadata,
            identities,
          });
          return readClient(tx, endpoint.id, id);
        }),
      );
      return clientWithToken(client, token);
    },
  );

  app.get(
    '/v1/endpoints/:id/rbac/clients',
    {
      schema: {
        summary: 'List the endpoint’s RBAC clients',
        description: 'By id. Never a password hash or token: has_password, has_token and has_oauth say which credentials a client has. Needs endpoints:read.',
        tags: TAGS,
        params: EndpointParams,
        response: { 200: Type.Array(RbacClientView), ...ErrorResponses },
      },
    },
    async (req) => {
      const endpoint = await readableEndpoint(db, req.caller, req.params.id);
      return (await listClients(db, endpoint.id)).map(rbacClientView);
    },
  );

  app.get(
    '/v1/endpoints/:id/rbac/clients/:client_id',
    {
      schema: {
        summary: 'Get one RBAC client',
        description: 'Needs endpoints:read. 404 when the client is not on this endpoint.',
        tags: TAGS,
        params: ClientParams,
        response: { 200: RbacClientView, ...ErrorResponses },
      },
    },
    async (req) => {
      req.caller.requirePermission('endpoints:read');
      const clientId = int64Param(req.params.client_id, 'client_id');
      const endpoint = await endpointForCaller(db, req.caller, req.params.id);
      return rbacClientView(await readClient(db, endpoint.id, clientId));
    },
  );

  app.put(
    '/v1/endpoints/:id/rbac/clients/:client_id',
    {
      schema: {
        summary: 'Update an RBAC client',
        description:
          'Strict, partial: omitted fields are kept. status active, disabled or revoked (invited is where a client starts, never where it ' +
          'goes back: 400); a client leaving invited loses its pending invite. Credential resets follow the endpoint’s mode as on create: ' +
          'username + password (mode basic), auto_generate_token or token (mode token; generated_token in this answer only), identities ' +
          '(mode oauth/oidc; replaces the linked ones). The same 409s as create. Effective on every edge from the next request. Needs ' +
          'the rbac entitlement and endpoints:write.',
        tags: TAGS,
        params: ClientParams,
        body: UpdateBody,
        response: { 200: ClientWithToken, ...Errors409 },
      },
    },
    async (req) => {
      const body = req.body;
      req.caller.requirePermission('endpoints:write');
      const clientId = int64Param(req.params.client_id, 'client_id');
      if (body.status === 'invited') throw invalid('status', 'a client cannot go back to invited (create an invite instead)');
      const status = body.status === undefined ? undefined : statusOf(body.status);
      const displayName = displayNameOf(body.display_name);
      const email = body.email === undefined ? undefined : emailOf(body.email);
      const metadata = metadataOf(body.metadata);
      const credentials = credentialsOf(body.username, body.password);
      const token = tokenOf(body.auto_generate_token, body.token);
      const passwordHash = credentials ? await bcrypt.hash(credentials.password, BCRYPT_MIN_COST) : null;
      const client = await mappingCollisions(() =>
        db.transaction(async (tx) => {
          const endpoint = await writable(tx, req.caller, req.params.id, 'endpoints:write');
          if (!(await store.lockClient(tx, endpoint.id, clientId))) throw clientNotFound();
          await requireCredentialsOfMode(tx, endpoint.id, body, credentials, token);
          const identities = body.identities === undefined ? undefined : await identitiesOf(tx, endpoint.id, body.identities);
          const digest = token ? tokenDigest(tokenKey, token.token) : undefined;
          const collision = await store.findCollision(tx, endpoint.id, { email, username: credentials?.username, tokenDigest: digest, identities }, clientId);
          if (collision) throw conflict(collision);
          const patch: ClientPatch = {
            displayName,
            email,
            status,
            metadata,
            identities,
            tokenDigest: digest,
            credentials: credentials && passwordHash ? { username: credentials.username, passwordHash } : undefined,
          };
          await store.updateClient(tx, endpoint.id, clientId, patch);
          return readClient(tx, endpoint.id, clientId);
        }),
      );
      return clientWithToken(client, token);
    },
  );

  app.delete(
    '/v1/endpoints/:id/rbac/clients/:client_id',
    {
      schema: {
        summary: 'Delete an RBAC client',
        description:
          'Its memberships, linked identities and invite go with it; every edge refuses its credentials from the next request. Needs ' +
          'the rbac entitlement and endpoints:delete.',
        tags: TAGS,
        params: ClientParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...Errors409 },
      },
    },
    async (req, reply) => {
      const clientId = int64Param(req.params.client_id, 'client_id');
      await db.transaction(async (tx) => {
        const endpoint = await writable(tx, req.caller, req.params.id, 'endpoints:delete');
        if (!(await store.deleteClient(tx, endpoint.id, clientId))) throw clientNotFound();
      });
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/v1/endpoints/:id/rbac/clients/invites',
    {
      schema: {
        summary: 'Invite a client',
        description:
          'Creates a placeholder client in status invited (identifier: the e-mail, else invite-<random>; the endpoint’s default roles ' +
          `assigned) and a single-use invite token, valid expires_in_hours (default ${DEFAULT_INVITE_HOURS} when omitted or ≤ 0, at most ` +
          `${MAX_INVITE_HOURS}). No mail is sent: hand the visitor invite_url, which the edge serves on the endpoint’s host. The token ` +
          'is in this answer only. 409 when the e-mail is another client’s. Needs the rbac entitlement and endpoints:write.',
        tags: TAGS,
        params: EndpointParams,
        body: InviteBody,
        response: { 200: InviteView, ...Errors409 },
      },
    },
    async (req) => {
      const body = req.body;
      req.caller.requirePermission('endpoints:write');
      const email = emailOf(body.email);
      const displayName = displayNameOf(body.display_name) ?? '';
      const hours = body.expires_in_hours === undefined || body.expires_in_hours <= 0 ? DEFAULT_INVITE_HOURS : Math.min(body.expires_in_hours, MAX_INVITE_HOURS);
      const inviteToken = `evi_${randomBytes(32).toString('base64url')}`;
      const { endpoint, clientId, expiresAt } = await mappingCollisions(() =>
        db.transaction(async (tx) => {
          const endpoint = await writable(tx, req.caller, req.params.id, 'endpoints:write');
          await requireRoomForClient(tx, endpoint.id, 'email');
          const identifier = email ?? `invite-${randomBytes(6).toString('hex')}`;
          const collision = await store.findCollision(tx, endpoint.id, { identifier, email });
          if (collision) throw conflict(collision);
          const clientId = await store.insertClient(tx, endpoint.id, {
            identifier,
            displayName,
            email,
            username: null,
            passwordHash: null,
            tokenDigest: null,
            status: 'invited',
            registrationSource: 'invite',
            metadata: {},
            identities: [],
          });
          const invite = await store.insertInvite(tx, endpoint.id, clientId, tokenDigest(tokenKey, inviteToken), new Date(Date.now() + hours * 3_600_000));
          return { endpoint, clientId, expiresAt: invite.expires_at };
        }),
      );
      return {
        id: clientId,
        invite_token: inviteToken,
        invite_url: `/register?endpoint=${endpoint.id}&invite=${encodeURIComponent(inviteToken)}`,
        email,
        display_name: displayName,
        expires_at: iso(expiresAt),
        status: 'invited' as const,
      };
    },
  );

  app.get(
    '/v1/endpoints/:id/rbac/settings',
    {
      schema: {
        summary: 'Read the endpoint’s RBAC settings',
        description: 'Self-registration: off unless turned on. Needs endpoints:read.',
        tags: TAGS,
        params: EndpointParams,
        response: { 200: SettingsView, ...ErrorResponses },
      },
    },
    async (req) => {
      const endpoint = await readableEndpoint(db, req.caller, req.params.id);
      return { self_registration: await store.readSelfRegistration(db, endpoint.id) };
    },
  );

  app.put(
    '/v1/endpoints/:id/rbac/settings',
    {
      schema: {
        summary: 'Configure the endpoint’s RBAC settings',
        description:
          'Self-registration lets a visitor who logged in through one of the endpoint’s providers become an active client with the ' +
          'default roles, without an invite (registration_source self). Turning it on needs mode oauth or oidc: a provider’s verified ' +
          'e-mail is what allowed_email_domains judges. Domains are bare names, lower-cased; empty: any login (with or without e-mail). ' +
          'Omitted allowed_email_domains keeps the stored list. Needs the rbac entitlement and endpoints:write.',
        tags: TAGS,
        params: EndpointParams,
        body: SettingsBody,
        response: { 200: SettingsView, ...Errors409 },
      },
    },
    async (req) => {
      const sent = req.body.self_registration;
      req.caller.requirePermission('endpoints:write');
      const domains =
        sent.allowed_email_domains === undefined
          ? undefined
          : [...new Set(sent.allowed_email_domains.map((d, i) => allowedDomain(d, `self_registration.allowed_email_domains.${i}`)))];
      return db.transaction(async (tx) => {
        const endpoint = await writable(tx, req.caller, req.params.id, 'endpoints:write');
        if (sent.enabled) {
          const mode = await modeOf(tx, endpoint.id);
          if (mode !== 'oauth' && mode !== 'oidc') {
            throw invalid('self_registration.enabled', `self-registration needs visitor-auth mode oauth or oidc (it is ${mode}): the login is what a visitor registers with`, {
              mode,
            });
          }
        }
        const stored = await store.readSelfRegistration(tx, endpoint.id);
        const next = { enabled: sent.enabled, allowed_email_domains: domains ?? stored.allowed_email_domains };
        await store.writeSelfRegistration(tx, endpoint.id, next);
        return { self_registration: next };
      });
    },
  );

  app.post(
    REGISTRATION_PATH,
    {
      config: { public: true },
      schema: {
        summary: 'Register a visitor as an RBAC client (called by edges)',
        description:
          'No API key: the invite token or the edge’s identity assertion is the credential. Exactly one way: invite_token with ' +
          'username + password (mode basic), invite_token with identity (mode oauth/oidc), or identity alone (self-registration, when ' +
          'enabled and the verified e-mail’s domain allowed). The invite is single use; the client becomes active. Answers the ' +
          'feed_version that carries the change. 404 invite_not_found (unknown, used, or another endpoint’s), 410 invite_expired, 401 ' +
          'invalid_identity_assertion, 403 self_registration_disabled / email_domain_not_allowed, 409 username or identity taken. ' +
          'A refused attempt changes nothing.',
        tags: TAGS,
        security: [],
        body: RegistrationBody,
        response: { 200: RegistrationView, 409: ErrorBody, 410: ErrorBody, ...ErrorResponses },
      },
    },
    async (req): Promise<RegistrationResult> => {
      const body = req.body;
      if (!isUuid(body.endpoint_id)) throw invalid('endpoint_id', 'must be the endpoint’s UUID');
      const endpointUuid = body.endpoint_id.toLowerCase();
      const hasPassword = body.username !== undefined || body.password !== undefined;
      const hasIdentity = body.identity !== undefined;
      if (hasPassword && hasIdentity) throw invalid('identity', 'register with username and password or with an identity, not both');
      if (!hasPassword && !hasIdentity) throw invalid('identity', 'register with username and password (and an invite) or with an identity');
      if (hasPassword && body.invite_token === undefined) throw invalid('invite_token', 'username and password register only through an invite');
      const credentials = hasPassword ? credentialsOf(body.username, body.password, MIN_REGISTRATION_PASSWORD_LENGTH) : undefined;
      let claims: VisitorIdentityClaims | null = null;
      if (hasIdentity) {
        claims = verifyVisitorIdentity(secrets, body.identity!, endpointUuid, Math.floor(Date.now() / 1000));
        if (!claims) throw fail.invalid_identity_assertion();
      }
      const passwordHash = credentials ? await bcrypt.hash(credentials.password, BCRYPT_MIN_COST) : null;
      const { value, feedVersion } = await mappingCollisions(() =>
        transactionWithFeedVersion(db, async (tx) => {
          const endpoint = await findEndpointByUuid(tx, endpointUuid, { forUpdate: true });
          if (!endpoint) throw body.invite_token !== undefined ? fail.invite_not_found() : fail.not_found('Endpoint not found');
          if (endpoint.paused_at) throw fail.quota_paused();
          const plan = await endpointPlan(tx, endpoint);
          if (!plan) throw fail.entitlement_required(`The endpoint’s plan does not include ${FEATURE}`, { feature: FEATURE });
          const mode = await modeOf(tx, endpoint.id);
          if (credentials) requireMethod(mode, 'password', 'password');
          else requireMethod(mode, 'identities', 'identity');
          const identity = claims ? { provider: claims.provider, subject: claims.subject } : null;

          if (body.invite_token !== undefined) {
            const invite = await store.lockInvite(tx, endpoint.id, tokenDigest(tokenKey, body.invite_token));
            if (!invite || invite.redeemed_at !== null || invite.status !== 'invited') throw fail.invite_not_found();
            if (invite.expires_at.getTime() <= Date.now()) throw fail.invite_expired();
            const email = identity && invite.email === null ? claims!.email : null;
            const collision = await store.findCollision(
              tx,
              endpoint.id,
              { username: credentials?.username, identities: identity ? [identity] : undefined },
              invite.client_id,
            );
            if (collision) throw conflict(collision);
            // A verified e-mail another client holds is not linked: the identity alone admits the visitor.
            const emailFree = email !== null && !(await store.findCollision(tx, endpoint.id, { email }, invite.client_id));
            // Redeemed first: a client leaving `invited` takes its pending invites with it, and this one is history.
            await store.markInviteRedeemed(tx, invite.id);
            await store.updateClient(tx, endpoint.id, invite.client_id, {
              status: 'active',
              registrationSource: 'invite',
              credentials: credentials && passwordHash ? { username: credentials.username, passwordHash } : undefined,
              addIdentities: identity ? [identity] : undefined,
              email: emailFree ? email : undefined,
            });
            const client = await readClient(tx, endpoint.id, invite.client_id);
            return { client_id: client.id, identifier: client.identifier, status: 'active' as const, registration_source: 'invite' as const };
          }

          // Self-registration: identity alone.
          const settings = await store.readSelfRegistration(tx, endpoint.id);
          if (!settings.enabled) throw fail.self_registration_disabled();
          const email = claims!.email === null ? null : emailOf(claims!.email, 'identity');
          if (settings.allowed_email_domains.length > 0) {
            const domain = email?.slice(email.lastIndexOf('@') + 1) ?? null;
            if (domain === null || !settings.allowed_email_domains.includes(domain)) {
              throw fail.email_domain_not_allowed(undefined, { domain, allowed_email_domains: settings.allowed_email_domains });
            }
          }
          const linked = await store.findCollision(tx, endpoint.id, { identities: [identity!] });
          if (linked) throw conflict(linked);
          if ((await store.countClients(tx, endpoint.id)) >= MAX_CLIENTS_PER_ENDPOINT) throw fail.quota_exceeded(`An endpoint has at most ${MAX_CLIENTS_PER_ENDPOINT} clients`);
          const identifier = await selfIdentifier(tx, endpoint.id, email, identity!);
          const collision = await store.findCollision(tx, endpoint.id, { identifier, email });
          if (collision) throw conflict(collision);
          const id = await store.insertClient(tx, endpoint.id, {
            identifier,
            displayName: '',
            email,
            username: null,
            passwordHash: null,
            tokenDigest: null,
            status: 'active',
            registrationSource: 'self',
            metadata: {},
            identities: [identity!],
          });
          return { client_id: id, identifier, status: 'active' as const, registration_source: 'self' as const };
        }),
      );
      return { ...value, feed_version: feedVersion };
    },
  );

  /** Whether the plan of the endpoint's account includes rbac; false when the account or plan is gone. */
  async function endpointPlan(q: Queryable, endpoint: EndpointRow): Promise<boolean> {
    const { rows } = await q.query<{ plan: string }>('SELECT plan FROM accounts WHERE id = $1', [endpoint.account_id]);
    const plan = rows[0] ? config.plans[rows[0].plan] : undefined;
    return plan?.entitlements[FEATURE] === true;
  }
}

/**
 * A self-registered client's identifier: its e-mail, else `<provider>:<subject>` (lower-cased, the subject
 * percent-encoded where it is not visible ASCII). Subjects differing only in case would share one: the later gets a
 * short suffix rather than a 409 for an identity that is not linked.
 */
async function selfIdentifier(tx: Queryable, endpointId: number, email: string | null, identity: Identity): Promise<string> {
  if (email !== null) return email;
  const base = `${identity.provider}:${identity.subject.replace(/[^\x21-\x7e]/gu, (c) => [...Buffer.from(c, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join(''))}`.toLowerCase().slice(0, 240);
  if (!(await store.takenIdentifiers(tx, endpointId, [base])).has(base)) return base;
  return `${base}~${randomBytes(4).toString('hex')}`;
}
