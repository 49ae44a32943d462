// Resource tags (docs/api.md "Tags"): the one schema every taggable resource's body, view and list filter uses, so
// endpoints, rate-limit rules, routing rules and alert rules agree on what a tag is. Labels only: edges never see them.
import { Type } from '@sinclair/typebox';

/** One tag: 1-32 of a-z 0-9 . _ -, starting with a letter or digit (migration 016's CHECKs hold the same). */
export const TAG_PATTERN = '^[a-z0-9][a-z0-9._-]{0,31}$';
/** Tags per resource, at most. */
export const MAX_RESOURCE_TAGS = 16;

const Tag = Type.String({ pattern: TAG_PATTERN, description: '1-32 of a-z 0-9 . _ -, starting with a letter or digit' });

/**
 * A body's `tags`: the whole set, each once; a bad tag, a 17th or a duplicate is 400 invalid_request naming the field.
 * `note` tells what the operation does with them (what omitting them means on a PUT).
 */
export const tagsBody = (note = '') =>
  Type.Array(Tag, {
    maxItems: MAX_RESOURCE_TAGS,
    uniqueItems: true,
    description: `Labels for your own use (configuration as code); at most ${MAX_RESOURCE_TAGS}, no duplicates, kept in the order sent. The edge ignores them${note}`,
  });

/** A view's `tags`: always present, empty when none. */
export const TagsView = Type.Array(Type.String(), { description: 'Labels (docs/api.md "Tags"); empty when none' });

/** A list's `tag` filter: one tag, the same pattern (anything else is 400 invalid_query). */
export const TagQuery = Type.String({ pattern: TAG_PATTERN, description: 'Only resources carrying this tag' });
