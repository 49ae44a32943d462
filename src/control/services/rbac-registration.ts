// A visitor registering as an RBAC client, as the edge's registration form asks it (docs/rbac.md "Invites and
// self-registration"): through an invite (password or identity) or by self-registration (identity alone).
import { randomBytes } from 'node:crypto';
import bcrypt from 'bcrypt';
import { fail, invalid } from '../../shared/errors.ts';
import { verifyVisitorIdentity, type RegistrationResult, type VisitorIdentityClaims } from '../../shared/registration.ts';
import { isUuid } from '../../shared/schema.ts';
import { BCRYPT_MIN_COST, tokenDigest, visitorTokenKey } from '../../shared/visitor-credentials.ts';
import type { Queryable } from '../../store/db.ts';
import { findEndpointByUuid, type EndpointRow } from '../../store/endpoints.ts';
import { transactionWithFeedVersion } from '../../store/feed-changes.ts';
import * as store from '../../store/rbac-clients.ts';
import { MAX_CLIENTS_PER_ENDPOINT, type Identity } from '../../store/rbac-clients.ts';
import type { ControlDeps } from '../http.ts';
import {
  conflict,
  credentialsOf,
  emailOf,
  FEATURE,
  mappingCollisions,
  MIN_REGISTRATION_PASSWORD_LENGTH,
  modeOf,
  readClient,
  requireMethod,
} from './rbac-clients.ts';

/** What the edge sends (schemas in routes/rbac-registration.ts). */
export interface Registration {
  endpoint_id: string;
  invite_token?: string;
  username?: string;
  password?: string;
  identity?: string;
}

export function rbacRegistrationService({ db, config, secrets }: Pick<ControlDeps, 'db' | 'config' | 'secrets'>) {
  const tokenKey = visitorTokenKey(secrets);

  /** Whether the plan of the endpoint's account includes rbac; false when the account or plan is gone. */
  async function endpointPlan(q: Queryable, endpoint: EndpointRow): Promise<boolean> {
    const { rows } = await q.query<{ plan: string }>('SELECT plan FROM accounts WHERE id = $1', [endpoint.account_id]);
    const plan = rows[0] ? config.plans[rows[0].plan] : undefined;
    return plan?.entitlements[FEATURE] === true;
  }

  /**
   * Exactly one way: invite with username + password, invite with identity, or identity alone. The client becomes
   * active; the answer carries the feed version of the change, which the edge waits for. A refusal changes nothing.
   */
  async function register(body: Registration): Promise<RegistrationResult> {
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
  }

  return { register };
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
