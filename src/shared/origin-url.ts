// What an origin URL may be: the control API checks endpoint and routing-rule origins with it, the edge compiles
// rules' origins with it; which addresses are allowed is the platform's one address policy (address-policy.ts).
//
// The API can only judge what the URL says (an IP literal, a `localhost` name); a name is judged when the edge
// resolves it, so a name that resolves to 10.0.0.5 today, or is rebound to 127.0.0.1 later, is refused all the same.
import { hostRefusal } from './address-policy.ts';

/** Why a URL cannot be an origin; the message is the reason, without the field's name. */
export class OriginUrlError extends Error {
  override name = 'OriginUrlError';
}

/**
 * An origin URL in canonical form — scheme, host (with port when not the default) and path without a trailing
 * slash, since the path prefixes every forwarded path — or an OriginUrlError saying what is wrong with it.
 */
export function canonicalOriginUrl(raw: string, allowPrivate: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new OriginUrlError('not a valid absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OriginUrlError('only http and https origins are supported');
  if (url.username || url.password) throw new OriginUrlError('credentials in the URL are not allowed');
  if (url.search || url.hash) throw new OriginUrlError('an origin has no query or fragment');
  if (!allowPrivate) {
    const refusal = hostRefusal(url.hostname);
    if (refusal !== null) throw new OriginUrlError(`origins must have a public address (private, loopback and link-local origins are not allowed on this platform): ${refusal}`);
  }
  return `${url.protocol}//${url.host}${url.pathname.replace(/\/$/, '')}`;
}
