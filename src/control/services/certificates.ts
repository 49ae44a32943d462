// The certificate library (upload, list, get, delete) and the endpoint TLS settings built on it, as operations: which
// custom certificate an endpoint serves and its client-certificate (mTLS) policy. The store touches what edges see.
import { X509Certificate } from 'node:crypto';
import { fail } from '../../shared/errors.ts';
import {
  certificateCoversHost,
  keyMatchesCertificate,
  describeCaBundle,
  parseCaBundle,
  parseCertificateChain,
  parsePrivateKey,
  privateKeyPkcs8Pem,
  sansMatchDomain,
  X509Error,
} from '../../shared/x509.ts';
import * as store from '../../store/certificates.ts';
import { findDomainById } from '../../store/domains.ts';
import { isForeignKeyViolation } from '../../store/db.ts';
import type { Caller } from '../caller.ts';
import { endpointForCaller, readableEndpoint, requireEndpointEntitlement } from '../endpoint-access.ts';
import { int64Param, type ControlDeps } from '../http.ts';
import { iso } from '../views.ts';

const MAX_CHAIN_CERTIFICATES = 10;

export type MtlsMode = 'disabled' | 'optional' | 'required';

export interface MtlsPolicy {
  mode: MtlsMode;
  ca_certificates: ReturnType<typeof describeCaBundle>;
}

/** Runs a PEM check and turns its refusal into a 400 whose detail names the field and a stable reason. */
function checked<T>(field: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof X509Error) {
      throw fail.invalid_request(err.message, { field, reason: err.reason, ...(err.index !== undefined ? { index: err.index } : {}) });
    }
    throw err;
  }
}

/**
 * 400 with a stable detail.reason, for assignment refusals a client may want to tell apart. The field is the one the
 * refusal is about: the certificate chosen, or the endpoint it was asked for.
 */
function refuse(field: 'certificate_id' | 'endpoint', reason: string, message: string, extra: Record<string, unknown> = {}) {
  return fail.invalid_request(message, { field, reason, ...extra });
}

