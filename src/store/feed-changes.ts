// Who publishes feed changes (docs/feed.md): a store write touches what it changed, and the transaction publishes
// each touched item once, as it stands, just before COMMIT. Routes and services never publish.
import { isTransaction, type Database, type Queryable, type Transaction } from './db.ts';
import { endpointRecord, ENDPOINT_TOPIC } from './endpoint-feed.ts';
import { currentVersion, recordChange } from './feed.ts';
import { TOPICS, type CertificateConfig } from '../shared/snapshot.ts';

/** What a write changed, as the feed names it. */
export type Touched =
  /** An endpoint's row or anything its edge view holds (settings, rules, RBAC, providers): republished as it stands. */
  | { endpoint: number }
  /** An endpoint deleted in this transaction: its entry is removed (the row, and so its id, is gone). */
  | { endpointDeleted: string }
  /**
   * A certificate assigned, released or deleted: edges hold it while some endpoint serves it, so at commit it is
   * published if served and withdrawn otherwise (key material lives only where it is used).
   */
  | { certificate: number }
  /** Any other entry (accounts, API keys): `build` reads its value at commit, null deletes it. */
  | { topic: string; key: string; build: (tx: Queryable) => Promise<unknown> };

class ChangeSet {
  readonly certificates = new Set<number>();
  /** Endpoints and other entries by feed identity, in the order first touched; the last touch of one decides. */
  readonly entries = new Map<string, (tx: Queryable) => Promise<{ topic: string; key: string; data: unknown } | null>>();

  add(item: Touched): void {
    if ('certificate' in item) {
      this.certificates.add(item.certificate);
    } else if ('endpoint' in item) {
      const id = item.endpoint;
      // Keyed by id: the uuid is only read at commit. A deletion of the same endpoint later removes this entry's row,
      // so endpointRecord answers null and only the deletion is published.
      this.entries.set(`endpoint#${id}`, async (tx) => {
        const record = await endpointRecord(tx, id);
        return record && { topic: ENDPOINT_TOPIC, key: record.uuid, data: record.config };
      });
    } else if ('endpointDeleted' in item) {
      const uuid = item.endpointDeleted;
      this.entries.set(`${ENDPOINT_TOPIC}\0${uuid}`, async () => ({ topic: ENDPOINT_TOPIC, key: uuid, data: null }));
    } else {
      const { topic, key, build } = item;
      this.entries.set(`${topic}\0${key}`, async (tx) => ({ topic, key, data: await build(tx) }));
    }
  }
}

const open = new WeakMap<Queryable, ChangeSet>();

/**
 * Records that the transaction changed `item`; it is published once, just before COMMIT, however often it was
 * touched. Only inside db.transaction(): a change outside one could not commit together with its feed entry.
 */
export function touch(tx: Queryable, item: Touched): void {
  let changes = open.get(tx);
  if (!changes) {
    if (!isTransaction(tx)) throw new Error('feed changes are recorded inside db.transaction(): pass its tx');
    changes = new ChangeSet();
    open.set(tx, changes);
    tx.beforeCommit(() => publishTouched(tx));
  }
  changes.add(item);
}

/**
 * Publishes what the transaction touched, in the order edges need: certificates being served first (an edge
 * applying changes in order never sees an endpoint naming a certificate it lacks), then endpoints and other entries,
 * then withdrawn certificates (after the endpoints that let go of them).
 */
async function publishTouched(tx: Transaction): Promise<void> {
  const changes = open.get(tx);
  if (!changes) return;
  open.delete(tx);
  const withdrawn: number[] = [];
  for (const id of changes.certificates) {
    const record = await servedCertificate(tx, id);
    if (record) await recordChange(tx, TOPICS.certificate, String(id), record);
    else withdrawn.push(id);
  }
  for (const build of changes.entries.values()) {
    const change = await build(tx);
    if (change) await recordChange(tx, change.topic, change.key, change.data);
  }
  for (const id of withdrawn) await recordChange(tx, TOPICS.certificate, String(id), null);
}

/** A certificate's edge record while some endpoint serves it; null when none does or it is gone. The key stays sealed. */
async function servedCertificate(tx: Queryable, id: number): Promise<CertificateConfig | null> {
  const { rows } = await tx.query<{ id: number; account_id: number; certificate_pem: string; private_key_sealed: string; not_after: Date; sans: string[] }>(
    `SELECT c.id, c.account_id, c.certificate_pem, c.private_key_sealed, c.not_after, c.sans FROM certificates c
     WHERE c.id = $1 AND EXISTS (SELECT 1 FROM endpoints e WHERE e.certificate_id = c.id)`,
    [id],
  );
  const c = rows[0];
  if (!c) return null;
  return {
    id: c.id,
    account_id: c.account_id,
    certificate_pem: c.certificate_pem,
    private_key_sealed: c.private_key_sealed,
    not_after: c.not_after.toISOString(),
    sans: c.sans,
  };
}

/**
 * Runs `fn` in a transaction and answers its value with the feed version its changes took: the edge's registration
 * flow waits for that version to be applied. The current version when `fn` touched nothing.
 */
export async function transactionWithFeedVersion<T>(db: Database, fn: (tx: Transaction) => Promise<T>): Promise<{ value: T; feedVersion: number }> {
  return db.transaction(async (tx) => {
    const value = await fn(tx);
    // Published now rather than by the queued task (which then finds nothing), so the version read below carries it.
    await publishTouched(tx);
    return { value, feedVersion: await currentVersion(tx) };
  });
}
