// OAuth/OIDC identity providers of an endpoint as domain operations: the body checked and made canonical, then
// create, replace, toggle and delete in the endpoint's transaction. The client secret is stored only sealed.
import { fail, invalid } from '../../shared/errors.ts';
import { isUniqueViolation } from '../../store/db.ts';
import * as store from '../../store/oauth-providers.ts';
import {
  DEFAULT_OIDC_SCOPES,
  MAX_OAUTH_PROVIDERS,
  type ClientSecretInput,
  type OAuthProviderInput,
  type OAuthProviderKind,
  type OAuthProviderRow,
} from '../../store/oauth-providers.ts';
import type { EndpointRow } from '../../store/endpoints.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller } from '../endpoint-access.ts';
import { int64Param, type ControlDeps } from '../http.ts';
import { secretFingerprint } from '../secret-fingerprint.ts';
import { allowedDomain, parseIssuer, publicHttpsUrl } from '../validation.ts';

/** oidc: OpenID Connect with discovery and an ID token; oauth2: explicit endpoints, identity from userinfo. */
export const KINDS = ['oidc', 'oauth2'] as const;
const OAUTH2_URLS = ['authorization_url', 'token_url', 'userinfo_url'] as const;

interface ProviderBody {
  kind: string;
  name: string;
  issuer: string;
  client_id: string;
  client_secret?: string;
  scopes?: string[];
  allowed_emails?: string[];
  allowed_domains?: string[];
  authorization_url?: string;
  token_url?: string;
  userinfo_url?: string;
}
/** The body of POST or PUT, checked and canonical; whatever a field's schema left open is decided here. */
export function providerInput(body: ProviderBody, allowPrivate: boolean): OAuthProviderInput {
  if (!(KINDS as readonly string[]).includes(body.kind)) throw invalid('kind', `must be one of ${KINDS.join(', ')}`);
  const kind = body.kind as OAuthProviderKind;
  const urls: Record<(typeof OAUTH2_URLS)[number], string | null> = { authorization_url: null, token_url: null, userinfo_url: null };
  for (const field of OAUTH2_URLS) {
    const raw = body[field];
    if (kind === 'oidc') {
      if (raw !== undefined) throw invalid(field, 'kind oidc discovers its endpoints at <issuer>/.well-known/openid-configuration; only kind oauth2 takes them');
      continue;
    }
    if (raw === undefined) throw invalid(field, 'required for kind oauth2 (a provider without discovery)');
    urls[field] = publicHttpsUrl(field, raw, allowPrivate).href;
  }
  const scopes = [...new Set(body.scopes ?? [])];
  if (kind === 'oidc' && scopes.length > 0 && !scopes.includes('openid')) {
    throw invalid('scopes', `kind oidc needs the openid scope (OpenID Connect Core §3.1.2.1); omit scopes for ${DEFAULT_OIDC_SCOPES.join(' ')}`);
  }
  return {
    kind,
    name: body.name,
    issuer: parseIssuer(body.issuer, allowPrivate),
    clientId: body.client_id,
    scopes,
    // RFC 5321 §2.4 lets a mailbox's local part be case-sensitive; in practice no provider issues two that differ
    // only by case, and comparing lower-case is what users expect of an allow-list.
    allowedEmails: [...new Set((body.allowed_emails ?? []).map((e) => e.toLowerCase()))],
    allowedDomains: [...new Set((body.allowed_domains ?? []).map((d, i) => allowedDomain(d, `allowed_domains.${i}`)))],
    authorizationUrl: urls.authorization_url,
    tokenUrl: urls.token_url,
    userinfoUrl: urls.userinfo_url,
  };
}

const notFound = () => fail.not_found('OAuth provider not found');

/** A second provider of the same name on the endpoint: 409, as other name collisions are. */
function nameTaken(err: unknown, name: string): never {
  if (isUniqueViolation(err, 'endpoint_oauth_providers_name_key')) throw fail.already_exists(`The endpoint already has a provider named "${name}"`, { field: 'name' });
  throw err;
}


/** A provider together with the endpoint it belongs to, whose hostname its redirect URI names. */
export interface EndpointProvider {
  endpoint: EndpointRow;
  provider: OAuthProviderRow;
}

export function oauthProviderService({ db, config, secrets }: Pick<ControlDeps, 'db' | 'config' | 'secrets'>) {
  const allowPrivate = config.originAllowPrivate;
  /** Sealed for edges and fingerprinted for views, before the transaction (bcrypt takes tens of milliseconds). */
  const clientSecret = async (secret: string): Promise<ClientSecretInput> => ({ sealed: secrets.seal(secret), fingerprint: await secretFingerprint(secret) });

  return {
    async create(caller: Caller, uuid: string, body: ProviderBody & { client_secret: string }): Promise<EndpointProvider> {
      const input = providerInput(body, allowPrivate);
      const secret = await clientSecret(body.client_secret);
      return db
        .transaction(async (tx) => {
          const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
          const count = await store.countOAuthProviders(tx, endpoint.id);
          if (count >= MAX_OAUTH_PROVIDERS) {
            throw invalid('oauth/providers', `an endpoint has at most ${MAX_OAUTH_PROVIDERS} OAuth providers`, { limit: MAX_OAUTH_PROVIDERS, count });
          }
          return { endpoint, provider: await store.insertOAuthProvider(tx, endpoint.id, input, secret) };
        })
        .catch((err: unknown) => nameTaken(err, input.name));
    },

    async list(caller: Caller, uuid: string): Promise<{ endpoint: EndpointRow; providers: OAuthProviderRow[] }> {
      const endpoint = await endpointForCaller(db, caller, uuid);
      return { endpoint, providers: await store.listOAuthProviders(db, endpoint.id) };
    },

    async get(caller: Caller, uuid: string, rawProviderId: string): Promise<EndpointProvider> {
      const providerId = int64Param(rawProviderId, 'provider_id');
      const endpoint = await endpointForCaller(db, caller, uuid);
      const provider = await store.findOAuthProvider(db, endpoint.id, providerId);
      if (!provider) throw notFound();
      return { endpoint, provider };
    },

    /** A full update; an omitted client_secret keeps the stored one, and the enabled flag is left as it is. */
    async replace(caller: Caller, uuid: string, rawProviderId: string, body: ProviderBody): Promise<EndpointProvider> {
      const providerId = int64Param(rawProviderId, 'provider_id');
      const input = providerInput(body, allowPrivate);
      const secret = body.client_secret === undefined ? undefined : await clientSecret(body.client_secret);
      const { endpoint, updated } = await db
        .transaction(async (tx) => {
          const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
          return { endpoint, updated: await store.replaceOAuthProvider(tx, endpoint.id, providerId, input, secret) };
        })
        .catch((err: unknown) => nameTaken(err, input.name));
      if (!updated) throw notFound();
      return { endpoint, provider: updated };
    },

    /** An explicit set, not a flip (docs/api.md): anything but `enabled: true` disables. */
    async setEnabled(caller: Caller, uuid: string, rawProviderId: string, enabled: boolean): Promise<void> {
      const providerId = int64Param(rawProviderId, 'provider_id');
      const found = await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
        return store.setOAuthProviderEnabled(tx, endpoint.id, providerId, enabled);
      });
      if (!found) throw notFound();
    },

    async remove(caller: Caller, uuid: string, rawProviderId: string): Promise<void> {
      const providerId = int64Param(rawProviderId, 'provider_id');
      const deleted = await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, caller, uuid, { writable: true });
        return store.deleteOAuthProvider(tx, endpoint.id, providerId);
      });
      if (!deleted) throw notFound();
    },
  };
}