/** The operations on the account's certificates and endpoints' TLS. The route has checked the caller's permission. */
export function certificateService({ db, secrets, config }: Pick<ControlDeps, 'db' | 'secrets' | 'config'>) {
  async function certificateFor(accountId: number, rawId: string): Promise<store.CertificateRow> {
    const cert = await store.findCertificate(db, accountId, int64Param(rawId));
    if (!cert) throw fail.not_found('Certificate not found');
    return cert;
  }

  return {
    /** Chain and key checked (each certificate signed by the next, the key the leaf's); the key sealed at rest. */
    async upload(caller: Caller, body: { name?: string; certificate_pem: string; private_key_pem: string }): Promise<store.CertificateRow> {
      caller.requireEntitlement('custom_ssl');
      const chain = checked('certificate_pem', () => parseCertificateChain(body.certificate_pem, { maxCertificates: MAX_CHAIN_CERTIFICATES }));
      const key = checked('private_key_pem', () => parsePrivateKey(body.private_key_pem));
      if (!keyMatchesCertificate(chain.certificates[0], key)) {
        throw fail.invalid_request('The private key does not match the certificate (the first certificate in certificate_pem)', {
          field: 'private_key_pem',
          reason: 'key_mismatch',
        });
      }
      const { leaf } = chain;
      return db.transaction((tx) =>
        store.insertCertificate(tx, {
          accountId: caller.account.id,
          userId: caller.user.id,
          name: body.name ?? leaf.sans[0],
          certificatePem: chain.pem,
          // Sealed in its canonical PKCS#8 form, whatever form it came in; plaintext never reaches the store.
          privateKeySealed: secrets.seal(privateKeyPkcs8Pem(key)),
          subject: leaf.subject,
          issuer: leaf.issuer,
          sans: leaf.sans,
          fingerprintSha256: leaf.fingerprintSha256,
          notBefore: leaf.notBefore,
          notAfter: leaf.notAfter,
        }),
      );
    },

    list: (caller: Caller): Promise<store.CertificateRow[]> => store.listCertificates(db, caller.account.id),

    get: (caller: Caller, rawId: string): Promise<store.CertificateRow> => certificateFor(caller.account.id, rawId),

    /** Refused (409, naming the endpoints) while an endpoint serves it. */
    async remove(caller: Caller, rawId: string): Promise<void> {
      const id = int64Param(rawId);
      try {
        await db.transaction(async (tx) => {
          const cert = await store.findCertificate(tx, caller.account.id, id, { lock: 'update' });
          if (!cert) throw fail.not_found('Certificate not found');
          const users = await store.endpointsUsingCertificate(tx, id);
          if (users.length > 0) {
            throw fail.conflict(`The certificate is assigned to ${users.length} endpoint(s); detach it first`, { reason: 'certificate_in_use', endpoints: users });
          }
          await store.deleteCertificate(tx, id);
        });
      } catch (err) {
        if (isForeignKeyViolation(err)) throw fail.conflict('The certificate is assigned to an endpoint; detach it first', { reason: 'certificate_in_use' });
        throw err;
      }
    },

    /**
     * Serves a library certificate on an endpoint of a verified custom domain, or reverts to the platform certificate
     * (use_default, or certificate_id 0 or null). Answers the certificate now served (null: the platform's).
     */
    async assign(
      caller: Caller,
      endpointUuid: string,
      body: { certificate_id?: number | null; use_default?: boolean },
    ): Promise<{ certificate_id: number; certificate_name: string } | { certificate_id: null }> {
      // Admins may act on another account's endpoint, whose plan decides (checked once the endpoint is known).
      if (!caller.isAdmin) caller.requireEntitlement('custom_ssl');
      const { certificate_id: certificateId, use_default: useDefault } = body;
      const revert = useDefault === true || certificateId === null || certificateId === 0;
      if (useDefault === true && certificateId) {
        throw fail.invalid_request('use_default: true cannot be combined with a certificate_id', { field: 'use_default', reason: 'conflicting_fields' });
      }
      if (!revert && certificateId === undefined) {
        throw fail.invalid_request('Give certificate_id, or use_default: true to revert to the platform certificate', { field: 'certificate_id', reason: 'missing_field' });
      }

      return db.transaction(async (tx) => {
        // The endpoint row is locked so concurrent assignments apply one after the other.
        const endpoint = await endpointForCaller(tx, caller, endpointUuid, { forUpdate: true });
        await requireEndpointEntitlement(tx, caller, config.plans, endpoint, 'custom_ssl');
        if (endpoint.domain_id === null) {
          throw refuse('endpoint', 'not_custom_domain', 'Custom certificates are only for endpoints on a custom domain; this one uses the platform domain');
        }
        const domain = await findDomainById(tx, endpoint.domain_id);
        // The endpoint's own account must hold its domain verified (admins act on behalf of that account).
        if (!domain || domain.account_id !== endpoint.account_id || domain.verified_at === null) {
          throw refuse('endpoint', 'domain_not_owned', "The endpoint's domain is not a verified custom domain of this account");
        }

        if (revert) {
          await store.setEndpointCertificate(tx, endpoint.id, null);
          return { certificate_id: null };
        }

        // Ids past 2^53 cannot exist (bigserial); treat them as missing rather than send a rounded one to SQL.
        const id = certificateId!;
        const cert = Number.isSafeInteger(id) ? await store.findCertificate(tx, endpoint.account_id, id, { lock: 'share' }) : null;
        if (!cert) throw fail.not_found('Certificate not found');
        const now = Date.now();
        if (cert.status !== 'active') throw refuse('certificate_id', 'certificate_not_active', `Certificate ${cert.id} is ${cert.status}`, { status: cert.status });
        if (cert.not_after.getTime() <= now) {
          throw refuse('certificate_id', 'certificate_expired', `Certificate ${cert.id} expired at ${iso(cert.not_after)}`, { not_after: iso(cert.not_after) });
        }
        if (cert.not_before.getTime() > now) {
          throw refuse('certificate_id', 'certificate_not_yet_valid', `Certificate ${cert.id} is not valid before ${iso(cert.not_before)}`, { not_before: iso(cert.not_before) });
        }
        if (!sansMatchDomain(cert.sans, domain.name)) {
          throw refuse('certificate_id', 'domain_mismatch', `Certificate ${cert.id} names nothing in ${domain.name}`, { domain: domain.name, sans: cert.sans });
        }
        if (!certificateCoversHost(new X509Certificate(cert.certificate_pem), endpoint.hostname)) {
          throw refuse('certificate_id', 'hostname_not_covered', `Certificate ${cert.id} does not cover ${endpoint.hostname}`, { hostname: endpoint.hostname, sans: cert.sans });
        }
        await store.setEndpointCertificate(tx, endpoint.id, cert.id);
        return { certificate_id: cert.id, certificate_name: cert.name };
      });
    },

    async readMtls(caller: Caller, endpointUuid: string): Promise<MtlsPolicy> {
      const endpoint = await readableEndpoint(db, caller, endpointUuid);
      return { mode: endpoint.mtls_mode, ca_certificates: describeCaBundle(endpoint.mtls_ca_pem) };
    },

    /** `optional` and `required` need a CA bundle, which replaces the stored one; `disabled` clears it and takes none. */
    async writeMtls(caller: Caller, endpointUuid: string, body: { mode: MtlsMode; ca_bundle_pem?: string }): Promise<MtlsPolicy> {
      const { mode, ca_bundle_pem: bundlePem } = body;
      let bundle: { pem: string; certificates: ReturnType<typeof describeCaBundle> } | null = null;
      if (mode === 'disabled') {
        if (bundlePem !== undefined) throw fail.invalid_request('ca_bundle_pem is not accepted with mode "disabled"', { field: 'ca_bundle_pem', reason: 'unexpected_field' });
      } else {
        if (bundlePem === undefined) throw fail.invalid_request(`mode "${mode}" needs ca_bundle_pem`, { field: 'ca_bundle_pem', reason: 'missing_field' });
        bundle = checked('ca_bundle_pem', () => parseCaBundle(bundlePem));
      }
      await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, caller, endpointUuid, { forUpdate: true });
        await store.setEndpointMtls(tx, endpoint.id, mode, bundle?.pem ?? null);
      });
      return { mode, ca_certificates: bundle?.certificates ?? [] };
    },
  };
}
