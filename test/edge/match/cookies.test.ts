// Reading one cookie's values from a Cookie header, as `cookie` routing conditions do at the edge.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { cookieValues } from '../../../src/edge/match/cookies.ts';

describe('cookieValues', () => {
  it('returns one name’s values, in order, quotes removed, bare tokens ignored', () => {
    const header = 'a=1; b="two"; a=3; flag; =x; c=; d';
    assert.deepEqual(cookieValues(header, 'a'), ['1', '3']);
    assert.deepEqual(cookieValues(header, 'b'), ['two']);
    assert.deepEqual(cookieValues(header, 'c'), ['']);
    assert.equal(cookieValues(header, 'flag'), undefined);
    assert.equal(cookieValues(header, 'd'), undefined);
    assert.equal(cookieValues(header, 'x'), undefined);
    assert.deepEqual(cookieValues(['a=1', 'a=2'], 'a'), ['1', '2']);
    assert.equal(cookieValues(undefined, 'a'), undefined);
  });
});
