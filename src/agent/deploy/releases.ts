// The deploy directory on disk: DIR/releases/<deployment_id>-<sha12> per kept release, DIR/state.json naming the
// live one (with the commands it runs with), so a restarted agent serves the same release before any order arrives.
import { readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface Release {
  deploymentId: number;
  commit: string;
  /** The directory's name under DIR/releases. */
  name: string;
  dir: string;
  runCommand: string;
  healthPath: string;
}

interface StateFile {
  version: 1;
  deployment_id: number;
  commit: string;
  release: string;
  run_command: string;
  health_path: string;
}

const RELEASE_NAME = /^[0-9]+-[0-9a-f]{12}$/;
/** Where a release is fetched before its commit (hence its name) is known; removed at start if a crash left one. */
export const INCOMING_PREFIX = '.incoming-';

export function releaseName(deploymentId: number, commit: string): string {
  return `${deploymentId}-${commit.slice(0, 12)}`;
}

export async function readState(dir: string, releasesDir: string): Promise<Release | null> {
  let text: string;
  try {
    text = await readFile(join(dir, 'state.json'), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const s = JSON.parse(text) as Partial<StateFile>;
  if (
    s.version !== 1 ||
    !Number.isInteger(s.deployment_id) ||
    typeof s.commit !== 'string' ||
    typeof s.release !== 'string' ||
    !RELEASE_NAME.test(s.release) ||
    typeof s.run_command !== 'string' ||
    typeof s.health_path !== 'string'
  ) {
    throw new Error('state.json is not a state file of this agent version');
  }
  return {
    deploymentId: s.deployment_id!,
    commit: s.commit,
    name: s.release,
    dir: join(releasesDir, s.release),
    runCommand: s.run_command,
    healthPath: s.health_path,
  };
}

/** Written whole or not at all: a temporary file renamed over the old one (rename is atomic within a directory). */
export async function writeState(dir: string, release: Release): Promise<void> {
  const state: StateFile = {
    version: 1,
    deployment_id: release.deploymentId,
    commit: release.commit,
    release: release.name,
    run_command: release.runCommand,
    health_path: release.healthPath,
  };
  const tmp = join(dir, `.state.json.${process.pid}.tmp`);
  await writeFile(tmp, `${JSON.stringify(state, null, 2)}\n`, { flush: true });
  await rename(tmp, join(dir, 'state.json'));
}

/** Kept releases, most recently live first (a release's directory is touched when it goes live). */
export async function listReleases(releasesDir: string): Promise<Array<{ name: string; dir: string; mtimeMs: number }>> {
  const out: Array<{ name: string; dir: string; mtimeMs: number }> = [];
  for (const name of await readdir(releasesDir)) {
    if (!RELEASE_NAME.test(name)) continue;
    const dir = join(releasesDir, name);
    try {
      out.push({ name, dir, mtimeMs: (await stat(dir)).mtimeMs });
    } catch {
      // removed meanwhile
    }
  }
  return out.sort((a, b) => b.mtimeMs - a.mtimeMs || b.name.localeCompare(a.name, 'en', { numeric: true }));
}

/** Marks the release as the most recently live, for pruning and for finding a rollback target. */
export async function touch(dir: string): Promise<void> {
  const now = new Date();
  await utimes(dir, now, now);
}

/** Deletes kept releases beyond `keep` (the live one counts and is never deleted); returns the names deleted. */
export async function prune(releasesDir: string, liveName: string | null, keep: number): Promise<string[]> {
  const others = (await listReleases(releasesDir)).filter((r) => r.name !== liveName);
  const extra = others.slice(Math.max(0, keep - (liveName ? 1 : 0)));
  for (const r of extra) await rm(r.dir, { recursive: true, force: true });
  return extra.map((r) => r.name);
}

/** Removes fetches a crashed agent left half done. */
export async function removeIncoming(releasesDir: string): Promise<void> {
  for (const name of await readdir(releasesDir)) {
    if (name.startsWith(INCOMING_PREFIX)) await rm(join(releasesDir, name), { recursive: true, force: true });
  }
}
