import type { HandlerMap } from '../../http/handlers.ts';
import * as fields from './service.ts';

export const customFieldsHandlers = {
  listCustomFields: async (_i, ctx) => ({ status: 200, body: await fields.listFields(ctx.service()) }),
  createCustomField: async ({ body }, ctx) => ({ status: 201, body: await fields.createField(ctx.service(), body) }),
  updateCustomField: async ({ path, body }, ctx) => ({
    status: 200,
    body: await fields.updateField(ctx.service(), path.fieldId, body),
  }),
  deleteCustomField: async ({ path }, ctx) => {
    await fields.trashField(ctx.service(), path.fieldId);
    return { status: 204 };
  },
  restoreCustomField: async ({ path }, ctx) => {
    await fields.restoreField(ctx.service(), path.memberId, path.fieldId);
    return { status: 204 };
  },
  getMemberCustomFields: async ({ path }, ctx) => ({
    status: 200,
    body: await fields.memberValues(ctx.service(), path.memberId),
  }),
  setMemberCustomField: async ({ path, body }, ctx) => ({
    status: 200,
    body: await fields.setMemberValue(ctx.service(), path.memberId, path.fieldId, body.value),
  }),
} satisfies Partial<HandlerMap>;
