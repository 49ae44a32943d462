// Self-service account operations: who am I, my API keys, my organizations and their members.
// Keys select the active account they were created for; X-Account-Id switches to another membership per call.
import { Type } from '@sinclair/typebox';
import { effectivePermissions, PERMISSIONS } from '../../shared/permissions.ts';
import { Nullable, Strict, Timestamp } from '../../shared/schema.ts';
import type * as store from '../../store/accounts.ts';
import type { ControlApp, ControlDeps } from '../http.ts';
import { accountService, type Member } from '../services/accounts.ts';
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

function memberView(m: Member) {
  return { user_id: m.user_id, email: m.email, is_owner: m.is_owner, permissions: effectivePermissions({ isAdmin: false, isOwner: m.is_owner, permissions: m.permissions }), created_at: iso(m.created_at) };
}

export function accountRoutes(app: ControlApp, deps: ControlDeps): void {
  /** What the active account's plan gives, so a client can say what is included before an operation is refused. */
  const planView = (name: string) => {
    const plan = deps.config.plans[name];
    return plan ? { name, entitlements: { ...plan.entitlements }, quotas: { ...plan.quotas }, allowed_regions: [...plan.allowed_regions], protocols: [...plan.protocols] } : null;
  };
  const accounts = accountService(deps);

  app.get(
    '/v1/me',
    {
      schema: {
        operationId: 'getMe',
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
            plan: Nullable(
              Type.Object(
                {
                  name: Type.String(),
                  entitlements: Type.Record(Type.String(), Type.Boolean()),
                  quotas: Type.Record(Type.String(), Type.Integer()),
                  allowed_regions: Type.Array(Type.String()),
                  protocols: Type.Array(Type.String()),
                },
                { description: "The active account's plan as this node applies it (config/plans.json); null when the plan is not configured here" },
              ),
            ),
          }),
          ...ErrorResponses,
        },
      },
    },
    async (req) => {
      const { user, account } = req.caller;
      const memberships = await accounts.memberships(req.caller);
      return {
        user,
        active_account: { ...accountView(account), permissions: PERMISSIONS.filter((p) => req.caller.has(p)) },
        accounts: memberships.map((m) => ({
          ...accountView({ id: m.account_id, kind: m.account_kind, name: m.account_name, plan: m.account_plan, suspended_at: m.account_suspended_at }),
          is_owner: m.is_owner,
          permissions: effectivePermissions({ isAdmin: false, isOwner: m.is_owner, permissions: m.permissions }),
        })),
        plan: planView(account.plan),
      };
    },
  );

  app.get(
    '/v1/api-keys',
    { schema: { operationId: 'listApiKeys', summary: "List the caller's API keys (secrets are never returned)", tags: ['api-keys'], response: { 200: Type.Object({ items: Type.Array(ApiKeyView) }), ...ErrorResponses } } },
    async (req) => ({ items: (await accounts.apiKeys(req.caller)).map(apiKeyView) }),
  );

  app.post(
    '/v1/api-keys',
    {
      schema: {
        operationId: 'createApiKey',
        summary: 'Create an API key; the secret is in the response once only',
        description: 'account_id binds the key to one of your accounts (default: the active account); that account is the active account of every call made with the key.',
        tags: ['api-keys'],
        body: Strict({ name: Type.Optional(Type.String({ maxLength: 100 })), account_id: Type.Optional(Type.Integer({ minimum: 1 })) }),
        response: { 201: Type.Object({ ...ApiKeyView.properties, api_key: Type.String() }), ...ErrorResponses },
      },
    },
    async (req, reply) => {
      const { row, secret } = await accounts.createApiKey(req.caller, { name: req.body.name, accountId: req.body.account_id });
      return reply.status(201).send({ ...apiKeyView(row), api_key: secret });
    },
  );

  app.delete(
    '/v1/api-keys/:id',
    {
      schema: { operationId: 'revokeApiKey', summary: 'Revoke an API key: it stops working at once', tags: ['api-keys'], params: Type.Object({ id: Type.String() }), response: { 204: Type.Null(), ...ErrorResponses } },
    },
    async (req, reply) => {
      await accounts.revokeApiKey(req.caller, req.params.id);
      return reply.status(204).send(null);
    },
  );

  app.post(
    '/v1/organizations',
    {
      schema: {
        operationId: 'createOrganization',
        summary: 'Create an organization account; the caller becomes its owner and it starts on the caller’s plan',
        tags: ['organizations'],
        body: Strict({ name: Type.String({ minLength: 1, maxLength: 100 }) }),
        response: { 201: AccountView, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      const org = await accounts.createOrganization(req.caller, req.body.name);
      return reply.status(201).send(accountView(org));
    },
  );

  app.get(
    '/v1/organizations/:id/members',
    { schema: { operationId: 'listOrganizationMembers', summary: 'List an organization’s members', tags: ['organizations'], params: Type.Object({ id: Type.String() }), response: { 200: Type.Object({ items: Type.Array(MemberView) }), ...ErrorResponses } } },
    async (req) => ({ items: (await accounts.members(req.caller, req.params.id)).map(memberView) }),
  );

  app.post(
    '/v1/organizations/:id/members',
    {
      schema: {
        operationId: 'addOrganizationMember',
        summary: 'Add an existing user to an organization with a set of permissions',
        tags: ['organizations'],
        params: Type.Object({ id: Type.String() }),
        body: Strict({ email: Type.String({ format: 'email' }), permissions: PermissionList }),
        response: { 201: MemberView, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      const member = await accounts.addMember(req.caller, req.params.id, req.body.email, req.body.permissions);
      return reply.status(201).send(memberView(member));
    },
  );

  app.put(
    '/v1/organizations/:id/members/:user_id',
    {
      schema: {
        operationId: 'replaceOrganizationMember',
        summary: 'Replace a member’s permissions',
        description: 'The member’s API keys bound to the organization are published to edges again with the new permissions: removing tunnels:connect ends the tunnels their agents hold.',
        tags: ['organizations'],
        params: Type.Object({ id: Type.String(), user_id: Type.String() }),
        body: Strict({ permissions: PermissionList }),
        response: { 200: MemberView, ...ErrorResponses },
      },
    },
    async (req) => memberView(await accounts.setMemberPermissions(req.caller, req.params.id, req.params.user_id, req.body.permissions)),
  );

  app.delete(
    '/v1/organizations/:id/members/:user_id',
    {
      schema: {
        operationId: 'removeOrganizationMember',
        summary: 'Remove a member (not the owner); their keys bound to the organization are revoked',
        tags: ['organizations'],
        params: Type.Object({ id: Type.String(), user_id: Type.String() }),
        response: { 204: Type.Null(), ...ErrorResponses },
      },
    },
    async (req, reply) => {
      await accounts.removeMember(req.caller, req.params.id, req.params.user_id);
      return reply.status(204).send(null);
    },
  );
}
