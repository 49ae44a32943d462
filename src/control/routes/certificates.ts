// The certificate library (upload, list, get, delete) and the endpoint TLS settings built on it: which custom
// certificate an endpoint serves (PUT /v1/endpoints/{id}/certificate) and its client-certificate (mTLS) policy.
import { X509Certificate } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import { fail } from '../../shared/errors.ts';
import { Nullable, Strict, Timestamp, Uuid } from '../../shared/schema.ts';
import {
  certificateCoversHost,
  keyMatchesCertificate,
  MAX_CA_CERTIFICATES,
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
import { endpointForCaller, readableEndpoint, requireEndpointEntitlement } from '../endpoint-access.ts';
import { int64Param, type ControlApp, type ControlDeps } from '../http.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

const MAX_CHAIN_CERTIFICATES = 10;

const CertificateView = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  subject: Type.String(),
  issuer: Type.String(),
  sans: Type.Array(Type.String(), { description: 'DNS names covered (subjectAltName; the subject CN only when there is none)' }),
  not_before: Timestamp(),
  not_after: Timestamp(),
  fingerprint_sha256: Type.String({ description: 'SHA-256 of the leaf DER, lower-case hex' }),
  status: Type.Union([Type.Literal('active'), Type.Literal('revoked')]),
  expired: Type.Boolean(),
  created_at: Timestamp(),
});

const MtlsView = Type.Object({
  mode: Type.Union([Type.Literal('disabled'), Type.Literal('optional'), Type.Literal('required')]),
  ca_certificates: Type.Array(Type.Object({ subject: Type.String(), fingerprint_sha256: Type.String(), not_after: Timestamp() })),
});

const IdParams = Type.Object({ id: Type.String({ description: 'Certificate id (int64)' }) });
const EndpointParams = Type.Object({ id: Uuid({ description: 'Endpoint uuid' }) });

