/** The SQL of guestbook messages (guestbook_messages, migration 0014), each read with its author's account card. */
import type { Knex } from 'knex';
import type { PendingEvent } from '../../../core/context.ts';
import { sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';
import { appendEvents, EXAMPLE_EVENT, keyedExample, notifiedColumn } from '../../../events/log.ts';
import { type AccountCardRow, accountCardColumns } from '../../friends/index.ts';
import { AREA } from './shared.ts';

/** The author's account card (friends/accountCard.ts), from `accounts a`. */
const ACCOUNT_CARD_COLUMNS = sql.join(
  accountCardColumns('a').map((column) => sql.id(column)),
  ', ',
);

export interface MessageRow extends AccountCardRow {
  id: string;
  user_id: string;
  widget_id: string;
  parent_message_id: string | null;
  author_user_id: string;
  posted_anonymously: boolean;
  body: string;
  hidden_by_owner: boolean;
  created_at: number;
}

const MESSAGE_COLUMNS = sql`id, user_id, widget_id, parent_message_id, author_user_id, posted_anonymously, body, hidden_by_owner, created_at`;

/** Messages `m` with their author's account card. */
const WITH_AUTHOR = sql`select m.id, m.user_id, m.widget_id, m.parent_message_id, m.author_user_id, m.posted_anonymously,
    m.body, m.hidden_by_owner, m.created_at, ${ACCOUNT_CARD_COLUMNS}
  from guestbook_messages m join accounts a on a.id = m.author_user_id`;

/** A page of top-level messages, newest first, created before `before` when given; `size` rows. */
const threads = statement<{ widgetId: string; size: number; before?: number | undefined }, MessageRow>({
  name: 'social_guestbook_threads',
  area: AREA,
  variants: {
    'first page': { widgetId: EXAMPLE_UUID, size: 26 },
    'before a cursor': { widgetId: EXAMPLE_UUID, size: 26, before: 0 },
  },
  build: ({ widgetId, size, before }) => sql`${WITH_AUTHOR}
    where m.widget_id = ${widgetId} and m.parent_message_id is null${before === undefined ? sql.empty : sql` and m.created_at < ${before}`}
    order by m.created_at desc, m.id desc
    limit ${size}`,
});

/** The top-level messages created at `createdAt` whose id is below `belowId`, by id descending. */
const threadTies = statement<{ widgetId: string; createdAt: number; belowId: string }, MessageRow>({
  name: 'social_guestbook_thread_ties',
  area: AREA,
  variants: { 'a run of equal createdAt': { widgetId: EXAMPLE_UUID, createdAt: 0, belowId: EXAMPLE_UUID } },
  build: ({ widgetId, createdAt, belowId }) => sql`${WITH_AUTHOR}
    where m.widget_id = ${widgetId} and m.parent_message_id is null and m.created_at = ${createdAt} and m.id < ${belowId}
    order by m.id desc`,
});

const threadBefore = statement<{ widgetId: string; before: number }, { id: string }>({
  name: 'social_guestbook_thread_before',
  area: AREA,
  variants: { 'a createdAt': { widgetId: EXAMPLE_UUID, before: 0 } },
  build: ({ widgetId, before }) => sql`select id from guestbook_messages
    where widget_id = ${widgetId} and parent_message_id is null and created_at < ${before}
    limit 1`,
});

const replies = statement<{ parentIds: readonly string[] }, MessageRow>({
  name: 'social_guestbook_replies',
  area: AREA,
  variants: { 'the replies of some threads': { parentIds: [] } },
  build: ({ parentIds }) => sql`${WITH_AUTHOR}
    where m.parent_message_id = any (${[...parentIds]}::uuid[])
    order by m.created_at, m.id`,
});

const message = statement<{ messageId: string }, MessageRow>({
  name: 'social_guestbook_message',
  area: AREA,
  variants: { 'one message': { messageId: EXAMPLE_UUID } },
  build: ({ messageId }) => sql`${WITH_AUTHOR} where m.id = ${messageId} limit 1`,
});

/** A top-level message of the guestbook, key-share locked so it stays until the reply commits. */
const topLevel = statement<{ widgetId: string; messageId: string }, { id: string }>({
  name: 'social_guestbook_top_level',
  area: AREA,
  variants: { 'one message': { widgetId: EXAMPLE_UUID, messageId: EXAMPLE_UUID } },
  build: ({ widgetId, messageId }) => sql`select id from guestbook_messages
    where id = ${messageId} and widget_id = ${widgetId} and parent_message_id is null
    limit 1 for key share`,
});

export type NewMessage = Omit<MessageRow, keyof AccountCardRow>;

const EXAMPLE_MESSAGE: NewMessage = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  widget_id: EXAMPLE_UUID,
  parent_message_id: null,
  author_user_id: EXAMPLE_UUID,
  posted_anonymously: false,
  body: 'x',
  hidden_by_owner: false,
  created_at: 0,
};

