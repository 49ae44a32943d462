// Request and answer shapes of the RBAC client routes (docs/rbac.md "Clients", "Invites and self-registration"), and
// the view that fills the written-client answer. What a schema leaves open is checked in services/rbac-clients.ts.
import { Type } from '@sinclair/typebox';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import { RBAC_CLIENT_STATUSES } from '../../shared/snapshot.ts';
import { BCRYPT_MAX_PASSWORD_BYTES } from '../../shared/visitor-credentials.ts';
import { MAX_IDENTITIES_PER_CLIENT, REGISTRATION_SOURCES } from '../../store/rbac-clients.ts';
import { DEFAULT_INVITE_HOURS, MAX_ALLOWED_EMAIL_DOMAINS, MAX_INVITE_HOURS, MAX_METADATA_BYTES, type Invite, type WrittenClient } from '../services/rbac-clients.ts';
import { ErrorBody, ErrorResponses, iso, RbacClientView, rbacClientView } from '../views.ts';

const IdentityBody = Strict({
  provider: Type.Union([Type.Integer({ minimum: 1 }), Type.String({ minLength: 1, maxLength: 100 })], {
    description: 'The endpoint’s OAuth/OIDC provider: its id (number or decimal string) or its name; read back as the id (decimal string)',
  }),
  subject: Type.String({ minLength: 1, maxLength: 255, description: 'The provider’s subject (sub) of the visitor' }),
});
const IdentitiesBody = Type.Array(IdentityBody, { maxItems: MAX_IDENTITIES_PER_CLIENT, description: 'Linked OAuth/OIDC identities (mode oauth or oidc)' });
const Metadata = Type.Object({}, { additionalProperties: true, description: `Free-form JSON object, at most ${MAX_METADATA_BYTES} bytes` });
const StatusField = Type.String({ enum: [...RBAC_CLIENT_STATUSES], description: 'active (also when empty), invited, disabled or revoked' });

export const CreateBody = Strict({
  identifier: Type.String({ maxLength: 1024, description: 'Required; canonicalised to lower case; 1-255 visible ASCII characters; unique per endpoint' }),
  display_name: Type.Optional(Type.String({ maxLength: 1024 })),
  email: Type.Optional(Nullable(Type.String({ maxLength: 1024, description: 'Lower-cased; unique per endpoint; matched against a login’s verified e-mail' }))),
  username: Type.Optional(Type.String({ maxLength: 1024, description: 'With password; mode basic' })),
  password: Type.Optional(Type.String({ maxLength: 1024, description: `With username; mode basic; stored as a bcrypt hash; at most ${BCRYPT_MAX_PASSWORD_BYTES} bytes` })),
  auto_generate_token: Type.Optional(Type.Boolean({ description: 'Mode token: generate a token, returned once as generated_token' })),
  token: Type.Optional(Type.String({ maxLength: 1024, description: 'Mode token: a token of your own (RFC 6750 b64token, ≥ 16 characters); stored as a keyed digest' })),
  identities: Type.Optional(IdentitiesBody),
  status: Type.Optional(StatusField),
  metadata: Type.Optional(Metadata),
  registration_source: Type.Optional(Type.String({ enum: [...REGISTRATION_SOURCES], description: 'admin (default), self, invite or sso' })),
});

export const UpdateBody = Strict({
  display_name: Type.Optional(Type.String({ maxLength: 1024 })),
  email: Type.Optional(Nullable(Type.String({ maxLength: 1024, description: 'null or "" removes it' }))),
  status: Type.Optional(
    Type.String({ enum: ['active', 'disabled', 'revoked'], description: 'active, disabled or revoked; a client never goes back to invited (400)' }),
  ),
  username: Type.Optional(Type.String({ maxLength: 1024, description: 'Password reset: with password; mode basic' })),
  password: Type.Optional(Type.String({ maxLength: 1024 })),
  auto_generate_token: Type.Optional(Type.Boolean({ description: 'Token reset (mode token): a new token, returned once as generated_token' })),
  token: Type.Optional(Type.String({ maxLength: 1024, description: 'Token reset (mode token) to a token of your own' })),
  identities: Type.Optional(Type.Array(IdentityBody, { maxItems: MAX_IDENTITIES_PER_CLIENT, description: 'Replaces the linked identities (mode oauth or oidc)' })),
  metadata: Type.Optional(Metadata),
});

export const ClientWithToken = Type.Object(
  {
    ...RbacClientView.properties,
    generated_token: Type.Optional(Type.String({ description: 'Only when auto_generate_token was true: the token, shown this once' })),
  },
  { description: 'RBAC client' },
);

export const InviteBody = Strict({
  email: Type.Optional(Nullable(Type.String({ maxLength: 1024, description: 'Stored and echoed; becomes the identifier' }))),
  display_name: Type.Optional(Type.String({ maxLength: 1024 })),
  expires_in_hours: Type.Optional(Type.Integer({ description: `Default ${DEFAULT_INVITE_HOURS} when omitted or ≤ 0; capped at ${MAX_INVITE_HOURS}` })),
});

export const InviteView = Type.Object(
  {
    id: Type.Integer({ description: 'The placeholder client' }),
    invite_token: Type.String({ description: 'Single use; shown this once (only a keyed digest is stored)' }),
    invite_url: Type.String({ description: 'Relative: /register?endpoint=<endpoint id>&invite=<invite_token>, served by the edge on the endpoint’s host' }),
    email: Nullable(Type.String()),
    display_name: Type.String(),
    expires_at: Timestamp(),
    status: Type.Literal('invited'),
  },
  { description: 'Client invite' },
);

export const SettingsView = Type.Object(
  {
    self_registration: Type.Object({
      enabled: Type.Boolean(),
      allowed_email_domains: Type.Array(Type.String(), { description: 'Lower-case; empty: any verified e-mail (or none)' }),
    }),
  },
  { description: 'RBAC settings of an endpoint' },
);

export const SettingsBody = Strict({
  self_registration: Strict({
    enabled: Type.Boolean({ description: 'true needs mode oauth or oidc' }),
    allowed_email_domains: Type.Optional(
      Type.Array(Type.String({ maxLength: 253 }), { maxItems: MAX_ALLOWED_EMAIL_DOMAINS, description: 'Bare domains; omitted: kept as stored' }),
    ),
  }),
});

export const EndpointParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
export const ClientParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }), client_id: Type.String({ description: 'Client id (int64)' }) });
export const Errors409 = { ...ErrorResponses, 409: ErrorBody };

/** A written client as answered, with its token when the server generated it: this answer is the only place it shows. */
export function clientWithToken({ client, token }: WrittenClient) {
  return { ...rbacClientView(client), ...(token?.generated ? { generated_token: token.token } : {}) };
}

export function inviteView(invite: Invite) {
  return { ...invite, expires_at: iso(invite.expires_at), status: 'invited' as const };
}
