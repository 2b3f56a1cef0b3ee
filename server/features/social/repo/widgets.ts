/** The SQL of the social widgets (social_widgets, migration 0014). */
import type { Knex } from 'knex';
import { sql } from '../../../db/sql.ts';
import { EXAMPLE_UUID, statement } from '../../../db/statements.ts';
import { AREA, patchColumn } from './shared.ts';

export interface WidgetRow {
  id: string;
  user_id: string;
  type: string;
  title: string | null;
  config: Record<string, unknown>;
  visibility: string;
  size: string;
  sort_order: number;
  pinned: boolean;
  collapsed: boolean;
  created_at: number;
  updated_at: number;
}

export const WIDGET_COLUMNS = sql`id, user_id, type, title, config, visibility, size, sort_order, pinned, collapsed, created_at, updated_at`;

// ---- Widgets ----------------------------------------------------------------------------------

const insertWidget = statement<{ row: WidgetRow }, { id: string }>({
  name: 'social_widget_insert',
  area: AREA,
  variants: {
    'a widget (none when its id exists)': {
      row: {
        id: EXAMPLE_UUID,
        user_id: EXAMPLE_UUID,
        type: 'x',
        title: null,
        config: {},
        visibility: 'private',
        size: 'x',
        sort_order: 0,
        pinned: false,
        collapsed: false,
        created_at: 0,
        updated_at: 0,
      },
    },
  },
  build: ({ row: r }) => sql`insert into social_widgets (${WIDGET_COLUMNS})
    values (${r.id}, ${r.user_id}, ${r.type}, ${r.title}::text, ${JSON.stringify(r.config)}::jsonb, ${r.visibility},
      ${r.size}, ${r.sort_order}, ${r.pinned}, ${r.collapsed}, ${r.created_at}, ${r.updated_at})
    on conflict (id) do nothing
    returning id`,
});

type WidgetLock = 'share' | 'update';
const LOCKS = ['for share', 'for update'] as const;

/** The owner's widget, of one kind when `kind` is given, locked when `lock` is. */
const findWidget = statement<
  { userId: string; widgetId: string; kind?: string | undefined; lock?: WidgetLock | undefined },
  WidgetRow
>({
  name: 'social_widget',
  area: AREA,
  variants: {
    'of a kind (guestbook, poll)': { userId: EXAMPLE_UUID, widgetId: EXAMPLE_UUID, kind: 'poll' },
    'of a kind, share-locked (a vote)': { userId: EXAMPLE_UUID, widgetId: EXAMPLE_UUID, kind: 'poll', lock: 'share' },
    'any kind, locked for update (PATCH)': { userId: EXAMPLE_UUID, widgetId: EXAMPLE_UUID, lock: 'update' },
  },
  build: ({ userId, widgetId, kind, lock }) => sql`select ${WIDGET_COLUMNS} from social_widgets
    where id = ${widgetId} and user_id = ${userId}${kind === undefined ? sql.empty : sql` and type = ${kind}`}
    ${lock === undefined ? sql.empty : sql.constant(`for ${lock}`, LOCKS)}`,
});

/** The columns a widget PATCH may set; undefined leaves a column as it is. `config` is its JSON text. */
export type WidgetChanges = Partial<
  Pick<WidgetRow, 'type' | 'title' | 'visibility' | 'size' | 'pinned' | 'collapsed' | 'sort_order'> & {
    config: string;
  }
>;

const updateWidget = statement<{ userId: string; widgetId: string; changes: WidgetChanges; now: number }, never>({
  name: 'social_widget_update',
  area: AREA,
  variants: { 'any set of columns': { userId: EXAMPLE_UUID, widgetId: EXAMPLE_UUID, changes: {}, now: 0 } },
  build: ({ userId, widgetId, changes: c, now }) => sql`update social_widgets set
      ${patchColumn('type', 'text', c.type)},
      ${patchColumn('config', 'jsonb', c.config)},
      ${patchColumn('title', 'text', c.title)},
      ${patchColumn('visibility', 'text', c.visibility)},
      ${patchColumn('size', 'text', c.size)},
      ${patchColumn('pinned', 'boolean', c.pinned)},
      ${patchColumn('collapsed', 'boolean', c.collapsed)},
      ${patchColumn('sort_order', 'int', c.sort_order)},
      updated_at = ${now}
    where id = ${widgetId} and user_id = ${userId}`,
});

const deleteWidget = statement<{ userId: string; widgetId: string }, { id: string }>({
  name: 'social_widget_delete',
  area: AREA,
  variants: { 'one widget': { userId: EXAMPLE_UUID, widgetId: EXAMPLE_UUID } },
  build: ({ userId, widgetId }) =>
    sql`delete from social_widgets where id = ${widgetId} and user_id = ${userId} returning id`,
});

export const widgetsRepo = {
  /** False when a widget with this id exists already. */
  async insert(db: Knex, row: WidgetRow): Promise<boolean> {
    return (await insertWidget(db, { row })).length > 0;
  },
  async find(
    db: Knex,
    userId: string,
    widgetId: string,
    options: { kind?: string | undefined; lock?: WidgetLock | undefined } = {},
  ): Promise<WidgetRow | undefined> {
    const [row] = await findWidget(db, { userId, widgetId, ...options });
    return row;
  },
  async update(db: Knex, userId: string, widgetId: string, changes: WidgetChanges, now: number): Promise<void> {
    await updateWidget(db, { userId, widgetId, changes, now });
  },
  /** Whether the widget was there (and is now gone, with its ballots and messages: on delete cascade). */
  async delete(db: Knex, userId: string, widgetId: string): Promise<boolean> {
    return (await deleteWidget(db, { userId, widgetId })).length > 0;
  },
};
