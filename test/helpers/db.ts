// Test databases: PostgreSQL in a fresh schema when DATABASE_URL is set (CI), else PGlite in a temporary directory.
// Each call gets an isolated, migrated database; close() drops what it created.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, type Database } from '../../src/store/db.ts';
import { copyPgliteTemplate } from './pglite-template.ts';

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
  const dataDir = url ? '' : await mkdtemp(join(tmpdir(), 'edge-db-'));
  if (dataDir) await copyPgliteTemplate(dataDir);
  const db = await openDatabase({ url, dataDir, schema });
  return {
    db,
    env: url ? { DATABASE_URL: url, EDGE_DATABASE_SCHEMA: schema } : {},
    async close() {
      if (url) await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await db.close();
      if (dataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}
