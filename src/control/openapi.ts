// The control API's OpenAPI document built without listening: the same app GET /v1/openapi.json serves, over an
// in-memory store that nothing queries. Run directly (`tsx src/control/openapi.ts out.json`) it writes the document.
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { loadConfig, type Config } from '../shared/config.ts';
import { createLogger } from '../shared/log.ts';
import { MemoryPresence } from '../shared/presence.ts';
import { SecretBox } from '../shared/secrets.ts';
import { openDatabase } from '../store/db.ts';
import { buildControlApp } from './index.ts';

/**
 * The document for `config` (by default the built-in defaults, so `npm run api:types` and `npm run lint:api` do not
 * depend on the caller's environment: plan names and `servers` come from configuration).
 */
export async function openApiDocument(config: Config = loadConfig({})): Promise<Record<string, unknown>> {
  // Routes read nothing at registration; the store is real (in memory) only because the app's dependencies name one.
  const db = await openDatabase({ url: '', dataDir: 'memory://', schema: 'public' });
  const app = buildControlApp({
    config,
    db,
    logger: createLogger('silent'),
    secrets: new SecretBox(randomBytes(32).toString('base64url')),
    presence: new MemoryPresence(config.presence.staleMs),
    readiness: {},
  });
  try {
    await app.ready();
    return app.swagger() as unknown as Record<string, unknown>;
  } finally {
    await app.close();
    await db.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const out = process.argv[2];
  if (!out) {
    process.stderr.write('usage: tsx src/control/openapi.ts <file.json>\n');
    process.exit(2);
  }
  writeFileSync(out, JSON.stringify(await openApiDocument(), null, 2) + '\n');
}
