// The public registration route edges call (POST /v1/rbac/registrations, docs/rbac.md "Invites and
// self-registration"): no API key, the invite token or the edge's identity assertion is the credential.
import { Type } from '@sinclair/typebox';
import { REGISTRATION_PATH, type RegistrationResult } from '../../shared/registration.ts';
import { Strict } from '../../shared/schema.ts';
import type { ControlApp, ControlDeps } from '../http.ts';
import { rbacRegistrationService } from '../services/rbac-registration.ts';
import { ErrorBody, ErrorResponses } from '../views.ts';

const RegistrationBody = Strict({
  endpoint_id: Type.String({ description: 'The endpoint uuid' }),
  invite_token: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
  username: Type.Optional(Type.String({ maxLength: 1024 })),
  password: Type.Optional(Type.String({ maxLength: 1024 })),
  identity: Type.Optional(Type.String({ minLength: 1, maxLength: 8192, description: 'The edge’s identity assertion of the visitor’s login' })),
});

const RegistrationView = Type.Object({
  client_id: Type.Integer(),
  identifier: Type.String(),
  status: Type.Literal('active'),
  registration_source: Type.Union([Type.Literal('invite'), Type.Literal('self')]),
  feed_version: Type.Integer({ description: 'The feed version that carries the change: an edge caught up to it admits the client' }),
});

export function rbacRegistrationRoutes(app: ControlApp, deps: ControlDeps): void {
  const registrations = rbacRegistrationService(deps);

  app.post(
    REGISTRATION_PATH,
    {
      config: { public: true },
      schema: {
        operationId: 'registerRbacClient',
        summary: 'Register a visitor as an RBAC client (called by edges)',
        description:
          'No API key: the invite token or the edge’s identity assertion is the credential. Exactly one way: invite_token with ' +
          'username + password (mode basic), invite_token with identity (mode oauth/oidc), or identity alone (self-registration, when ' +
          'enabled and the verified e-mail’s domain allowed). The invite is single use; the client becomes active. Answers the ' +
          'feed_version that carries the change. 404 invite_not_found (unknown, used, or another endpoint’s), 410 invite_expired, 401 ' +
          'invalid_identity_assertion, 403 self_registration_disabled / email_domain_not_allowed, 409 username or identity taken. ' +
          'A refused attempt changes nothing.',
        tags: ['rbac'],
        security: [],
        body: RegistrationBody,
        response: { 200: RegistrationView, 409: ErrorBody, 410: ErrorBody, ...ErrorResponses },
      },
    },
    async (req): Promise<RegistrationResult> => registrations.register(req.body),
  );
}
