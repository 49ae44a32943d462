// The JSON Schema that ships for editors is exactly what the document schema generates (npm run schema), and it
// describes the same document the loader accepts.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { documentJsonSchema, documentJsonSchemaText } from '../../src/config-as-code/json-schema.ts';

const committed = new URL('../../schemas/edge-config.schema.json', import.meta.url);

describe('schemas/edge-config.schema.json', () => {
  it('is the file npm run schema generates from the API’s body schemas', async () => {
    assert.equal(await readFile(committed, 'utf8'), documentJsonSchemaText(), 'run `npm run schema` and commit the result');
  });

  it('ships with the package', async () => {
    const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8'));
    assert.equal(pkg.exports['./schemas/edge-config.schema.json'], './schemas/edge-config.schema.json');
    assert.equal(pkg.scripts.schema, 'tsx src/config-as-code/json-schema.ts');
  });

  it('carries the API’s own limits, so file and API cannot drift', () => {
    const schema = documentJsonSchema() as any;
    const endpoint = schema.properties.endpoints.patternProperties['^(.*)$'];
    const rule = endpoint.properties.rate_limits.patternProperties['^(.*)$'];
    assert.equal(rule.properties.window_size_seconds.maximum, 86400);
    assert.equal(rule.additionalProperties, false);
    assert.deepEqual(rule.required.sort(), ['action', 'requests_per_window', 'window_size_seconds']);
    const user = endpoint.properties.auth.properties.basic_users.items;
    assert.equal(user.properties.username.pattern, '^[^:\\x00-\\x1f\\x7f]+$');
    assert.equal(endpoint.properties.ports.properties.tcp.anyOf[0].minimum, 1024);
  });
});
