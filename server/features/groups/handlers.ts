import type { HandlerMap } from '../../http/handlers.ts';
import * as groups from './service.ts';

export const groupsHandlers = {
  getGroupTree: async ({ query }, ctx) => ({ status: 200, body: await groups.getTree(ctx.deps.db.knex, ctx.userId, query) }),
  createGroup: async ({ body }, ctx) => ({ status: 201, body: await groups.createGroup(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()) }),
  updateGroup: async ({ path, body }, ctx) => ({
    status: 200,
    body: await groups.updateGroup(ctx.deps.db.knex, ctx.userId, path.groupId, body, ctx.deps.clock()),
  }),
  setGroupMembers: async ({ path, body }, ctx) => {
    await groups.setGroupMembers(ctx.deps.db.knex, ctx.userId, path.groupId, body.memberIds, ctx.deps.clock());
    return { status: 204 };
  },
  deleteGroup: async ({ path }, ctx) => {
    await groups.trashDirectory(ctx.deps.db.knex, ctx.userId, 'group', path.groupId, ctx.deps.clock());
    return { status: 204 };
  },
  restoreGroup: async ({ path }, ctx) => {
    await groups.restoreDirectory(ctx.deps.db.knex, ctx.userId, 'group', path.groupId, ctx.deps.clock());
    return { status: 204 };
  },
  createFolder: async ({ body }, ctx) => ({ status: 201, body: await groups.createFolder(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()) }),
  updateFolder: async ({ path, body }, ctx) => ({
    status: 200,
    body: await groups.updateFolder(ctx.deps.db.knex, ctx.userId, path.folderId, body, ctx.deps.clock()),
  }),
  deleteFolder: async ({ path }, ctx) => {
    await groups.trashDirectory(ctx.deps.db.knex, ctx.userId, 'folder', path.folderId, ctx.deps.clock());
    return { status: 204 };
  },
  restoreFolder: async ({ path }, ctx) => {
    await groups.restoreDirectory(ctx.deps.db.knex, ctx.userId, 'folder', path.folderId, ctx.deps.clock());
    return { status: 204 };
  },
  listDirectoryLayouts: async ({ query }, ctx) => ({ status: 200, body: await groups.listLayouts(ctx.deps.db.knex, ctx.userId, query.directoryId) }),
  createDirectoryLayout: async ({ body }, ctx) => ({ status: 201, body: await groups.createLayout(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()) }),
  deleteDirectoryLayout: async ({ path }, ctx) => {
    await groups.trashLayout(ctx.deps.db.knex, ctx.userId, path.layoutId, ctx.deps.clock());
    return { status: 204 };
  },
  restoreDirectoryLayout: async ({ path }, ctx) => {
    await groups.restoreLayout(ctx.deps.db.knex, ctx.userId, path.layoutId, ctx.deps.clock());
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
