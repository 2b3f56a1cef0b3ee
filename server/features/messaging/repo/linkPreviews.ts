/**
 * The SQL of link previews: the rows a send or an edit keeps per link, what the `link_preview` job
 * reads and stores, dismiss and refresh. Committed as generated/sql/messaging.sql.
 */
import type { Knex } from 'knex';
import { sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';

const AREA = 'messaging';

/** A new pending preview: its id, its place among the message's links and its sealed link. */
export interface NewPreview {
  id: string;
  position: number;
  key_id: string;
  data_enc: Buffer;
}

/**
 * The message's new pending previews, as one statement whatever their number: the rows travel as
 * one JSON array (the sealed bytes as base64).
 */
const insertPending = statement<{ userId: string; messageId: string; rows: readonly NewPreview[]; now: number }, never>(
  {
    name: 'messaging_link_previews_insert',
    area: AREA,
    variants: { 'the new links': { userId: EXAMPLE_UUID, messageId: EXAMPLE_UUID, rows: [], now: 0 } },
    build: ({ userId, messageId, rows, now }) => {
      const json = JSON.stringify(
        rows.map((r) => ({ id: r.id, pos: r.position, key_id: r.key_id, data: r.data_enc.toString('base64') })),
      );
      return sql`insert into messaging_link_previews
      (id, user_id, message_id, position, key_id, data_enc, status, created_at, updated_at)
      select r.id, ${userId}, ${messageId}, r.pos, r.key_id, decode(r.data, 'base64'), 'pending', ${now}, ${now}
      from jsonb_to_recordset(${json}::jsonb) as r(id uuid, pos int, key_id text, data text)`;
    },
  },
);

export interface StoredPreviewRow {
  id: string;
  key_id: string;
  data_enc: Uint8Array;
  position: number;
  image_key: string | null;
}

const ofMessage = statement<{ messageId: string }, StoredPreviewRow>({
  name: 'messaging_link_previews_of_message',
  area: AREA,
  variants: { 'a message': { messageId: EXAMPLE_UUID } },
  build: ({ messageId }) =>
    sql`select id, key_id, data_enc, position, image_key from messaging_link_previews where message_id = ${messageId}`,
});

const deleteMany = statement<{ ids: readonly string[] }, never>({
  name: 'messaging_link_previews_delete',
  area: AREA,
  variants: { 'some previews': { ids: [] } },
  build: ({ ids }) => sql`delete from messaging_link_previews where id = any (${[...ids]}::uuid[])`,
});

const setPosition = statement<{ id: string; position: number; now: number }, never>({
  name: 'messaging_link_preview_position',
  area: AREA,
  variants: { 'a preview': { id: EXAMPLE_UUID, position: 0, now: 0 } },
  build: ({ id, position, now }) =>
    sql`update messaging_link_previews set position = ${position}, updated_at = ${now} where id = ${id}`,
});

/** A preview of the account on a live message in a live channel and space. */
const own = statement<{ userId: string; previewId: string }, { id: string; status: string }>({
  name: 'messaging_link_preview_own',
  area: AREA,
  variants: { 'a preview': { userId: EXAMPLE_UUID, previewId: EXAMPLE_UUID } },
  build: ({ userId, previewId }) => sql`select p.id, p.status from messaging_link_previews p
    join messaging_messages m on m.id = p.message_id
    join messaging_channels c on c.id = m.channel_id
    join messaging_spaces s on s.id = c.space_id
    where p.id = ${previewId} and p.user_id = ${userId}
      and m.deleted_at is null and c.archived_at is null and s.archived_at is null
    limit 1`,
});

const dismiss = statement<{ id: string; now: number }, never>({
  name: 'messaging_link_preview_dismiss',
  area: AREA,
  variants: { 'a preview': { id: EXAMPLE_UUID, now: 0 } },
  build: ({ id, now }) => sql`update messaging_link_previews set dismissed_at = ${now}, updated_at = ${now}
    where id = ${id} and dismissed_at is null`,
});

const markPending = statement<{ id: string; now: number }, never>({
  name: 'messaging_link_preview_pending',
  area: AREA,
  variants: { 'a preview': { id: EXAMPLE_UUID, now: 0 } },
  build: ({ id, now }) =>
    sql`update messaging_link_previews set status = 'pending', failure = null, updated_at = ${now} where id = ${id}`,
});

export interface PreviewForJobRow {
  id: string;
  user_id: string;
  key_id: string;
  data_enc: Uint8Array;
  image_key: string | null;
}

/** The preview the job fetches, while its message is live. */
const forJob = statement<{ previewId: string }, PreviewForJobRow>({
  name: 'messaging_link_preview_for_job',
  area: AREA,
  variants: { 'a preview': { previewId: EXAMPLE_UUID } },
  build: ({ previewId }) => sql`select p.id, p.user_id, p.key_id, p.data_enc, p.image_key
    from messaging_link_previews p join messaging_messages m on m.id = p.message_id
    where p.id = ${previewId} and m.deleted_at is null
    limit 1`,
});

export interface PreviewOutcome {
  key_id: string;
  data_enc: Buffer;
  status: 'ready' | 'failed';
  failure: string | null;
  image_key: string | null;
}

const storeOutcome = statement<{ id: string; outcome: PreviewOutcome; now: number }, { id: string }>({
  name: 'messaging_link_preview_store',
  area: AREA,
  variants: {
    'an outcome': {
      id: EXAMPLE_UUID,
      outcome: { key_id: 'k', data_enc: Buffer.alloc(0), status: 'failed', failure: 'x', image_key: null },
      now: 0,
    },
  },
  build: ({ id, outcome: o, now }) => sql`update messaging_link_previews
    set key_id = ${o.key_id}, data_enc = ${o.data_enc}, status = ${o.status}, failure = ${o.failure}, image_key = ${o.image_key},
      fetched_at = ${now}, updated_at = ${now}
    where id = ${id}
    returning id`,
});

export const linkPreviewsRepo = {
  insertPending: async (db: Knex, userId: string, messageId: string, rows: readonly NewPreview[], now: number) =>
    void (await insertPending(db, { userId, messageId, rows, now })),
  ofMessage: (db: Knex, messageId: string) => ofMessage(db, { messageId }),
  deleteMany: async (db: Knex, ids: readonly string[]) => void (await deleteMany(db, { ids })),
  setPosition: async (db: Knex, id: string, position: number, now: number) =>
    void (await setPosition(db, { id, position, now })),
  findOwn: async (db: Knex, userId: string, previewId: string) => (await own(db, { userId, previewId }))[0] ?? null,
  dismiss: async (db: Knex, id: string, now: number) => void (await dismiss(db, { id, now })),
  markPending: async (db: Knex, id: string, now: number) => void (await markPending(db, { id, now })),
  findForJob: async (db: Knex, previewId: string) => (await forJob(db, { previewId }))[0] ?? null,
  /** Whether the preview was still there to store the outcome on. */
  async storeOutcome(db: Knex, id: string, outcome: PreviewOutcome, now: number): Promise<boolean> {
    return (await storeOutcome(db, { id, outcome, now })).length > 0;
  },
};