const insertMessage = statement<{ row: NewMessage }, never>({
  name: 'social_guestbook_insert',
  area: AREA,
  variants: { 'a message': { row: EXAMPLE_MESSAGE } },
  build: ({ row: r }) => sql`insert into guestbook_messages (${MESSAGE_COLUMNS})
    values (${r.id}, ${r.user_id}, ${r.widget_id}, ${r.parent_message_id}::uuid, ${r.author_user_id},
      ${r.posted_anonymously}, ${r.body}, ${r.hidden_by_owner}, ${r.created_at})`,
});

/** What the post statement decided, and the message with its author's card when it wrote one. */
export interface PostVerdict {
  /** The guestbook is the owner's. */
  found: boolean;
  /** Its config allows anonymous posts. */
  allow_anonymous: boolean;
  /** The parent named is a top-level message of this guestbook. */
  parent_ok: boolean;
  /** With `ahead`: the author's card was still the one read ahead (else nothing was written). */
  ahead_ok?: boolean;
  message: MessageRow | null;
  /** notifiedColumn's (a keyed post's oneStatement reads it). */
  notified: unknown;
}

/** The digest of the author's account card (`accounts a`), read ahead of a keyed post and checked by it. */
const CARD_DIGEST = sql`md5(row(${ACCOUNT_CARD_COLUMNS})::text)`;

/** The author's account card with its digest, read ahead of a keyed post (its answer shows the card). */
const authorCard = statement<{ authorId: string }, AccountCardRow & { digest: string }>({
  name: 'social_guestbook_author_card',
  area: AREA,
  variants: { 'an author': { authorId: EXAMPLE_UUID } },
  build: ({ authorId }) =>
    sql`select ${ACCOUNT_CARD_COLUMNS}, ${CARD_DIGEST} as digest from accounts a where a.id = ${authorId}`,
});

const WRITTEN = sql`exists (select 1 from inserted)`;

/**
 * A message and its event in one statement (docs/data-access.md, "Writes in one statement"): the
 * owner's guestbook key-share locked (a PATCH or delete of the widget waits, or was first and is
 * seen: the lock re-reads the row), then the parent, if one is named, key-share locked as a
 * top-level message of it; the message is written only when both hold and an anonymous post is
 * allowed. The answer is the verdict and the message with its author's account card.
 */
const postMessage = statement<
  { row: NewMessage; events: readonly PendingEvent[]; ahead: string | null },
  Omit<PostVerdict, 'message'> & Partial<MessageRow>
>({
  name: 'social_guestbook_post',
  area: AREA,
  variants: {
    'a message': { row: EXAMPLE_MESSAGE, events: [EXAMPLE_EVENT], ahead: null },
    "a keyed message whose author's card was read ahead": {
      row: EXAMPLE_MESSAGE,
      events: keyedExample([EXAMPLE_EVENT]),
      ahead: 'x',
    },
  },
  build: ({ row: r, events, ahead }) => {
    const cardStill =
      ahead === null
        ? sql.empty
        : sql`(select ${CARD_DIGEST} from accounts a where a.id = ${r.author_user_id}) = ${ahead}::text`;
    return sql`with widget as (
      select coalesce(w.config -> 'allowAnonymous' = 'true'::jsonb, false) as allow_anonymous from social_widgets w
      where w.id = ${r.widget_id} and w.user_id = ${r.user_id} and w.type = 'guestbook'
      for key share
    ),
    parent as (
      select p.id from guestbook_messages p
      where p.id = ${r.parent_message_id}::uuid and p.widget_id = ${r.widget_id} and p.parent_message_id is null
      for key share
    ),
    verdict as (
      select exists (select 1 from widget) as found,
        coalesce((select allow_anonymous from widget), false) as allow_anonymous,
        exists (select 1 from parent) as parent_ok
    ),
    inserted as (
      insert into guestbook_messages (${MESSAGE_COLUMNS})
      select ${r.id}, ${r.user_id}, ${r.widget_id}, ${r.parent_message_id}::uuid, ${r.author_user_id},
        ${r.posted_anonymously}, ${r.body}, ${r.hidden_by_owner}, ${r.created_at}
      from verdict v
      where v.found and (not ${r.posted_anonymously}::boolean or v.allow_anonymous)
        and (${r.parent_message_id}::uuid is null or v.parent_ok)${ahead === null ? sql.empty : sql` and ${cardStill}`}
      returning ${MESSAGE_COLUMNS}
    ),
    ${appendEvents(events, WRITTEN)}
    select v.found, v.allow_anonymous, v.parent_ok,${ahead === null ? sql.empty : sql` ${cardStill} as ahead_ok,`}
      m.id, m.user_id, m.widget_id, m.parent_message_id, m.author_user_id,
      m.posted_anonymously, m.body, m.hidden_by_owner, m.created_at, ${ACCOUNT_CARD_COLUMNS}, ${notifiedColumn}
    from verdict v
    left join inserted m on true
    left join accounts a on a.id = m.author_user_id`;
  },
});

