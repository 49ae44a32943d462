// Platform administration: create users (with a first API key), change plans, suspend accounts, set
// verification flags. Every operation needs an admin caller; `edge admin` offers the bootstrap ones offline.
import { Type } from '@sinclair/typebox';
import { generateApiKey } from '../../shared/api-keys.ts';
import { fail } from '../../shared/errors.ts';
import { Strict, Timestamp } from '../../shared/schema.ts';
import { isUniqueViolation } from '../../store/db.ts';
import * as store from '../../store/accounts.ts';
import { int64Param, type ControlApp, type ControlDeps } from '../http.ts';
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

export function adminRoutes(app: ControlApp, { db, config }: ControlDeps): void {
  const PlanName = Type.Union(Object.keys(config.plans).map((p) => Type.Literal(p)));

  async function userView(userId: number) {
    const user = await store.findUserById(db, userId);
    if (!user) throw fail.not_found('User not found');
    const account = (await store.findAccountById(db, user.personal_account_id))!;
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

  app.addHook('preHandler', async (req) => {
    if (req.routeOptions.url?.startsWith('/v1/admin/')) req.caller.requireAdmin();
  });

  app.post(
    '/v1/admin/users',
    {
      schema: {
        summary: 'Create a user with a plan; the response carries their first API key, once',
        tags: ['admin'],
        body: Strict({ email: Type.String({ format: 'email' }), plan: PlanName, is_admin: Type.Optional(Type.Boolean()) }),
        response: { 201: Type.Object({ ...UserView.properties, api_key: Type.String() }), 409: ErrorBody, ...ErrorResponses },
      },
    },
    async (req, reply) => {
      const key = generateApiKey();
      try {
        const { user } = await db.transaction((tx) =>
          store.createUserWithKey(tx, { email: req.body.email, plan: req.body.plan, isAdmin: req.body.is_admin, key }),
        );
        return reply.status(201).send({ ...(await userView(user.id)), api_key: key.key });
      } catch (err) {
        if (isUniqueViolation(err)) throw fail.already_exists('A user with that e-mail already exists');
        throw err;
      }
    },
  );

  app.get(
    '/v1/admin/users',
    {
      schema: {
        summary: 'List users',
        tags: ['admin'],
        querystring: Type.Object({ page: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000 })), page_size: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })) }),
        response: { 200: Type.Object({ items: Type.Array(Type.Omit(UserView, ['suspended'])) }), ...ErrorResponses },
      },
    },
    async (req) => {
      const size = req.query.page_size ?? 20;
      const rows = await store.listUsers(db, size, ((req.query.page ?? 1) - 1) * size);
      return { items: rows.map((u) => ({ ...u, account_id: u.personal_account_id, created_at: iso(u.created_at) })) };
    },
  );

  app.get(
    '/v1/admin/users/:id',
    { schema: { summary: 'Get a user', tags: ['admin'], params: IdParams, response: { 200: UserView, ...ErrorResponses } } },
    async (req) => userView(int64Param(req.params.id)),
  );

  app.put(
    '/v1/admin/users/:id/plan',
    {
      schema: {
        summary: 'Change a user’s plan (their personal account’s plan)',
        tags: ['admin'],
        params: IdParams,
        body: Strict({ plan: PlanName }),
        response: { 200: UserView, ...ErrorResponses },
      },
    },
    async (req) => {
      const user = await store.findUserById(db, int64Param(req.params.id));
      if (!user) throw fail.not_found('User not found');
      await db.transaction((tx) => store.setAccountPlan(tx, user.personal_account_id, req.body.plan));
      return userView(user.id);
    },
  );

  app.put(
    '/v1/admin/users/:id/verification',
    {
      schema: {
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
    async (req) => {
      const user = await db.transaction((tx) => store.setVerification(tx, int64Param(req.params.id), req.body));
      if (!user) throw fail.not_found('User not found');
      return userView(user.id);
    },
  );

  app.put(
    '/v1/admin/accounts/:id/plan',
    {
      schema: {
        summary: 'Change any account’s plan (organizations included)',
        tags: ['admin'],
        params: IdParams,
        body: Strict({ plan: PlanName }),
        response: { 200: AccountView, ...ErrorResponses },
      },
    },
    async (req) => {
      const account = await db.transaction((tx) => store.setAccountPlan(tx, int64Param(req.params.id), req.body.plan));
      if (!account) throw fail.not_found('Account not found');
      return accountView(account);
    },
  );

  for (const [action, suspended] of [['suspend', true], ['unsuspend', false]] as const) {
    app.post(
      `/v1/admin/accounts/:id/${action}`,
      {
        schema: {
          summary: suspended ? 'Suspend an account: its calls get 403 account_suspended' : 'Lift an account’s suspension',
          tags: ['admin'],
          params: IdParams,
          response: { 200: AccountView, ...ErrorResponses },
        },
      },
      async (req) => {
        const account = await db.transaction((tx) => store.setAccountSuspended(tx, int64Param(req.params.id), suspended));
        if (!account) throw fail.not_found('Account not found');
        return accountView(account);
      },
    );
  }
}
