import type { HandlerMap } from '../../http/handlers.ts';
import * as groups from './service.ts';

export const groupsHandlers = {
  getGroupTree: async ({ query }, ctx) => ({ status: 200, body: await groups.getTree(ctx.service(), query) }),
  createGroup: async ({ body }, ctx) => ({ status: 201, body: await groups.createGroup(ctx.service(), body) }),
  updateGroup: async ({ path, body }, ctx) => ({
    status: 200,
    body: await groups.updateGroup(ctx.service(), path.groupId, body),
  }),
  setGroupMembers: async ({ path, body }, ctx) => {
    await groups.setGroupMembers(ctx.service(), path.groupId, body.memberIds);
    return { status: 204 };
  },
  deleteGroup: async ({ path }, ctx) => {
    await groups.trashDirectory(ctx.service(), 'group', path.groupId);
    return { status: 204 };
  },
  restoreGroup: async ({ path }, ctx) => {
    await groups.restoreDirectory(ctx.service(), 'group', path.groupId);
    return { status: 204 };
  },
  createFolder: async ({ body }, ctx) => ({ status: 201, body: await groups.createFolder(ctx.service(), body) }),
  updateFolder: async ({ path, body }, ctx) => ({
    status: 200,
    body: await groups.updateFolder(ctx.service(), path.folderId, body),
  }),
  deleteFolder: async ({ path }, ctx) => {
    await groups.trashDirectory(ctx.service(), 'folder', path.folderId);
    return { status: 204 };
  },
  restoreFolder: async ({ path }, ctx) => {
    await groups.restoreDirectory(ctx.service(), 'folder', path.folderId);
    return { status: 204 };
  },
  listDirectoryLayouts: async ({ query }, ctx) => ({
    status: 200,
    body: await groups.listLayouts(ctx.service(), query.directoryId),
  }),
  createDirectoryLayout: async ({ body }, ctx) => ({
    status: 201,
    body: await groups.createLayout(ctx.service(), body),
  }),
  deleteDirectoryLayout: async ({ path }, ctx) => {
    await groups.trashLayout(ctx.service(), path.layoutId);
    return { status: 204 };
  },
  restoreDirectoryLayout: async ({ path }, ctx) => {
    await groups.restoreLayout(ctx.service(), path.layoutId);
    return { status: 204 };
  },
} satisfies Partial<HandlerMap>;