/** A message on any guestbook, with its widget's visibility. */
export interface FoundMessage {
  id: string;
  user_id: string;
  widget_id: string;
  author_user_id: string;
  posted_anonymously: boolean;
  visibility: string;
}

const findAnywhere = statement<{ messageId: string }, FoundMessage>({
  name: 'social_guestbook_find_anywhere',
  area: AREA,
  variants: { 'one message': { messageId: EXAMPLE_UUID } },
  build: ({
    messageId,
  }) => sql`select m.id, m.user_id, m.widget_id, m.author_user_id, m.posted_anonymously, w.visibility
    from guestbook_messages m join social_widgets w on w.id = m.widget_id
    where m.id = ${messageId}
    limit 1`,
});

const deleteMessage = statement<{ messageId: string }, never>({
  name: 'social_guestbook_delete',
  area: AREA,
  variants: { 'one message': { messageId: EXAMPLE_UUID } },
  build: ({ messageId }) => sql`delete from guestbook_messages where id = ${messageId}`,
});

const deleteOfWidget = statement<{ widgetId: string }, never>({
  name: 'social_guestbook_delete_of_widget',
  area: AREA,
  variants: { 'a widget': { widgetId: EXAMPLE_UUID } },
  build: ({ widgetId }) => sql`delete from guestbook_messages where widget_id = ${widgetId}`,
});

const setHidden = statement<{ ownerId: string; widgetId: string; messageId: string; hidden: boolean }, { id: string }>({
  name: 'social_guestbook_set_hidden',
  area: AREA,
  variants: { 'one message': { ownerId: EXAMPLE_UUID, widgetId: EXAMPLE_UUID, messageId: EXAMPLE_UUID, hidden: true } },
  build: ({ ownerId, widgetId, messageId, hidden }) => sql`update guestbook_messages set hidden_by_owner = ${hidden}
    where id = ${messageId} and widget_id = ${widgetId} and user_id = ${ownerId}
    returning id`,
});

export const guestbookRepo = {
  /** Top-level messages of the widget, newest first: `size` of them, created before `before` when given. */
  threads: (db: Knex, widgetId: string, size: number, before?: number) => threads(db, { widgetId, size, before }),
  /** The rest of a run of equal createdAt: the top-level messages at `createdAt` with an id below `belowId`. */
  threadTies: (db: Knex, widgetId: string, createdAt: number, belowId: string) =>
    threadTies(db, { widgetId, createdAt, belowId }),
  /** Whether a top-level message of the widget was created before `before`. */
  async threadBefore(db: Knex, widgetId: string, before: number): Promise<boolean> {
    return (await threadBefore(db, { widgetId, before })).length > 0;
  },
  /** The replies to these messages, oldest first. */
  replies: (db: Knex, parentIds: readonly string[]) => replies(db, { parentIds }),
  async message(db: Knex, messageId: string): Promise<MessageRow | undefined> {
    const [row] = await message(db, { messageId });
    return row;
  },
  /** Whether `messageId` is a top-level message of the widget. */
  async isTopLevel(db: Knex, widgetId: string, messageId: string): Promise<boolean> {
    return (await topLevel(db, { widgetId, messageId })).length > 0;
  },
  async insert(db: Knex, row: NewMessage): Promise<void> {
    await insertMessage(db, { row });
  },
  /** Posts the message with its events in one statement, or writes nothing (see postMessage). */
  /** `ahead`: the digest of the author's card read ahead (authorCard) of a keyed post, which writes only if it still holds. */
  async post(
    db: Knex,
    row: NewMessage,
    events: readonly PendingEvent[],
    ahead: string | null = null,
  ): Promise<PostVerdict> {
    const [r] = await postMessage(db, { row, events, ahead });
    const { found, allow_anonymous, parent_ok, ahead_ok, notified, ...message } = r!;
    return {
      found,
      allow_anonymous,
      parent_ok,
      ahead_ok,
      notified,
      message: message.id ? (message as MessageRow) : null,
    };
  },
  authorCard: async (db: Knex, authorId: string) => (await authorCard(db, { authorId }))[0],
  async findAnywhere(db: Knex, messageId: string): Promise<FoundMessage | undefined> {
    const [row] = await findAnywhere(db, { messageId });
    return row;
  },
  /** Deletes the message (its replies go with it: on delete cascade). */
  async delete(db: Knex, messageId: string): Promise<void> {
    await deleteMessage(db, { messageId });
  },
  async deleteOfWidget(db: Knex, widgetId: string): Promise<void> {
    await deleteOfWidget(db, { widgetId });
  },
  /** Whether the owner's message was there (and is now hidden or shown). */
  async setHidden(db: Knex, ownerId: string, widgetId: string, messageId: string, hidden: boolean): Promise<boolean> {
    return (await setHidden(db, { ownerId, widgetId, messageId, hidden })).length > 0;
  },
};
