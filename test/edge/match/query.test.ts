// Reading one query parameter's values from a raw query string, as `query` routing conditions do at the edge:
// decoded exactly as URLSearchParams decodes them, checked on a seeded random corpus.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { queryValues } from '../../../src/edge/match/query.ts';
import { random } from '../../helpers/random.ts';

describe('queryValues', () => {
  it('decodes exactly as URLSearchParams does', () => {
    const rand = random(5);
    const alphabet = 'ab=&+%2Fc3A9é ';
    const names = ['a', 'b', 'a b', 'é', '', 'ab'];
    const cases = ['a=1&a=2', 'a', 'a=', '=1', '&&a=1&', 'a%20b=1', 'a+b=x+y', '%C3%A9=%E2%82%AC', 'a=%zz', 'a=%C3', 'a=1=2'];
    for (let i = 0; i < 5000; i++) cases.push(Array.from({ length: rand(16) }, () => alphabet[rand(alphabet.length)]).join(''));
    for (const query of cases) {
      const params = new URLSearchParams(query);
      for (const name of names) {
        const want = params.getAll(name);
        assert.deepEqual(queryValues(query, name) ?? [], want, `${JSON.stringify(query)} ${JSON.stringify(name)}`);
      }
    }
  });
});
