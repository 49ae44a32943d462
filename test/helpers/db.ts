// Test databases: PostgreSQL in a fresh schema when DATABASE_URL is set (CI), else in-memory PGlite.
// Each call gets an isolated, migrated database; close() drops what it created.
import { randomBytes } from 'node:crypto';
import { openDatabase, type Database } from '../../src/store/db.ts';

export interface TestDatabase {
  db: Database;
  /** Settings that point another instance (a child process, the server) at this same database. */
  env: Record<string, string>;
  close(): Promise<void>;
}

export function testSchemaName(): string {
  return `t_${randomBytes(6).toString('hex')}`;
}

export async function openTestDatabase(): Promise<TestDatabase> {
  const url = process.env.DATABASE_URL ?? '';
  const schema = url ? testSchemaName() : 'public';
  const db = await openDatabase({ url, dataDir: 'memory://', schema });
  return {
    db,
    env: url ? { DATABASE_URL: url, EDGE_DATABASE_SCHEMA: schema } : {},
    async close() {
      if (url) await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await db.close();
    },
  };
}
