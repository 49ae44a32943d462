// Visitor authentication settings of an endpoint (SPEC.md "Visitor authentication"): the resolved read, the main
// mode with its credentials, the JWT layer and webhook verification. Validated here; secrets leave only hashed or sealed.
import { Type, type TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { ValueErrorType } from '@sinclair/typebox/errors';
import bcrypt from 'bcrypt';
import type { FastifyReply } from 'fastify';
import { hostRefusal } from '../../shared/address-policy.ts';
import { fail, invalid } from '../../shared/errors.ts';
import { Nullable, parseInt64, Strict, Timestamp } from '../../shared/schema.ts';
import { VISITOR_AUTH_MODES, type VisitorAuthMode } from '../../shared/snapshot.ts';
import {
  BCRYPT_MAX_PASSWORD_BYTES,
  BCRYPT_MIN_COST,
  claimHeaderRefusal,
  credentialHeaderRefusal,
  reportedAuthMode,
  tokenDigest,
  tokenSourceOf,
  visitorTokenKey,
} from '../../shared/visitor-credentials.ts';
import { isUniqueViolation } from '../../store/db.ts';
import { MAX_OAUTH_PROVIDERS, MAX_SCOPES, offersProvider, type OAuthProviderRow } from '../../store/oauth-providers.ts';
import * as store from '../../store/visitor-auth.ts';
import { MAX_BASIC_USERS, MAX_SETTINGS_TOKENS, type AuthState, type BasicUserInput, type ModeConfigs, type SettingsTokenInput } from '../../store/visitor-auth.ts';
import { endpointForCaller, readableEndpoint } from '../endpoint-access.ts';
import { parseJsonBody, type ControlApp, type ControlDeps } from '../http.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

// ---------------------------------------------------------------------------------------------------------------
// Access, shared with the endpoint API keys.
// ---------------------------------------------------------------------------------------------------------------

/** A 400 naming the field, in the shape the schema validator's errors have. */
export { invalid } from '../../shared/errors.ts';

/** RFC 3339 instant strictly after now, or a 400: a credential that is already expired is a mistake, not a setting. */
export function futureInstant(field: string, value: string): string {
  const at = Date.parse(value);
  if (!(at > Date.now())) throw invalid(field, 'must be in the future');
  return new Date(at).toISOString();
}

// ---------------------------------------------------------------------------------------------------------------
// Per-mode `config` (SPEC.md: "schema validated per mode"). Each mode's schema is strict: an unknown key is a 400.
// ---------------------------------------------------------------------------------------------------------------

/**
 * RFC 7617 §2 puts the realm in a quoted-string: printable ASCII without `"` and `\`, so nothing needs escaping and
 * every HTTP stack can send it. quoted-string's obs-text (bytes 0x80-0xFF) is left out too: a realm above U+00FF
 * (`Zone €`) cannot be a Latin-1 field value at all, and Node throws on it (it once crashed the edge).
 */
const REALM_PATTERN = '^[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]+$';
/** RFC 6265 §4.1.1 cookie-name: an RFC 2616 token. */
const COOKIE_NAME_PATTERN = "^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$";
/** RFC 6749 §3.3 scope-token: visible ASCII but for `"` and `\`. */
export const SCOPE_TOKEN_PATTERN = '^[\\x21\\x23-\\x5b\\x5d-\\x7e]+$';
export const MAX_SCOPE_LENGTH = 256;
const MAX_ALLOWED_REDIRECTS = 32;
const MAX_REDIRECT_LENGTH = 2048;

/** Scopes as an OAuth/OIDC setting takes them: RFC 6749 §3.3 tokens, each once. */
export const ScopesBody = (description: string, minItems = 0) =>
  Type.Array(Type.String({ minLength: 1, maxLength: MAX_SCOPE_LENGTH, pattern: SCOPE_TOKEN_PATTERN }), { minItems, maxItems: MAX_SCOPES, description });

const OAuthModeConfig = Strict({
  allowed_redirects: Type.Optional(
    Type.Array(Type.String({ minLength: 1, maxLength: MAX_REDIRECT_LENGTH }), {
      maxItems: MAX_ALLOWED_REDIRECTS,
      description: 'Extra return_to targets after login: paths starting with "/" (not "//" or "/\\"), or https URLs on the endpoint’s own hostname',
    }),
  ),
  scopes: Type.Optional(ScopesBody('Scopes every provider is asked for, instead of its own (mode oidc: must include openid)', 1)),
});

const MODE_CONFIG_SCHEMAS: Record<VisitorAuthMode, TSchema> = {
  none: Strict({}),
  basic: Strict({
    realm: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: REALM_PATTERN, description: 'Basic realm; defaults to the hostname' })),
  }),
  token: Strict({
    header: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'Read the token from this header instead of Authorization: Bearer' })),
    cookie: Type.Optional(Type.String({ minLength: 1, maxLength: 256, pattern: COOKIE_NAME_PATTERN, description: 'Read the token from this cookie' })),
  }),
  oauth: OAuthModeConfig,
  oidc: OAuthModeConfig,
};
const MODE_CONFIG_CHECKS = Object.fromEntries(Object.entries(MODE_CONFIG_SCHEMAS).map(([mode, schema]) => [mode, TypeCompiler.Compile(schema)])) as Record<
  VisitorAuthMode,
  ReturnType<typeof TypeCompiler.Compile>
