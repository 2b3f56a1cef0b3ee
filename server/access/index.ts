/**
 * Access: the only place that answers "may this actor see or change this owner's content, and at
 * what level". Services receive an `Access` (server/core/context.ts) created here (resolve.ts) and
 * repos apply its rules in SQL (predicates.ts), so rows a viewer may not see are never loaded
 * (never filtered in JS); the rules themselves, without SQL, are policy.ts.
 *
 * The model (docs/privacy.md):
 * - The owner sees and changes everything of its own (`ownAccount`, `onBehalfOf`).
 * - Another account gets anything only through an **accepted** friendship with no block in either
 *   direction (`forFriend`; otherwise null, which friend routes answer with 404).
 * - Each privacy bucket maps every permission group to none, read or read_write. The friend holds
 *   the buckets the owner assigned to it; a piece of content carries its own buckets. The viewer's
 *   level on that content, per group, is the maximum over the buckets in both sets; no common
 *   bucket means `none` for every group (fail closed: content without buckets is seen by no one).
 * - So that lists filter in the database, a friend access carries, per group, the viewer's buckets
 *   that grant at least read and those that grant read_write (`grants`); content is visible at a
 *   level when one of its buckets is in that list: one indexed EXISTS probe per row.
 */
export * from './policy.ts';
export * from './predicates.ts';
export * from './resolve.ts';
