// The registration pages (`register`): invite redemption and self-registration, answered by the edge on the
// endpoint's own host before visitor authentication (a visitor registering has no credential yet). docs/rbac.md.
//
// Only GET and POST of exactly /register whose `endpoint` query parameter names this endpoint (its id or uuid) are
// the edge's; every other /register (another id, no id, another method, an upgrade) goes on through the pipeline to
// the service as before. Invites are judged from the snapshot (the token's keyed digest among the pending invites),
// so an unknown, used or expired link gets its page without the control plane; a form posted here is checked (CSRF:
// same origin by Origin / Sec-Fetch-Site, and an HMAC'd form token bound to the endpoint, the invite and a short
// expiry), read bounded (8 KiB, with a timeout), validated, then handed to the control API's public registration
// route (POST /v1/rbac/registrations, src/shared/registration.ts), which makes the change. On success the page waits
// (bounded) until this edge has applied the feed version carrying the new client, so the next request is admitted.
import type { IncomingMessage } from 'node:http';
import type { ErrorCode } from '../../shared/errors.ts';
import { httpsLocation } from '../../shared/public-urls.ts';
import { signVisitorIdentity, type RegistrationRequest } from '../../shared/registration.ts';
import type { EndpointConfig, RbacClientConfig, RbacConfig } from '../../shared/snapshot.ts';
import { BCRYPT_MAX_PASSWORD_BYTES, tokenDigest, visitorTokenKey } from '../../shared/visitor-credentials.ts';
import { loginHref } from '../auth/login-page.ts';
import { sessionReader, type SessionIdentity } from '../auth/oidc-login.ts';
import { wantsJson } from '../http/negotiate.ts';
import { sendEdgeError } from '../http/pages.ts';
import { clockOf, DEFAULT_STAGE_DEPS, traceIdOfRequest, type RequestContext, type Stage, type StageDeps, type StageFactory, type Verdict } from '../pipeline/stage.ts';
import { donePage, formPage, REGISTER_PAGE_HEADERS, sendPage, type FormKind } from '../rbac/register-page.ts';
import { FormTokens, readPostedForm } from '../registration/form.ts';
import { registrationOutcome } from '../registration/control-answer.ts';

/** The path of the registration pages (with `?endpoint=<id or uuid>`, and `&invite=<token>` for an invite). */
export const REGISTER_PATH = '/register';
/** Lifetime of the identity assertion handed to the control API: it is used at once. */
export const IDENTITY_TTL_SECONDS = 5 * 60;
/** How long a successful registration waits for this edge to apply the version carrying the new client. */
export const APPLY_WAIT_MS = 5_000;
/** The shortest password a visitor may choose (the control API's rule for registrations; checked here first to keep the form). */
export const MIN_PASSWORD_LENGTH = 8;
/** A username as basic auth can carry it (RFC 7617 §2: no colon; no control characters), as the store allows. */
const USERNAME = /^[^:\x00-\x1f\x7f]{1,128}$/;

/** A pending invite as the stage judges it. */
interface PendingInvite {
  digest: string;
  clientId: number;
  /** ms since the epoch; NaN (unreadable) is read as expired. */
  expiresAt: number;
}

/** What the visitor asked for: an invite (by its digest) or access by self-registration. */
type Purpose = { kind: 'invite'; token: string; invite: PendingInvite } | { kind: 'self' };

function isUpgrade(req: IncomingMessage): boolean {
  return req.headers.upgrade !== undefined || (req as IncomingMessage & { upgrade?: boolean }).upgrade === true;
}

/** The edge's answer to one of this endpoint's registration requests (the stage has matched path, method and id). */
type RegisterPages = (ctx: RequestContext, params: URLSearchParams) => Verdict | Promise<Verdict>;

/** A session cookie read as the endpoint's login (sessionReader). */
type SessionRead = (cookie: string | string[] | undefined) => SessionIdentity | undefined;

