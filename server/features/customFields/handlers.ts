import type { HandlerMap } from '../../http/handlers.ts';
import * as fields from './service.ts';

export const customFieldsHandlers = {
  listCustomFields: async (_i, ctx) => ({ status: 200, body: await fields.listFields(ctx.deps.db.knex, ctx.userId) }),
  createCustomField: async ({ body }, ctx) => ({ status: 201, body: await fields.createField(ctx.deps.db.knex, ctx.userId, body, ctx.deps.clock()) }),
  updateCustomField: async ({ path, body }, ctx) => ({
    status: 200,
    body: await fields.updateField(ctx.deps.db.knex, ctx.userId, path.fieldId, body, ctx.deps.clock()),
  }),
  deleteCustomField: async ({ path }, ctx) => {
    await fields.trashField(ctx.deps.db.knex, ctx.userId, path.fieldId, ctx.deps.clock());
    return { status: 204 };
  },
  restoreCustomField: async ({ path }, ctx) => {
    await fields.restoreField(ctx.deps.db.knex, ctx.userId, path.memberId, path.fieldId, ctx.deps.clock());
    return { status: 204 };
  },
  getMemberCustomFields: async ({ path }, ctx) => ({ status: 200, body: await fields.memberValues(ctx.deps.db.knex, ctx.userId, path.memberId) }),
  setMemberCustomField: async ({ path, body }, ctx) => ({
    status: 200,
    body: await fields.setMemberValue(ctx.deps.db.knex, ctx.userId, path.memberId, path.fieldId, body.value, ctx.deps.clock()),
  }),
} satisfies Partial<HandlerMap>;
