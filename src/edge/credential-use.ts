// When this edge last accepted each visitor credential (basic user, token), for the presence heartbeat: edges never
// write the store, so the worker turns what they report into last_used_at (src/worker/credential-use.ts).
import { MAX_CREDENTIAL_USE_ENTRIES, type EdgeHeartbeat } from '../shared/presence.ts';

/**
 * id → time of last use, oldest first (a Map keeps insertion order; a use moves its id to the end), at most `max`
 * ids per kind: the most recent uses are kept, so a heartbeat stays small however many credentials are used. A use
 * costs one Map delete and one set, never a store write.
 */
export class CredentialUse {
  private readonly basicUsers = new Map<string, number>();
  private readonly tokens = new Map<string, number>();

  constructor(
    private readonly max = MAX_CREDENTIAL_USE_ENTRIES,
    private readonly now: () => number = Date.now,
  ) {}

  basicUser(id: string): void {
    this.note(this.basicUsers, id);
  }

  token(id: string): void {
    this.note(this.tokens, id);
  }

  private note(map: Map<string, number>, id: string): void {
    map.delete(id);
    map.set(id, this.now());
    if (map.size > this.max) map.delete(map.keys().next().value!);
  }

  /** The heartbeat field: every use since this edge started (bounded), as ISO times; absent when there is none. */
  report(): Pick<EdgeHeartbeat, 'credential_use'> {
    if (this.basicUsers.size === 0 && this.tokens.size === 0) return {};
    const iso = (map: Map<string, number>) => Object.fromEntries([...map].map(([id, at]) => [id, new Date(at).toISOString()]));
    return {
      credential_use: {
        ...(this.basicUsers.size > 0 ? { basic_users: iso(this.basicUsers) } : {}),
        ...(this.tokens.size > 0 ? { tokens: iso(this.tokens) } : {}),
      },
    };
  }
}
