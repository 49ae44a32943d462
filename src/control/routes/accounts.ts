// Self-service account operations: who am I, my API keys, my organizations and their members.
// Keys select the active account they were created for; X-Account-Id switches to another membership per call.
import { Type } from '@sinclair/typebox';
import { generateApiKey } from '../../shared/api-keys.ts';
import { fail } from '../../shared/errors.ts';
import { effectivePermissions, PERMISSIONS } from '../../shared/permissions.ts';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import { isUniqueViolation } from '../../store/db.ts';
import * as store from '../../store/accounts.ts';
import { int64Param, type ControlApp, type ControlDeps } from '../http.ts';
import { AccountView, accountView, ErrorResponses, iso } from '../views.ts';

const PermissionList = Type.Array(Type.Union(PERMISSIONS.map((p) => Type.Literal(p))), { uniqueItems: true, maxItems: PERMISSIONS.length });

const ApiKeyView = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  account_id: Type.Integer(),
  created_at: Timestamp(),
  last_used_at: Nullable(Timestamp()),
  revoked_at: Nullable(Timestamp()),
});

const MemberView = Type.Object({
  user_id: Type.Integer(),
  email: Type.String(),
  is_owner: Type.Boolean(),
  permissions: Type.Array(Type.String()),
  created_at: Timestamp(),
});

function apiKeyView(k: store.ApiKeyRow) {
  return { id: k.id, name: k.name, account_id: k.account_id, created_at: iso(k.created_at), last_used_at: iso(k.last_used_at), revoked_at: iso(k.revoked_at) };
}

function memberView(m: store.MembershipRow & { email: string }) {
  return { user_id: m.user_id, email: m.email, is_owner: m.is_owner, permissions: effectivePermissions({ isAdmin: false, isOwner: m.is_owner, permissions: m.permissions }), created_at: iso(m.created_at) };
}

