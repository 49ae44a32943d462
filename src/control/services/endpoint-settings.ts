// Visitor authentication settings as domain operations (docs/visitor-auth.md): the main mode with its
// credentials, the JWT layer and webhook verification. Validated here; secrets are stored only hashed or sealed.
import { Type, type TSchema } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { ValueErrorType } from '@sinclair/typebox/errors';
import bcrypt from 'bcrypt';
import { fail, invalid } from '../../shared/errors.ts';
import { parseInt64, Strict } from '../../shared/schema.ts';
import { VISITOR_AUTH_MODES, type VisitorAuthMode } from '../../shared/snapshot.ts';
import { BCRYPT_MAX_PASSWORD_BYTES, BCRYPT_MIN_COST, bcryptHashRefusal, credentialHeaderRefusal, tokenDigest, visitorTokenKey } from '../../shared/visitor-credentials.ts';
import { isUniqueViolation } from '../../store/db.ts';
import { offersProvider, type OAuthProviderRow } from '../../store/oauth-providers.ts';
import * as store from '../../store/visitor-auth.ts';
import type { AuthState, BasicUserInput, ModeConfigs, SettingsTokenInput } from '../../store/visitor-auth.ts';
import { nodeBcryptHash } from '../../store/endpoint-feed.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller } from '../endpoint-access.ts';
import type { ControlDeps } from '../http.ts';
import { secretFingerprint } from '../secret-fingerprint.ts';
import { allowedRedirect, futureInstant, parseClaimHeaders, parseJwksUrl, ScopesBody } from '../validation.ts';

export const WEBHOOK_ALGOS = ['sha256', 'sha1'] as const;

/** PUT …/settings as its schema (schemas/endpoint-settings.ts) lets it through: null clears, omitted keeps. */
export interface SettingsInput {
  mode: string;
  enforce_https?: boolean | null;
  session_ttl_seconds?: number | null;
  enabled_auth_methods?: string[] | null;
  basic_users?: BasicUserBody[] | null;
  tokens?: TokenBody[] | null;
  config?: Record<string, unknown> | null;
}

/** PUT …/settings/jwt: omitted fields keep their stored value; "" clears a string. */
export interface JwtInput {
  enabled: boolean;
  jwks_url?: string;
  issuer?: string;
  audience?: string;
  claim_headers?: string;
}

/** PUT …/settings/webhook: omitted fields keep their stored value. */
export interface WebhookInput {
  enabled: boolean;
  header?: string;
  algo?: string;
  secret?: string;
  prefix?: string;
}

/** What a write answers: the endpoint's id and its settings as stored afterwards (settingsView in schemas/endpoint-settings.ts shows them). */
export interface SettingsState {
  endpointId: number;
  state: AuthState;
}

// ---------------------------------------------------------------------------------------------------------------
// Per-mode `config` (docs/api.md: "schema validated per mode"). Each mode's schema is strict: an unknown key is a 400.
// ---------------------------------------------------------------------------------------------------------------

/**
 * RFC 7617 §2 puts the realm in a quoted-string: printable ASCII without `"` and `\`, so nothing needs escaping and
 * every HTTP stack can send it. quoted-string's obs-text (bytes 0x80-0xFF) is left out too: a realm above U+00FF
 * (`Zone €`) cannot be a Latin-1 field value at all, and Node throws on it (it once crashed the edge).
 */
const REALM_PATTERN = '^[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]+$';
/** RFC 6265 §4.1.1 cookie-name: an RFC 2616 token. */
const COOKIE_NAME_PATTERN = "^[!#$%&'*+\\-.^_`|~0-9A-Za-z]+$";
const MAX_ALLOWED_REDIRECTS = 32;
const MAX_REDIRECT_LENGTH = 2048;

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


interface BasicUserBody {
  username: string;
  /** Exactly one of password and password_hash (checkBasicUsers). */
  password?: string;
  password_hash?: string;
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
    if ((u.password === undefined) === (u.password_hash === undefined)) {
      throw invalid(`basic_users.${i}`, 'exactly one of password and password_hash');
    }
    if (u.password_hash !== undefined) {
      const refusal = bcryptHashRefusal(u.password_hash);
      if (refusal !== null) throw invalid(`basic_users.${i}.password_hash`, refusal);
    }
    // bcrypt reads 72 bytes and ignores the rest: a longer password would be accepted by its first 72 bytes alone.
    if (u.password !== undefined && Buffer.byteLength(u.password, 'utf8') > BCRYPT_MAX_PASSWORD_BYTES) {
      throw invalid(`basic_users.${i}.password`, `longer than ${BCRYPT_MAX_PASSWORD_BYTES} bytes (UTF-8), which bcrypt cannot use whole`);
    }
  });
}

