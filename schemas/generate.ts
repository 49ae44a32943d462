// `npm run schema`: writes schemas/edge-config.schema.json from the document schema (src/config-as-code/document.ts).
// test/config-as-code/json-schema.test.ts fails when the committed file is not what this writes.
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { documentJsonSchemaText } from '../src/config-as-code/json-schema.ts';

const target = fileURLToPath(new URL('./edge-config.schema.json', import.meta.url));
await writeFile(target, documentJsonSchemaText());
process.stdout.write(`wrote ${target}\n`);
