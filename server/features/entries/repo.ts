import type { Knex } from 'knex';
import { activeScopeRows, IN_ACTIVE_SCOPE } from '../../access/systemScope.ts';
import { prepared } from '../../db/prepared.ts';
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
function listStatement(name: string, notes: string) {
  return prepared<ListStatementRow>(
    name,
    `select e.id, e.title, e.content, e.created_at, e.updated_at, l.summary_id, l.name, l.display_name, l.archived_at, l.avatar
from active_system_context c
cross join lateral (${notes}) e
left join lateral (
  select em.position, m.*
  from entry_members em
  cross join lateral (select m.id as summary_id, m.name, m.display_name, m.archived_at, m.avatar
                      from members m where m.id = em.member_id and m.user_id = c.user_id limit 1) m
  where em.entry_id = e.id and em.user_id = c.user_id
  order by em.position) l on true
where c.user_id = ?
order by e.updated_at desc, e.id, l.position`,
  );
}
const NOTE_COLUMNS = 'x.id, x.user_id, x.title, x.content, x.created_at, x.updated_at';
/** The newest notes of the active read scope: a walk of the scope's ordered index up to the limit. Binds: limit (three times), user. */
const listAll = listStatement('entries_list', activeScopeRows('entries', NOTE_COLUMNS, 'x.updated_at desc, x.id'));
/**
 * The newest notes of one member in the active read scope, driven by the member's links (the
 * entry_members_member index; the plan's note cap per member bounds them), each note a primary-key
 * probe (a lateral subquery behind `offset 0`, so no plan hashes the account's notes instead),
 * then sorted. Binds: member, limit, user.
 */
const listOfMember = listStatement(
  'entries_list_member',
  `select x.* from entry_members f
   cross join lateral (select ${NOTE_COLUMNS}, x.side_system_id, x.sub_system_id from entries x
                       where x.id = f.entry_id and x.user_id = f.user_id and x.deleted_at is null offset 0) x
   where f.user_id = c.user_id and f.member_id = ? and ${IN_ACTIVE_SCOPE}
   order by x.updated_at desc, x.id limit ?`,
);

export const entriesRepo = {
  find(db: Knex, userId: string, id: string): Promise<EntryRow | undefined> {
    return db('entries').where({ id, user_id: userId }).first();
  },

  lock(trx: Knex.Transaction, userId: string, id: string): Promise<EntryRow | undefined> {
    return trx('entries').where({ id, user_id: userId }).forUpdate().first();
  },

  async insert(db: Knex, row: EntryRow): Promise<void> {
    await db('entries').insert({ ...row, member_ids: row.member_ids ? JSON.stringify(row.member_ids) : null });
  },

  async update(db: Knex, userId: string, id: string, changes: Partial<EntryRow>): Promise<EntryRow> {
    const out: Record<string, unknown> = { ...changes };
    if ('member_ids' in changes) out.member_ids = changes.member_ids ? JSON.stringify(changes.member_ids) : null;
    const [row] = await db('entries').where({ id, user_id: userId }).update(out).returning('*');
    return row as EntryRow;
  },

  /** Replaces the link rows (the union of the legacy link and the list) of one entry. */
  async setLinks(db: Knex, userId: string, entryId: string, memberIds: string[]): Promise<void> {
    await db('entry_members').where({ entry_id: entryId, user_id: userId }).delete();
    await entriesRepo.insertLinks(db, userId, entryId, memberIds);
  },

  /** The link rows of an entry that has none yet (just created), in link order. */
  async insertLinks(db: Knex, userId: string, entryId: string, memberIds: string[]): Promise<void> {
    if (memberIds.length) {
      await db('entry_members').insert(
        memberIds.map((memberId, position) => ({ entry_id: entryId, member_id: memberId, user_id: userId, position })),
      );
    }
  },

  /**
   * The newest `limit` notes of the active read scope (or of one member's notes in it), each with
   * its linked members in link order, in one statement (see listStatement).
   */
  async listWithMembers(db: Knex, userId: string, limit: number, memberId?: string): Promise<EntryListRow[]> {
    const rows = memberId
      ? await listOfMember(db, [memberId, limit, userId])
      : await listAll(db, [limit, limit, limit, userId]);
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
    const rows: Array<{ entry_id: string; member_id: string }> = await db('entry_members')
      .where({ user_id: userId })
      .whereIn('entry_id', entryIds)
      .orderBy([{ column: 'entry_id' }, { column: 'position' }])
      .select('entry_id', 'member_id');
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
    const counts = db('entry_members as em')
      .join('entries as e', 'e.id', 'em.entry_id')
      .where('em.user_id', userId)
      .whereIn('em.member_id', memberIds)
      .whereNull('e.deleted_at')
      .groupBy('em.member_id')
      .select('em.member_id', db.raw('count(*) as n'));
    if (excludeEntryId) counts.whereNot('e.id', excludeEntryId);
    const rows: Array<{ plan: string; member_id: string | null; n: number | null }> = await db('accounts as a')
      .joinRaw('left join (?) as c on true', [counts as unknown as Knex.Raw])
      .where('a.id', userId)
      .select('a.plan', 'c.member_id', 'c.n');
    const map = new Map<string, number>();
    for (const row of rows) if (row.member_id !== null) map.set(row.member_id, Number(row.n));
    return { plan: rows[0]?.plan, counts: map };
  },
};
