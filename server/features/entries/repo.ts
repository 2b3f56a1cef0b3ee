/** The SQL of notes and their member links (generated/sql/entries.sql). */
import type { Knex } from 'knex';
import { activeScopeRowsSql, inActiveScopeSql, writeScopeSql } from '../../access/systemScope.ts';
import type { PendingEvent } from '../../core/context.ts';
import { type Sql, sql } from '../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../db/statements.ts';
import { appendEvents, EXAMPLE_EVENT, keyedExample, notifiedColumn } from '../../events/log.ts';
import type { MemberRow } from '../members/index.ts';

export interface EntryRow {
  id: string;
  user_id: string;
  side_system_id: string;
  sub_system_id: string | null;
  title: string | null;
  content: string;
  member_id: string | null;
  member_ids: string[] | null;
  created_at: number;
  updated_at: number;
  deleted_at: number | null;
}

/** A note of a list page with the summary columns of its linked members, in link order. */
export interface EntryListRow extends Pick<EntryRow, 'id' | 'title' | 'content' | 'created_at' | 'updated_at'> {
  members: Array<Pick<MemberRow, 'id' | 'name' | 'display_name' | 'archived_at' | 'avatar'>>;
}

type ListStatementRow = Pick<EntryRow, 'id' | 'title' | 'content' | 'created_at' | 'updated_at'> & {
  summary_id: string | null;
} & { [K in 'name' | 'display_name' | 'archived_at' | 'avatar']: MemberRow[K] | null };

/**
 * Notes with their linked members, in one statement: `notes` (a subquery over `active_system_context
 * c`, the account's context row) picks the notes, then each comes as one row per link (member
 * summary columns, in link order), or one with nulls when it has no links. The links are a lateral
 * subquery with its own ORDER BY, which PostgreSQL never merges into the outer join, and each
 * member a lateral `limit 1` subquery, so a note's links and their members stay primary-key probes
 * whatever plan is cached. Linked members are shown even when in the trash (as before: the list
 * shows what the note links).
 */
function listWith(notes: Sql, userId: string): Sql {
  return sql`select e.id, e.title, e.content, e.created_at, e.updated_at, l.summary_id, l.name, l.display_name, l.archived_at, l.avatar
from active_system_context c
cross join lateral (${notes}) e
left join lateral (
  select em.position, m.*
  from entry_members em
  cross join lateral (select m.id as summary_id, m.name, m.display_name, m.archived_at, m.avatar
                      from members m where m.id = em.member_id and m.user_id = c.user_id limit 1) m
  where em.entry_id = e.id and em.user_id = c.user_id
  order by em.position) l on true
where c.user_id = ${userId}
order by e.updated_at desc, e.id, l.position`;
}
const NOTE_COLUMNS = sql.join(
  ['x.id', 'x.user_id', 'x.title', 'x.content', 'x.created_at', 'x.updated_at'].map((c) => sql.id(c)),
  ', ',
);
const AREA = 'entries';

/** The newest notes of the active read scope: a walk of the scope's ordered index up to the limit. */
const listAll = statement<{ userId: string; limit: number }, ListStatementRow>({
  name: 'entries_list',
  area: AREA,
  variants: { 'the active read scope': { userId: EXAMPLE_UUID, limit: 50 } },
  build: ({ userId, limit }) =>
    listWith(activeScopeRowsSql('entries', NOTE_COLUMNS, sql`x.updated_at desc, x.id`, limit), userId),
});

/**
 * The newest notes of one member in the active read scope, driven by the member's links (the
 * entry_members_member index; the plan's note cap per member bounds them), each note a primary-key
 * probe (a lateral subquery behind `offset 0`, so no plan hashes the account's notes instead),
 * then sorted.
 */
const listOfMember = statement<{ userId: string; memberId: string; limit: number }, ListStatementRow>({
  name: 'entries_list_member',
  area: AREA,
  variants: {
    "one member's notes in the active read scope": { userId: EXAMPLE_UUID, memberId: EXAMPLE_UUID, limit: 50 },
  },
  build: ({ userId, memberId, limit }) =>
    listWith(
      sql`select x.* from entry_members f
   cross join lateral (select ${NOTE_COLUMNS}, x.side_system_id, x.sub_system_id from entries x
                       where x.id = f.entry_id and x.user_id = f.user_id and x.deleted_at is null offset 0) x
   where f.user_id = c.user_id and f.member_id = ${memberId} and ${inActiveScopeSql}
   order by x.updated_at desc, x.id limit ${limit}`,
      userId,
    ),
});

