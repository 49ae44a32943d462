// A DNS lookup that refuses names resolving to anything the address policy does not call public: the one check for
// every outbound connection to a user-supplied host name (origins, JWKS, alert webhooks), so DNS rebinding cannot
// steer one of them to loopback or a private network. Used by the edge and the worker alike.
import { lookup as systemLookup, type LookupAddress } from 'node:dns';
import type { LookupFunction } from 'node:net';
import { isPublicAddress } from './address-policy.ts';

/** A connection refused because its host name resolved to a loopback, private or link-local address. */
export class PrivateAddressError extends Error {
  override name = 'PrivateAddressError';
  readonly code = 'EDGE_ORIGIN_PRIVATE_ADDRESS';
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`${host} resolves to ${address}, which is not a public address`);
  }
}

/**
 * Resolves every address of the name (as net's happy-eyeballs connect does) and fails with PrivateAddressError when
 * any is not public. Refusing the whole answer rather than filtering it keeps a name that mixes public and private
 * addresses from reaching the private one on a later connection.
 */
export function publicOnlyLookup(resolve: LookupFunction = systemLookup as LookupFunction): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (err, answer) => {
      if (err) return callback(err, '');
      const addresses = answer as unknown as LookupAddress[];
      if (addresses.length === 0) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '');
      const refused = addresses.find((a) => !isPublicAddress(a.address));
      if (refused) return callback(new PrivateAddressError(hostname, refused.address), '');
      if (options.all) callback(null, addresses);
      else callback(null, addresses[0].address, addresses[0].family);
    });
  };
}
