/**
 * The account card: the fields every place that shows another account next to its content shows
 * (friend lists, suggestions, the profile card, guestbook authors): display name, image, and the
 * badges (admin, plan, supporter, closed beta). One projection, so the places cannot drift apart.
 *
 * A leaf module of plain data (no SQL import: outside repos a feature's files run no SQL, and
 * another area reaches this one only through index.ts, which exports no repo). A repo makes its
 * select list or `returning` clause from it with the sql tag:
 *
 *   sql.join(accountCardColumns('a').map((c) => sql.id(c)), ', ')
 *
 * and gets rows with the AccountCardRow fields.
 */

/** The account card's columns as a row of the accounts table. */
export interface AccountCardRow {
  display_name: string;
  image_url: string | null;
  is_admin: boolean;
  plan: 'free' | 'pro' | 'pro_plus';
  donor_supporter_unlocked: boolean;
  closed_beta_participant_at: number | null;
}

const COLUMNS = [
  'display_name',
  'image_url',
  'is_admin',
  'plan',
  'donor_supporter_unlocked',
  'closed_beta_participant_at',
] as const satisfies ReadonlyArray<keyof AccountCardRow>;

/**
 * The account card's columns of the accounts row `alias` (a constant table alias), qualified:
 * `a.display_name, a.image_url, a.is_admin, a.plan, a.donor_supporter_unlocked,
 * a.closed_beta_participant_at`, for sql.id (or a knex select list).
 */
export function accountCardColumns(alias: string): string[] {
  return COLUMNS.map((column) => `${alias}.${column}`);
}