const NO_SESSION: SessionRead = () => undefined;

/**
 * The registration pages of one endpoint: keys, invite and client indexes, and the page handlers. Built on the first
 * request to them (compileRegister): every RBAC endpoint has the stage, few see /register, and these held ~8 KiB an
 * endpoint (about twenty closures, each with the name tsx's keepNames gives it, and a form key derived per compile).
 */
function registerPages(endpoint: EndpointConfig, rbac: RbacConfig, deps: StageDeps, readSession: SessionRead): RegisterPages {
  const now = clockOf(deps);
  const uuid = endpoint.uuid;
  const mode = endpoint.auth?.mode ?? 'none';
  const login = mode === 'oauth' || mode === 'oidc';
  const box = deps.secrets;
  // Without the edge secret key no invite can be looked up nor form signed: the pages answer 503 (never open).
  const tokenKey = box === undefined ? undefined : visitorTokenKey(box);
  const formTokens = box === undefined ? undefined : new FormTokens(box, uuid, now);
  const invites = new Map<string, PendingInvite>(rbac.invites.map((i) => [i.digest, { digest: i.digest, clientId: i.client_id, expiresAt: Date.parse(i.expires_at) }]));
  const clients = new Map<number, RbacClientConfig>(rbac.clients.map((c) => [c.id, c]));
  const selfOpen = login && rbac.self_registration.enabled;
  const domains = new Set(rbac.self_registration.allowed_email_domains);
  const providerNames = new Map((endpoint.auth?.providers ?? []).map((p) => [p.id, p.name]));

  /** Refuses with an edge error page (HTML or JSON by Accept); a body left unread closes the connection. */
  const refuse = (ctx: RequestContext, code: ErrorCode, detail?: string): 'done' => {
    if (!ctx.req.complete && ctx.method === 'POST') ctx.res.shouldKeepAlive = false;
    for (const [name, value] of Object.entries(REGISTER_PAGE_HEADERS)) ctx.res.setHeader(name, value);
    sendEdgeError(ctx.res, code, ctx.req.headers.accept, detail);
    return 'done';
  };

  const redirect = (ctx: RequestContext, status: 302 | 303, location: string): 'done' => {
    const body = `Redirecting to ${location}\n`;
    ctx.res.writeHead(status, { ...REGISTER_PAGE_HEADERS, location, 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    ctx.res.end(body);
    return 'done';
  };

  const target = (ctx: RequestContext) => `${ctx.path}?${ctx.query}`;
  /** What a form token is bound to: the invite's digest, or self-registration. */
  const formFor = (purpose: Purpose): string => (purpose.kind === 'invite' ? purpose.invite.digest : 'self');

  /** The form for `purpose` (HTML only: a client asking for JSON gets the facts it needs to post). */
  const showForm = (ctx: RequestContext, purpose: Purpose, form: FormKind, status = 200, error?: { code: ErrorCode; text: string }): 'done' => {
    const invitee = purpose.kind === 'invite' ? inviteeOf(purpose.invite) : undefined;
    const csrf = formTokens!.issue(formFor(purpose));
    if (wantsJson(ctx.req.headers.accept)) {
      if (error !== undefined) return refuse(ctx, error.code, error.text);
      const body = JSON.stringify({ endpoint_id: uuid, form: form.kind, csrf, ...(invitee === undefined ? {} : { invitee }) });
      ctx.res.writeHead(status, { ...REGISTER_PAGE_HEADERS, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      ctx.res.end(body);
      return 'done';
    }
    const html = formPage({ host: ctx.host, action: target(ctx), csrf, form, invitee, error: error?.text });
    sendPage(ctx.res, status, html, false, error === undefined ? {} : { 'x-edge-error': error.code });
    return 'done';
  };

  const inviteeOf = (invite: PendingInvite): string | undefined => {
    const client = clients.get(invite.clientId);
    return client === undefined ? undefined : (client.email ?? client.identifier);
  };

  const accountOf = (s: SessionIdentity): { provider: string; account: string } => ({
    provider: providerNames.get(s.provider) ?? `provider ${s.provider}`,
    account: s.email !== '' ? s.email : s.subject,
  });

  /** An active client this login already is (its identity linked, or its e-mail verified and matching). */
  const activeClientOf = (s: SessionIdentity): RbacClientConfig | undefined => {
    const provider = String(s.provider);
    const email = s.email.toLowerCase();
    for (const c of clients.values()) {
      if (c.status !== 'active') continue;
      if (c.identities.some((i) => i.provider === provider && i.subject === s.subject)) return c;
      if (email !== '' && c.email === email) return c;
    }
    return undefined;
  };

  /** Why this login may not self-register here (the endpoint's e-mail domains), or null. */
  const domainRefusal = (s: SessionIdentity): string | null => {
    if (domains.size === 0) return null;
    if (s.email === '') return 'this endpoint takes registrations from listed e-mail domains only, and your login shared no verified e-mail';
    const email = s.email.toLowerCase();
    return domains.has(email.slice(email.lastIndexOf('@') + 1)) ? null : `${s.email} is not in an e-mail domain this endpoint takes registrations from`;
  };

  const identityOf = (s: SessionIdentity): string =>
    signVisitorIdentity(box!, {
      endpoint: uuid,
      provider: String(s.provider),
      subject: s.subject,
      email: s.email === '' ? null : s.email,
      exp: Math.floor(now() / 1000) + IDENTITY_TTL_SECONDS,
    });

  /** The invite a token names, judged from the snapshot: pending, used/unknown, or expired. */
  const judgeInvite = (token: string): PendingInvite | 'unknown' | 'expired' => {
    if (token.length === 0 || token.length > 512) return 'unknown';
    const invite = invites.get(tokenDigest(tokenKey!, token));
    if (invite === undefined) return 'unknown';
    return !(invite.expiresAt > now()) ? 'expired' : invite;
  };

  /** Hands the registration to the control API and answers the visitor with what came of it. */
  const submit = (ctx: RequestContext, purpose: Purpose, request: RegistrationRequest, again: () => FormKind): Promise<Verdict> => {
    if (deps.register === undefined) return Promise.resolve(refuse(ctx, 'registration_unavailable', 'this edge has no control API to register with'));
    return deps.register(request).then(
      async (answer): Promise<Verdict> => {
        const outcome = registrationOutcome(answer, purpose.kind);
        if (outcome.kind === 'registered') {
          const result = outcome.result;
          const applied = deps.applied === undefined ? false : await deps.applied(result.feed_version, APPLY_WAIT_MS);
          if (!applied) deps.logger?.info({ endpoint: uuid, version: result.feed_version }, 'registration done; this edge has not applied it yet');
          if (wantsJson(ctx.req.headers.accept)) {
            const body = JSON.stringify({ client_id: result.client_id, identifier: result.identifier, status: result.status, registration_source: result.registration_source });
            ctx.res.writeHead(200, { ...REGISTER_PAGE_HEADERS, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
            ctx.res.end(body);
            return 'done';
          }
          // A login already rides its session: straight in. A basic-auth visitor signs in with what they just chose.
          if (login) return redirect(ctx, 303, '/');
          sendPage(ctx.res, 200, donePage(ctx.host, 'You are registered', `Sign in to ${ctx.host} with the username ${request.username ?? result.identifier} and the password you chose.`), false);
          return 'done';
        }
        switch (outcome.kind) {
          case 'form':
            return showForm(ctx, purpose, again(), outcome.status, { code: outcome.code, text: outcome.text });
          case 'refused':
            return refuse(ctx, outcome.code, outcome.text);
          default:
            deps.logger?.warn({ endpoint: uuid, status: answer.status, body: answer.body, trace_id: traceIdOfRequest(ctx) }, 'the control API refused a registration unexpectedly');
            return refuse(ctx, 'registration_unavailable', `the control API answered ${answer.status}`);
        }
      },
      (err: unknown) => {
        deps.logger?.warn({ err, endpoint: uuid, trace_id: traceIdOfRequest(ctx) }, 'registration: the control API could not be reached');
        return refuse(ctx, 'registration_unavailable', 'the control API could not be reached; try again shortly');
      },
    );
  };

  /** Reads and checks a posted form (src/edge/registration/form.ts), refusing it as the pages refuse. */
  const postedForm = async (ctx: RequestContext, purpose: Purpose, fields: readonly string[]): Promise<Map<string, string> | 'done'> => {
    const form = await readPostedForm(ctx, formTokens!, formFor(purpose), fields);
    if (form === 'gone') {
      ctx.res.destroy();
      return 'done';
    }
    return form instanceof Map ? form : refuse(ctx, form.code, form.detail);
  };

  /** Basic mode: a username and password chosen for the invited client. */
  const passwordInvite = async (ctx: RequestContext, purpose: Purpose & { kind: 'invite' }): Promise<Verdict> => {
    const blank: FormKind = { kind: 'password', username: '' };
    if (ctx.method === 'GET') {
      const client = clients.get(purpose.invite.clientId);
      return showForm(ctx, purpose, { kind: 'password', username: client?.identifier ?? '' });
    }
    const form = await postedForm(ctx, purpose, ['username', 'password', 'confirm']);
    if (form === 'done') return 'done';
    const username = form.get('username') ?? '';
    const password = form.get('password') ?? '';
    const again: FormKind = USERNAME.test(username) ? { kind: 'password', username } : blank;
    const invalid = (text: string) => showForm(ctx, purpose, again, 400, { code: 'registration_invalid', text });
    if (!USERNAME.test(username)) return invalid('choose a username of 1 to 128 characters, without ":" or control characters');
    if (password.length < MIN_PASSWORD_LENGTH) return invalid(`choose a password of at least ${MIN_PASSWORD_LENGTH} characters`);
    if (Buffer.byteLength(password) > BCRYPT_MAX_PASSWORD_BYTES) return invalid(`the password may be at most ${BCRYPT_MAX_PASSWORD_BYTES} bytes`);
    if (form.has('confirm') && form.get('confirm') !== password) return invalid('the two passwords differ');
    return submit(ctx, purpose, { endpoint_id: uuid, invite_token: purpose.token, username, password }, () => again);
  };

  /**
   * OAuth/OIDC: the visitor's login linked to the invite, or registered by itself. Without a session a page load is
   * sent through the login and back here; a post without one is refused (the form came from a session that ended).
   */
  const withLogin = async (ctx: RequestContext, purpose: Purpose): Promise<Verdict> => {
    const session = readSession(ctx.req.headers.cookie);
    if (session === undefined) {
      if (ctx.method === 'GET') return redirect(ctx, 302, loginHref(target(ctx)));
      return refuse(ctx, 'login_required', 'your login session has ended; sign in again and reload the form');
    }
    const form: FormKind = { kind: purpose.kind === 'invite' ? 'link' : 'self', ...accountOf(session) };
    if (purpose.kind === 'self') {
      const refusal = domainRefusal(session);
      if (refusal !== null) return refuse(ctx, 'email_domain_not_allowed', refusal);
      if (ctx.method === 'GET' && activeClientOf(session) !== undefined) {
        if (wantsJson(ctx.req.headers.accept)) return refuse(ctx, 'already_exists', 'this login is already a client of the endpoint');
        sendPage(ctx.res, 200, donePage(ctx.host, 'You already have access', `Your account is already registered on ${ctx.host}.`), false);
        return 'done';
      }
    }
    if (ctx.method === 'GET') return showForm(ctx, purpose, form);
    const posted = await postedForm(ctx, purpose, []);
    if (posted === 'done') return 'done';
    const request: RegistrationRequest = { endpoint_id: uuid, identity: identityOf(session) };
    if (purpose.kind === 'invite') request.invite_token = purpose.token;
    return submit(ctx, purpose, request, () => form);
  };

  const handle = (ctx: RequestContext, params: URLSearchParams): Verdict | Promise<Verdict> => {
    // Passwords and the session cookies (__Host-, Secure) belong on HTTPS: a page load is sent there; a form posted
    // in clear was never served by these pages (they are HTTPS only) and is refused.
    if (!ctx.secure) {
      if (ctx.method === 'GET') return redirect(ctx, 302, httpsLocation(ctx.host, deps.publicHttpsPort(), target(ctx)));
      return refuse(ctx, 'registration_form_invalid', 'registration forms are taken over HTTPS only');
    }
    if (tokenKey === undefined) return refuse(ctx, 'registration_unavailable', 'this edge has no secret key (EDGE_SECRET_KEY) to check registrations with');
    const token = params.get('invite');
    if (token === null) {
      if (!selfOpen) return refuse(ctx, 'self_registration_disabled', 'ask the endpoint’s owner for an invite');
      return withLogin(ctx, { kind: 'self' });
    }
    const invite = judgeInvite(token);
    if (invite === 'unknown') return refuse(ctx, 'invite_not_found', 'this invite link is not valid: it was already used, revoked, or mistyped');
    if (invite === 'expired') return refuse(ctx, 'invite_expired', 'ask the endpoint’s owner for a new invite');
    const purpose = { kind: 'invite' as const, token, invite };
    if (mode === 'basic') return passwordInvite(ctx, purpose);
    if (login) return withLogin(ctx, purpose);
    return refuse(ctx, 'registration_not_offered', `this endpoint signs visitors in with ${mode === 'none' ? 'no credential' : `mode ${mode}`}; ask its owner for access`);
  };

  return handle;
}

/**
 * The stage: which requests are this endpoint's registration pages is decided from the id and uuid; the pages
 * themselves are built on the first such request (registerPages) and kept with the compiled endpoint.
 */
function compileRegister(endpoint: EndpointConfig, rbac: RbacConfig, deps: StageDeps): Stage {
  const idText = String(endpoint.id);
  const uuid = endpoint.uuid;
  const mode = endpoint.auth?.mode;
  // Read now, not on first use: it fails to build (no session key) when the auth stage does, and keeps the auth stage's
  // logged-out list in StageMemory as that stage does.
  const readSession = mode === 'oauth' || mode === 'oidc' ? sessionReader(endpoint, deps) : NO_SESSION;
  let pages: RegisterPages | null = null;
  return {
    name: 'register',
    run(ctx): Verdict | Promise<Verdict> {
      if (ctx.path !== REGISTER_PATH || (ctx.method !== 'GET' && ctx.method !== 'POST') || ctx.query === '' || isUpgrade(ctx.req)) return 'next';
      const params = new URLSearchParams(ctx.query);
      const named = params.get('endpoint');
      if (named !== idText && named !== uuid) return 'next';
      pages ??= registerPages(endpoint, rbac, deps, readSession);
      return pages(ctx, params);
    },
  };
}

/**
 * The stage. Compiled when the endpoint has RBAC written and something to register for:
 * pending invites, self-registration on, or RBAC on (roles), so a used invite link still gets its page.
 */
export function registerStage(): StageFactory {
  return {
    id: 'register',
    healthProbe: 'runs',
    compile(endpoint, deps = DEFAULT_STAGE_DEPS) {
      const rbac = endpoint.rbac;
      if (rbac === undefined || rbac === null) return null;
      if (rbac.invites.length === 0 && !rbac.self_registration.enabled && rbac.roles.length === 0) return null;
      return compileRegister(endpoint, rbac, deps);
    },
  };
}

export const register: StageFactory = registerStage();
