// Platform administration: create users (with a first API key), change plans, suspend accounts, set
// verification flags. Every operation needs an admin caller; `edge admin` offers the bootstrap ones offline.
import { Type } from '@sinclair/typebox';
import { Strict, Timestamp } from '../../shared/schema.ts';
import { int64Param, type ControlApp, type ControlDeps } from '../http.ts';
import { adminService, USERS_PAGE_SIZE_DEFAULT, type AdminUser } from '../services/admin.ts';
import { AccountView, accountView, ErrorBody, ErrorResponses, iso } from '../views.ts';

const UserView = Type.Object({
  id: Type.Integer(),
  email: Type.String(),
  plan: Type.String(),
  account_id: Type.Integer(),
  is_admin: Type.Boolean(),
  email_verified: Type.Boolean(),
  payment_method: Type.Boolean(),
  identity_verified: Type.Boolean(),
  suspended: Type.Boolean(),
  created_at: Timestamp(),
});

const IdParams = Type.Object({ id: Type.String() });

function userView({ user, account }: AdminUser) {
  return {
    id: user.id,
    email: user.email,
    plan: account.plan,
    account_id: account.id,
    is_admin: user.is_admin,
    email_verified: user.email_verified,
    payment_method: user.payment_method,
    identity_verified: user.identity_verified,
    suspended: account.suspended_at !== null,
    created_at: iso(user.created_at),
  };
}

export function adminRoutes(app: ControlApp, deps: ControlDeps): void {
  const admin = adminService(deps);
  const PlanName = Type.Union(Object.keys(deps.config.plans).map((p) => Type.Literal(p)));

  app.addHook('preHandler', async (req) => {
    if (req.routeOptions.url?.startsWith('/v1/admin/')) req.caller.requireAdmin();
  });

  app.post(
    '/v1/admin/users',
    {
      schema: {
        operationId: 'createUser',
        summary: 'Create a user with a plan; the response carries their first API key, once',
        tags: ['admin'],
        body: Strict({ email: Type.String({ format: 'email' }), plan: PlanName, is_admin: Type.Optional(Type.Boolean()) }),
        response: { 201: Type.Object({ ...UserView.properties, api_key: Type.String() }), 409: ErrorBody, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      const created = await admin.createUser({ email: req.body.email, plan: req.body.plan, isAdmin: req.body.is_admin });
      return reply.status(201).send({ ...userView(created), api_key: created.apiKey });
    },
  );

  app.get(
    '/v1/admin/users',
    {
      schema: {
        operationId: 'listUsers',
        summary: 'List users',
        description: `page × page_size beyond EDGE_LIST_MAX_OFFSET is 400 pagination_too_deep, as in every listing. Default page_size ${USERS_PAGE_SIZE_DEFAULT}.`,
        tags: ['admin'],
        querystring: Type.Object({ page: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000 })), page_size: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })) }),
        response: { 200: Type.Object({ items: Type.Array(Type.Omit(UserView, ['suspended'])) }), ...ErrorResponses },
      },
    },
    async (req) => {
      const rows = await admin.listUsers(req.query.page, req.query.page_size);
      return { items: rows.map((u) => ({ ...u, account_id: u.personal_account_id, created_at: iso(u.created_at) })) };
    },
  );

  app.get(
    '/v1/admin/users/:id',
    { schema: { operationId: 'getUser', summary: 'Get a user', tags: ['admin'], params: IdParams, response: { 200: UserView, ...ErrorResponses } } },
    async (req) => userView(await admin.user(int64Param(req.params.id))),
  );

  app.put(
    '/v1/admin/users/:id/plan',
    {
      schema: {
        operationId: 'setUserPlan',
        summary: 'Change a user’s plan (their personal account’s plan)',
        tags: ['admin'],
        params: IdParams,
        body: Strict({ plan: PlanName }),
        response: { 200: UserView, ...ErrorResponses },
      },
    },
    async (req) => userView(await admin.setUserPlan(int64Param(req.params.id), req.body.plan)),
  );

  app.put(
    '/v1/admin/users/:id/verification',
    {
      schema: {
        operationId: 'setUserVerification',
        summary: 'Set a user’s verification flags (omitted flags keep their value)',
        tags: ['admin'],
        params: IdParams,
        body: Strict(
          { email_verified: Type.Optional(Type.Boolean()), payment_method: Type.Optional(Type.Boolean()), identity_verified: Type.Optional(Type.Boolean()) },
          { minProperties: 1 },
        ),
        response: { 200: UserView, ...ErrorResponses },
      },
    },
    async (req) => userView(await admin.setVerification(int64Param(req.params.id), req.body)),
  );

  app.put(
    '/v1/admin/accounts/:id/plan',
    {
      schema: {
        operationId: 'setAccountPlan',
        summary: 'Change any account’s plan (organizations included)',
        tags: ['admin'],
        params: IdParams,
        body: Strict({ plan: PlanName }),
        response: { 200: AccountView, ...ErrorResponses },
      },
    },
    async (req) => accountView(await admin.setAccountPlan(int64Param(req.params.id), req.body.plan)),
  );

  for (const [action, suspended] of [['suspend', true], ['unsuspend', false]] as const) {
    app.post(
      `/v1/admin/accounts/:id/${action}`,
      {
        schema: {
          operationId: suspended ? 'suspendAccount' : 'unsuspendAccount',
          summary: suspended ? 'Suspend an account: its calls get 403 account_suspended' : 'Lift an account’s suspension',
          tags: ['admin'],
          params: IdParams,
          response: { 200: AccountView, ...ErrorResponses },
        },
      },
      async (req) => accountView(await admin.setAccountSuspended(int64Param(req.params.id), suspended)),
    );
  }
}
