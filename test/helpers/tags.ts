// Resource tags (docs/api.md "Tags") as the control tests try them: values that break one rule each, so every taggable
// resource's tests refuse the same cases the same way.

/** Tag lists that break one rule each (the pattern, the count, duplicates, the type), named for the failure message. */
export const BAD_TAGS: ReadonlyArray<readonly [string, unknown]> = [
  ['upper case', ['Prod']],
  ['a leading dot', ['.hidden']],
  ['a leading dash', ['-x']],
  ['a space', ['two words']],
  ['33 characters', ['a'.repeat(33)]],
  ['empty', ['']],
  ['a slash', ['team/web']],
  ['17 tags', Array.from({ length: 17 }, (_, i) => `t${i}`)],
  ['a duplicate', ['web', 'api', 'web']],
  ['a string, not a list', 'web'],
  ['a number in the list', ['web', 7]],
  ['null', null],
];

/** The most tags a resource takes, all valid: sixteen, the longest 32 characters, every allowed character used. */
export const SIXTEEN_TAGS = ['x'.repeat(32), 'team.a', 'env_prod-1', ...Array.from({ length: 13 }, (_, i) => `t${i}`)];