const EXAMPLE_ENTRY: EntryRow = {
  id: EXAMPLE_UUID,
  user_id: EXAMPLE_UUID,
  side_system_id: EXAMPLE_UUID,
  sub_system_id: null,
  title: null,
  content: 'x',
  member_id: null,
  member_ids: null,
  created_at: 0,
  updated_at: 0,
  deleted_at: null,
};

const jsonIds = (ids: string[] | null | undefined) => (ids ? JSON.stringify(ids) : null);

const findEntry = statement<{ userId: string; id: string; lock: boolean }, EntryRow>({
  name: 'entries_find',
  area: AREA,
  variants: {
    read: { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, lock: false },
    'locked for update': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, lock: true },
  },
  build: ({ userId, id, lock }) =>
    sql`select * from entries where id = ${id} and user_id = ${userId} limit 1${lock ? sql` for update` : sql.empty}`,
});

/** Notes an import writes as they were, many at once (one JSON array), each with at most one linked member. */
const insertImported = statement<{ userId: string; rows: ImportedEntryRow[] }, never>({
  name: 'entries_insert_imported',
  area: AREA,
  variants: { 'a batch': { userId: EXAMPLE_UUID, rows: [] } },
  build: ({ userId, rows }) => sql`insert into entries
      (id, user_id, side_system_id, sub_system_id, title, content, member_id, member_ids, created_at, updated_at, deleted_at)
    select r.id, ${userId}, r.side_system_id, r.sub_system_id, r.title, r.content, r.member_id, null, r.created_at, r.created_at, null
    from jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)
      as r (id uuid, side_system_id uuid, sub_system_id uuid, title text, content text, member_id uuid, created_at bigint)`,
});

const insertImportedLinks = statement<{ userId: string; rows: ImportedEntryRow[] }, never>({
  name: 'entries_links_insert_imported',
  area: AREA,
  variants: { 'a batch': { userId: EXAMPLE_UUID, rows: [] } },
  build: ({ userId, rows }) => sql`insert into entry_members (entry_id, member_id, user_id, position)
    select r.id, r.member_id, ${userId}, 0
    from jsonb_to_recordset(${JSON.stringify(rows.filter((r) => r.member_id !== null))}::jsonb) as r (id uuid, member_id uuid)`,
});

/** An imported note keeps the time it was written in the source. */
const setTimes = statement<{ userId: string; id: string; at: number }, never>({
  name: 'entries_set_imported_times',
  area: AREA,
  variants: { one: { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, at: 0 } },
  build: ({ userId, id, at }) =>
    sql`update entries set created_at = ${at}, updated_at = ${at} where id = ${id} and user_id = ${userId}`,
});

export interface ImportedEntryRow {
  id: string;
  side_system_id: string;
  sub_system_id: string | null;
  title: string | null;
  content: string;
  member_id: string | null;
  created_at: number;
}

/** What an update may change (updated_at always). */
export type EntryChanges = Partial<Pick<EntryRow, 'title' | 'content' | 'member_id' | 'member_ids' | 'deleted_at'>> & {
  updated_at: number;
};

/** One text whatever the changed columns: each column is kept or set by a bound flag. */
const updateEntry = statement<{ userId: string; id: string; changes: EntryChanges }, EntryRow>({
  name: 'entries_update',
  area: AREA,
  variants: { 'any set of changed columns': { userId: EXAMPLE_UUID, id: EXAMPLE_UUID, changes: { updated_at: 0 } } },
  build: ({ userId, id, changes }) => {
    const has = (column: keyof EntryChanges) => sql`${changes[column] !== undefined}::boolean`;
    return sql`update entries set
        title = case when ${has('title')} then ${changes.title ?? null}::text else title end,
        content = case when ${has('content')} then ${changes.content ?? null}::text else content end,
        member_id = case when ${has('member_id')} then ${changes.member_id ?? null}::uuid else member_id end,
        member_ids = case when ${has('member_ids')} then ${jsonIds(changes.member_ids)}::jsonb else member_ids end,
        deleted_at = case when ${has('deleted_at')} then ${changes.deleted_at ?? null}::bigint else deleted_at end,
        updated_at = ${changes.updated_at}
      where id = ${id} and user_id = ${userId}
      returning *`;
  },
});

