// Addresses visitors are sent to on an endpoint's own host, shared by the edge (which answers them) and the control
// API (which shows users what to register at an identity provider), so the two can never disagree.

/** The edge's reserved paths on an endpoint in mode oauth/oidc (never forwarded). */
export const AUTH_PREFIX = '/.edge/auth';
export const LOGIN_PATH = `${AUTH_PREFIX}/login`;
export const CALLBACK_PATH = `${AUTH_PREFIX}/callback`;
export const LOGOUT_PATH = `${AUTH_PREFIX}/logout`;

/** `https://host[:port]target`, the port left out when it is HTTPS's default. */
export function httpsLocation(host: string, port: number, target: string): string {
  const authority = port === 443 || port === 0 ? host : `${host}:${port}`;
  return `https://${authority}${target}`;
}
