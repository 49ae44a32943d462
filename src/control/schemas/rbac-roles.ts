// Request and answer shapes of the RBAC role, membership and overview routes (docs/rbac.md "Roles", "Memberships"),
// and the views that fill them. What a schema leaves open is checked in services/rbac-roles.ts.
import { Type } from '@sinclair/typebox';
import {
  MAX_RBAC_ENTRIES,
  MAX_RBAC_HEADER_VALUE_LENGTH,
  MAX_RBAC_METADATA_VALUE_LENGTH,
  MAX_RBAC_METHOD_LENGTH,
  MAX_RBAC_PATH_LENGTH,
  MAX_RBAC_RATE_LIMIT_RPS,
} from '../../shared/rbac-permissions.ts';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import type { RbacMembershipRow, RbacRoleRow } from '../../store/rbac.ts';
import { MAX_DESCRIPTION_LENGTH, MAX_ID, MAX_NAME_LENGTH, MAX_PRIORITY } from '../services/rbac-roles.ts';
import { ErrorBody, ErrorResponses, iso, RbacClientView } from '../views.ts';

const MethodList = (description: string) =>
  Type.Array(Type.String({ minLength: 1, maxLength: MAX_RBAC_METHOD_LENGTH }), { maxItems: MAX_RBAC_ENTRIES, description });
const PathList = (description: string) =>
  Type.Array(Type.String({ minLength: 1, maxLength: MAX_RBAC_PATH_LENGTH }), { maxItems: MAX_RBAC_ENTRIES, description });
const PATH_NOTE =
  'Patterns on the normalised path: exact (`/admin`), prefix ending in `/*` (`/api/*`: /api and everything below it), or a glob ' +
  '(`*` within one segment, `**` any depth: `/api/*/export`, `/files/**/report.pdf`); must start with "/"';

const PermissionsBody = Strict(
  {
    allowed_methods: Type.Optional(MethodList('Upper-case method tokens (RFC 9110 §9.1); "*" means any method')),
    denied_methods: Type.Optional(MethodList('Upper-case method tokens; a deny beats an allow of the same role')),
    allowed_paths: Type.Optional(PathList(PATH_NOTE)),
    denied_paths: Type.Optional(PathList('As allowed_paths; a deny beats an allow of the same role')),
    rate_limit_rps: Type.Optional(
      Type.Integer({ minimum: 0, maximum: MAX_RBAC_RATE_LIMIT_RPS, description: 'Requests per second for a client whose request this role decides; 0: none' }),
    ),
    headers: Type.Optional(
      Type.Record(Type.String(), Type.String({ maxLength: MAX_RBAC_HEADER_VALUE_LENGTH }), {
        description:
          `At most ${MAX_RBAC_ENTRIES}: header name → value, set on the forwarded request when this role decides (names lower-cased; ` +
          'never a hop-by-hop, framing, credential or edge-owned name)',
      }),
    ),
    metadata: Type.Optional(
      Type.Record(Type.String(), Type.String({ maxLength: MAX_RBAC_METADATA_VALUE_LENGTH }), { description: `At most ${MAX_RBAC_ENTRIES} strings; for the API only` }),
    ),
  },
  { description: 'Omitted sub-fields are empty' },
);

export const RoleBodySchema = Strict({
  name: Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH, description: 'Unique per endpoint' }),
  description: Type.Optional(Type.String({ maxLength: MAX_DESCRIPTION_LENGTH })),
  priority: Type.Optional(Type.Integer({ minimum: -MAX_PRIORITY, maximum: MAX_PRIORITY, description: 'Higher wins when several roles of a client decide; default 0' })),
  is_default: Type.Optional(Type.Boolean({ description: 'Given to new clients (API-created, invited or self-registered); default false' })),
  permissions: Type.Optional(PermissionsBody),
});

const PermissionsView = Type.Object({
  allowed_methods: Type.Array(Type.String()),
  denied_methods: Type.Array(Type.String()),
  allowed_paths: Type.Array(Type.String()),
  denied_paths: Type.Array(Type.String()),
  rate_limit_rps: Type.Integer(),
  headers: Type.Record(Type.String(), Type.String()),
  metadata: Type.Record(Type.String(), Type.String()),
});

export const RoleView = Type.Object(
  {
    id: Type.Integer(),
    name: Type.String(),
    description: Type.Optional(Type.String({ description: 'Omitted when empty' })),
    priority: Type.Integer(),
    is_default: Type.Boolean(),
    permissions: PermissionsView,
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'RBAC role' },
);

export const MembershipView = Type.Object(
  {
    id: Type.Integer(),
    client_id: Type.Integer(),
    role_id: Type.Integer(),
    assigned_by: Nullable(Type.Integer({ description: 'The user who assigned it; null for default roles given on creation' })),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { description: 'RBAC membership' },
);

export const MembershipBody = Strict({
  client_id: Type.Integer({ minimum: 1, maximum: MAX_ID, description: 'A client of this endpoint' }),
  role_id: Type.Integer({ minimum: 1, maximum: MAX_ID, description: 'A role of this endpoint' }),
});

export const OverviewView = Type.Object({
  endpoint_id: Type.Integer(),
  clients: Type.Array(RbacClientView),
  roles: Type.Array(RoleView),
  memberships: Type.Array(MembershipView),
});

export const EndpointParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }) });
export const RoleParams = Type.Object({ id: Type.String({ description: 'The endpoint uuid' }), role_id: Type.String({ description: 'Role id (int64)' }) });
export const Errors409 = { ...ErrorResponses, 409: ErrorBody };

export function roleView(r: RbacRoleRow) {
  return {
    id: r.id,
    name: r.name,
    ...(r.description === '' ? {} : { description: r.description }),
    priority: r.priority,
    is_default: r.is_default,
    permissions: r.permissions,
    created_at: iso(r.created_at),
    updated_at: iso(r.updated_at),
  };
}

export function membershipView(m: RbacMembershipRow) {
  return { id: m.id, client_id: m.client_id, role_id: m.role_id, assigned_by: m.assigned_by, created_at: iso(m.created_at), updated_at: iso(m.updated_at) };
}
