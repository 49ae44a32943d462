// The document's JSON Schema for editors and other tools, generated from DocumentSchema (itself built from the API's
// body schemas): `npm run schema` writes schemas/edge-config.schema.json, and a test fails when the two differ.
import { writeFile } from 'node:fs/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { DocumentSchema } from './document.ts';

export const SCHEMA_ID = 'https://edge-platform.local/schemas/edge-config.schema.json';

/** Plain JSON (TypeBox's symbol keys dropped), as written to the file. */
export function documentJsonSchema(): Record<string, unknown> {
  return { $schema: 'https://json-schema.org/draft/2020-12/schema', $id: SCHEMA_ID, ...JSON.parse(JSON.stringify(DocumentSchema)) };
}

export const documentJsonSchemaText = () => JSON.stringify(documentJsonSchema(), null, 2) + '\n';

// `npm run schema` runs this module: it writes the file the package ships.
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const target = fileURLToPath(new URL('../../schemas/edge-config.schema.json', import.meta.url));
  await writeFile(target, documentJsonSchemaText());
  process.stdout.write(`wrote ${target}\n`);
}
