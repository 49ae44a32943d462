// A real JWKS server for JWT tests: node:http serving the public halves of keys made with jose, counting fetches, and
// able to rotate its keys or fail (status, dropped connection) on demand; plus signing helpers for test tokens.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';

export interface TestKey {
  kid: string;
  alg: string;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  jwk: JWK;
}

export async function makeKey(kid: string, alg = 'RS256'): Promise<TestKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return { kid, alg, privateKey, publicKey, jwk };
}

/** A signed JWT: `exp` an hour from now unless the payload says otherwise (null leaves it out). */
export function sign(key: TestKey, payload: Omit<JWTPayload, 'exp'> & { exp?: number | null } = {}, header: Record<string, unknown> = {}): Promise<string> {
  const { exp, ...claims } = payload;
  const jwt = new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid, ...header }).setIssuedAt();
  if (exp !== null) jwt.setExpirationTime(exp ?? Math.floor(Date.now() / 1000) + 3600);
  return jwt.sign(key.privateKey);
}

export interface JwksServer {
  url: string;
  port: number;
  /** Fetches served (or refused) so far. */
  fetches: number;
  keys: TestKey[];
  /** 'ok' serves the keys; a status answers that; 'drop' cuts the connection; 'huge' serves an oversized document. */
  mode: 'ok' | 'drop' | 'huge' | number;
  close(): Promise<void>;
}

export async function startJwksServer(keys: TestKey[]): Promise<JwksServer> {
  const state: JwksServer = {
    url: '',
    port: 0,
    fetches: 0,
    keys,
    mode: 'ok',
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  const server = http.createServer((req, res) => {
    state.fetches++;
    if (state.mode === 'drop') return req.socket.destroy();
    if (typeof state.mode === 'number') {
      res.writeHead(state.mode);
      return res.end();
    }
    const body = state.mode === 'huge' ? JSON.stringify({ keys: [], padding: 'x'.repeat(600 * 1024) }) : JSON.stringify({ keys: state.keys.map((k) => k.jwk) });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.port = (server.address() as AddressInfo).port;
  state.url = `http://127.0.0.1:${state.port}/.well-known/jwks.json`;
  return state;
}
