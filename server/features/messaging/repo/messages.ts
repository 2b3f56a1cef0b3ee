/**
 * The SQL of messages: the hot reads as one statement each (docs/data-access.md) — message pages
 * (older, newer, up to an anchor), one message and the pins — and the writes of sends, edits,
 * deletes, pins and read markers, with the member reads they check. A page walks
 * `messaging_messages_page` (channel_id, created_at, id) among live rows, so a page deep in a
 * channel costs what the first does. Committed as generated/sql/messaging.sql.
 */
import type { Knex } from 'knex';
import type { MediaRef } from '../../members/index.ts';
import { type Sql, sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';
import type { PendingEvent } from '../../../core/context.ts';
import { appendEvents, EXAMPLE_EVENT, keyedExample, notifiedColumn } from '../../../events/log.ts';
import { enqueueRows } from '../../../jobs/queue.ts';
import { ATTACHMENTS_JSON, LINK_PREVIEWS_JSON, MENTIONS_JSON } from './json.ts';
import type { NewPreview } from './linkPreviews.ts';

const AREA = 'messaging';

/** A message row as the pages read it: the message, its author's avatar, its reply parent and its mentions. */
export interface MessageReadRow {
  channel_found: string;
  pinned_ids: unknown;
  id: string | null;
  user_id: string;
  channel_id: string;
  author_member_id: string;
  key_id: string;
  content_enc: Uint8Array;
  created_at: number;
  edited_at: number | null;
  author_avatar: unknown;
  reply_id: string | null;
  reply_author_id: string | null;
  reply_key_id: string | null;
  reply_content_enc: Uint8Array | null;
  reply_deleted_at: number | null;
  mentions: unknown;
  attachments: unknown;
  link_previews: unknown;
  gif: unknown;
}

const MESSAGE_COLUMNS = sql`x.id, x.user_id, x.channel_id, x.author_member_id, x.key_id, x.content_enc, x.created_at, x.edited_at, x.reply_to_id, x.mention_member_ids, x.gif`;

/** The message `m`'s author avatar (`a`) and reply parent (`r`), probed per row. */
const AUTHOR_AND_REPLY = sql`left join lateral (select am.avatar from members am where am.id = m.author_member_id and am.user_id = m.user_id limit 1) a on true
   left join lateral (
     select pm.id, pm.author_member_id, pm.key_id, pm.content_enc, pm.deleted_at from messaging_messages pm
     where pm.id = m.reply_to_id and pm.user_id = m.user_id limit 1
   ) r on true`;

/**
 * The channel (live, in a live space, the account's), its pins, then `inner` (a lateral subquery
 * over `messaging_messages x` that yields the messages) with what each message shows (author avatar,
 * reply parent, mentions, attachments by `messaging_attachments_message`, ready and undismissed link
 * previews by `messaging_link_previews_message`), probed per row.
 * A channel with no matching message still yields one row (id null), so "empty" and "404" differ.
 */
function channelMessages(inner: Sql, order: Sql, channelId: string, userId: string): Sql {
  return sql`select c.id as channel_found, pins.ids as pinned_ids,
     m.id, m.user_id, m.channel_id, m.author_member_id, m.key_id, m.content_enc, m.created_at, m.edited_at, m.gif,
     a.avatar as author_avatar,
     r.id as reply_id, r.author_member_id as reply_author_id, r.key_id as reply_key_id, r.content_enc as reply_content_enc, r.deleted_at as reply_deleted_at,
     mm.mentions, att.attachments, lp.link_previews
   from messaging_channels c
   join messaging_spaces s on s.id = c.space_id and s.archived_at is null
   cross join lateral (
     select coalesce(json_agg(p.message_id order by p.pinned_at desc, p.message_id), '[]'::json) as ids
     from messaging_pins p where p.channel_id = c.id
   ) pins
   left join lateral (${inner}) m on true
   ${AUTHOR_AND_REPLY}
   ${MENTIONS_JSON}
   ${ATTACHMENTS_JSON}
   ${LINK_PREVIEWS_JSON}
   where c.id = ${channelId} and c.user_id = ${userId} and c.archived_at is null
   order by ${order}`;
}

const NEWEST_FIRST = sql`m.created_at desc, m.id desc`;

interface ChannelPage {
  channelId: string;
  userId: string;
  limit: number;
}
interface PageKey {
  createdAt: number;
  id: string;
}

const EXAMPLE_PAGE: ChannelPage = { channelId: EXAMPLE_UUID, userId: EXAMPLE_UUID, limit: 50 };
const EXAMPLE_KEY: PageKey = { createdAt: 0, id: EXAMPLE_UUID };

/** The live messages older than the key (or up to it, with `<=`; or the newest without one), newest first. */
function olderThan(key: PageKey | null, op: '<' | '<=', limit: number): Sql {
  const after =
    key === null
      ? sql.empty
      : sql` and (x.created_at, x.id) ${sql.constant(op, ['<', '<='])} (${key.createdAt}::bigint, ${key.id}::uuid)`;
  return sql`select ${MESSAGE_COLUMNS} from messaging_messages x
   where x.channel_id = c.id and x.deleted_at is null${after}
   order by x.created_at desc, x.id desc limit ${limit}`;
}

/** The newest messages. */
const pageFirst = statement<ChannelPage, MessageReadRow>({
  name: 'messaging_page_first',
  area: AREA,
  variants: { 'the newest': EXAMPLE_PAGE },
  build: ({ channelId, userId, limit }) =>
    channelMessages(olderThan(null, '<', limit), NEWEST_FIRST, channelId, userId),
});

/** Older than the key, newest first. */
const pageBefore = statement<ChannelPage & { key: PageKey }, MessageReadRow>({
  name: 'messaging_page_before',
  area: AREA,
  variants: { 'older than the key': { ...EXAMPLE_PAGE, key: EXAMPLE_KEY } },
  build: ({ channelId, userId, limit, key }) =>
    channelMessages(olderThan(key, '<', limit), NEWEST_FIRST, channelId, userId),
});

/** The key itself and older, newest first. */
const pageUpTo = statement<ChannelPage & { key: PageKey }, MessageReadRow>({
  name: 'messaging_page_up_to',
  area: AREA,
  variants: { 'the key and older': { ...EXAMPLE_PAGE, key: EXAMPLE_KEY } },
  build: ({ channelId, userId, limit, key }) =>
    channelMessages(olderThan(key, '<=', limit), NEWEST_FIRST, channelId, userId),
});

/** The oldest messages newer than the key, oldest first. */
const pageAfter = statement<ChannelPage & { key: PageKey }, MessageReadRow>({
  name: 'messaging_page_after',
  area: AREA,
  variants: { 'newer than the key': { ...EXAMPLE_PAGE, key: EXAMPLE_KEY } },
  build: ({ channelId, userId, limit, key }) =>
    channelMessages(
      sql`select ${MESSAGE_COLUMNS} from messaging_messages x
     where x.channel_id = c.id and x.deleted_at is null and (x.created_at, x.id) > (${key.createdAt}::bigint, ${key.id}::uuid)
     order by x.created_at, x.id limit ${limit}`,
      sql`m.created_at, m.id`,
      channelId,
      userId,
    ),
});

/** One live message of the channel. */
const oneMessage = statement<{ messageId: string; channelId: string; userId: string }, MessageReadRow>({
  name: 'messaging_message_one',
  area: AREA,
  variants: { 'a message': { messageId: EXAMPLE_UUID, channelId: EXAMPLE_UUID, userId: EXAMPLE_UUID } },
  build: ({ messageId, channelId, userId }) =>
    channelMessages(
      sql`select ${MESSAGE_COLUMNS} from messaging_messages x where x.id = ${messageId} and x.channel_id = c.id and x.deleted_at is null`,
      sql`m.id`,
      channelId,
      userId,
    ),
});

/** Pinned live messages, most recently pinned first. */
const pinnedMessages = statement<{ channelId: string; userId: string }, MessageReadRow>({
  name: 'messaging_pins_list',
  area: AREA,
  variants: { 'a channel': { channelId: EXAMPLE_UUID, userId: EXAMPLE_UUID } },
  build: ({ channelId, userId }) =>
    channelMessages(
      sql`select ${MESSAGE_COLUMNS}, pn.pinned_at from messaging_pins pn join messaging_messages x on x.id = pn.message_id
     where pn.channel_id = c.id and x.deleted_at is null order by pn.pinned_at desc, pn.message_id limit 50`,
      sql`m.pinned_at desc, m.id`,
      channelId,
      userId,
    ),
});

// ---- members ----

const liveMember = statement<{ userId: string; memberId: string }, { id: string }>({
  name: 'messaging_member_live',
  area: AREA,
  variants: { 'a member': { userId: EXAMPLE_UUID, memberId: EXAMPLE_UUID } },
  build: ({ userId, memberId }) => sql`select id from members
    where id = ${memberId} and user_id = ${userId} and deleted_at is null and archived_at is null
    limit 1`,
});

/** Of `ids`, the live, non-archived members of the account (of the side system, when there is one). */
const mentionable = statement<{ userId: string; ids: readonly string[]; sideSystemId: string | null }, { id: string }>({
  name: 'messaging_mentionable',
  area: AREA,
  variants: {
    'any member': { userId: EXAMPLE_UUID, ids: [], sideSystemId: null },
    "a side system's members": { userId: EXAMPLE_UUID, ids: [], sideSystemId: EXAMPLE_UUID },
  },
  build: ({ userId, ids, sideSystemId }) => sql`select id from members
    where user_id = ${userId} and id = any (${[...ids]}::uuid[]) and deleted_at is null and archived_at is null${
      sideSystemId ? sql` and side_system_id = ${sideSystemId}` : sql.empty
    }`,
});

export interface MemberOptionRow {
  id: string;
  name: string;
  display_name: string | null;
  avatar: MediaRef | null;
}

/** Live, non-archived members of the account by name (of one side system, matching a text, at most `limit`). */
const memberOptions = statement<
  { userId: string; sideSystemId: string | null; text: string | null; limit: number | null },
  MemberOptionRow
>({
  name: 'messaging_member_options',
  area: AREA,
  variants: {
    'any member': { userId: EXAMPLE_UUID, sideSystemId: null, text: null, limit: null },
    'matching a text': { userId: EXAMPLE_UUID, sideSystemId: null, text: 'x', limit: 10 },
    "a side system's members": { userId: EXAMPLE_UUID, sideSystemId: EXAMPLE_UUID, text: null, limit: 10 },
    "a side system's members matching a text": {
      userId: EXAMPLE_UUID,
      sideSystemId: EXAMPLE_UUID,
      text: 'x',
      limit: 10,
    },
  },
  build: ({ userId, sideSystemId, text, limit }) => sql`select id, name, display_name, avatar from members
    where user_id = ${userId} and deleted_at is null and archived_at is null${
      sideSystemId ? sql` and side_system_id = ${sideSystemId}` : sql.empty
    }${
      text
        ? sql` and (strpos(lower(name), ${text}) > 0 or strpos(lower(coalesce(display_name, '')), ${text}) > 0)`
        : sql.empty
    }
    order by lower(name), id
    limit ${limit}::int`,
});

// ---- sends ----

export interface StoredMessage {
  id: string;
  channel_id: string;
  deleted_at: number | null;
}

const byMutation = statement<{ userId: string; mutationId: string }, StoredMessage>({
  name: 'messaging_message_by_mutation',
  area: AREA,
  variants: { 'a mutation id': { userId: EXAMPLE_UUID, mutationId: 'x' } },
  build: ({ userId, mutationId }) => sql`select id, channel_id, deleted_at from messaging_messages
    where user_id = ${userId} and client_mutation_id = ${mutationId}
    limit 1`,
});

/** A live message of the account in the channel. */
const liveInChannel = statement<{ userId: string; channelId: string; messageId: string }, { id: string; seq: number }>({
  name: 'messaging_message_in_channel',
  area: AREA,
  variants: { 'a message': { userId: EXAMPLE_UUID, channelId: EXAMPLE_UUID, messageId: EXAMPLE_UUID } },
  build: ({ userId, channelId, messageId }) => sql`select id, seq from messaging_messages
    where id = ${messageId} and user_id = ${userId} and channel_id = ${channelId} and deleted_at is null
    limit 1`,
});

export interface NewMessage {
  id: string;
  user_id: string;
  channel_id: string;
  seq: number;
  author_member_id: string;
  key_id: string;
  content_enc: Buffer;
  reply_to_id: string | null;
  mention_member_ids: string[];
  /** JSON text. */
  gif: string | null;
  client_mutation_id: string | null;
  created_at: number;
}

/** The message, unless the account already used its client mutation id (then no row). */
const insertMessage = statement<{ row: NewMessage }, { id: string }>({
  name: 'messaging_message_insert',
  area: AREA,
  variants: {
    'a message': {
      row: {
        id: EXAMPLE_UUID,
        user_id: EXAMPLE_UUID,
        channel_id: EXAMPLE_UUID,
        seq: 1,
        author_member_id: EXAMPLE_UUID,
        key_id: 'k',
        content_enc: Buffer.alloc(0),
        reply_to_id: null,
        mention_member_ids: [],
        gif: null,
        client_mutation_id: null,
        created_at: 0,
      },
    },
  },
  build: ({ row: r }) => sql`insert into messaging_messages
    (id, user_id, channel_id, seq, author_member_id, key_id, content_enc, reply_to_id, mention_member_ids, gif,
     client_mutation_id, created_at)
    values (${r.id}, ${r.user_id}, ${r.channel_id}, ${r.seq}, ${r.author_member_id}, ${r.key_id}, ${r.content_enc},
      ${r.reply_to_id}, ${r.mention_member_ids}::uuid[], ${r.gif}::jsonb, ${r.client_mutation_id}, ${r.created_at})
    on conflict (user_id, client_mutation_id) where client_mutation_id is not null do nothing
    returning id`,
});

const channelSent = statement<{ channelId: string; seq: number }, never>({
  name: 'messaging_channel_sent',
  area: AREA,
  variants: { 'a channel': { channelId: EXAMPLE_UUID, seq: 1 } },
  build: ({ channelId, seq }) =>
    sql`update messaging_channels set last_seq = ${seq}, unread_count = unread_count + 1 where id = ${channelId}`,
});

/** A message to send in one statement: the channel's sequence number and the mentions the statement decides. */
export type SendMessage = Omit<NewMessage, 'seq' | 'mention_member_ids'> & {
  /** The `<@id>` ids of the text (distinct, lower case, in order): the statement keeps the mentionable ones. */
  mention_candidates: readonly string[];
};

/** What the send statement decided, and the new message as a read shows it (its columns null unless `sent`). */
export interface SendOutcome extends MessageReadRow {
  /** The channel is live, in a live space, the account's (as the statement started). */
  channel_live: boolean;
  author_live: boolean;
  reply_ok: boolean;
  /** The client mutation id was used already (as the statement started): that message; nothing written. */
  existing_id: string | null;
  existing_channel_id: string | null;
  existing_deleted_at: number | null;
  /** With `ahead`: the answer's inputs were still those read ahead (else nothing was written). */
  ahead_ok?: boolean;
  /** Every check passed and the channel was still live once locked. */
  locked: boolean;
  /** The message was written (false after `locked` only when a concurrent send took the client mutation id). */
  sent: boolean;
  seq: number | null;
  notified: unknown;
}

/**
 * Sends a text message (no attachments) in one statement, run on its own (autocommit): the checks
 * (the live channel, a live non-archived author, a live reply parent in the channel, the client
 * mutation id unused), each a read as the statement starts, as the transactional send reads them;
 * then only when all pass, the channel row locked (`for update`: after waiting for a concurrent
 * send, PostgreSQL returns its newest committed version, re-checked to be live, so `last_seq + 1`
 * is the next number, never one already given); the message at that number with the mentionable
 * ids among `mention_candidates` (live, non-archived members, of the space's side system when it
 * has one); and only when that row was inserted (a concurrent send with the same client mutation
 * id meets it on the unique index, and then nothing more is written) the channel's `last_seq` and
 * unread count, the pending link previews with their queued fetches, and the events (webhook
 * deliveries with them). The final row is the message as readOne reads it: a new message has no
 * attachments and no ready link preview yet.
 */
/** A send's input as its statements take it. */
interface SendInput {
  row: SendMessage;
  previews: readonly NewPreview[];
  previewQueue: string;
  previewAttempts: number;
  events: readonly PendingEvent[];
  /** The digest of the answer's inputs read ahead (sendAhead): the statement writes only if they are still so. */
  ahead: string | null;
}

/** The send's channel: live, in a live space, the account's (the CTE `channel`). */
const sendChannel = (r: SendMessage): Sql => sql`channel as (
      select c.id, s.side_system_id from messaging_channels c
      join messaging_spaces s on s.id = c.space_id
      where c.id = ${r.channel_id} and c.user_id = ${r.user_id} and c.archived_at is null and s.archived_at is null
      limit 1
    )`;

/** The send's checks, as the CTEs `existing` (the client mutation id used already) and `verdict`. */
const sendVerdict = (r: SendMessage): Sql => sql`existing as (
      select id, channel_id, deleted_at from messaging_messages
      where user_id = ${r.user_id} and client_mutation_id = ${r.client_mutation_id}::text
      limit 1
    ),
    verdict as (
      select exists (select 1 from channel) as channel_live,
        exists (
          select 1 from members
          where id = ${r.author_member_id} and user_id = ${r.user_id} and deleted_at is null and archived_at is null
        ) as author_live,
        (${r.reply_to_id}::uuid is null or exists (
          select 1 from messaging_messages
          where id = ${r.reply_to_id}::uuid and user_id = ${r.user_id} and channel_id = ${r.channel_id} and deleted_at is null
        )) as reply_ok,
        exists (select 1 from existing) as duplicate
    )`;

/** The mentionable ids among the candidates (the CTE `mentioned`). */
const sendMentioned = (r: SendMessage): Sql => sql`mentioned as (
      select array(
        select u.id from unnest(${[...r.mention_candidates]}::uuid[]) with ordinality as u(id, n)
        where exists (
          select 1 from members mb, channel ch
          where mb.id = u.id and mb.user_id = ${r.user_id} and mb.deleted_at is null and mb.archived_at is null
            and (ch.side_system_id is null or mb.side_system_id = ch.side_system_id)
        )
        order by u.n
      ) as ids
    )`;

/**
 * What a new message's answer shows beyond its input (the CTE `ahead`): the author's avatar, the
 * reply parent and the mentions, read as the final select of the send reads them, and their
 * digest. The same text in sendAhead and in the send that checks it, so an equal digest means the
 * send would answer what was built from the read ahead.
 */
const sendAnswerInputs = (r: SendMessage): Sql => sql`ahead as (
      select md5(row(a.avatar, r.id, r.author_member_id, r.key_id, r.content_enc, r.deleted_at, mm.mentions::text)::text) as digest,
        a.avatar as author_avatar,
        r.id as reply_id, r.author_member_id as reply_author_id, r.key_id as reply_key_id, r.content_enc as reply_content_enc, r.deleted_at as reply_deleted_at,
        mm.mentions
      from (
        select ${r.user_id}::uuid as user_id, ${r.author_member_id}::uuid as author_member_id, ${r.reply_to_id}::uuid as reply_to_id,
          (select ids from mentioned) as mention_member_ids
      ) m
      ${AUTHOR_AND_REPLY}
      ${MENTIONS_JSON}
    )`;

/** What sendAhead reads: the send's checks, and the new message as the send would answer it. */
export interface SendAheadRow
  extends Pick<
    MessageReadRow,
    | 'author_avatar'
    | 'reply_id'
    | 'reply_author_id'
    | 'reply_key_id'
    | 'reply_content_enc'
    | 'reply_deleted_at'
    | 'mentions'
    | 'gif'
  > {
  channel_live: boolean;
  author_live: boolean;
  reply_ok: boolean;
  duplicate: boolean;
  /** The stored forms (canonical lower case) of the channel's and the author's ids. */
  channel_id: string | null;
  author_member_id: string;
  digest: string;
}

/**
 * Reads ahead of a keyed send (docs/api.md "Safe retries") what its answer shows beyond the
 * request: the checks as the send makes them, and the author's avatar, reply parent, mentions and
 * GIF (as jsonb stores it) as the send's final select reads them, with their digest, which the send
 * then checks (`ahead`). Nothing is locked or written.
 */
const sendAhead = statement<{ row: SendMessage }, SendAheadRow>({
  name: 'messaging_message_send_ahead',
  area: AREA,
  variants: {
    'a message': {
      row: {
        id: EXAMPLE_UUID,
        user_id: EXAMPLE_UUID,
        channel_id: EXAMPLE_UUID,
        author_member_id: EXAMPLE_UUID,
        key_id: 'k',
        content_enc: Buffer.alloc(0),
        reply_to_id: null,
        mention_candidates: [],
        gif: null,
        client_mutation_id: null,
        created_at: 0,
      },
    },
  },
  build: ({ row: r }) => sql`with ${sendChannel(r)},
    ${sendVerdict(r)},
    ${sendMentioned(r)},
    ${sendAnswerInputs(r)}
    select v.channel_live, v.author_live, v.reply_ok, v.duplicate, (select id from channel) as channel_id,
      ${r.author_member_id}::uuid as author_member_id, ${r.gif}::jsonb as gif,
      a.digest, a.author_avatar, a.reply_id, a.reply_author_id, a.reply_key_id, a.reply_content_enc, a.reply_deleted_at, a.mentions
    from verdict v, ahead a`,
});

/** The message and its previews of the send's example variants (generated/sql/). */
const EXAMPLE_SEND = {
  row: {
    id: EXAMPLE_UUID,
    user_id: EXAMPLE_UUID,
    channel_id: EXAMPLE_UUID,
    author_member_id: EXAMPLE_UUID,
    key_id: 'k',
    content_enc: Buffer.alloc(0),
    reply_to_id: null,
    mention_candidates: [],
    gif: null,
    client_mutation_id: null,
    created_at: 0,
  },
  previews: [],
  previewQueue: 'q',
  previewAttempts: 1,
} satisfies Partial<SendInput>;

/**
 * Sends a text message (no attachments) in one statement, run on its own (autocommit): the checks
 * (the live channel, a live non-archived author, a live reply parent in the channel, the client
 * mutation id unused), each a read as the statement starts, as the transactional send reads them;
 * then only when all pass, the channel row locked (`for update`: after waiting for a concurrent
 * send, PostgreSQL returns its newest committed version, re-checked to be live, so `last_seq + 1`
 * is the next number, never one already given); the message at that number with the mentionable
 * ids among `mention_candidates` (live, non-archived members, of the space's side system when it
 * has one); and only when that row was inserted (a concurrent send with the same client mutation
 * id meets it on the unique index, and then nothing more is written) the channel's `last_seq` and
 * unread count, the pending link previews with their queued fetches, and the events (webhook
 * deliveries with them). The final row is the message as readOne reads it: a new message has no
 * attachments and no ready link preview yet.
 *
 * With `ahead` (a keyed send whose answer was built from sendAhead), the checks also require the
 * answer's inputs to be what sendAhead read (`ahead_ok`, in this statement's snapshot, where the
 * final select reads them): otherwise nothing is written.
 */
const sendMessage = statement<SendInput, SendOutcome>({
  name: 'messaging_message_send',
  area: AREA,
  variants: {
    'a message': {
      ...EXAMPLE_SEND,
      events: [EXAMPLE_EVENT],
      ahead: null,
    },
    'a keyed message whose answer was read ahead': {
      ...EXAMPLE_SEND,
      events: keyedExample([EXAMPLE_EVENT]),
      ahead: 'x',
    },
  },
  build: ({ row: r, previews, previewQueue, previewAttempts, events, ahead }) => {
    const previewJson = JSON.stringify(
      previews.map((p) => ({ id: p.id, pos: p.position, key_id: p.key_id, data: p.data_enc.toString('base64') })),
    );
    return sql`with ${sendChannel(r)},
    ${sendVerdict(r)},${
      ahead === null
        ? sql.empty
        : sql`
    ${sendMentioned(r)},
    ${sendAnswerInputs(r)},`
    }
    channel_locked as (
      select c.id, c.last_seq from messaging_channels c
      join messaging_spaces s on s.id = c.space_id
      where c.id = ${r.channel_id} and c.user_id = ${r.user_id} and c.archived_at is null and s.archived_at is null
        and (select channel_live and author_live and reply_ok and not duplicate from verdict)${
          ahead === null
            ? sql.empty
            : sql`
        and (select digest from ahead) = ${ahead}::text`
        }
      limit 1
      for update of c
    ),${
      ahead === null
        ? sql`
    ${sendMentioned(r)},`
        : sql.empty
    }
    inserted as (
      insert into messaging_messages
        (id, user_id, channel_id, seq, author_member_id, key_id, content_enc, reply_to_id, mention_member_ids, gif,
         client_mutation_id, created_at)
      select ${r.id}, ${r.user_id}, l.id, l.last_seq + 1, ${r.author_member_id}, ${r.key_id}, ${r.content_enc},
        ${r.reply_to_id}::uuid, (select ids from mentioned), ${r.gif}::jsonb, ${r.client_mutation_id}::text, ${r.created_at}
      from channel_locked l
      on conflict (user_id, client_mutation_id) where client_mutation_id is not null do nothing
      returning id, user_id, channel_id, seq, author_member_id, key_id, content_enc, created_at, edited_at, reply_to_id,
        mention_member_ids, gif
    ),
    channel_sent as (
      update messaging_channels c set last_seq = i.seq, unread_count = c.unread_count + 1
      from inserted i
      where c.id = i.channel_id
    ),
    previews as (
      insert into messaging_link_previews (id, user_id, message_id, position, key_id, data_enc, status, created_at, updated_at)
      select p.id, i.user_id, i.id, p.pos, p.key_id, decode(p.data, 'base64'), 'pending', ${r.created_at}, ${r.created_at}
      from inserted i, jsonb_to_recordset(${previewJson}::jsonb) as p(id uuid, pos int, key_id text, data text)
      returning id
    ),
    preview_jobs as (
      ${enqueueRows(
        previewQueue,
        sql`select jsonb_build_object('previewId', id) as payload, id::text as key from previews`,
        sql`${r.created_at}::bigint`,
        previewAttempts,
      )}
    ),
    ${appendEvents(events, sql`exists (select 1 from inserted)`)}
    select v.channel_live, v.author_live, v.reply_ok,${
      ahead === null ? sql.empty : sql` (select digest from ahead) = ${ahead}::text as ahead_ok,`
    }
      e.id as existing_id, e.channel_id as existing_channel_id, e.deleted_at as existing_deleted_at,
      exists (select 1 from channel_locked) as locked, m.id is not null as sent, m.seq,
      m.channel_id as channel_found, '[]'::json as pinned_ids,
      m.id, m.user_id, m.channel_id, m.author_member_id, m.key_id, m.content_enc, m.created_at, m.edited_at, m.gif,
      a.avatar as author_avatar,
      r.id as reply_id, r.author_member_id as reply_author_id, r.key_id as reply_key_id, r.content_enc as reply_content_enc, r.deleted_at as reply_deleted_at,
      mm.mentions, '[]'::json as attachments, '[]'::json as link_previews,
      ${notifiedColumn}
    from verdict v
    left join existing e on true
    left join inserted m on true
    ${AUTHOR_AND_REPLY}
    ${MENTIONS_JSON}`;
  },
});

// ---- edits and deletes ----

const liveOfAccount = statement<{ userId: string; messageId: string }, { id: string; channel_id: string; seq: number }>(
  {
    name: 'messaging_message_live',
    area: AREA,
    variants: { 'a message': { userId: EXAMPLE_UUID, messageId: EXAMPLE_UUID } },
    build: ({ userId, messageId }) => sql`select id, channel_id, seq from messaging_messages
    where id = ${messageId} and user_id = ${userId} and deleted_at is null
    limit 1`,
  },
);

const lockLive = statement<{ messageId: string }, { id: string; seq: number }>({
  name: 'messaging_message_lock',
  area: AREA,
  variants: { 'a message': { messageId: EXAMPLE_UUID } },
  build: ({ messageId }) =>
    sql`select id, seq from messaging_messages where id = ${messageId} and deleted_at is null limit 1 for update`,
});

const updateContent = statement<
  { id: string; keyId: string; contentEnc: Buffer; mentions: readonly string[]; now: number },
  never
>({
  name: 'messaging_message_edit',
  area: AREA,
  variants: { 'a message': { id: EXAMPLE_UUID, keyId: 'k', contentEnc: Buffer.alloc(0), mentions: [], now: 0 } },
  build: ({ id, keyId, contentEnc, mentions, now }) => sql`update messaging_messages
    set key_id = ${keyId}, content_enc = ${contentEnc}, mention_member_ids = ${[...mentions]}::uuid[], edited_at = ${now}
    where id = ${id}`,
});

const markDeleted = statement<{ messageId: string; now: number }, never>({
  name: 'messaging_message_delete',
  area: AREA,
  variants: { 'a message': { messageId: EXAMPLE_UUID, now: 0 } },
  build: ({ messageId, now }) => sql`update messaging_messages set deleted_at = ${now} where id = ${messageId}`,
});

const unreadDown = statement<{ channelId: string }, never>({
  name: 'messaging_channel_unread_down',
  area: AREA,
  variants: { 'a channel': { channelId: EXAMPLE_UUID } },
  build: ({ channelId }) =>
    sql`update messaging_channels set unread_count = unread_count - 1 where id = ${channelId} and unread_count > 0`,
});

// ---- pins ----

const pinIds = statement<{ channelId: string }, { message_id: string }>({
  name: 'messaging_pin_ids',
  area: AREA,
  variants: { 'a channel': { channelId: EXAMPLE_UUID } },
  build: ({ channelId }) => sql`select message_id from messaging_pins where channel_id = ${channelId}`,
});

const insertPin = statement<{ userId: string; channelId: string; messageId: string; now: number }, never>({
  name: 'messaging_pin_insert',
  area: AREA,
  variants: { 'a pin': { userId: EXAMPLE_UUID, channelId: EXAMPLE_UUID, messageId: EXAMPLE_UUID, now: 0 } },
  build: ({
    userId,
    channelId,
    messageId,
    now,
  }) => sql`insert into messaging_pins (user_id, channel_id, message_id, pinned_at)
    values (${userId}, ${channelId}, ${messageId}, ${now})`,
});

const deletePin = statement<{ channelId: string; messageId: string }, never>({
  name: 'messaging_pin_delete',
  area: AREA,
  variants: { 'a pin': { channelId: EXAMPLE_UUID, messageId: EXAMPLE_UUID } },
  build: ({ channelId, messageId }) =>
    sql`delete from messaging_pins where channel_id = ${channelId} and message_id = ${messageId}`,
});

// ---- read state ----

const setRead = statement<{ channelId: string; readSeq: number; unread: number }, never>({
  name: 'messaging_channel_read',
  area: AREA,
  variants: { 'a channel': { channelId: EXAMPLE_UUID, readSeq: 0, unread: 0 } },
  build: ({ channelId, readSeq, unread }) =>
    sql`update messaging_channels set read_seq = ${readSeq}, unread_count = ${unread} where id = ${channelId}`,
});

/** Counted on messaging_messages_seq: the live messages after `seq`, no more. */
const liveAfter = statement<{ channelId: string; seq: number }, { n: number }>({
  name: 'messaging_messages_after_seq',
  area: AREA,
  variants: { 'a channel': { channelId: EXAMPLE_UUID, seq: 0 } },
  build: ({ channelId, seq }) =>
    sql`select count(*) as n from messaging_messages where channel_id = ${channelId} and deleted_at is null and seq > ${seq}`,
});

const first = <Row>(rows: Row[]): Row | null => rows[0] ?? null;

export const messagesRepo = {
  pageFirst: (db: Knex, channelId: string, userId: string, limit: number) =>
    pageFirst(db, { channelId, userId, limit }),
  pageBefore: (db: Knex, channelId: string, userId: string, key: PageKey, limit: number) =>
    pageBefore(db, { channelId, userId, key, limit }),
  pageUpTo: (db: Knex, channelId: string, userId: string, key: PageKey, limit: number) =>
    pageUpTo(db, { channelId, userId, key, limit }),
  pageAfter: (db: Knex, channelId: string, userId: string, key: PageKey, limit: number) =>
    pageAfter(db, { channelId, userId, key, limit }),
  oneMessage: (db: Knex, messageId: string, channelId: string, userId: string) =>
    oneMessage(db, { messageId, channelId, userId }),
  pinned: (db: Knex, channelId: string, userId: string) => pinnedMessages(db, { channelId, userId }),

  async memberIsLive(db: Knex, userId: string, memberId: string): Promise<boolean> {
    return (await liveMember(db, { userId, memberId })).length > 0;
  },
  mentionable: async (db: Knex, userId: string, ids: readonly string[], sideSystemId: string | null) =>
    (await mentionable(db, { userId, ids, sideSystemId })).map((r) => r.id),
  memberOptions: (
    db: Knex,
    userId: string,
    options: { sideSystemId: string | null; text: string | null; limit: number | null },
  ) => memberOptions(db, { userId, ...options }),

  findByMutation: async (db: Knex, userId: string, mutationId: string) =>
    first(await byMutation(db, { userId, mutationId })),
  findLiveInChannel: async (db: Knex, userId: string, channelId: string, messageId: string) =>
    first(await liveInChannel(db, { userId, channelId, messageId })),
  /** The new message's id, or null when the account already used its client mutation id. */
  insert: async (db: Knex, row: NewMessage) => first(await insertMessage(db, { row }))?.id ?? null,
  channelSent: async (db: Knex, channelId: string, seq: number) => void (await channelSent(db, { channelId, seq })),
  /** Sends a text message with its previews, their jobs and its events in one statement, or writes nothing (see sendMessage). */
  send: async (db: Knex, input: SendInput) => (await sendMessage(db, input))[0]!,
  /** Reads ahead of a keyed send what its answer shows (see sendAhead). */
  sendAhead: async (db: Knex, row: SendMessage) => (await sendAhead(db, { row }))[0]!,

  findLive: async (db: Knex, userId: string, messageId: string) =>
    first(await liveOfAccount(db, { userId, messageId })),
  lockLive: async (db: Knex, messageId: string) => first(await lockLive(db, { messageId })),
  updateContent: async (
    db: Knex,
    id: string,
    sealed: { keyId: string; data: Buffer },
    mentions: readonly string[],
    now: number,
  ) => void (await updateContent(db, { id, keyId: sealed.keyId, contentEnc: sealed.data, mentions, now })),
  markDeleted: async (db: Knex, messageId: string, now: number) => void (await markDeleted(db, { messageId, now })),
  unreadDown: async (db: Knex, channelId: string) => void (await unreadDown(db, { channelId })),

  pinIds: async (db: Knex, channelId: string) => (await pinIds(db, { channelId })).map((r) => r.message_id),
  insertPin: async (db: Knex, userId: string, channelId: string, messageId: string, now: number) =>
    void (await insertPin(db, { userId, channelId, messageId, now })),
  deletePin: async (db: Knex, channelId: string, messageId: string) =>
    void (await deletePin(db, { channelId, messageId })),

  setRead: async (db: Knex, channelId: string, readSeq: number, unread: number) =>
    void (await setRead(db, { channelId, readSeq, unread })),
  liveAfter: async (db: Knex, channelId: string, seq: number) =>
    Number((await liveAfter(db, { channelId, seq }))[0]!.n),
};
