// RBAC clients of an endpoint as operations (docs/rbac.md "Clients", "Invites and self-registration"): each checks
// what a field's schema leaves open (400 naming the field), runs its transaction and returns rows for the route's view.
import { randomBytes } from 'node:crypto';
import { FormatRegistry, type Static } from '@sinclair/typebox';
import bcrypt from 'bcrypt';
import { fail, invalid } from '../../shared/errors.ts';
import { RBAC_CLIENT_STATUSES, type RbacClientStatus, type VisitorAuthMode } from '../../shared/snapshot.ts';
import { BCRYPT_MAX_PASSWORD_BYTES, BCRYPT_MIN_COST, tokenDigest, visitorTokenKey } from '../../shared/visitor-credentials.ts';
import { isUniqueViolation, type Queryable } from '../../store/db.ts';
import type { EndpointRow } from '../../store/endpoints.ts';
import { listOAuthProviders } from '../../store/oauth-providers.ts';
import { findClient, listClients, type RbacClientRow } from '../../store/rbac.ts';
import * as store from '../../store/rbac-clients.ts';
import {
  MAX_CLIENTS_PER_ENDPOINT,
  REGISTRATION_SOURCES,
  type ClientPatch,
  type Collision,
  type Identity,
  type RegistrationSource,
  type SelfRegistration,
} from '../../store/rbac-clients.ts';
import { findAuthSettings } from '../../store/visitor-auth.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller, readableEndpoint, requireEndpointEntitlement } from '../endpoint-access.ts';
import { int64Param, type ControlDeps } from '../http.ts';
import { allowedDomain, MIN_TOKEN_LENGTH } from '../validation.ts';
import type { CreateBody, InviteBody, SettingsBody, UpdateBody } from '../schemas/rbac-clients.ts';

export const FEATURE = 'rbac' as const;

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
export const MAX_METADATA_BYTES = 16 * 1024;
/** Invites live 72 hours unless told otherwise, a year at most (docs/api.md). */
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
export function emailOf(raw: string | null | undefined, field = 'email'): string | null {
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
export function credentialsOf(username: string | undefined, password: string | undefined, minPassword = 1): { username: string; password: string } | undefined {
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

export async function modeOf(q: Queryable, endpointId: number): Promise<VisitorAuthMode> {
  return (await findAuthSettings(q, endpointId))?.mode ?? 'none';
}

export function requireMethod(mode: VisitorAuthMode, method: 'password' | 'token' | 'identities', field: string): void {
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
export function conflict(c: Collision) {
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

export async function mappingCollisions<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const c = collisionOf(err);
    if (c) throw conflict(c);
    throw err;
  }
}

export const clientNotFound = () => fail.not_found('Client not found');

export async function readClient(q: Queryable, endpointId: number, clientId: number): Promise<RbacClientRow> {
  const client = await findClient(q, endpointId, clientId);
  if (!client) throw clientNotFound();
  return client;
}

/** A client as written, and the token it was given when the server generated it (the answer is the only place it shows). */
export interface WrittenClient {
  client: RbacClientRow;
  token: { token: string; generated: boolean } | undefined;
}

export interface Invite {
  id: number;
  invite_token: string;
  invite_url: string;
  email: string | null;
  display_name: string;
  expires_at: Date;
}

/** The operations on one endpoint's clients. The route has checked the caller's permission (config.permission). */
export function rbacClientService({ db, config, secrets }: Pick<ControlDeps, 'db' | 'config' | 'secrets'>) {
  const tokenKey = visitorTokenKey(secrets);

  /** A write: (for callers acting in their own account) the plan before any query; the endpoint locked. */
  async function writable(tx: Queryable, caller: Caller, uuid: string): Promise<EndpointRow> {
    if (!caller.isAdmin) caller.requireEntitlement(FEATURE);
    const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
    await requireEndpointEntitlement(tx, caller, config.plans, endpoint, FEATURE);
    return endpoint;
  }

  return {
    async create(caller: Caller, endpointUuid: string, body: Static<typeof CreateBody>): Promise<WrittenClient> {
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
          const endpoint = await writable(tx, caller, endpointUuid);
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
      return { client, token };
    },

    async list(caller: Caller, endpointUuid: string): Promise<RbacClientRow[]> {
      const endpoint = await readableEndpoint(db, caller, endpointUuid);
      return listClients(db, endpoint.id);
    },

    async get(caller: Caller, endpointUuid: string, rawClientId: string): Promise<RbacClientRow> {
      const clientId = int64Param(rawClientId, 'client_id');
      const endpoint = await endpointForCaller(db, caller, endpointUuid);
      return readClient(db, endpoint.id, clientId);
    },

    async update(caller: Caller, endpointUuid: string, rawClientId: string, body: Static<typeof UpdateBody>): Promise<WrittenClient> {
      const clientId = int64Param(rawClientId, 'client_id');
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
          const endpoint = await writable(tx, caller, endpointUuid);
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
      return { client, token };
    },

    async remove(caller: Caller, endpointUuid: string, rawClientId: string): Promise<void> {
      const clientId = int64Param(rawClientId, 'client_id');
      await db.transaction(async (tx) => {
        const endpoint = await writable(tx, caller, endpointUuid);
        if (!(await store.deleteClient(tx, endpoint.id, clientId))) throw clientNotFound();
      });
    },

    /** A placeholder client in status invited and its single-use invite token (in this answer only). */
    async invite(caller: Caller, endpointUuid: string, body: Static<typeof InviteBody>): Promise<Invite> {
      const email = emailOf(body.email);
      const displayName = displayNameOf(body.display_name) ?? '';
      const hours = body.expires_in_hours === undefined || body.expires_in_hours <= 0 ? DEFAULT_INVITE_HOURS : Math.min(body.expires_in_hours, MAX_INVITE_HOURS);
      const inviteToken = `evi_${randomBytes(32).toString('base64url')}`;
      const { endpoint, clientId, expiresAt } = await mappingCollisions(() =>
        db.transaction(async (tx) => {
          const endpoint = await writable(tx, caller, endpointUuid);
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
        expires_at: expiresAt,
      };
    },

    async readSettings(caller: Caller, endpointUuid: string): Promise<SelfRegistration> {
      const endpoint = await readableEndpoint(db, caller, endpointUuid);
      return store.readSelfRegistration(db, endpoint.id);
    },

    /** Self-registration on or off; turning it on needs mode oauth or oidc. Omitted domains keep the stored list. */
    async writeSettings(caller: Caller, endpointUuid: string, body: Static<typeof SettingsBody>): Promise<SelfRegistration> {
      const sent = body.self_registration;
      const domains =
        sent.allowed_email_domains === undefined
          ? undefined
          : [...new Set(sent.allowed_email_domains.map((d, i) => allowedDomain(d, `self_registration.allowed_email_domains.${i}`)))];
      return db.transaction(async (tx) => {
        const endpoint = await writable(tx, caller, endpointUuid);
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
        return next;
      });
    },
  };
}
