// A migrated PGlite data directory made once and copied per test: initdb in WASM costs seconds, a copy milliseconds.
// Keyed by the migrations' content, and published by an atomic rename so parallel test processes can share it.
import { createHash, randomBytes } from 'node:crypto';
import { cp, mkdir, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/store/db.ts';
import { listMigrations } from '../../src/store/migrate.ts';

let template: Promise<string> | undefined;

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function buildTemplate(): Promise<string> {
  const hash = createHash('sha256');
  for (const m of listMigrations()) hash.update(`${m.version}:${m.sql}\n`);
  const dir = join(tmpdir(), `edge-pglite-template-${hash.digest('hex').slice(0, 16)}`);
  if (await exists(join(dir, 'PG_VERSION'))) return dir;
  const staging = `${dir}.${randomBytes(4).toString('hex')}.tmp`;
  const db = await openDatabase({ url: '', dataDir: staging, schema: 'public' });
  await db.close();
  try {
    await rename(staging, dir);
  } catch {
    await rm(staging, { recursive: true, force: true }); // another process published it first
  }
  return dir;
}

/** Fills `target` with a fresh copy of the migrated template. */
export async function copyPgliteTemplate(target: string): Promise<void> {
  template ??= buildTemplate();
  await mkdir(target, { recursive: true });
  await cp(await template, target, { recursive: true });
}