function certificateView(c: store.CertificateRow, now = Date.now()) {
  return {
    id: c.id,
    name: c.name,
    subject: c.subject,
    issuer: c.issuer,
    sans: c.sans,
    not_before: iso(c.not_before),
    not_after: iso(c.not_after),
    fingerprint_sha256: c.fingerprint_sha256,
    status: c.status,
    expired: c.not_after.getTime() <= now,
    created_at: iso(c.created_at),
  };
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

/** 400 with a stable detail.reason, for assignment refusals a client may want to tell apart. */
function refuse(reason: string, message: string, extra: Record<string, unknown> = {}) {
  return fail.invalid_request(message, { reason, ...extra });
}

export function certificateRoutes(app: ControlApp, { db, secrets, config }: ControlDeps): void {
  async function certificateFor(accountId: number, rawId: string): Promise<store.CertificateRow> {
    const cert = await store.findCertificate(db, accountId, int64Param(rawId));
    if (!cert) throw fail.not_found('Certificate not found');
    return cert;
  }

  app.post(
    '/v1/certificates',
    {
      schema: {
        summary: 'Upload a certificate (leaf first, then its chain) and its private key to the account library',
        description:
          'Requires certificates:manage and the custom_ssl entitlement. The chain must parse, each certificate must be signed by the next, ' +
          'and the key must match the leaf; otherwise 400 with detail {field, reason}. The key is sealed at rest and never returned. ' +
          'An expired certificate is accepted into the library (expired: true) but cannot be assigned.',
        tags: ['certificates'],
        body: Strict({
          name: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'Defaults to the first DNS name' })),
          certificate_pem: Type.String({ minLength: 1, maxLength: 65536 }),
          private_key_pem: Type.String({ minLength: 1, maxLength: 16384 }),
        }),
        response: { 201: CertificateView, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      req.caller.requirePermission('certificates:manage');
      req.caller.requireEntitlement('custom_ssl');
      const chain = checked('certificate_pem', () => parseCertificateChain(req.body.certificate_pem, { maxCertificates: MAX_CHAIN_CERTIFICATES }));
      const key = checked('private_key_pem', () => parsePrivateKey(req.body.private_key_pem));
      if (!keyMatchesCertificate(chain.certificates[0], key)) {
        throw fail.invalid_request('The private key does not match the certificate (the first certificate in certificate_pem)', {
          field: 'private_key_pem',
          reason: 'key_mismatch',
        });
      }
      const { leaf } = chain;
      const row = await db.transaction((tx) =>
        store.insertCertificate(tx, {
          accountId: req.caller.account.id,
          userId: req.caller.user.id,
          name: req.body.name ?? leaf.sans[0],
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
      return reply.status(201).send(certificateView(row));
    },
  );

  app.get(
    '/v1/certificates',
    {
      schema: {
        summary: "List the active account's certificate library (keys are never returned)",
        tags: ['certificates'],
        response: { 200: Type.Object({ items: Type.Array(CertificateView) }), ...ErrorResponses },
      },
    },
    async (req) => {
      const now = Date.now();
      return { items: (await store.listCertificates(db, req.caller.account.id)).map((c) => certificateView(c, now)) };
    },
  );

  app.get(
    '/v1/certificates/:id',
    {
      schema: {
        summary: 'Get a certificate of the library',
        description: "Another account's certificate answers 404, the same as a missing one.",
        tags: ['certificates'],
        params: IdParams,
        response: { 200: CertificateView, ...ErrorResponses },
      },
    },
    async (req) => certificateView(await certificateFor(req.caller.account.id, req.params.id)),
  );

  app.delete(
    '/v1/certificates/:id',
    {
      schema: {
        summary: 'Delete a certificate; refused (409) while an endpoint serves it',
        description: 'Requires certificates:manage. detail.endpoints lists the uuids of the endpoints still using it.',
        tags: ['certificates'],
        params: IdParams,
        response: { 204: Type.Null(), 409: ErrorBody, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      req.caller.requirePermission('certificates:manage');
      const id = int64Param(req.params.id);
      try {
        await db.transaction(async (tx) => {
          const cert = await store.findCertificate(tx, req.caller.account.id, id, { lock: 'update' });
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
      return reply.status(204).send(null);
    },
  );

  app.put(
    '/v1/endpoints/:id/certificate',
    {
      schema: {
        summary: 'Serve a custom certificate from the library on an endpoint, or revert to the platform certificate',
        description:
          'Only for endpoints on a verified custom domain of the account (else 400); requires endpoints:update and the custom_ssl entitlement. ' +
          '`use_default: true`, or certificate_id 0 or null, reverts to the platform-managed ACME certificate (the custom one stays in the library). ' +
          'Otherwise certificate_id must name an active, unexpired library certificate with a SAN in the endpoint domain that covers the hostname ' +
          '(400 with detail.reason certificate_not_active, certificate_expired, certificate_not_yet_valid, domain_mismatch or hostname_not_covered). ' +
          'A body with neither a certificate_id nor use_default: true is refused rather than read as a revert.',
        tags: ['endpoints', 'certificates'],
        params: EndpointParams,
        body: Strict({
          certificate_id: Type.Optional(Nullable(Type.Integer({ minimum: 0 }))),
          use_default: Type.Optional(Type.Boolean()),
        }),
        response: {
          200: Type.Object({
            ok: Type.Literal(true),
            certificate_id: Nullable(Type.Integer()),
            certificate_name: Type.Optional(Type.String({ description: 'Omitted on revert' })),
          }),
          ...ErrorResponses,
        },
      },
    },
    async (req) => {
      const { caller } = req;
      caller.requirePermission('endpoints:update');
      // Admins may act on another account's endpoint, whose plan decides (checked once the endpoint is known).
      if (!caller.isAdmin) caller.requireEntitlement('custom_ssl');
      const { certificate_id: certificateId, use_default: useDefault } = req.body;
      const revert = useDefault === true || certificateId === null || certificateId === 0;
      if (useDefault === true && certificateId) {
        throw fail.invalid_request('use_default: true cannot be combined with a certificate_id', { reason: 'conflicting_fields' });
      }
      if (!revert && certificateId === undefined) {
        throw fail.invalid_request('Give certificate_id, or use_default: true to revert to the platform certificate', { field: 'certificate_id', reason: 'missing_field' });
      }

      return db.transaction(async (tx) => {
        // The endpoint row is locked so concurrent assignments apply one after the other.
        const endpoint = await endpointForCaller(tx, caller, req.params.id, { forUpdate: true });
        await requireEndpointEntitlement(tx, caller, config.plans, endpoint, 'custom_ssl');
        if (endpoint.domain_id === null) {
          throw refuse('not_custom_domain', 'Custom certificates are only for endpoints on a custom domain; this one uses the platform domain');
        }
        const domain = await findDomainById(tx, endpoint.domain_id);
        // The endpoint's own account must hold its domain verified (admins act on behalf of that account).
        if (!domain || domain.account_id !== endpoint.account_id || domain.verified_at === null) {
          throw refuse('domain_not_owned', "The endpoint's domain is not a verified custom domain of this account");
        }

        if (revert) {
          await store.setEndpointCertificate(tx, endpoint.id, null);
          return { ok: true as const, certificate_id: null };
        }

        // Ids past 2^53 cannot exist (bigserial); treat them as missing rather than send a rounded one to SQL.
        const id = certificateId!;
        const cert = Number.isSafeInteger(id) ? await store.findCertificate(tx, endpoint.account_id, id, { lock: 'share' }) : null;
        if (!cert) throw fail.not_found('Certificate not found');
        const now = Date.now();
        if (cert.status !== 'active') throw refuse('certificate_not_active', `Certificate ${cert.id} is ${cert.status}`, { status: cert.status });
        if (cert.not_after.getTime() <= now) {
          throw refuse('certificate_expired', `Certificate ${cert.id} expired at ${iso(cert.not_after)}`, { not_after: iso(cert.not_after) });
        }
        if (cert.not_before.getTime() > now) {
          throw refuse('certificate_not_yet_valid', `Certificate ${cert.id} is not valid before ${iso(cert.not_before)}`, { not_before: iso(cert.not_before) });
        }
        if (!sansMatchDomain(cert.sans, domain.name)) {
          throw refuse('domain_mismatch', `Certificate ${cert.id} names nothing in ${domain.name}`, { domain: domain.name, sans: cert.sans });
        }
        if (!certificateCoversHost(new X509Certificate(cert.certificate_pem), endpoint.hostname)) {
          throw refuse('hostname_not_covered', `Certificate ${cert.id} does not cover ${endpoint.hostname}`, { hostname: endpoint.hostname, sans: cert.sans });
        }

        await store.setEndpointCertificate(tx, endpoint.id, cert.id);
        return { ok: true as const, certificate_id: cert.id, certificate_name: cert.name };
      });
    },
  );

  app.get(
    '/v1/endpoints/:id/mtls',
    {
      schema: {
        summary: "An endpoint's client-certificate (mTLS) policy and the CA certificates it trusts",
        description: 'Requires endpoints:read.',
        tags: ['endpoints', 'mtls'],
        params: EndpointParams,
        response: { 200: MtlsView, ...ErrorResponses },
      },
    },
    async (req) => {
      const endpoint = await readableEndpoint(db, req.caller, req.params.id);
      return { mode: endpoint.mtls_mode, ca_certificates: describeCaBundle(endpoint.mtls_ca_pem) };
    },
  );

  app.put(
    '/v1/endpoints/:id/mtls',
    {
      schema: {
        summary: "Set an endpoint's client-certificate (mTLS) policy",
        description:
          'Requires endpoints:update. mode `optional` asks visitors for a client certificate and verifies one if sent; `required` refuses ' +
          `visitors without a valid one. Both need ca_bundle_pem: 1-${MAX_CA_CERTIFICATES} PEM CA certificates (basicConstraints CA:TRUE, unexpired), ` +
          'which replaces the stored bundle. `disabled` clears the bundle and takes no ca_bundle_pem.',
        tags: ['endpoints', 'mtls'],
        params: EndpointParams,
        body: Strict({
          mode: Type.Union([Type.Literal('disabled'), Type.Literal('optional'), Type.Literal('required')]),
          ca_bundle_pem: Type.Optional(Type.String({ minLength: 1, maxLength: 262144 })),
        }),
        response: { 200: MtlsView, ...ErrorResponses },
      },
    },
    async (req) => {
      req.caller.requirePermission('endpoints:update');
      const { mode, ca_bundle_pem: bundlePem } = req.body;
      let bundle: { pem: string; certificates: ReturnType<typeof describeCaBundle> } | null = null;
      if (mode === 'disabled') {
        if (bundlePem !== undefined) throw fail.invalid_request('ca_bundle_pem is not accepted with mode "disabled"', { field: 'ca_bundle_pem', reason: 'unexpected_field' });
      } else {
        if (bundlePem === undefined) throw fail.invalid_request(`mode "${mode}" needs ca_bundle_pem`, { field: 'ca_bundle_pem', reason: 'missing_field' });
        bundle = checked('ca_bundle_pem', () => parseCaBundle(bundlePem));
      }
      await db.transaction(async (tx) => {
        const endpoint = await endpointForCaller(tx, req.caller, req.params.id, { forUpdate: true });
        await store.setEndpointMtls(tx, endpoint.id, mode, bundle?.pem ?? null);
      });
      return { mode, ca_certificates: bundle?.certificates ?? [] };
    },
  );
}