>;

/**
 * An extra return_to target of an OAuth login, canonical, or a 400. The edge sends a visitor back to where the login
 * started; a target elsewhere would make the endpoint an open redirector (RFC 9700 §4.11). So: a path on the same
 * host, whose second character does not turn it into a network-path reference (`//evil`, and `/\evil`, which
 * browsers read alike), or an https URL on the endpoint's own hostname.
 */
export function allowedRedirect(raw: string, hostname: string, field: string): string {
  if (!/^[\x21-\x7e]+$/.test(raw)) throw invalid(field, 'visible ASCII only (percent-encode anything else), no spaces');
  if (raw.includes('\\')) throw invalid(field, 'backslashes are not allowed (browsers read them as slashes)');
  if (raw.startsWith('/')) {
    if (raw.startsWith('//')) throw invalid(field, 'a path starting with "//" names another host');
    return raw;
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid(field, 'a path starting with "/" or an absolute https URL');
  }
  if (url.protocol !== 'https:') throw invalid(field, 'an absolute target must be https');
  if (url.username || url.password) throw invalid(field, 'credentials in the URL are not allowed');
  if (url.hostname !== hostname.toLowerCase()) throw invalid(field, `an absolute target must be on the endpoint’s own hostname (${hostname})`);
  return url.href;
}