const deleteLinks = statement<{ userId: string; entryId: string }, never>({
  name: 'entries_links_delete',
  area: AREA,
  variants: { 'a note': { userId: EXAMPLE_UUID, entryId: EXAMPLE_UUID } },
  build: ({ userId, entryId }) => sql`delete from entry_members where entry_id = ${entryId} and user_id = ${userId}`,
});

/** The link rows in list order: position 0, 1 … as the members come. */
const insertLinks = statement<{ userId: string; entryId: string; memberIds: readonly string[] }, never>({
  name: 'entries_links_insert',
  area: AREA,
  variants: { 'a note': { userId: EXAMPLE_UUID, entryId: EXAMPLE_UUID, memberIds: [EXAMPLE_UUID] } },
  build: ({ userId, entryId, memberIds }) => sql`insert into entry_members (entry_id, member_id, user_id, position)
    select ${entryId}::uuid, l.member_id, ${userId}::uuid, l.n - 1
    from unnest(${[...memberIds]}::uuid[]) with ordinality as l(member_id, n)
    order by l.n`,
});

const linksOf = statement<{ userId: string; entryIds: readonly string[] }, { entry_id: string; member_id: string }>({
  name: 'entries_links',
  area: AREA,
  variants: { 'some notes': { userId: EXAMPLE_UUID, entryIds: [EXAMPLE_UUID] } },
  build: ({ userId, entryIds }) => sql`select entry_id, member_id from entry_members
    where user_id = ${userId} and entry_id = any (${[...entryIds]}::uuid[])
    order by entry_id, position`,
});

/**
 * The account's plan, and the live notes linked to each of `memberIds` (leaving out one note, or
 * none when `excludeEntryId` is null): one row per member with links, or one with nulls.
 */
const capState = statement<
  { userId: string; memberIds: readonly string[]; excludeEntryId: string | null },
  { plan: string; member_id: string | null; n: number | null }
>({
  name: 'entries_cap_state',
  area: AREA,
  variants: {
    'some members, one note left out or none': { userId: EXAMPLE_UUID, memberIds: [], excludeEntryId: null },
  },
  build: ({ userId, memberIds, excludeEntryId }) => sql`select a.plan, c.member_id, c.n
    from accounts a
    left join (
      select em.member_id, count(*) as n
      from entry_members em join entries e on e.id = em.entry_id
      where em.user_id = ${userId} and em.member_id = any (${[...memberIds]}::uuid[]) and e.deleted_at is null
        and e.id is distinct from ${excludeEntryId}::uuid
      group by em.member_id
    ) c on true
    where a.id = ${userId}`,
});

/** The account's member rows among `memberIds`, locked in id order (so concurrent writers cannot deadlock). */
const lockMembers = statement<
  { userId: string; memberIds: readonly string[] },
  { id: string; deleted_at: number | null }
>({
  name: 'entries_lock_members',
  area: AREA,
  variants: { 'some members': { userId: EXAMPLE_UUID, memberIds: [EXAMPLE_UUID] } },
  build: ({ userId, memberIds }) => sql`select id, deleted_at from members
    where user_id = ${userId} and id = any (${[...memberIds]}::uuid[])
    order by id
    for update`,
});

/** A note to create: where it goes (the side and sub system) the statement decides. */
export type NewEntry = Omit<EntryRow, 'side_system_id' | 'sub_system_id' | 'deleted_at'>;

/** What the create statement decided: `ok` when it wrote the note; otherwise why not. */
export interface CreateVerdict {
  ok: boolean;
  /** The account's active context names a live side (and sub) system. */
  scoped: boolean;
  plan: string | null;
  /** The linked ids that are live members of the account. */
  live: string[];
  /** The linked ids whose member was under the plan's cap (its counter row taken). */
  under_cap: string[];
}

/** What a note's create writes: the note, its links in link order, the cap of each plan, its events. */
export interface NoteCreate {
  row: NewEntry;
  links: readonly string[];
  caps: Readonly<Record<string, number>>;
  events: readonly PendingEvent[];
}