/**
 * bcrypt hashes for the users of a PUT, off the event loop (bcrypt runs on libuv's pool) and before the transaction,
 * so the endpoint's row is not locked meanwhile. A password that matches the stored hash keeps it: re-sending the
 * same users changes nothing, so edges keep their verdict caches. A password_hash is stored as sent (checked by
 * checkBasicUsers), so re-sending an exported hash changes nothing either. A stored hash imported at a cost above the
 * API's own is not compared (up to 100 users × 32 times the work, on the pool every tenant's requests share): the
 * password is hashed anew.
 */
async function hashBasicUsers(users: readonly BasicUserBody[], stored: ReadonlyMap<string, string>): Promise<BasicUserInput[]> {
  return Promise.all(
    users.map(async (u) => {
      if (u.password === undefined) return { username: u.username, passwordHash: u.password_hash! };
      const old = stored.get(u.username);
      const comparable = old !== undefined && bcrypt.getRounds(nodeBcryptHash(old)) <= BCRYPT_MIN_COST;
      if (comparable && (await bcrypt.compare(u.password, nodeBcryptHash(old)))) return { username: u.username, passwordHash: old };
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


export function endpointSettingsService({ db, config, secrets }: Pick<ControlDeps, 'db' | 'config' | 'secrets'>) {
  const tokenKey = visitorTokenKey(secrets);

  return {
    async read(caller: Caller, uuid: string): Promise<SettingsState> {
      const endpoint = await endpointForCaller(db, caller, uuid);
      return { endpointId: endpoint.id, state: await store.loadAuthState(db, endpoint.id) };
    },

    /** PUT …/settings: merges with what is stored, then checks the merged whole under the endpoint's row lock. */
    async update(caller: Caller, uuid: string, body: SettingsInput): Promise<SettingsState> {
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
        const seen = await endpointForCaller(db, caller, uuid);
        const stored = new Map((await store.listBasicUsers(db, seen.id)).map((u) => [u.username, u.password_hash]));
        basicUsers = await hashBasicUsers(body.basic_users, stored);
      }

      try {
        return await db.transaction(async (tx) => {
          const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
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
          return { endpointId: endpoint.id, state: await store.loadAuthState(tx, endpoint.id) };
        });
      } catch (err) {
        if (isUniqueViolation(err, 'endpoint_visitor_tokens_digest_key')) throw invalid('tokens', 'a token equals one of the endpoint’s API keys');
        throw err;
      }
    },

    /** PUT …/settings/jwt: omitted fields keep their stored value; enabled needs a JWKS URL, sent or stored. */
    async updateJwt(caller: Caller, uuid: string, body: JwtInput): Promise<void> {
      const jwksUrl = body.jwks_url === undefined ? undefined : body.jwks_url === '' ? null : parseJwksUrl(body.jwks_url, config.originAllowPrivate);
      const claimHeaders = body.claim_headers === undefined ? undefined : parseClaimHeaders(body.claim_headers);
      await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
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
    },

    /** PUT …/settings/webhook: omitted fields keep their stored value; the secret is sealed before the transaction. */
    async updateWebhook(caller: Caller, uuid: string, body: WebhookInput): Promise<SettingsState> {
      if (body.algo !== undefined && !(WEBHOOK_ALGOS as readonly string[]).includes(body.algo)) throw invalid('algo', `must be one of ${WEBHOOK_ALGOS.join(', ')}`);
      if (body.header !== undefined) {
        const refusal = credentialHeaderRefusal(body.header);
        if (refusal !== null) throw invalid('header', refusal);
      }
      const secretSealed = body.secret === undefined ? undefined : secrets.seal(body.secret);
      const secretFingerprintOf = body.secret === undefined ? undefined : await secretFingerprint(body.secret);
      return db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
        const stored = await store.findWebhookVerification(tx, endpoint.id);
        const next = {
          enabled: body.enabled,
          header: body.header?.toLowerCase() ?? stored?.header ?? null,
          algo: (body.algo as (typeof WEBHOOK_ALGOS)[number] | undefined) ?? stored?.algo ?? null,
          secretSealed: secretSealed ?? stored?.secret_sealed ?? null,
          // The fingerprint goes with its secret: a new one's, else the stored one's (null if stored before fingerprints).
          secretFingerprint: secretSealed === undefined ? (stored?.secret_fingerprint ?? null) : secretFingerprintOf!,
          prefix: body.prefix ?? stored?.prefix ?? '',
        };
        if (next.enabled) {
          const missing = (['header', 'algo', 'secret'] as const).filter((f) => (f === 'secret' ? next.secretSealed : next[f]) === null);
          if (missing.length > 0) throw invalid(missing[0], 'required when enabled is true', { missing });
        }
        await store.writeWebhookVerification(tx, endpoint.id, next);
        return { endpointId: endpoint.id, state: await store.loadAuthState(tx, endpoint.id) };
      });
    },
  };
}