/** A mode's `config` as stored: validated by the mode's schema, token mode's header lower-cased, OAuth targets canonical. */
export function modeConfig(mode: VisitorAuthMode, config: Record<string, unknown>, hostname: string): Record<string, unknown> {
  const check = MODE_CONFIG_CHECKS[mode];
  if (!check.Check(config)) {
    const first = [...check.Errors(config)][0];
    const path = first.path.replace(/^\//, '').replace(/\//g, '.');
    if (first.type === ValueErrorType.ObjectAdditionalProperties) throw invalid(`config.${path}`, `not a setting of mode ${mode}`, { mode });
    throw invalid(path ? `config.${path}` : 'config', first.message, { mode });
  }
  if (mode === 'token') {
    if (config.header !== undefined && config.cookie !== undefined) throw invalid('config', 'token mode reads a header or a cookie, not both', { mode });
    if (typeof config.header === 'string') {
      const refusal = credentialHeaderRefusal(config.header);
      if (refusal !== null) throw invalid('config.header', refusal, { mode });
      return { header: config.header.toLowerCase() };
    }
  }
  if (mode === 'oauth' || mode === 'oidc') {
    const out: Record<string, unknown> = {};
    if (Array.isArray(config.allowed_redirects)) {
      out.allowed_redirects = [...new Set((config.allowed_redirects as string[]).map((r, i) => allowedRedirect(r, hostname, `config.allowed_redirects.${i}`)))];
    }
    if (Array.isArray(config.scopes)) {
      const scopes = [...new Set(config.scopes as string[])];
      if (mode === 'oidc' && !scopes.includes('openid')) throw invalid('config.scopes', 'mode oidc needs the openid scope (OpenID Connect Core §3.1.2.1)', { mode });
      out.scopes = scopes;
    }
    return out;
  }
  return { ...config };
}

// ---------------------------------------------------------------------------------------------------------------
// Credentials
// ---------------------------------------------------------------------------------------------------------------

/** RFC 6750 §2.1 b64token: what fits in Authorization: Bearer, and in a header or cookie value unchanged. */
const TOKEN_PATTERN = '^[A-Za-z0-9\\-._~+/]+=*$';
export const MIN_TOKEN_LENGTH = 16;
const NO_CONTROL = '^[^\\x00-\\x1f\\x7f]+$';

interface BasicUserBody {
  username: string;
  password: string;
}

interface TokenBody {
  name: string;
  token: string;
  expires_at?: string | null;
}

function checkBasicUsers(users: readonly BasicUserBody[]): void {
  const seen = new Set<string>();
  users.forEach((u, i) => {
    if (seen.has(u.username)) throw invalid(`basic_users.${i}.username`, `"${u.username}" appears twice`);
    seen.add(u.username);
    // bcrypt reads 72 bytes and ignores the rest: a longer password would be accepted by its first 72 bytes alone.
    if (Buffer.byteLength(u.password, 'utf8') > BCRYPT_MAX_PASSWORD_BYTES) {
      throw invalid(`basic_users.${i}.password`, `longer than ${BCRYPT_MAX_PASSWORD_BYTES} bytes (UTF-8), which bcrypt cannot use whole`);
    }
  });
}

/**
 * bcrypt hashes for the users of a PUT, off the event loop (bcrypt runs on libuv's pool) and before the transaction,
 * so the endpoint's row is not locked meanwhile. A password that matches the stored hash keeps it: re-sending the
 * same users changes nothing, so edges keep their verdict caches.
 */
async function hashBasicUsers(users: readonly BasicUserBody[], stored: ReadonlyMap<string, string>): Promise<BasicUserInput[]> {
  return Promise.all(
    users.map(async (u) => {
      const old = stored.get(u.username);
      if (old !== undefined && (await bcrypt.compare(u.password, old))) return { username: u.username, passwordHash: old };
      return { username: u.username, passwordHash: await bcrypt.hash(u.password, BCRYPT_MIN_COST) };
    }),
  );
}

function settingsTokens(tokens: readonly TokenBody[], key: Buffer): SettingsTokenInput[] {
  const names = new Set<string>();
  const values = new Set<string>();
  return tokens.map((t, i) => {
    if (names.has(t.name)) throw invalid(`tokens.${i}.name`, `"${t.name}" appears twice`);
    if (values.has(t.token)) throw invalid(`tokens.${i}.token`, 'the same token appears twice');
    names.add(t.name);
    values.add(t.token);
    const expiresAt = t.expires_at === undefined || t.expires_at === null ? null : futureInstant(`tokens.${i}.expires_at`, t.expires_at);
    return { label: t.name, digest: tokenDigest(key, t.token), expiresAt };
  });
}

// ---------------------------------------------------------------------------------------------------------------
// JWT layer and webhook verification
// ---------------------------------------------------------------------------------------------------------------

const MAX_CLAIM_HEADERS = 32;
const MAX_CLAIM_NAME_LENGTH = 128;

/**
 * A URL the platform fetches from on a user's behalf (a JWKS, an identity provider's endpoints): https (http only
 * where private origins are allowed, i.e. development), no credentials or fragment, and not a private, loopback or
 * link-local address by what it says. Whoever fetches must check the addresses the name resolves to, as the edge
 * does for origins (src/shared/address-policy.ts). `field` names it in the 400.
 */
export function publicHttpsUrl(field: string, raw: string, allowPrivate: boolean): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid(field, 'not a valid absolute URL');
  }
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && allowPrivate)) {
    throw invalid(field, allowPrivate ? 'only http and https URLs are supported' : 'must be https (what is fetched over plain http could be replaced in transit)');
  }
  if (url.username || url.password) throw invalid(field, 'credentials in the URL are not allowed');
  if (url.hash) throw invalid(field, 'a URL fetched by the platform has no fragment');
  if (!allowPrivate) {
    const refusal = hostRefusal(url.hostname);
    if (refusal !== null) throw invalid(field, `must have a public address: ${refusal}`);
  }
  return url;
}

/** A JWKS URL (publicHttpsUrl), in its canonical spelling. */
export function parseJwksUrl(raw: string, allowPrivate: boolean): string {
  return publicHttpsUrl('jwks_url', raw, allowPrivate).href;
}

