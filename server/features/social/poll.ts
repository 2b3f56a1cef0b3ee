/**
 * Poll widgets (docs/social.md): one ballot per account per poll (primary key), replaced by each
 * vote in one statement, so concurrent votes of one account leave exactly one ballot. Counts are
 * computed from the ballots. A vote holds a share lock on the widget, so a concurrent options
 * change (widget PATCH, which remaps ballots under an update lock) applies before or after it.
 */
import type { Knex } from 'knex';
import type { components } from '../../../generated/api.d.ts';
import { inTransaction, ownerOf, type ServiceContext } from '../../core/context.ts';
import { badRequest } from '../../core/errors.ts';
import type { WidgetRow } from './repo.ts';
import { actorOf, requireWidget } from './widgets.ts';

type Schemas = components['schemas'];
type PollConfig = Schemas['PollWidgetConfig'];

const POLL_NOT_FOUND = 'Poll not found';

async function stateOf(db: Knex, widget: WidgetRow, voterId: string): Promise<Schemas['PollState']> {
  const config = widget.config as PollConfig;
  const [counts, voters, mine] = await Promise.all([
    db.raw(
      `select i, count(*)::int as n from poll_ballots, unnest(option_indices) as i where widget_id = ? group by i`,
      [widget.id],
    ) as Promise<{ rows: Array<{ i: number; n: number }> }>,
    db('poll_ballots').where({ widget_id: widget.id }).count({ n: '*' }).first(),
    db('poll_ballots').where({ widget_id: widget.id, voter_user_id: voterId }).first('option_indices'),
  ]);
  const optionCounts = config.options.map(() => 0);
  for (const { i, n } of counts.rows) if (i < optionCounts.length) optionCounts[i] = Number(n);
  return {
    question: config.question,
    options: config.options,
    allowMultipleSelections: config.allowMultipleSelections ?? false,
    optionCounts,
    distinctVoterCount: Number(voters?.n ?? 0),
    myOptionIndices: (mine?.option_indices as number[] | undefined) ?? [],
  };
}

export async function getState(
  ctx: ServiceContext,
  widgetId: string,
  notFoundMessage = POLL_NOT_FOUND,
): Promise<Schemas['PollState']> {
  const widget = await requireWidget(ctx, widgetId, 'poll', notFoundMessage);
  return stateOf(ctx.db, widget, actorOf(ctx));
}

/** Replaces the acting account's ballot; [] on a multi-select poll removes it. */
export async function vote(
  ctx: ServiceContext,
  widgetId: string,
  input: Schemas['VotePollRequest'],
  notFoundMessage = POLL_NOT_FOUND,
): Promise<Schemas['PollState']> {
  return inTransaction(ctx, async (tx) => {
    const widget = await requireWidget(tx, widgetId, 'poll', notFoundMessage, 'share');
    const config = widget.config as PollConfig;
    const indices = [...input.optionIndices];
    if (new Set(indices).size !== indices.length) throw badRequest('optionIndices must not repeat an index');
    if (indices.some((i) => i >= config.options.length))
      throw badRequest('optionIndices must be below the number of options');
    if (!(config.allowMultipleSelections ?? false) && indices.length !== 1)
      throw badRequest('optionIndices must hold exactly one index on a single-choice poll');
    const voter = actorOf(tx);
    if (indices.length === 0) {
      await tx.db('poll_ballots').where({ widget_id: widgetId, voter_user_id: voter }).delete();
    } else {
      indices.sort((a, b) => a - b);
      await tx
        .db('poll_ballots')
        .insert({
          widget_id: widgetId,
          voter_user_id: voter,
          user_id: ownerOf(tx),
          option_indices: indices,
          updated_at: tx.now,
        })
        .onConflict(['widget_id', 'voter_user_id'])
        .merge(['option_indices', 'updated_at']);
    }
    return stateOf(tx.db, widget, voter);
  });
}