/**
 * A note, its links and its events as the items of a `with` (docs/data-access.md, "Writes in one
 * statement"): the active write scope (writeScopeSql), the linked members share-locked and live,
 * and for each its counter row (member_note_counts, migration 0029) updated only while under the
 * plan's cap — a row a concurrent note has just taken is re-checked on its committed version, so
 * two notes cannot both take a member's last slot. `verdict.ok` holds when all of that passed; the
 * note, its links (link order) and the events are written only then. The triggers of 0029 then
 * add the links to the counters. The note's sole member (migration 0039) goes in with its row, so
 * the link trigger finds it right and leaves the row alone (0040). `gate`, when given, is a further condition of the statement's
 * earlier CTEs (a friend's right to write the note): false, no member is locked and nothing written.
 */
export function createEntrySql({ row, links, caps, events }: NoteCreate, gate?: Sql): Sql {
  const gated = gate ? sql` and ${gate}` : sql.empty;
  return sql`${writeScopeSql(row.user_id)},
    plan as (select a.plan, (${JSON.stringify(caps)}::jsonb ->> a.plan)::int as cap from accounts a where a.id = ${row.user_id}),
    linked as (
      select m.id from members m
      where m.user_id = ${row.user_id} and m.id = any (${[...links]}::uuid[]) and m.deleted_at is null${gated}
      order by m.id
      for share
    ),
    under_cap as (
      update member_note_counts c set live = c.live
      from plan p
      where c.member_id in (select id from linked) and c.live < p.cap
      returning c.member_id
    ),
    verdict as (
      select exists (select 1 from write_scope) as scoped,
        exists (select 1 from write_scope)
          and (select count(*) from linked) = cardinality(${[...links]}::uuid[])
          and (select count(*) from under_cap) = cardinality(${[...links]}::uuid[])${gated} as ok
    ),
    inserted as (
      insert into entries
        (id, user_id, side_system_id, sub_system_id, title, content, member_id, member_ids, sole_member_id,
          created_at, updated_at, deleted_at)
      select ${row.id}, ${row.user_id}, w.side_system_id, w.sub_system_id, ${row.title}, ${row.content},
        ${row.member_id}, ${jsonIds(row.member_ids)}::jsonb, ${links.length === 1 ? links[0]! : null}::uuid,
        ${row.created_at}, ${row.updated_at}, null
      from write_scope w, verdict v where v.ok
      returning id
    ),
    link_rows as (
      insert into entry_members (entry_id, member_id, user_id, position)
      select ${row.id}::uuid, l.member_id, ${row.user_id}::uuid, l.n - 1
      from verdict v, unnest(${[...links]}::uuid[]) with ordinality as l(member_id, n)
      where v.ok
      order by l.n
    ),
    ${appendEvents(events, sql`(select ok from verdict)`)}`;
}

/** createEntrySql's answer (CreateVerdict) as the columns of a select from its `verdict v`. */
export const CREATE_VERDICT_COLUMNS = sql`v.ok, v.scoped, (select plan from plan) as plan,
      array(select id from linked) as live, array(select member_id from under_cap) as under_cap`;

/** A note for the statements' example variants. */
export const EXAMPLE_NOTE_CREATE: NoteCreate = {
  row: { ...EXAMPLE_ENTRY },
  links: [EXAMPLE_UUID],
  caps: { free: 1 },
  events: [EXAMPLE_EVENT],
};

/** A note created in one statement (createEntrySql), run on its own (autocommit). */
const createEntry = statement<NoteCreate, CreateVerdict & { notified: unknown }>({
  name: 'entries_create',
  area: AREA,
  variants: {
    'a note': EXAMPLE_NOTE_CREATE,
    'a note, the request keyed (its response stored under the key)': {
      ...EXAMPLE_NOTE_CREATE,
      events: keyedExample([EXAMPLE_EVENT]),
    },
  },
  build: (input) => sql`with ${createEntrySql(input)}
    select ${CREATE_VERDICT_COLUMNS},
      ${notifiedColumn}
    from verdict v`,
});

