// A real OpenID provider for login tests: oidc-provider (panva's certified OP) on 127.0.0.1 with test accounts and an
// interaction that logs in whichever account the test names and consents to what the client asked, so a visitor that
// follows redirects goes through the real authorization, token, userinfo and JWKS endpoints. It can also go down.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair } from 'jose';
import Provider from 'oidc-provider';

export interface TestAccount {
  email?: string;
  email_verified?: boolean;
}

export interface TestClient {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
}

export interface TestProvider {
  /** The issuer identifier, exactly as the provider writes it in `iss` (no trailing slash). */
  issuer: string;
  port: number;
  accounts: Map<string, TestAccount>;
  /** The account the next interaction logs in. */
  login: string;
  /** Requests by path (without query), for tests that count discovery or token calls. */
  requests: Map<string, number>;
  /** 'up' serves; 'down' answers every request 503; 'drop' cuts every connection. */
  mode: 'up' | 'down' | 'drop';
  close(): Promise<void>;
}

/** oidc-provider's storage, in memory for one provider (its quick-start adapter warns on every start). */
function memoryAdapter() {
  const store = new Map<string, Record<string, unknown>>();
  const byUid = new Map<string, string>();
  const byGrant = new Map<string, string[]>();
  return class MemoryAdapter {
    constructor(private readonly model: string) {}
    private key(id: string) {
      return `${this.model}:${id}`;
    }
    async upsert(id: string, payload: Record<string, unknown>) {
      const key = this.key(id);
      store.set(key, payload);
      if (typeof payload.uid === 'string') byUid.set(payload.uid, id);
      if (typeof payload.grantId === 'string') byGrant.set(payload.grantId, [...(byGrant.get(payload.grantId) ?? []), key]);
    }
    async find(id: string) {
      return store.get(this.key(id));
    }
    async findByUid(uid: string) {
      const id = byUid.get(uid);
      return id === undefined ? undefined : store.get(this.key(id));
    }
    async findByUserCode() {
      return undefined;
    }
    async consume(id: string) {
      const payload = store.get(this.key(id));
      if (payload) payload.consumed = Math.floor(Date.now() / 1000);
    }
    async destroy(id: string) {
      store.delete(this.key(id));
    }
    async revokeByGrantId(grantId: string) {
      for (const key of byGrant.get(grantId) ?? []) store.delete(key);
      byGrant.delete(grantId);
    }
  };
}

export async function startTestProvider(clients: TestClient[], accounts: Record<string, TestAccount> = {}): Promise<TestProvider> {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const issuer = `http://127.0.0.1:${port}`;
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: 'test-op-rs256', use: 'sig', alg: 'RS256' };
  const state: TestProvider = {
    issuer,
    port,
    accounts: new Map(Object.entries(accounts)),
    login: Object.keys(accounts)[0] ?? '',
    requests: new Map(),
    mode: 'up',
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  const provider = new Provider(issuer, {
    clients: clients.map((c) => ({ ...c, grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic' })),
    async findAccount(_ctx, id) {
      const account = state.accounts.get(id);
      if (account === undefined) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...account }) };
    },
    claims: { openid: ['sub'], email: ['email', 'email_verified'] },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    jwks: { keys: [jwk as never] },
    cookies: { keys: ['test-provider-cookie-key-0123456789'] },
    pkce: { required: () => true },
    adapter: memoryAdapter(),
    ttl: { AccessToken: 600, AuthorizationCode: 60, Grant: 3600, IdToken: 600, Interaction: 600, Session: 3600 },
  });
  // Its own error log would only add noise: the tests assert what the edge does with the failures.
  provider.on('server_error', () => {});
  const callback = provider.callback();

  /** The test's interaction: the named account logs in, then consents to every scope and claim asked for. */
  async function interact(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === 'login') {
      await provider.interactionFinished(req, res, { login: { accountId: state.login } }, { mergeWithLastSubmission: false });
      return;
    }
    const grant = details.grantId ? await provider.Grant.find(details.grantId) : new provider.Grant({ accountId: details.session!.accountId, clientId: details.params.client_id as string });
    const missing = details.prompt.details as { missingOIDCScope?: string[]; missingOIDCClaims?: string[] };
    if (missing.missingOIDCScope) grant!.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant!.addOIDCClaims(missing.missingOIDCClaims);
    const grantId = await grant!.save();
    await provider.interactionFinished(req, res, { consent: details.grantId ? {} : { grantId } }, { mergeWithLastSubmission: true });
  }

  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0];
    state.requests.set(path, (state.requests.get(path) ?? 0) + 1);
    if (state.mode === 'drop') return req.socket.destroy();
    if (state.mode === 'down') {
      res.writeHead(503, { 'content-type': 'text/plain' });
      return res.end('down for a test\n');
    }
    if (path.startsWith('/interaction/')) {
      interact(req, res).catch((err: unknown) => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`interaction failed: ${String(err)}\n`);
      });
      return;
    }
    void callback(req, res);
  });
  return state;
}
