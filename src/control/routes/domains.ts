// Custom domains: an account claims a name, proves control of its DNS with a TXT record (or an admin vouches
// for it), and only then may put endpoints and custom certificates on it. Each route: a schema, a permission, one call.
import type { ControlApp, ControlDeps } from '../http.ts';
import { AdminVerifyDomain, ClaimDomain, DeleteDomain, domainView, GetDomain, ListDomains, VerifyDomain } from '../schemas/domains.ts';
import { domainService } from '../services/domains.ts';

export function domainRoutes(app: ControlApp, deps: ControlDeps): void {
  const domains = domainService(deps);

  app.post('/v1/domains', { schema: ClaimDomain, config: { permission: 'domains:manage' } }, async (req, reply) =>
    reply.status(201).send(domainView(await domains.claim(req.caller, req.body.name))),
  );

  // Reading needs no named permission: any member sees the account's domains.
  app.get('/v1/domains', { schema: ListDomains }, async (req) => ({ items: (await domains.list(req.caller)).map(domainView) }));

  app.get('/v1/domains/:id', { schema: GetDomain }, async (req) => domainView(await domains.get(req.caller, req.params.id)));

  app.delete('/v1/domains/:id', { schema: DeleteDomain, config: { permission: 'domains:manage' } }, async (req, reply) => {
    await domains.remove(req.caller, req.params.id);
    return reply.status(204).send(null);
  });

  app.post('/v1/domains/:id/verify', { schema: VerifyDomain, config: { permission: 'domains:manage' } }, async (req) =>
    domainView(await domains.verify(req.caller, req.params.id)),
  );

  app.post('/v1/admin/domains/:id/verify', { schema: AdminVerifyDomain }, async (req) => {
    req.caller.requireAdmin();
    return domainView(await domains.verifyWithoutDns(req.params.id));
  });
}
