// The write side of the change feed: every config write records its change here, inside its own transaction.
// The version bump's row lock orders writers; NOTIFY (delivered at commit) wakes the publisher without polling.
import type { Database, Queryable } from './db.ts';
import type { FeedChange, FeedSnapshot } from '../shared/feed/types.ts';

export function feedChannel(schema: string): string {
  return `edge_feed_${schema}`;
}

/**
 * Records `data` as the new value of (topic, key), or deletes the key when data is null. Must be called inside
 * the transaction that makes the change, so the change and its feed entry commit or roll back together.
 */
export async function recordChange(tx: Queryable, topic: string, key: string, data: unknown): Promise<number> {
  const { rows } = await tx.query<{ version: number }>('UPDATE feed_state SET version = version + 1 RETURNING version');
  const version = rows[0].version;
  const json = data === null || data === undefined ? null : JSON.stringify(data);
  await tx.query('INSERT INTO feed_outbox (version, topic, key, data) VALUES ($1, $2, $3, $4::jsonb)', [version, topic, key, json]);
  if (json === null) {
    await tx.query('DELETE FROM feed_entries WHERE topic = $1 AND key = $2', [topic, key]);
  } else {
    await tx.query(
      `INSERT INTO feed_entries (topic, key, version, data) VALUES ($1, $2, $3, $4::jsonb)
       ON CONFLICT (topic, key) DO UPDATE SET version = EXCLUDED.version, data = EXCLUDED.data`,
      [topic, key, version, json],
    );
  }
  // The channel carries the schema so instances sharing one database only wake their own publisher.
  await tx.query("SELECT pg_notify('edge_feed_' || current_schema(), $1)", [String(version)]);
  return version;
}

export async function currentVersion(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ version: number }>('SELECT version FROM feed_state');
  return rows[0].version;
}

export interface OutboxRead {
  /** The database's feed version in the same snapshot as the rows. */
  version: number;
  /** Changes after `after`, oldest first; null when the outbox was pruned past it (only a snapshot can help). */
  changes: FeedChange[] | null;
}

/**
 * Reads the outbox after `after` and the current version in ONE statement, so both come from one snapshot: read
 * separately, a commit landing between them would look like pruning.
 */
export async function readOutbox(db: Queryable, after: number, limit: number): Promise<OutboxRead> {
  const { rows } = await db.query<FeedChange & { head: number }>(
    `SELECT s.version AS head, o.version, o.topic, o.key, o.data
     FROM feed_state s
     LEFT JOIN LATERAL (SELECT * FROM feed_outbox WHERE version > $1 ORDER BY version LIMIT $2) o ON true
     ORDER BY o.version`,
    [after, limit],
  );
  const version = rows[0].head;
  const changes = rows.filter((r) => r.version !== null).map(({ version, topic, key, data }) => ({ version, topic, key, data }));
  const covered = changes.length > 0 ? changes[0].version === after + 1 : version <= after;
  return { version, changes: covered ? changes : null };
}

/** The whole current map at one consistent version. FOR SHARE on the counter holds writers off meanwhile. */
export async function readSnapshot(db: Database): Promise<FeedSnapshot> {
  return db.transaction(async (tx) => {
    const { rows } = await tx.query<{ version: number }>('SELECT version FROM feed_state FOR SHARE');
    const entries = await tx.query<FeedSnapshot['entries'][number]>('SELECT topic, key, version, data FROM feed_entries ORDER BY topic, key');
    return { version: rows[0].version, entries: entries.rows };
  });
}

/** Drops outbox rows more than `retain` versions behind `publishedVersion`. */
export async function pruneOutbox(db: Queryable, publishedVersion: number, retain: number): Promise<number> {
  const res = await db.query('DELETE FROM feed_outbox WHERE version <= $1', [publishedVersion - retain]);
  return res.rowCount;
}