export function accountRoutes(app: ControlApp, { db }: ControlDeps): void {
  app.get(
    '/v1/me',
    {
      schema: {
        summary: 'The calling user, the active account and every account the user belongs to',
        tags: ['accounts'],
        response: {
          200: Type.Object({
            user: Type.Object({
              id: Type.Integer(),
              email: Type.String(),
              is_admin: Type.Boolean(),
              email_verified: Type.Boolean(),
              payment_method: Type.Boolean(),
              identity_verified: Type.Boolean(),
            }),
            active_account: Type.Object({ ...AccountView.properties, permissions: Type.Array(Type.String()) }),
            accounts: Type.Array(Type.Object({ ...AccountView.properties, is_owner: Type.Boolean(), permissions: Type.Array(Type.String()) })),
          }),
          ...ErrorResponses,
        },
      },
    },
    async (req) => {
      const { user, account } = req.caller;
      const memberships = await store.listMemberships(db, user.id);
      return {
        user,
        active_account: { ...accountView(account), permissions: PERMISSIONS.filter((p) => req.caller.has(p)) },
        accounts: memberships.map((m) => ({
          ...accountView({ id: m.account_id, kind: m.account_kind, name: m.account_name, plan: m.account_plan, suspended_at: m.account_suspended_at }),
          is_owner: m.is_owner,
          permissions: effectivePermissions({ isAdmin: false, isOwner: m.is_owner, permissions: m.permissions }),
        })),
      };
    },
  );

  app.get(
    '/v1/api-keys',
    { schema: { summary: "List the caller's API keys (secrets are never returned)", tags: ['api-keys'], response: { 200: Type.Object({ items: Type.Array(ApiKeyView) }), ...ErrorResponses } } },
    async (req) => ({ items: (await store.listApiKeys(db, req.caller.user.id)).map(apiKeyView) }),
  );

  app.post(
    '/v1/api-keys',
    {
      schema: {
        summary: 'Create an API key; the secret is in the response once only',
        description: 'account_id binds the key to one of your accounts (default: the active account); that account is the active account of every call made with the key.',
        tags: ['api-keys'],
        body: Strict({ name: Type.Optional(Type.String({ maxLength: 100 })), account_id: Type.Optional(Type.Integer({ minimum: 1 })) }),
        response: { 201: Type.Object({ ...ApiKeyView.properties, api_key: Type.String() }), ...ErrorResponses },
      },
    },
    async (req, reply) => {
      const accountId = req.body.account_id ?? req.caller.account.id;
      if (!req.caller.isAdmin && !(await store.findMembership(db, accountId, req.caller.user.id))) throw fail.not_a_member();
      const key = generateApiKey();
      const row = await db.transaction((tx) => store.insertApiKey(tx, { userId: req.caller.user.id, accountId, name: req.body.name ?? '', key }));
      return reply.status(201).send({ ...apiKeyView(row), api_key: key.key });
    },
  );

  app.delete(
    '/v1/api-keys/:id',
    {
      schema: { summary: 'Revoke an API key: it stops working at once', tags: ['api-keys'], params: Type.Object({ id: Type.String() }), response: { 204: Type.Null(), ...ErrorResponses } },
    },
    async (req, reply) => {
      const row = await db.transaction((tx) => store.revokeApiKey(tx, req.caller.user.id, int64Param(req.params.id)));
      if (!row) throw fail.not_found('API key not found');
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/v1/organizations',
    {
      schema: {
        summary: 'Create an organization account; the caller becomes its owner and it starts on the caller’s plan',
        tags: ['organizations'],
        body: Strict({ name: Type.String({ minLength: 1, maxLength: 100 }) }),
        response: { 201: AccountView, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      req.caller.requireActive();
      const personal = await store.findAccountById(db, req.caller.user.personal_account_id);
      const org = await db.transaction((tx) =>
        store.createOrganization(tx, { name: req.body.name, plan: personal?.plan ?? req.caller.account.plan, ownerId: req.caller.user.id }),
      );
      return reply.status(201).send(accountView(org));
    },
  );

  /** Organization member management needs members:manage in that organization (owners and admins have it). */
  async function managedOrganization(req: { caller: import('../caller.ts').Caller }, rawId: string) {
    const id = int64Param(rawId);
    const account = await store.findAccountById(db, id);
    const membership = account ? await store.findMembership(db, id, req.caller.user.id) : null;
    if (!account || account.kind !== 'organization' || (!membership && !req.caller.isAdmin)) throw fail.not_found('Organization not found');
    if (!req.caller.isAdmin) {
      if (account.suspended_at) throw fail.account_suspended();
      if (!membership!.is_owner && !membership!.permissions.includes('members:manage')) {
        throw fail.permission_denied('Missing permission members:manage in this organization', { permission: 'members:manage' });
      }
    }
    return account;
  }

  app.get(
    '/v1/organizations/:id/members',
    { schema: { summary: 'List an organization’s members', tags: ['organizations'], params: Type.Object({ id: Type.String() }), response: { 200: Type.Object({ items: Type.Array(MemberView) }), ...ErrorResponses } } },
    async (req) => {
      const org = await managedOrganization(req, req.params.id);
      return { items: (await store.listMembers(db, org.id)).map(memberView) };
    },
  );

  app.post(
    '/v1/organizations/:id/members',
    {
      schema: {
        summary: 'Add an existing user to an organization with a set of permissions',
        tags: ['organizations'],
        params: Type.Object({ id: Type.String() }),
        body: Strict({ email: Type.String({ format: 'email' }), permissions: PermissionList }),
        response: { 201: MemberView, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      const org = await managedOrganization(req, req.params.id);
      const user = await store.findUserByEmail(db, req.body.email);
      if (!user) throw fail.not_found('No user with that e-mail');
      try {
        const m = await db.transaction((tx) => store.addMember(tx, org.id, user.id, req.body.permissions));
        return reply.status(201).send(memberView({ ...m, email: user.email }));
      } catch (err) {
        if (isUniqueViolation(err)) throw fail.already_exists('User is already a member of this organization');
        throw err;
      }
    },
  );

  app.put(
    '/v1/organizations/:id/members/:user_id',
    {
      schema: {
        summary: 'Replace a member’s permissions',
        description: 'The member’s API keys bound to the organization are published to edges again with the new permissions: removing tunnels:connect ends the tunnels their agents hold.',
        tags: ['organizations'],
        params: Type.Object({ id: Type.String(), user_id: Type.String() }),
        body: Strict({ permissions: PermissionList }),
        response: { 200: MemberView, ...ErrorResponses },
      },
    },
    async (req) => {
      const org = await managedOrganization(req, req.params.id);
      const userId = int64Param(req.params.user_id, 'user_id');
      const m = await db.transaction((tx) => store.setMemberPermissions(tx, org.id, userId, req.body.permissions));
      if (!m) throw fail.not_found('Member not found');
      const user = await store.findUserById(db, userId);
      return memberView({ ...m, email: user?.email ?? '' });
    },
  );

  app.delete(
    '/v1/organizations/:id/members/:user_id',
    {
      schema: {
        summary: 'Remove a member (not the owner); their keys bound to the organization are revoked',
        tags: ['organizations'],
        params: Type.Object({ id: Type.String(), user_id: Type.String() }),
        response: { 204: Type.Null(), ...ErrorResponses },
      },
    },
    async (req, reply) => {
      const org = await managedOrganization(req, req.params.id);
      const removed = await db.transaction((tx) => store.removeMember(tx, org.id, int64Param(req.params.user_id, 'user_id')));
      if (!removed) throw fail.not_found('Member not found (owners cannot be removed)');
      return reply.status(204).send(null);
    },
  );
}
