// Account permissions a membership can carry. Owners hold all of them; admins act as owners everywhere.
// The names are the API's contract (SPEC.md "Authentication"); add new ones at the end.
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
] as const;

export type Permission = (typeof PERMISSIONS)[number];

export function isPermission(value: string): value is Permission {
  return (PERMISSIONS as readonly string[]).includes(value);
}