export const entriesRepo = {
  /** Creates a note with its links and events in one statement, or writes nothing (see createEntry). */
  async create(db: Knex, input: NoteCreate): Promise<CreateVerdict> {
    const [verdict] = await createEntry(db, input);
    return verdict!;
  },

  async find(db: Knex, userId: string, id: string): Promise<EntryRow | undefined> {
    return (await findEntry(db, { userId, id, lock: false }))[0];
  },

  async lock(trx: Knex.Transaction, userId: string, id: string): Promise<EntryRow | undefined> {
    return (await findEntry(trx, { userId, id, lock: true }))[0];
  },

  async update(db: Knex, userId: string, id: string, changes: EntryChanges): Promise<EntryRow> {
    const [row] = await updateEntry(db, { userId, id, changes });
    return row!;
  },

  /** Replaces the link rows (the union of the legacy link and the list) of one entry. */
  async setLinks(db: Knex, userId: string, entryId: string, memberIds: string[]): Promise<void> {
    await deleteLinks(db, { userId, entryId });
    await entriesRepo.insertLinks(db, userId, entryId, memberIds);
  },

  /** The link rows of an entry that has none yet (just created), in link order. */
  async insertLinks(db: Knex, userId: string, entryId: string, memberIds: string[]): Promise<void> {
    if (memberIds.length) await insertLinks(db, { userId, entryId, memberIds });
  },

  /**
   * The newest `limit` notes of the active read scope (or of one member's notes in it), each with
   * its linked members in link order, in one statement (see listWith).
   */
  async listWithMembers(db: Knex, userId: string, limit: number, memberId?: string): Promise<EntryListRow[]> {
    const rows = memberId ? await listOfMember(db, { userId, memberId, limit }) : await listAll(db, { userId, limit });
    const out: EntryListRow[] = [];
    for (const row of rows) {
      const last = out[out.length - 1];
      const entry =
        last?.id === row.id
          ? last
          : (out.push({
              id: row.id,
              title: row.title,
              content: row.content,
              created_at: row.created_at,
              updated_at: row.updated_at,
              members: [],
            }),
            out[out.length - 1]!);
      if (row.summary_id !== null)
        entry.members.push({
          id: row.summary_id,
          name: row.name!,
          display_name: row.display_name,
          archived_at: row.archived_at,
          avatar: row.avatar,
        });
    }
    return out;
  },

  /** Linked member ids per entry, in link order, for many entries in one query. */
  async linksOf(db: Knex, userId: string, entryIds: string[]): Promise<Map<string, string[]>> {
    const map = new Map<string, string[]>();
    if (entryIds.length === 0) return map;
    const rows = await linksOf(db, { userId, entryIds });
    for (const row of rows) map.set(row.entry_id, [...(map.get(row.entry_id) ?? []), row.member_id]);
    return map;
  },

  /**
   * The account's plan and the active entries linked to each member (excluding one entry), for the
   * plan's note cap, in one statement. `plan` is undefined when the account does not exist.
   */
  async capState(
    db: Knex,
    userId: string,
    memberIds: string[],
    excludeEntryId?: string,
  ): Promise<{ plan: string | undefined; counts: Map<string, number> }> {
    const rows = await capState(db, { userId, memberIds, excludeEntryId: excludeEntryId ?? null });
    const map = new Map<string, number>();
    for (const row of rows) if (row.member_id !== null) map.set(row.member_id, Number(row.n));
    return { plan: rows[0]?.plan, counts: map };
  },

  /**
   * Locks the account's member rows among `memberIds` (in id order) until the transaction ends;
   * the ids among them that are live members.
   */
  /** Imported notes, 1000 per statement, with their one link each. */
  async insertImported(db: Knex, userId: string, rows: ImportedEntryRow[]): Promise<void> {
    for (let i = 0; i < rows.length; i += 1000) {
      const batch = rows.slice(i, i + 1000);
      await insertImported(db, { userId, rows: batch });
      if (batch.some((r) => r.member_id !== null)) await insertImportedLinks(db, { userId, rows: batch });
    }
  },

  async setImportedTimes(db: Knex, userId: string, id: string, at: number): Promise<void> {
    await setTimes(db, { userId, id, at });
  },

  async lockMembers(trx: Knex.Transaction, userId: string, memberIds: string[]): Promise<Set<string>> {
    if (memberIds.length === 0) return new Set();
    const rows = await lockMembers(trx, { userId, memberIds });
    return new Set(rows.filter((r) => r.deleted_at === null).map((r) => r.id));
  },
};
