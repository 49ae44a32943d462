// The certificate library (upload, list, get, delete) and the endpoint TLS settings built on it: which custom
// certificate an endpoint serves (PUT /v1/endpoints/{id}/certificate) and its client-certificate (mTLS) policy.
import { Type } from '@sinclair/typebox';
import { Nullable, Strict, Timestamp, Uuid } from '../../shared/schema.ts';
import { MAX_CA_CERTIFICATES } from '../../shared/x509.ts';
import type { CertificateRow } from '../../store/certificates.ts';
import type { ControlApp, ControlDeps } from '../http.ts';
import { certificateService } from '../services/certificates.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

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

function certificateView(c: CertificateRow, now = Date.now()) {
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

export function certificateRoutes(app: ControlApp, deps: ControlDeps): void {
  const certificates = certificateService(deps);

  app.post(
    '/v1/certificates',
    {
      config: { permission: 'certificates:manage' },
      schema: {
        operationId: 'createCertificate',
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
    async (req, reply) => reply.status(201).send(certificateView(await certificates.upload(req.caller, req.body))),
  );

  app.get(
    '/v1/certificates',
    {
      schema: {
        operationId: 'listCertificates',
        summary: "List the active account's certificate library (keys are never returned)",
        tags: ['certificates'],
        response: { 200: Type.Object({ items: Type.Array(CertificateView) }), ...ErrorResponses },
      },
    },
    async (req) => {
      const now = Date.now();
      return { items: (await certificates.list(req.caller)).map((c) => certificateView(c, now)) };
    },
  );

  app.get(
    '/v1/certificates/:id',
    {
      schema: {
        operationId: 'getCertificate',
        summary: 'Get a certificate of the library',
        description: "Another account's certificate answers 404, the same as a missing one.",
        tags: ['certificates'],
        params: IdParams,
        response: { 200: CertificateView, ...ErrorResponses },
      },
    },
    async (req) => certificateView(await certificates.get(req.caller, req.params.id)),
  );

  app.delete(
    '/v1/certificates/:id',
    {
      config: { permission: 'certificates:manage' },
      schema: {
        operationId: 'deleteCertificate',
        summary: 'Delete a certificate; refused (409) while an endpoint serves it',
        description: 'Requires certificates:manage. detail.endpoints lists the uuids of the endpoints still using it.',
        tags: ['certificates'],
        params: IdParams,
        response: { 204: Type.Null(), 409: ErrorBody, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      await certificates.remove(req.caller, req.params.id);
      return reply.status(204).send(null);
    },
  );

  app.put(
    '/v1/endpoints/:id/certificate',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'setEndpointCertificate',
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
    async (req) => ({ ok: true as const, ...(await certificates.assign(req.caller, req.params.id, req.body)) }),
  );

  app.get(
    '/v1/endpoints/:id/mtls',
    {
      config: { permission: 'endpoints:read' },
      schema: {
        operationId: 'getEndpointMtls',
        summary: "An endpoint's client-certificate (mTLS) policy and the CA certificates it trusts",
        description: 'Requires endpoints:read.',
        tags: ['endpoints', 'mtls'],
        params: EndpointParams,
        response: { 200: MtlsView, ...ErrorResponses },
      },
    },
    async (req) => certificates.readMtls(req.caller, req.params.id),
  );

  app.put(
    '/v1/endpoints/:id/mtls',
    {
      config: { permission: 'endpoints:update' },
      schema: {
        operationId: 'setEndpointMtls',
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
    async (req) => certificates.writeMtls(req.caller, req.params.id, req.body),
  );
}
