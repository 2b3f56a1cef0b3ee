import type { HandlerMap } from '../../http/handlers.ts';
import * as buckets from './service.ts';

const done = { status: 204 } as const;

export const privacyBucketsHandlers = {
  listPrivacyBuckets: async (_i, ctx) => ({ status: 200, body: await buckets.listBuckets(ctx.service()) }),
  createPrivacyBucket: async ({ body }, ctx) => ({
    status: 201,
    body: await buckets.createBucket(ctx.service(), body),
  }),
  getPrivacyBucket: async ({ path }, ctx) => ({
    status: 200,
    body: await buckets.getBucket(ctx.service(), path.bucketId),
  }),
  updatePrivacyBucket: async ({ path, body }, ctx) => ({
    status: 200,
    body: await buckets.updateBucket(ctx.service(), path.bucketId, body),
  }),
  deletePrivacyBucket: async ({ path }, ctx) => {
    await buckets.deleteBucket(ctx.service(), path.bucketId);
    return done;
  },

  getPrivacyBucketDefaults: async ({ path }, ctx) => ({
    status: 200,
    body: await buckets.getDefaults(ctx.service(), path.kind),
  }),
  setPrivacyBucketDefaults: async ({ path, body }, ctx) => {
    await buckets.setDefaults(ctx.service(), path.kind, body.bucketIds);
    return done;
  },

  listPrivacyBucketMembers: async ({ path }, ctx) => ({
    status: 200,
    body: { bucketId: path.bucketId, memberIds: await buckets.contentOf(ctx.service(), path.bucketId, 'member') },
  }),
  listPrivacyBucketGroups: async ({ path }, ctx) => ({
    status: 200,
    body: { bucketId: path.bucketId, groupIds: await buckets.contentOf(ctx.service(), path.bucketId, 'group') },
  }),
  listPrivacyBucketDirectories: async ({ path }, ctx) => ({
    status: 200,
    body: { bucketId: path.bucketId, directoryIds: await buckets.contentOf(ctx.service(), path.bucketId, 'directory') },
  }),

  bulkPrivacyBucketFriends: async ({ body }, ctx) => {
    await buckets.bulk(ctx.service(), 'friend', {
      bucketId: body.bucketId,
      mode: body.mode,
      field: 'friendUserIds',
      ids: body.friendUserIds,
    });
    return done;
  },
  bulkPrivacyBucketMembers: async ({ body }, ctx) => {
    await buckets.bulk(ctx.service(), 'member', {
      bucketId: body.bucketId,
      mode: body.mode,
      field: 'memberIds',
      ids: body.memberIds,
    });
    return done;
  },
  bulkPrivacyBucketGroups: async ({ body }, ctx) => {
    await buckets.bulk(ctx.service(), 'group', {
      bucketId: body.bucketId,
      mode: body.mode,
      field: 'groupIds',
      ids: body.groupIds,
    });
    return done;
  },
  bulkPrivacyBucketDirectories: async ({ body }, ctx) => {
    await buckets.bulk(ctx.service(), 'directory', {
      bucketId: body.bucketId,
      mode: body.mode,
      field: 'directoryIds',
      ids: body.directoryIds,
    });
    return done;
  },

  getMemberPrivacyBuckets: async ({ path }, ctx) => ({
    status: 200,
    body: { memberId: path.memberId, bucketIds: await buckets.bucketsOf(ctx.service(), 'member', path.memberId) },
  }),
  setMemberPrivacyBuckets: async ({ path, body }, ctx) => {
    await buckets.setBucketsOf(ctx.service(), 'member', path.memberId, body.bucketIds);
    return done;
  },
  getFriendPrivacyBuckets: async ({ path }, ctx) => ({
    status: 200,
    body: {
      friendUserId: path.friendUserId,
      bucketIds: await buckets.bucketsOf(ctx.service(), 'friend', path.friendUserId),
    },
  }),
  setFriendPrivacyBuckets: async ({ path, body }, ctx) => {
    await buckets.setBucketsOf(ctx.service(), 'friend', path.friendUserId, body.bucketIds);
    return done;
  },
  getGroupPrivacyBuckets: async ({ path }, ctx) => ({
    status: 200,
    body: { groupId: path.groupId, bucketIds: await buckets.bucketsOf(ctx.service(), 'group', path.groupId) },
  }),
  setGroupPrivacyBuckets: async ({ path, body }, ctx) => {
    await buckets.setBucketsOf(ctx.service(), 'group', path.groupId, body.bucketIds);
    return done;
  },
  getDirectoryPrivacyBuckets: async ({ path }, ctx) => ({
    status: 200,
    body: {
      directoryId: path.directoryId,
      bucketIds: await buckets.bucketsOf(ctx.service(), 'directory', path.directoryId),
    },
  }),
  setDirectoryPrivacyBuckets: async ({ path, body }, ctx) => {
    await buckets.setBucketsOf(ctx.service(), 'directory', path.directoryId, body.bucketIds);
    return done;
  },
  getCustomFieldPrivacyBuckets: async ({ path }, ctx) => ({
    status: 200,
    body: {
      fieldDefinitionId: path.fieldDefinitionId,
      bucketIds: await buckets.bucketsOf(ctx.service(), 'custom_field', path.fieldDefinitionId),
    },
  }),
  setCustomFieldPrivacyBuckets: async ({ path, body }, ctx) => {
    await buckets.setBucketsOf(ctx.service(), 'custom_field', path.fieldDefinitionId, body.bucketIds);
    return done;
  },
  getProfileSectionPrivacyBuckets: async ({ path }, ctx) => ({
    status: 200,
    body: {
      memberId: path.memberId,
      sectionKey: path.sectionKey,
      bucketIds: await buckets.bucketsOf(ctx.service(), 'profile_section', path.memberId, path.sectionKey),
    },
  }),
  setProfileSectionPrivacyBuckets: async ({ path, body }, ctx) => {
    await buckets.setBucketsOf(ctx.service(), 'profile_section', path.memberId, body.bucketIds, path.sectionKey);
    return done;
  },
  getSideSystemPrivacyBuckets: async ({ path }, ctx) => ({
    status: 200,
    body: {
      sideSystemId: path.sideSystemId,
      bucketIds: await buckets.bucketsOf(ctx.service(), 'side_system', path.sideSystemId),
    },
  }),
  setSideSystemPrivacyBuckets: async ({ path, body }, ctx) => {
    await buckets.setBucketsOf(ctx.service(), 'side_system', path.sideSystemId, body.bucketIds);
    return done;
  },
  getSubSystemPrivacyBuckets: async ({ path }, ctx) => ({
    status: 200,
    body: {
      subSystemId: path.subSystemId,
      bucketIds: await buckets.bucketsOf(ctx.service(), 'sub_system', path.subSystemId),
    },
  }),
  setSubSystemPrivacyBuckets: async ({ path, body }, ctx) => {
    await buckets.setBucketsOf(ctx.service(), 'sub_system', path.subSystemId, body.bucketIds);
    return done;
  },

  // Member status definitions carry buckets too (routes of the Member statuses tag, scope memberStatuses).
  getMemberStatusPrivacyBuckets: async ({ path }, ctx) => ({
    status: 200,
    body: {
      definitionId: path.definitionId,
      bucketIds: await buckets.bucketsOf(ctx.service(), 'member_status', path.definitionId),
    },
  }),
  setMemberStatusPrivacyBuckets: async ({ path, body }, ctx) => {
    await buckets.setBucketsOf(ctx.service(), 'member_status', path.definitionId, body.bucketIds);
    return done;
  },
} satisfies Partial<HandlerMap>;