/** SPEC.md: claim_headers is a JSON-encoded string holding an object of claim name → header name. "" clears it. */
export function parseClaimHeaders(raw: string): Record<string, string> {
  if (raw.trim() === '') return {};
  let value: unknown;
  try {
    value = parseJsonBody(raw);
  } catch (err) {
    throw invalid('claim_headers', `not valid JSON (${(err as Error).message})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid('claim_headers', 'must encode a JSON object of claim name → header name');
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_CLAIM_HEADERS) throw invalid('claim_headers', `at most ${MAX_CLAIM_HEADERS} claims`);
  const out: Record<string, string> = {};
  const headers = new Map<string, string>();
  for (const [claim, header] of entries) {
    if (claim === '' || claim.length > MAX_CLAIM_NAME_LENGTH || /[\x00-\x1f\x7f]/.test(claim)) {
      throw invalid('claim_headers', `claim name "${claim}" must be 1-${MAX_CLAIM_NAME_LENGTH} characters without control characters`);
    }
    if (typeof header !== 'string') throw invalid('claim_headers', `the header for claim "${claim}" must be a string`, { claim });
    const refusal = claimHeaderRefusal(header);
    if (refusal !== null) throw invalid('claim_headers', refusal, { claim, header });
    const lower = header.toLowerCase();
    const key = lower.replaceAll('_', '-');
    const other = headers.get(key);
    if (other !== undefined) throw invalid('claim_headers', `claims "${other}" and "${claim}" both map to ${header}`, { claim, header });
    headers.set(key, claim);
    out[claim] = lower;
  }
  return out;
}

const WEBHOOK_ALGOS = ['sha256', 'sha1'] as const;

// ---------------------------------------------------------------------------------------------------------------
// The read shape (SPEC.md "Endpoint auth settings")
// ---------------------------------------------------------------------------------------------------------------

const TokenView = Type.Object({
  id: Type.Integer(),
  label: Type.String({ description: 'The token’s name, or the API key’s' }),
  source: Type.String({ enum: ['settings', 'api_key'], description: 'settings: set by PUT …/settings; api_key: /v1/endpoints/{id}/api-keys' }),
  created_at: Timestamp(),
  expires_at: Type.Optional(Timestamp({ description: 'Omitted when the token never expires' })),
  last_used_at: Type.Optional(Timestamp({ description: 'As reported by edges, at most about a minute late; omitted when never used' })),
  revoked_at: Type.Optional(Timestamp({ description: 'API keys only; revoked keys stay listed' })),
});

const BasicUserView = Type.Object({
  id: Type.Integer(),
  username: Type.String(),
  created_at: Timestamp(),
  last_used_at: Type.Optional(Timestamp()),
});

export const SettingsView = Type.Object(
  {
    endpoint_id: Type.Integer(),
    mode: Type.String({
      enum: ['none', 'token', 'header', 'cookie', 'basic', 'jwt', 'sso'],
      description: 'none (jwt when only the JWT layer is on), basic, token (header / cookie when the token is read from one), sso for oauth/oidc',
    }),
    config: Type.Optional(
      Type.Object(
        {},
        {
          additionalProperties: true,
          description:
            'The mode’s config (basic: realm; token: header or cookie; oauth/oidc: allowed_redirects, scopes), then, while on, the JWT layer (jwks_url, issuer, audience, ' +
            'claim_headers) and webhook verification ({webhook: {header, algo, prefix}}). Never a secret. Omitted when empty.',
        },
      ),
    ),
    session_ttl_seconds: Type.Optional(Type.Integer({ description: 'Omitted when unset (the platform default applies)' })),
    enforce_https: Type.Boolean(),
    enabled_auth_methods: Type.Optional(Type.Record(Type.String(), Type.Boolean(), { description: 'Provider id → enabled; oauth/oidc modes only' })),
    tokens: Type.Array(TokenView),
    basic_users: Type.Array(BasicUserView),
  },
  { description: 'Endpoint auth settings' },
);

function optional<K extends string>(key: K, value: Date | null): { [P in K]?: string } {
  return (value === null ? {} : { [key]: iso(value) }) as { [P in K]?: string };
}

/**
 * enabled_auth_methods as sent, canonical: each a decimal id of one of the endpoint's providers (in mode oidc, one of
 * kind oidc), each once. Anything else is a 400: a list naming nothing would lock every visitor out unnoticed.
 */
function providerIds(sent: readonly string[], providers: readonly OAuthProviderRow[], mode: VisitorAuthMode): string[] {
  const ids = sent.map((raw, i) => {
    const field = `enabled_auth_methods.${i}`;
    const id = parseInt64(raw);
    if (id === null) throw invalid(field, `"${raw}" is not a provider id (a decimal int64)`);
    const provider = providers.find((p) => p.id === id);
    if (!provider) throw invalid(field, `unknown provider id "${raw}" on this endpoint`);
    if (mode === 'oidc' && provider.kind !== 'oidc') throw invalid(field, `provider ${raw} is of kind ${provider.kind}; mode oidc logs in with kind oidc providers only`, { mode });
    return String(id);
  });
  return [...new Set(ids)];
}

/**
 * SPEC.md's map of provider id → enabled: every provider of the endpoint, true for those visitors may log in with
 * now (offersProvider). A stored list naming every enabled provider reads the same as an empty one.
 */
function enabledAuthMethods(mode: VisitorAuthMode, listed: readonly string[], providers: readonly OAuthProviderRow[]): Record<string, boolean> {
  return Object.fromEntries(providers.map((p) => [String(p.id), offersProvider(mode, listed, p)]));
}

export function settingsView(endpointId: number, s: AuthState) {
  const mode = s.settings?.mode ?? 'none';
  const configs = s.settings?.mode_config ?? {};
  const jwtOn = s.jwt?.enabled === true;
  const config: Record<string, unknown> = { ...(configs[mode] ?? {}) };
  if (jwtOn && s.jwt) {
    Object.assign(config, { jwks_url: s.jwt.jwks_url, issuer: s.jwt.issuer, audience: s.jwt.audience, claim_headers: JSON.stringify(s.jwt.claim_headers) });
  }
  // Nested: token mode's config has a `header` of its own.
  if (s.webhook?.enabled) config.webhook = { header: s.webhook.header, algo: s.webhook.algo, prefix: s.webhook.prefix };
  const sso = mode === 'oauth' || mode === 'oidc';
  return {
    endpoint_id: endpointId,
    mode: reportedAuthMode(mode, tokenSourceOf(configs.token), jwtOn),
    ...(Object.keys(config).length > 0 ? { config } : {}),
    ...(s.settings?.session_ttl_seconds != null ? { session_ttl_seconds: s.settings.session_ttl_seconds } : {}),
    enforce_https: s.enforce_https,
    ...(sso ? { enabled_auth_methods: enabledAuthMethods(mode, s.settings?.enabled_auth_methods ?? [], s.oauth_providers) } : {}),
    tokens: s.tokens.map((t) => ({
      id: t.id,
      label: t.label,
      source: t.source,
      created_at: iso(t.created_at),
      ...optional('expires_at', t.expires_at),
      ...optional('last_used_at', t.last_used_at),
      ...optional('revoked_at', t.revoked_at),
    })),
    basic_users: s.basic_users.map((u) => ({ id: u.id, username: u.username, created_at: iso(u.created_at), ...optional('last_used_at', u.last_used_at) })),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Request bodies
// ---------------------------------------------------------------------------------------------------------------

const MAX_SESSION_TTL_SECONDS = 366 * 24 * 3600;

const BasicUsersBody = Type.Array(
  Strict({
    username: Type.String({ minLength: 1, maxLength: 128, pattern: '^[^:\\x00-\\x1f\\x7f]+$', description: 'No colon (RFC 7617)' }),
    password: Type.String({ minLength: 1, maxLength: 1024, description: `At most ${BCRYPT_MAX_PASSWORD_BYTES} bytes in UTF-8; stored as a bcrypt hash` }),
  }),
  { maxItems: MAX_BASIC_USERS, description: 'Mode basic only: the whole set of users (by username; others are removed); null removes all' },
);

const TokensBody = Type.Array(
  Strict({
    name: Type.String({ minLength: 1, maxLength: 100, pattern: NO_CONTROL, description: 'Sent to the agent as X-Edge-Auth-User' }),
    token: Type.String({
      minLength: MIN_TOKEN_LENGTH,
      maxLength: 512,
      pattern: TOKEN_PATTERN,
      description: `At least ${MIN_TOKEN_LENGTH} characters of A-Z a-z 0-9 - . _ ~ + / (then = padding): RFC 6750 b64token`,
    }),
    expires_at: Type.Optional(Nullable(Timestamp({ description: 'RFC 3339, in the future; omitted or null: never' }))),
  }),
  {
    maxItems: MAX_SETTINGS_TOKENS,
    description: 'Mode token only: the whole set of settings tokens (by value; others are removed; API keys are untouched); null removes all',
  },
);

const SettingsBody = Strict({
  mode: Type.String({ enum: [...VISITOR_AUTH_MODES], description: 'none, basic, token, oauth or oidc' }),
  enforce_https: Type.Optional(Nullable(Type.Boolean({ description: 'Redirect plain HTTP to HTTPS at the edge; null clears it (off)' }))),
  session_ttl_seconds: Type.Optional(
    Nullable(Type.Integer({ minimum: 1, maximum: MAX_SESSION_TTL_SECONDS, description: 'Login-session lifetime (> 0); null clears it (platform default)' })),
  ),
  enabled_auth_methods: Type.Optional(
    Nullable(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
        maxItems: MAX_OAUTH_PROVIDERS,
        description:
          'Ids (decimal strings) of the endpoint’s OAuth/OIDC providers offered on the login page; empty or null: every enabled one. ' +
          'Unknown ids are a 400; in mode oidc, only kind oidc providers',
      }),
    ),
  ),
  basic_users: Type.Optional(Nullable(BasicUsersBody)),
  tokens: Type.Optional(Nullable(TokensBody)),
  config: Type.Optional(
    Nullable(
      Type.Object(
        {},
        {
          additionalProperties: true,
          description:
            'The mode’s settings, replacing what the mode had (null clears them). basic: {realm}; token: {header} or {cookie} (at most one); ' +
            'oauth, oidc: {allowed_redirects, scopes} (extra return_to targets: "/path" or https URLs on the endpoint’s hostname; scopes ' +
            'asked of every provider instead of its own); none: {}. Unknown keys are a 400.',
        },
      ),
    ),
  ),
});

const JwtBody = Strict({
  enabled: Type.Boolean({ description: 'true needs a jwks_url (sent now or stored); false keeps the stored configuration' }),
  jwks_url: Type.Optional(Type.String({ maxLength: 2048, description: 'https; "" clears it' })),
  issuer: Type.Optional(Type.String({ maxLength: 1024, description: 'Required iss; "" means not enforced' })),
  audience: Type.Optional(Type.String({ maxLength: 1024, description: 'Required aud; "" means not enforced' })),
  claim_headers: Type.Optional(
    Type.String({ maxLength: 8192, description: 'A JSON-encoded object of claim name → header name, e.g. "{\\"sub\\":\\"X-User\\"}"; "" clears it' }),
  ),
});

const WebhookBody = Strict({
  enabled: Type.Boolean({ description: 'true needs header, algo and secret (sent now or stored); false keeps the stored configuration' }),
  header: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'The header carrying the signature, e.g. X-Hub-Signature-256' })),
  algo: Type.Optional(Type.String({ enum: [...WEBHOOK_ALGOS], description: 'HMAC hash: sha256 or sha1' })),
  secret: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, description: 'The shared secret; stored sealed, never returned' })),
  prefix: Type.Optional(
    Type.String({ maxLength: 32, pattern: '^[\\x21-\\x7e]*$', description: 'Text before the hex digest, e.g. "sha256=" for GitHub; default ""' }),
  ),
});

const EndpointParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
const Errors409 = { ...ErrorResponses, 409: ErrorBody };

// ---------------------------------------------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------------------------------------------

export function endpointSettingsRoutes(app: ControlApp, { db, config, secrets }: ControlDeps): void {
  const TAGS = ['visitor-auth'];
  const tokenKey = visitorTokenKey(secrets);

  app.get(
    '/v1/endpoints/:id/settings',
    {
      schema: {
        summary: 'Read the endpoint’s visitor authentication settings',
        description:
          'The resolved view of PUT …/settings, …/settings/jwt and …/settings/webhook, and of the endpoint’s API keys (listed under tokens). ' +
          'Secrets are never returned. Needs endpoints:read. docs/visitor-auth.md maps the reported mode.',
        tags: TAGS,
        params: EndpointParams,
        response: { 200: SettingsView, ...ErrorResponses },
      },
    },
    async (req) => {
      const endpoint = await readableEndpoint(db, req.caller, req.params.id);
      return settingsView(endpoint.id, await store.loadAuthState(db, endpoint.id));
    },
  );

  app.put(
    '/v1/endpoints/:id/settings',
    {
      schema: {
        summary: 'Configure visitor authentication',
        description:
          'Strict; merges with what is stored: omitted fields are kept, null clears a field. mode is required. basic_users (mode basic) ' +
          'and tokens (mode token) each replace their whole set; sent with another mode they are a 400. After the merge, mode basic needs ' +
          'a user and mode token a live token (a settings token or an endpoint API key). oauth/oidc need at least one enabled provider ' +
          '(/v1/endpoints/{id}/oauth/providers; mode oidc: of kind oidc) among enabled_auth_methods (empty: all). ' +
          'Passwords are stored as bcrypt hashes (cost ≥ 10), tokens as keyed digests. Effective on every edge from the next request. ' +
          'Needs endpoints:update; a paused endpoint is read-only (409 quota_paused). Answers the GET shape.',
        tags: TAGS,
        params: EndpointParams,
        body: SettingsBody,
        response: { 200: SettingsView, ...Errors409 },
      },
    },
    async (req) => {
      req.caller.requirePermission('endpoints:update');
      const body = req.body;
      // The schema's enum documents the modes; TypeBox checks only the type, so the value is checked here.
      if (!(VISITOR_AUTH_MODES as readonly string[]).includes(body.mode)) throw invalid('mode', `must be one of ${VISITOR_AUTH_MODES.join(', ')}`);
      const mode = body.mode as VisitorAuthMode;
      // Everything that needs no database first: a refused body costs no lock and no bcrypt.
      if (body.basic_users != null && mode !== 'basic') throw invalid('basic_users', `only mode basic takes basic_users (mode is ${mode}; send null to remove them)`);
      if (body.tokens != null && mode !== 'token') throw invalid('tokens', `only mode token takes tokens (mode is ${mode}; send null to remove them)`);
      if (body.basic_users) checkBasicUsers(body.basic_users);
      const tokens = body.tokens === undefined ? undefined : body.tokens === null ? [] : settingsTokens(body.tokens, tokenKey);

      let basicUsers: BasicUserInput[] | undefined;
      if (body.basic_users === null) basicUsers = [];
      else if (body.basic_users !== undefined) {
        const seen = await endpointForCaller(db, req.caller, req.params.id);
        const stored = new Map((await store.listBasicUsers(db, seen.id)).map((u) => [u.username, u.password_hash]));
        basicUsers = await hashBasicUsers(body.basic_users, stored);
      }

      try {
        return await db.transaction(async (tx) => {
          const endpoint = await endpointForCaller(tx, req.caller, req.params.id, { writable: true });
          const current = await store.loadAuthState(tx, endpoint.id);
          // Here, not before the lock: absolute OAuth return targets are judged against the endpoint's hostname.
          const sentConfig = body.config === undefined || body.config === null ? body.config : modeConfig(mode, body.config, endpoint.hostname);
          const configs: ModeConfigs = { ...(current.settings?.mode_config ?? {}) };
          if (sentConfig === null) delete configs[mode];
          else if (sentConfig !== undefined) configs[mode] = sentConfig;

          if (mode === 'basic' && (basicUsers ?? current.basic_users).length === 0) {
            throw invalid('basic_users', 'mode basic needs at least one user (send basic_users)');
          }
          if (mode === 'token') {
            const live = await store.countLiveTokens(tx, endpoint.id);
            if ((tokens ? tokens.length : live.settings) + live.api_key === 0) {
              throw invalid('tokens', 'mode token needs at least one live token (send tokens, or create an API key first)');
            }
          }
          // A username or token an RBAC client of this endpoint holds: the edge could not tell whose it is (the clients
          // API refuses the other direction with the same 409). Checked under the endpoint's row lock, as it does.
          const held = await store.rbacClientHolding(tx, endpoint.id, basicUsers?.map((u) => u.username) ?? [], tokens?.map((t) => t.digest) ?? []);
          if (held !== null) {
            const field = held.field === 'username' ? `basic_users.${held.index}.username` : `tokens.${held.index}.token`;
            const what = held.field === 'username' ? `the username "${basicUsers![held.index].username}"` : 'this token';
            throw fail.already_exists(`RBAC client "${held.client}" of this endpoint already holds ${what}; a settings credential must differ from every client's`, {
              field,
            });
          }
          const listed =
            body.enabled_auth_methods === undefined
              ? (current.settings?.enabled_auth_methods ?? [])
              : providerIds(body.enabled_auth_methods ?? [], current.oauth_providers, mode);
          if ((mode === 'oauth' || mode === 'oidc') && !current.oauth_providers.some((p) => offersProvider(mode, listed, p))) {
            const kind = mode === 'oidc' ? 'OpenID Connect provider (kind oidc)' : 'provider';
            throw invalid(
              'mode',
              `mode ${mode} needs at least one enabled ${kind} that enabled_auth_methods lets visitors use (create one with POST /v1/endpoints/{id}/oauth/providers)`,
              { mode },
            );
          }
          await store.writeAuthSettings(tx, endpoint.id, {
            mode,
            modeConfig: configs,
            sessionTtlSeconds: body.session_ttl_seconds === undefined ? (current.settings?.session_ttl_seconds ?? null) : body.session_ttl_seconds,
            enabledAuthMethods: listed,
            enforceHttps: body.enforce_https === undefined ? current.enforce_https : body.enforce_https === true,
            basicUsers,
            tokens,
          });
          return settingsView(endpoint.id, await store.loadAuthState(tx, endpoint.id));
        });
      } catch (err) {
        if (isUniqueViolation(err, 'endpoint_visitor_tokens_digest_key')) throw invalid('tokens', 'a token equals one of the endpoint’s API keys');
        throw err;
      }
    },
  );

  app.put(
    '/v1/endpoints/:id/settings/jwt',
    {
      schema: {
        summary: 'Configure the JWT layer',
        description:
          'Strict; omitted fields keep their stored value. enabled true needs a jwks_url (sent now or stored) and makes every request carry ' +
          '`Authorization: Bearer <jwt>`, verified against the JWKS, iss/aud checked when set, after the main mode succeeds. jwks_url must ' +
          'be https with a public address. claim_headers is a JSON-encoded object of claim → header name; headers the edge manages, ' +
          'hop-by-hop, framing and credential headers are refused. enabled false keeps the stored configuration. 200 with an empty body. ' +
          'Needs endpoints:update.',
        tags: TAGS,
        params: EndpointParams,
        body: JwtBody,
        response: { 200: Type.Null({ description: 'Empty body' }), ...Errors409 },
      },
    },
    async (req, reply) => {
      req.caller.requirePermission('endpoints:update');
      const body = req.body;
      const jwksUrl = body.jwks_url === undefined ? undefined : body.jwks_url === '' ? null : parseJwksUrl(body.jwks_url, config.originAllowPrivate);
      const claimHeaders = body.claim_headers === undefined ? undefined : parseClaimHeaders(body.claim_headers);
      await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, req.caller, req.params.id, { writable: true });
        const stored = await store.findJwtSettings(tx, endpoint.id);
        const next = {
          enabled: body.enabled,
          jwksUrl: jwksUrl === undefined ? (stored?.jwks_url ?? null) : jwksUrl,
          issuer: body.issuer ?? stored?.issuer ?? '',
          audience: body.audience ?? stored?.audience ?? '',
          claimHeaders: claimHeaders ?? stored?.claim_headers ?? {},
        };
        if (next.enabled && next.jwksUrl === null) throw invalid('jwks_url', 'required when enabled is true');
        await store.writeJwtSettings(tx, endpoint.id, next);
      });
      // SPEC.md: 200 with an empty body. send() without a payload skips the serializer, which would write "null".
      return (reply as FastifyReply).status(200).send();
    },
  );

  app.put(
    '/v1/endpoints/:id/settings/webhook',
    {
      schema: {
        summary: 'Configure inbound webhook verification',
        description:
          'The edge computes the HMAC (algo) of the raw request body with the secret and compares it, in constant time, with the ' +
          'header’s value after the prefix (hex); a mismatch or a missing header is 401 before anything is forwarded. GitHub: ' +
          'header X-Hub-Signature-256, algo sha256, prefix "sha256=". Strict; omitted fields keep their stored value; enabled true needs ' +
          'header, algo and secret (sent now or stored); enabled false keeps the stored configuration. The secret is stored sealed ' +
          'and never returned. Needs endpoints:update. Answers the GET …/settings shape.',
        tags: TAGS,
        params: EndpointParams,
        body: WebhookBody,
        response: { 200: SettingsView, ...Errors409 },
      },
    },
    async (req) => {
      req.caller.requirePermission('endpoints:update');
      const body = req.body;
      if (body.algo !== undefined && !(WEBHOOK_ALGOS as readonly string[]).includes(body.algo)) throw invalid('algo', `must be one of ${WEBHOOK_ALGOS.join(', ')}`);
      if (body.header !== undefined) {
        const refusal = credentialHeaderRefusal(body.header);
        if (refusal !== null) throw invalid('header', refusal);
      }
      const secretSealed = body.secret === undefined ? undefined : secrets.seal(body.secret);
      return db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, req.caller, req.params.id, { writable: true });
        const stored = await store.findWebhookVerification(tx, endpoint.id);
        const next = {
          enabled: body.enabled,
          header: body.header?.toLowerCase() ?? stored?.header ?? null,
          algo: (body.algo as (typeof WEBHOOK_ALGOS)[number] | undefined) ?? stored?.algo ?? null,
          secretSealed: secretSealed ?? stored?.secret_sealed ?? null,
          prefix: body.prefix ?? stored?.prefix ?? '',
        };
        if (next.enabled) {
          const missing = (['header', 'algo', 'secret'] as const).filter((f) => (f === 'secret' ? next.secretSealed : next[f]) === null);
          if (missing.length > 0) throw invalid(missing[0], 'required when enabled is true', { missing });
        }
        await store.writeWebhookVerification(tx, endpoint.id, next);
        return settingsView(endpoint.id, await store.loadAuthState(tx, endpoint.id));
      });
    },
  );
}
