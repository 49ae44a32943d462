// Account permissions a membership can carry. Owners hold all of them; admins act as owners everywhere.
// The names are the API's contract (docs/api.md "Authentication and permissions"); add new ones at the end.
export const PERMISSIONS = [
  'endpoints:read',
  'endpoints:write',
  'endpoints:update',
  'endpoints:delete',
  'rate_limits:update',
  'traffic:read',
  'members:manage',
  'domains:manage',
  'certificates:manage',
  /** Attach an agent to the account's endpoints (admission at the edge, and the one-shot flow's ephemeral endpoint). */
  'tunnels:connect',
] as const;

export type Permission = (typeof PERMISSIONS)[number];

export function isPermission(value: string): value is Permission {
  return (PERMISSIONS as readonly string[]).includes(value);
}

/**
 * What a member may do in an account: owners and admins hold every permission, others what their membership
 * lists. Member views and the API keys published to edges (ApiKeyConfig.permissions) are computed with it.
 */
export function effectivePermissions(member: { isAdmin: boolean; isOwner: boolean; permissions: readonly string[] }): Permission[] {
  if (member.isAdmin || member.isOwner) return [...PERMISSIONS];
  return member.permissions.filter(isPermission);
}
